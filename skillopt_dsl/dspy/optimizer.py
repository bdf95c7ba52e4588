"""`SkillOptimizer`: our optimizers and gate on an existing DSPy program (a DSPy teleprompter).

Swap one line of a DSPy script::

    optimizer = SkillOptimizer(metric, optimizer=GradientText(), budget=Budget(max_calls=600))
    compiled = optimizer.compile(program, trainset=trainset, valset=valset)

Each selected predictor's instructions are trained as a skill, one predictor after the other, by
`skillopt_dsl.compile` on a `PredictorModule`; the other predictors keep their incumbent
instructions. The gate judges the **whole program's** metric on `valset`, and each predictor
starts from the program the previous one left, so the program's validation score never drops.
One budget spans every predictor (each run gets what the earlier ones left), and the runs share
their model replies: a run's seed program is the one the earlier runs left, so its validation
rollouts were already paid for and cost nothing again. The student is
never modified: the result is a deep copy with the best instructions, `_compiled = True`, and a
`SkillOptimizerResult` on `.skillopt` (the per-predictor `CompileResult`s). With `run_dir`, each
predictor's run lives in `run_dir/<predictor>/` (its `best_skill.md` holds exactly the
instructions the program runs with; with `demos=True`, followed by its `## Examples` section of
demos) and the program is saved to `run_dir/program.json`; `resume=True` continues every
predictor's run as `compile` does. With `demos=True`, each predictor's demos are trained with
its instructions, in the same skill (see `skillopt_dsl.dspy.demos`).
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any, Unpack

import dspy
from dspy.teleprompt import Teleprompter

from skillopt_dsl.compile import CompileResult, compile_with
from skillopt_dsl.dspy.bridge import from_dspy_lm
from skillopt_dsl.dspy.budget_check import budget_warning, one_decision
from skillopt_dsl.dspy.program import DSPyProgram, normalize_instructions
from skillopt_dsl.dspy.reach import RATE_ROWS, Pricing, probe_reach, unreached
from skillopt_dsl.dspy.rows import (
    given_examples,
    golds,
    input_names,
    program_inputs,
    refuse_shared,
    split_trainset,
)
from skillopt_dsl.dspy.settings import ModelSpec, SkillOptimizerOptions, SkillOptimizerSettings
from skillopt_dsl.errors import BudgetExceeded, UserInputError
from skillopt_dsl.evaluate import DEFAULT_THREADS, EvaluationReport, evaluate
from skillopt_dsl.evidence import Preflight, SignificanceBudget, preflight
from skillopt_dsl.gate import Gate
from skillopt_dsl.lm import LM, Backend, Budget, ResponseCache, UsageSnapshot
from skillopt_dsl.options import settings_from, takes_options
from skillopt_dsl.runs import RunDirectory
from skillopt_dsl.settings import CompileSettings
from skillopt_dsl.skill import Skill
from skillopt_dsl.types import Example

__all__ = [
    "PredictorResult",
    "SkillOptimizer",
    "SkillOptimizerOptions",
    "SkillOptimizerResult",
    "SkillOptimizerSettings",
    "evaluate_program",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class PredictorResult:
    """One predictor's run: the instructions the program now runs with, and the compile result.

    `skill` is `Skill(instructions)`: its hash is the one in `best_skill.md`. It differs from
    `result.best_skill` only by `inspect.cleandoc` (what DSPy applies to instructions).
    """

    name: str
    instructions: str
    result: CompileResult

    @property
    def skill(self) -> Skill:
        """The normalised skill the predictor runs with."""
        return Skill(self.instructions)


@dataclass(frozen=True)
class SkillOptimizerResult:
    """What `SkillOptimizer.compile` did, attached to the returned program as `.skillopt`.

    Attributes:
        predictors: each trained predictor's `PredictorResult`, in training order.
        untrained: predictors not trained because the budget ran out (they keep their
            incumbent instructions).
        unreached: predictors no training row's run calls (the program's branching never
            reaches them): not trained, given no budget, left exactly as the student has them.
        stop_reason: "finished", or "budget" when the budget stopped the search.
        usage: calls, tokens and dollars summed over every predictor's run (a run the
            budget stopped while it scored its seed program included).
        run_dir: the run directory, when one was given.
        seed_val_score / val_score: the program's validation score before and after.
        warnings: what the run said at WARNING before its first call (a budget too small
            for one gate decision, a trainset split because no valset was given).
        split: how the trainset was split when no valset was given (None: a valset was).
    """

    predictors: Mapping[str, PredictorResult]
    untrained: tuple[str, ...]
    stop_reason: str
    usage: UsageSnapshot
    run_dir: Path | None = None
    seed_val_score: float | None = None
    val_score: float | None = None
    warnings: tuple[str, ...] = ()
    split: str | None = None
    unreached: tuple[str, ...] = ()

    def __deepcopy__(self, memo: dict[int, Any]) -> SkillOptimizerResult:
        """Immutable: a deep copy of the program (DSPy makes many) shares it."""
        return self

    @property
    def results(self) -> dict[str, CompileResult]:
        """The per-predictor `CompileResult`s."""
        return {name: p.result for name, p in self.predictors.items()}


class SkillOptimizer(Teleprompter):  # type: ignore[misc]
    """Train a DSPy program's instructions with a skillopt optimizer, gated on the program's
    metric (see the module docstring).

    Args:
        metric: a DSPy metric: `(gold, pred, trace=None)` or GEPA's `(gold, pred, trace,
            pred_name, pred_trace)`; it returns a float or bool in [0, 1] or
            `dspy.Prediction(score=..., feedback=...)`.
        optimizer: a skillopt `Optimizer` (default `compile`'s, `HandOff()`), used for every
            predictor.
        gate: default `Gate()`.
        budget: hard limits on calls, tokens and dollars, spanning every predictor.
        lm: the program's model: a `dspy.LM` (its model, `api_base`, key and settings are
            used), a litellm string, a skillopt `LM` or `Backend`; None = the embedded model
            (refused when `dspy.configure` set another LM: pass `lm=dspy.settings.lm`).
        optimizer_lm: the reflection model (the same kinds); None = the same as `lm`.
        predictors: "all", or the names (from `program.named_predictors()`) to train, in order.
        adapter: a DSPy adapter for every call (e.g. `RawSkillAdapter()` for small models);
            None = the caller's DSPy settings (ChatAdapter by default).
        run_dir: where the runs are recorded (one folder per predictor); required for resume.
        resume: continue the runs in `run_dir`.
        seed: the one seed for every random choice and the rollout seed.
        threads: parallel program runs during evaluation (None: `DEFAULT_THREADS`, 4).
        max_errors: per-evaluation limit of failed calls before a run stops.
        num_threads: DSPy's name for `threads` (give one of the two).
        log_dir: DSPy's (GEPA's) name for `run_dir` (give one of the two).
        reflection_lm: GEPA's name for `optimizer_lm`; prompt_model: MIPROv2's (give one).
        auto: refused with a hint: DSPy's `auto="light"` sizes MIPROv2's and GEPA's search;
            ours is sized by `budget=` (and the optimizer's epochs). GEPA's
            `max_metric_calls=N` is refused naming `budget=Budget(max_calls=N)`.
        demos: train each predictor's demos too (`skillopt_dsl.dspy.demos`): its skill is
            its instructions plus an `## Examples` section of demos (its own demos first),
            worked examples from real traces are proposed there and gated like any edit, and
            the compiled program holds them in `predictor.demos`, never in the instructions.
            False (default): only instructions are trained; the student's demos are kept.
        failure_score: the score of a row on which the program raised after its model
            answered (a reply `int(...)` or `json.loads` choked on, `ProgramOfThought`'s
            "Max hops reached") or whose output could not be parsed, as `dspy.GEPA` names
            it; the failure and its traceback reach reflection. A program that raises
            before any model call, or on every row it runs, is broken itself: the run stops
            with a `DSPyProgramError` naming the row and the cause. Default 0.0.

    The keywords after `metric` are `SkillOptimizerSettings`' fields (`SkillOptimizerOptions`
    types them); an unknown one is a `TypeError`.
    """

    @takes_options(SkillOptimizerSettings)
    def __init__(
        self, metric: Callable[..., Any], **options: Unpack[SkillOptimizerOptions]
    ) -> None:
        super().__init__()
        if not callable(metric):
            raise UserInputError(f"metric must be callable, got {type(metric).__name__}")
        _refuse_dspy_budget(options)
        given = settings_from("SkillOptimizer", SkillOptimizerSettings, options)
        _refuse_auto(given.auto)
        threads, run_dir, optimizer_lm = _ours(given)
        lm, optimizer_lm = _model(given.lm), _model(optimizer_lm)
        if given.resume and run_dir is None:
            raise UserInputError("resume=True needs the run_dir of the run to continue")
        self.metric = metric
        self.optimizer = given.optimizer
        self.gate = given.gate
        self.budget = given.budget
        self.lm = lm
        self.optimizer_lm = optimizer_lm
        self.predictors = given.predictors
        self.adapter = given.adapter
        self.run_dir = Path(run_dir) if run_dir is not None else None
        self.resume = given.resume
        self.seed = given.seed
        self.threads = threads
        self.max_errors = given.max_errors
        self.demos = given.demos
        self.failure_score = _failure_score(given.failure_score)

    def compile(
        self,
        student: dspy.Module,
        *,
        trainset: Sequence[Any],
        teacher: Any = None,
        valset: Sequence[Any] | None = None,
        **kwargs: Any,
    ) -> dspy.Module:
        """Return a deep copy of `student` with its best instructions (the student is
        untouched). `trainset` / `valset` are `dspy.Example`s (inputs from `.with_inputs(...)`,
        else the program's inputs), skillopt `Example`s, or dicts (the program's inputs, from
        its `forward` signature, are the inputs; an `id` key is the id). The metric receives
        the examples exactly as given (pydantic labels stay models). Without `valset`, the
        trainset is split (seeded, half for the gate; stated at WARNING and in the result's
        `split`). An error about an example names its position (`valset[3]`)."""
        if teacher is not None or kwargs:
            extra = ["teacher"] * (teacher is not None) + sorted(kwargs)
            raise UserInputError(f"SkillOptimizer.compile does not take {extra}")
        accepted = program_inputs(student)
        train_rows = given_examples(trainset, accepted, where="trainset", program=student)
        split = None
        if valset is not None and len(valset) == 0:
            raise UserInputError(
                "valset is empty; pass held-out examples, or leave valset out (None) to let "
                "SkillOptimizer split the trainset"
            )
        if valset is None:
            train_rows, val_rows, split = split_trainset(train_rows, self.seed)
            logger.warning("%s", split)
        else:
            val_rows = given_examples(valset, accepted, where="valset", program=student)
            refuse_shared(train_rows, val_rows)
        train, val = [row.example for row in train_rows], [row.example for row in val_rows]
        positions = {row.example.id: row.where for row in [*train_rows, *val_rows]}
        program = DSPyProgram(
            student,
            self.metric,
            inputs=input_names([*train, *val], positions, accepted),
            adapter=self.adapter,
            context=contextvars.copy_context(),
            demos=self.demos,
            failure_score=self.failure_score,
        )
        program.positions.update(positions)
        program.golds.update(golds([*train_rows, *val_rows]))
        outcome = self._train(program, self._selected(program), train, val, split)
        if split is not None:
            outcome = replace(outcome, split=split, warnings=(split, *outcome.warnings))
        compiled = program.built()
        compiled._compiled = True
        compiled.skillopt = outcome
        if self.run_dir is not None:
            compiled.save(str(self.run_dir / "program.json"))
        return compiled

    # -- the per-predictor runs ---------------------------------------------------------------
    def _train(
        self,
        program: DSPyProgram,
        names: list[str],
        train: list[Example],
        val: list[Example],
        split: str | None = None,
    ) -> SkillOptimizerResult:
        target = _target_spec(self.lm)
        reflector = self.optimizer_lm if self.optimizer_lm is not None else target
        done: dict[str, PredictorResult] = {}
        stop_reason, aborted = "finished", UsageSnapshot()
        significance = self._significance(names, train, val, split)
        warnings = budget_warning(self.budget, self.gate, program, train, val)
        # One program, one set of examples: a predictor's run starts from the program the
        # earlier runs left, whose rollouts they already paid for (its seed evaluation).
        replies = ResponseCache()
        try:
            pricing = Pricing(self.budget, self._pricing(program, train, val))
            seen = probe_reach(program, names, train, lm=target, shared=replies, pricing=pricing,
                               seed=self.seed, run_dir=self.run_dir)  # fmt: skip
        except BudgetExceeded as exc:
            logger.info("budget spent before the program's paths were known: %s", exc)
            return _summary({}, names, "budget", [program.sent()], self.run_dir, warnings)
        probe, per_run = seen.usage, seen.per_run
        if per_run is not None and not warnings:  # priced at what a run was seen to cost
            warnings = budget_warning(self.budget, self.gate, program, train, val, per_run)
        # A predictor's share pays for a decision at the costliest run the probe saw: priced
        # on one cheap row, a share one short of a decision buys nothing.
        least = one_decision(self.gate, program, train, val, seen.costliest or per_run)[0]
        skipped: list[str] = []
        for index, name in enumerate(names):
            if unreached(program, name, train):
                logger.warning("predictor %r: no training row's run calls it; not trained", name)
                skipped.append(name)
                continue
            before = program.sent()
            try:
                share = self._share(
                    [probe, *(p.result.usage for p in done.values())],
                    sum(not unreached(program, n, train) for n in names[index:]),
                    least,
                )
                settings = self._settings(name, (target, reflector), significance, replies, share)
                result = compile_with(program.module(name), train, val, settings, self.optimizer)
            except BudgetExceeded as exc:
                # The budget ran out while the seed program was scored (the only place compile
                # lets it escape): only target calls were made, all counted by the bridge.
                logger.info("budget spent before predictor %r could be scored: %s", name, exc)
                stop_reason, aborted = "budget", program.sent().minus(before)
                break
            done[name] = self._adopt(program, name, result)
            if result.stop_reason == "budget":
                stop_reason = "budget"  # its share is spent; the next predictor has its own
        spent = [probe, aborted]
        return _summary(done, names, stop_reason, spent, self.run_dir, warnings, tuple(skipped))

    def _settings(
        self,
        name: str,
        models: tuple[ModelSpec, ModelSpec],
        significance: SignificanceBudget | None,
        replies: ResponseCache,
        budget: Budget | None,
    ) -> CompileSettings:
        """The compile settings of predictor `name`'s run: the target and reflection `models`,
        the program's shared significance and replies, and its share of the budget."""
        return CompileSettings(
            lm=models[0],
            optimizer_lm=models[1],
            gate=self.gate,
            significance=significance,
            shared_cache=replies,
            budget=budget,
            run_dir=self.run_dir / name if self.run_dir is not None else None,
            resume=self.resume,
            seed=self.seed,
            threads=self.threads,
            max_errors=self.max_errors,
        )

    def _share(self, spent: Sequence[UsageSnapshot], parts: int, least: int) -> Budget | None:
        """What the earlier runs left of the program's budget (`Budget.left_after`) and the
        next of `parts` predictors' share of it, at least `least` calls (`Budget.share`)."""
        if self.budget is None:
            return None
        return self.budget.left_after(*spent).share(parts, least_calls=least)

    def _significance(
        self, names: list[str], train: list[Example], val: list[Example], split: str | None
    ) -> SignificanceBudget:
        """One significance budget for the whole program, planned over every predictor's
        decisions, so all of them together accept a useless edit with probability at most the
        gate's alpha; says before spending what the gate can certify on this valset.

        Raises:
            UserInputError: the trainset was `split` (no valset given) into a validation set
                on which no gain can be certified: the run would spend for nothing.
        """
        gate = self.gate if self.gate is not None else Gate()
        budget = gate.significance_budget()
        from skillopt_dsl.compile import default_optimizer

        optimizer = self.optimizer if self.optimizer is not None else default_optimizer()
        per_predictor = optimizer.planned_decisions(len(train))
        budget.plan(None if per_predictor is None else per_predictor * len(names))
        check = preflight(gate, len(val), budget.planned)
        if split is not None and check.first_level is not None and check.clean_fix is None:
            raise UserInputError(_uncertifiable_split(split, check, gate))
        check.log(logger, f"program of {len(names)} predictor(s)")
        return budget

    def _adopt(self, program: DSPyProgram, name: str, result: CompileResult) -> PredictorResult:
        """Make the run's best skill the predictor's incumbent, normalised as DSPy stores it."""
        instructions = normalize_instructions(result.best_skill.text)
        program.instructions[name] = instructions
        if result.run_dir is not None and instructions != result.best_skill.text:
            RunDirectory(result.run_dir, create=False).save_best(
                Skill(instructions), result.metadata
            )
        logger.info(
            "predictor %r: val %.4f (seed %.4f), %d calls",
            name,
            result.val_score,
            result.seed_val_score,
            result.usage.calls,
        )
        return PredictorResult(name=name, instructions=instructions, result=result)

    def _pricing(
        self, program: DSPyProgram, train: list[Example], val: list[Example]
    ) -> Callable[[UsageSnapshot, int], bool]:
        """Whether the reach probe should price a run on one more row: while it ran fewer
        than `RATE_ROWS` and the calls left would be split (they pay for two decisions at
        the rate seen so far); a budget too small to split goes whole to the first predictor
        whatever a run costs, and an extra row would only take from it."""
        limit = None if self.budget is None else self.budget.max_calls

        def more(spent: UsageSnapshot, rows: int) -> bool:
            if limit is None or not rows or not spent.calls or rows >= RATE_ROWS:
                return False
            least = one_decision(self.gate, program, train, val, spent.calls / rows)[0]
            return limit - spent.calls >= 2 * least

        return more

    def _selected(self, program: DSPyProgram) -> list[str]:
        if self.predictors == "all":
            return program.predictor_names
        if isinstance(self.predictors, str):
            raise UserInputError(
                f"predictors must be 'all' or a list of names, got {self.predictors!r}"
            )
        chosen = list(self.predictors)
        unknown = [n for n in chosen if n not in program.predictor_names]
        if unknown or not chosen:
            raise UserInputError(
                f"unknown predictors {unknown or chosen}; the program's predictors are "
                f"{program.predictor_names}"
            )
        return chosen


def evaluate_program(
    program: dspy.Module,
    examples: Iterable[Any],
    metric: Callable[..., Any],
    *,
    lm: ModelSpec = None,
    adapter: Any = None,
    threads: int = DEFAULT_THREADS,
    seed: int = 0,
    max_errors: int | None = None,
) -> EvaluationReport:
    """Score a DSPy program (any: compiled by us, by GEPA or MIPROv2) with our evaluation.

    Every call goes through `lm` (cache, ledger, budget); a failed call scores 0, a budget stop
    raises `BudgetExceeded`, a broken metric raises `MetricError` (unlike `dspy.Evaluate`, which
    swallows every exception). A row on which the program raised after its model answered
    scores 0, as `dspy.Evaluate` scores it (`SkillOptimizer(failure_score=)` sets it for
    training); a program that raises before any
    model call, or on every row, raises `DSPyProgramError`. The report's `mean` is in [0, 1].
    """
    accepted = program_inputs(program)
    given = given_examples(examples, accepted, where="examples", program=program)
    if not given:
        raise UserInputError("evaluate_program needs at least one example")
    rows = [row.example for row in given]
    positions = {row.example.id: row.where for row in given}
    target = DSPyProgram(
        program,
        metric,
        inputs=input_names(rows, positions, accepted),
        adapter=adapter,
        context=None,
    )
    target.positions.update(positions)
    target.golds.update(golds(given))
    module = target.module(target.predictor_names[0])
    return evaluate(
        module,
        rows,
        lm=_target_spec(_model(lm)),
        threads=threads,
        seed=seed,
        max_errors=max_errors,
        progress=False,
    )


def _model(spec: ModelSpec) -> str | Backend | LM | None:
    """A `dspy.LM` as our `LM` (every call then goes through our ledger and budget)."""
    return from_dspy_lm(spec) if isinstance(spec, dspy.BaseLM) else spec


def _failure_score(value: float) -> float:
    """`failure_score`, refused unless a number in [0, 1] (the metric's range)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= value <= 1.0:
        raise UserInputError(
            f"failure_score must be a number in [0, 1] (the metric's range), got {value!r}"
        )
    return float(value)


def _uncertifiable_split(split: str, check: Preflight, gate: Gate) -> str:
    """Why a split trainset is refused: its gate rows cannot certify any gain."""
    needed = next(
        (n for n in range(check.n_val + 1, 1001) if preflight(gate, n, check.planned).clean_fix),
        None,
    )
    val_rows = "more held-out examples" if needed is None else f"at least {needed} examples"
    rows = "more trainset rows" if needed is None else f"at least {2 * needed} trainset rows"
    return (
        f"{split}; on {check.n_val} validation example(s) the gate can certify no gain, not "
        f"even every answer fixed, so the run would spend its calls for nothing: pass "
        f"valset= with {val_rows}, or {rows} to split"
    )


def _refuse_dspy_budget(options: Mapping[str, object]) -> None:
    """GEPA's `max_metric_calls=N`, refused naming our equivalent, `budget=`."""
    if "max_metric_calls" in options:
        calls = options["max_metric_calls"]
        raise TypeError(
            f"SkillOptimizer() does not take max_metric_calls={calls!r} (GEPA's name); its "
            f"equivalent is budget=Budget(max_calls={calls!r}) (from skillopt_dsl.lm import "
            "Budget), which caps every model call, the program's and reflection's alike"
        )


def _refuse_auto(auto: str | None) -> None:
    if auto is not None:
        raise UserInputError(
            f"auto={auto!r} is how MIPROv2 and GEPA size their search; SkillOptimizer's search "
            "is sized by budget=Budget(max_calls=N) (and the optimizer's epochs): drop auto= "
            "and pass budget="
        )


def _ours(given: SkillOptimizerSettings) -> tuple[int, str | Path | None, ModelSpec]:
    """`threads`, `run_dir` and `optimizer_lm`, each given under our name or DSPy's."""
    threads = _alias("threads", given.threads, "num_threads", given.num_threads,
                     default=DEFAULT_THREADS)  # fmt: skip
    run_dir = _alias("run_dir", given.run_dir, "log_dir", given.log_dir, default=None)
    reflector = _alias("optimizer_lm", given.optimizer_lm, "reflection_lm", given.reflection_lm,
                       default=None)  # fmt: skip
    reflector = _alias("optimizer_lm", reflector, "prompt_model", given.prompt_model, default=None)
    return threads, run_dir, reflector


def _alias(name: str, value: Any, dspy_name: str, dspy_value: Any, *, default: Any) -> Any:
    """Our setting or DSPy's name for it; both given (and different) is refused."""
    if dspy_value is None:
        return default if value is None else value
    if value is not None and value != dspy_value:
        raise UserInputError(
            f"{name}={value!r} and {dspy_name}={dspy_value!r} name the same setting; give one"
        )
    return dspy_value


def _target_spec(lm: str | Backend | LM | None) -> str | Backend | LM | None:
    """`lm`, refusing None when DSPy was configured with another LM (it would be ignored)."""
    configured = dspy.settings.lm
    if lm is None and configured is not None:
        raise UserInputError(
            f"dspy is configured with {getattr(configured, 'model', configured)!r}, but "
            "SkillOptimizer does not read DSPy's settings: pass lm=dspy.settings.lm (that "
            "dspy.LM, with its api_base, key and settings; every call then goes through "
            "skillopt's ledger and budget). None means the embedded local/smollm2-135m, which "
            "would silently replace it"
        )
    return lm


def _summary(
    done: dict[str, PredictorResult],
    names: list[str],
    stop_reason: str,
    spent: Sequence[UsageSnapshot],
    run_dir: Path | None,
    warnings: tuple[str, ...] = (),
    unreached: tuple[str, ...] = (),
) -> SkillOptimizerResult:
    """The result: the runs' usage plus `spent` (the reach probe, a run the budget cut)."""
    results = [p.result for p in done.values()]
    return SkillOptimizerResult(
        predictors=MappingProxyType(dict(done)),
        untrained=tuple(n for n in names if n not in done and n not in unreached),
        unreached=unreached,
        stop_reason=stop_reason,
        usage=UsageSnapshot.total([*(r.usage for r in results), *spent]),
        run_dir=run_dir,
        seed_val_score=results[0].seed_val_score if results else None,
        val_score=results[-1].val_score if results else None,
        warnings=warnings,
    )
