"""False accepts on pure noise, and real gains kept, for each gate (issue 9's protocol).

The protocol: each skill text gets its own outcomes: an example's latent outcome (right with
probability `p_text`) is flipped with probability 0.2, drawn from a hash of (run seed, skill
text, example), so any change of text re-draws the noise; `p_text` is 0.5 for every text (zero
true effect) unless the text holds the useful line, in which case the true accuracy (after the
flips) rises by `gain`. A proposer adds one line per step (a useless note, or the useful line at
decision `useful_at`); 4 gate decisions per run. A run's false accept: any decision accepted in a
zero-effect run. A real gain kept: the final best skill holds the useful line.

Two levels, same outcomes and same gates:

- **driver**: real `compile` runs (GradientText, evaluation, cache, gate, run state) with a FAKE
  target (`ScriptedLM`) and a FAKE proposer, at 18 validation examples (each run costs ~1 ms per
  rollout, so this level is kept to the issue's own size);
- **gate**: the same decisions made directly on `Gate.decide` exactly as the driver makes them
  (`decision_index` = decisions so far, the incumbent replaced on accept), for every size.

Run: `python bench/bench_gate_noise.py` (about 2 min of CPU: 1 min on 2 idle cores).
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import logging
import math
import os
import sys
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import Parity, parity_examples, print_table, timer, write_results

import skillopt_dsl as sd
from skillopt_dsl.evaluate import EvaluationReport, Rollout
from skillopt_dsl.optimizers import EditGroup, GradientText, ProposalRequest, Proposer
from skillopt_dsl.skill import Add
from skillopt_dsl.testing import ScriptedLM
from skillopt_dsl.types import Prediction

# Tens of thousands of runs: their per-run warnings (e.g. "does not beat the constant answer",
# true of noise by design) would drown the table.
logging.getLogger("skillopt_dsl").setLevel(logging.ERROR)

FLIP = 0.2
USEFUL = "Check the last digit: 0, 2, 4, 6 or 8 means even."
STEPS = 4
TRAIN = parity_examples(STEPS * 2, start=10_000)
GATES = {
    "mean-only (SkillOpt)": sd.Gate.mean_only(),
    "paired, alpha=0.05 per decision (old)": sd.Gate(spending="per-decision"),
    "paired, alpha=0.05 spent over the run (default)": sd.Gate(),
}


@dataclass(frozen=True)
class Scenario:
    """What the run's proposer can find: `gain` in true accuracy, at decision `useful_at`."""

    name: str
    gain: float = 0.0
    useful_at: int | None = None


SCENARIOS = (
    Scenario("noise"),
    Scenario("+0.2 at decision 1", 0.2, 0),
    Scenario("+0.3 at decision 1", 0.3, 0),
    Scenario("+0.3 at decision 4", 0.3, 3),
)


def uniform(*parts: object) -> float:
    """A deterministic uniform draw in [0, 1) from `parts`."""
    digest = hashlib.blake2b(repr(parts).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


def is_right(run_seed: int, text: str, number: int, gain: float) -> bool:
    """The outcome of `text` on example `number`: latent (0.5, or more with the useful line),
    flipped with probability FLIP per (text, example)."""
    latent = 0.5 + (gain / (1 - 2 * FLIP) if USEFUL in text else 0.0)
    right = uniform(run_seed, "latent", number) < latent
    return right ^ (uniform(run_seed, text, number) < FLIP)


class NoisyTarget:
    """FAKE target: answers the parity task right exactly when `is_right` says so."""

    def __init__(self, run_seed: int, gain: float) -> None:
        self.run_seed, self.gain = run_seed, gain

    def __call__(self, messages: list[dict[str, str]]) -> str:
        system = messages[0]["content"] if messages[0]["role"] == "system" else ""
        number = int(messages[-1]["content"].split()[-1])
        even = number % 2 == 0
        return "even" if even == is_right(self.run_seed, system, number, self.gain) else "odd"


@dataclass(kw_only=True)
class LineProposer(Proposer):
    """FAKE proposer: one new useless line per step, or the useful line at step `useful_at`."""

    useful_at: int | None = None
    name: str = "fake-lines"

    def propose(self, request: ProposalRequest) -> list[EditGroup]:
        if request.step == self.useful_at:
            text = USEFUL
        else:
            text = f"Note {request.rng.randrange(10**9)}: stay calm."
        return [EditGroup((Add(text=text),), self.name, failure_driven=True)]


Outcome = tuple[bool, bool]
"""(any decision accepted, the final best skill holds the useful line)."""


def driver_run(gate: sd.Gate, n_val: int, scenario: Scenario, run_seed: int) -> Outcome:
    """One seeded `compile` with the fake target and proposer."""
    result = sd.compile(
        Parity(),
        TRAIN,
        parity_examples(n_val),
        optimizer=GradientText(
            epochs=1,
            batch_size=len(TRAIN) // STEPS,
            slow_update=False,
            proposers=[LineProposer(useful_at=scenario.useful_at)],
            aggregate_with_model_above=None,
        ),
        lm=ScriptedLM(NoisyTarget(run_seed, scenario.gain)),
        optimizer_lm=ScriptedLM(lambda messages: '{"edits": []}'),
        gate=gate,
        seed=run_seed,
        threads=1,
    )
    assert len(result.gate_log) == STEPS, f"expected {STEPS} decisions, got {len(result.gate_log)}"
    return any(d.accepted for d in result.gate_log), USEFUL in result.best_skill.text


def gate_run(gate: sd.Gate, n_val: int, scenario: Scenario, run_seed: int) -> Outcome:
    """The same run's decisions made on `Gate.decide` directly, as the driver makes them."""
    texts = [Parity().seed_skill.text]
    incumbent = scored(texts[0], n_val, scenario, run_seed)
    accepted = False
    for k in range(STEPS):
        line = USEFUL if k == scenario.useful_at else f"Note {run_seed}-{k}: stay calm."
        text = f"{texts[-1]}\n{line}"
        candidate = scored(text, n_val, scenario, run_seed)
        if gate.decide(candidate, incumbent, decision_index=k).accepted:
            texts.append(text)
            incumbent, accepted = candidate, True
    return accepted, USEFUL in texts[-1]


def scored(text: str, n_val: int, scenario: Scenario, run_seed: int) -> EvaluationReport:
    """The report `evaluate` would return for `text` under the noisy target."""
    records = tuple(
        Rollout(example_id, "", _PREDICTION, float(is_right(run_seed, text, number, scenario.gain)))
        for example_id, number in _val_ids(n_val)
    )
    return EvaluationReport(records, text, "fake/noisy")


_PREDICTION = Prediction({})


@functools.cache
def _val_ids(n_val: int) -> tuple[tuple[str, int], ...]:
    return tuple((e.id, int(e.number)) for e in parity_examples(n_val))


LEVELS = {"driver": driver_run, "gate": gate_run}


Job = tuple[str, str, int, Scenario, range]


def cell(job: Job) -> int:
    """How many of the job's seeded runs accepted (noise) or kept the useful line (gains)."""
    level, gate_name, n_val, scenario, seeds = job
    hits = 0
    for run_seed in seeds:
        accepted, useful = LEVELS[level](GATES[gate_name], n_val, scenario, run_seed)
        hits += useful if scenario.useful_at is not None else accepted
    return hits


def jobs(args: argparse.Namespace) -> list[Job]:
    """Driver-level noise cells at 18 examples, gate-level cells for every size and scenario;
    each cell cut into chunks of seeds so the worker processes stay evenly loaded."""
    cells = [("driver", g, 18, SCENARIOS[0], args.driver_runs) for g in GATES]
    cells += [("gate", g, n, s, args.runs) for g in GATES for n in args.sizes for s in SCENARIOS]
    return [
        (level, g, n, s, range(start, min(start + 25, runs)))
        for level, g, n, s, runs in cells
        for start in range(0, runs, 25)
    ]


def rates(done: list[tuple[Job, int]]) -> list[dict[str, object]]:
    """Per cell: the share of its runs that hit."""
    totals: dict[tuple[str, str, int, str], list[int]] = {}
    for (level, g, n, s, seeds), hits in done:
        total = totals.setdefault((level, g, n, s.name), [0, 0])
        total[0] += hits
        total[1] += len(seeds)
    return [
        {"level": k[0], "gate": k[1], "val_n": k[2], "scenario": k[3], "runs": r, "rate": h / r}
        for k, (h, r) in totals.items()
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=500, help="seeded runs per gate-level cell")
    parser.add_argument("--driver-runs", type=int, default=200, help="seeded compiles per cell")
    parser.add_argument("--sizes", type=int, nargs="+", default=[18, 30, 100])
    args = parser.parse_args()
    work = jobs(args)
    with timer() as elapsed, ProcessPoolExecutor(max_workers=os.cpu_count()) as pool:
        cells = rates(list(zip(work, pool.map(cell, work), strict=True)))
    rate = {(c["level"], c["gate"], c["val_n"], c["scenario"]): c["rate"] for c in cells}
    headers = ["gate", "val n", "false accepts (noise)", *(s.name for s in SCENARIOS[1:])]
    for level, sizes in (("driver", [18]), ("gate", args.sizes)):
        rows = [
            [g, n, *(rate.get((level, g, n, s.name)) for s in SCENARIOS)]
            for g in GATES
            for n in sizes
        ]
        print_table(f"{level} level: {STEPS} decisions per run, flips p={FLIP}", headers, rows)
    print(f"\n{elapsed():.0f} s")
    write_results(
        "gate_noise",
        {
            "decisions_per_run": STEPS,
            "flip_probability": FLIP,
            "seconds": round(elapsed(), 1),
            "alpha_1": 0.05 * 6 / math.pi**2,
            "cells": cells,
        },
    )


if __name__ == "__main__":
    main()
