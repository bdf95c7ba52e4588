"""Metrics: `Score`, the built-in metric factories, `weighted` and the LLM judge.

A metric is any callable `(example, prediction) -> float | bool | Score` (DSPy's
`(example, pred, trace=None)` and GEPA's five-argument form are accepted too); `metric_form`
reads which form a metric has, `invoke_metric` calls it (every caller goes through it), and
`call_metric` runs one safely.
"""

from skillopt_dsl.metrics.builtins import (
    contains,
    exact_match,
    json_schema,
    multiple_choice,
    numeric,
    regex_match,
    token_f1,
    weighted,
)
from skillopt_dsl.metrics.calling import MetricForm, invoke_metric, metric_form
from skillopt_dsl.metrics.judge import llm_judge
from skillopt_dsl.metrics.score import Metric, Score, call_metric, to_score

__all__ = [
    "Metric",
    "MetricForm",
    "Score",
    "call_metric",
    "contains",
    "exact_match",
    "invoke_metric",
    "json_schema",
    "llm_judge",
    "metric_form",
    "multiple_choice",
    "numeric",
    "regex_match",
    "to_score",
    "token_f1",
    "weighted",
]
