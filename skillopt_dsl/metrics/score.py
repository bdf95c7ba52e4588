"""`Score`: the value a metric returns, and the one function that normalises metric results."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from skillopt_dsl.errors import BudgetExceeded, MetricError, ModelError
from skillopt_dsl.metrics.calling import invoke_metric

if TYPE_CHECKING:
    from skillopt_dsl.types import Example, Prediction


@dataclass(frozen=True)
class Score:
    """A metric's verdict on one prediction.

    Attributes:
        value: the score, in [0, 1].
        feedback: optional text explaining the score; it is shown to the reflection model.
    """

    value: float
    feedback: str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.value, bool):
            object.__setattr__(self, "value", float(self.value))
        if not isinstance(self.value, (int, float)) or math.isnan(self.value):
            raise TypeError(f"Score.value must be a number in [0, 1], got {self.value!r}")
        if not 0.0 <= float(self.value) <= 1.0:
            raise ValueError(f"Score.value must be in [0, 1], got {self.value!r}")
        object.__setattr__(self, "value", float(self.value))


Metric = Callable[..., "float | bool | Score"]
"""Any callable `(example, prediction) -> float | bool | Score`; DSPy's `(gold, pred, trace=None)`
and GEPA's `(gold, pred, trace, pred_name, pred_trace)` forms and a `dspy.Prediction(score=,
feedback=)` result are accepted too."""


def metric_name(metric: Callable[..., Any]) -> str:
    """A readable name for a metric callable, for error messages and logs."""
    name = getattr(metric, "__name__", None) or type(metric).__name__
    return str(name)


def to_score(result: object, *, metric: str = "metric", example_id: str | None = None) -> Score:
    """Convert a metric's return value into a `Score`: a `Score`, a bool, an int or float in
    [0, 1], or an object with a numeric `score` and an optional `feedback` attribute (DSPy's
    `dspy.Prediction(score=..., feedback=...)`)."""
    if isinstance(result, Score):
        return result
    score = getattr(result, "score", None)
    if isinstance(score, (int, float)) and not isinstance(score, bool):
        feedback = getattr(result, "feedback", None)
        value = to_score(score, metric=metric, example_id=example_id).value
        return Score(value, feedback=None if feedback is None else str(feedback))
    if isinstance(result, bool):
        return Score(1.0 if result else 0.0)
    if isinstance(result, (int, float)) and not math.isnan(float(result)):
        value = float(result)
        if 0.0 <= value <= 1.0:
            return Score(value)
    raise MetricError(
        f"metric {metric!r} returned {result!r} for example {example_id!r}; "
        "return a bool, a float in [0, 1] or a skillopt_dsl.Score",
        example_id=example_id,
        metric=metric,
    )


def call_metric(
    metric: Callable[..., Any], example: Example, prediction: Prediction, *, trace: Any = None
) -> Score:
    """Run a metric on one prediction in the form it declares (`invoke_metric`; `trace` is
    what a `trace` form receives, such as an agent's trajectory); an exception becomes a
    `MetricError` naming the example.

    A judge model's `BudgetExceeded` or `ModelError` passes through unchanged.
    """
    name = metric_name(metric)
    try:
        result = invoke_metric(metric, example, prediction, trace=trace)
    except (MetricError, BudgetExceeded, ModelError):
        raise
    except Exception as exc:
        raise MetricError(
            f"metric {name!r} raised {type(exc).__name__}: {exc} on example {example.id!r}; "
            "fix the metric (it must handle predictions that carry a parse error, and runs "
            "without a final answer)",
            example_id=example.id,
            metric=name,
        ) from exc
    return to_score(result, metric=name, example_id=example.id)
