"""The JSON aliases, used where a value is genuinely arbitrary JSON (`JSONValue`, `JSONObject`),
and the two readers of a number from JSON (`json_int`, `json_float`).

A base module: it imports nothing of the package, so any layer may use it (the model layer,
`skillopt_dsl.lm`, reads its ledger journal with it without knowing the module's nouns,
`Example` and `Prediction`, which live in `skillopt_dsl.types`; that module re-exports these
names, so `from skillopt_dsl.types import JSONValue` keeps working)."""

from __future__ import annotations

from typing import TypeAlias

__all__ = ["JSONObject", "JSONValue", "json_float", "json_int"]

JSONValue: TypeAlias = bool | int | float | str | list["JSONValue"] | dict[str, "JSONValue"] | None
"""Any value `json.loads` can return: the type of arbitrary JSON, which is not `Any`."""

JSONObject: TypeAlias = dict[str, JSONValue]
"""A JSON object with arbitrary values (a JSON-ready record whose shape is open)."""


def json_int(value: object) -> int:
    """A field read from JSON as an int (a number or a numeric string, as `int()` takes it);
    anything else raises `TypeError`, as `int()` does."""
    if isinstance(value, int | float | str):
        return int(value)
    raise TypeError(f"expected a number, got {value!r}")


def json_float(value: object) -> float:
    """A field read from JSON as a float (a number or a numeric string, as `float()` takes
    it); anything else raises `TypeError`, as `float()` does."""
    if isinstance(value, int | float | str):
        return float(value)
    raise TypeError(f"expected a number, got {value!r}")
