"""`llm_judge`: a metric that has a model grade a prediction against a rubric and the gold labels.

The judge must answer with JSON `{"score": <int 1..scale>, "reason": "..."}`. The reply is read
tolerantly (the first JSON object in it, else a leading integer); a reply that yields no valid
score raises `MetricError` quoting the reply, never a silent 0.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from skillopt_dsl.errors import MetricError, UserInputError
from skillopt_dsl.json_types import JSONObject
from skillopt_dsl.lm.base import Backend
from skillopt_dsl.lm.client import resolve_lm
from skillopt_dsl.metrics._common import check_output_field, parse_failure_score, quote
from skillopt_dsl.metrics.score import Score
from skillopt_dsl.types import Example, Prediction

__all__ = ["CompletesChat", "HasText", "LLMJudge", "llm_judge"]

_SYSTEM = (
    "You are a strict, consistent grader. Grade the model output against the rubric and the "
    "reference answer. Reply with one JSON object and nothing else: "
    '{{"score": <integer from 1 (worst) to {scale} (best)>, "reason": "<one or two sentences>"}}'
)
_LEADING_INT = re.compile(r"\s*(\d+)\b")


class HasText(Protocol):
    """A model response: only its `text` is read."""

    @property
    def text(self) -> str:
        """The completion text."""
        ...


class CompletesChat(Protocol):
    """What the judge needs from a model: `skillopt_dsl.lm.LM` satisfies it."""

    def complete(self, messages: list[dict[str, str]]) -> HasText:
        """Run one chat completion over `[{"role": ..., "content": ...}, ...]`."""
        ...


def _render(title: str, values: Mapping[str, object]) -> str:
    lines = [f"- {key}: {value}" for key, value in values.items()] or ["(none)"]
    return f"## {title}\n" + "\n".join(lines)


def _first_json_object(text: str) -> JSONObject | None:
    decoder = json.JSONDecoder()
    for match in re.finditer(r"\{", text):
        try:
            found, _ = decoder.raw_decode(text, match.start())
        except json.JSONDecodeError:
            continue
        if isinstance(found, dict):
            return found
    return None


def _as_int(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None


def parse_judge_reply(text: str, scale: int) -> tuple[int, str] | None:
    """`(score, reason)` from a judge reply, or `None` when it holds no score in 1..scale."""
    found = _first_json_object(text)
    if found is not None:
        score = _as_int(found.get("score"))
        if score is not None and 1 <= score <= scale:
            return score, str(found.get("reason", "")).strip()
    match = _LEADING_INT.match(text)
    if match and 1 <= int(match.group(1)) <= scale:
        return int(match.group(1)), text[match.end() :].strip(" \t\n:-.")
    return None


@dataclass(frozen=True, eq=False)
class LLMJudge:
    """Grades output `fields` with a model; value = (score - 1) / (scale - 1)."""

    rubric: str
    lm: CompletesChat
    fields: tuple[str, ...] | None = None
    scale: int = 5

    def __post_init__(self) -> None:
        object.__setattr__(self, "__name__", self.name)

    @property
    def name(self) -> str:
        """`llm_judge(<first words of the rubric>)`."""
        head = " ".join(self.rubric.split())[:40]
        return f"llm_judge({head!r})"

    def __call__(self, example: Example, prediction: Prediction) -> Score:
        """Ask the judge model; a prediction that failed to parse scores 0 without a call."""
        shown = self._shown_outputs(example, prediction)
        if prediction.error is not None:
            return parse_failure_score(prediction)
        reply = self.lm.complete(self.messages(example, shown)).text
        parsed = parse_judge_reply(reply, self.scale)
        if parsed is None:
            raise MetricError(
                f"metric {self.name!r}: the judge's reply for example {example.id!r} holds no "
                f'score from 1 to {self.scale}; expected JSON {{"score": ..., "reason": ...}}. '
                f"Reply: {quote(reply, 500)}. Use a stronger judge model or a clearer rubric",
                example_id=example.id,
                metric=self.name,
            )
        score, reason = parsed
        feedback = f"Judge score {score}/{self.scale}: {reason or '(no reason given)'}"
        return Score((score - 1) / (self.scale - 1), feedback)

    def _shown_outputs(self, example: Example, prediction: Prediction) -> dict[str, object]:
        names = self.fields if self.fields is not None else tuple(prediction.outputs)
        for field in names:
            check_output_field(example, prediction, field, self.name)
        return {field: prediction.outputs.get(field) for field in names}

    def messages(self, example: Example, outputs: Mapping[str, object]) -> list[dict[str, str]]:
        """The chat sent to the judge: instructions, then rubric, inputs, reference and output."""
        user = "\n\n".join(
            [
                f"## Rubric\n{self.rubric}",
                _render("Inputs", example.inputs),
                _render("Reference answer", example.labels),
                _render("Model output", outputs),
            ]
        )
        return [
            {"role": "system", "content": _SYSTEM.format(scale=self.scale)},
            {"role": "user", "content": user},
        ]


def llm_judge(
    rubric: str,
    *,
    lm: CompletesChat | str | Backend,
    fields: Sequence[str] | None = None,
    scale: int = 5,
) -> LLMJudge:
    """A metric that has `lm` grade output `fields` (default: all) against `rubric` and the labels.

    `lm` is an `LM`, a litellm model string or a `Backend` (e.g. `ScriptedLM`).

    The judge replies `{"score": 1..scale, "reason": ...}`; the reason becomes the feedback and
    the value is `(score - 1) / (scale - 1)`. An unparseable reply raises `MetricError`.
    """
    if not rubric.strip():
        raise UserInputError("llm_judge(): rubric is empty; describe what a good output looks like")
    if isinstance(scale, bool) or not isinstance(scale, int) or scale < 2:
        raise UserInputError(f"llm_judge(): scale must be an integer >= 2, got {scale!r}")
    if isinstance(fields, str):
        raise UserInputError("llm_judge(): fields must be a sequence of names, not a str")
    if isinstance(lm, str | Backend):
        lm = resolve_lm(lm)
    if not callable(getattr(lm, "complete", None)):
        raise UserInputError(
            f"llm_judge(): lm must have a complete(messages) method (e.g. skillopt_dsl.lm.LM), "
            f"got {type(lm).__name__}"
        )
    return LLMJudge(rubric, lm, tuple(fields) if fields is not None else None, scale)
