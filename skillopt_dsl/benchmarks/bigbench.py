"""Rows from the shipped BIG-bench `task.json` files (Apache-2.0; see `data/NOTICE`).

Each task file holds `examples`, objects with `input` and either `target` (the answer string) or
`target_scores` (a map from answer to 1/0). The converters here turn them into flat rows with an
`id` (`<task>-<index in the file>`, stable forever), the task's input fields and `answer`.
Repeated inputs are kept once; inputs that appear with conflicting answers are dropped.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import TypeAlias

from skillopt_dsl.errors import DataError
from skillopt_dsl.json_types import JSONObject, JSONValue

logger = logging.getLogger(__name__)

Row: TypeAlias = JSONObject
"""One flat dataset row: `id`, the input fields and the label fields."""

NAVIGATE_QUESTION = "If you follow these instructions, do you return to the starting point?"


@dataclass(frozen=True)
class TaskFile:
    """What a converter needs from one BIG-bench example: its input text and answer data."""

    index: int
    text: str
    example: JSONObject


@cache
def _task_json(filename: str) -> str:
    return resources.files("skillopt_dsl.benchmarks").joinpath("data", filename).read_text("utf-8")


def task_examples(filename: str) -> list[TaskFile]:
    """The examples of a shipped task file, in file order, as `TaskFile` records."""
    document = json.loads(_task_json(filename))
    return [
        TaskFile(index=i, text=str(e["input"]).strip(), example=e)
        for i, e in enumerate(document["examples"])
    ]


def correct_answer(task: TaskFile) -> str:
    """The single answer scored 1 in `target_scores`, else the string `target`."""
    scores = task.example.get("target_scores")
    if isinstance(scores, dict):
        best = [answer for answer, score in scores.items() if score == 1]
        if len(best) == 1:
            return str(best[0])
        raise DataError(f"BIG-bench example {task.index} has {len(best)} correct answers: {best}")
    target = task.example.get("target")
    if isinstance(target, str):
        return target.strip()
    raise DataError(f"BIG-bench example {task.index} has no single target string: {target!r}")


def rows_for(filename: str, prefix: str, convert: Callable[[TaskFile], JSONObject]) -> list[Row]:
    """Convert every example of `filename` with `convert`, adding `id` and `answer`."""
    rows = [
        {"id": f"{prefix}-{task.index:04d}", **convert(task), "answer": correct_answer(task)}
        for task in task_examples(filename)
    ]
    return dedupe(rows, key_fields=[k for k in rows[0] if k not in ("id", "answer")])


def dedupe(rows: list[Row], *, key_fields: Sequence[str]) -> list[Row]:
    """Keep the first of rows with equal inputs; drop inputs seen with different answers."""
    answers: dict[str, set[str]] = {}
    for row in rows:
        answers.setdefault(_key(row, key_fields), set()).add(json.dumps(row["answer"]))
    seen: set[str] = set()
    kept: list[Row] = []
    for row in rows:
        key = _key(row, key_fields)
        if key in seen or len(answers[key]) > 1:
            continue
        seen.add(key)
        kept.append(row)
    if len(kept) < len(rows):
        logger.debug("dropped %d repeated or contradictory rows", len(rows) - len(kept))
    return kept


def _key(row: Row, fields: Sequence[str]) -> str:
    return json.dumps([row[f] for f in fields], sort_keys=True)


def check_choices(rows: list[Row], choices: Sequence[str], filename: str) -> list[Row]:
    """Raise `DataError` if any row's answer is outside `choices`; return the rows."""
    bad = [row["id"] for row in rows if row["answer"] not in choices]
    if bad:
        raise DataError(f"{filename}: answers of {bad[:5]} are not among {list(choices)}")
    return rows


# ---------------------------------------------------------------------------------------------
# Per-task converters


def sports_understanding() -> list[Row]:
    """`statement` -> `answer` in {"plausible", "implausible"}."""
    rows = rows_for("sports_understanding.json", "sports", lambda t: {"statement": t.text})
    return check_choices(rows, ("plausible", "implausible"), "sports_understanding.json")


def navigate() -> list[Row]:
    """`question` (the fixed question plus the instructions) -> `answer` in {"True", "False"}."""
    rows = rows_for(
        "navigate.json", "navigate", lambda t: {"question": f"{NAVIGATE_QUESTION} {t.text}"}
    )
    return check_choices(rows, ("True", "False"), "navigate.json")


def causal_judgment() -> list[Row]:
    """`question` (a story ending in a causal question) -> `answer` in {"Yes", "No"}."""
    rows = rows_for("causal_judgment.json", "causal", lambda t: {"question": t.text})
    return check_choices(rows, ("Yes", "No"), "causal_judgment.json")


def date_understanding() -> list[Row]:
    """`question` and `choices` (sorted MM/DD/YYYY dates) -> `answer`, one of the choices."""

    def convert(task: TaskFile) -> JSONObject:
        choices = _choices(task)
        return {"question": task.text, "choices": list[JSONValue](choices)}

    rows = rows_for("date_understanding.json", "date", convert)
    for row in rows:
        choices = row["choices"]
        options = [c for c in choices if isinstance(c, str)] if isinstance(choices, list) else []
        check_choices([row], options, "date_understanding.json")
    return rows


def _choices(task: TaskFile) -> list[str]:
    """An example's answer options (the keys of its `target_scores`), sorted."""
    scores = task.example.get("target_scores")
    if not isinstance(scores, dict):
        raise DataError(f"BIG-bench example {task.index} has no target_scores object")
    return sorted(scores)


def arithmetic(operation: str) -> Callable[[], list[Row]]:
    """A loader for `arithmetic_2_digit_<operation>`: `question` -> `answer` (an integer string)."""
    filename = f"arithmetic_2_digit_{operation}.json"

    def load() -> list[Row]:
        return rows_for(filename, f"arith-{operation}", lambda t: {"question": t.text})

    load.__doc__ = f"`question` ('What is 80 plus 29?') -> `answer` ('109'), from {filename}."
    return load


def word_sorting() -> list[Row]:
    """`words` (space-separated) -> `answer` (the same words sorted alphabetically)."""
    return rows_for("word_sorting.json", "words", lambda t: {"words": t.text})
