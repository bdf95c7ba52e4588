"""`compile()`: wire a module, its data, the models, an optimizer, the gate, a budget and a run
directory together, run the optimizer, and return a `CompileResult`.

Every gain is shown beside what it must beat: the seed skill, the best constant answer where the
output is a label (`skillopt_dsl.baselines`, no model call) and, when given, the untouched test
set. The test set is scored after the search for the seed and the best skill, and for nothing
else: it can never influence which skill is chosen. Its calls go to a ledger of their own
(`test_budget`, unlimited by default), so a search that spent its whole budget still ends with
its test figures, and the search budget never pays for them.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from skillopt_dsl.baselines import Baseline, baseline_warning, constant_baseline, rescored
from skillopt_dsl.driver import CompileContext, StepRecord, as_checkpoint
from skillopt_dsl.errors import BudgetExceeded, UserInputError
from skillopt_dsl.evaluate import evaluate
from skillopt_dsl.evidence import Preflight, SignificanceBudget, preflight
from skillopt_dsl.export import AgentKind, export_agent_skill, export_skill
from skillopt_dsl.gate import Gate, GateDecision
from skillopt_dsl.json_types import JSONValue
from skillopt_dsl.lm import (
    LM,
    Budget,
    ResponseCache,
    UsageLedger,
    UsageSnapshot,
)
from skillopt_dsl.module import SkillModule
from skillopt_dsl.optimizers.base import Optimizer, StopReason, StudyPlots
from skillopt_dsl.optimizers.proposers import Proposer, RejectedCandidate
from skillopt_dsl.reachability import require_an_answer
from skillopt_dsl.runs import RunDirectory
from skillopt_dsl.settings import (
    DEFAULT_THREADS,
    CompileSettings,
    EventListener,
    ModelSpec,
    RunModels,
)
from skillopt_dsl.skill import Skill
from skillopt_dsl.types import Example

__all__ = [
    "Baseline",
    "CompileResult",
    "CompileSettings",
    "ModelSpec",
    "compile",
    "compile_with",
    "default_optimizer",
    "default_optimizer_on",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class CompileResult:
    """What a compile produced. `best_skill` is the gate's incumbent at the end of the run.

    `usage` is what the search spent (under `budget`); `test_usage` what scoring the test set
    spent (under `test_budget`), counted apart. `baseline` is the best constant answer when the
    output is a label (else None); `baseline_warning` says when the skill does not beat it.
    `rejected` is the run's search memory of rejected proposals at the end (screened out on
    training data or rejected by the gate, by any part of a composite search; empty for an
    optimizer that searches in no memory; `skillopt_dsl.search_memory`).
    `study_plots` is the optimizer's request that its caller draw a study's plots (an
    `OptunaLR` sweep with `plots=True`; else None): compile draws nothing itself; the CLI draws
    it, and so does `skillopt_dsl.report.draw_study_plots(result)`.
    `stop_detail` says what `stop_reason` alone does not (None where there is nothing more):
    the budget's message, or "perfect on the 15 of 30 validation examples scored; ..." when a
    stop on a part of validation says `budget`.

    `val_score`, `seed_val_score` and the baseline's validation score are measured on the same
    `val_examples` of the `val_size` validation examples: fewer than all of them when the best
    skill was accepted at an interim look and never scored on the rest (docs/concepts.md,
    "Sequential evaluation").
    """

    best_skill: Skill
    seed_skill: Skill
    val_score: float
    seed_val_score: float
    gate_log: list[GateDecision]
    history: list[StepRecord]
    usage: UsageSnapshot
    stop_reason: StopReason
    run_dir: Path | None = None
    test_score: float | None = None
    seed_test_score: float | None = None
    baseline: Baseline | None = None
    test_usage: UsageSnapshot | None = None
    metadata: Mapping[str, JSONValue] = field(default_factory=dict)
    preflight: Preflight | None = None
    rejected: tuple[RejectedCandidate, ...] = ()
    val_examples: int = 0
    val_size: int = 0
    study_plots: StudyPlots | None = None
    stop_detail: str | None = None

    @property
    def improved(self) -> bool:
        """True when at least one candidate passed the gate."""
        return any(d.accepted for d in self.gate_log)

    @property
    def baseline_warning(self) -> str | None:
        """A warning when the best skill does not beat the constant answer on test (on
        validation without a test score); None when it does or there is no label set."""
        return baseline_warning(self.baseline, self.val_score, self.test_score)

    def export(self, path: str | Path, *, format: str = "md", agent: AgentKind = "claude") -> Path:
        """Write the best skill: `format="md"` → a best_skill.md file at `path`;
        `format="agent-skill"` → the layout `agent` reads (`"claude"` / `"codex"`:
        `<path>/<name>/SKILL.md` with that agent's front matter; `"agents-md"`:
        `<path>/AGENTS.md`); see `export_agent_skill`."""
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
                agent=agent,
            )
        raise UserInputError(f"unknown export format {format!r}; choose 'md' or 'agent-skill'")

    def summary(self) -> dict[str, object]:
        """The JSON written to summary.json."""
        return {
            "stop_reason": self.stop_reason,
            "stop_detail": self.stop_detail,
            "seed_val_score": self.seed_val_score,
            "val_score": self.val_score,
            "val_examples": self.val_examples,
            "val_size": self.val_size,
            "seed_test_score": self.seed_test_score,
            "test_score": self.test_score,
            "baseline": None if self.baseline is None else self.baseline.to_dict(),
            "baseline_warning": self.baseline_warning,
            "accepted_steps": sum(1 for d in self.gate_log if d.accepted),
            "gate_decisions": len(self.gate_log),
            "stopped_early": sum(1 for d in self.gate_log if d.stopped_early),
            "validation_calls_saved": sum(d.calls_saved for d in self.gate_log),
            "significance_spent": sum(d.charged or 0.0 for d in self.gate_log),
            "preflight": None if self.preflight is None else self.preflight.to_dict(),
            "steps": len(self.history),
            "best_skill_hash": self.best_skill.hash,
            "usage": self.usage.to_dict(),
            "test_usage": None if self.test_usage is None else self.test_usage.to_dict(),
        }


def compile(
    module: SkillModule,
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
    test_budget: Budget | None = None,
    seed: int = 0,
    threads: int = DEFAULT_THREADS,
    max_errors: int | None = None,
    on_event: EventListener | None = None,
    significance: SignificanceBudget | None = None,
    shared_cache: ResponseCache | None = None,
) -> CompileResult:
    """Train `module`'s skill document on `trainset`, gated on `valset`; see the package docs.

    Args:
        module: the task (a `SkillModule` instance) whose seed skill is trained.
        trainset: examples the optimizer learns from.
        valset: held-out examples the gate decides on (never shown to proposers).
        optimizer: default `HandOff()` (GradientText, handing the run to Bundle where effects
            prove small).
        lm, optimizer_lm: the target model and the reflection model; default the embedded
            `local/smollm2-135m`.
        gate: default `Gate()` (strict improvement, ties rejected).
        budget: hard limits on calls, tokens and dollars of the search, shared by both models.
        run_dir, resume: where the run is recorded; `resume` continues it from its checkpoint.
        testset, test_budget: scored for the seed and the final skill only, after the search,
            within `test_budget`, counted apart from `budget` (None = no limit).
        seed, threads, max_errors: the one seed for every random choice (and the rollouts),
            parallel calls during evaluation, failed calls per evaluation before stopping.
        on_event: called with every event (for progress displays).
        significance: a `SignificanceBudget` shared with other runs, so that all of them
            together accept a useless edit with probability at most its alpha (a DSPy
            program's predictors, a Sleep night's candidates); its owner plans it for all of
            them (`budget.plan(...)`). Default: the run's own, of `gate.alpha`, planned over
            `optimizer.planned_decisions(len(trainset), max_calls=..., validation_size=...)`.
        shared_cache: a `ResponseCache` shared with other runs on the same examples (a DSPy
            program's predictors): a request the run's own cache lacks is answered from it for
            free, and every reply the run gets is stored there too. Default: none.
    """
    settings = CompileSettings(
        lm=lm, optimizer_lm=optimizer_lm, gate=gate, budget=budget, run_dir=run_dir,
        resume=resume, testset=testset, test_budget=test_budget, seed=seed, threads=threads,
        max_errors=max_errors, on_event=on_event, significance=significance,
        shared_cache=shared_cache,
    )  # fmt: skip
    return compile_with(module, trainset, valset, settings, optimizer)


def compile_with(
    module: SkillModule,
    trainset: Sequence[Example],
    valset: Sequence[Example],
    settings: CompileSettings,
    optimizer: Optimizer | None = None,
) -> CompileResult:
    """`compile(module, trainset, valset, optimizer=..., **keywords)` with the keywords already
    packed in one `CompileSettings` (what code that passes a run's settings on calls)."""
    resume = settings.resume
    trainset, valset, testset = _checked_splits(
        module, trainset, valset, settings.testset, resume=resume, run_dir=settings.run_dir
    )
    chosen = optimizer if optimizer is not None else default_optimizer(module)
    run = RunDirectory(settings.run_dir)
    models = RunModels.resolve(settings, run.cache_path)
    context = CompileContext(
        module=module,
        trainset=trainset,
        valset=valset,
        models=models,
        gate=settings.gate if settings.gate is not None else Gate(),
        run=run,
        settings=settings,
    )
    run.write_config(_config(context, chosen, settings.budget), resume=resume)
    baseline = constant_baseline(module, valset, testset)  # no model call
    if resume:
        run.load_events()  # cut a torn last line before this run appends its first event
    if baseline is not None:  # first, so a progress display shows it before any model call
        context.emit("baseline", **baseline.to_dict())
    check = _plan(context, chosen, own_budget=settings.significance is None)
    try:
        _start(context, models.cache, resume)
        _check_budget(context)
        stop_reason = chosen.compile(module, trainset, valset, context=context)
        context.complete_incumbent()  # the rest of validation, if accepted early and affordable
        plots = chosen.study_plots(context)  # drawn by the caller (the CLI), never here
        test = _TestScores.measure(context, testset, UsageLedger(settings.test_budget))
        return _finish(context, stop_reason, test, baseline, check, plots)
    finally:
        models.cache.flush()
        models.cache.close()  # now, not at garbage collection: no -wal/-shm file is left behind


def _plan(context: CompileContext, optimizer: Optimizer, *, own_budget: bool) -> Preflight:
    """Plan the run's own significance over the optimizer's decisions (a shared budget is
    planned by its owner, for all its runs at once) and say, before anything is spent, what the
    gate can certify at this validation size (a warning when too little)."""
    gate, budget = context.gate, context.significance
    if own_budget:
        budget.plan(
            optimizer.planned_decisions(
                len(context.trainset),
                max_calls=context.ledger.budget.max_calls,
                validation_size=len(context.valset),
            )
        )
    level = context.whole_set_level()
    check = preflight(gate, len(context.valset), budget.planned, first_level=level)
    context.emit("preflight", **check.to_dict())
    if own_budget:
        check.log(logger, context.module.name)
    else:  # the shared budget's owner said it once for all its runs
        logger.info("%s: %s", context.module.name, check.summary())
    return check


def _check_budget(context: CompileContext) -> None:
    """After the seed's first look (where the calls a rollout costs were first measured): say
    whether the call budget pays for one whole gate decision at that price, and warn when it
    does not (an agent episode or a DSPy program makes several calls a rollout)."""
    left = context.calls_left()
    if left is None:
        return
    rate, needed = context.call_rate.per_rollout, context.decision_calls()
    first = context.decision_calls(first_look=True)
    context.emit(
        "budget_check", calls_per_rollout=rate, decision_calls=needed,
        first_look_calls=first, calls_left=left,
    )  # fmt: skip
    if left < needed:
        logger.warning(
            "%s: %d calls are left after the seed's first look, at %.1f calls a rollout "
            "(measured); one gate decision on %d validation examples costs up to %d (its first "
            "look %d), before any training rollout: raise Budget.max_calls or use fewer "
            "validation examples",
            context.module.name, left, rate, len(context.valset), needed, first,
        )  # fmt: skip
    else:
        logger.info(
            "%s: %d calls left at %.1f calls a rollout; a gate decision costs up to %d",
            context.module.name, left, rate, needed,
        )  # fmt: skip


def default_optimizer(module: SkillModule | None = None) -> Optimizer:
    """The optimizer `compile` (and `SkillOptimizer`) runs when given none: `HandOff()`,
    GradientText handing the run to Bundle where its screens show only small effects, both
    with the proposers that suit `module`'s kind where it declares them
    (`default_proposers(module)`: an agent's show the tool call; `ChoosesProposers`)."""
    from skillopt_dsl.optimizers.hand_off import HandOff
    from skillopt_dsl.optimizers.proposers import ChoosesProposers, default_proposers

    if isinstance(module, ChoosesProposers):
        return HandOff.with_proposers(default_proposers(module))
    return HandOff()


def default_optimizer_on(
    proposers: Sequence[Proposer], *, consolidation: Proposer | None = None
) -> Optimizer:
    """Compile's default search (`default_optimizer()`, every other setting as it has them)
    on `proposers` chosen by the caller (a skill folder's description: the missed requests'
    words), and `consolidation` as GradientText's end-of-epoch proposer where given.

    Raises:
        UserInputError: the default is a search this cannot set proposers on.
    """
    from dataclasses import replace

    from skillopt_dsl.optimizers.gradient_text import GradientText
    from skillopt_dsl.optimizers.hand_off import HandOff

    def on(search: GradientText) -> GradientText:
        chosen = search.consolidation if consolidation is None else consolidation
        return replace(search, proposers=list(proposers), consolidation=chosen)

    default = default_optimizer()
    if isinstance(default, HandOff):
        return replace(
            default, first=on(default.first), then=replace(default.then, proposers=list(proposers))
        )
    if isinstance(default, GradientText):
        return on(default)
    raise UserInputError(f"cannot set the proposers of compile's default {type(default).__name__}")


def _checked_splits(
    module: SkillModule,
    trainset: Sequence[Example],
    valset: Sequence[Example],
    testset: Sequence[Example] | None,
    *,
    resume: bool,
    run_dir: str | Path | None,
) -> tuple[Sequence[Example], Sequence[Example], Sequence[Example] | None]:
    """The splits as examples of `module` (see `coerce_splits`), refused when unusable."""
    from skillopt_dsl.data import coerce_splits

    trainset, valset, testset = coerce_splits(module, trainset, valset, testset)
    _check_inputs(module, trainset, valset, testset, resume, run_dir)
    return trainset, valset, testset


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
    seed_refusal = module.skill_refusal(module.seed_skill)
    if seed_refusal is not None:
        raise UserInputError(f"the seed skill cannot be run by {module.name}: {seed_refusal}")
    if resume and run_dir is None:
        raise UserInputError("resume=True needs the run_dir of the run to continue")
    val_ids = {e.id for e in valset}
    leaked = sorted(val_ids & {e.id for e in trainset})[:5]
    if testset:
        leaked += sorted({e.id for e in testset} & (val_ids | {e.id for e in trainset}))[:5]
    if leaked:
        raise UserInputError(f"train, val and test must not share examples; shared ids: {leaked}")


def _config(
    context: CompileContext, optimizer: Optimizer, budget: Budget | None
) -> dict[str, object]:
    """The run's config.json: the settings a resume must match."""
    gate = context.gate
    return {
        "module": context.module.name,
        "seed_skill_hash": context.module.seed_skill.hash,
        "optimizer": optimizer.config(),
        "lm": context.target_lm.identity(),
        "optimizer_lm": context.optimizer_lm.identity(),
        "train_ids": [e.id for e in context.trainset],
        "val_ids": [e.id for e in context.valset],
        "seed": context.seed,
        "budget": None if budget is None else vars(budget),
        "gate": {
            "min_delta": gate.min_delta,
            "test": gate.test,
            "alpha": gate.alpha,
            "spending": gate.spending,
            "first_share": gate.first_share,
            "looks": list(gate.looks),
            "min_look": gate.min_look,
            "guards": [g.name for g in gate.guards],
        },
    }


def _start(context: CompileContext, cache: ResponseCache, resume: bool) -> None:
    saved = context.run.load_checkpoint() if resume else None
    checkpoint = None if saved is None else as_checkpoint(saved)
    # Every reservation is journaled in the run directory before its call is sent, so a resume
    # counts the calls a kill left in flight (`UsageLedger.open_journal`).
    replayed = context.run.path is not None and context.ledger.open_journal(
        context.run.files.ledger, replay=resume
    )
    if resume and not replayed:
        # A run directory without a journal (an older run): calls paid after the last
        # checkpoint (or before the first one) are in the run's cache; count them now.
        if checkpoint is not None:
            context.ledger.restore(UsageSnapshot.from_dict(checkpoint["usage"]))
        paid_up_to = int(checkpoint.get("cache_rowid", 0)) if checkpoint is not None else 0
        context.ledger.add_paid(cache.completions_after(paid_up_to))
    if checkpoint is not None:
        context.restore(checkpoint)
        context.emit("resume", version=context.version, steps=len(context.history))
    seed = context.module.seed_skill
    seed_report = context.score_seed(fresh=checkpoint is None)  # the gate's first look
    require_an_answer(seed_report, context.target_lm)  # fail fast: nothing answered
    if checkpoint is None:
        context.run.save_version(1, seed)
        context.publish_best(seed)
        context.emit(
            "seed", skill_hash=seed.hash, val_score=seed_report.mean, n=len(seed_report.records)
        )
    _ = context.incumbent_report


@dataclass(frozen=True)
class _TestScores:
    """The seed's and the best skill's test means (None where not scored) and their spend."""

    seed: float | None = None
    best: float | None = None
    usage: UsageSnapshot | None = None

    @classmethod
    def measure(
        cls, context: CompileContext, testset: Sequence[Example] | None, ledger: UsageLedger
    ) -> _TestScores:
        """Score the seed and the incumbent on `testset` with a target model that reports to
        `ledger` (same backend and response cache), never to the search's ledger."""
        if not testset:
            return cls()
        target = context.target_lm.with_ledger(ledger)
        seed_skill = context.module.seed_skill
        seed = _test_mean(context, target, seed_skill, testset)
        best = (
            seed
            if context.incumbent.hash == seed_skill.hash
            else _test_mean(context, target, context.incumbent, testset)
        )
        # Move the checkpoint's cache mark past the test calls, so a resume never counts them
        # as search spend.
        context.checkpoint()
        return cls(seed=seed, best=best, usage=ledger.snapshot())


def _test_mean(
    context: CompileContext, target: LM, skill: Skill, testset: Sequence[Example]
) -> float | None:
    """The test mean, or None when the test budget ran out before the test set was scored."""
    try:
        report = evaluate(
            context.module,
            testset,
            skill=skill,
            lm=target,
            threads=context.threads,
            max_errors=context.max_errors,
            cache=context.eval_cache,
            seed=context.seed,
            progress=False,
        )
    except BudgetExceeded as exc:
        logger.warning("the test budget ran out before the test set was scored: %s", exc)
        context.emit("test_skipped", reason=str(exc))
        return None
    context.emit("evaluation", split="test", **report.summary())
    return report.mean


def _finish(
    context: CompileContext,
    stop_reason: StopReason,
    test: _TestScores,
    baseline: Baseline | None,
    check: Preflight | None = None,
    plots: StudyPlots | None = None,
) -> CompileResult:
    best, seed_report = context.incumbent, context.seed_report
    assert seed_report is not None  # set by _start
    # where both were scored: fewer than all after an early acceptance the budget left unfinished
    best_report = context.incumbent_report.restricted_to(seed_report.example_ids)
    same = best_report.example_ids
    if baseline is not None and len(same) < len(context.valset):
        scored_on = [e for e in context.valset if e.id in set(same)]
        baseline = rescored(baseline, context.module, scored_on)
    metadata = context.publish_best(best, {"test_score": test.best, "seed_test_score": test.seed})
    result = CompileResult(
        best_skill=best,
        seed_skill=context.module.seed_skill,
        val_score=best_report.mean,
        seed_val_score=seed_report.restricted_to(same).mean,
        val_examples=len(same),
        val_size=len(context.valset),
        gate_log=list(context.gate_log),
        history=list(context.history),
        usage=context.ledger.snapshot(),
        stop_reason=stop_reason,
        stop_detail=context.stop_detail,
        run_dir=context.run.path,
        test_score=test.best,
        seed_test_score=test.seed,
        baseline=baseline,
        test_usage=test.usage,
        metadata=metadata,
        preflight=check,
        rejected=tuple(context.memory.rejected),
        study_plots=plots,
    )
    if result.baseline_warning is not None:
        logger.warning("%s: %s", context.module.name, result.baseline_warning)
    context.run.save_summary(result.summary())
    context.emit("finish", **result.summary())
    return result
