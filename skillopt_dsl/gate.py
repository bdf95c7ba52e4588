"""The strict-improvement gate: the only way a candidate skill replaces the incumbent.

`Gate.decide(candidate, incumbent)` is pure and deterministic. A candidate is accepted only when,
on the *same* validation examples:

1. its mean score is strictly greater than the incumbent's (ties are rejected);
2. the gain is greater than `min_delta`;
3. when `test="paired"`, a one-sided Wilcoxon signed-rank test on the per-example differences
   gives p < `alpha`;
4. no guard regresses beyond its tolerance.

Errored rollouts (calls that still failed after the model layer's retries) score 0. On an
example where the *incumbent's* rollout errored, the candidate is credited 0 as well (its
`candidate_score` is this credited mean), so errors can only hurt a candidate, never help it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from skillopt_dsl.errors import UserInputError
from skillopt_dsl.evaluate import EvaluationReport

__all__ = ["Gate", "GateDecision", "Guard"]


@dataclass(frozen=True)
class Guard:
    """A secondary measure that must not regress by more than `tolerance`.

    `measure(report) -> float` reads a number off an evaluation report; `higher_is_better` says
    which direction is a regression. Built-ins: `Guard.metric(name)` (an extra metric recorded by
    `evaluate(..., extra_metrics=...)`), `Guard.error_rate()`, `Guard.output_tokens()`.
    """

    name: str
    measure: Callable[[EvaluationReport], float]
    tolerance: float = 0.0
    higher_is_better: bool = True

    @staticmethod
    def metric(name: str, tolerance: float = 0.0) -> Guard:
        """Guard the mean of an extra metric recorded under `name`."""

        def measure(report: EvaluationReport) -> float:
            values = [r.extra_scores[name] for r in report.records if name in r.extra_scores]
            if len(values) != len(report.records):
                raise UserInputError(
                    f"guard {name!r}: pass it in evaluate(extra_metrics={{{name!r}: ...}})"
                )
            return sum(values) / len(values) if values else 0.0

        return Guard(name=name, measure=measure, tolerance=tolerance)

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


@dataclass(frozen=True)
class GateDecision:
    """The record of one gate decision, written to the run directory."""

    accepted: bool
    candidate_score: float
    incumbent_score: float
    delta: float
    reason: str
    candidate_hash: str = ""
    incumbent_hash: str = ""
    n_examples: int = 0
    statistic: float | None = None
    p_value: float | None = None
    guards: dict[str, dict[str, float]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of every field."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GateDecision:
        """Rebuild a decision written by `to_dict`."""
        return cls(**data)


@dataclass(frozen=True)
class Gate:
    """Accept a candidate only on a strict validation improvement (see the module docstring).

    Args:
        min_delta: the gain must exceed this (0.0: any strict gain).
        test: None, or "paired" for a one-sided Wilcoxon signed-rank test.
        alpha: significance level of the paired test.
        guards: secondary measures that must not regress.
    """

    min_delta: float = 0.0
    test: Literal["paired"] | None = None
    alpha: float = 0.05
    guards: Sequence[Guard] = ()

    def __post_init__(self) -> None:
        if self.min_delta < 0:
            raise UserInputError(f"min_delta must be >= 0, got {self.min_delta}")
        if self.test not in (None, "paired"):
            raise UserInputError(f"test must be None or 'paired', got {self.test!r}")
        if not 0 < self.alpha < 1:
            raise UserInputError(f"alpha must be in (0, 1), got {self.alpha}")

    def decide(self, candidate: EvaluationReport, incumbent: EvaluationReport) -> GateDecision:
        """Compare two reports on the same validation examples; pure and deterministic."""
        _check_same_examples(candidate, incumbent)
        credited = _credited_scores(candidate, incumbent)
        candidate_mean = sum(credited.values()) / len(credited)
        delta = candidate_mean - incumbent.mean

        def verdict(accepted: bool, reason: str, **extra: Any) -> GateDecision:
            return GateDecision(
                accepted=accepted,
                candidate_score=candidate_mean,
                incumbent_score=incumbent.mean,
                delta=delta,
                reason=reason,
                candidate_hash=candidate.skill_hash,
                incumbent_hash=incumbent.skill_hash,
                n_examples=len(candidate.records),
                **extra,
            )

        if not delta > 1e-12:
            return verdict(False, _tie_or_loss(delta))
        if delta <= self.min_delta:
            return verdict(False, f"gain {delta:.4f} is not above min_delta {self.min_delta}")
        statistic, p_value = self._paired_test(credited, incumbent)
        tested = {"statistic": statistic, "p_value": p_value}
        if p_value is not None and p_value >= self.alpha:
            return verdict(
                False,
                f"paired test not significant (p={p_value:.4f} >= alpha={self.alpha})",
                **tested,
            )
        guard_values, regression = self._check_guards(candidate, incumbent)
        if regression is not None:
            return verdict(False, regression, guards=guard_values, **tested)
        return verdict(
            True, f"validation mean improved by {delta:.4f}", guards=guard_values, **tested
        )

    def _paired_test(
        self, credited: dict[str, float], incumbent: EvaluationReport
    ) -> tuple[float | None, float | None]:
        if self.test is None:
            return None, None
        from scipy.stats import wilcoxon

        diffs = [credited[r.example_id] - r.score for r in incumbent.records]
        if not any(diffs):
            return 0.0, 1.0
        result = wilcoxon(diffs, alternative="greater", zero_method="wilcox")
        return float(result.statistic), float(result.pvalue)

    def _check_guards(
        self, candidate: EvaluationReport, incumbent: EvaluationReport
    ) -> tuple[dict[str, dict[str, float]], str | None]:
        values: dict[str, dict[str, float]] = {}
        for guard in self.guards:
            cand, inc = guard.measure(candidate), guard.measure(incumbent)
            values[guard.name] = {"candidate": cand, "incumbent": inc}
            worse = (inc - cand) if guard.higher_is_better else (cand - inc)
            if worse > guard.tolerance:
                return (
                    values,
                    f"guard {guard.name!r} regressed by {worse:.4f} (tolerance {guard.tolerance})",
                )
        return values, None


def _credited_scores(candidate: EvaluationReport, incumbent: EvaluationReport) -> dict[str, float]:
    """The candidate's per-example scores, with 0 where the incumbent's rollout errored."""
    failed = {r.example_id for r in incumbent.records if r.error is not None}
    return {r.example_id: 0.0 if r.example_id in failed else r.score for r in candidate.records}


def _tie_or_loss(delta: float) -> str:
    if abs(delta) <= 1e-12:
        return "tie: equal validation mean (ties are rejected)"
    return f"no improvement: validation mean changed by {delta:.4f}"


def _check_same_examples(candidate: EvaluationReport, incumbent: EvaluationReport) -> None:
    if sorted(candidate.example_ids) != sorted(incumbent.example_ids):
        only_c = sorted(set(candidate.example_ids) - set(incumbent.example_ids))[:5]
        only_i = sorted(set(incumbent.example_ids) - set(candidate.example_ids))[:5]
        raise UserInputError(
            "the gate compares reports on the same validation examples; "
            f"only in candidate: {only_c}, only in incumbent: {only_i}"
        )
    if not candidate.records:
        raise UserInputError("the gate needs at least one validation example")
