"""The checkpointed run state of `Bundle`: its training pool, the members collected so far
and the survivors waiting for a member to be audited again within the bundle."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, NotRequired, TypedDict

from skillopt_dsl.json_types import JSONObject
from skillopt_dsl.optimizers.state import CheckpointedState, RecordReaders
from skillopt_dsl.skill import Edit, parse_edits

__all__ = ["BundleMember", "BundleMemberRecord", "BundleState"]


class BundleMemberRecord(TypedDict):
    """A `BundleMember` as checkpoints hold it."""

    edits: list[JSONObject]
    fixes: list[str]
    breaks: NotRequired[list[str]]


@dataclass(frozen=True)
class BundleMember:
    """A collected edit group: its edits and the pool failures it fixed for good (its fix
    persisted under a changed text); those are no longer open. A survivor waiting for a
    bundle to be audited in (`BundleState.waiting`) also holds the audit's `breaks` that
    repeated under its changed wordings."""

    edits: tuple[Edit, ...]
    fixes: tuple[str, ...]
    breaks: tuple[str, ...] = ()

    def to_dict(self) -> BundleMemberRecord:
        """JSON-ready copy."""
        edits = [e.model_dump() for e in self.edits]
        return BundleMemberRecord(edits=edits, fixes=list(self.fixes), breaks=list(self.breaks))

    @classmethod
    def from_dict(cls, data: BundleMemberRecord) -> BundleMember:
        """Rebuild from `to_dict` output."""
        edits = tuple(parse_edits(data["edits"]))
        return cls(edits, tuple(data["fixes"]), tuple(data.get("breaks", [])))


@dataclass
class BundleState(CheckpointedState):
    """Checkpointed run state of Bundle (JSON-serialisable); the search's memory is the run's
    (`RunView.memory`)."""

    pool: list[str] = field(default_factory=list)
    """The training pool's example ids, in the order drawn (`pool_size` at a time: more are
    drawn once it is scored with no open failure left, `Bundle._grow_pool`)."""
    members: list[BundleMember] = field(default_factory=list)
    waiting: list[BundleMember] = field(default_factory=list)
    """Survivors the audit struck while the bundle was empty: their breaks repeated under
    changed wordings, the only change an empty bundle offers. Each is audited again within
    the bundle once a member joins (`Bundle._readmit`); where none joins before the collecting
    ends, they become the bundle (`Bundle._admit_waiting`)."""
    steps_this_bundle: int = 0
    idle_steps: int = 0
    stale_steps: int = 0
    """Steps in a row that asked nothing new: no model call (every proposer's answer came from
    the response cache, every proposal was already tried or blocked)."""
    tail: bool = False
    """The bundle began in the budget's tail (a whole decision no longer fitted after a step):
    its steps reserve only the decision's first look."""
    scored: int = 0
    """How many pool examples (in pool order) are scored under the incumbent."""

    record_fields: ClassVar[RecordReaders] = {
        "members": BundleMember.from_dict,
        "waiting": BundleMember.from_dict,
    }

    def fixed(self) -> set[str]:
        """The pool failures the collected edits fixed."""
        return {i for m in self.members for i in m.fixes}
