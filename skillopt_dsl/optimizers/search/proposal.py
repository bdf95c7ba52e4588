"""A proposal with its evidence, at each point of the search step.

- `Fitted`: a proposal fitted to a step's room (`SearchStep.fit`);
- `Tried`: a fitted proposal tried alone on the batch that produced it (`SearchStep.try_alone`),
  with its screen and its evidence summed over every earlier screen of the same edit;
- `ScreenedProposal`: one that passed its screen, on trial or joined to the working candidate,
  with its summed training evidence (checkpointed as a `ProposalRecord`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any, NotRequired, Self, TypedDict, cast

from skillopt_dsl.json_types import JSONObject
from skillopt_dsl.optimizers.proposers import EditGroup
from skillopt_dsl.optimizers.search.screening import ScreenResult
from skillopt_dsl.search_memory import EditEvidence
from skillopt_dsl.skill import Edit, Skill, parse_edits

__all__ = ["Fitted", "ProposalRecord", "ScreenedProposal", "Tried"]

_COUNTS = frozenset({"screens", "rivals", "gated"})
"""`ScreenedProposal`'s optional counts, which its record holds only when set."""


@dataclass(frozen=True)
class Fitted:
    """A proposal fitted to a step's room: the edits kept (`clip_to_budget`), their memory
    `key`, and the base skill with them applied."""

    group: EditGroup
    kept: tuple[Edit, ...]
    key: str
    candidate: Skill


@dataclass(frozen=True)
class Tried:
    """A fitted proposal tried alone on the batch that produced it: the screen's `result`, its
    `evidence` summed with every earlier screen of the same edit, and whether it was `struck`
    (its claim failed, or its evidence rules out the gain the gate certifies)."""

    fitted: Fitted
    result: ScreenResult
    evidence: EditEvidence
    struck: bool


class ProposalRecord(TypedDict):
    """A `ScreenedProposal` as checkpoints hold it (`trials`, `pending`)."""

    source: str
    failure_driven: bool
    rationale: str
    edits: list[JSONObject]
    key: str
    net: float
    scored: int
    screens: NotRequired[int]
    rivals: NotRequired[int]
    gated: NotRequired[int]


@dataclass(frozen=True)
class ScreenedProposal:
    """A proposal (an edit group, by its memory `key`) that passed its screen, on trial or
    joined to the working candidate: its edits as fitted to the step's room, who proposed it
    and why, and its summed training evidence (`net` gain over `scored` examples).

    `screens`: screens it has had since it went on trial (None: it joined unscreened);
    `rivals`: proposals screened on its batch, it among them (None: not counted); `gated`:
    the gate strikes it came back on trial with (None: never rejected in a bundle)."""

    key: str
    edits: tuple[Edit, ...]
    source: str
    failure_driven: bool
    rationale: str
    net: float
    scored: int
    screens: int | None = None
    rivals: int | None = None
    gated: int | None = None

    @classmethod
    def of(
        cls, group: EditGroup, edits: Sequence[Edit], *, key: str, net: float, scored: int
    ) -> Self:
        """The proposal `group` with its fitted `edits` and its evidence so far."""
        return cls(
            key, tuple(edits), group.source, group.failure_driven, group.rationale, net, scored
        )

    @property
    def group(self) -> EditGroup:
        """The proposal as the edit group it was (without the batch it addressed)."""
        return EditGroup(self.edits, self.source, self.failure_driven, self.rationale)

    def to_dict(self) -> ProposalRecord:
        """The checkpoint's JSON form (the optional counts only when set)."""
        given = {k: v for k, v in asdict(self).items() if v is not None or k not in _COUNTS}
        return cast(ProposalRecord, {**given, "edits": [e.model_dump() for e in self.edits]})

    @classmethod
    def from_dict(cls, data: ProposalRecord) -> Self:
        """Rebuild from `to_dict` output."""
        row = cast(Mapping[str, Any], data)
        # an optional count its record lacks keeps its default (None)
        given = {f.name: row[f.name] for f in fields(cls) if f.name in row or f.name not in _COUNTS}
        given["edits"] = tuple(parse_edits(row["edits"]))
        return cls(**given)
