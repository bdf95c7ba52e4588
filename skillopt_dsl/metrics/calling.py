"""The one way to call a metric: its call form read from its signature, then one call.

A metric is written in one of three forms, and every caller (the core `call_metric`, the DSPy
bridge, the agents) calls it through `invoke_metric`, so a metric means the same everywhere:

- `"feedback"`, GEPA's `(gold, pred, trace, pred_name, pred_trace)`: it names `pred_name` and
  `pred_trace`, takes `*args`, or has five or more positional parameters;
- `"trace"`, DSPy's `(gold, pred, trace=None)`: it has a parameter named `trace` (passed by
  keyword), or a third positional parameter WITHOUT a default (passed positionally; a third
  parameter with a default, such as `threshold=0.5`, is the metric's own and is left alone);
- `"plain"`, `(example, prediction)`: everything else, a callable whose signature cannot be
  read included.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, Literal

__all__ = ["MetricForm", "invoke_metric", "metric_form"]

MetricForm = Literal["feedback", "trace", "plain"]

_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


def _parameters(metric: Callable[..., Any]) -> list[inspect.Parameter] | None:
    try:
        return list(inspect.signature(metric).parameters.values())
    except (TypeError, ValueError):
        return None


def metric_form(metric: Callable[..., Any]) -> MetricForm:
    """How `metric` is called (see the module docstring).

    >>> metric_form(lambda gold, pred: 1.0)
    'plain'
    >>> metric_form(lambda gold, pred, threshold=0.5: 1.0)
    'plain'
    >>> metric_form(lambda gold, pred, trace=None: 1.0)
    'trace'
    >>> metric_form(lambda gold, pred, trace, pred_name, pred_trace: 1.0)
    'feedback'
    """
    params = _parameters(metric)
    if params is None:
        return "plain"
    names = {p.name for p in params}
    positional = [p for p in params if p.kind in _POSITIONAL]
    varargs = any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params)
    if varargs or len(positional) >= 5 or {"pred_name", "pred_trace"} <= names:
        return "feedback"
    if "trace" in names:
        return "trace"
    if len(positional) >= 3 and positional[2].default is inspect.Parameter.empty:
        return "trace"
    return "plain"


def invoke_metric(
    metric: Callable[..., Any],
    gold: Any,
    pred: Any,
    *,
    trace: Any = None,
    pred_name: str | None = None,
    pred_trace: Any = None,
) -> object:
    """Call `metric` in the form it declares and return what it returned (exceptions too)."""
    form = metric_form(metric)
    if form == "feedback":
        return metric(gold, pred, trace, pred_name, pred_trace)
    if form == "trace":
        params = _parameters(metric) or []
        if any(p.name == "trace" for p in params):
            return metric(gold, pred, trace=trace)
        return metric(gold, pred, trace)
    return metric(gold, pred)
