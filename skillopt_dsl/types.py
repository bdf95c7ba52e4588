"""The two records that flow through every part of the library, `Example` and `Prediction`.

The JSON aliases (`JSONValue`, `JSONObject`) and readers (`json_int`, `json_float`) live in
`skillopt_dsl.json_types`, a base module the model layer may import; they are re-exported here,
so `from skillopt_dsl.types import JSONValue` keeps working."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from skillopt_dsl.json_types import JSONObject as JSONObject
from skillopt_dsl.json_types import JSONValue as JSONValue
from skillopt_dsl.json_types import json_float as json_float
from skillopt_dsl.json_types import json_int as json_int


def _frozen(mapping: Mapping[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType(dict(mapping))


@dataclass(frozen=True)
class Example:
    """One dataset item with a stable id, its input fields and its label fields.

    Fields are reachable as attributes (`example.question`), as in DSPy.
    """

    id: str
    inputs: Mapping[str, Any]
    labels: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "inputs", _frozen(self.inputs))
        object.__setattr__(self, "labels", _frozen(self.labels))

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        for part in ("inputs", "labels"):
            values = object.__getattribute__(self, part)
            if name in values:
                return values[name]
        raise AttributeError(f"example {self.id!r} has no field {name!r}")

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: `{"id": ..., "inputs": {...}, "labels": {...}}`."""
        return {"id": self.id, "inputs": dict(self.inputs), "labels": dict(self.labels)}

    def __reduce__(self) -> tuple[Any, ...]:
        return (Example, (self.id, dict(self.inputs), dict(self.labels)))


@dataclass(frozen=True)
class Prediction:
    """A parsed model output. Parsing never raises: a failure is carried in `error`.

    Attributes:
        outputs: the declared output fields; each is `None` when parsing failed. A module may
            add values derived from them (a `TriggerModule`'s `trigger_rate`).
        raw: the completion text exactly as the model returned it.
        error: why parsing (or the call) failed, or `None`.
    """

    outputs: Mapping[str, Any]
    raw: str = ""
    error: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "outputs", _frozen(self.outputs))

    @property
    def ok(self) -> bool:
        """True when the completion parsed into every declared output field."""
        return self.error is None

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        outputs = object.__getattribute__(self, "outputs")
        if name in outputs:
            return outputs[name]
        raise AttributeError(f"prediction has no output field {name!r}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (Prediction, (dict(self.outputs), self.raw, self.error))
