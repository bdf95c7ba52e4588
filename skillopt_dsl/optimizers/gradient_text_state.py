"""The checkpointed run state of `GradientText` and the helpers that read and write it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from skillopt_dsl.driver import RunView
from skillopt_dsl.optimizers.proposers import (
    EditGroup,
    RejectedCandidate,
    edit_key,
)
from skillopt_dsl.optimizers.screening import EvidenceBook, ScreenResult
from skillopt_dsl.optimizers.state import CheckpointedState
from skillopt_dsl.skill import (
    Edit,
    EditOutcome,
    parse_edits,
)


@dataclass
class GradientTextState(EvidenceBook, CheckpointedState):
    """Checkpointed run state of GradientText (JSON-serialisable)."""

    epoch: int = 0
    step: int = 0
    order: list[str] = field(default_factory=list)
    cursor: int = 0
    slow_done: bool = False
    rejected: list[dict[str, Any]] = field(default_factory=list)
    steps_since_accept: int = 0
    epochs_since_accept: int = 0
    accepted_this_epoch: bool = False
    proposer_stats: dict[str, dict[str, int]] = field(default_factory=dict)
    proposer_asked: dict[str, str] = field(default_factory=dict)
    """Per proposer, the fingerprint of the last request it called a model for: an unchanged
    request is not asked again (`ProposerRuns.run`)."""
    pending: list[dict[str, Any]] = field(default_factory=list)
    pending_lrs: list[float] = field(default_factory=list)
    survived_this_epoch: bool = False
    epochs_without_survivor: int = 0
    step_calls: int = 0
    steps_measured: int = 0
    max_step_rate: float = 0.0
    screen_stats: dict[str, int] = field(default_factory=dict)
    rejected_hashes: list[str] = field(default_factory=list)
    gate_strikes: dict[str, int] = field(default_factory=dict)
    trials: list[dict[str, Any]] = field(default_factory=list)
    step_outcomes: list[dict[str, Any]] = field(default_factory=list)
    epoch_start_calls: int = 0
    screen_strikes: dict[str, int] = field(default_factory=dict)
    struck: list[dict[str, Any]] = field(default_factory=list)
    """Proposals that failed a screen but may be screened again (`screen_strikes`): the
    proposers are told about them; `rejected` (the memory proper) holds the blocked ones."""
    reserve: int = 0
    """The calls the current step leaves for the gate decision after it (a whole decision, or
    in the budget's tail the gate's first look; 0 without a call budget)."""
    evidence: dict[str, dict[str, float]] = field(default_factory=dict)
    """Every screen's result summed per proposal key (`EditEvidence`), across the steps that
    proposed it again: a small but repeated effect is seen."""
    failures_this_epoch: bool = False
    """Whether a batch of this epoch had an example the working candidate failed."""
    stop_reason: str | None = None
    """Set when the search must end at once ("perfect": the incumbent is perfect on validation)."""

    def remember(self, edits: Sequence[Edit], delta: float, *, block: bool = True) -> None:
        """Remember one proposal (an edit group) as rejected: the proposers read it (they are
        asked not to propose it again); a `block`ed one joins the memory proper and is never
        screened again, an unblocked one is only told (`struck`)."""
        key = group_key(edits)
        if key in self.blocked_keys():
            return
        memory = RejectedCandidate(tuple(edits), delta, self.step, self.epoch).to_dict()
        self.struck = [r for r in self.struck if group_key(parse_edits(r["edits"])) != key]
        (self.rejected if block else self.struck).append(memory)

    def blocked_keys(self) -> set[str]:
        """The proposals never screened again: those in the memory proper."""
        return {group_key(c.edits) for c in self.memory()}

    def told(self) -> list[RejectedCandidate]:
        """What the proposers are told was tried and rejected: the memory and the struck."""
        return [*self.memory(), *(RejectedCandidate.from_dict(r) for r in self.struck)]

    def forget(self, keys: set[str]) -> None:
        """Drop accepted proposals from the memory and the struck."""
        self.rejected = [r for r in self.rejected if group_key(parse_edits(r["edits"])) not in keys]
        self.struck = [r for r in self.struck if group_key(parse_edits(r["edits"])) not in keys]


def record_screen(
    view: RunView, state: GradientTextState, group: EditGroup, result: ScreenResult
) -> None:
    """Count one screen in the state's summary and emit it as a `screen` event."""
    counts = state.screen_stats
    counts[f"{result.stage}_screened"] = counts.get(f"{result.stage}_screened", 0) + 1
    counts[f"{result.stage}_passed"] = counts.get(f"{result.stage}_passed", 0) + int(result.passed)
    counts["calls"] = counts.get("calls", 0) + result.calls
    view.emit(
        "screen", step=state.step - 1, source=group.source, rationale=group.rationale[:200],
        **result.to_dict(),
    )  # fmt: skip


def new_stats() -> dict[str, int]:
    """A proposer's counters: runs, steps benched, model calls, steps that paid for calls,
    edits proposed, proposals that passed the screen, candidates its proposals were submitted
    in, accepted ones, and steps not asked because the request was unchanged."""
    keys = ("runs", "skipped", "calls", "paid_runs", "edits", "survived", "submitted", "accepted",
            "unchanged")  # fmt: skip
    return dict.fromkeys(keys, 0)


def outcome_from_dict(data: dict[str, Any]) -> EditOutcome:
    """An edit outcome from its `to_dict()` form."""
    (edit,) = parse_edits([data["edit"]])
    return EditOutcome(
        edit, data["status"], data["reason"], data.get("match"), data.get("similarity")
    )


def group_key(edits: Sequence[Edit]) -> str:
    """A proposal's identity for the memory: its edits' keys, in order."""
    return "\n".join(edit_key(e) for e in edits)


def group_json(
    group: EditGroup, *, edits: Sequence[Edit] | None = None, **extra: Any
) -> dict[str, Any]:
    return {
        "source": group.source,
        "failure_driven": group.failure_driven,
        "rationale": group.rationale,
        "edits": [e.model_dump() for e in (group.edits if edits is None else edits)],
        **extra,
    }
