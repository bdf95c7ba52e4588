"""False accepts, power and search calls of the gate, on the evidence issue's outcome model.

The outcome model (issue 16): a run has a fixed half-right answer pattern on its validation
examples; every skill text flips each answer with probability 0.2 (drawn from a hash of run
seed, text and example, so any change of text redraws the noise); a *useful* line (effect `e`)
turns each wrong base answer right with probability 2e, fixed per run, so the true accuracy
rises by `e` before noise (0.6e after it). A fake proposer offers a reworded useful line at every
step until the incumbent holds one (then useless notes); with e = 0 every edit is useless.
GradientText makes 4 gate decisions a run.

- **driver** rows: real `compile` runs (GradientText, the driver's looks and significance
  budget, evaluation, cache, run state) with a FAKE target (`ScriptedLM`) and a FAKE proposer;
  false accepts over `--null-runs` seeded runs, gains kept over `--runs` seeded runs, and the
  mean search calls of a run (seed, training batches, every validation rollout).
- **gate** rows, same outcomes: the previous default (alpha·6/(π²k²) per decision, every
  candidate on the whole set), and the one-test limit: the best a single decision can do (one
  useful candidate, one exact sign test at alpha = 0.05), with no plan to share.

Run: `python bench/bench_gate_noise.py` (about 6 minutes on 2 idle cores);
`--null-runs 60 --runs 20` are the issue's counts.
"""

from __future__ import annotations

import argparse
import hashlib
import logging
import os
import re
import sys
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import Parity, parity_examples, print_table, timer, write_results

import skillopt_dsl as sd
from skillopt_dsl.evaluate import EvaluationReport, Rollout
from skillopt_dsl.optimizers import EditGroup, GradientText, ProposalRequest, Proposer
from skillopt_dsl.skill import Add
from skillopt_dsl.testing import ScriptedLM
from skillopt_dsl.types import Prediction


def quiet_library_warnings() -> None:
    """Thousands of runs: their per-run warnings (small validation sets, constant answers) are
    the point of other figures, not of this table. Called by a bench's `main` (forked workers
    inherit it), never at import: a test that imports this module keeps its logging."""
    logging.getLogger("skillopt_dsl").setLevel(logging.ERROR)


FLIP = 0.2
USEFUL = "Check the last digit: 0, 2, 4, 6 or 8 means even."
STEPS = 4
TRAIN = parity_examples(STEPS * 2, start=10_000)
EFFECTS = (0.0, 0.1, 0.2, 0.3)
DRIVER_GATES = {
    "mean-only (SkillOpt)": sd.Gate.mean_only(),
    "planned alpha, no looks": sd.Gate(looks=()),
    "planned alpha + futility looks (early_share=0)": sd.Gate(early_share=0.0),
    "Gate() default: planned alpha + looks + early acceptance": sd.Gate(),
}


_WORDING = re.compile(r"\(wording \d+\)|Note \d+:")
"""The markers by which `UsefulLineProposer` rewords a line: not part of what it states."""


def uniform(*parts: object) -> float:
    """A deterministic uniform draw in [0, 1) from `parts`."""
    digest = hashlib.blake2b(repr(parts).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


@dataclass(frozen=True)
class Outcomes:
    """One run's outcome model on validation (see the module docstring). `noise_key`: the
    flips are drawn from the exact text ("text": any rewording redraws them) or from what it
    states ("content": the fake proposer's wording markers ignored, so every rewording of the
    useful line, and every note, moves the same answers; a model whose answers a rewording
    does not move, as Qwen2.5-0.5B's, bench/README §14)."""

    run_seed: int
    effect: float
    flip: float = FLIP
    noise_key: str = "text"

    def base_right(self, number: int) -> bool:
        return uniform(self.run_seed, "base", number) < 0.5

    def right(self, text: str, number: int) -> bool:
        latent = self.base_right(number) or (
            USEFUL in text and uniform(self.run_seed, "convert", number) < 2 * self.effect
        )
        key = text if self.noise_key == "text" else stated(text)
        return latent ^ (uniform(self.run_seed, key, number) < self.flip)


def stated(text: str) -> str:
    """What a skill text states, without the fake proposer's wording markers ("(wording N)",
    "Note N:") and with its spacing normalised."""
    return " ".join(_WORDING.sub("", text).split())


class Answers(Protocol):
    """An outcome model: whether the answer to `number` under skill `text` is right."""

    def right(self, text: str, number: int) -> bool: ...


class NoisyTarget:
    """FAKE target: answers the parity task right exactly when the outcome model says so."""

    def __init__(self, outcomes: Answers) -> None:
        self.outcomes = outcomes

    def __call__(self, messages: list[dict[str, str]]) -> str:
        system = messages[0]["content"] if messages[0]["role"] == "system" else ""
        number = int(messages[-1]["content"].split()[-1])
        even = number % 2 == 0
        return "even" if even == self.outcomes.right(system, number) else "odd"


@dataclass(kw_only=True)
class UsefulLineProposer(Proposer):
    """FAKE proposer: a reworded useful line while the incumbent has none, else a useless note.
    `names_read`: each names the failures it read (up to 4, as `ReflectiveProposer`'s group);
    by default it names none."""

    names_read: bool = False
    name: str = "fake-lines"

    def propose(self, request: ProposalRequest) -> list[EditGroup]:
        if USEFUL in request.skill.text:
            text = f"Note {request.rng.randrange(10**9)}: stay calm."
        else:
            text = f"{USEFUL} (wording {request.step})"
        named = tuple(e.id for e, _ in request.failures()[:4]) if self.names_read else ()
        return [EditGroup((Add(text=text),), self.name, failure_driven=True, addresses=named)]


def driver_run(gate_name: str, n_val: int, effect: float, run_seed: int) -> tuple[bool, bool, int]:
    """One seeded `compile`: (any accept, useful line kept, search calls)."""
    result = sd.compile(
        Parity(),
        TRAIN,
        parity_examples(n_val),
        optimizer=GradientText(
            epochs=1,
            batch_size=len(TRAIN) // STEPS,
            slow_update=False,
            proposers=[UsefulLineProposer()],
            screen=False,  # every proposal to the gate: this bench measures the gate alone
            compose=1,
        ),
        lm=ScriptedLM(NoisyTarget(Outcomes(run_seed, effect))),
        optimizer_lm=ScriptedLM(lambda messages: '{"edits": []}'),
        gate=DRIVER_GATES[gate_name],
        seed=run_seed,
        threads=1,
    )
    assert len(result.gate_log) == STEPS, f"expected {STEPS} decisions, got {len(result.gate_log)}"
    return result.improved, USEFUL in result.best_skill.text, result.usage.calls


def report_for(outcomes: Outcomes, text: str, n_val: int) -> EvaluationReport:
    """The report `evaluate` would return for `text` on the first `n_val` examples."""
    records = tuple(
        Rollout(e.id, "", Prediction({}), float(outcomes.right(text, int(e.number))))
        for e in parity_examples(n_val)
    )
    return EvaluationReport(records, text, "fake/noisy")


def previous_default_run(n_val: int, effect: float, run_seed: int) -> tuple[bool, bool, int]:
    """The previous default gate (alpha·6/(π²k²), whole set), same outcomes and proposer."""
    outcomes, gate = Outcomes(run_seed, effect), sd.Gate(looks=())
    text = Parity().seed_skill.text
    incumbent, accepted = report_for(outcomes, text, n_val), False
    for k in range(STEPS):
        line = f"{USEFUL} (wording {k})" if USEFUL not in text else f"Note {run_seed}-{k}."
        candidate_text = f"{text}\n{line}"
        candidate = report_for(outcomes, candidate_text, n_val)
        if gate.decide(candidate, incumbent, decision_index=k).accepted:
            text, incumbent, accepted = candidate_text, candidate, True
    return accepted, USEFUL in text, n_val * (STEPS + 1) + len(TRAIN)


def one_test_run(n_val: int, effect: float, run_seed: int) -> tuple[bool, bool, int]:
    """The one-test limit: one useful candidate, one exact sign test at alpha = 0.05."""
    outcomes = Outcomes(run_seed, effect)
    seed_text = Parity().seed_skill.text
    candidate_text = f"{seed_text}\n{USEFUL} (wording 0)"
    decision = sd.Gate(looks=()).decide(
        report_for(outcomes, candidate_text, n_val),
        report_for(outcomes, seed_text, n_val),
        alpha=0.05,
    )
    return decision.accepted, decision.accepted, 2 * n_val


ROWS = {
    **{name: ("driver", name) for name in DRIVER_GATES},
    "previous default: alpha·6/(π²k²), no looks": ("gate", "previous"),
    "one-test limit (1 decision, alpha 0.05)": ("gate", "one-test"),
}

Job = tuple[str, int, float, range]


def cell(job: Job) -> tuple[int, int]:
    """(runs that hit: any accept for e = 0, useful line kept otherwise; total search calls)."""
    row, n_val, effect, seeds = job
    level, name = ROWS[row]
    hits = calls = 0
    for run_seed in seeds:
        if level == "driver":
            accepted, kept, spent = driver_run(name, n_val, effect, run_seed)
        elif name == "previous":
            accepted, kept, spent = previous_default_run(n_val, effect, run_seed)
        else:
            accepted, kept, spent = one_test_run(n_val, effect, run_seed)
        hits += kept if effect > 0 else accepted
        calls += spent
    return hits, calls


def jobs(args: argparse.Namespace) -> list[Job]:
    """Every (row, size, effect) cell, cut into chunks of 10 seeds for even worker load."""
    out: list[Job] = []
    for row in ROWS:
        for n_val in args.sizes:
            for effect in EFFECTS:
                runs = args.null_runs if effect == 0 else args.runs
                out += [
                    (row, n_val, effect, range(start, min(start + 10, runs)))
                    for start in range(0, runs, 10)
                ]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--null-runs", type=int, default=60, help="seeded runs per null cell")
    parser.add_argument("--runs", type=int, default=20, help="seeded runs per gain cell")
    parser.add_argument("--sizes", type=int, nargs="+", default=[18, 30, 100])
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    quiet_library_warnings()
    work = jobs(args)
    with timer() as elapsed, ProcessPoolExecutor(max_workers=args.workers) as pool:
        done = list(zip(work, pool.map(cell, work), strict=True))
    totals: dict[tuple[str, int, float], list[int]] = {}
    for (row, n_val, effect, seeds), (hits, calls) in done:
        total = totals.setdefault((row, n_val, effect), [0, 0, 0])
        total[0] += hits
        total[1] += len(seeds)
        total[2] += calls
    headers = [
        "gate",
        "val n",
        "false accepts",
        *(f"+{e} kept" for e in EFFECTS[1:]),
        "calls/null run",
    ]
    rows = [
        [
            row,
            n_val,
            *(f"{totals[row, n_val, e][0]}/{totals[row, n_val, e][1]}" for e in EFFECTS),
            round(totals[row, n_val, 0.0][2] / totals[row, n_val, 0.0][1]),
        ]
        for row in ROWS
        for n_val in args.sizes
    ]
    print_table(
        f"{STEPS} decisions per run, flips p={FLIP}, useful line offered until kept", headers, rows
    )
    print(f"\n{elapsed():.0f} s")
    write_results(
        "gate_noise",
        {
            "decisions_per_run": STEPS,
            "flip_probability": FLIP,
            "null_runs": args.null_runs,
            "runs": args.runs,
            "seconds": round(elapsed(), 1),
            "cells": [
                {
                    "row": row,
                    "val_n": n_val,
                    "effect": effect,
                    "hits": hits,
                    "runs": runs,
                    "mean_search_calls": calls / runs,
                }
                for (row, n_val, effect), (hits, runs, calls) in totals.items()
            ],
        },
    )


if __name__ == "__main__":
    main()
