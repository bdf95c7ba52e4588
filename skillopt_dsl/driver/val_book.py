"""What a run knows of its validation scores, and what scoring more would cost.

`ValidationBook` is the part of the driver that keeps the incumbent's and the seed's validation
reports; the driver (`CompileContext`) holds one, built from what it reads: the module, the
validation set, the ledger, the gate's looks, the run's state and the driver's scoring. Both may cover a prefix of the validation set in the gate's look
order: the seed is scored at the start on the gate's first look only, an early acceptance
leaves the new incumbent scored on the accepting look's examples, and a decision's looks score
the incumbent on more examples only when they reach them (cached rollouts cost nothing). At the
end, `complete_incumbent` scores what is left when a call budget can pay for it; so does
`incumbent_is_perfect` at once where the part scored holds no failure (a search stops on a
perfect incumbent, and a part is no evidence of one). Under a call
limit it also says what the next gate decision costs (`decision_calls`) and whether a look can
be paid (`can_pay`, the door's check before each look). Every price counts the calls a rollout
really costs (`CallRate`, measured on the run's own evaluations: an agent episode or a DSPy
program makes several), never one call per example.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from skillopt_dsl.driver.looks import SequentialJudge
from skillopt_dsl.driver.run_state import RunState
from skillopt_dsl.errors import BudgetExceeded
from skillopt_dsl.evaluate import EvaluationReport
from skillopt_dsl.module import SkillModule
from skillopt_dsl.skill import Skill
from skillopt_dsl.types import Example

if TYPE_CHECKING:
    from skillopt_dsl.lm import UsageLedger

__all__ = ["CallRate", "Scorer", "ValidationBook"]

logger = logging.getLogger(__name__)


@dataclass
class CallRate:
    """The model calls a rollout of this run's module really costs, as measured: `calls` paid
    over `rollouts` run, in the evaluations that paid for any (a reply a rollout repeats within
    itself is paid once, as it will be again). Until something was paid, an evaluation served
    whole from a cache (a seed pass whose replies an earlier run of the same program paid)
    prices a rollout at the requests it made (`cached_requests` over `cached_rollouts`). One
    call per rollout until anything was seen; never less than one (a price, not a discount).
    Of the paid ones, `candidate_calls` over `candidate_rollouts` were a candidate's (any skill
    but the incumbent and the seed): a gate decision prices a candidate's rollouts at the
    higher of theirs and the incumbent's rate (`per_candidate_rollout`)."""

    calls: int = 0
    rollouts: int = 0
    cached_requests: int = 0
    cached_rollouts: int = 0
    candidate_calls: int = 0
    candidate_rollouts: int = 0

    @property
    def per_rollout(self) -> float:
        """Calls per rollout (1.0 until measured)."""
        if self.rollouts:
            return max(1.0, self.calls / self.rollouts)
        if self.cached_rollouts:
            return max(1.0, self.cached_requests / self.cached_rollouts)
        return 1.0

    @property
    def per_incumbent_rollout(self) -> float:
        """Calls per rollout of the incumbent and the seed, as measured (`per_rollout` until
        one of theirs was paid)."""
        own = self.rollouts - self.candidate_rollouts
        if own <= 0:
            return self.per_rollout
        return max(1.0, (self.calls - self.candidate_calls) / own)

    @property
    def per_candidate_rollout(self) -> float:
        """Calls per rollout of a candidate, to price a gate decision at: the higher of the
        candidates' measured rate and the incumbent's (a candidate that teaches an agent to
        call its tool costs more a rollout than a seed that never called it; priced at the
        seed's rate, a reserve pays for a decision stopped at its first look)."""
        if not self.candidate_rollouts:
            return self.per_rollout
        return max(self.per_incumbent_rollout, self.candidate_calls / self.candidate_rollouts)

    def observe(
        self, calls: int, rollouts: int, *, requests: int = 0, candidate: bool = False
    ) -> None:
        """Add an evaluation that ran `rollouts` new rollouts for `calls` paid calls and
        `requests` model requests in all (replies from the response cache included); a
        `candidate`'s (not the incumbent's or the seed's) also to the candidates' rate."""
        if rollouts <= 0:
            return
        if calls > 0:
            self.calls += calls
            self.rollouts += rollouts
            if candidate:
                self.candidate_calls += calls
                self.candidate_rollouts += rollouts
        elif requests > 0:
            self.cached_requests += requests
            self.cached_rollouts += rollouts

    def price(self, rollouts: int) -> int:
        """The calls `rollouts` rollouts are expected to cost."""
        return math.ceil(rollouts * self.per_rollout - 1e-9)

    def to_dict(self) -> dict[str, int]:
        """JSON-ready copy (checkpointed)."""
        return {
            "calls": self.calls,
            "rollouts": self.rollouts,
            "cached_requests": self.cached_requests,
            "cached_rollouts": self.cached_rollouts,
            "candidate_calls": self.candidate_calls,
            "candidate_rollouts": self.candidate_rollouts,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, int]) -> CallRate:
        """The rate `to_dict` wrote."""
        return cls(
            int(data.get("calls", 0)),
            int(data.get("rollouts", 0)),
            int(data.get("cached_requests", 0)),
            int(data.get("cached_rollouts", 0)),
            int(data.get("candidate_calls", 0)),
            int(data.get("candidate_rollouts", 0)),
        )


class Scorer(Protocol):
    """The driver's cached evaluation (`CompileContext.evaluate`)."""

    def __call__(
        self, skill: Skill, examples: Sequence[Example], *, label: str = "train"
    ) -> EvaluationReport: ...


class ValidationBook:
    """The validation reports of the incumbent and the seed (module docstring). The driver
    holds one and gives it what it reads: `state` is the run's (the driver sets a restored one
    here too), `score` the driver's cached evaluation, `judging` the gate's looks."""

    def __init__(
        self,
        *,
        module: SkillModule,
        valset: Sequence[Example],
        ledger: UsageLedger,
        judging: SequentialJudge,
        state: RunState,
        score: Scorer,
    ) -> None:
        self.module, self.valset, self.ledger = module, tuple(valset), ledger
        self.judging, self.state, self.score = judging, state, score
        self.call_rate = CallRate()
        """The calls a rollout costs, as measured on the run's own evaluations."""
        self.seed_report: EvaluationReport | None = None
        """The seed's validation report (None until scored)."""

    @property
    def incumbent_report(self) -> EvaluationReport:
        """The incumbent's validation report (after an early acceptance, on the examples it
        was scored on; `complete_incumbent` scores the rest)."""
        if self.state.incumbent_report is None:
            report = self.score(self.state.incumbent, self._restored_examples(), label="val")
            self.state.incumbent_report = report
            if self.seed_report is None:
                self.seed_report = report
        return self.state.incumbent_report

    def can_pay(self, examples: Sequence[Example]) -> bool:
        """Whether the call limit (if any) pays for a look on `examples` (`look_price`)."""
        left = self.calls_left()
        return left is None or left >= self.look_price(examples)

    def decision_calls(self, *, first_look: bool = False) -> int:
        """The most calls the next gate decision on a new candidate spends to reach its
        whole-set look (`first_look`: the first look at which it could accept,
        `SequentialJudge.deciding_look`), at `look_price`."""
        judging = self.judging
        return self.look_price(judging.deciding_look() if first_look else judging.order)

    def look_price(self, examples: Sequence[Example]) -> int:
        """The most calls a look on `examples` spends (`looks.look_cost`): a new candidate on
        each at a candidate's measured rate, and the incumbent where it was not scored yet at
        its own (`CallRate.per_candidate_rollout`, `CallRate.per_incumbent_rollout`)."""
        rate, scored = self.call_rate, set(self.incumbent_report.example_ids)
        held = sum(e.id not in scored for e in examples)
        calls = len(examples) * rate.per_candidate_rollout + held * rate.per_incumbent_rollout
        return math.ceil(calls - 1e-9)

    def score_seed(self, *, fresh: bool) -> EvaluationReport:
        """Score the seed on the gate's first look only (its looks score the rest as decisions
        reach it; `complete_incumbent` what is left at the end); a `fresh` run's incumbent."""
        first = {e.id for e in self.judging.first_look()}
        examples = [e for e in self.valset if e.id in first]  # in the user's order
        self.seed_report = self.score(self.module.seed_skill, examples, label="val")
        if fresh:  # the seed is the incumbent
            self.state.incumbent_report = self.seed_report
        return self.seed_report

    def complete_incumbent(self) -> EvaluationReport:
        """The incumbent's and the seed's reports on the whole validation set, scoring what
        early acceptance and the seed's first look skipped when the budget pays for both (a
        call limit only, with enough calls left); otherwise the reports they have, compared
        where both were scored (`CompileResult.val_examples`)."""
        seed = self.seed_report or self.incumbent_report
        missing = len(self.valset) - len(self.incumbent_report.records)
        if self.state.version > 1:  # the seed is not the incumbent: its rest is scored too
            missing += len(self.valset) - len(seed.records)

        def both() -> None:
            self.incumbent_on(self.valset)
            self.seed_report = self.score(self.module.seed_skill, self.valset, label="val")

        self._score_when_affordable(missing, both)
        return self.incumbent_report

    def incumbent_is_perfect(self) -> bool:
        """Whether the incumbent scores 1.0 on every validation example. Where it was scored
        on a part only (the seed on the gate's first look, a candidate accepted at an early
        look) and is perfect there, the rest is scored first when the budget pays for it (as
        `complete_incumbent` prices it): a part that happens to hold no failure is no reason
        to end a search. Where the budget does not pay, the part decides (and the run's stop
        says `budget`, not `perfect`: `Optimizer.compile`)."""
        report = self.incumbent_report
        if not report.records or any(r.score < 1.0 for r in report.records):
            return False
        missing = len(self.valset) - len(report.records)
        self._score_when_affordable(missing, lambda: self.incumbent_on(self.valset))
        return all(r.score >= 1.0 for r in self.incumbent_report.records)

    def _score_when_affordable(self, missing: int, score: Callable[[], object]) -> None:
        """Run `score` (validation rollouts on `missing` examples, priced at a candidate's
        measured rate: the incumbent may have been one) when a budget that only limits calls
        pays for it; a budget stop on the way (priced too low) keeps the reports there are."""
        if not self._affordable(math.ceil(missing * self.call_rate.per_candidate_rollout - 1e-9)):
            return
        try:
            score()
        except BudgetExceeded as exc:
            logger.warning("validation was not completed: %s", exc)

    def _affordable(self, calls: int) -> bool:
        """Whether `calls` (> 0) more validation calls (already priced at the measured rate)
        fit a budget that only limits calls."""
        budget, left = self.ledger.budget, self.calls_left()
        only_calls = budget.max_tokens is None and budget.max_usd is None
        return calls > 0 and only_calls and (left is None or left >= calls)

    def calls_left(self) -> int | None:
        """Model calls the run's `Budget.max_calls` still allows (None: no call limit)."""
        limit = self.ledger.budget.max_calls
        return None if limit is None else max(0, limit - self.ledger.snapshot().calls)

    def _restored_examples(self) -> tuple[Example, ...]:
        """The validation examples the incumbent was scored on when the run was checkpointed
        (all of them unless it was accepted early), so a resumed run scores the same ones."""
        kept = self.state.restored_ids
        return self.valset if kept is None else tuple(e for e in self.valset if e.id in kept)

    def incumbent_on(self, examples: Sequence[Example]) -> EvaluationReport:
        """The incumbent's report, scored on `examples` too when it does not cover them yet
        (after an early acceptance it covers the accepting look's examples only)."""
        report = self.incumbent_report
        if {e.id for e in examples} <= set(report.example_ids):
            return report
        report = self.score(self.state.incumbent, examples, label="val")
        self.state.incumbent_report = report
        if self.state.version == 1:  # the seed: its report grows with it
            self.seed_report = report
        return report
