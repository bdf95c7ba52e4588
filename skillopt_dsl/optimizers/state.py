"""What every optimizer's checkpointed state shares: JSON round-trips.

The search memory (rejected edits, struck proposals, evidence, the step counter) is not an
optimizer's: the run owns it (`skillopt_dsl.search_memory.SearchMemory`, `RunView.memory`)."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping
from typing import Self, TypeVar, cast

from skillopt_dsl.json_types import JSONObject
from skillopt_dsl.search_memory import SearchMemory

__all__ = ["CheckpointedState", "as_json", "stored"]

R = TypeVar("R")


class CheckpointedState:
    """Mixin for an optimizer's state dataclass, stored in checkpoint.json as plain JSON:
    `to_dict` copies the plain fields; a state with records adds them in its own
    `to_dict`/`from_dict`."""

    def to_dict(self) -> JSONObject:
        """JSON-ready copy."""
        return {
            f.name: copy.deepcopy(getattr(self, f.name))
            for f in dataclasses.fields(self)  # type: ignore[arg-type]
        }

    @classmethod
    def from_dict(cls, data: JSONObject) -> Self:
        """Rebuild from `to_dict` output. A state checkpointed before the run owned the search
        memory held its fields too; they are the memory's (`SearchMemory.from_legacy` reads
        them) and are skipped here."""
        own = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
        legacy = SearchMemory.field_names() - own
        return cls(**{k: copy.deepcopy(v) for k, v in data.items() if k not in legacy})


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
