"""Splitting: one pool cut by `sizes` (seeded), or the dataset's own splits by `split_names`,
checked disjoint.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

from skillopt_dsl.data.rows import (
    Fields,
    to_examples,
)
from skillopt_dsl.errors import DataError, UserInputError
from skillopt_dsl.types import Example

Sizes: TypeAlias = tuple[float, float, float] | tuple[int, int, int]


SplitNames: TypeAlias = tuple[str, str, str | None]


DEFAULT_SIZES: tuple[float, float, float] = (0.5, 0.2, 0.3)
"""Fractions (train, val, test) used when a single pool is split and `sizes` is not given."""


SPLIT_KEYS = ("train", "val", "test")


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


def split_pool(examples: list[Example], sizes: Sizes, seed: int) -> Splits:
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


def split_named(
    loaded: Any, names: SplitNames, *, sizes: Sizes | None, seed: int, fields: Fields
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
    for key, name, cap in zip(SPLIT_KEYS, names, caps, strict=True):
        if name is None and key == "test":
            parts.append([])
            continue
        if name not in loaded:
            raise DataError(
                f"{key} split {name!r} not found; the dataset has splits {list(loaded)}"
            )
        examples = to_examples(loaded[name], fields, where=f"split {name!r}")
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


def check_splits(splits: Splits) -> None:
    """Train and val must be non-empty; no id may repeat within or across splits."""
    for key in ("train", "val"):
        if not getattr(splits, key):
            raise DataError(
                f"the {key} split is empty ({splits.summary()}); give it at least one example "
                "by changing sizes or adding data"
            )
    owner: dict[str, str] = {}
    clashes: list[str] = []
    for key in SPLIT_KEYS:
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
