"""`compile()`: wire a module, its data, the models, an optimizer, the gate, a budget and a run
directory together, run the optimizer, and return a `CompileResult`.

The test set, when given, is scored after the search for the seed and the best skill, and for
nothing else: it can never influence which skill is chosen.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skillopt_dsl.driver import CompileContext, StepRecord
from skillopt_dsl.errors import BudgetExceeded, UserInputError
from skillopt_dsl.evaluate import EvaluationReport
from skillopt_dsl.export import export_agent_skill, export_skill
from skillopt_dsl.gate import Gate, GateDecision
from skillopt_dsl.lm import (
    LM,
    Backend,
    Budget,
    ResponseCache,
    UsageLedger,
    UsageSnapshot,
    resolve_lm,
)
from skillopt_dsl.module import SkillModule
from skillopt_dsl.optimizers.base import Optimizer
from skillopt_dsl.runs import RunDirectory
from skillopt_dsl.skill import Skill
from skillopt_dsl.types import Example

__all__ = ["CompileResult", "compile"]

logger = logging.getLogger(__name__)

ModelSpec = str | Backend | LM | None


@dataclass(frozen=True)
class CompileResult:
    """What a compile produced. `best_skill` is the gate's incumbent at the end of the run."""

    best_skill: Skill
    seed_skill: Skill
    val_score: float
    seed_val_score: float
    gate_log: list[GateDecision]
    history: list[StepRecord]
    usage: UsageSnapshot
    stop_reason: str
    run_dir: Path | None = None
    test_score: float | None = None
    seed_test_score: float | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)

    @property
    def improved(self) -> bool:
        """True when at least one candidate passed the gate."""
        return any(d.accepted for d in self.gate_log)

    def export(self, path: str | Path, *, format: str = "md") -> Path:
        """Write the best skill: `format="md"` → a best_skill.md file at `path`;
        `format="agent-skill"` → `<path>/<name>/SKILL.md`."""
        if format == "md":
            return export_skill(self.best_skill, path, self.metadata)
        if format == "agent-skill":
            description = str(
                self.metadata.get("description") or self.metadata.get("name", "skill")
            )
            return export_agent_skill(
                self.best_skill,
                path,
                name=str(self.metadata.get("name", "skill")),
                description=description,
                metadata={"val_score": self.val_score},
            )
        raise UserInputError(f"unknown export format {format!r}; choose 'md' or 'agent-skill'")

    def summary(self) -> dict[str, Any]:
        """The JSON written to summary.json."""
        return {
            "stop_reason": self.stop_reason,
            "seed_val_score": self.seed_val_score,
            "val_score": self.val_score,
            "seed_test_score": self.seed_test_score,
            "test_score": self.test_score,
            "accepted_steps": sum(1 for d in self.gate_log if d.accepted),
            "gate_decisions": len(self.gate_log),
            "steps": len(self.history),
            "best_skill_hash": self.best_skill.hash,
            "usage": self.usage.to_dict(),
        }


def compile(
    skill: SkillModule,
    trainset: Sequence[Example],
    valset: Sequence[Example],
    *,
    optimizer: Optimizer | None = None,
    lm: ModelSpec = None,
    optimizer_lm: ModelSpec = None,
    gate: Gate | None = None,
    budget: Budget | None = None,
    run_dir: str | Path | None = None,
    resume: bool = False,
    testset: Sequence[Example] | None = None,
    seed: int = 0,
    threads: int = 4,
    max_errors: int | None = None,
    on_event: Callable[[str, Mapping[str, Any]], None] | None = None,
) -> CompileResult:
    """Train `skill`'s document on `trainset`, gated on `valset`; see the package docs.

    Args:
        skill: the module whose seed skill is trained.
        trainset: examples the optimizer learns from.
        valset: held-out examples the gate decides on (never shown to proposers).
        optimizer: default `GradientText()`.
        lm: target model; default the embedded `local/smollm2-135m`.
        optimizer_lm: model for reflection; default the embedded model.
        gate: default `Gate()` (strict improvement, ties rejected).
        budget: hard limits on calls, tokens and dollars, shared by both models.
        run_dir: where the run is recorded; required for `resume`.
        resume: continue the run in `run_dir` from its last checkpoint.
        testset: scored for the seed and the final skill only.
        seed: the one seed for every random choice and the rollout seed.
        threads: parallel model calls during evaluation.
        max_errors: per-evaluation limit of failed calls before the run stops.
        on_event: called with every event (for progress displays).
    """
    from skillopt_dsl.optimizers.gradient_text import GradientText

    _check_inputs(skill, trainset, valset, testset, resume, run_dir)
    chosen = optimizer if optimizer is not None else GradientText()
    run = RunDirectory(run_dir)
    ledger = UsageLedger(budget)
    cache = ResponseCache(run.cache_path)
    target = resolve_lm(lm, cache=cache, ledger=ledger)
    reflector = resolve_lm(optimizer_lm, cache=cache, ledger=ledger)
    run.write_config(
        _config(skill, chosen, target, reflector, trainset, valset, seed, budget, gate),
        resume=resume,
    )
    context = CompileContext(
        module=skill,
        trainset=trainset,
        valset=valset,
        target_lm=target,
        optimizer_lm=reflector,
        gate=gate or Gate(),
        ledger=ledger,
        run=run,
        seed=seed,
        threads=threads,
        max_errors=max_errors,
        on_event=on_event,
        response_cache=cache,
    )
    try:
        _start(context, cache, resume)
        stop_reason = chosen.compile(skill, trainset, valset, context=context)
        return _finish(context, stop_reason, testset)
    finally:
        cache.flush()


def _check_inputs(
    module: SkillModule,
    trainset: Sequence[Example],
    valset: Sequence[Example],
    testset: Sequence[Example] | None,
    resume: bool,
    run_dir: str | Path | None,
) -> None:
    if not isinstance(module, SkillModule):
        raise UserInputError(f"compile() takes a SkillModule instance, got {type(module).__name__}")
    if not trainset or not valset:
        raise UserInputError("compile() needs a non-empty trainset and valset")
    if resume and run_dir is None:
        raise UserInputError("resume=True needs the run_dir of the run to continue")
    val_ids = {e.id for e in valset}
    leaked = sorted(val_ids & {e.id for e in trainset})[:5]
    if testset:
        leaked += sorted({e.id for e in testset} & (val_ids | {e.id for e in trainset}))[:5]
    if leaked:
        raise UserInputError(f"train, val and test must not share examples; shared ids: {leaked}")


def _config(
    module: SkillModule,
    optimizer: Optimizer,
    target: LM,
    reflector: LM,
    trainset: Sequence[Example],
    valset: Sequence[Example],
    seed: int,
    budget: Budget | None,
    gate: Gate | None,
) -> dict[str, Any]:
    chosen_gate = gate or Gate()
    return {
        "module": module.name,
        "seed_skill_hash": module.seed_skill.hash,
        "optimizer": optimizer.config(),
        "lm": target.model,
        "optimizer_lm": reflector.model,
        "train_ids": [e.id for e in trainset],
        "val_ids": [e.id for e in valset],
        "seed": seed,
        "budget": None if budget is None else vars(budget),
        "gate": {
            "min_delta": chosen_gate.min_delta,
            "test": chosen_gate.test,
            "alpha": chosen_gate.alpha,
            "guards": [g.name for g in chosen_gate.guards],
        },
    }


def _start(context: CompileContext, cache: ResponseCache, resume: bool) -> None:
    checkpoint = context.run.load_checkpoint() if resume else None
    if resume:
        context.run.load_events()
    if resume:
        # Calls paid after the last checkpoint (or before the first one) are in the run's cache:
        # count them now, so a resumed run spends exactly what an uninterrupted one would.
        if checkpoint is not None:
            context.ledger.restore(UsageSnapshot.from_dict(checkpoint["usage"]))
        paid_up_to = int(checkpoint.get("cache_rowid", 0)) if checkpoint is not None else 0
        context.ledger.add_paid(cache.completions_after(paid_up_to))
    if checkpoint is not None:
        context.restore(checkpoint)
        context.emit("resume", version=context.version, steps=len(context.history))
    seed = context.module.seed_skill
    context.seed_report = context.evaluate(seed, context.valset, label="val")
    if checkpoint is None:
        context.run.save_version(1, seed)
        context.run.save_best(seed, context.export_metadata())
        context.emit("seed", skill_hash=seed.hash, val_score=context.seed_report.mean)
    _ = context.incumbent_report


def _finish(
    context: CompileContext, stop_reason: str, testset: Sequence[Example] | None
) -> CompileResult:
    best = context.incumbent
    seed_test = best_test = None
    if testset:
        seed_test = _test_mean(context, context.module.seed_skill, testset)
        best_test = (
            seed_test
            if best.hash == context.module.seed_skill.hash
            else _test_mean(context, best, testset)
        )
    seed_report = context.seed_report
    assert seed_report is not None  # set by _start
    metadata = context.export_metadata() | {"test_score": best_test, "seed_test_score": seed_test}
    result = CompileResult(
        best_skill=best,
        seed_skill=context.module.seed_skill,
        val_score=context.incumbent_report.mean,
        seed_val_score=seed_report.mean,
        gate_log=list(context.gate_log),
        history=list(context.history),
        usage=context.ledger.snapshot(),
        stop_reason=stop_reason,
        run_dir=context.run.path,
        test_score=best_test,
        seed_test_score=seed_test,
        metadata=metadata,
    )
    context.run.save_best(best, metadata)
    context.run.save_summary(result.summary())
    context.emit("finish", **result.summary())
    return result


def _test_mean(context: CompileContext, skill: Skill, testset: Sequence[Example]) -> float | None:
    """The test mean, or None when the budget ran out before the test set could be scored."""
    try:
        report: EvaluationReport = context.evaluate(skill, testset, label="test")
    except BudgetExceeded as exc:
        logger.warning("the budget ran out before the test set was scored: %s", exc)
        context.emit("test_skipped", reason=str(exc))
        return None
    return report.mean
