"""The best constant answer: what a skill must beat before its gain means anything.

For a module whose output is one field with a fixed label set (a `Literal[...]`, `bool` or an
`Enum`), every label is scored as a constant prediction with the module's own scoring (its
metric, by default) on the validation set, without a single model call. The label that scores
best on validation (the first declared one on a tie) is the constant baseline; its test score is
reported beside it, never used to choose it.

Example::

    baseline = constant_baseline(Navigate(), splits.val, splits.test)
    if baseline is not None:
        print(baseline.label, baseline.val_score, baseline.test_score)
"""

from __future__ import annotations

import enum
import typing
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Annotated, Any, Literal

from skillopt_dsl.module import RunOutcome, SkillModule
from skillopt_dsl.types import Example, Prediction

__all__ = [
    "Baseline",
    "baseline_warning",
    "constant_baseline",
    "constant_score",
    "label_set",
    "not_better_warning",
    "rescored",
]


@dataclass(frozen=True)
class Baseline:
    """The best constant answer, chosen on validation.

    Attributes:
        label: the answer given to every example, as text (e.g. `"True"`).
        val_score: its mean score on the validation set (where it was chosen).
        test_score: its mean score on the test set, or None when there was none.
    """

    label: str
    val_score: float
    test_score: float | None = None

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready dict of every field."""
        return asdict(self)


def label_set(module: SkillModule) -> tuple[Any, ...] | None:
    """The closed set of answers of a single-output module, in declared order; else None."""
    if len(module.output_fields) != 1:
        return None
    (spec,) = module.output_fields.values()
    annotation = spec.annotation
    if typing.get_origin(annotation) is Annotated:
        annotation = typing.get_args(annotation)[0]
    if typing.get_origin(annotation) is Literal:
        return typing.get_args(annotation)
    if annotation is bool:
        return (True, False)
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return tuple(annotation)
    return None


def constant_score(module: SkillModule, answer: Any, examples: Sequence[Example]) -> float:
    """The mean score of answering `answer` to every example (no model call)."""
    (name,) = module.output_fields
    text = _label_text(answer)
    prediction = Prediction({name: answer}, raw=text)
    outcome = RunOutcome(prediction=prediction, output=text, calls=0)
    total = sum(module.score(example, outcome).value for example in examples)
    return total / len(examples)


def constant_baseline(
    module: SkillModule, valset: Sequence[Example], testset: Sequence[Example] | None = None
) -> Baseline | None:
    """The best constant answer on `valset` and its score on `testset`; None when the module's
    output has no fixed label set (or `valset` is empty)."""
    answers = label_set(module)
    if not answers or not valset:
        return None
    scored = [(constant_score(module, answer, valset), answer) for answer in answers]
    best_val = max(score for score, _ in scored)
    answer = next(a for score, a in scored if score == best_val)
    test = constant_score(module, answer, testset) if testset else None
    return Baseline(label=_label_text(answer), val_score=best_val, test_score=test)


def rescored(baseline: Baseline, module: SkillModule, examples: Sequence[Example]) -> Baseline:
    """`baseline` with its validation score measured on `examples` only (the answer stays the
    one chosen on the whole validation set; no model call)."""
    answers = [a for a in label_set(module) or () if _label_text(a) == baseline.label]
    if not answers or not examples:
        return baseline
    return replace(baseline, val_score=constant_score(module, answers[0], examples))


def baseline_warning(
    baseline: Baseline | None, val_score: float, test_score: float | None
) -> str | None:
    """A plain warning when the skill does not beat the constant answer on test (on validation
    when there is no test score); None when it does or when there is no baseline."""
    if baseline is None:
        return None
    if test_score is not None and baseline.test_score is not None:
        return not_better_warning(baseline.label, "test", test_score, baseline.test_score)
    return not_better_warning(baseline.label, "validation", val_score, baseline.val_score)


def not_better_warning(label: str, split: str, skill_score: float, constant: float) -> str | None:
    """The warning line when `skill_score` does not strictly beat the constant answer `label`'s
    score on `split`; None when it does."""
    if skill_score > constant:
        return None
    return (
        f"the skill does not beat the constant answer {label!r} on {split}: "
        f"{skill_score:.4f} vs {constant:.4f}; its gain over the seed is not a real one"
    )


def _label_text(answer: Any) -> str:
    return str(answer.value) if isinstance(answer, enum.Enum) else str(answer)
