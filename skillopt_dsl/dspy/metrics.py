"""DSPy metrics as our `Score`: both call forms, every return type.

DSPy metrics come in two forms: `metric(gold, pred, trace=None)` (also `(gold, pred)`) and GEPA's
feedback form `metric(gold, pred, trace, pred_name, pred_trace)`. They return a float, a bool or
`dspy.Prediction(score=..., feedback=...)`. `dspy_score` calls either form through
`skillopt_dsl.metrics.calling.invoke_metric` (the one reading of a metric's signature, shared
with the core and the agents) and turns any of those into a `Score`; `dspy_metric` wraps a DSPy metric for `skillopt_dsl.compile` (our `Example` and
`Prediction` answer attribute access as DSPy's do, so the metric sees what it expects).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from skillopt_dsl.errors import BudgetExceeded, MetricError, ModelError, UserInputError
from skillopt_dsl.metrics.calling import invoke_metric, metric_form
from skillopt_dsl.metrics.score import Score, metric_name, to_score

__all__ = ["dspy_metric", "dspy_score", "metric_form"]


def dspy_score(
    metric: Callable[..., Any],
    gold: Any,
    pred: Any,
    *,
    trace: Any = None,
    pred_name: str | None = None,
    pred_trace: Any = None,
    example_id: str | None = None,
    where: str | None = None,
) -> Score:
    """Call a DSPy metric in the form it declares and convert its result to a `Score`.

    An exception in the metric becomes a `MetricError` naming the example (`where`, e.g.
    `"valset[3] (id '...')"`, else its id; a silent zero would corrupt every gate decision); a
    judge model's `BudgetExceeded` / `ModelError`, and a judge refused as unroutable
    (`UserInputError`), pass through.
    """
    name = metric_name(metric)
    try:
        result = invoke_metric(
            metric, gold, pred, trace=trace, pred_name=pred_name, pred_trace=pred_trace
        )
    except (MetricError, BudgetExceeded, ModelError, UserInputError):
        raise
    except Exception as exc:
        raise MetricError(
            f"metric {name!r} raised {type(exc).__name__}: {exc} on "
            f"{where or f'example {example_id!r}'}; {_what_to_fix(gold, pred)}",
            example_id=example_id,
            metric=name,
        ) from exc
    try:
        return score_of(result, metric=name, example_id=example_id)
    except MetricError as exc:
        raise MetricError(
            f"metric {name!r} returned {result!r} for {where or f'example {example_id!r}'}; "
            "return a bool, a float in [0, 1] or dspy.Prediction(score=<float in [0, 1]>, "
            "feedback=<text>)",
            example_id=example_id,
            metric=name,
        ) from exc


def _what_to_fix(gold: Any, pred: Any) -> str:
    """The hint of a metric's exception: the None fields it must handle, when the prediction
    has some; else the metric or the example's labels (the prediction is complete)."""
    empty = _none_fields(pred)
    if pred is None or empty:
        fields = f"fields {empty} are" if empty else "value is"
        return (
            f"fix the metric: the prediction's {fields} None here (an output that could not "
            "be parsed, or a program that returned nothing), so it must handle None"
        )
    labels = getattr(gold, "labels", None)
    names = sorted(labels().keys()) if callable(labels) else []
    return (
        f"fix the metric or this example's labels {names} (every field of the prediction is "
        "set here)"
    )


def _none_fields(pred: Any) -> list[str]:
    items = getattr(pred, "items", None)
    if not callable(items):
        return []
    try:
        return [str(k) for k, v in items() if v is None]
    except Exception:  # an object whose items() is not a mapping's
        return []


def score_of(result: object, *, metric: str = "metric", example_id: str | None = None) -> Score:
    """A `Score` from a float, a bool, a `Score`, or anything with `.score` (and optional
    `.feedback`), such as `dspy.Prediction(score=..., feedback=...)`."""
    if isinstance(result, Score | bool | int | float):
        return to_score(result, metric=metric, example_id=example_id)
    value = _field(result, "score")
    if isinstance(value, bool | int | float) and not math.isnan(float(value)):
        feedback = _field(result, "feedback")
        base = to_score(value, metric=metric, example_id=example_id)
        return Score(base.value, None if feedback is None else str(feedback))
    return to_score(result, metric=metric, example_id=example_id)  # raises, naming the value


def _field(result: object, name: str) -> Any:
    if isinstance(result, dict):
        return result.get(name)
    try:
        return getattr(result, name, None)
    except Exception:  # dspy.Prediction raises on some unknown keys; treat as absent
        return None


def dspy_metric(metric: Callable[..., Any]) -> Callable[..., Score]:
    """Wrap a DSPy metric (either form, any return type) as a `skillopt_dsl` metric.

    >>> import skillopt_dsl as sd
    >>> def exact(gold, pred, trace, pred_name, pred_trace):
    ...     return {"score": float(gold.answer == pred.answer), "feedback": "compared answers"}
    >>> wrapped = dspy_metric(exact)
    >>> wrapped(sd.Example("1", {"q": "?"}, {"answer": "4"}), sd.Prediction({"answer": "4"}))
    Score(value=1.0, feedback='compared answers')
    """

    def wrapped(example: Any, prediction: Any) -> Score:
        return dspy_score(metric, example, prediction, example_id=getattr(example, "id", None))

    wrapped.__name__ = metric_name(metric)
    wrapped.__doc__ = metric.__doc__
    return wrapped
