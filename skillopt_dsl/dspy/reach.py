"""Which predictors the program's own path reaches, before any budget is shared out.

A program that branches in Python (`if ...: self.math(...) else: self.geo(...)`) may never call
a predictor on the rows it is given. Such a predictor has nothing to learn from: its reflection
would see no call of its own, and its worked examples and label rules would be another branch's.
`probe_reach` runs the seed program on the training rows, in order, until every predictor has
been called or the rows run out, and on more rows (up to `RATE_ROWS`) while `more` says the
budget will be split between predictors, so that a share is priced on more than one row (a
ReAct row that needs one tool is cheaper than one that needs three: priced on it, a share
falls short of a decision); a predictor that no training row reaches is left as the
student has it and gets no share of the budget. The probe's replies go into the cache the
predictors' runs share, so a run scoring the seed program on those rows gets them free; with a
run directory they are kept in `reach_cache.sqlite` there, so a resumed run pays for them once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from skillopt_dsl.dspy.program import DSPyProgram, PredictorModule
from skillopt_dsl.errors import ModelError
from skillopt_dsl.lm import (
    LM,
    Backend,
    Budget,
    ResponseCache,
    UsageLedger,
    UsageSnapshot,
    resolve_lm,
)
from skillopt_dsl.types import Example

__all__ = ["RATE_ROWS", "REACH_CACHE", "Pricing", "Probe", "probe_reach", "unreached"]

logger = logging.getLogger(__name__)

REACH_CACHE = "reach_cache.sqlite"
"""The probe's replies, in the run directory (a resumed run answers its probe from them)."""


RATE_ROWS = 2
"""The most training rows the probe runs to price a run (beyond those reaching every
predictor), when the budget is to be split."""


@dataclass(frozen=True)
class Pricing:
    """The budget the probe runs under, and whether to price a run on one more row
    (`more(spent, rows)`; None: never)."""

    budget: Budget | None
    more: Callable[[UsageSnapshot, int], bool] | None = None


@dataclass(frozen=True)
class Probe:
    """What the probe spent and saw: its usage, the rows it ran, and the most requests one
    row's run made (replies from the cache included; 0 when nothing ran)."""

    usage: UsageSnapshot
    rows: int = 0
    costliest: int = 0

    @property
    def per_run(self) -> float | None:
        """The mean requests a run made (None: nothing was measured)."""
        return self.usage.calls / self.rows if self.rows and self.usage.calls else None


def probe_reach(
    program: DSPyProgram,
    names: Sequence[str],
    train: Sequence[Example],
    *,
    lm: str | Backend | LM | None,
    shared: ResponseCache,
    pricing: Pricing,
    seed: int,
    run_dir: Path | None,
) -> Probe:
    """Run the seed program on `train`, under `pricing.budget`, until every one of `names`
    was called, then while `pricing.more(spent, rows)` says so (see the module docstring); what it spent and the rows it ran
    (their requests, replies from the cache included, are what a run of the program costs).
    Nothing is run for a single predictor (it is the program's only path).
    A budget stop is raised as it is; a failed model call skips its row."""
    ledger, more = UsageLedger(pricing.budget), pricing.more
    if len(names) < 2 or not train:
        return Probe(ledger.snapshot())
    path = None
    if run_dir is not None:
        run_dir.mkdir(parents=True, exist_ok=True)
        path = run_dir / REACH_CACHE
    cache = ResponseCache(path, shared=shared)
    try:
        client = resolve_lm(lm, cache=cache, ledger=ledger)
        module = program.module(names[0])
        ids: list[str] = []
        costliest = 0
        for example in train:
            reached = set(names) <= program.reached_on(ids)
            if reached and (more is None or not more(ledger.snapshot(), len(ids))):
                break
            ids.append(example.id)
            costliest = max(costliest, _run(module, example, client, seed))
    finally:
        cache.flush()
        cache.close()
    return Probe(ledger.snapshot(), len(ids), costliest)


def _run(module: PredictorModule, example: Example, client: LM, seed: int) -> int:
    """The requests one seed run made (0: a failed model call, its row skipped)."""
    try:
        return module.run(module.seed_skill, example, client, seed=seed).calls
    except ModelError as exc:
        logger.info("reach probe: %s failed (%s); its row is skipped", example.id, exc)
        return 0


def unreached(program: DSPyProgram, name: str, train: Sequence[Example]) -> bool:
    """True when the training rows were run and none of their runs called predictor `name`."""
    ids = [example.id for example in train]
    return program.ran(ids) and name not in program.reached_on(ids)
