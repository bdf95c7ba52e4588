"""The typed edits an optimizer proposes to a `Skill` (`Add`, `Replace`, `Delete`) and the report
of applying them (`EditOutcome`, `ApplyReport`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

Status = Literal["applied", "not_matched", "refused"]
MatchKind = Literal["exact", "whitespace", "fuzzy", "heading", "end"]


class _EditBase(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    rationale: str = ""
    """Why the proposer wants this edit; kept in the run log, never applied to the text."""


class Add(_EditBase):
    """Insert `text` as new lines.

    `after` is a heading (its title ``"Rules"`` or its full line ``"## Rules"``: the text goes at
    the end of that section, before the next heading of the same or a higher level) or else an
    anchor text (the text goes on a new line after the line where the anchor ends). `None`
    appends at the end of the document.
    """

    kind: Literal["add"] = "add"
    text: str
    after: str | None = None


class Replace(_EditBase):
    """Replace the text matching `old` with `new`."""

    kind: Literal["replace"] = "replace"
    old: str
    new: str


class Delete(_EditBase):
    """Delete the text matching `old` (with its line break when it is a whole line)."""

    kind: Literal["delete"] = "delete"
    old: str


Edit = Annotated[Add | Replace | Delete, Field(discriminator="kind")]
EditList: TypeAdapter[list[Edit]] = TypeAdapter(list[Edit])


def parse_edits(data: object) -> list[Edit]:
    """Validate a list of edits from JSON text/bytes or from Python objects (dicts or edits).

    Raises:
        pydantic.ValidationError: an item has an unknown ``kind``, a missing or extra field.
    """
    if isinstance(data, str | bytes | bytearray):
        return EditList.validate_json(data)
    return EditList.validate_python(data)


@dataclass(frozen=True)
class EditOutcome:
    """What happened to one edit.

    Attributes:
        edit: the edit as proposed.
        status: ``applied``, ``not_matched`` (its anchor was not found or was ambiguous) or
            ``refused`` (found, but not allowed: protected region, no-op, empty anchor).
        reason: a human-readable explanation (empty only for a plain exact application).
        match: how the anchor was located, or `None` when it was not.
        similarity: the fuzzy similarity (for fuzzy matches and fuzzy misses), else `None`.
    """

    edit: Edit
    status: Status
    reason: str
    match: MatchKind | None = None
    similarity: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of this outcome."""
        return {
            "edit": self.edit.model_dump(mode="json"),
            "status": self.status,
            "reason": self.reason,
            "match": self.match,
            "similarity": self.similarity,
        }


@dataclass(frozen=True)
class ApplyReport:
    """The outcomes of `Skill.apply`, one per edit, in the order the edits were given."""

    outcomes: tuple[EditOutcome, ...]

    def _with(self, status: Status) -> list[EditOutcome]:
        return [outcome for outcome in self.outcomes if outcome.status == status]

    @property
    def applied(self) -> list[EditOutcome]:
        """Outcomes of edits that changed the text."""
        return self._with("applied")

    @property
    def not_matched(self) -> list[EditOutcome]:
        """Outcomes of edits whose anchor was not found (or was ambiguous)."""
        return self._with("not_matched")

    @property
    def refused(self) -> list[EditOutcome]:
        """Outcomes of edits that were found but not allowed."""
        return self._with("refused")

    @property
    def all_applied(self) -> bool:
        """True when every edit was applied (vacuously true for no edits)."""
        return all(outcome.status == "applied" for outcome in self.outcomes)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: counts and every outcome."""
        return {
            "applied": len(self.applied),
            "not_matched": len(self.not_matched),
            "refused": len(self.refused),
            "outcomes": [outcome.to_dict() for outcome in self.outcomes],
        }
