"""Datasets in, typed and seeded `Splits` out.

`load_splits` accepts a Hugging Face dataset name or builder (`"json"`, `"csv"`, `"parquet"` with
`data_files`), a `datasets.Dataset`, a `datasets.DatasetDict` (or any mapping of split name to
rows), a list of dicts, or a list of `dspy.Example` objects. Every row becomes an `Example` with a
stable id: the `id_field` value when given, else a content hash that does not depend on the seed.
Which columns are inputs and which are labels is given (`input_fields` / `label_fields`), or
inferred from a `module=` (its declared fields) or from `dspy.Example.inputs()`.

`as_examples` is what `compile` calls on the lists it is given: `Example`s pass through,
`dspy.Example`s and plain dicts become `Example`s with content-hash ids.

Splitting is either by `sizes` (fractions or counts of one pool, shuffled with
`random.Random(seed)`, so the same seed gives the same splits on every machine) or by
`split_names` (the dataset's own splits, kept in their order).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

from skillopt_dsl.errors import DataError, UserInputError
from skillopt_dsl.types import Example

if TYPE_CHECKING:
    from skillopt_dsl.module import SkillModule

__all__ = [
    "DEFAULT_SIZES",
    "Example",
    "Splits",
    "as_examples",
    "coerce_splits",
    "content_hash",
    "from_hf",
    "load_skillopt_dir",
    "load_splits",
]

logger = logging.getLogger(__name__)

Row: TypeAlias = dict[str, Any]
Sizes: TypeAlias = tuple[float, float, float] | tuple[int, int, int]
SplitNames: TypeAlias = tuple[str, str, str | None]

DEFAULT_SIZES: tuple[float, float, float] = (0.5, 0.2, 0.3)
"""Fractions (train, val, test) used when a single pool is split and `sizes` is not given."""

_SPLIT_KEYS = ("train", "val", "test")
_MAX_NAMED_IDS = 5


@dataclass(frozen=True)
class Splits:
    """Three disjoint lists of examples: train (for proposals), val (for the gate), test."""

    train: list[Example]
    val: list[Example]
    test: list[Example]

    def summary(self) -> str:
        """One line with the split sizes, e.g. `"train=30 val=30 test=50"`."""
        return f"train={len(self.train)} val={len(self.val)} test={len(self.test)}"


# ---------------------------------------------------------------------------------------------
# Public entry points


def load_splits(
    source: Any,
    *,
    data_files: Any = None,
    split: str | None = None,
    seed: int = 0,
    sizes: Sizes | None = None,
    split_names: SplitNames | None = None,
    input_fields: Sequence[str] | None = None,
    label_fields: Sequence[str] | None = None,
    module: SkillModule | None = None,
    id_field: str | None = None,
    **load_kwargs: Any,
) -> Splits:
    """Load a dataset and cut it into seeded, validated train/val/test splits.

    Args:
        source: a Hugging Face dataset name or builder string (`"json"`, `"csv"`, `"parquet"`;
            loaded with `datasets.load_dataset`), a `datasets.Dataset`, a `datasets.DatasetDict`
            or other mapping of split name to rows, a list of dicts, or a list of objects with
            `toDict()` or `items()` (such as `dspy.Example`).
        data_files: passed to `datasets.load_dataset` (string sources only).
        split: for string sources, the split to load; for a `DatasetDict`, the split to use as
            the pool that `sizes` cuts.
        seed: seeds the `random.Random` that shuffles the pool (and subsamples named splits).
        sizes: three fractions summing to at most 1, or three counts, for (train, val, test).
            Defaults to `DEFAULT_SIZES` when one pool is split. With `split_names`, only counts
            are allowed: each named split is shuffled and cut to its count.
        split_names: `(train_name, val_name, test_name)` to use a `DatasetDict`'s own splits;
            `test_name` may be `None` for an empty test split.
        input_fields: columns that become `Example.inputs`. When not given: the `module`'s
            declared input fields, else the input keys of the first `dspy.Example` row (its
            `.inputs()`, set with `.with_inputs(...)`).
        label_fields: columns that become `Example.labels`. When not given: the `module`'s
            declared output fields, else every other column of the first row (but `id_field`).
        module: a `SkillModule` whose declared fields name the input and label columns.
        id_field: column holding a unique id; without it ids are content hashes.
        **load_kwargs: further keyword arguments for `datasets.load_dataset`.

    Raises:
        DataError: missing columns, a field with a missing or non-JSON value, empty train or val,
            overlapping or duplicate ids, or sizes that do not fit the data.
        UserInputError: an unusable combination of arguments, or fields that cannot be inferred.
    """
    loaded = _resolve_source(source, data_files=data_files, split=split, load_kwargs=load_kwargs)
    fields = _resolve_fields(loaded, input_fields, label_fields, module, id_field)
    if split_names is not None:
        splits = _split_named(loaded, split_names, sizes=sizes, seed=seed, fields=fields)
    else:
        pool = _single_pool(loaded, split=split if not isinstance(source, str) else None)
        examples = _to_examples(pool, fields, where="dataset")
        splits = _split_pool(examples, sizes if sizes is not None else DEFAULT_SIZES, seed)
    _check_splits(splits)
    logger.info("loaded splits: %s", splits.summary())
    return splits


def from_hf(
    name: str,
    *,
    input_fields: Sequence[str] | None = None,
    label_fields: Sequence[str] | None = None,
    module: SkillModule | None = None,
    split: str | None = None,
    split_names: SplitNames | None = None,
    sizes: Sizes | None = None,
    seed: int = 0,
    id_field: str | None = None,
    data_files: Any = None,
    **load_kwargs: Any,
) -> Splits:
    """Load a Hugging Face Hub dataset by name (e.g. `"gsm8k"` with `name="main"` in kwargs).

    The first use downloads the dataset and needs network access; later uses read the local
    cache and also work with `HF_DATASETS_OFFLINE=1`. Local builders (`"json"` with
    `data_files`) never need the network. See `load_splits` for every argument.
    """
    if not isinstance(name, str) or not name:
        raise UserInputError(f"from_hf needs a dataset name string, got {name!r}")
    return load_splits(
        name,
        data_files=data_files,
        split=split,
        seed=seed,
        sizes=sizes,
        split_names=split_names,
        input_fields=input_fields,
        label_fields=label_fields,
        module=module,
        id_field=id_field,
        **load_kwargs,
    )


def load_skillopt_dir(
    path: str | Path,
    *,
    input_fields: Sequence[str],
    label_fields: Sequence[str],
) -> Splits:
    """Load microsoft/SkillOpt's split layout: `train/`, `val/` and optional `test/` folders.

    Each folder holds `.json` files (one item object or a list of items) and/or `.jsonl` files
    (one item per line), read in file-name order. An item's `id` key becomes its id; items
    without one get a content hash.
    """
    root = Path(path)
    if not root.is_dir():
        raise DataError(f"SkillOpt split directory {str(root)!r} does not exist or is not a folder")
    parts: dict[str, list[Example]] = {}
    for key in _SPLIT_KEYS:
        folder = root / key
        if not folder.is_dir():
            if key == "test":
                parts[key] = []
                continue
            raise DataError(
                f"{str(root)!r} has no {key}/ folder; a SkillOpt split directory needs "
                "train/ and val/ (test/ is optional), each with .json or .jsonl files"
            )
        rows = _read_split_folder(folder)
        fields = _Fields(tuple(input_fields), tuple(label_fields), None, optional_id="id")
        parts[key] = _to_examples(rows, fields, where=f"{key}/")
    splits = Splits(parts["train"], parts["val"], parts["test"])
    _check_splits(splits)
    return splits


def as_examples(
    items: Iterable[Any], *, module: SkillModule | None = None, where: str = "examples"
) -> list[Example]:
    """Turn what a user passed to `compile` into `Example`s (what `compile` calls on its lists).

    An `Example` passes through unchanged. A `dspy.Example` takes its inputs from `.inputs()`
    (set with `.with_inputs(...)`; without them, from the `module`'s declared input fields) and
    its labels from the other keys. A plain dict takes the `module`'s declared input fields as
    inputs and every other key as labels; an `id` key is its id. Rows without an id get the
    content hash of their inputs and labels, so the same row has the same id in every list
    (a row shared by train and val is then caught as a leak).

    Raises:
        DataError: a row of an unknown kind, a missing input field or a non-JSON value.
        UserInputError: `items` is not a list of rows, or a dict row comes without a `module`.
    """
    if isinstance(items, str | bytes | Mapping) or not isinstance(items, Iterable):
        raise UserInputError(
            f"{where}: expected a list of Examples, dspy.Examples or dicts, "
            f"got a {type(items).__name__}"
        )
    declared = tuple(getattr(module, "input_fields", None) or ())
    converted = [_as_example(item, index, declared, where) for index, item in enumerate(items)]
    return _fill_content_ids(converted, where=where)


def coerce_splits(
    module: Any,
    trainset: Iterable[Any],
    valset: Iterable[Any],
    testset: Iterable[Any] | None,
) -> tuple[list[Example], list[Example], list[Example] | None]:
    """`compile`'s three lists as `Example`s (see `as_examples`); `testset` may be None."""
    owner = module if hasattr(module, "input_fields") else None
    train = as_examples(trainset, module=owner, where="trainset")
    val = as_examples(valset, module=owner, where="valset")
    test = None if testset is None else as_examples(testset, module=owner, where="testset")
    return train, val, test


# ---------------------------------------------------------------------------------------------
# Sources


def _resolve_source(
    source: Any, *, data_files: Any, split: str | None, load_kwargs: Mapping[str, Any]
) -> Any:
    """Turn `source` into a list of rows, a `Dataset`, or a mapping of split name to rows."""
    if isinstance(source, str):
        return _load_hf(source, data_files=data_files, split=split, load_kwargs=load_kwargs)
    if data_files is not None or load_kwargs:
        extra = sorted(load_kwargs) + (["data_files"] if data_files is not None else [])
        raise UserInputError(
            f"{', '.join(extra)} only apply when `source` is a dataset name or builder string; "
            f"got a {type(source).__name__}. Drop these arguments."
        )
    return source


def _load_hf(
    name: str, *, data_files: Any, split: str | None, load_kwargs: Mapping[str, Any]
) -> Any:
    import datasets

    try:
        return datasets.load_dataset(name, data_files=data_files, split=split, **load_kwargs)
    except OSError as exc:  # FileNotFoundError, ConnectionError (offline or unknown dataset)
        raise DataError(
            f"could not load dataset {name!r} (data_files={data_files!r}, split={split!r}): "
            f"{exc}. Check the name and paths; a Hub dataset needs network access on first use."
        ) from exc


def _single_pool(loaded: Any, *, split: str | None) -> Any:
    """The one collection of rows that `sizes` will cut."""
    if not isinstance(loaded, Mapping):
        if split is not None:
            raise UserInputError(
                f"split={split!r} only applies to dataset names and DatasetDicts; "
                f"got a {type(loaded).__name__}. Drop `split`."
            )
        return loaded
    names = list(loaded)
    if split is not None:
        if split not in loaded:
            raise DataError(f"split {split!r} not found; the dataset has splits {names}")
        return loaded[split]
    if len(names) == 1:
        return loaded[names[0]]
    raise UserInputError(
        f"the dataset has several splits {names}; pass split_names=(train, val, test) to use "
        "them, or split='<name>' to cut one of them with `sizes`"
    )


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


# ---------------------------------------------------------------------------------------------
# Rows to examples


@dataclass(frozen=True)
class _Fields:
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


def _to_examples(source: Any, fields: _Fields, *, where: str) -> list[Example]:
    rows = _rows(source, where=where)
    _check_columns(rows, fields, where=where)
    examples: list[Example] = []
    for index, row in enumerate(rows):
        inputs = {name: _value(row, name, index, where=where) for name in fields.inputs}
        labels = {name: _value(row, name, index, where=where) for name in fields.labels}
        examples.append(
            Example(id=_explicit_id(row, index, fields, where), inputs=inputs, labels=labels)
        )
    return _fill_content_ids(examples, where=where)


def _as_example(item: Any, index: int, declared: tuple[str, ...], where: str) -> Example:
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
        fields = _Fields(tuple(inputs), tuple(k for k in row if k not in inputs), None)
        explicit = ""
    elif isinstance(item, Mapping):
        if not declared:
            raise UserInputError(
                f"{where} row {index} is a plain dict; compile needs the module's declared "
                "input fields to split it into inputs and labels (or pass Examples)"
            )
        row = dict(item)
        labels = tuple(k for k in row if k not in declared and k != "id")
        fields = _Fields(declared, labels, None, optional_id="id")
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


def _resolve_fields(
    loaded: Any,
    input_fields: Sequence[str] | None,
    label_fields: Sequence[str] | None,
    module: SkillModule | None,
    id_field: str | None,
) -> _Fields:
    """The input/label columns: as given, else from the module, else from the first row."""
    if input_fields is not None and label_fields is not None:
        return _Fields(tuple(input_fields), tuple(label_fields), id_field)
    if module is not None:
        inputs = tuple(input_fields) if input_fields is not None else tuple(module.input_fields)
        labels = tuple(label_fields) if label_fields is not None else tuple(module.output_fields)
        return _Fields(inputs, labels, id_field)
    first = _first_row(loaded)
    inputs = tuple(input_fields) if input_fields is not None else dspy_input_keys(first)
    if not inputs:
        raise UserInputError(
            "input_fields not given and cannot be inferred: pass input_fields=[...] and "
            "label_fields=[...], or module= (its declared fields), or dspy.Example rows "
            "marked with .with_inputs(...)"
        )
    if label_fields is not None:
        return _Fields(inputs, tuple(label_fields), id_field)
    columns = _row(first, 0, where="dataset") if first is not None else {}
    labels = tuple(k for k in columns if k not in inputs and k != id_field)
    return _Fields(inputs, labels, id_field)


def _first_row(loaded: Any) -> Any:
    """The first row of a list, a `Dataset` or the first split of a mapping; None if empty."""
    if isinstance(loaded, Mapping):
        loaded = next(iter(loaded.values()), [])
    if isinstance(loaded, str | bytes) or not isinstance(loaded, Iterable):
        return None
    return next(iter(loaded), None)


def _check_columns(rows: list[Row], fields: _Fields, *, where: str) -> None:
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


def _explicit_id(row: Row, index: int, fields: _Fields, where: str) -> str:
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


def _fill_content_ids(examples: list[Example], *, where: str) -> list[Example]:
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


# ---------------------------------------------------------------------------------------------
# Splitting


def _split_pool(examples: list[Example], sizes: Sizes, seed: int) -> Splits:
    counts = _counts(sizes, len(examples))
    order = list(range(len(examples)))
    random.Random(seed).shuffle(order)
    shuffled = [examples[i] for i in order]
    n_train, n_val, n_test = counts
    return Splits(
        train=shuffled[:n_train],
        val=shuffled[n_train : n_train + n_val],
        test=shuffled[n_train + n_val : n_train + n_val + n_test],
    )


def _counts(sizes: Any, n: int) -> tuple[int, int, int]:
    """Convert `sizes` (three fractions or three counts) into three row counts for `n` rows."""
    if not isinstance(sizes, Sequence) or len(sizes) != 3:
        raise DataError(f"sizes must be three numbers (train, val, test), got {sizes!r}")
    if any(isinstance(s, bool) or not isinstance(s, int | float) for s in sizes):
        raise DataError(f"sizes must be numbers, got {sizes!r}")
    if any(s < 0 for s in sizes):
        raise DataError(f"sizes must not be negative, got {sizes!r}")
    if all(isinstance(s, int) for s in sizes):
        if sum(sizes) > n:
            raise DataError(
                f"sizes {tuple(sizes)} ask for {sum(sizes)} rows but the dataset has {n}; "
                "ask for fewer rows or pass fractions such as (0.5, 0.2, 0.3)"
            )
        return (sizes[0], sizes[1], sizes[2])
    if any(s > 1 for s in sizes):
        raise DataError(
            f"sizes {tuple(sizes)} mix counts and fractions; pass three ints (counts) "
            "or three fractions that sum to at most 1"
        )
    total = float(sum(sizes))
    if total > 1 + 1e-9:
        raise DataError(f"fractions {tuple(sizes)} sum to {total:g}; they must sum to at most 1")
    n_train, n_val = math.floor(sizes[0] * n), math.floor(sizes[1] * n)
    whole = math.isclose(total, 1.0)
    n_test = n - n_train - n_val if whole else math.floor(sizes[2] * n)
    return (n_train, n_val, n_test)


def _split_named(
    loaded: Any, names: SplitNames, *, sizes: Sizes | None, seed: int, fields: _Fields
) -> Splits:
    if not isinstance(loaded, Mapping):
        raise UserInputError(
            f"split_names needs a DatasetDict or a mapping of split name to rows, got a "
            f"{type(loaded).__name__}; use sizes=(...) to cut a single dataset"
        )
    if not isinstance(names, Sequence) or len(names) != 3:
        raise UserInputError(f"split_names must be (train, val, test_or_None), got {names!r}")
    caps = _named_caps(sizes)
    parts: list[list[Example]] = []
    for key, name, cap in zip(_SPLIT_KEYS, names, caps, strict=True):
        if name is None and key == "test":
            parts.append([])
            continue
        if name not in loaded:
            raise DataError(
                f"{key} split {name!r} not found; the dataset has splits {list(loaded)}"
            )
        examples = _to_examples(loaded[name], fields, where=f"split {name!r}")
        parts.append(_subsample(examples, cap, seed, name=str(name)))
    return Splits(parts[0], parts[1], parts[2])


def _named_caps(sizes: Sizes | None) -> tuple[int | None, int | None, int | None]:
    if sizes is None:
        return (None, None, None)
    if (
        not isinstance(sizes, Sequence)
        or len(sizes) != 3
        or any(isinstance(s, bool) or not isinstance(s, int) or s < 0 for s in sizes)
    ):
        raise DataError(
            f"with split_names, sizes must be three non-negative ints (rows to keep from each "
            f"split), got {sizes!r}"
        )
    return (int(sizes[0]), int(sizes[1]), int(sizes[2]))


def _subsample(examples: list[Example], cap: int | None, seed: int, *, name: str) -> list[Example]:
    if cap is None:
        return examples
    if cap > len(examples):
        raise DataError(f"sizes ask for {cap} rows from split {name!r}, which has {len(examples)}")
    order = list(range(len(examples)))
    random.Random(f"{seed}:{name}").shuffle(order)
    return [examples[i] for i in order[:cap]]


def _check_splits(splits: Splits) -> None:
    """Train and val must be non-empty; no id may repeat within or across splits."""
    for key in ("train", "val"):
        if not getattr(splits, key):
            raise DataError(
                f"the {key} split is empty ({splits.summary()}); give it at least one example "
                "by changing sizes or adding data"
            )
    owner: dict[str, str] = {}
    clashes: list[str] = []
    for key in _SPLIT_KEYS:
        for example in getattr(splits, key):
            if example.id in owner:
                clashes.append(f"{example.id!r} ({owner[example.id]}/{key})")
            else:
                owner[example.id] = key
    if clashes:
        shown = ", ".join(clashes[:_MAX_NAMED_IDS])
        more = f" and {len(clashes) - _MAX_NAMED_IDS} more" if len(clashes) > _MAX_NAMED_IDS else ""
        raise DataError(
            f"{len(clashes)} ids appear more than once across or within splits: {shown}{more}. "
            "Remove the duplicated rows (identical content in two splits leaks evaluation data) "
            "or give each row a unique id_field."
        )


def _read_split_folder(folder: Path) -> list[Row]:
    files = sorted(p for p in folder.iterdir() if p.suffix in {".json", ".jsonl"})
    if not files:
        raise DataError(f"{str(folder)!r} holds no .json or .jsonl files")
    rows: list[Row] = []
    for file in files:
        rows.extend(_read_items(file))
    return rows


def _read_items(file: Path) -> list[Row]:
    text = file.read_text(encoding="utf-8")
    try:
        if file.suffix == ".jsonl":
            items: Any = [json.loads(line) for line in text.splitlines() if line.strip()]
        else:
            loaded = json.loads(text)
            items = loaded if isinstance(loaded, list) else [loaded]
    except json.JSONDecodeError as exc:
        raise DataError(f"{str(file)!r} is not valid JSON: {exc}") from exc
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            raise DataError(
                f"{str(file)!r} item {index} is a {type(item).__name__}; "
                "each item must be an object"
            )
    return list(items)
