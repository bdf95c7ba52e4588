"""Tests for the benchmark registry and the shipped BIG-bench tasks."""

from __future__ import annotations

import json
import re
from importlib import resources

import pytest

from skillopt_dsl.benchmarks import (
    DEFAULT_SIZES,
    Benchmark,
    get_benchmark,
    list_benchmarks,
    load_benchmark,
)
from skillopt_dsl.benchmarks.bigbench import NAVIGATE_QUESTION, dedupe
from skillopt_dsl.errors import UserInputError

EXPECTED = {
    "sports_understanding": (("statement",), ("plausible", "implausible")),
    "navigate": (("question",), ("True", "False")),
    "causal_judgment": (("question",), ("Yes", "No")),
    "date_understanding": (("question", "choices"), None),
    "arithmetic_2_digit_addition": (("question",), None),
    "arithmetic_2_digit_subtraction": (("question",), None),
    "arithmetic_2_digit_multiplication": (("question",), None),
    "word_sorting": (("words",), None),
}


def test_registry_lists_every_task_sorted() -> None:
    # generated: table_lookup (tool use, test_agents.py), customer_feedback (test_recipes.py),
    # citation_keys (test_citation_keys.py), iso_dates (test_iso_dates.py)
    generated = ["table_lookup", "customer_feedback", "citation_keys", "iso_dates"]
    assert list_benchmarks() == sorted([*EXPECTED, *generated])


def test_unknown_name_lists_valid_names() -> None:
    with pytest.raises(UserInputError, match=r"unknown benchmark 'sport'.*'sports_understanding'"):
        get_benchmark("sport")


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_benchmark_loads_with_declared_fields(name: str) -> None:
    bench = get_benchmark(name)
    inputs, choices = EXPECTED[name]
    assert isinstance(bench, Benchmark) and bench.name == name and bench.description
    assert bench.input_fields == inputs and bench.label_fields == ("answer",)
    assert bench.answer_choices == choices
    splits = load_benchmark(name)
    assert (len(splits.train), len(splits.val), len(splits.test)) == DEFAULT_SIZES
    every = splits.train + splits.val + splits.test
    assert len({e.id for e in every}) == len(every)
    for example in every:
        assert tuple(example.inputs) == inputs and tuple(example.labels) == ("answer",)
        assert isinstance(example.answer, str) and example.answer
        assert example.id.split("-")[-1].isdigit()
        if choices is not None:
            assert example.answer in choices


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_loader_rows_have_unique_inputs(name: str) -> None:
    bench = get_benchmark(name)
    rows = bench.loader()
    keys = [json.dumps([row[f] for f in bench.input_fields]) for row in rows]
    assert len(set(keys)) == len(keys)
    assert len({row["id"] for row in rows}) == len(rows)


def test_classification_tasks_use_both_labels() -> None:
    for name, (_, choices) in EXPECTED.items():
        if choices is not None:
            answers = {row["answer"] for row in get_benchmark(name).loader()}
            assert answers == set(choices), name


def test_splits_are_fixed_by_seed_and_ids_do_not_depend_on_it() -> None:
    a = load_benchmark("navigate", seed=3, sizes=(5, 5, 5))
    b = load_benchmark("navigate", seed=3, sizes=(5, 5, 5))
    c = load_benchmark("navigate", seed=4, sizes=(5, 5, 5))
    assert a == b
    assert [e.id for e in a.train] != [e.id for e in c.train]
    by_id = {e.id: e for e in a.train + c.train}
    assert all(by_id[e.id] == e for e in c.train)


def test_sports_rows_match_the_task_file() -> None:
    rows = {row["id"]: row for row in get_benchmark("sports_understanding").loader()}
    assert rows["sports-0000"] == {
        "id": "sports-0000",
        "statement": "Jamal Murray was perfect from the line",
        "answer": "plausible",
    }
    assert len(rows) == 986  # 1000 in the file, 14 repeats of earlier statements removed


def test_navigate_question_carries_the_task_question() -> None:
    first = get_benchmark("navigate").loader()[0]
    assert first["question"] == (
        f"{NAVIGATE_QUESTION} Take 1 step. Take 2 steps. Take 3 steps. Turn around. "
        "Take 6 steps. Turn left."
    )
    assert first["answer"] == "True"


def test_causal_contradictory_duplicates_are_dropped() -> None:
    rows = get_benchmark("causal_judgment").loader()
    assert len(rows) == 186  # 190 in the file; two inputs appear twice with opposite answers
    assert rows[0]["answer"] == "Yes" and rows[1]["answer"] == "No"


def test_date_choices_are_sorted_and_contain_the_answer() -> None:
    rows = get_benchmark("date_understanding").loader()
    first = rows[0]
    assert (
        first["question"] == "Yesterday was April 30, 2021. What is the date today in MM/DD/YYYY?"
    )
    assert first["answer"] == "05/01/2021"
    for row in rows:
        assert row["choices"] == sorted(row["choices"]) and row["answer"] in row["choices"]
        assert re.fullmatch(r"\d\d/\d\d/\d{4}", row["answer"])
    # the file lists the correct answer first; sorting must not keep it always first
    assert sum(row["choices"][0] == row["answer"] for row in rows) < len(rows) / 2


@pytest.mark.parametrize(
    ("name", "op"),
    [
        ("arithmetic_2_digit_addition", lambda a, b: a + b),
        ("arithmetic_2_digit_subtraction", lambda a, b: a - b),
        ("arithmetic_2_digit_multiplication", lambda a, b: a * b),
    ],
)
def test_arithmetic_answers_are_correct(name: str, op: object) -> None:
    rows = get_benchmark(name).loader()
    assert len(rows) == 1000
    for row in rows:
        match = re.fullmatch(r"What is (\d+) (plus|minus|times) (\d+)\?", row["question"])
        assert match is not None, row
        assert row["answer"] == str(op(int(match[1]), int(match[3])))  # type: ignore[operator]


def test_word_sorting_answers_are_sorted_inputs() -> None:
    rows = get_benchmark("word_sorting").loader()
    assert len(rows) == 1900
    for row in rows:
        assert row["answer"] == " ".join(sorted(row["words"].split()))


def test_dedupe_keeps_first_and_drops_contradictions() -> None:
    rows = [
        {"id": "a", "q": "x", "answer": "1"},
        {"id": "b", "q": "x", "answer": "1"},
        {"id": "c", "q": "y", "answer": "1"},
        {"id": "d", "q": "y", "answer": "2"},
        {"id": "e", "q": "z", "answer": "1"},
    ]
    assert [r["id"] for r in dedupe(rows, key_fields=["q"])] == ["a", "e"]


def test_licence_and_notice_ship_with_the_data() -> None:
    data = resources.files("skillopt_dsl.benchmarks").joinpath("data")
    licence = data.joinpath("LICENSE").read_text("utf-8")
    notice = data.joinpath("NOTICE").read_text("utf-8")
    assert "Apache License" in licence and "Version 2.0, January 2004" in licence
    assert "Google LLC" in notice and "Apache License, Version 2.0" in notice
    for name in EXPECTED:
        assert data.joinpath(f"{name}.json").is_file()
        assert f"{name}.json" in notice


# -- one registry ------------------------------------------------------------------------------


def test_the_benchmark_name_literal_is_the_registry() -> None:
    """Kills: a benchmark registered without its name in `BenchmarkName` (or a name left in
    the Literal after its benchmark is gone): the type and the registry drift apart."""
    from typing import get_args

    from skillopt_dsl.benchmarks import BenchmarkName

    assert sorted(get_args(BenchmarkName)) == list_benchmarks()


def test_a_benchmark_registered_once_appears_in_every_list_and_message() -> None:
    """Kills: a second list of benchmark names (a module table, a CLI list, a message) that a
    new benchmark registered in the registry alone would be missing from."""
    from typer.testing import CliRunner

    from skillopt_dsl import benchmarks
    from skillopt_dsl.benchmarks import registry
    from skillopt_dsl.benchmarks.tasks import Navigate, module_for
    from skillopt_dsl.cli import app

    rows = [{"id": f"r{i}", "question": f"q{i}", "answer": "True"} for i in range(9)]
    new = Benchmark(
        "new_task", "A new task.", ("question",), ("answer",), lambda: rows, None, Navigate
    )
    benchmarks.register_benchmark(new)
    try:
        assert "new_task" in list_benchmarks() and get_benchmark("new_task") is new
        assert len(load_benchmark("new_task", sizes=(3, 3, 3)).train) == 3
        with pytest.raises(UserInputError, match=r"unknown benchmark 'x'.*'new_task'"):
            get_benchmark("x")
        assert isinstance(module_for("new_task"), Navigate)
        with pytest.raises(UserInputError, match=r"no module for benchmark 'x'.*'new_task'"):
            module_for("x")
        listed = CliRunner().invoke(app, ["benchmarks", "list"], env={"COLUMNS": "200"})
        assert listed.exit_code == 0 and "new_task" in listed.output
        with pytest.raises(UserInputError, match="already registered"):
            benchmarks.register_benchmark(Benchmark("new_task", "", (), (), lambda: []))
    finally:
        registry._REGISTRY.pop("new_task", None)


def test_every_benchmark_but_the_agent_one_names_its_module() -> None:
    """Kills: a shipped benchmark losing its module (`module_for` then refuses it)."""
    from skillopt_dsl.benchmarks.tasks import module_for

    without = [n for n in list_benchmarks() if get_benchmark(n).module is None]
    assert without == ["table_lookup"]
    for name in list_benchmarks():
        if name != "table_lookup":
            assert module_for(name).seed_skill.text
