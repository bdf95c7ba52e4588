"""Guards on the gate's public promises that the mutation audit of issue 20 found unguarded.

Each test is named for the regression it kills. They use only `Gate.decide(candidate,
incumbent, decision_index=k)`, `paired_test` and the `GateDecision` fields, so they hold
whatever way the gate spends its significance.
"""

from __future__ import annotations

import random
from fractions import Fraction

import pytest

import skillopt_dsl as sd
from skillopt_dsl.evaluate import EvaluationReport, Rollout
from skillopt_dsl.gate import paired_test
from skillopt_dsl.types import Prediction


def report(scores: list[float], extra: dict[str, list[float]] | None = None) -> EvaluationReport:
    """A fake evaluation report: one rollout per score, `extra` as per-example guard scores."""
    records = tuple(
        Rollout(
            f"e{i}",
            "x",
            Prediction({"a": "x"}),
            float(score),
            extra_scores={name: values[i] for name, values in (extra or {}).items()},
        )
        for i, score in enumerate(scores)
    )
    return EvaluationReport(records, "h", "fake")


def test_a_gain_equal_to_min_delta_is_rejected() -> None:
    """Kills: `delta <= min_delta` turned into `delta < min_delta` (a gain of exactly
    `min_delta` accepted). The gain here is exactly 0.5 and overwhelmingly significant, so
    only `min_delta` can refuse it; a gain one example larger passes."""
    incumbent = report([0.0] * 40)
    exactly = report([1.0] * 20 + [0.0] * 20)
    above = report([1.0] * 21 + [0.0] * 19)
    for gate in (sd.Gate(min_delta=0.5), sd.Gate.mean_only(min_delta=0.5)):
        equal = gate.decide(exactly, incumbent, decision_index=0)
        assert equal.delta == 0.5
        assert not equal.accepted, equal.reason
        assert "min_delta" in equal.reason
        assert gate.decide(above, incumbent, decision_index=0).accepted


def test_the_sign_test_p_value_counts_the_losses() -> None:
    """Kills: the paired test dropping the losses (only the wins tested): 5 wins and 2 losses
    (ties dropped) give P(Binomial(7, 1/2) >= 5) = 29/128 exactly; without the losses, 2**-5."""
    result = paired_test([1.0] * 5 + [-1.0] * 2 + [0.0] * 3)
    assert result.name == "sign"
    assert result.statistic == 5
    assert result.p_value == float(Fraction(29, 128))


def test_the_signed_rank_p_value_counts_the_losses() -> None:
    """Kills: the signed-rank test dropping the losses. Differences 0.5, -0.25, 0.75, 0.1 rank
    3, 2, 4, 1; W+ = 8, and of the 16 equally likely sign patterns 3 reach 8: p = 3/16. Without
    the loss the three wins hold every rank, p = 1/8."""
    result = paired_test([0.5, -0.25, 0.75, 0.1])
    assert result.name == "signed-rank"
    assert result.statistic == 8
    assert result.p_value == pytest.approx(3 / 16, abs=1e-12)


def test_a_metric_guard_keeps_its_tolerance() -> None:
    """Kills: `Guard.metric(..., tolerance=t)` dropping `t` (a guard that then refuses any
    regression): a brevity regression of 0.25 is within a tolerance of 0.5, so a clear gain
    passes; the same guard at tolerance 0.2 refuses it."""
    brevity = [1.0] * 8
    shorter = [1.0] * 6 + [0.0] * 2  # the candidate's guard mean falls by 0.25
    candidate = report([1.0] * 8, extra={"brevity": shorter})
    incumbent = report([0.0] * 8, extra={"brevity": brevity})
    loose = sd.Guard.metric("brevity", lambda example, prediction: 1.0, tolerance=0.5)
    assert loose.tolerance == 0.5
    accepted = sd.Gate(guards=[loose]).decide(candidate, incumbent, decision_index=0)
    assert accepted.accepted, accepted.reason
    assert accepted.guards["brevity"] == {"candidate": 0.75, "incumbent": 1.0}
    tight = sd.Guard.metric("brevity", lambda example, prediction: 1.0, tolerance=0.2)
    refused = sd.Gate(guards=[tight]).decide(candidate, incumbent, decision_index=0)
    assert not refused.accepted and "guard 'brevity' regressed" in refused.reason


# -- noise: the paired test on a larger validation set --------------------------------------


def noisy_report(base: list[int], rng: random.Random) -> EvaluationReport:
    """One skill text's 0/1 outcomes: `base` with each example flipped with probability 0.2
    (every text has the same true score: zero effect)."""
    return report([float(b ^ (rng.random() < 0.2)) for b in base])


def false_accept_rate(gate: sd.Gate, *, runs: int, decisions: int, n_val: int) -> float:
    """Share of seeded runs in which any useless candidate passed the gate."""
    fooled = 0
    for seed in range(runs):
        rng = random.Random(seed)
        base = [int(rng.random() < 0.5) for _ in range(n_val)]
        incumbent, accepted = noisy_report(base, rng), False
        for k in range(decisions):
            candidate = noisy_report(base, rng)
            if gate.decide(candidate, incumbent, decision_index=k).accepted:
                incumbent, accepted = candidate, True
        fooled += accepted
    return fooled / runs


@pytest.mark.timeout(120)
def test_noise_on_sixty_examples_stays_under_alpha() -> None:
    """Kills: a paired test that noise fools once the validation set is larger (dropping the
    losses from the sign test: with 60 examples it is fooled in most runs, while the
    18-example noise test of test_gate_noise.py still passes it). Issue 9's protocol, 4
    decisions per run, on 60 examples: at most alpha of the runs accept a useless edit."""
    assert false_accept_rate(sd.Gate(), runs=200, decisions=4, n_val=60) <= 0.05
