"""Consolidate: run an existing optimizer through `skillopt_dsl.compile` on the mined tasks, with
the night's `Budget` and the one `Gate`.

Before spending anything it checks that the night *can* accept a candidate: train and val must be
non-empty and disjoint (by id and by intent), and val must be large enough for the gate to pass a
candidate that wins on every val task (probed on the gate itself, so a gate with a significance
test states its own minimum). A night that cannot accept anything says why and runs nothing.
"""

from __future__ import annotations

import copy
import logging
from dataclasses import dataclass, replace

from skillopt_dsl.compile import CompileResult, compile_with
from skillopt_dsl.data import Splits
from skillopt_dsl.errors import BudgetExceeded, SkillOptError
from skillopt_dsl.evaluate import EvaluationReport, Rollout
from skillopt_dsl.gate import Gate
from skillopt_dsl.module import SkillModule
from skillopt_dsl.optimizers.base import Optimizer
from skillopt_dsl.settings import CompileSettings
from skillopt_dsl.types import Example, Prediction

__all__ = ["Consolidation", "consolidate", "gate_minimum_val", "readiness"]

logger = logging.getLogger(__name__)

PROBE_LIMIT = 64

_MORE_TASKS = (
    "gather more tasks: `skillopt-dsl sleep harvest --all` re-reads the sessions a night "
    "already read, then `skillopt-dsl sleep run --tasks .skillopt/sleep/review/tasks.jsonl`"
)


@dataclass(frozen=True)
class Consolidation:
    """What the optimizer run gave: the result, or why nothing could run or be accepted."""

    result: CompileResult | None
    blocked: str | None = None


def gate_minimum_val(gate: Gate) -> int | None:
    """The fewest val tasks on which `gate` accepts a candidate that wins on every one of them.

    Probed on a copy of the gate with synthetic reports (scores 1 against 0) and no guards;
    None when no size up to 64 passes or the gate cannot be probed.
    """
    try:
        probe = replace(copy.deepcopy(gate), guards=())
        for n in range(1, PROBE_LIMIT + 1):
            decision = probe.decide(_report(n, 1.0, "candidate"), _report(n, 0.0, "incumbent"))
            if decision.accepted:
                return n
    except (SkillOptError, TypeError, ValueError) as exc:
        logger.warning("could not probe the gate's minimum val size: %s", exc)
    return None


def _report(n: int, score: float, skill_hash: str) -> EvaluationReport:
    records = tuple(
        Rollout(example_id=f"probe-{i}", output="", prediction=Prediction({}), score=score)
        for i in range(n)
    )
    return EvaluationReport(records, skill_hash, "probe")


def readiness(splits: Splits, minimum_val: int | None) -> str | None:
    """Why this night cannot accept any candidate, or None when it can."""
    if not splits.val:
        return f"no validation tasks: the gate has nothing to decide on; {_MORE_TASKS}"
    if not splits.train:
        return f"no training tasks: the optimizer has nothing to learn from; {_MORE_TASKS}"
    shared = _overlap(splits.train, splits.val)
    if shared:
        return f"val overlaps train ({len(shared)} shared task(s), e.g. {shared[0]!r}); fix the task splits"
    if minimum_val is None:
        return (
            f"the gate accepts no candidate on up to {PROBE_LIMIT} val tasks, even one that wins "
            "on every task; check the gate's settings"
        )
    if len(splits.val) < minimum_val:
        return (
            f"val has {len(splits.val)} task(s), but the gate cannot accept a candidate on fewer "
            f"than {minimum_val} (even one that wins on every val task); {_MORE_TASKS}"
        )
    return None


def _overlap(train: list[Example], val: list[Example]) -> list[str]:
    def key(example: Example) -> str:
        return " ".join(str(example.inputs.get("request", "")).split()).casefold()

    train_ids = {e.id.split("~")[0] for e in train}
    train_keys = {key(e) for e in train}
    return [e.id for e in val if e.id in train_ids or key(e) in train_keys]


def consolidate(
    module: SkillModule,
    splits: Splits,
    *,
    optimizer: Optimizer,
    settings: CompileSettings,
) -> Consolidation:
    """Compile the live document on the tasks; `blocked` says why nothing could be accepted.

    `settings` are the night's compile settings (models, gate, budget, run directory, seed,
    threads, event listener); its gate (default `Gate()`, as for `compile`) is probed first, and
    the test split is `splits.test` (whatever `settings.testset` says).
    """
    gate = settings.gate if settings.gate is not None else Gate()
    blocked = readiness(splits, gate_minimum_val(gate))
    if blocked is not None:
        logger.info("nothing can be accepted tonight: %s", blocked)
        return Consolidation(None, blocked)
    night = replace(settings, gate=gate, testset=splits.test or None)
    try:
        result = compile_with(module, splits.train, splits.val, night, optimizer)
    except BudgetExceeded as exc:
        return Consolidation(
            None, f"the budget ran out before the live files were scored on val ({exc})"
        )
    return Consolidation(result)
