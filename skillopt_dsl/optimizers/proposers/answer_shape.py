"""Answer-shape rules mined from the metric's failures, without a model.

`AnswerShapeProposer` reads what the training set's gold answers have in common — one word or
several, lower case, which punctuation, and the run-length shape of letters and digits
(`novak1998` is "letters, then 4 digits") — and which of those properties the failing outputs of
the current mini-batch break. When a failing output breaks a property every gold answer has, it
proposes one rule under the skill's "Output format" heading that states the shape and shows one
real training answer, e.g.::

    - The key is one word: lower-case letters, then 4 digits, with no spaces or punctuation
      (like garcia1975).

It is a rule a small target model can follow and a small optimizer model cannot be trusted to
write. Nothing is hard-coded about a task: the properties are computed from the labels, and a
property that not every gold answer has is never stated. Modules with a fixed label set are left
to `FormatRuleProposer` (their answers' shape is the label list).
"""

from __future__ import annotations

import re
import string
from collections.abc import Sequence
from dataclasses import dataclass

from skillopt_dsl.baselines import label_set
from skillopt_dsl.evaluate import Rollout
from skillopt_dsl.module import SkillModule
from skillopt_dsl.optimizers.proposers.base import EditGroup, ProposalRequest, Proposer
from skillopt_dsl.optimizers.proposers.common import (
    FORMAT_HEADING,
    bullet_under_heading,
    module_gold_answer,
    states,
)
from skillopt_dsl.types import Example

__all__ = ["AnswerShape", "AnswerShapeProposer", "answer_shape", "shape_of"]

_PUNCTUATION = set(string.punctuation)


@dataclass(frozen=True)
class AnswerShape:
    """What every gold answer of a set has in common (None: they differ on that property).

    Attributes:
        one_word: every answer is a single token with no whitespace.
        lower_case: every answer has letters and none is upper case.
        no_punctuation: no answer contains punctuation.
        runs: the common run-length shape (`shape_of`), or None when the answers differ.
        max_words: the most words any answer has.
        example: a real gold answer that shows the shape.
    """

    one_word: bool
    lower_case: bool
    no_punctuation: bool
    runs: tuple[str, ...] | None
    max_words: int
    example: str

    def broken_by(self, output: str) -> list[str]:
        """The properties `output` breaks (names: one_word, lower_case, no_punctuation, runs,
        max_words)."""
        text = output.strip()
        broken: list[str] = []
        if self.one_word and len(text.split()) != 1:
            broken.append("one_word")
        if self.lower_case and text != text.lower():
            broken.append("lower_case")
        if self.no_punctuation and any(c in _PUNCTUATION for c in text):
            broken.append("no_punctuation")
        if self.runs is not None and shape_of(text) != self.runs:
            broken.append("runs")
        if len(text.split()) > self.max_words:
            broken.append("max_words")
        return broken

    def rule(self, field: str) -> str:
        """The rule's text, e.g. "The key is one word: lower-case letters, then 4 digits, with
        no spaces or punctuation (like garcia1975)."."""
        parts: list[str] = []
        if self.runs is not None:
            parts.append(_describe_runs(self.runs, self.lower_case))
        elif self.lower_case:
            parts.append("in lower case")
        avoid = [
            w for w, on in (("spaces", self.one_word), ("punctuation", self.no_punctuation)) if on
        ]
        head = "one word" if self.one_word else f"at most {self.max_words} words"
        body = f"{head}: {', '.join(parts)}" if parts else head
        tail = f", with no {' or '.join(avoid)}" if avoid else ""
        return f"The {field} is {body}{tail} (like {self.example})."


_RUN = re.compile(r"[^\W\d_]+|\d+|\s+|.", re.UNICODE)


def shape_of(text: str) -> tuple[str, ...]:
    """The run-length shape of `text`: letter runs become "L", digit runs "D<n>" (n digits),
    whitespace " ", anything else itself (`shape_of("novak1998") == ("L", "D4")`)."""
    shape: list[str] = []
    for run in _RUN.findall(text.strip()):
        if run.isdigit():
            shape.append(f"D{len(run)}")
        elif run[0].isalpha():
            shape.append("L")
        elif run.isspace():
            shape.append(" ")
        else:
            shape.append(run)
    return tuple(shape)


def _describe_runs(runs: tuple[str, ...], lower: bool) -> str:
    words = {"L": "lower-case letters" if lower else "letters", " ": "a space"}
    described = [
        words.get(r, f"{r[1:]} digits" if r.startswith("D") and r[1:].isdigit() else repr(r))
        for r in runs
    ]
    return ", then ".join(described)


def answer_shape(answers: Sequence[str]) -> AnswerShape | None:
    """What every answer in `answers` shares; None when there are fewer than 3 answers (too
    little to call anything common)."""
    cleaned = [a.strip() for a in answers if a.strip()]
    if len(cleaned) < 3:
        return None
    shapes = {shape_of(a) for a in cleaned}
    return AnswerShape(
        one_word=all(len(a.split()) == 1 for a in cleaned),
        lower_case=all(a == a.lower() and any(c.isalpha() for c in a) for a in cleaned),
        no_punctuation=not any(c in _PUNCTUATION for a in cleaned for c in a),
        runs=next(iter(shapes)) if len(shapes) == 1 else None,
        max_words=max(len(a.split()) for a in cleaned),
        example=cleaned[0],
    )


@dataclass(kw_only=True)
class AnswerShapeProposer(Proposer):
    """Proposes one output rule that states the gold answers' common shape, when failing
    outputs break it (see the module docstring). No model is called.

    Args:
        min_broken: how many failing outputs of the batch must break the shape.
    """

    min_broken: int = 1
    name: str = "answer-shape"

    def max_calls(self, batch_size: int) -> int:
        return 0  # no model call

    def propose(self, request: ProposalRequest) -> list[EditGroup]:
        module = request.module
        field = _answer_field(module, request.trainset)
        if field is None or label_set(module) is not None:
            return []
        golds = [module_gold_answer(module, e) for e in request.trainset]
        shape = answer_shape([g for g in golds if g is not None])
        if shape is None:
            return []
        broken = [
            e.id for e, r in request.failures() if shape.broken_by(_answer_text(module, field, r))
        ]
        if len(broken) < self.min_broken:
            return []
        rule = shape.rule(field)
        if states(request.skill, rule):
            return []
        why = f"{len(broken)} failing outputs break the shape every gold answer has"
        return [
            EditGroup(
                (bullet_under_heading(request.skill, FORMAT_HEADING, rule, "answer shape"),),
                self.name,
                True,
                why,
                addresses=tuple(broken),
            )
        ]


def _answer_field(module: SkillModule, trainset: Sequence[Example]) -> str | None:
    """The output field whose shape the labels give: the module's one output field, or the
    one output field the training labels hold (a ChainOfThought's `answer`, not its
    `reasoning`); None when there is no such single field."""
    if len(module.output_fields) == 1:
        return next(iter(module.output_fields))
    labelled = [f for f in module.output_fields if any(f in e.labels for e in trainset)]
    return labelled[0] if len(labelled) == 1 else None


def _answer_text(module: SkillModule, field: str, rollout: Rollout) -> str:
    """What the model wrote for `field`: the whole output for a one-field module (a value
    hidden in a sentence breaks the shape), else the parsed field's text."""
    if len(module.output_fields) == 1:
        return rollout.prediction.raw or rollout.output
    value = rollout.prediction.outputs.get(field)
    return "" if value is None else str(value)
