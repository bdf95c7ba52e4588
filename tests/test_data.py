"""Tests for `skillopt_dsl.data`: sources, seeded splitting, stable ids and every error path."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import datasets
import pytest

from skillopt_dsl.data import (
    DEFAULT_SIZES,
    Example,
    Splits,
    content_hash,
    from_hf,
    load_skillopt_dir,
    load_splits,
)
from skillopt_dsl.errors import DataError, UserInputError

FIELDS: dict[str, Any] = {"input_fields": ["q"], "label_fields": ["a"]}


def rows(n: int = 20) -> list[dict[str, Any]]:
    return [{"q": f"question {i}", "a": str(i % 3), "extra": i} for i in range(n)]


def ids(examples: list[Example]) -> list[str]:
    return [e.id for e in examples]


def all_ids(splits: Splits) -> list[str]:
    return ids(splits.train) + ids(splits.val) + ids(splits.test)


def write_jsonl(path: Path, items: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(item) + "\n" for item in items), encoding="utf-8")
    return path


# --- sources --------------------------------------------------------------------------------


def test_list_of_dicts_fractions_cover_every_row() -> None:
    splits = load_splits(rows(20), sizes=(0.5, 0.2, 0.3), **FIELDS)
    assert splits.summary() == "train=10 val=4 test=6"
    assert sorted(e.q for e in splits.train + splits.val + splits.test) == sorted(
        r["q"] for r in rows(20)
    )
    first = splits.train[0]
    assert set(first.inputs) == {"q"} and set(first.labels) == {"a"}
    assert first.a == str(int(first.q.split()[1]) % 3)


def test_default_sizes_are_used_for_a_single_pool() -> None:
    splits = load_splits(rows(10), **FIELDS)
    assert (len(splits.train), len(splits.val), len(splits.test)) == tuple(
        int(f * 10) for f in DEFAULT_SIZES
    )


def test_integer_sizes_are_counts_and_may_leave_rows_out() -> None:
    splits = load_splits(rows(20), sizes=(3, 2, 4), **FIELDS)
    assert splits.summary() == "train=3 val=2 test=4"
    assert len(set(all_ids(splits))) == 9


def test_fractions_below_one_leave_rows_out() -> None:
    splits = load_splits(rows(10), sizes=(0.3, 0.3, 0.2), **FIELDS)
    assert splits.summary() == "train=3 val=3 test=2"


def test_dspy_like_objects_with_todict_or_items() -> None:
    class WithToDict:
        def __init__(self, data: dict[str, Any]) -> None:
            self._data = data

        def toDict(self) -> dict[str, Any]:  # dspy.Example's spelling
            return dict(self._data)

    class WithItems:
        def __init__(self, data: dict[str, Any]) -> None:
            self._data = data

        def items(self) -> Any:
            return self._data.items()

    objects = [WithToDict(r) for r in rows(6)] + [WithItems(r) for r in rows(12)[6:]]
    splits = load_splits(objects, sizes=(6, 3, 3), **FIELDS)
    from_dicts = load_splits(rows(12), sizes=(6, 3, 3), **FIELDS)
    assert splits == from_dicts


def test_hf_dataset_matches_list_of_dicts() -> None:
    dataset = datasets.Dataset.from_list(rows(12))
    assert load_splits(dataset, sizes=(6, 3, 3), seed=4, **FIELDS) == load_splits(
        rows(12), sizes=(6, 3, 3), seed=4, **FIELDS
    )


def test_dataset_dict_with_split_names_keeps_order_and_optional_test() -> None:
    data = rows(12)
    dd = datasets.DatasetDict(
        {
            "training": datasets.Dataset.from_list(data[:6]),
            "dev": datasets.Dataset.from_list(data[6:9]),
            "eval": datasets.Dataset.from_list(data[9:]),
        }
    )
    splits = load_splits(dd, split_names=("training", "dev", "eval"), **FIELDS)
    assert [e.q for e in splits.train] == [r["q"] for r in data[:6]]
    assert [e.q for e in splits.val] == [r["q"] for r in data[6:9]]
    assert [e.q for e in splits.test] == [r["q"] for r in data[9:]]
    no_test = load_splits(dd, split_names=("training", "dev", None), **FIELDS)
    assert no_test.test == [] and len(no_test.val) == 3


def test_split_names_with_counts_subsample_each_split_reproducibly() -> None:
    data = rows(30)
    dd = {"train": data[:20], "validation": data[20:]}
    a = load_splits(dd, split_names=("train", "validation", None), sizes=(5, 4, 0), **FIELDS)
    b = load_splits(dd, split_names=("train", "validation", None), sizes=(5, 4, 0), **FIELDS)
    assert a == b and a.summary() == "train=5 val=4 test=0"
    assert {e.q for e in a.train} <= {r["q"] for r in data[:20]}


def test_dataset_dict_split_argument_selects_the_pool() -> None:
    dd = datasets.DatasetDict(
        {"train": datasets.Dataset.from_list(rows(10)), "other": datasets.Dataset.from_list([])}
    )
    splits = load_splits(dd, split="train", sizes=(5, 5, 0), **FIELDS)
    assert splits.summary() == "train=5 val=5 test=0"


def test_json_builder_with_data_files(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "data.jsonl", rows(10))
    splits = load_splits(
        "json",
        data_files=str(path),
        sizes=(0.5, 0.2, 0.3),
        cache_dir=str(tmp_path / "cache"),
        **FIELDS,
    )
    assert splits == load_splits(rows(10), sizes=(0.5, 0.2, 0.3), **FIELDS)


def test_csv_builder_with_data_files(tmp_path: Path) -> None:
    path = tmp_path / "data.csv"
    path.write_text("q,a\n" + "".join(f"question {i},label{i}\n" for i in range(8)), "utf-8")
    splits = load_splits(
        "csv", data_files=str(path), sizes=(4, 2, 2), cache_dir=str(tmp_path / "c"), **FIELDS
    )
    labels = sorted(e.a for e in splits.train + splits.val + splits.test)
    assert labels == [f"label{i}" for i in range(8)]


def test_from_hf_with_a_local_builder(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "d.jsonl", rows(10))
    splits = from_hf(
        "json", data_files=str(path), sizes=(5, 3, 2), cache_dir=str(tmp_path / "c"), **FIELDS
    )
    assert splits.summary() == "train=5 val=3 test=2"


def test_from_hf_rejects_a_non_string_name() -> None:
    with pytest.raises(UserInputError, match="dataset name"):
        from_hf(rows(3), **FIELDS)  # type: ignore[arg-type]


def test_missing_data_file_is_a_data_error(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="could not load dataset 'json'"):
        load_splits("json", data_files=str(tmp_path / "absent.jsonl"), **FIELDS)


# --- seeding and ids ------------------------------------------------------------------------


def test_same_seed_same_splits_different_seed_different() -> None:
    a = load_splits(rows(40), seed=7, sizes=(0.5, 0.25, 0.25), **FIELDS)
    b = load_splits(rows(40), seed=7, sizes=(0.5, 0.25, 0.25), **FIELDS)
    c = load_splits(rows(40), seed=8, sizes=(0.5, 0.25, 0.25), **FIELDS)
    assert a == b
    assert ids(a.train) != ids(c.train)


def test_split_is_pinned_across_machines() -> None:
    """random.Random(seed).shuffle is platform independent; pin one result to catch changes."""
    splits = load_splits(rows(10), seed=0, sizes=(3, 3, 4), **FIELDS)
    assert [e.q for e in splits.train] == ["question 7", "question 8", "question 1"]


def test_ids_are_content_hashes_independent_of_seed() -> None:
    data = rows(10)
    a = load_splits(data, seed=1, **FIELDS)
    b = load_splits(data, seed=2, **FIELDS)
    by_q_a = {e.q: e.id for e in a.train + a.val + a.test}
    by_q_b = {e.q: e.id for e in b.train + b.val + b.test}
    assert by_q_a == by_q_b
    expected = content_hash({"q": "question 0"}, {"a": "0"})
    assert by_q_a["question 0"] == expected
    assert len(expected) == 12 and int(expected, 16) >= 0


def test_content_hash_ignores_key_order_and_unused_columns() -> None:
    assert content_hash({"x": 1, "y": 2}, {"a": "b"}) == content_hash({"y": 2, "x": 1}, {"a": "b"})
    assert content_hash({"x": 1}, {"a": "b"}) != content_hash({"x": 1}, {"a": "c"})
    with_extra = load_splits([{**r, "extra": "zzz"} for r in rows(6)], sizes=(3, 3, 0), **FIELDS)
    plain = load_splits(rows(6), sizes=(3, 3, 0), **FIELDS)
    assert with_extra == plain


def test_duplicate_content_gets_numbered_suffixes_in_original_order() -> None:
    dup = {"q": "same", "a": "x"}
    data = [dup, {"q": "other", "a": "y"}, dup, dup]
    splits = load_splits(data, sizes=(2, 2, 0), **FIELDS)
    base = content_hash({"q": "same"}, {"a": "x"})
    assert sorted(all_ids(splits)) == sorted(
        [base, f"{base}-1", f"{base}-2", content_hash({"q": "other"}, {"a": "y"})]
    )


def test_id_field_is_used_as_string() -> None:
    data = [{**r, "uid": 100 + i} for i, r in enumerate(rows(6))]
    splits = load_splits(data, sizes=(3, 3, 0), id_field="uid", **FIELDS)
    assert sorted(all_ids(splits)) == [str(100 + i) for i in range(6)]


# --- errors ---------------------------------------------------------------------------------


def test_missing_columns_name_them_and_list_existing_ones() -> None:
    with pytest.raises(DataError) as info:
        load_splits(rows(6), input_fields=["question"], label_fields=["a", "gold"])
    message = str(info.value)
    assert "['question', 'gold']" in message
    assert "['q', 'a', 'extra']" in message


def test_missing_id_column_is_reported() -> None:
    with pytest.raises(DataError, match=r"missing columns \['uid'\]"):
        load_splits(rows(6), id_field="uid", **FIELDS)


def test_row_missing_a_field_names_the_row() -> None:
    data = rows(6)
    del data[4]["a"]
    with pytest.raises(DataError, match=r"row 4 has no column 'a'"):
        load_splits(data, **FIELDS)


def test_none_input_names_column_and_row() -> None:
    data = rows(6)
    data[2]["q"] = None
    with pytest.raises(DataError, match=r"row 2: column 'q' is None"):
        load_splits(data, **FIELDS)


def test_non_json_value_names_column_and_row() -> None:
    data = rows(6)
    data[3]["q"] = object()
    with pytest.raises(DataError, match=r"row 3: column 'q' holds a object that is not JSON"):
        load_splits(data, **FIELDS)


def test_nan_label_is_rejected() -> None:
    data = rows(6)
    data[1]["a"] = float("nan")
    with pytest.raises(DataError, match=r"row 1: column 'a'"):
        load_splits(data, **FIELDS)


def test_bad_row_type_is_reported() -> None:
    with pytest.raises(DataError, match=r"row 1 is a int"):
        load_splits([rows(1)[0], 5], **FIELDS)


def test_empty_val_split_is_an_error() -> None:
    with pytest.raises(DataError, match=r"the val split is empty \(train=4 val=0 test=0\)"):
        load_splits(rows(4), sizes=(4, 0, 0), **FIELDS)


def test_empty_train_split_from_tiny_fractions_is_an_error() -> None:
    with pytest.raises(DataError, match="the train split is empty"):
        load_splits(rows(3), sizes=(0.1, 0.5, 0.4), **FIELDS)


def test_overlapping_named_splits_name_the_ids() -> None:
    data = rows(10)
    dd = {"train": data[:8], "val": data[5:], "test": []}
    with pytest.raises(DataError) as info:
        load_splits(dd, split_names=("train", "val", "test"), **FIELDS)
    message = str(info.value)
    assert message.startswith("3 ids appear more than once")
    for row in data[5:8]:
        assert content_hash({"q": row["q"]}, {"a": row["a"]}) in message
    assert "(train/val)" in message


def test_overlap_message_names_at_most_five_ids() -> None:
    data = rows(10)
    with pytest.raises(DataError, match=r"7 ids .* and 2 more\."):
        load_splits({"t": data, "v": data[3:]}, split_names=("t", "v", None), **FIELDS)


def test_duplicate_id_field_values_within_a_split() -> None:
    data = [{**r, "uid": "same" if i < 2 else str(i)} for i, r in enumerate(rows(6))]
    with pytest.raises(DataError, match=r"'same' \((train|val|test)/(train|val|test)\)"):
        load_splits(data, sizes=(3, 3, 0), id_field="uid", **FIELDS)


@pytest.mark.parametrize(
    ("sizes", "message"),
    [
        ((0.5, 0.5), "three numbers"),
        ((0.6, 0.5, 0.1), "sum to 1.2"),
        ((8, 8, 8), "ask for 24 rows but the dataset has 20"),
        ((-1, 5, 5), "must not be negative"),
        ((10, 0.5, 0.2), "mix counts and fractions"),
        (("a", 1, 1), "must be numbers"),
    ],
)
def test_bad_sizes(sizes: Any, message: str) -> None:
    with pytest.raises(DataError, match=message):
        load_splits(rows(20), sizes=sizes, **FIELDS)


def test_fractional_sizes_with_split_names_are_rejected() -> None:
    with pytest.raises(DataError, match="three non-negative ints"):
        load_splits(
            {"a": rows(4), "b": rows(4)},
            split_names=("a", "b", None),
            sizes=(0.5, 0.5, 0.0),
            **FIELDS,
        )


def test_unknown_split_name_lists_the_splits() -> None:
    with pytest.raises(DataError, match=r"val split 'dev' not found; the dataset has splits \['a'"):
        load_splits({"a": rows(4), "b": rows(4)}, split_names=("a", "dev", None), **FIELDS)


def test_several_splits_without_split_names_is_an_error() -> None:
    with pytest.raises(UserInputError, match=r"several splits \['a', 'b'\]; pass split_names"):
        load_splits({"a": rows(4), "b": rows(4)}, **FIELDS)


def test_split_names_on_a_plain_list_is_an_error() -> None:
    with pytest.raises(UserInputError, match="split_names needs a DatasetDict"):
        load_splits(rows(4), split_names=("a", "b", None), **FIELDS)


def test_load_kwargs_on_an_in_memory_source_are_rejected() -> None:
    with pytest.raises(UserInputError, match="data_files only apply"):
        load_splits(rows(4), data_files="x.jsonl", **FIELDS)


def test_field_in_both_inputs_and_labels_is_rejected() -> None:
    with pytest.raises(UserInputError, match=r"\['q'\] are both input and label"):
        load_splits(rows(4), input_fields=["q"], label_fields=["q"])


# --- SkillOpt directory layout --------------------------------------------------------------


def make_skillopt_dir(root: Path) -> Path:
    for name in ("train", "val", "test"):
        (root / name).mkdir(parents=True)
    (root / "train" / "a.json").write_text(
        json.dumps([{"id": "t1", "q": "one", "a": "1"}, {"id": 2, "q": "two", "a": "2"}]), "utf-8"
    )
    (root / "train" / "b.json").write_text(json.dumps({"q": "three", "a": "3"}), "utf-8")
    write_jsonl(root / "val" / "items.jsonl", [{"id": "v1", "q": "four", "a": "4"}])
    write_jsonl(root / "test" / "items.jsonl", [{"id": "x1", "q": "five", "a": "5"}])
    return root


def test_skillopt_dir_layout(tmp_path: Path) -> None:
    splits = load_skillopt_dir(make_skillopt_dir(tmp_path / "split"), **FIELDS)
    assert ids(splits.train) == ["t1", "2", content_hash({"q": "three"}, {"a": "3"})]
    assert [e.q for e in splits.train] == ["one", "two", "three"]
    assert ids(splits.val) == ["v1"] and ids(splits.test) == ["x1"]


def test_skillopt_dir_without_test_folder(tmp_path: Path) -> None:
    root = make_skillopt_dir(tmp_path / "split")
    for file in (root / "test").iterdir():
        file.unlink()
    (root / "test").rmdir()
    assert load_skillopt_dir(root, **FIELDS).test == []


def test_skillopt_dir_missing_val_folder(tmp_path: Path) -> None:
    (tmp_path / "train").mkdir()
    write_jsonl(tmp_path / "train" / "x.jsonl", [{"q": "a", "a": "b"}])
    with pytest.raises(DataError, match="has no val/ folder"):
        load_skillopt_dir(tmp_path, **FIELDS)


def test_skillopt_dir_bad_json_names_the_file(tmp_path: Path) -> None:
    root = make_skillopt_dir(tmp_path / "split")
    (root / "val" / "broken.json").write_text("{not json", "utf-8")
    with pytest.raises(DataError, match=r"broken\.json' is not valid JSON"):
        load_skillopt_dir(root, **FIELDS)


def test_skillopt_dir_missing_label_column(tmp_path: Path) -> None:
    root = make_skillopt_dir(tmp_path / "split")
    with pytest.raises(DataError, match=r"train/: missing columns \['gold'\]"):
        load_skillopt_dir(root, input_fields=["q"], label_fields=["gold"])


# --- DSPy material and inferred fields (issue 11) --------------------------------------------


def test_compile_lists_of_dicts_use_the_module_fields_and_stable_content_ids() -> None:
    """Kills: random or position-based ids for converted rows (the same row in train and val
    would not be caught as a leak), or dicts split without the module's declared inputs."""
    from skillopt_dsl.data import as_examples
    from skillopt_dsl.module import InputField, OutputField, SkillModule

    class Echo(SkillModule):
        """Echo."""

        q: str = InputField()
        a: str = OutputField()
        metric = staticmethod(lambda example, prediction: 1.0)

    first = as_examples(rows(4), module=Echo())
    again = as_examples(list(reversed(rows(4))), module=Echo())
    assert {e.id for e in first} == {e.id for e in again}
    assert set(first[0].inputs) == {"q"} and set(first[0].labels) == {"a", "extra"}
    assert first[0].id == content_hash(first[0].inputs, first[0].labels)
    with pytest.raises(UserInputError, match="declared"):
        as_examples(rows(2))
    with pytest.raises(DataError, match="missing columns"):
        as_examples([{"a": "1"}], module=Echo())


def test_dspy_examples_in_compile_and_load_splits_infer_their_fields() -> None:
    """Kills: ignoring `Example.inputs()` (every key would be an input, or inference would
    demand input_fields), or keeping DSPy's bookkeeping keys as labels."""
    dspy = pytest.importorskip("dspy", reason="needs the [dspy] extra")
    from skillopt_dsl.data import as_examples

    items = [
        dspy.Example(q=f"question {i}", a=str(i), dspy_uuid=f"u{i}").with_inputs("q")
        for i in range(10)
    ]
    (converted,) = as_examples(items[:1])
    assert dict(converted.inputs) == {"q": "question 0"} and dict(converted.labels) == {"a": "0"}
    splits = load_splits(items, sizes=(4, 3, 3), seed=1)
    assert all(set(e.inputs) == {"q"} and set(e.labels) == {"a"} for e in splits.train)
    assert sorted(all_ids(splits)) == sorted(e.id for e in as_examples(items))
    with pytest.raises(DataError, match="with_inputs"):
        as_examples([dspy.Example(q="x", a="y")])


def test_load_splits_infers_fields_from_a_module() -> None:
    """Kills: load_splits still demanding input_fields/label_fields when a module declares them."""
    from skillopt_dsl.module import InputField, OutputField, SkillModule

    class QA(SkillModule):
        """QA."""

        q: str = InputField()
        a: str = OutputField()
        metric = staticmethod(lambda example, prediction: 1.0)

    splits = load_splits(rows(10), module=QA(), sizes=(4, 3, 3))
    assert set(splits.train[0].inputs) == {"q"} and set(splits.train[0].labels) == {"a"}
    with pytest.raises(UserInputError, match="cannot be inferred"):
        load_splits(rows(10), sizes=(4, 3, 3))
