"""The door's records and rules: the learning-rate bound it enforces and why it refuses a
candidate, the `Verdict` it returns, the `StepRecord` a run keeps per step, the training-set
`SelectionSplit` an optimizer chooses on, the order of the gate's looks, and the events only the
driver writes. The door itself is `RunView.submit` (`skillopt_dsl.driver`)."""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Literal, TypedDict, cast

from skillopt_dsl.events import OutcomeRecord
from skillopt_dsl.gate import GateDecision
from skillopt_dsl.json_types import JSONObject
from skillopt_dsl.skill import ApplyReport, Skill
from skillopt_dsl.types import Example


class StepRow(TypedDict):
    """`StepRecord.to_dict()`: one step as the checkpoint's history and the `step` event
    store it."""

    step: int
    epoch: int
    kind: str
    lr_budget: float
    budget_tokens: int
    change_tokens: int
    measured_change: float
    accepted: bool
    candidate_hash: str | None
    val_score: float | None
    incumbent_score: float | None
    edit_report: list[OutcomeRecord]
    note: str
    calls: int
    cost_usd: float | None


@dataclass(frozen=True)
class StepRecord:
    """One optimizer step, as kept in `CompileResult.history`.

    `lr_budget` is the learning rate the optimizer declared (summed over the steps of a path),
    `budget_tokens` the token edit distance the door allowed for it (with the floor for short
    documents), `change_tokens` and `measured_change` what the candidate really changed from
    the incumbent, measured by the door (tokens, and relative to the longer text). `accepted`
    is the gate's verdict (False when no candidate reached the gate); `note` says "duplicate"
    or "refused: ..." when the door stopped the candidate.
    """

    step: int
    epoch: int
    kind: str
    lr_budget: float
    budget_tokens: int
    change_tokens: int
    measured_change: float
    accepted: bool
    candidate_hash: str | None = None
    val_score: float | None = None
    incumbent_score: float | None = None
    edit_report: list[OutcomeRecord] = field(default_factory=list)
    note: str = ""
    calls: int = 0
    cost_usd: float | None = None

    def to_dict(self) -> StepRow:
        """A JSON-ready dict of every field."""
        return cast(StepRow, asdict(self))


@dataclass(frozen=True)
class LearningRateBound:
    """The door's step budget: a step may move `max(ceil(lr * tokens), floor_tokens)` tokens.

    `max_lr` is the most a step may declare (the optimizer's base rate; schedules only lower
    it), fixed for the run when the optimizer starts, like `floor_tokens`.
    """

    max_lr: float
    floor_tokens: int

    def budget(self, lrs: Sequence[float], tokens: int) -> int:
        """The tokens a path of `len(lrs)` steps may move from a document of `tokens` tokens.

        Each step's budget is `max(ceil(lr * T), floor)` where `T` is the document's length at
        that step, at most `tokens` plus the budgets of the steps before it; token edit distance
        obeys the triangle inequality, so the path's end is within the sum.
        """
        total, length = 0, tokens
        for lr in lrs:
            step = max(math.ceil(lr * length), self.floor_tokens)
            total, length = total + step, length + step
        return total


@dataclass(frozen=True)
class Verdict:
    """What the door did with a submitted candidate.

    status: "accepted" / "rejected" (the gate judged it: `decision` is its `GateDecision`),
    "duplicate" (this text was already judged, or is the incumbent: nothing was evaluated, it
    is never an accept), "refused" (over the learning-rate budget, or the run's significance is
    spent, `RunView.can_accept`: the gate never saw it).
    Optimizers treat everything but "accepted" as no progress.
    """

    status: Literal["accepted", "rejected", "duplicate", "refused"]
    candidate_hash: str
    change_tokens: int
    budget_tokens: int
    reason: str
    decision: GateDecision | None = None

    @property
    def accepted(self) -> bool:
        """True only when the gate accepted this candidate now."""
        return self.status == "accepted"

    @property
    def duplicate(self) -> bool:
        """True when the text had already been judged (or is the incumbent)."""
        return self.status == "duplicate"

    @property
    def delta(self) -> float:
        """The gate's score difference (candidate - incumbent); 0.0 when the gate did not run."""
        return self.decision.delta if self.decision is not None else 0.0


StateAfter = Callable[[Verdict], JSONObject]
"""Kept for old imports only: the door no longer takes a `state_after(verdict)` callback. An
optimizer hands its state after a verdict over with `RunView.commit(state)`."""


@dataclass(frozen=True)
class SelectionSplit:
    """A seeded split of the training set: `fit` to learn from, `select` to choose on.

    Both come from the training set, never from the gate's validation examples.
    """

    fit: tuple[Example, ...]
    select: tuple[Example, ...]
    fraction: float


@dataclass(frozen=True)
class Step:
    """A candidate at the door, with what the optimizer declared about it."""

    skill: Skill
    lrs: tuple[float, ...]
    step: int
    epoch: int
    kind: str
    report: ApplyReport | None
    ends_on_rejection: bool = False
    """The search ends if the gate rejects it (`RunView.submit`): under a call budget, no
    futility stop."""


def refusal_reason(
    lrs: Sequence[float], bound: LearningRateBound, change: int, budget: int
) -> str | None:
    """Why the door refuses a candidate (None: it may go to the gate)."""
    if not lrs:
        return "no learning rate declared for the step"
    over = [lr for lr in lrs if not 0 < lr <= bound.max_lr]
    if over:
        return f"declared lr {over[0]} outside (0, {bound.max_lr}] (the run's learning rate)"
    if change > budget:
        return f"over the learning-rate budget ({change} > {budget} tokens from the incumbent)"
    return None


def look_order(valset: Sequence[Example], seed: int) -> tuple[Example, ...]:
    """The order in which a candidate is scored on validation at the gate's looks: seeded,
    fixed before any candidate is seen, the same on resume."""
    ordered = sorted(valset, key=lambda e: e.id)
    random.Random(f"gate-looks:{seed}").shuffle(ordered)
    return tuple(ordered)


RESERVED_EVENTS = frozenset({"gate", "step", "duplicate", "refused", "seed", "resume", "finish"})
"""Events only the driver writes; `RunView.emit` refuses them."""
