"""Where rows come from: a dataset name or builder, a `Dataset`, a mapping of splits, a list, or a
`.skillopt` folder of split files.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from skillopt_dsl.data.rows import (
    Row,
)
from skillopt_dsl.errors import DataError, UserInputError


def resolve_source(
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


def single_pool(loaded: Any, *, split: str | None) -> Any:
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


def read_split_folder(folder: Path) -> list[Row]:
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
