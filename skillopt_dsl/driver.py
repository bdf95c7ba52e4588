"""The shared driver every optimizer runs under: it evaluates candidates and asks the gate.

Optimizers only *propose*. `CompileContext.submit(candidate, ...)` is the single path by which a
skill can become the incumbent: it scores the candidate on the validation set (once per distinct
text), asks the `Gate`, records the decision, saves the new version and the checkpoint. Nothing
else in the library assigns the incumbent.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from skillopt_dsl.evaluate import EvaluationCache, EvaluationReport, evaluate
from skillopt_dsl.gate import Gate, GateDecision
from skillopt_dsl.lm import LM, ResponseCache, UsageLedger
from skillopt_dsl.module import SkillModule
from skillopt_dsl.runs import RunDirectory
from skillopt_dsl.skill import ApplyReport, Skill
from skillopt_dsl.types import Example

__all__ = ["CompileContext", "StepRecord"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class StepRecord:
    """One optimizer step, as kept in `CompileResult.history`.

    `lr_budget` is the step's learning rate (a fraction of the document), `budget_tokens` the
    token edit distance it allowed (with the floor for short documents), `change_tokens` and
    `measured_change` what the candidate really changed (tokens, and relative to the longer
    text). `accepted` is the gate's verdict (False when no candidate reached the gate).
    """

    step: int
    epoch: int
    kind: str
    lr_budget: float
    budget_tokens: int
    change_tokens: int
    measured_change: float
    accepted: bool
    candidate_hash: str | None = None
    val_score: float | None = None
    incumbent_score: float | None = None
    edit_report: list[dict[str, Any]] = field(default_factory=list)
    note: str = ""
    calls: int = 0
    cost_usd: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of every field."""
        return asdict(self)


@dataclass(frozen=True)
class Proposal:
    """A candidate handed to the driver, with what produced it (for the record)."""

    skill: Skill
    step: int
    epoch: int
    kind: str
    lr_budget: float
    budget_tokens: int
    change_tokens: int
    measured_change: float
    report: ApplyReport | None = None


class CompileContext:
    """Everything an optimizer may use, and the one door to the incumbent (`submit`).

    Attributes an optimizer reads: `module`, `trainset`, `valset`, `target_lm`, `optimizer_lm`,
    `rng` (the only source of randomness), `seed`, `threads`, `ledger`, `run`.
    """

    def __init__(
        self,
        *,
        module: SkillModule,
        trainset: Sequence[Example],
        valset: Sequence[Example],
        target_lm: LM,
        optimizer_lm: LM,
        gate: Gate,
        ledger: UsageLedger,
        run: RunDirectory,
        seed: int = 0,
        threads: int = 8,
        max_errors: int | None = None,
        on_event: Callable[[str, Mapping[str, Any]], None] | None = None,
        response_cache: ResponseCache | None = None,
    ) -> None:
        self.module, self.trainset, self.valset = module, list(trainset), list(valset)
        self.target_lm, self.optimizer_lm, self.gate = target_lm, optimizer_lm, gate
        self.ledger, self.run, self.seed, self.threads = ledger, run, seed, threads
        self.max_errors = max_errors
        self.rng = random.Random(seed)
        self.eval_cache = EvaluationCache()
        self._on_event = on_event
        self._response_cache = response_cache
        self._incumbent = module.seed_skill
        self._incumbent_report: EvaluationReport | None = None
        self.seed_report: EvaluationReport | None = None
        self.gate_log: list[GateDecision] = []
        self.history: list[StepRecord] = []
        self.scored: dict[str, GateDecision] = {}
        self.version = 1
        self.optimizer_state: dict[str, Any] = {}

    def child(
        self,
        run: RunDirectory,
        *,
        on_event: Callable[[str, Mapping[str, Any]], None] | None = None,
    ) -> CompileContext:
        """A fresh context for a nested run (a sweep trial) on the same module, splits, models,
        gate, seed, ledger, response cache and evaluation cache: the budget stays global and a
        skill already scored is not scored again. The child starts from the seed skill."""
        child = CompileContext(
            module=self.module,
            trainset=self.trainset,
            valset=self.valset,
            target_lm=self.target_lm,
            optimizer_lm=self.optimizer_lm,
            gate=self.gate,
            ledger=self.ledger,
            run=run,
            seed=self.seed,
            threads=self.threads,
            max_errors=self.max_errors,
            on_event=on_event,
            response_cache=self._response_cache,
        )
        child.eval_cache = self.eval_cache
        return child

    # -- read-only views -------------------------------------------------------------------
    @property
    def incumbent(self) -> Skill:
        """The best skill so far (changed only by `submit` on an accepted gate decision)."""
        return self._incumbent

    @property
    def incumbent_report(self) -> EvaluationReport:
        """The incumbent's validation report."""
        if self._incumbent_report is None:
            self._incumbent_report = self.evaluate(self._incumbent, self.valset, label="val")
            if self.seed_report is None:
                self.seed_report = self._incumbent_report
        return self._incumbent_report

    # -- evaluation --------------------------------------------------------------------------
    def evaluate(
        self, skill: Skill, examples: Sequence[Example], *, label: str = "train"
    ) -> EvaluationReport:
        """Score `skill` with the target model (cached per skill, example and model)."""
        report = evaluate(
            self.module,
            examples,
            skill=skill,
            lm=self.target_lm,
            threads=self.threads,
            max_errors=self.max_errors,
            cache=self.eval_cache,
            seed=self.seed,
            progress=False,
        )
        self.emit("evaluation", split=label, **report.summary())
        return report

    # -- the gate ----------------------------------------------------------------------------
    def submit(
        self, proposal: Proposal, state_after: Callable[[GateDecision], Mapping[str, Any]]
    ) -> GateDecision:
        """Score a candidate on validation, ask the gate, and record everything.

        A candidate whose text was already scored is not evaluated again: its earlier decision
        is returned (and it can never be accepted twice, since it no longer beats the incumbent).
        `state_after(decision)` returns the optimizer's state after this decision; it is saved in
        the checkpoint written right after the decision.
        """
        candidate = proposal.skill
        incumbent_report = self.incumbent_report
        previous = self.scored.get(candidate.hash)
        if previous is not None:
            self.emit("duplicate", candidate_hash=candidate.hash, step=proposal.step)
            self._record_step(
                proposal, accepted=False, score=previous.candidate_score, note="duplicate"
            )
            self.optimizer_state = dict(state_after(previous))
            return previous
        report = self.evaluate(candidate, self.valset, label="val")
        decision = self.gate.decide(report, incumbent_report)
        self.scored[candidate.hash] = decision
        self.gate_log.append(decision)
        self.emit("gate", step=proposal.step, epoch=proposal.epoch, **decision.to_dict())
        if decision.accepted:
            self._accept(candidate, report, decision)
        self._record_step(proposal, accepted=decision.accepted, score=decision.candidate_score)
        self.optimizer_state = dict(state_after(decision))
        self.checkpoint()
        return decision

    def _accept(self, candidate: Skill, report: EvaluationReport, decision: GateDecision) -> None:
        self._incumbent, self._incumbent_report = candidate, report
        self.version += 1
        self.run.save_version(self.version, candidate)
        self.run.save_best(candidate, self.export_metadata())
        logger.info("accepted v%04d: val %.4f (+%.4f)", self.version, report.mean, decision.delta)

    def _record_step(
        self, proposal: Proposal, *, accepted: bool, score: float | None, note: str = ""
    ) -> None:
        self._append_step(
            step=proposal.step,
            epoch=proposal.epoch,
            kind=proposal.kind,
            lr_budget=proposal.lr_budget,
            budget_tokens=proposal.budget_tokens,
            change_tokens=proposal.change_tokens,
            measured_change=proposal.measured_change,
            accepted=accepted,
            candidate_hash=proposal.skill.hash,
            val_score=score,
            edit_report=[o.to_dict() for o in proposal.report.outcomes] if proposal.report else [],
            note=note,
        )

    def record_empty_step(
        self, *, step: int, epoch: int, kind: str, lr_budget: float, budget_tokens: int, note: str
    ) -> None:
        """Record a step that produced no candidate (nothing reached the gate)."""
        self._append_step(
            step=step,
            epoch=epoch,
            kind=kind,
            lr_budget=lr_budget,
            budget_tokens=budget_tokens,
            change_tokens=0,
            measured_change=0.0,
            accepted=False,
            note=note,
        )

    def _append_step(self, **fields: Any) -> None:
        usage = self.ledger.snapshot()
        record = StepRecord(
            **fields,
            incumbent_score=self.incumbent_report.mean,
            calls=usage.calls,
            cost_usd=usage.cost_usd,
        )
        self.history.append(record)
        self.emit("step", **record.to_dict())

    # -- records -----------------------------------------------------------------------------
    def emit(self, event: str, /, **payload: Any) -> None:
        """Append an event to the run and tell the progress listener."""
        self.run.event(event, **payload)
        if self._on_event is not None:
            self._on_event(event, payload)

    def export_metadata(self) -> dict[str, Any]:
        """Front matter for best_skill.md."""
        seed_score = self.seed_report.mean if self.seed_report else None
        return {
            "name": self.module.name,
            "description": self.module.description,
            "val_score": self.incumbent_report.mean,
            "seed_val_score": seed_score,
            "model": self.target_lm.model,
            "optimizer_model": self.optimizer_lm.model,
            "version": self.version,
            "run_id": self.run.path.name if self.run.path else None,
        }

    def checkpoint(self) -> None:
        """Write the resumable state (atomically)."""
        self.run.save_checkpoint(
            {
                "driver": {
                    "incumbent": self._incumbent.text,
                    "version": self.version,
                    "gate_log": [d.to_dict() for d in self.gate_log],
                    "scored": {h: d.to_dict() for h, d in self.scored.items()},
                    "history": [r.to_dict() for r in self.history],
                    "rng": _rng_to_json(self.rng),
                },
                "optimizer": self.optimizer_state,
                "usage": self.ledger.snapshot().to_dict(),
                "cache_rowid": self._response_cache.max_rowid if self._response_cache else 0,
                "events": len(self.run.events),
            }
        )

    def restore(self, checkpoint: Mapping[str, Any]) -> None:
        """Load the state written by `checkpoint` (the incumbent is re-scored from the cache)."""
        driver = checkpoint["driver"]
        self._incumbent = Skill(driver["incumbent"])
        self._incumbent_report = None
        self.version = int(driver["version"])
        self.gate_log = [GateDecision.from_dict(d) for d in driver["gate_log"]]
        self.scored = {h: GateDecision.from_dict(d) for h, d in driver["scored"].items()}
        self.history = [StepRecord(**r) for r in driver["history"]]
        self.rng.setstate(_rng_from_json(driver["rng"]))
        self.optimizer_state = dict(checkpoint.get("optimizer", {}))


def _rng_to_json(rng: random.Random) -> list[Any]:
    version, internal, gauss = rng.getstate()
    return [version, list(internal), gauss]


def _rng_from_json(data: Sequence[Any]) -> tuple[Any, ...]:
    return (data[0], tuple(data[1]), data[2])
