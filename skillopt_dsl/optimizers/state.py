"""What every optimizer's checkpointed state shares: JSON round-trips and the rejected-edit memory."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping
from typing import Self, TypeVar, cast

from skillopt_dsl.json_types import JSONObject
from skillopt_dsl.optimizers.proposers import RejectedCandidate, RejectedRecord

__all__ = ["CheckpointedState", "as_json", "stored"]

R = TypeVar("R")


class CheckpointedState:
    """Mixin for an optimizer's state dataclass with a `rejected: list[RejectedCandidate]`
    field (the rejected-edit memory).

    The state is stored in checkpoint.json as plain JSON: `to_dict` copies the plain fields
    and writes the memory in its `RejectedRecord` form; a state with more records adds them
    in its own `to_dict`/`from_dict`.
    """

    rejected: list[RejectedCandidate]

    def to_dict(self) -> JSONObject:
        """JSON-ready copy."""
        plain: JSONObject = {
            f.name: copy.deepcopy(getattr(self, f.name))
            for f in dataclasses.fields(self)  # type: ignore[arg-type]
        }
        return {**plain, "rejected": [as_json(r.to_dict()) for r in self.rejected]}

    @classmethod
    def from_dict(cls, data: JSONObject) -> Self:
        """Rebuild from `to_dict` output (the records as their subclass reads them)."""
        memory = [RejectedCandidate.from_dict(r) for r in stored(data, "rejected", RejectedRecord)]
        return cls(**{**copy.deepcopy(data), "rejected": memory})

    def memory(self) -> list[RejectedCandidate]:
        """The rejected-edit memory (a copy of the list)."""
        return list(self.rejected)


def stored(data: JSONObject, name: str, record: type[R]) -> list[R]:
    """The records a checkpoint holds under `name`, in the JSON form of `record` (a
    `TypedDict` their `to_dict` wrote); none where an older checkpoint lacks the field.

    Raises:
        TypeError: the field is not a list of JSON objects (a checkpoint edited by hand).
    """
    rows = data.get(name, [])
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise TypeError(f"checkpoint field {name!r} is not a list of objects: {rows!r:.200}")
    return cast(list[R], rows)


def as_json(record: Mapping[str, object]) -> JSONObject:
    """A record's `TypedDict` JSON form (its `to_dict`) as the JSON object it is: mypy does
    not count a `TypedDict` as a `dict[str, JSONValue]`, whose keys it cannot know."""
    return cast(JSONObject, record)
