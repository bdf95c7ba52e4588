"""The checkpointed run state of `GradientText` and the helpers that read and write it.

The state holds typed records (`ScreenedProposal` on trial and pending, `RejectedCandidate`
in the memory and the struck, `EditOutcome`s of the step); `to_dict` writes them in the JSON
shape checkpoints have always had (`ProposalRecord`, `RejectedRecord`, the outcome's dict), and
`from_dict` reads a checkpoint written before they were records."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from skillopt_dsl.events import GroupRecord, OutcomeRecord
from skillopt_dsl.optimizers.base import StopReason
from skillopt_dsl.optimizers.proposers import EditGroup
from skillopt_dsl.optimizers.search import ScreenedProposal
from skillopt_dsl.optimizers.state import CheckpointedState, RecordReaders
from skillopt_dsl.skill import EditOutcome, parse_edits


def outcome_from_dict(data: OutcomeRecord) -> EditOutcome:
    """An edit outcome from its `to_dict()` form."""
    (edit,) = parse_edits([data["edit"]])
    match, similarity = data.get("match"), data.get("similarity")
    return EditOutcome(edit, data["status"], data["reason"], match, similarity)


@dataclass
class GradientTextState(CheckpointedState):
    """Checkpointed run state of GradientText (JSON-serialisable); its steps, rejected and
    struck proposals and their evidence are the run's search memory (`RunView.memory`)."""

    epoch: int = 0
    order: list[str] = field(default_factory=list)
    cursor: int = 0
    slow_done: bool = False
    steps_since_accept: int = 0
    epochs_since_accept: int = 0
    accepted_this_epoch: bool = False
    pending: list[ScreenedProposal] = field(default_factory=list)
    pending_lrs: list[float] = field(default_factory=list)
    survived_this_epoch: bool = False
    epochs_without_survivor: int = 0
    step_calls: int = 0
    steps_measured: int = 0
    max_step_rate: float = 0.0
    rejected_hashes: list[str] = field(default_factory=list)
    gate_strikes: dict[str, int] = field(default_factory=dict)
    trials: list[ScreenedProposal] = field(default_factory=list)
    step_outcomes: list[EditOutcome] = field(default_factory=list)
    epoch_start_calls: int = 0
    reserve: int = 0
    """The calls the current step leaves for the gate decision after it (a whole decision, or
    in the budget's tail the gate's first look; 0 without a call budget)."""
    batch_cap: int = 0
    """The largest batch the run's steps take, planned at its first step under a call budget
    (`GradientText.budget_steps`; 0: not planned, `batch_size`)."""
    failures_this_epoch: bool = False
    """Whether a batch of this epoch had an example the working candidate failed, or was
    rolled out with proposals pending (then not under the incumbent: `train_solved` is said
    of the incumbent only)."""
    stop_reason: StopReason | None = None
    """Set when the search must end at once ("perfect": the incumbent is perfect on validation)."""

    record_fields: ClassVar[RecordReaders] = {
        "trials": ScreenedProposal.from_dict,
        "pending": ScreenedProposal.from_dict,
        "step_outcomes": outcome_from_dict,
    }


def group_json(group: EditGroup) -> GroupRecord:
    """An edit group as the `proposal` event lists it."""
    return GroupRecord(
        source=group.source,
        failure_driven=group.failure_driven,
        rationale=group.rationale,
        edits=[e.model_dump() for e in group.edits],
    )
