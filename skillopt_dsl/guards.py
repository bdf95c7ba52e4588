"""Credited scores and guards: what the gate reads off two evaluation reports besides the mean.

A rollout whose model call failed scores 0 (`credited`); where the incumbent's call failed the
candidate is credited 0 too (`credited_pairs`). A `Guard` is a secondary measure that must not
regress (see `skillopt_dsl.gate`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from skillopt_dsl.errors import UserInputError
from skillopt_dsl.evaluate import EvaluationReport, Rollout

__all__ = ["Guard", "MetricFn", "credited", "credited_pairs"]

MetricFn = Callable[..., Any]


@dataclass(frozen=True)
class Guard:
    """A secondary measure that must not regress by more than `tolerance`.

    `measure(report) -> float` reads a number off an evaluation report; `higher_is_better` says
    which direction is a regression. Built-ins: `Guard.metric(name, fn)` (a metric function the
    driver records on every validation rollout), `Guard.error_rate()`, `Guard.output_tokens()`.
    `metric_fn` is the function behind a metric guard (None for the others).
    """

    name: str
    measure: Callable[[EvaluationReport], float]
    tolerance: float = 0.0
    higher_is_better: bool = True
    metric_fn: MetricFn | None = None

    @staticmethod
    def metric(name: str, fn: MetricFn, tolerance: float = 0.0) -> Guard:
        """Guard the mean of `fn(example, prediction)` (a metric: float, bool or `Score`).

        `compile` records `fn` on every validation rollout (see `Gate.guard_metrics`); a rollout
        whose model call failed scores 0 for it, without calling `fn`.

        >>> guard = Guard.metric("brevity", lambda example, prediction: len(prediction.raw) < 80)
        >>> guard.name, guard.tolerance
        ('brevity', 0.0)
        """
        if not callable(fn):
            raise UserInputError(
                f"Guard.metric({name!r}, fn): fn must be a metric function "
                f"(example, prediction) -> float | bool | Score, got {type(fn).__name__}"
            )

        def measure(report: EvaluationReport) -> float:
            missing = [r.example_id for r in report.records if name not in r.extra_scores]
            if missing:
                raise UserInputError(
                    f"guard {name!r} has no scores on {missing[:5]}: evaluate with "
                    f"extra_metrics=gate.guard_metrics() (compile does this for you)"
                )
            values = [credited(r, r.extra_scores[name]) for r in report.records]
            return sum(values) / len(values) if values else 0.0

        return Guard(name=name, measure=measure, tolerance=tolerance, metric_fn=fn)

    @staticmethod
    def error_rate(tolerance: float = 0.0) -> Guard:
        """Guard the share of rollouts whose model call failed (lower is better)."""

        def measure(report: EvaluationReport) -> float:
            return report.n_errors / len(report.records) if report.records else 0.0

        return Guard(
            name="error_rate", measure=measure, tolerance=tolerance, higher_is_better=False
        )

    @staticmethod
    def output_tokens(tolerance: float) -> Guard:
        """Guard the mean completion length in tokens (lower is better)."""

        def measure(report: EvaluationReport) -> float:
            n = len(report.records)
            return sum(r.completion_tokens for r in report.records) / n if n else 0.0

        return Guard(
            name="output_tokens", measure=measure, tolerance=tolerance, higher_is_better=False
        )


def credited_pairs(
    candidate: EvaluationReport, incumbent: EvaluationReport
) -> list[tuple[float, float]]:
    """(candidate, incumbent) credited scores per example, in the incumbent's order.

    A failed call scores 0 on its side; where the incumbent's call failed, the candidate is
    credited 0 too (errors never help a candidate).
    """
    by_id = {r.example_id: r for r in candidate.records}
    pairs = []
    for held in incumbent.records:
        challenger = by_id[held.example_id]
        credit = 0.0 if held.error is not None else 1.0
        pairs.append((credit * credited(challenger, challenger.score), credited(held, held.score)))
    return pairs


def credited(rollout: Rollout, value: float) -> float:
    """`value`, or 0 where the rollout's model call failed (errors never help a candidate)."""
    return 0.0 if rollout.error is not None else value
