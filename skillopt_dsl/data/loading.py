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

import logging
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from skillopt_dsl.data.rows import (
    Fields,
    as_example,
    content_hash,
    fill_content_ids,
    resolve_fields,
    to_examples,
)
from skillopt_dsl.data.rows import Row as Row
from skillopt_dsl.data.rows import dspy_input_keys as dspy_input_keys
from skillopt_dsl.data.sources import (
    read_split_folder,
    resolve_source,
    single_pool,
)
from skillopt_dsl.data.splitting import (
    DEFAULT_SIZES,
    SPLIT_KEYS,
    Sizes,
    SplitNames,
    Splits,
    check_splits,
    split_named,
    split_pool,
)
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
    loaded = resolve_source(source, data_files=data_files, split=split, load_kwargs=load_kwargs)
    fields = resolve_fields(loaded, input_fields, label_fields, module, id_field)
    if split_names is not None:
        splits = split_named(loaded, split_names, sizes=sizes, seed=seed, fields=fields)
    else:
        pool = single_pool(loaded, split=split if not isinstance(source, str) else None)
        examples = to_examples(pool, fields, where="dataset")
        splits = split_pool(examples, sizes if sizes is not None else DEFAULT_SIZES, seed)
    check_splits(splits)
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
    for key in SPLIT_KEYS:
        folder = root / key
        if not folder.is_dir():
            if key == "test":
                parts[key] = []
                continue
            raise DataError(
                f"{str(root)!r} has no {key}/ folder; a SkillOpt split directory needs "
                "train/ and val/ (test/ is optional), each with .json or .jsonl files"
            )
        rows = read_split_folder(folder)
        fields = Fields(tuple(input_fields), tuple(label_fields), None, optional_id="id")
        parts[key] = to_examples(rows, fields, where=f"{key}/")
    splits = Splits(parts["train"], parts["val"], parts["test"])
    check_splits(splits)
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
    converted = [as_example(item, index, declared, where) for index, item in enumerate(items)]
    return fill_content_ids(converted, where=where)


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
# Rows to examples
