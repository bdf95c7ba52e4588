"""The shared driver every optimizer runs under, and the one door to the incumbent.

`compile()` builds a `CompileContext` (the driver: models, gate, run directory and the run's
private mutable state). An optimizer never holds it: `Optimizer.compile` hands it a `RunView`,
a read-only view of the run with one `submit`. The door (`RunView.submit`):

1. measures the candidate's token edit distance from the incumbent itself and refuses (records a
   refused step, never asks the gate) a candidate over the step's learning-rate budget
   `max(ceil(lr * tokens(incumbent)), floor)`; the optimizer declares only its step's `lr`;
2. refuses a text it has already judged (or the incumbent itself) as a *duplicate*;
3. refuses, unscored, any candidate while the run's significance is spent (`can_accept`);
4. otherwise scores the candidate on validation in the gate's looks (`looks.SequentialJudge`:
   it stops when not ahead at an interim look, or when the calls left do not pay the next look),
   asks the `Gate` at the level the run's `SignificanceBudget` gives, charges the budget, and
   records the decision and the new version.

The optimizer then hands the door its state after the verdict (`RunView.commit`), and the
driver checkpoints the two together: no optimizer code runs inside the door, and the door takes
no other candidate (nor an empty step) until the state after the last verdict is committed.

Only the door writes the incumbent, the history, the gate log and the scored set; they live in
a private state object of the driver. `RunView.evaluate` refuses the gate's validation examples,
so an optimizer that chooses among candidates chooses on training data (a mini-batch or
`RunView.selection_split`).
"""

from __future__ import annotations

import copy
import logging
import random
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Literal, cast

from skillopt_dsl.driver.door import (
    LearningRateBound,
    SelectionSplit,
    StateAfter,
    Step,
    StepRecord,
    Verdict,
    look_order,
    refusal_reason,
)
from skillopt_dsl.driver.looks import SIGNIFICANCE_SPENT, SequentialJudge
from skillopt_dsl.driver.run_state import CheckpointRecord, RunState
from skillopt_dsl.driver.state_parts import phase_state
from skillopt_dsl.driver.val_book import CallRate, ValidationBook
from skillopt_dsl.errors import SkillOptError
from skillopt_dsl.evaluate import EvaluationCache, EvaluationReport, evaluate
from skillopt_dsl.gate import Gate, GateDecision
from skillopt_dsl.json_types import JSONObject
from skillopt_dsl.module import SkillModule
from skillopt_dsl.runs import RunDirectory, rng_from_json, rng_to_json
from skillopt_dsl.search_memory import SearchMemory
from skillopt_dsl.settings import CompileSettings, EventListener, RunModels
from skillopt_dsl.skill import ApplyReport, Skill, token_distance
from skillopt_dsl.types import Example

__all__ = [
    "CompileContext",
    "LearningRateBound",
    "SelectionSplit",
    "StateAfter",
    "StepRecord",
    "UncommittedVerdict",
    "Verdict",
]

logger = logging.getLogger(__name__)


class UncommittedVerdict(SkillOptError):
    """An optimizer went on without handing the door its state after a verdict: call
    `view.commit(state)` after each `view.submit(...)` (the two are checkpointed together)."""


class CompileContext:
    """The driver: models, gate, run directory, and the run's private state (see module doc).

    `compile()` and `OptunaLR` (for its trial runs) use it; optimizers get a `RunView` of it.
    What validation has been paid for is its `book` (`ValidationBook`).
    """

    def __init__(
        self,
        *,
        module: SkillModule,
        trainset: Sequence[Example],
        valset: Sequence[Example],
        models: RunModels,
        gate: Gate,
        run: RunDirectory,
        settings: CompileSettings,
    ) -> None:
        self.module, self.trainset, self.valset = module, tuple(trainset), tuple(valset)
        self.settings, self.models = settings, models
        self.significance = (
            settings.significance
            if settings.significance is not None
            else gate.significance_budget()
        )
        self._judging = SequentialJudge(
            gate, self.significance, self.valset, tuple(look_order(self.valset, settings.seed))
        )
        self.target_lm, self.optimizer_lm, self.gate = models.target, models.reflector, gate
        self.ledger, self.run, self.seed, self.threads = (
            models.ledger,
            run,
            settings.seed,
            settings.threads,
        )
        self.max_errors = settings.max_errors
        self.rng = random.Random(settings.seed)
        self.eval_cache = EvaluationCache()
        self._on_event = settings.on_event
        self._response_cache = models.cache
        self._state = RunState(incumbent=module.seed_skill)
        self.book = ValidationBook(
            module=module,
            valset=self.valset,
            ledger=models.ledger,
            judging=self._judging,
            state=self._state,
            score=self.evaluate,
        )
        """What validation has been paid for: the incumbent's and the seed's reports, the
        measured call rate, what the next decision costs."""
        self.memory = SearchMemory(remembered=list(settings.remembered))
        """The run's search memory: every optimizer of the run (each part of a composite)
        searches in it through `RunView.memory`; checkpointed with every verdict."""
        self._open_verdict: Verdict | None = None
        """The last verdict, until the optimizer commits its state after it (`_commit`)."""
        self.stop_detail: str | None = None
        """What the run's `stop` event says besides its reason ("perfect on the 15 of 30
        validation examples scored; ...", the budget's message), set by `Optimizer.compile`."""

    def child(
        self,
        run: RunDirectory,
        *,
        trainset: Sequence[Example],
        valset: Sequence[Example],
        on_event: EventListener | None = None,
    ) -> CompileContext:
        """A fresh driver for a nested run (a sweep trial) on the same module, models, gate,
        seed, ledger, response cache and evaluation cache, with its own splits: the budget stays
        global and a skill already scored is not scored again. It starts from the seed skill.
        Its gate decides on training examples, so it spends a significance budget of its own,
        never the run's, and accepts only on the whole selection split (no early acceptance:
        a trial's value is its incumbent's score on all of it)."""
        child = CompileContext(
            module=self.module,
            trainset=trainset,
            valset=valset,
            models=self.models,
            gate=replace(self.gate, early_share=0.0),
            run=run,
            settings=replace(self.settings, on_event=on_event, significance=None),
        )
        child.eval_cache = self.eval_cache
        return child

    # -- read-only state ---------------------------------------------------------------------
    @property
    def incumbent(self) -> Skill:
        """The best skill so far (changed only by the door on an accepted gate decision)."""
        return self._state.incumbent

    @property
    def version(self) -> int:
        """The incumbent's version number (1 = the seed)."""
        return self._state.version

    @property
    def gate_log(self) -> tuple[GateDecision, ...]:
        """Every gate decision, in order."""
        return tuple(self._state.gate_log)

    @property
    def history(self) -> tuple[StepRecord, ...]:
        """Every optimizer step, in order."""
        return tuple(self._state.history)

    @property
    def optimizer_state(self) -> JSONObject:
        """A copy of the optimizer's last checkpointed state ({} on a fresh run)."""
        return copy.deepcopy(self._state.optimizer_state)

    # -- what validation has been paid for (the book's) ----------------------------------------
    @property
    def call_rate(self) -> CallRate:
        """The calls a rollout costs, as measured on this run (`ValidationBook.call_rate`)."""
        return self.book.call_rate

    @property
    def seed_report(self) -> EvaluationReport | None:
        """The seed's validation report (`ValidationBook.seed_report`)."""
        return self.book.seed_report

    @property
    def incumbent_report(self) -> EvaluationReport:
        """The incumbent's validation report (`ValidationBook.incumbent_report`)."""
        return self.book.incumbent_report

    def calls_left(self) -> int | None:
        """Model calls the run's `Budget.max_calls` still allows (None: no call limit)."""
        return self.book.calls_left()

    def decision_calls(self, *, first_look: bool = False) -> int:
        """The most calls the next gate decision spends (`ValidationBook.decision_calls`)."""
        return self.book.decision_calls(first_look=first_look)

    def score_seed(self, *, fresh: bool) -> EvaluationReport:
        """Score the seed on the gate's first look (`ValidationBook.score_seed`)."""
        return self.book.score_seed(fresh=fresh)

    def complete_incumbent(self) -> EvaluationReport:
        """Score the rest of validation when affordable (`ValidationBook.complete_incumbent`)."""
        return self.book.complete_incumbent()

    # -- evaluation --------------------------------------------------------------------------
    def evaluate(
        self, skill: Skill, examples: Sequence[Example], *, label: str = "train"
    ) -> EvaluationReport:
        """Score `skill` with the target model (cached per skill, example and model); the calls
        it paid and the rollouts it ran are added to the run's measured `call_rate`."""
        before, cached = self.ledger.snapshot(), len(self.eval_cache)
        report = evaluate(
            self.module,
            examples,
            skill=skill,
            lm=self.target_lm,
            threads=self.threads,
            max_errors=self.max_errors,
            cache=self.eval_cache,
            seed=self.seed,
            extra_metrics=self.gate.guard_metrics(),
            progress=False,
        )
        after = self.ledger.snapshot()
        requests = after.calls + after.cache_hits - before.calls - before.cache_hits
        known = (self._state.incumbent.hash, self.module.seed_skill.hash)
        self.call_rate.observe(
            after.calls - before.calls,
            len(self.eval_cache) - cached,
            requests=requests,
            candidate=skill.hash not in known,
        )
        self.emit("evaluation", split=label, **report.summary())
        return report

    # -- the door ----------------------------------------------------------------------------
    def _submit(self, step: Step, bound: LearningRateBound) -> Verdict:
        """The door (see the module docstring); `RunView.submit` is its only caller. The
        verdict stays open until `_commit` hands over the optimizer's state after it."""
        self._refuse_while_open("submit a candidate")
        candidate, incumbent = step.skill, self._state.incumbent
        budget = bound.budget(step.lrs, incumbent.token_count)
        change = token_distance(incumbent.text, candidate.text)
        refusal = (
            refusal_reason(step.lrs, bound, change, budget)
            or self.module.skill_refusal(candidate)
            or (None if self.can_accept() else SIGNIFICANCE_SPENT)  # sure to reject
        )
        if refusal is not None:
            self.emit("refused", candidate_hash=candidate.hash, step=step.step, reason=refusal)
            verdict = Verdict("refused", candidate.hash, change, budget, refusal)
            return self._close(step, verdict, score=None, note=f"refused: {refusal}")
        if candidate.hash == incumbent.hash or candidate.hash in self._state.scored:
            reason = "duplicate: this text was already judged (or is the incumbent)"
            self.emit("duplicate", candidate_hash=candidate.hash, step=step.step)
            verdict = Verdict("duplicate", candidate.hash, change, budget, reason)
            return self._close(step, verdict, score=None, note="duplicate")
        # under a call budget the calls a futility stop saves go unused where the search ends
        budgeted = self.calls_left() is not None
        futility = not (step.ends_on_rejection and budgeted)
        report, decision = self._judge(candidate, futility=futility)
        self._state.scored[candidate.hash] = decision
        self._state.gate_log.append(decision)
        self.emit("gate", step=step.step, epoch=step.epoch, **decision.to_dict())
        if decision.accepted:
            self._accept(candidate, report, decision)
        status: Literal["accepted", "rejected"] = "accepted" if decision.accepted else "rejected"
        verdict = Verdict(status, candidate.hash, change, budget, decision.reason, decision)
        return self._close(step, verdict, score=decision.candidate_score, note="")

    def _judge(
        self, candidate: Skill, *, futility: bool = True
    ) -> tuple[EvaluationReport, GateDecision]:
        """Score `candidate` look by look and let the gate decide (skillopt_dsl.driver.looks;
        `futility`: whether a candidate not ahead at an interim look stops there)."""
        return self._judging.judge(
            candidate,
            futility=futility,
            score=lambda skill, examples: self.evaluate(skill, examples, label="val"),
            incumbent_on=self.book.incumbent_on,
            index=len(self.gate_log),
            can_pay=self.book.can_pay,
        )

    def whole_set_level(self) -> float | None:
        """The significance the next gate decision may use on the whole validation set (its
        interim looks' early level comes on top; None: the gate runs no test)."""
        return self._judging.whole_set_level()

    def replan(self, decisions: int) -> None:
        """Plan the run's significance over `decisions` more gate decisions (`RunView.replan`);
        a budget shared with other runs keeps its owner's plan."""
        if self.settings.significance is None:
            self.significance.replan(decisions)

    def certifiable_gain(self) -> float | None:
        """The gain that passes the next decision about half the time (`RunView.certifiable_gain`)."""
        return self._judging.certifiable_gain()

    def can_accept(self) -> bool:
        """Whether a decision could still accept (`RunView.can_accept`)."""
        return self._judging.can_accept()

    def incumbent_is_perfect(self) -> bool:
        """Whether the incumbent scores 1.0 on every validation example
        (`ValidationBook.incumbent_is_perfect`: the rest scored first where a part was)."""
        return self.book.incumbent_is_perfect()

    def _close(self, step: Step, verdict: Verdict, *, score: float | None, note: str) -> Verdict:
        """Record the step a verdict closes and leave the verdict open for `_commit`."""
        longer = max(self._state.incumbent.token_count, step.skill.token_count, 1)
        self._append_step(
            step=step.step,
            epoch=step.epoch,
            kind=step.kind,
            lr_budget=sum(step.lrs),
            budget_tokens=verdict.budget_tokens,
            change_tokens=verdict.change_tokens,
            measured_change=min(verdict.change_tokens / longer, 1.0),
            accepted=verdict.accepted,
            candidate_hash=step.skill.hash,
            val_score=score,
            edit_report=[o.to_dict() for o in step.report.outcomes] if step.report else [],
            note=note,
        )
        self._open_verdict = verdict
        return verdict

    def _commit(self, state: JSONObject) -> None:
        """Save the optimizer's `state` after the open verdict and checkpoint the two together;
        `RunView.commit` is its only caller.

        Raises:
            UncommittedVerdict: no verdict is open (a state is committed once per verdict).
        """
        if self._open_verdict is None:
            raise UncommittedVerdict("commit() follows a submit(): no verdict is open")
        self._state.optimizer_state = copy.deepcopy(dict(state))
        self._open_verdict = None
        self.checkpoint()

    def _refuse_while_open(self, action: str) -> None:
        """Raise `UncommittedVerdict` while the last verdict's state is not committed."""
        verdict = self._open_verdict
        if verdict is not None:
            raise UncommittedVerdict(
                f"cannot {action}: the state after the verdict on {verdict.candidate_hash} "
                "was never committed; call view.commit(state) after each view.submit(...)"
            )

    def verdict_committed(self) -> None:
        """Raise `UncommittedVerdict` when the search ended without committing its state
        after its last verdict (`Optimizer.compile` asks once `optimize` returns)."""
        self._refuse_while_open("end the search")

    def _accept(self, candidate: Skill, report: EvaluationReport, decision: GateDecision) -> None:
        self._state.incumbent, self._state.incumbent_report = candidate, report
        self._state.version += 1
        self.run.save_version(self._state.version, candidate)
        self.publish_best(candidate)
        logger.info(
            "accepted v%04d: val %.4f (+%.4f)", self._state.version, report.mean, decision.delta
        )

    def _record_empty_step(
        self,
        *,
        step: int,
        epoch: int,
        kind: str,
        lr: float,
        budget_tokens: int,
        note: str,
        report: ApplyReport | None = None,
        state: JSONObject | None = None,
    ) -> None:
        self._refuse_while_open("record an empty step")
        self._append_step(
            edit_report=[o.to_dict() for o in report.outcomes] if report else [],
            step=step, epoch=epoch, kind=kind, lr_budget=lr, budget_tokens=budget_tokens,
            change_tokens=0, measured_change=0.0, accepted=False, note=note,
        )  # fmt: skip
        if state is not None:
            self._state.optimizer_state = copy.deepcopy(dict(state))
            self.checkpoint()

    def _append_step(self, **fields: Any) -> None:
        usage = self.ledger.snapshot()
        record = StepRecord(
            **fields,
            incumbent_score=self.incumbent_report.mean,
            calls=usage.calls,
            cost_usd=usage.cost_usd,
        )
        self._state.history.append(record)
        self.emit("step", **record.to_dict())

    # -- records -----------------------------------------------------------------------------
    def emit(self, event: str, /, **payload: Any) -> None:
        """Append an event to the run and tell the progress listener."""
        self.run.event(event, **payload)
        if self._on_event is not None:
            self._on_event(event, payload)

    def publish_best(self, skill: Skill, scores: JSONObject | None = None) -> JSONObject:
        """Write `best_skill.md`: `skill` with the run's front matter (`export_metadata`) and
        `scores` (the test scores when the run ends); returns the front matter written. The one
        place a run exports its best skill: at its start (the seed), at each acceptance and at
        its end."""
        metadata = self.export_metadata() | (scores or {})
        self.run.save_best(skill, metadata)
        return metadata

    def export_metadata(self) -> JSONObject:
        """Front matter for best_skill.md."""
        best = self.incumbent_report  # after an early acceptance, on a prefix: compare there
        seed = self.seed_report.restricted_to(best.example_ids) if self.seed_report else None
        best = best.restricted_to(seed.example_ids) if seed else best  # where both were scored
        return {
            "name": self.module.name,
            "description": self.module.description,
            "val_score": best.mean,
            "seed_val_score": None if seed is None else seed.mean,
            "val_examples": len(best.records),
            "model": self.target_lm.model,
            "optimizer_model": self.optimizer_lm.model,
            "version": self._state.version,
            "run_id": self.run.path.name if self.run.path else None,
        }

    def checkpoint(self) -> None:
        """Write the resumable state (atomically)."""
        self.run.save_checkpoint(
            {
                "driver": self._state.to_checkpoint(len(self.valset), rng_to_json(self.rng)),
                "optimizer": self._state.optimizer_state,
                "memory": self.memory.to_dict(),
                "significance": self.significance.to_dict(),
                "call_rate": self.call_rate.to_dict(),
                "usage": self.ledger.snapshot().to_dict(),
                "cache_rowid": self._response_cache.max_rowid if self._response_cache else 0,
                "events": len(self.run.events),
            }
        )

    def restore(self, checkpoint: CheckpointRecord) -> None:
        """Load the state written by `checkpoint` (the incumbent is re-scored from the cache)."""
        driver = checkpoint["driver"]
        optimizer = checkpoint.get("optimizer", {})
        self._state = self.book.state = RunState.from_checkpoint(driver, optimizer)
        saved = checkpoint.get("memory")
        self.memory = (
            SearchMemory.from_dict(cast(JSONObject, saved))
            if saved is not None  # a checkpoint before the run owned it: the optimizer's state
            else SearchMemory.from_legacy(phase_state(optimizer), self.settings.remembered)
        )
        self.rng.setstate(rng_from_json(driver["rng"]))
        if "significance" in checkpoint:
            self.significance.restore(checkpoint["significance"])
        if "call_rate" in checkpoint:
            self.book.call_rate = CallRate.from_dict(checkpoint["call_rate"])
