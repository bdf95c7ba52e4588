"""The default optimizer's power beside the gate alone, on the gate-power protocol (issue 36).

The protocol (issue 36, item 2; the outcome model of `bench_gate_noise.py`): a FAKE target
(`ScriptedLM`) that is half right on the parity task; any change of the skill text flips each
answer with probability `--flip` (fixed per example and text, so every rewording redraws the
noise); a *useful* line turns each wrong answer right with probability 2e (effect e, fixed per
run), on training and validation alike. A FAKE proposer offers a reworded useful line at every
step until the incumbent holds one, then useless notes; it names no failure, as worked examples
do, or with `--names-read` the failures it read, as `ReflectiveProposer` does (since
2026-12-07 the search treats both alike: a proposal that gains nothing on its batch is struck).
`--train` training examples, batches of `--batch`, `--runs` seeded runs per cell. Two
optimizers, same runs:

- **default**: `compile`'s default, `HandOff` (GradientText, handing the run to Bundle where its
  screens show only small effects) with `GradientText(batch_size=B, proposers=[fake])` first
  and `Bundle(proposers=[fake])` after, every other setting its default (screen, confirmation,
  composition, epochs, `--probe-steps`) — whatever the checkout's defaults are;
- **gate alone**: the same with `screen=False, compose=1` (every proposal to the gate).

Rows:

- a real edit of effect e at n validation examples (`--gain-cells 0.3:30 0.2:100`): runs that
  keep the useful line;
- a clean fix (`--clean 5:12`): no flips anywhere, half of the 12 validation answers wrong and
  the useful line fixes exactly 5 of them, breaking none; on training it fixes every wrong
  answer (the fix shows on training too): runs that keep it;
- false accepts at each size of `--null-sizes` (no useful edit: every proposal is noise): runs
  that accept anything.

Measured, never asserted. Run: `python bench/bench_search_power.py` (defaults are the issue's
protocol; about 2 minutes on 2 cores).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import Parity, git_commit, parity_examples, print_table, timer, write_results
from bench_gate_noise import (
    USEFUL,
    Answers,
    NoisyTarget,
    Outcomes,
    UsefulLineProposer,
    quiet_library_warnings,
)

import skillopt_dsl as sd
from skillopt_dsl.optimizers import Bundle, GradientText, HandOff, Optimizer
from skillopt_dsl.testing import ScriptedLM

TRAIN_START = 10_000
OPTIMIZERS = ("default", "gate alone")


@dataclass(frozen=True)
class CleanFix:
    """A clean fix: no flips; `wrong` of the validation answers are wrong and the useful line
    fixes exactly `fixes` of them; on training half the answers are wrong and it fixes all."""

    run_seed: int
    n_val: int
    fixes: int
    n_train: int

    def _wrong(self, numbers: Sequence[int]) -> list[int]:
        chosen = list(numbers)
        random.Random(f"{self.run_seed}:{numbers[0]}").shuffle(chosen)
        return chosen[: len(chosen) // 2]

    def right(self, text: str, number: int) -> bool:
        if number >= TRAIN_START:
            wrong = self._wrong(range(TRAIN_START, TRAIN_START + self.n_train))
            return number not in wrong or USEFUL in text
        wrong = self._wrong(range(self.n_val))
        return number not in wrong or (USEFUL in text and number in wrong[: self.fixes])


@dataclass(frozen=True)
class Scenario:
    """One row: what the useful line does (`effect` None: the clean fix) at `n_val`."""

    label: str
    n_val: int
    effect: float | None
    fixes: int = 0

    @property
    def null(self) -> bool:
        return self.effect == 0.0

    def outcomes(self, run_seed: int, flip: float, n_train: int, noise_key: str) -> Answers:
        if self.effect is None:
            return CleanFix(run_seed, self.n_val, self.fixes, n_train)
        return Outcomes(run_seed, self.effect, flip, noise_key)


@dataclass(frozen=True)
class Settings:
    """The protocol's parameters (the command line)."""

    n_train: int
    batch: int
    flip: float
    max_calls: int | None
    probe_steps: int | None = None
    names_read: bool = False
    noise_key: str = "text"


@dataclass(frozen=True)
class RunFigures:
    """One seeded run: hit (useful kept, or any accept in the null rows) and its costs."""

    hit: bool
    decisions: int
    accepted: int
    calls: int
    stop: str


def optimizer(
    name: str, batch: int, probe_steps: int | None = None, *, names_read: bool = False
) -> Optimizer:
    """The default optimizer with the fake proposer, the same sending everything to the gate,
    or `Bundle` with the fake proposer (`--with-bundle`); `names_read`: the fake names the
    failures it read."""
    proposers = [UsefulLineProposer(names_read=names_read)]
    if name == "bundle":
        return Bundle(proposers=proposers)
    if name == "default":
        first = GradientText(batch_size=batch, proposers=proposers)
        probe: dict[str, Any] = {} if probe_steps is None else {"probe_steps": probe_steps}
        return HandOff(first=first, then=Bundle(proposers=proposers), **probe)
    return GradientText(batch_size=batch, proposers=proposers, screen=False, compose=1)


def one_run(scenario: Scenario, name: str, settings: Settings, run_seed: int) -> RunFigures:
    """One seeded `compile` of the parity task on the scenario's fake target."""
    outcomes = scenario.outcomes(run_seed, settings.flip, settings.n_train, settings.noise_key)
    result = sd.compile(
        Parity(),
        parity_examples(settings.n_train, start=TRAIN_START),
        parity_examples(scenario.n_val),
        optimizer=optimizer(
            name, settings.batch, settings.probe_steps, names_read=settings.names_read
        ),
        lm=ScriptedLM(NoisyTarget(outcomes)),
        optimizer_lm=ScriptedLM(lambda messages: '{"edits": []}'),
        budget=None if settings.max_calls is None else sd.Budget(max_calls=settings.max_calls),
        seed=run_seed,
        threads=1,
    )
    accepted = sum(1 for d in result.gate_log if d.accepted)
    hit = result.improved if scenario.null else USEFUL in result.best_skill.text
    return RunFigures(hit, len(result.gate_log), accepted, result.usage.calls, result.stop_reason)


Job = tuple[Scenario, str, Settings, range]


def cell(job: Job) -> list[RunFigures]:
    scenario, name, settings, seeds = job
    return [one_run(scenario, name, settings, s) for s in seeds]


def scenarios(args: argparse.Namespace) -> list[Scenario]:
    rows: list[Scenario] = []
    for spec in args.gain_cells:
        effect, n_val = spec.split(":")
        rows.append(Scenario(f"real +{effect} edit", int(n_val), float(effect)))
    for spec in args.clean:
        fixes, n_val = (int(x) for x in spec.split(":"))
        rows.append(Scenario(f"clean fix of {fixes} of {n_val}", n_val, None, fixes))
    rows += [Scenario("no useful edit (false accepts)", n, 0.0) for n in args.null_sizes]
    return rows


def summary(figures: list[RunFigures]) -> dict[str, Any]:
    stops: dict[str, int] = {}
    for f in figures:
        stops[f.stop] = stops.get(f.stop, 0) + 1
    return {
        "hits": sum(f.hit for f in figures),
        "runs": len(figures),
        "mean_decisions": statistics.fmean(f.decisions for f in figures),
        "no_decision": sum(f.decisions == 0 for f in figures),
        "mean_accepted": statistics.fmean(f.accepted for f in figures),
        "mean_calls": statistics.fmean(f.calls for f in figures),
        "stop_reasons": stops,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20, help="seeded runs per cell")
    parser.add_argument("--train", type=int, default=8, help="training examples")
    parser.add_argument("--batch", type=int, default=4, help="GradientText batch_size")
    parser.add_argument("--flip", type=float, default=0.2, help="answers flipped by a text change")
    parser.add_argument("--gain-cells", nargs="*", default=["0.3:30", "0.2:100"],
                        metavar="EFFECT:N_VAL", help="real edits: effect and validation size")  # fmt: skip
    parser.add_argument("--clean", nargs="*", default=["5:12"], metavar="FIXES:N_VAL",
                        help="clean fixes: answers fixed and validation size")  # fmt: skip
    parser.add_argument("--null-sizes", type=int, nargs="*", default=[18, 30, 100])
    parser.add_argument("--max-calls", type=int, default=None, help="Budget(max_calls) per run")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--probe-steps", type=int, default=None,
                        help="the default's HandOff.probe_steps (default: its own)")  # fmt: skip
    parser.add_argument("--names-read", action="store_true",
                        help="the fake proposer names the failures it read, as ReflectiveProposer "
                        "does (default: it names none, as worked examples)")  # fmt: skip
    parser.add_argument("--noise-key", choices=("text", "content"), default="text",
                        help="flips drawn from the exact text (any rewording redraws them) or "
                        "from what it states (rewordings move the same answers)")  # fmt: skip
    parser.add_argument("--with-bundle", action="store_true",
                        help="also run Bundle(proposers=[fake]) (a third column)")  # fmt: skip
    parser.add_argument("--name", default="search_power")
    parser.add_argument("--note", default="", help="a line kept with the results")
    args = parser.parse_args()
    quiet_library_warnings()
    settings = Settings(
        args.train, args.batch, args.flip, args.max_calls, args.probe_steps, args.names_read,
        args.noise_key,
    )  # fmt: skip
    rows = scenarios(args)
    names = (*OPTIMIZERS, "bundle") if args.with_bundle else OPTIMIZERS
    work: list[Job] = [
        (scenario, name, settings, range(start, min(start + 5, args.runs)))
        for scenario in rows
        for name in names
        for start in range(0, args.runs, 5)
    ]
    with timer() as elapsed, ProcessPoolExecutor(max_workers=args.workers) as pool:
        done = list(zip(work, pool.map(cell, work), strict=True))
    runs: dict[tuple[Scenario, str], list[RunFigures]] = {}
    for (scenario, name, _, _), figures in done:
        runs.setdefault((scenario, name), []).extend(figures)
    cells = {key: summary(figures) for key, figures in runs.items()}
    table = []
    for scenario in rows:
        mine, alone = cells[scenario, "default"], cells[scenario, "gate alone"]
        table.append([
            scenario.label, scenario.n_val, "accepts anything" if scenario.null else "kept",
            f"{mine['hits']}/{mine['runs']}", f"{alone['hits']}/{alone['runs']}",
            f"{mine['mean_decisions']:.1f} / {alone['mean_decisions']:.1f}",
            f"{mine['no_decision']} / {alone['no_decision']}",
            f"{mine['mean_calls']:.0f} / {alone['mean_calls']:.0f}",
            *([f"{cells[scenario, 'bundle']['hits']}/{cells[scenario, 'bundle']['runs']}"]
              if args.with_bundle else []),
        ])  # fmt: skip
    print_table(
        f"Gate-power protocol: {args.train} train, batches of {args.batch}, flips p={args.flip}, "
        f"{args.runs} seeded runs a cell, budget {args.max_calls or 'none'}, the fake proposer "
        f"names {'the failures it read' if args.names_read else 'no failure'}, flips keyed on "
        f"the {'exact text' if args.noise_key == 'text' else 'content'}",
        ["row", "val n", "counts", "default", "gate alone (screen=False)",
         "decisions/run (default / alone)", "runs with no decision (default / alone)",
         "calls/run (default / alone)",
         *(["Bundle"] if args.with_bundle else [])],
        table,
    )  # fmt: skip
    for name in names:
        nulls = [cells[s, name] for s in rows if s.null]
        hits, total = sum(c["hits"] for c in nulls), sum(c["runs"] for c in nulls)
        print(f"false accepts, {name}: {hits} of {total}")
    print(f"\n{elapsed():.0f} s")
    write_results(args.name, {
        "git_commit": git_commit(), "note": args.note, "seconds": round(elapsed(), 1),
        "protocol": {"train": args.train, "batch": args.batch, "flip": args.flip,
                     "runs": args.runs, "max_calls": args.max_calls,
                     "names_read": args.names_read},
        "optimizers": {"default": "HandOff(first=GradientText(batch_size=B, proposers=[fake]), then=Bundle(proposers=[fake]))",
                       "gate alone": "the same with screen=False, compose=1",
                       "bundle": "Bundle(proposers=[fake]) (--with-bundle)"},
        "cells": [{"row": s.label, "val_n": s.n_val, "effect": s.effect, "fixes": s.fixes,
                   "optimizer": name, **cells[s, name]}
                  for s in rows for name in names],
    })  # fmt: skip


if __name__ == "__main__":
    main()
