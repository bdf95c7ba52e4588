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
   records the decision, the new version and the checkpoint.

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
from pathlib import Path
from typing import Any, Literal

from skillopt_dsl.driver.door import (
    RESERVED_EVENTS,
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
from skillopt_dsl.driver.val_book import CallRate, ValidationBook
from skillopt_dsl.errors import UserInputError
from skillopt_dsl.evaluate import EvaluationCache, EvaluationReport, evaluate
from skillopt_dsl.gate import Gate, GateDecision
from skillopt_dsl.json_types import JSONObject
from skillopt_dsl.lm import LM, UsageSnapshot
from skillopt_dsl.module import SkillModule
from skillopt_dsl.runs import RunDirectory, rng_from_json, rng_to_json
from skillopt_dsl.settings import CompileSettings, EventListener, RunModels
from skillopt_dsl.skill import ApplyReport, Skill, token_distance
from skillopt_dsl.types import Example

__all__ = [
    "CompileContext",
    "LearningRateBound",
    "RunView",
    "SelectionSplit",
    "StateAfter",
    "StepRecord",
    "Verdict",
]

logger = logging.getLogger(__name__)


class CompileContext(ValidationBook):
    """The driver: models, gate, run directory, and the run's private state (see module doc).

    `compile()` and `OptunaLR` (for its trial runs) use it; optimizers get `view(bound)`.
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
        self.call_rate = CallRate()
        self._on_event = settings.on_event
        self._response_cache = models.cache
        self._state = RunState(incumbent=module.seed_skill)
        self.seed_report: EvaluationReport | None = None

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

    def view(self, bound: LearningRateBound) -> RunView:
        """The read-only view an optimizer runs with; its door enforces `bound`."""
        if not 0 < bound.max_lr <= 1 or bound.floor_tokens < 0:
            raise UserInputError(
                f"a learning-rate bound needs 0 < max_lr <= 1, floor >= 0: {bound}"
            )
        return RunView(self, bound)

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
        self.call_rate.observe(
            after.calls - before.calls, len(self.eval_cache) - cached, requests=requests
        )
        self.emit("evaluation", split=label, **report.summary())
        return report

    # -- the door ----------------------------------------------------------------------------
    def _submit(self, step: Step, bound: LearningRateBound, state_after: StateAfter) -> Verdict:
        """The door (see the module docstring); `RunView.submit` is its only caller."""
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
            return self._close(step, verdict, state_after, score=None, note=f"refused: {refusal}")
        if candidate.hash == incumbent.hash or candidate.hash in self._state.scored:
            reason = "duplicate: this text was already judged (or is the incumbent)"
            self.emit("duplicate", candidate_hash=candidate.hash, step=step.step)
            verdict = Verdict("duplicate", candidate.hash, change, budget, reason)
            return self._close(step, verdict, state_after, score=None, note="duplicate")
        report, decision = self._judge(candidate)
        self._state.scored[candidate.hash] = decision
        self._state.gate_log.append(decision)
        self.emit("gate", step=step.step, epoch=step.epoch, **decision.to_dict())
        if decision.accepted:
            self._accept(candidate, report, decision)
        status: Literal["accepted", "rejected"] = "accepted" if decision.accepted else "rejected"
        verdict = Verdict(status, candidate.hash, change, budget, decision.reason, decision)
        return self._close(step, verdict, state_after, score=decision.candidate_score, note="")

    def _judge(self, candidate: Skill) -> tuple[EvaluationReport, GateDecision]:
        """Score `candidate` look by look and let the gate decide (skillopt_dsl.driver.looks)."""
        return self._judging.judge(
            candidate,
            score=lambda skill, examples: self.evaluate(skill, examples, label="val"),
            incumbent_on=self._incumbent_on,
            index=len(self.gate_log),
            can_pay=self._can_pay,
        )

    def whole_set_level(self) -> float | None:
        """The significance the next gate decision may use on the whole validation set (its
        interim looks' early level comes on top; None: the gate runs no test)."""
        return self._judging.whole_set_level()

    def certifiable_gain(self) -> float | None:
        """The gain that passes the next decision about half the time (`RunView.certifiable_gain`)."""
        return self._judging.certifiable_gain()

    def can_accept(self) -> bool:
        """Whether a decision could still accept (`RunView.can_accept`)."""
        return self._judging.can_accept()

    def incumbent_is_perfect(self) -> bool:
        """Whether the incumbent scores 1.0 on every validation example it was scored on."""
        records = self.incumbent_report.records
        return bool(records) and all(r.score >= 1.0 for r in records)

    def _close(
        self,
        step: Step,
        verdict: Verdict,
        state_after: StateAfter,
        *,
        score: float | None,
        note: str,
    ) -> Verdict:
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
        self._state.optimizer_state = copy.deepcopy(dict(state_after(verdict)))
        self.checkpoint()
        return verdict

    def _accept(self, candidate: Skill, report: EvaluationReport, decision: GateDecision) -> None:
        self._state.incumbent, self._state.incumbent_report = candidate, report
        self._state.version += 1
        self.run.save_version(self._state.version, candidate)
        self.run.save_best(candidate, self.export_metadata())
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
        self._state = RunState.from_checkpoint(driver, checkpoint.get("optimizer", {}))
        self.rng.setstate(rng_from_json(driver["rng"]))
        if "significance" in checkpoint:
            self.significance.restore(checkpoint["significance"])
        if "call_rate" in checkpoint:
            self.call_rate = CallRate.from_dict(checkpoint["call_rate"])


class RunView:
    """What an optimizer sees of a run: read-only, plus one door (`submit`).

    Read: `module`, `trainset`, `seed`, `threads`, `target_lm`, `optimizer_lm`, `rng` (the only
    source of randomness), `incumbent`, `version`, `bound`, `run_path`, `optimizer_state` (a copy of the
    state saved with the last verdict; {} on a fresh run), `usage()`. Use: `evaluate` (never on
    the gate's validation examples), `selection_split`, `submit`, `record_empty_step`, `emit`,
    and for sweeps `trial_driver`. The gate's validation examples, the gate log, the history
    and the scored set are not reachable from here.
    """

    __slots__ = ("__driver", "_bound", "_val_ids")

    def __init__(self, driver: CompileContext, bound: LearningRateBound) -> None:
        self.__driver = driver
        self._bound = bound
        self._val_ids = frozenset(e.id for e in driver.valset)

    # -- read-only -------------------------------------------------------------------------
    @property
    def module(self) -> SkillModule:
        """The task."""
        return self.__driver.module

    @property
    def trainset(self) -> tuple[Example, ...]:
        """The examples the optimizer learns (and chooses) from."""
        return self.__driver.trainset

    @property
    def seed(self) -> int:
        """The run's seed."""
        return self.__driver.seed

    @property
    def threads(self) -> int:
        """Parallel model calls during evaluation."""
        return self.__driver.threads

    @property
    def target_lm(self) -> LM:
        """The model the skill is written for."""
        return self.__driver.target_lm

    @property
    def optimizer_lm(self) -> LM:
        """The model that proposes edits."""
        return self.__driver.optimizer_lm

    @property
    def rng(self) -> random.Random:
        """The run's only source of randomness (checkpointed with every verdict)."""
        return self.__driver.rng

    @property
    def incumbent(self) -> Skill:
        """The best skill so far (immutable)."""
        return self.__driver.incumbent

    @property
    def version(self) -> int:
        """The incumbent's version (1 = the seed)."""
        return self.__driver.version

    @property
    def run_path(self) -> Path | None:
        """The run directory (None for a run without one), to place an optimizer's own files."""
        return self.__driver.run.path

    @property
    def bound(self) -> LearningRateBound:
        """The door's learning-rate bound for this run."""
        return self._bound

    @property
    def optimizer_state(self) -> JSONObject:
        """A copy of the state saved with the last verdict ({} on a fresh run)."""
        return self.__driver.optimizer_state

    def usage(self) -> UsageSnapshot:
        """What the run has spent so far."""
        return self.__driver.ledger.snapshot()

    def calls_left(self) -> int | None:
        """Model calls the run's `Budget.max_calls` still allows (None: no call limit)."""
        return self.__driver.calls_left()

    @property
    def validation_size(self) -> int:
        """How many examples a gate decision scores at most (the validation set's size)."""
        return len(self._val_ids)

    def decision_calls(self, *, first_look: bool = False) -> int:
        """The most model calls the next gate decision spends on a new candidate: the candidate
        on the whole validation set (`first_look`: on the gate's first look only, where it may
        be accepted or stopped) and the incumbent where it has not been scored yet, each
        rollout at the measured `calls_per_rollout`."""
        return self.__driver.decision_calls(first_look=first_look)

    def calls_per_rollout(self) -> float:
        """The model calls one rollout of the module costs, as measured on this run (an agent
        episode or a DSPy program makes several; 1.0 until measured)."""
        return self.__driver.call_rate.per_rollout

    def certifiable_gain(self) -> float | None:
        """The gain in mean validation score that passes the next gate decision about half the
        time when rewording also moves some answers at random (`evidence.Preflight`); None when
        the gate runs no test (any gain passes) or no gain up to +1.0 would."""
        return self.__driver.certifiable_gain()

    def can_accept(self) -> bool:
        """Whether the run's significance is not spent (False: what is left of it would not
        pass even a fix of every validation answer; the door then refuses candidates unscored,
        and a search stops with "significance")."""
        return self.__driver.can_accept()

    def incumbent_is_perfect(self) -> bool:
        """Whether the incumbent scores the best possible on every validation example it was
        scored on (then no candidate can beat it there, and a search stops). One bit of the
        gate's data, and only this one, reaches the optimizer."""
        return self.__driver.incumbent_is_perfect()

    def step_budget(self, lr: float) -> int:
        """The tokens one step at `lr` may move from the current incumbent (as the door counts)."""
        return self._bound.budget([lr], self.__driver.incumbent.token_count)

    # -- training-facing actions -----------------------------------------------------------
    def evaluate(
        self, skill: Skill, examples: Sequence[Example], *, label: str = "train"
    ) -> EvaluationReport:
        """Score `skill` on training examples (cached). The gate's examples are refused."""
        leaked = sorted(e.id for e in examples if e.id in self._val_ids)
        if leaked:
            raise UserInputError(
                f"optimizers may not evaluate on the gate's validation examples {leaked[:5]}: "
                "choose on a training mini-batch or on view.selection_split(...)"
            )
        return self.__driver.evaluate(skill, examples, label=label)

    def selection_split(self, fraction: float) -> SelectionSplit:
        """Carve a seeded selection split (`fraction` of the trainset, at least 1 example) off
        the training set; the same for a given seed and trainset. Needs 2+ training examples."""
        if not 0 < fraction < 1:
            raise UserInputError(f"selection fraction must be in (0, 1), got {fraction}")
        ordered = sorted(self.trainset, key=lambda e: e.id)
        if len(ordered) < 2:
            raise UserInputError(
                f"a selection split needs at least 2 training examples, got {len(ordered)}"
            )
        random.Random(f"selection-split:{self.seed}").shuffle(ordered)
        size = min(max(1, round(fraction * len(ordered))), len(ordered) - 1)
        split = SelectionSplit(tuple(ordered[size:]), tuple(ordered[:size]), fraction)
        self.__driver.emit(
            "selection_split", fraction=fraction, select_ids=[e.id for e in split.select]
        )
        return split

    def emit(self, event: str, /, **payload: Any) -> None:
        """Append an optimizer event to the run (the driver's own event names are refused)."""
        if event in RESERVED_EVENTS:
            raise UserInputError(f"event {event!r} is written by the driver only")
        self.__driver.emit(event, **payload)

    # -- the door --------------------------------------------------------------------------
    def submit(
        self,
        candidate: Skill,
        *,
        lr: float | Sequence[float],
        step: int,
        epoch: int,
        kind: str,
        state_after: StateAfter,
        report: ApplyReport | None = None,
    ) -> Verdict:
        """Hand a candidate to the door; see the module docstring.

        `lr` is the step's learning rate (its schedule's value), or, for a candidate reached by
        several consecutive steps (a sweep trial's result), the learning rate of each step. The
        door measures the change from the incumbent itself. `state_after(verdict)` returns the
        optimizer's JSON state after the verdict; it is checkpointed with it.
        """
        lrs = (float(lr),) if isinstance(lr, int | float) else tuple(float(x) for x in lr)
        entry = Step(candidate, lrs, step, epoch, kind, report)
        return self.__driver._submit(entry, self._bound, state_after)

    def record_empty_step(
        self,
        *,
        step: int,
        epoch: int,
        kind: str,
        lr: float,
        note: str,
        report: ApplyReport | None = None,
        state: JSONObject | None = None,
    ) -> None:
        """Record a step that produced no candidate (nothing reached the door), with the
        report of the edits it tried (clipped ones among them), if any."""
        self.__driver._record_empty_step(
            step=step,
            epoch=epoch,
            kind=kind,
            lr=lr,
            budget_tokens=self.step_budget(lr),
            note=note,
            report=report,
            state=state,
        )

    def trial_driver(
        self,
        split: SelectionSplit,
        run: RunDirectory,
        *,
        on_event: EventListener | None = None,
    ) -> CompileContext:
        """A separate driver for a sweep trial: it learns on `split.fit` and its gate decides
        on `split.select` (training examples only). Its incumbent is not this run's."""
        train_ids = {e.id for e in self.trainset}
        outside = [e.id for e in (*split.fit, *split.select) if e.id not in train_ids]
        if outside:
            raise UserInputError(f"a trial may only use training examples; not: {outside[:5]}")
        return self.__driver.child(run, trainset=split.fit, valset=split.select, on_event=on_event)
