"""Rows to examples: which columns are inputs and labels, each row as an `Example`, and the
content-hash ids.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias

from skillopt_dsl.errors import DataError, UserInputError
from skillopt_dsl.types import Example

if TYPE_CHECKING:
    from skillopt_dsl.module import SkillModule

logger = logging.getLogger("skillopt_dsl.data")

Row: TypeAlias = dict[str, Any]


@dataclass(frozen=True)
class Fields:
    inputs: tuple[str, ...]
    labels: tuple[str, ...]
    id_field: str | None
    optional_id: str | None = None

    def __post_init__(self) -> None:
        if not self.inputs:
            raise UserInputError("input_fields is empty; name at least one input column")
        both = sorted(set(self.inputs) & set(self.labels))
        if both:
            raise UserInputError(f"columns {both} are both input and label fields; pick one")


def to_examples(source: Any, fields: Fields, *, where: str) -> list[Example]:
    rows = _rows(source, where=where)
    _check_columns(rows, fields, where=where)
    examples: list[Example] = []
    for index, row in enumerate(rows):
        inputs = {name: _value(row, name, index, where=where) for name in fields.inputs}
        labels = {name: _value(row, name, index, where=where) for name in fields.labels}
        examples.append(
            Example(id=_explicit_id(row, index, fields, where), inputs=inputs, labels=labels)
        )
    return fill_content_ids(examples, where=where)


def as_example(item: Any, index: int, declared: tuple[str, ...], where: str) -> Example:
    """One row as an `Example`; an empty id means "give it a content hash"."""
    if isinstance(item, Example):
        return item
    if _is_dspy_example(item):
        row = _dspy_row(item)
        inputs = dspy_input_keys(item) or declared
        if not inputs:
            raise DataError(
                f"{where} row {index} is a dspy.Example without input keys; call "
                ".with_inputs('field', ...) on it, or pass a module that declares its inputs"
            )
        fields = Fields(tuple(inputs), tuple(k for k in row if k not in inputs), None)
        explicit = ""
    elif isinstance(item, Mapping):
        if not declared:
            raise UserInputError(
                f"{where} row {index} is a plain dict; compile needs the module's declared "
                "input fields to split it into inputs and labels (or pass Examples)"
            )
        row = dict(item)
        labels = tuple(k for k in row if k not in declared and k != "id")
        fields = Fields(declared, labels, None, optional_id="id")
        explicit = _explicit_id(row, index, fields, where)
    else:
        raise DataError(
            f"{where} row {index} is a {type(item).__name__}; pass skillopt_dsl.Example, "
            "dspy.Example or dict rows"
        )
    _check_columns([row], fields, where=f"{where} row {index}")
    return Example(
        id=explicit,
        inputs={name: _value(row, name, index, where=where) for name in fields.inputs},
        labels={name: _value(row, name, index, where=where) for name in fields.labels},
    )


def _is_dspy_example(item: Any) -> bool:
    """Duck-typed `dspy.Example`: it has `toDict()`, `inputs()` and `labels()`."""
    return all(callable(getattr(item, name, None)) for name in ("toDict", "inputs", "labels"))


def dspy_input_keys(item: Any) -> tuple[str, ...]:
    """The input keys a `dspy.Example` was given with `.with_inputs(...)`, in the example's own
    key order; () when none were set."""
    keys = getattr(item, "_input_keys", None)
    if not keys or not _is_dspy_example(item):
        return ()
    return tuple(k for k in _dspy_row(item) if k in keys)


def _dspy_row(item: Any) -> Row:
    """A `dspy.Example` as a plain dict, without DSPy's bookkeeping keys (`dspy_uuid`, ...)."""
    return {k: v for k, v in item.toDict().items() if not str(k).startswith("dspy_")}


def resolve_fields(
    loaded: Any,
    input_fields: Sequence[str] | None,
    label_fields: Sequence[str] | None,
    module: SkillModule | None,
    id_field: str | None,
) -> Fields:
    """The input/label columns: as given, else from the module, else from the first row."""
    if input_fields is not None and label_fields is not None:
        return Fields(tuple(input_fields), tuple(label_fields), id_field)
    if module is not None:
        inputs = tuple(input_fields) if input_fields is not None else tuple(module.input_fields)
        labels = tuple(label_fields) if label_fields is not None else tuple(module.output_fields)
        return Fields(inputs, labels, id_field)
    first = _first_row(loaded)
    inputs = tuple(input_fields) if input_fields is not None else dspy_input_keys(first)
    if not inputs:
        raise UserInputError(
            "input_fields not given and cannot be inferred: pass input_fields=[...] and "
            "label_fields=[...], or module= (its declared fields), or dspy.Example rows "
            "marked with .with_inputs(...)"
        )
    if label_fields is not None:
        return Fields(inputs, tuple(label_fields), id_field)
    columns = _row(first, 0, where="dataset") if first is not None else {}
    labels = tuple(k for k in columns if k not in inputs and k != id_field)
    return Fields(inputs, labels, id_field)


def _first_row(loaded: Any) -> Any:
    """The first row of a list, a `Dataset` or the first split of a mapping; None if empty."""
    if isinstance(loaded, Mapping):
        loaded = next(iter(loaded.values()), [])
    if isinstance(loaded, str | bytes) or not isinstance(loaded, Iterable):
        return None
    return next(iter(loaded), None)


def _check_columns(rows: list[Row], fields: Fields, *, where: str) -> None:
    columns: dict[str, None] = {}
    for row in rows:
        columns.update(dict.fromkeys(row))
    wanted = [*fields.inputs, *fields.labels]
    if fields.id_field is not None:
        wanted.append(fields.id_field)
    missing = [name for name in wanted if name not in columns]
    if missing and rows:
        raise DataError(
            f"{where}: missing columns {missing}; the data has columns {list(columns)}. "
            "Fix input_fields/label_fields/id_field or rename the columns."
        )


def _value(row: Row, name: str, index: int, *, where: str) -> Any:
    if name not in row:
        raise DataError(f"{where} row {index} has no column {name!r}; give every row a value")
    value = row[name]
    if value is None:
        raise DataError(f"{where} row {index}: column {name!r} is None; fill or drop that row")
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise DataError(
            f"{where} row {index}: column {name!r} holds a {type(value).__name__} that is not "
            f"JSON-serialisable ({exc}); convert it to str, number, bool, list or dict"
        ) from exc
    return value


def _explicit_id(row: Row, index: int, fields: Fields, where: str) -> str:
    """The row's id from `id_field` (or SkillOpt's optional `id` key); "" means hash it later."""
    name = fields.id_field or fields.optional_id
    if name is None or (fields.id_field is None and name not in row):
        return ""
    value = row.get(name)
    if isinstance(value, bool) or not isinstance(value, str | int) or value == "":
        raise DataError(
            f"{where} row {index}: id column {name!r} is {value!r}; ids must be non-empty "
            "strings or integers"
        )
    return str(value)


def content_hash(inputs: Mapping[str, Any], labels: Mapping[str, Any]) -> str:
    """First 12 hex characters of the sha1 of the canonical JSON of inputs and labels."""
    payload = json.dumps(
        {"inputs": dict(inputs), "labels": dict(labels)},
        sort_keys=True,
        ensure_ascii=False,
        separators=(",", ":"),
    )
    return hashlib.sha1(payload.encode("utf-8")).hexdigest()[:12]


def fill_content_ids(examples: list[Example], *, where: str) -> list[Example]:
    """Give hash ids to examples without one; identical content gets `-1`, `-2`, ... suffixes."""
    seen: dict[str, int] = {}
    result: list[Example] = []
    for example in examples:
        if example.id:
            result.append(example)
            continue
        base = content_hash(example.inputs, example.labels)
        count = seen.get(base, 0)
        seen[base] = count + 1
        new_id = base if count == 0 else f"{base}-{count}"
        result.append(Example(id=new_id, inputs=example.inputs, labels=example.labels))
    duplicates = sum(count - 1 for count in seen.values())
    if duplicates:
        logger.warning("%s: %d rows repeat the content of an earlier row", where, duplicates)
    return result


def _rows(source: Any, *, where: str) -> list[Row]:
    """Materialise a `Dataset` or a sequence of row-like objects as a list of plain dicts."""
    to_list = getattr(source, "to_list", None)
    if callable(to_list) and hasattr(source, "column_names"):
        return list(to_list())
    if isinstance(source, str | bytes | Mapping) or not isinstance(source, Iterable):
        raise UserInputError(
            f"{where}: expected a list of dicts, dspy.Example objects or a datasets.Dataset, "
            f"got a {type(source).__name__}"
        )
    return [_row(item, index, where=where) for index, item in enumerate(source)]


def _row(item: Any, index: int, *, where: str) -> Row:
    if isinstance(item, Mapping):
        return dict(item)
    if _is_dspy_example(item):
        return _dspy_row(item)
    to_dict = getattr(item, "toDict", None)
    if callable(to_dict):
        return dict(to_dict())
    items = getattr(item, "items", None)
    if callable(items):
        return dict(items())
    raise DataError(
        f"{where} row {index} is a {type(item).__name__}; each row must be a dict or an object "
        "with .toDict() or .items() (such as dspy.Example)"
    )
