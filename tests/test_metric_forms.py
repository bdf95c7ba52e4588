"""One way to call a metric: every signature form, through each of the three callers.

The core (`call_metric`), the DSPy bridge (`dspy_score`) and the agents (`call_agent_metric`)
all read a metric's form with `metric_form` and call it with `invoke_metric`; each test runs
one form through all three, so a caller that guesses on its own fails here.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import pytest

from skillopt_dsl.agents.module import call_agent_metric
from skillopt_dsl.dspy.metrics import dspy_score
from skillopt_dsl.errors import MetricError
from skillopt_dsl.metrics import Score, call_metric, invoke_metric, metric_form
from skillopt_dsl.module import RunOutcome
from skillopt_dsl.types import Example, Prediction

GOLD = Example("e1", {"q": "?"}, {"answer": "4"})
PRED = Prediction({"answer": "4"})
TRACE = ("the", "trajectory")


def _through_every_caller(metric: Callable[..., Any]) -> list[Score]:
    """The metric's score from the core, the DSPy bridge and the agents, each given TRACE."""
    outcome = RunOutcome(prediction=PRED, output="4")
    return [
        call_metric(metric, GOLD, PRED, trace=TRACE),
        dspy_score(metric, GOLD, PRED, trace=TRACE, pred_name="p", pred_trace=[1]),
        call_agent_metric(metric, GOLD, outcome, TRACE),
    ]


def plain(gold: Any, pred: Any) -> float:
    return float(gold.answer == pred.answer)


def own_third_parameter(gold: Any, pred: Any, threshold: float = 0.5) -> float:
    assert threshold == 0.5, f"the metric's own default was overwritten with {threshold!r}"
    return 1.0


def trace_keyword(gold: Any, pred: Any, trace: Any = None) -> float:
    return 1.0 if trace == TRACE else 0.5


def trace_keyword_only(gold: Any, pred: Any, *, trace: Any = None) -> float:
    return 1.0 if trace == TRACE else 0.5


def trace_by_position(gold: Any, pred: Any, t: Any) -> float:
    return 1.0 if t == TRACE else 0.5


class Unreadable:
    """A callable whose signature `inspect` cannot read."""

    __signature__ = "not a signature"

    def __call__(self, gold: Any, pred: Any) -> float:
        return 1.0


def gepa(gold: Any, pred: Any, trace: Any, pred_name: Any, pred_trace: Any) -> Score:
    return Score(1.0, f"trace={trace == TRACE}")


def gepa_varargs(*args: Any) -> float:
    return 1.0 if len(args) == 5 and args[2] == TRACE else 0.5


@pytest.mark.parametrize(
    ("metric", "form"),
    [
        (plain, "plain"),
        (own_third_parameter, "plain"),
        (trace_keyword, "trace"),
        (trace_keyword_only, "trace"),
        (trace_by_position, "trace"),
        (gepa, "feedback"),
        (gepa_varargs, "feedback"),
        (functools.partial(own_third_parameter, threshold=0.5), "plain"),
        (Unreadable(), "plain"),
    ],
)
def test_every_signature_form_is_read_once(metric: Callable[..., Any], form: str) -> None:
    """Kills: a third positional parameter with a default read as a trace (the DSPy guess),
    a keyword-only `trace` or a positional trace missed, GEPA's form by names or *args missed,
    an unreadable signature given a trace."""
    assert metric_form(metric) == form


@pytest.mark.parametrize(
    "metric",
    [
        plain,
        own_third_parameter,
        trace_keyword,
        trace_keyword_only,
        trace_by_position,
        Unreadable(),
    ],
)
def test_each_caller_scores_each_form_alike_and_passes_the_trace(
    metric: Callable[..., Any],
) -> None:
    """Kills: a caller that drops the trace (an agent's trajectory, a DSPy trace) or passes it
    into a metric's own parameter: every caller must give the same full score."""
    assert _through_every_caller(metric) == [Score(1.0)] * 3


def test_the_feedback_form_gets_the_trace_in_third_place_through_every_caller() -> None:
    """Kills: GEPA's form called with three arguments, or its trace left out."""
    assert _through_every_caller(gepa) == [Score(1.0, "trace=True")] * 3
    assert [s.value for s in _through_every_caller(gepa_varargs)] == [1.0] * 3


def test_invoke_metric_passes_name_and_predictor_trace_to_the_feedback_form() -> None:
    """Kills: `pred_name` / `pred_trace` not reaching a GEPA metric."""
    seen: list[Any] = []

    def spy(gold: Any, pred: Any, trace: Any, pred_name: Any, pred_trace: Any) -> float:
        seen.append((trace, pred_name, pred_trace))
        return 1.0

    invoke_metric(spy, GOLD, PRED, trace=TRACE, pred_name="judge", pred_trace=[7])
    assert seen == [(TRACE, "judge", [7])]


def test_a_metric_that_raises_is_a_metric_error_naming_the_example_from_every_caller() -> None:
    """Kills: one caller letting a metric's exception out raw (or scoring it 0)."""

    def broken(gold: Any, pred: Any, trace: Any = None) -> float:
        raise KeyError("answer")

    outcome = RunOutcome(prediction=PRED, output="4")
    callers = [
        lambda: call_metric(broken, GOLD, PRED),
        lambda: dspy_score(broken, GOLD, PRED, example_id="e1"),
        lambda: call_agent_metric(broken, GOLD, outcome, TRACE),
    ]
    for call in callers:
        with pytest.raises(MetricError, match="'e1'"):
            call()
