"""The default gate's run-level false-accept rate on pure noise stays at or below alpha.

The protocol of issue 9 at the gate's own level (bench/bench_gate_noise.py runs it through the
real driver): every skill text gets its own outcomes, each example's 0/1 outcome flipped from a
shared base with probability 0.2 (zero true effect), and a run makes many gate decisions against
its incumbent, which an accepted candidate replaces.
"""

from __future__ import annotations

import random

import skillopt_dsl as sd
from skillopt_dsl.evaluate import EvaluationReport, Rollout
from skillopt_dsl.types import Prediction


def noisy_report(base: list[int], rng: random.Random, name: str) -> EvaluationReport:
    """One skill text's outcomes: the base with each example flipped with probability 0.2."""
    records = tuple(
        Rollout(f"e{i}", "x", Prediction({}), float(b ^ (rng.random() < 0.2)))
        for i, b in enumerate(base)
    )
    return EvaluationReport(records, name, "fake")


def false_accept_rate(gate: sd.Gate, *, runs: int, decisions: int, n_val: int) -> float:
    """Share of seeded runs in which any useless candidate was accepted."""
    fooled = 0
    for seed in range(runs):
        rng = random.Random(seed)
        base = [int(rng.random() < 0.5) for _ in range(n_val)]
        incumbent = noisy_report(base, rng, "seed")
        accepted = False
        for k in range(decisions):
            candidate = noisy_report(base, rng, f"c{k}")
            if gate.decide(candidate, incumbent, decision_index=k).accepted:
                incumbent, accepted = candidate, True
        fooled += accepted
    return fooled / runs


def test_noise_run_with_many_decisions_stays_under_alpha() -> None:
    """Kills: alpha not spent across decisions (each decision tested at the full alpha).

    30 decisions per run on 18 examples: spent across the run, the default gate is fooled in at
    most 5 % of runs (0 of 300 here); at a fixed alpha=0.05 per decision (the mutation, and
    the old `Gate(test="paired")`), in about one run in six.
    """
    assert false_accept_rate(sd.Gate(), runs=300, decisions=30, n_val=18) <= 0.05
    unspent = sd.Gate(spending="per-decision")
    assert false_accept_rate(unspent, runs=150, decisions=30, n_val=18) > 0.1


def test_issue_protocol_four_decisions() -> None:
    """Kills: a default gate that noise passes (SkillOpt's mean-only rule as the default).

    Issue 9's protocol: 18 examples, 4 decisions; mean-only is fooled most of the time.
    """
    assert false_accept_rate(sd.Gate(), runs=400, decisions=4, n_val=18) <= 0.05
    assert false_accept_rate(sd.Gate.mean_only(), runs=100, decisions=4, n_val=18) > 0.5
