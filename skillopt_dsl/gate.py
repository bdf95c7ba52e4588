"""The strict-improvement gate: the only way a candidate skill replaces the incumbent.

`Gate.decide(candidate, incumbent, decision_index=k)` is pure and deterministic. A candidate is
accepted only when, on the *same* validation examples:

1. its credited mean score is strictly greater than the incumbent's (ties are rejected);
2. the gain is greater than `min_delta`;
3. (default) an exact one-sided paired test (`skillopt_dsl.signed_rank`) on the per-example
   credited scores gives
   p <= alpha_k, the share of the run's significance spent on decision k (see below);
4. no guard regresses beyond its tolerance.

**Credited scores.** A rollout whose model call failed (after the model layer's retries) scores
0, whatever the metric would say; on an example where the *incumbent's* call failed, the
candidate is credited 0 as well. Errors can only hurt a candidate, never help it: a candidate
whose calls all fail scores 0 and is never accepted.

**Significance spent across the run.** With `spending="run"` (default) the run's driver
holds a `SignificanceBudget` (skillopt_dsl.evidence): each decision is tested at the level the
budget gives it, planned from the run's decisions (the first may use `first_share` of alpha),
and is charged afterwards only what it used (nothing when accepted; the attained size of a
discrete test otherwise), so the chance that *any* decision of the run accepts a useless edit
stays at most alpha. `decide` called on its own, without `alpha=`, uses the open-ended schedule
alpha * 6 / (pi^2 k^2) for decision k = `decision_index + 1`, which sums to alpha.
`spending="per-decision"` tests every decision at alpha (not noise-safe over a run).
`Gate.mean_only()` is SkillOpt's rule (strict mean gain only), also not noise-safe.

**Sequential evaluation** (skillopt_dsl.driver.looks). A candidate is scored on validation in looks
(`Gate.look_sizes`: a quarter, half, three quarters of the set, each of at least `min_look`,
then all of it). At an interim look it may be **accepted early** (`accept_early`, at its look's
share of `early_share` of the level; never with guards, which must hold on the whole set), else
it **stops** when not strictly ahead (`stopped`, charged all it could spend). A rejected
decision is charged the attained sizes of all its tests, so the run's bound holds (docs/concepts.md).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal, cast

from skillopt_dsl.errors import UserInputError
from skillopt_dsl.evaluate import EvaluationReport
from skillopt_dsl.events import DecisionRecord
from skillopt_dsl.evidence import SignificanceBudget, look_sizes
from skillopt_dsl.guards import Guard, MetricFn, credited_pairs
from skillopt_dsl.signed_rank import EXACT_LIMIT, TIE, PairedTest, paired_test

__all__ = ["EXACT_LIMIT", "Gate", "GateDecision", "Guard", "PairedTest", "paired_test"]


@dataclass(frozen=True)
class GateDecision:
    """The record of one gate decision, written to the run directory.

    `candidate_score` and `incumbent_score` are credited means (failed calls count 0; see the
    module docstring). `test` names the paired test that ran ("sign", "signed-rank",
    "signed-rank-normal"; None when none ran), `p_value` its one-sided p-value, `alpha` the
    significance this decision was allowed to spend and `decision_index` its place in the run.

    The evidence: `critical` is the statistic the test needed at `alpha` (wins among the
    discordant pairs for the sign test, W+ for the signed-rank test; None: none was enough),
    `charged` the significance the decision spent from the run's budget (0 when accepted, the
    tests' attained sizes otherwise, all it could spend when stopped early).
    `examples_scored` is how many validation examples the candidate was scored on;
    `stopped_at_look` the interim look (1-based) at which it stopped for futility,
    `accepted_at_look` the one at which it was accepted early (both None: it was scored on the
    whole set) and `calls_saved` the validation rollouts that saved. `early_alpha` is the
    significance its interim looks could spend on early acceptance, on top of `alpha` for the
    whole set (each look's test ran at an even share of it, `look_alpha`; None: no early
    acceptance); an early acceptance's `p_value` and `critical` are its look's.
    """

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
    test: str | None = None
    alpha: float | None = None
    decision_index: int = 0
    critical: float | None = None
    charged: float | None = None
    examples_scored: int = 0
    stopped_at_look: int | None = None
    calls_saved: int = 0
    accepted_at_look: int | None = None
    early_alpha: float | None = None
    look_alpha: float | None = None

    @property
    def stopped_early(self) -> bool:
        """True when the candidate stopped at an interim look (it was never accepted)."""
        return self.stopped_at_look is not None

    def to_dict(self) -> DecisionRecord:
        """A JSON-ready dict of every field."""
        return cast(DecisionRecord, asdict(self))

    @classmethod
    def from_dict(cls, data: DecisionRecord) -> GateDecision:
        """Rebuild a decision written by `to_dict`."""
        return cls(**data)


TestName = Literal["paired"]
Spending = Literal["run", "per-decision"]


@dataclass(frozen=True)
class Gate:
    """Accept a candidate only on a significant strict validation improvement (module docstring).

    Args:
        min_delta: the gain in credited mean must exceed this (0.0: any strict gain).
        test: "paired" (default): the exact one-sided paired test; None: mean only.
        alpha: the run's significance level (the chance a useless edit passes any decision).
        spending: "run" (default): the run's decisions share alpha through a
            `SignificanceBudget` planned from the run; "per-decision": every decision at alpha
            (not noise-safe).
        first_share: the share of alpha the first planned decision may use (the rest is split
            over the later ones; unused significance is passed on).
        looks: interim looks, as fractions of the validation set, at which a candidate that is
            not ahead stops (() scores every candidate on the whole set).
        min_look: an interim look needs at least this many examples.
        early_share: the share of a decision's level its interim looks may spend on
            accepting a candidate early (split evenly over them; 0: accept only on the whole
            set; a gate with guards always decides on the whole set). It is paid from
            significance not yet given to the decision where the run has some, else from the
            whole-set level (docs/concepts.md, "Sequential evaluation").
        guards: secondary measures that must not regress.
    """

    min_delta: float = 0.0
    test: TestName | None = "paired"
    alpha: float = 0.05
    spending: Spending = "run"
    guards: Sequence[Guard] = ()
    first_share: float = 2 / 3
    looks: tuple[float, ...] = (0.25, 0.5, 0.75)
    min_look: int = 10
    early_share: float = 0.25

    def __post_init__(self) -> None:
        if self.min_delta < 0:
            raise UserInputError(f"min_delta must be >= 0, got {self.min_delta}")
        if self.test not in (None, "paired"):
            raise UserInputError(
                f"test must be 'paired' or None (mean only: Gate.mean_only()), got {self.test!r}"
            )
        if not 0 < self.alpha < 1:
            raise UserInputError(f"alpha must be in (0, 1), got {self.alpha}")
        if self.spending not in ("run", "per-decision"):
            raise UserInputError(f"spending must be 'run' or 'per-decision', got {self.spending!r}")
        if not 0 < self.first_share <= 1:
            raise UserInputError(f"first_share must be in (0, 1], got {self.first_share}")
        if any(not 0 < f < 1 for f in self.looks) or list(self.looks) != sorted(set(self.looks)):
            raise UserInputError(f"looks must be increasing fractions in (0, 1), got {self.looks}")
        if self.min_look < 1:
            raise UserInputError(f"min_look must be >= 1, got {self.min_look}")
        if not 0 <= self.early_share < 1:
            raise UserInputError(f"early_share must be in [0, 1), got {self.early_share}")
        names = [g.name for g in self.guards]
        if len(set(names)) != len(names):
            raise UserInputError(f"guard names must be unique, got {names}")

    @classmethod
    def mean_only(cls, *, min_delta: float = 0.0, guards: Sequence[Guard] = ()) -> Gate:
        """SkillOpt's rule: accept any strict gain in mean (ties rejected), no test, no looks.

        Not noise-safe: on an 18-example validation set whose outcomes flip at random, a run of
        four useless edits passes it most of the time (see bench/bench_gate_noise.py).
        """
        return cls(min_delta=min_delta, test=None, guards=guards, looks=())

    def guard_metrics(self) -> dict[str, MetricFn]:
        """The metric functions of the metric guards, by name (`evaluate(extra_metrics=...)`)."""
        return {g.name: g.metric_fn for g in self.guards if g.metric_fn is not None}

    def significance_budget(self) -> SignificanceBudget:
        """A fresh budget of this gate's alpha, with no decision planned yet."""
        return SignificanceBudget(alpha=self.alpha, first_share=self.first_share)

    def alpha_for(self, decision_index: int) -> float | None:
        """The open-ended schedule: the level decision `decision_index` (0-based) may use when
        no budget is given (alpha * 6 / (pi^2 k^2)); None without a test."""
        if decision_index < 0:
            raise UserInputError(f"decision_index must be >= 0, got {decision_index}")
        if self.test is None:
            return None
        if self.spending == "per-decision":
            return self.alpha
        return self.alpha * 6.0 / (math.pi**2 * (decision_index + 1) ** 2)

    def look_sizes(self, n: int) -> list[int]:
        """How many validation examples are scored at each look (the last is all `n`)."""
        return look_sizes(self, n)

    def is_futile(self, candidate: EvaluationReport, incumbent: EvaluationReport) -> bool:
        """True when the candidate is not strictly ahead on the examples it was scored on
        (`candidate` may cover a prefix of the validation set; credited sums)."""
        pairs = credited_pairs(candidate, _restricted(incumbent, candidate))
        return not sum(c - i for c, i in pairs) > TIE

    def accept_early(
        self,
        candidate: EvaluationReport,
        incumbent: EvaluationReport,
        *,
        look: int,
        level: float,
        n_val: int,
        decision_index: int = 0,
    ) -> GateDecision:
        """The gate's test at interim `look` (1-based) of a set of `n_val` on the examples
        `candidate` was scored on, at the look's `level`: accepted (`accepted_at_look`, charged
        nothing) when it passes; otherwise not, `charged` the test's attained size there (what a
        decision that goes on adds to its charge)."""
        held, total = _restricted(incumbent, candidate), n_val
        decision = self.decide(candidate, held, decision_index=decision_index, alpha=level)
        return replace(
            decision,
            n_examples=total,
            accepted_at_look=look if decision.accepted else None,
            look_alpha=level,
            calls_saved=total - len(held.records) if decision.accepted else 0,
            reason=f"look {look} ({len(held.records)} examples): {decision.reason}",
        )

    def stopped(
        self,
        candidate: EvaluationReport,
        incumbent: EvaluationReport,
        *,
        look: int,
        alpha: float | None,
        n_val: int,
        decision_index: int = 0,
        why: str | None = None,
    ) -> GateDecision:
        """The decision for a candidate stopped at interim `look` (1-based) of a set of `n_val`,
        for futility or `why`: rejected, charged its whole level, with the scores it has."""
        pairs = credited_pairs(candidate, _restricted(incumbent, candidate))
        total = n_val
        cand = sum(c for c, _ in pairs) / len(pairs)
        held = sum(i for _, i in pairs) / len(pairs)
        lead = sum(c - i for c, i in pairs)
        why = why or "not ahead of the incumbent"
        return GateDecision(
            accepted=False,
            candidate_score=cand,
            incumbent_score=held,
            delta=cand - held,
            reason=(
                f"stopped at look {look} ({len(pairs)} of {total} examples): "
                f"{why} (lead {lead:+.4g})"
            ),
            candidate_hash=candidate.skill_hash,
            incumbent_hash=incumbent.skill_hash,
            n_examples=total,
            alpha=alpha,
            decision_index=decision_index,
            charged=alpha,
            examples_scored=len(pairs),
            stopped_at_look=look,
            calls_saved=total - len(pairs),
        )

    def decide(
        self,
        candidate: EvaluationReport,
        incumbent: EvaluationReport,
        *,
        decision_index: int = 0,
        alpha: float | None = None,
    ) -> GateDecision:
        """Compare two reports on the same validation examples; pure and deterministic.

        `alpha` is the significance this decision may use (the driver passes its budget's
        level); without it, `alpha_for(decision_index)`. `decision_index` is how many gate
        decisions the run made before this one.
        """
        _check_same_examples(candidate, incumbent)
        if alpha is not None and not 0 <= alpha < 1:
            raise UserInputError(f"alpha must be in [0, 1), got {alpha}")
        level = self.alpha_for(decision_index) if alpha is None else alpha
        if self.test is None:
            level = None
        pairs = credited_pairs(candidate, incumbent)
        result = None if level is None else paired_test([c - i for c, i in pairs], level=level)
        verdict = _Verdict(candidate, incumbent, pairs, level, result, decision_index)
        delta = verdict.delta
        if not delta > TIE:
            return verdict(False, _tie_or_loss(delta))
        if delta <= self.min_delta:
            return verdict(False, f"gain {delta:.4f} is not above min_delta {self.min_delta}")
        if result is not None and level is not None and result.p_value > level:
            return verdict(False, _not_significant(result, level, decision_index))
        guard_values, regression = self._check_guards(candidate, incumbent)
        if regression is not None:
            return verdict(False, regression, guards=guard_values)
        return verdict(True, f"validation mean improved by {delta:.4f}", guards=guard_values)

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


@dataclass(frozen=True)
class _Verdict:
    """One decision's facts (the credited pairs, the level, the test's outcome); called with
    the verdict, it writes the `GateDecision`."""

    candidate: EvaluationReport
    incumbent: EvaluationReport
    pairs: list[tuple[float, float]]
    level: float | None
    result: PairedTest | None
    decision_index: int

    @property
    def means(self) -> tuple[float, float]:
        """The candidate's and the incumbent's credited means."""
        n = len(self.pairs)
        return sum(c for c, _ in self.pairs) / n, sum(i for _, i in self.pairs) / n

    @property
    def delta(self) -> float:
        """The candidate's credited mean minus the incumbent's."""
        candidate, incumbent = self.means
        return candidate - incumbent

    def __call__(self, accepted: bool, reason: str, **extra: Any) -> GateDecision:
        level, result = self.level, self.result
        tested: dict[str, Any] = {}
        if result is not None:
            tested = {
                "test": result.name,
                "statistic": result.statistic,
                "p_value": result.p_value,
                "critical": result.critical,
            }
        charged = None if level is None else 0.0 if accepted else _charge(result, level)
        candidate_mean, incumbent_mean = self.means
        return GateDecision(
            accepted=accepted,
            candidate_score=candidate_mean,
            incumbent_score=incumbent_mean,
            delta=candidate_mean - incumbent_mean,
            reason=reason,
            candidate_hash=self.candidate.skill_hash,
            incumbent_hash=self.incumbent.skill_hash,
            n_examples=len(self.pairs),
            alpha=level,
            decision_index=self.decision_index,
            charged=charged,
            examples_scored=len(self.pairs),
            **tested,
            **extra,
        )


def _restricted(incumbent: EvaluationReport, candidate: EvaluationReport) -> EvaluationReport:
    """The incumbent's report on the examples `candidate` was scored on (a look's prefix)."""
    return incumbent.restricted_to(candidate.example_ids)


def _charge(result: PairedTest | None, level: float) -> float:
    """What a decision that was not accepted spends: its test's attained size (the whole level
    where the size is unknown, as for the normal approximation)."""
    if result is None or result.attained is None:
        return level
    return min(level, result.attained)


def _tie_or_loss(delta: float) -> str:
    if abs(delta) <= TIE:
        return "tie: equal validation mean (ties are rejected)"
    return f"no improvement: validation mean changed by {delta:.4f}"


def _not_significant(result: PairedTest, alpha_k: float, decision_index: int) -> str:
    needed = "" if result.critical is None else f"; needed {result.critical:g}"
    return (
        f"{result.name} test not significant: p={result.p_value:.4g} > alpha={alpha_k:.4g} "
        f"(statistic {result.statistic:g}{needed}; decision {decision_index + 1} of the run)"
    )


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
