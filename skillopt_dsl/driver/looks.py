"""One gate decision scored look by look: early acceptance, futility stops, what it spends.

The driver's door asks `SequentialJudge.judge` for a decision on a candidate. The candidate is
scored on validation in the gate's looks (`Gate.look_sizes`, in the seeded look order). At each
interim look it is first tested for early acceptance at the look's share of the decision's early
level (`Gate.accept_early`), then stopped if it is not ahead (`Gate.is_futile`, `Gate.stopped`);
a candidate that reaches the last look is decided on the whole set (`Gate.decide`) at the
whole-set level. Under a call limit a look is scored only when the calls left pay for it (`CanPay`).
A decision the calls left cannot pay to the whole set is planned on the prefix they pay for (its
looks before it, then one test on it at the whole-set level; the size fixed from the calls left
before any score is seen, so the level holds); a decision whose next look the budget no longer
pays (a rollout cost more than measured) stops at the last look it reached, rejected and
charged like a futility stop; and a decision that cannot pay for its looks up to the first at
which it could accept (`SequentialJudge.deciding_look`: its first look where that look can
accept early, else the whole set) is not started (`BudgetExceeded`, nothing sent). The
incumbent is scored lazily, only on the examples a look needs: after an early acceptance the
new incumbent has been scored on a prefix, and a later decision scores it on more examples only
when one of its looks reaches them (cached rollouts cost nothing).

What a decision spends from the run's `SignificanceBudget` (docs/concepts.md, "Evidence"):
nothing when accepted (at any look); everything it could have spent (whole-set level plus early
level) when stopped for futility; otherwise the attained sizes of every test it ran.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, replace

from skillopt_dsl.errors import BudgetExceeded
from skillopt_dsl.evaluate import EvaluationReport
from skillopt_dsl.evidence import SignificanceBudget, any_result_passes, preflight
from skillopt_dsl.gate import Gate, GateDecision
from skillopt_dsl.skill import Skill
from skillopt_dsl.types import Example

__all__ = [
    "SIGNIFICANCE_SPENT",
    "CanPay",
    "IncumbentOn",
    "Score",
    "SequentialJudge",
    "look_cost",
]

Score = Callable[[Skill, Sequence[Example]], EvaluationReport]
"""Scores a skill on validation examples (the driver's cached `evaluate`)."""

IncumbentOn = Callable[[Sequence[Example]], EvaluationReport]
"""The incumbent's report covering at least the given validation examples (scored lazily)."""

CanPay = Callable[[Sequence[Example]], bool]
"""Whether the calls left pay for scoring the candidate on these validation examples (those its
next look adds) and the incumbent on those of them it has not been scored on (always True
without a call limit)."""


def look_cost(
    examples: Sequence[Example], scored: Collection[str], *, calls_per_rollout: float = 1.0
) -> int:
    """The most calls a look on `examples` spends: a new candidate on each, and the incumbent on
    those it has not been scored on (`scored`: its validation example ids), each rollout at
    `calls_per_rollout` model calls (an agent episode or a DSPy program makes several; the
    driver measures it, `CallRate`)."""
    known = set(scored)
    rollouts = len(examples) + sum(e.id not in known for e in examples)
    return math.ceil(rollouts * max(calls_per_rollout, 1.0) - 1e-9)


_UNPAID = "the calls left do not pay for the next look"


@functools.lru_cache(maxsize=64)
def _even_chance_gain(n_val: int, level: float) -> float | None:
    """The gain a tested decision at `level` on `n_val` examples passes about half the time
    (`evidence.preflight`'s arithmetic, memoised)."""
    return preflight(Gate(), n_val, None, first_level=level).even_chance_gain


SIGNIFICANCE_SPENT = (
    "the run's significance is spent: no result on the validation set could pass the next "
    "decision, so nothing was scored"
)
"""Why the door refuses every candidate once `RunView.can_accept` is False."""


@dataclass(frozen=True)
class _Levels:
    """The significance one decision may use: `whole` on the whole set, `per_look` at each
    interim look (None: no test, or no early acceptance), `spendable` the two together."""

    whole: float | None
    per_look: float | None
    spendable: float | None


@dataclass
class SequentialJudge:
    """Decides candidates for one run: its gate, its significance budget and its look order.

    `order` is the validation set in the seeded look order; `valset` in the user's order (the
    whole-set reports keep it).
    """

    gate: Gate
    significance: SignificanceBudget
    valset: tuple[Example, ...]
    order: tuple[Example, ...]

    def judge(
        self,
        candidate: Skill,
        *,
        score: Score,
        incumbent_on: IncumbentOn,
        index: int,
        can_pay: CanPay = lambda _: True,
        futility: bool = True,
    ) -> tuple[EvaluationReport, GateDecision]:
        """Score `candidate` look by look and decide; charge the budget with what it spent.
        Returns the candidate's report (a prefix when it stopped or was accepted early).
        `futility` False: a candidate not ahead at an interim look goes on (a decision whose
        rejection ends the search: the calls a stop saves would go unused)."""
        sizes = self._look_sizes(can_pay)
        whole_set = sizes[-1] == len(self.order)
        deciding = self.deciding_look()
        if whole_set and not can_pay(self.order[: len(deciding)]):
            raise BudgetExceeded(
                f"the calls left cannot pay for the gate decision up to its first look at which "
                f"it could accept ({len(deciding)} validation examples): the run ends with the "
                "best skill so far"
            )
        levels = self._levels(interim_looks=len(sizes) - 1)
        spent_early = 0.0
        for look, size in enumerate(sizes[:-1], start=1):
            held = incumbent_on(self.order[:size])
            partial = score(candidate, self.order[:size])
            early = self._early(partial, held, look, levels, index)
            if early is not None and early.accepted:
                return partial, self._charged(levels, early)
            spent_early += 0.0 if early is None else early.charged or 0.0
            futile = futility and self.gate.is_futile(partial, held)
            unpaid = not can_pay(self.order[size : sizes[look]])  # earlier looks are cached
            if futile or unpaid:
                stopped = self.gate.stopped(
                    partial, held, look=look, alpha=levels.spendable, decision_index=index,
                    n_val=len(self.order), why=None if futile else _UNPAID,
                )  # fmt: skip
                return partial, self._charged(levels, stopped)
        final = self.valset if whole_set else self.order[: sizes[-1]]
        report = score(candidate, final)
        held = incumbent_on(final).restricted_to(report.example_ids)
        decision = self.gate.decide(report, held, decision_index=index, alpha=levels.whole)
        if not whole_set:
            paid = f"on the {len(final)} of {len(self.order)} examples the calls left pay for: "
            decision = replace(decision, n_examples=len(self.order), reason=paid + decision.reason)
        if not decision.accepted and decision.charged is not None:
            decision = replace(decision, charged=decision.charged + spent_early)
        return report, self._charged(levels, decision)

    def _look_sizes(self, can_pay: CanPay) -> list[int]:
        """The decision's looks: the gate's (`Gate.look_sizes`), or, when the calls left do not
        pay for the whole set, those before the prefix they pay for and that prefix as the last
        look, tested at the whole-set level (fixed from the calls left before any score is
        seen; looks the calls could not finish would stop it before any whole-set test). The
        gate's looks where that prefix is too small for any result to pass."""
        sizes = self.gate.look_sizes(len(self.order))
        paid = self._paid_prefix(can_pay)
        if paid == len(self.order) or paid == 0:
            return sizes
        truncated = [s for s in sizes[:-1] if s < paid] + [paid]
        whole = self._levels(interim_looks=len(truncated) - 1).whole
        return truncated if whole is None or any_result_passes(paid, whole) else sizes

    def _paid_prefix(self, can_pay: CanPay) -> int:
        """How many validation examples, in look order, the calls left pay for (all of them
        when they pay for the whole set)."""
        if can_pay(self.order):
            return len(self.order)
        return next((k for k in range(len(self.order) - 1, 0, -1) if can_pay(self.order[:k])), 0)

    def first_look(self) -> tuple[Example, ...]:
        """The examples of a decision's first look (all of them when the gate has none)."""
        return self.order[: self.gate.look_sizes(len(self.order))[0]]

    def deciding_look(self) -> tuple[Example, ...]:
        """The examples up to the decision's first look at which it could accept: an interim
        look where the next decision accepts early and a candidate that fixes every example
        there passes the look's level (`evidence.any_result_passes`), else the whole set (no
        early acceptance: `early_share=0`, guards, a gate without a test, or looks too small
        for their share of the level). A decision that cannot pay for this look can only be
        stopped: it spends its calls and its significance for nothing."""
        sizes = self.gate.look_sizes(len(self.order))
        per_look = self._levels(interim_looks=len(sizes) - 1).per_look
        if per_look is None:
            return self.order
        return next(
            (self.order[:size] for size in sizes[:-1] if any_result_passes(size, per_look)),
            self.order,
        )

    def calls_needed(
        self, scored: Collection[str], *, first_look: bool = False, calls_per_rollout: float = 1.0
    ) -> int:
        """The most calls a decision on a new candidate spends to reach its whole-set look
        (`first_look`: the first look at which it could accept, `deciding_look`; a reserve
        of fewer calls could only pay for a decision stopped for lack of them), with the
        incumbent scored on the examples `scored` and each rollout at `calls_per_rollout`
        calls."""
        examples = self.deciding_look() if first_look else self.order
        return look_cost(examples, scored, calls_per_rollout=calls_per_rollout)

    def whole_set_level(self) -> float | None:
        """The whole-set level the next decision would get (None: the gate runs no test);
        drawing it spends nothing."""
        return self._levels(interim_looks=len(self.gate.look_sizes(len(self.order))) - 1).whole

    def certifiable_gain(self) -> float | None:
        """The gain that passes the next decision about half the time (`RunView.certifiable_gain`)."""
        level = self.whole_set_level()
        return None if level is None else _even_chance_gain(len(self.order), round(level, 12))

    def can_accept(self) -> bool:
        """Whether the run's significance is not spent (`RunView.can_accept`): False when what
        is left of it, all given to one decision, could not pass even a candidate that fixes
        every validation answer, where the gate's whole alpha could (a set too small for any
        acceptance is the pre-flight's warning, not a spent budget)."""
        if self.gate.test is None or self.gate.spending == "per-decision":
            return True
        n_val = len(self.order)
        left = self.significance.remaining
        return any_result_passes(n_val, left) or not any_result_passes(n_val, self.gate.alpha)

    def _early(
        self,
        partial: EvaluationReport,
        held: EvaluationReport,
        look: int,
        levels: _Levels,
        index: int,
    ) -> GateDecision | None:
        """The early-acceptance test at interim `look` (None: the decision has none)."""
        if levels.per_look is None:
            return None
        return self.gate.accept_early(
            partial, held, look=look, level=levels.per_look, decision_index=index,
            n_val=len(self.order),
        )  # fmt: skip

    def _levels(self, *, interim_looks: int) -> _Levels:
        """The decision's levels, drawn from the budget before any score is seen."""
        if self.gate.test is None:
            return _Levels(None, None, None)
        gate = self.gate
        level = gate.alpha if gate.spending == "per-decision" else self.significance.level()
        if interim_looks == 0 or gate.early_share == 0 or gate.guards:
            return _Levels(level, None, level)
        if gate.spending == "run":
            whole, early = self.significance.split(level, gate.early_share)
        else:  # per-decision: the decision's own alpha pays for its early looks
            early = gate.early_share * level
            whole = level - early
        return _Levels(whole, early / interim_looks, whole + early)

    def _charged(self, levels: _Levels, decision: GateDecision) -> GateDecision:
        """`decision` with the decision's levels (`alpha` on the whole set, `early_alpha`
        over its interim looks), after charging the run's budget with what it spent."""
        if levels.spendable is not None and self.gate.spending == "run":
            self.significance.charge(level=levels.spendable, charged=decision.charged)
        if levels.per_look is None or levels.whole is None or levels.spendable is None:
            return decision
        early = levels.spendable - levels.whole
        return replace(decision, alpha=levels.whole, early_alpha=early)
