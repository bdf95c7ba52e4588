"""Which predictors the program's own path reaches, before any budget is shared out.

A program that branches in Python (`if ...: self.math(...) else: self.geo(...)`) may never call
a predictor on the rows it is given. Such a predictor has nothing to learn from: its reflection
would see no call of its own, and its worked examples and label rules would be another branch's.
`probe_reach` runs the seed program on the training rows, in order, until every predictor has
been called or the rows run out; a predictor that no training row reaches is left as the
student has it and gets no share of the budget. The probe's replies go into the cache the
predictors' runs share, so a run scoring the seed program on those rows gets them free; with a
run directory they are kept in `reach_cache.sqlite` there, so a resumed run pays for them once.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from skillopt_dsl.dspy.program import DSPyProgram
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

__all__ = ["REACH_CACHE", "probe_reach", "unreached"]

logger = logging.getLogger(__name__)

REACH_CACHE = "reach_cache.sqlite"
"""The probe's replies, in the run directory (a resumed run answers its probe from them)."""


def probe_reach(
    program: DSPyProgram,
    names: Sequence[str],
    train: Sequence[Example],
    *,
    lm: str | Backend | LM | None,
    shared: ResponseCache,
    budget: Budget | None,
    seed: int,
    run_dir: Path | None,
) -> tuple[UsageSnapshot, int]:
    """Run the seed program on `train` until every one of `names` was called (see the module
    docstring); what it spent, and the rows it ran (their requests, replies from the cache
    included, are what a run of the program costs). Nothing is run for a single predictor
    (it is the program's only path). A budget stop is raised as it is; a failed model call
    skips its row."""
    ledger = UsageLedger(budget)
    if len(names) < 2 or not train:
        return ledger.snapshot(), 0
    path = None
    if run_dir is not None:
        run_dir.mkdir(parents=True, exist_ok=True)
        path = run_dir / REACH_CACHE
    cache = ResponseCache(path, shared=shared)
    try:
        client = resolve_lm(lm, cache=cache, ledger=ledger)
        module = program.module(names[0])
        ids: list[str] = []
        for example in train:
            if set(names) <= program.reached_on(ids):
                break
            ids.append(example.id)
            try:
                module.run(module.seed_skill, example, client, seed=seed)
            except ModelError as exc:
                logger.info("reach probe: %s failed (%s); its row is skipped", example.id, exc)
    finally:
        cache.flush()
    return ledger.snapshot(), len(ids)


def unreached(program: DSPyProgram, name: str, train: Sequence[Example]) -> bool:
    """True when the training rows were run and none of their runs called predictor `name`."""
    ids = [example.id for example in train]
    return program.ran(ids) and name not in program.reached_on(ids)
