"""Shared pieces of the built-in metrics: gold lookup, parse-failure scoring, text normalisation."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from skillopt_dsl.errors import MetricError
from skillopt_dsl.metrics.score import Score
from skillopt_dsl.types import Example, Prediction

RAW_PREVIEW_CHARS = 200
"""How much of a raw completion the feedback quotes when parsing failed."""

_QUOTES = "\"'`“”‘’«»"
_SPACE = re.compile(r"\s+")


def quote(text: object, limit: int = RAW_PREVIEW_CHARS) -> str:
    """`text` as a quoted literal, cut to `limit` characters (the cut is marked)."""
    text = str(text)
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit]!r}… ({len(text)} chars, truncated)"


def normalize_text(value: object) -> str:
    """Casefold, strip, collapse whitespace, drop surrounding quotes and a trailing period."""
    text = _SPACE.sub(" ", str(value).casefold()).strip()
    previous = None
    while text != previous:
        previous = text
        if text.endswith("."):
            text = text[:-1].rstrip()
        if len(text) >= 2 and text[0] in _QUOTES and text[-1] in _QUOTES:
            text = text[1:-1].strip()
    return text


def gold_value(example: Example, label: str, metric: str) -> Any:
    """The gold value `example.labels[label]`; a missing or `None` label is a `MetricError`."""
    if label not in example.labels:
        raise MetricError(
            f"metric {metric!r} needs label field {label!r}, but example {example.id!r} has "
            f"labels {sorted(example.labels)}; add the field to the dataset or pass label=...",
            example_id=example.id,
            metric=metric,
        )
    value = example.labels[label]
    if value is None:
        raise MetricError(
            f"metric {metric!r}: label {label!r} of example {example.id!r} is None; "
            "fix or drop that example",
            example_id=example.id,
            metric=metric,
        )
    return value


def accepted(gold: Any) -> list[Any]:
    """The accepted gold answers: a list or tuple label means any of its items is correct."""
    if isinstance(gold, (list, tuple)):
        return list(gold)
    return [gold]


def describe_gold(answers: Sequence[Any]) -> str:
    """`'x'` for one accepted answer, `one of 'x', 'y'` for several."""
    quoted = ", ".join(quote(answer) for answer in answers)
    return quoted if len(answers) == 1 else f"one of {quoted}"


def check_output_field(example: Example, prediction: Prediction, field: str, metric: str) -> None:
    """Raise `MetricError` when a parsed prediction lacks `field` (a misspelt field name)."""
    if prediction.error is None and field not in prediction.outputs:
        raise MetricError(
            f"metric {metric!r} reads output field {field!r}, but the prediction for example "
            f"{example.id!r} has fields {sorted(prediction.outputs)}; fix the field name",
            example_id=example.id,
            metric=metric,
        )


def parse_failure_score(prediction: Prediction) -> Score:
    """Score 0 whose feedback gives the parse error and quotes the raw output."""
    return Score(
        0.0,
        f"The output could not be parsed: {prediction.error}. Raw output: {quote(prediction.raw)}",
    )


def failure_score(prediction: Prediction, field: str) -> Score | None:
    """Score 0 with feedback when the prediction failed to parse or left `field` empty."""
    if prediction.error is not None:
        return parse_failure_score(prediction)
    if prediction.outputs.get(field) is None:
        return Score(
            0.0,
            f"The output gave no value for field {field!r}. Raw output: {quote(prediction.raw)}",
        )
    return None
