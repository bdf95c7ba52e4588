"""What every optimizer's checkpointed state shares: JSON round-trips.

The search memory (rejected edits, struck proposals, evidence, the step counter) is not an
optimizer's: the run owns it (`skillopt_dsl.search_memory.SearchMemory`, `RunView.memory`)."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Self, TypeAlias, TypeVar, cast

from skillopt_dsl.json_types import JSONObject, JSONValue
from skillopt_dsl.search_memory import SearchMemory

__all__ = ["CheckpointedState", "RecordReaders", "as_json", "stored"]

R = TypeVar("R")

RecordReaders: TypeAlias = Mapping[str, Callable[[Any], object]]
"""A state's fields that hold lists of typed records, each with the reader of one record's
JSON form (its `from_dict`)."""


class CheckpointedState:
    """Mixin for an optimizer's state dataclass, stored in checkpoint.json as plain JSON:
    `to_dict` copies the plain fields and writes the typed records of the fields that
    `record_fields` names with their own `to_dict`; `from_dict` reads them back with the
    reader `record_fields` gives."""

    record_fields: ClassVar[RecordReaders] = {}
    """The fields that hold typed records (none by default); the records write themselves."""

    def to_dict(self) -> JSONObject:
        """JSON-ready copy."""
        return {f.name: self._json(f.name) for f in dataclasses.fields(self)}  # type: ignore[arg-type]

    def _json(self, name: str) -> JSONValue:
        """Field `name` as JSON: its records' `to_dict`, or a copy of a plain value."""
        value = getattr(self, name)
        if name in self.record_fields:
            return [as_json(record.to_dict()) for record in value]
        return copy.deepcopy(value)

    @classmethod
    def from_dict(cls, data: JSONObject) -> Self:
        """Rebuild from `to_dict` output; `{}` (a fresh run's state) gives a fresh state. A
        state checkpointed before the run owned the search memory held its fields too; they are
        the memory's (`SearchMemory.from_legacy` reads them) and are skipped here."""
        own = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
        legacy = SearchMemory.field_names() - own
        plain = {k: copy.deepcopy(v) for k, v in data.items() if k not in legacy}
        records = cls.record_fields.items()
        typed = {name: [read(r) for r in stored(data, name, dict)] for name, read in records}
        return cls(**{**plain, **typed})


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
