"""What a screened search remembers, whichever optimizer runs it (GradientText, Beam).

`SearchMemory` is a mixin of an optimizer's checkpointed state dataclass. It declares the fields
the shared search step (`search_step.try_alone`, `proposer_runs.ProposerRuns`) reads and writes,
and the state dataclass defines them (with these defaults):

- `evidence`: every screen of a proposal summed per proposal key, across re-proposals
  (`EvidenceBook`);
- `rejected`: the memory proper, proposals never screened again (`CheckpointedState`);
- `struck`: proposals that failed a screen but may be screened again when proposed again, until
  their `screen_strikes`-th failure; the proposers are told about both lists (`told`);
- `screen_strikes`: failures per proposal key; `screen_stats`: screens and passes per stage and
  the calls they spent;
- `proposer_stats`, `proposer_asked`: per proposer, its counters and the fingerprint of the last
  request it called a model for;
- `step`: the steps begun so far (a step's events carry `step - 1`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Self

from skillopt_dsl.driver import RunView
from skillopt_dsl.json_types import JSONObject
from skillopt_dsl.optimizers.proposers import EditGroup, RejectedCandidate, RejectedRecord, edit_key
from skillopt_dsl.optimizers.screening import EvidenceBook, ScreenResult
from skillopt_dsl.optimizers.state import CheckpointedState, as_json, stored
from skillopt_dsl.skill import Edit

__all__ = [
    "MEMORY_FIELDS",
    "SearchMemory",
    "carried_memory",
    "group_key",
    "new_stats",
    "record_screen",
]

MEMORY_FIELDS = (
    "step", "evidence", "rejected", "struck", "screen_strikes", "screen_stats",
    "proposer_stats", "proposer_asked",
)  # fmt: skip
"""The fields of `SearchMemory` (module docstring), as a checkpointed state names them."""


def carried_memory(state: JSONObject) -> JSONObject:
    """The search memory in one optimizer's checkpointed state (`MEMORY_FIELDS`), for another
    optimizer's state to start from (`HandOff`): what was rejected, struck and screened stays
    so, and step numbers go on."""
    return {name: state[name] for name in MEMORY_FIELDS if name in state}


def group_key(edits: Sequence[Edit]) -> str:
    """A proposal's identity for the memory: its edits' keys, in order."""
    return "\n".join(edit_key(e) for e in edits)


class SearchMemory(EvidenceBook, CheckpointedState):
    """The screened search's memory, shared by every optimizer that runs it (module doc)."""

    step: int
    struck: list[RejectedCandidate]
    screen_strikes: dict[str, int]
    screen_stats: dict[str, int]
    proposer_stats: dict[str, dict[str, int]]
    proposer_asked: dict[str, str]

    def remember(
        self, edits: Sequence[Edit], delta: float, *, epoch: int, block: bool = True
    ) -> None:
        """Remember one proposal (an edit group) as rejected: the proposers read it (they are
        asked not to propose it again); a `block`ed one joins the memory proper and is never
        screened again, an unblocked one is only told (`struck`)."""
        key = group_key(edits)
        if key in self.blocked_keys():
            return
        memory = RejectedCandidate(tuple(edits), delta, self.step, epoch)
        self.struck = [r for r in self.struck if group_key(r.edits) != key]
        (self.rejected if block else self.struck).append(memory)

    def strike(self, edits: Sequence[Edit], delta: float, *, epoch: int, limit: int) -> None:
        """A proposal failed a screen: the proposers are told at once, and it is blocked from
        screening at its `limit`-th failure (one unlucky mini-batch does not end a proposal
        proposed again)."""
        key = group_key(edits)
        strikes = self.screen_strikes[key] = self.screen_strikes.get(key, 0) + 1
        self.remember(edits, delta, epoch=epoch, block=strikes >= limit)

    def blocked_keys(self) -> set[str]:
        """The proposals never screened again: those in the memory proper."""
        return {group_key(c.edits) for c in self.rejected}

    def told(self) -> list[RejectedCandidate]:
        """What the proposers are told was tried and rejected: the memory and the struck."""
        return [*self.rejected, *self.struck]

    def forget(self, keys: set[str]) -> None:
        """Drop accepted proposals from the memory and the struck."""
        self.rejected = [r for r in self.rejected if group_key(r.edits) not in keys]
        self.struck = [r for r in self.struck if group_key(r.edits) not in keys]

    def to_dict(self) -> JSONObject:
        """JSON-ready copy, the struck in their `RejectedRecord` form."""
        return {**super().to_dict(), "struck": [as_json(r.to_dict()) for r in self.struck]}

    @classmethod
    def from_dict(cls, data: JSONObject) -> Self:
        """Rebuild from `to_dict` output (a checkpoint without the struck has none)."""
        state = super().from_dict({**data, "struck": []})
        state.struck = [
            RejectedCandidate.from_dict(r) for r in stored(data, "struck", RejectedRecord)
        ]
        return state


def record_screen(
    view: RunView, state: SearchMemory, group: EditGroup, result: ScreenResult
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
