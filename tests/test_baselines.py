"""The best constant answer (`skillopt_dsl.baselines`): chosen on validation, scored on test,
computed with the module's own scoring and without any model call."""

from __future__ import annotations

import enum
from typing import Literal

import pytest

import skillopt_dsl as sd
from skillopt_dsl.baselines import (
    Baseline,
    baseline_warning,
    constant_baseline,
    constant_score,
    label_set,
)
from skillopt_dsl.types import Example
from tests.helpers import Parity


def labelled(answers: str, prefix: str) -> list[Example]:
    """One example per letter: `e` = "even", `o` = "odd" (inputs do not matter here)."""
    names = {"e": "even", "o": "odd"}
    return [
        Example(id=f"{prefix}{i}", inputs={"number": str(i)}, labels={"answer": names[a]})
        for i, a in enumerate(answers)
    ]


VAL = labelled("ooooooeee" + "e", "v")  # 6 odd, 4 even: "odd" is best on validation
TEST = labelled("oeeeeeeeee", "t")  # 1 odd, 9 even: "even" would be best on test


def test_the_label_is_chosen_on_validation_and_scored_on_test() -> None:
    """Kills: choosing the label on test (would name "even"), taking the first declared label
    ("even") without scoring, or reporting the validation score as the test score."""
    assert constant_baseline(Parity(), VAL, TEST) == Baseline("odd", 0.6, 0.1)


def test_a_tie_goes_to_the_first_declared_label_and_no_test_means_none() -> None:
    """Kills: a tie broken by the last label (or by set order), and a test score invented when
    there is no test set."""
    tied = labelled("eeoo", "v")
    assert constant_baseline(Parity(), tied) == Baseline("even", 0.5, None)


def test_the_module_metric_scores_the_constant() -> None:
    """Kills: comparing the constant with the label directly instead of through the module's
    metric (this metric rewards the wrong answer, so the best constant flips)."""

    def wrong_is_right(example: Example, prediction: sd.Prediction) -> float:
        return float(prediction.answer != example.labels["answer"])

    module = Parity(metric=wrong_is_right)
    assert constant_score(module, "even", VAL) == pytest.approx(0.6)
    assert constant_baseline(module, VAL, TEST) == Baseline("even", 0.6, 0.1)


class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


def _module(output: object) -> sd.SkillModule:
    return sd.SkillModule.create(
        name="M",
        inputs={"text": str},
        outputs={"answer": output},
        metric=lambda example, prediction: prediction.answer == example.labels["answer"],
    )


def test_label_sets_of_literal_bool_and_enum_but_not_free_text() -> None:
    """Kills: a baseline invented for a free-text or multi-field output, and bool / Enum
    outputs left without one."""
    assert label_set(Parity()) == ("even", "odd")
    assert label_set(_module(bool)) == (True, False)
    assert label_set(_module(Colour)) == (Colour.RED, Colour.BLUE)
    assert label_set(_module(str)) is None
    assert label_set(_module(int)) is None
    two = sd.SkillModule.create(
        name="Two", inputs={"text": str}, outputs={"a": Literal["x", "y"], "b": str}
    )
    assert label_set(two) is None
    examples = [Example(id="a", inputs={"text": ""}, labels={"answer": Colour.BLUE})]
    assert constant_baseline(_module(Colour), examples) == Baseline("blue", 1.0, None)
    assert constant_baseline(_module(str), examples) is None


def test_warning_compares_on_test_and_falls_back_to_validation() -> None:
    """Kills: a warning that compares on validation when a test score exists, that lets a tie
    pass as a gain (>= instead of >), or that stays silent without a test set."""
    baseline = Baseline("odd", 0.6, 0.1)
    assert baseline_warning(baseline, val_score=0.5, test_score=0.2) is None
    tie = baseline_warning(baseline, val_score=0.9, test_score=0.1)
    assert tie is not None and "'odd' on test: 0.1000 vs 0.1000" in tie
    no_test = baseline_warning(Baseline("odd", 0.6), val_score=0.6, test_score=None)
    assert no_test is not None and "on validation" in no_test
    assert baseline_warning(None, val_score=0.0, test_score=0.0) is None
