"""`SkillOptimizer`: our optimizers and gate on an existing DSPy program (a DSPy teleprompter).

Swap one line of a DSPy script::

    optimizer = SkillOptimizer(metric, optimizer=GradientText(), budget=Budget(max_calls=600))
    compiled = optimizer.compile(program, trainset=trainset, valset=valset)

Each selected predictor's instructions are trained as a skill, one predictor after the other, by
`skillopt_dsl.compile` on a `PredictorModule`; the other predictors keep their incumbent
instructions. The gate judges the **whole program's** metric on `valset`, and each predictor
starts from the program the previous one left, so the program's validation score never drops.
One budget spans every predictor (each run gets what the earlier ones left). The student is
never modified: the result is a deep copy with the best instructions, `_compiled = True`, and a
`SkillOptimizerResult` on `.skillopt` (the per-predictor `CompileResult`s). With `run_dir`, each
predictor's run lives in `run_dir/<predictor>/` (its `best_skill.md` holds exactly the
instructions the program runs with) and the program is saved to `run_dir/program.json`;
`resume=True` continues every predictor's run as `compile` does.
"""

from __future__ import annotations

import contextvars
import inspect
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal, cast

import dspy
from dspy.teleprompt import Teleprompter

from skillopt_dsl.compile import CompileResult
from skillopt_dsl.compile import compile as compile_module
from skillopt_dsl.data import as_examples
from skillopt_dsl.dspy.program import DSPyProgram, normalize_instructions
from skillopt_dsl.errors import BudgetExceeded, DataError, UserInputError
from skillopt_dsl.evaluate import EvaluationReport, evaluate
from skillopt_dsl.evidence import SignificanceBudget, preflight
from skillopt_dsl.export import export_skill
from skillopt_dsl.gate import Gate
from skillopt_dsl.lm import LM, Backend, Budget, UsageSnapshot
from skillopt_dsl.optimizers.base import Optimizer
from skillopt_dsl.skill import Skill
from skillopt_dsl.types import Example

__all__ = ["PredictorResult", "SkillOptimizer", "SkillOptimizerResult", "evaluate_program"]

logger = logging.getLogger(__name__)

ModelSpec = str | Backend | LM | None


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
        stop_reason: "finished", or "budget" when the budget stopped the search.
        usage: calls, tokens and dollars summed over every predictor's run (a run the
            budget stopped while it scored its seed program included).
        run_dir: the run directory, when one was given.
    """

    predictors: Mapping[str, PredictorResult]
    untrained: tuple[str, ...]
    stop_reason: str
    usage: UsageSnapshot
    run_dir: Path | None = None
    seed_val_score: float | None = None
    val_score: float | None = None

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
        optimizer: a skillopt `Optimizer` (default `GradientText()`), used for every predictor.
        gate: default `Gate()`.
        budget: hard limits on calls, tokens and dollars, spanning every predictor.
        lm: the program's model: a litellm string, a skillopt `LM` or `Backend`; None = the
            embedded model (refused when `dspy.configure` set another LM: name it here).
        optimizer_lm: the reflection model; None = the same as `lm`.
        predictors: "all", or the names (from `program.named_predictors()`) to train, in order.
        adapter: a DSPy adapter for every call (e.g. `RawSkillAdapter()` for small models);
            None = the caller's DSPy settings (ChatAdapter by default).
        run_dir: where the runs are recorded (one folder per predictor); required for resume.
        resume: continue the runs in `run_dir`.
        seed: the one seed for every random choice and the rollout seed.
        threads: parallel program runs during evaluation.
        max_errors: per-evaluation limit of failed calls before a run stops.
    """

    def __init__(
        self,
        metric: Callable[..., Any],
        *,
        optimizer: Optimizer | None = None,
        gate: Gate | None = None,
        budget: Budget | None = None,
        lm: ModelSpec = None,
        optimizer_lm: ModelSpec = None,
        predictors: Literal["all"] | Sequence[str] = "all",
        adapter: Any = None,
        run_dir: str | Path | None = None,
        resume: bool = False,
        seed: int = 0,
        threads: int = 4,
        max_errors: int | None = None,
    ) -> None:
        super().__init__()
        if not callable(metric):
            raise UserInputError(f"metric must be callable, got {type(metric).__name__}")
        for name, spec in (("lm", lm), ("optimizer_lm", optimizer_lm)):
            _refuse_dspy_lm(name, spec)
        if resume and run_dir is None:
            raise UserInputError("resume=True needs the run_dir of the run to continue")
        self.metric = metric
        self.optimizer = optimizer
        self.gate = gate
        self.budget = budget
        self.lm = lm
        self.optimizer_lm = optimizer_lm
        self.predictors = predictors
        self.adapter = adapter
        self.run_dir = Path(run_dir) if run_dir is not None else None
        self.resume = resume
        self.seed = seed
        self.threads = threads
        self.max_errors = max_errors

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
        its `forward` signature, are the inputs; an `id` key is the id); `valset` is required
        (the gate's data). An error about an example names its position (`valset[3]`)."""
        if teacher is not None or kwargs:
            extra = ["teacher"] * (teacher is not None) + sorted(kwargs)
            raise UserInputError(f"SkillOptimizer.compile does not take {extra}")
        if not valset:
            raise UserInputError(
                "SkillOptimizer.compile needs valset=: the gate accepts a change only when it "
                "improves the program's metric on held-out examples; pass examples disjoint "
                "from trainset (e.g. valset=devset[:50])"
            )
        accepted = program_inputs(student)
        train = _examples(trainset, accepted, where="trainset")
        val = _examples(valset, accepted, where="valset")
        positions = _positions(train, "trainset") | _positions(val, "valset")
        program = DSPyProgram(
            student,
            self.metric,
            inputs=_input_names([*train, *val], positions, accepted),
            adapter=self.adapter,
            context=contextvars.copy_context(),
        )
        program.positions.update(positions)
        outcome = self._train(program, self._selected(program), train, val)
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
    ) -> SkillOptimizerResult:
        target = _target_spec(self.lm)
        reflector = self.optimizer_lm if self.optimizer_lm is not None else target
        done: dict[str, PredictorResult] = {}
        stop_reason, aborted = "finished", UsageSnapshot()
        significance = self._significance(names, train, val)
        for name in names:
            before = program.sent()
            try:
                result = compile_module(
                    program.module(name),
                    train,
                    val,
                    optimizer=self.optimizer,
                    lm=target,
                    optimizer_lm=reflector,
                    gate=self.gate,
                    significance=significance,
                    budget=_remaining(self.budget, [p.result.usage for p in done.values()]),
                    run_dir=self.run_dir / name if self.run_dir is not None else None,
                    resume=self.resume,
                    seed=self.seed,
                    threads=self.threads,
                    max_errors=self.max_errors,
                )
            except BudgetExceeded as exc:
                # The budget ran out while the seed program was scored (the only place compile
                # lets it escape): only target calls were made, all counted by the bridge.
                logger.info("budget spent before predictor %r could be scored: %s", name, exc)
                stop_reason, aborted = "budget", _minus(program.sent(), before)
                break
            done[name] = self._adopt(program, name, result)
            if result.stop_reason == "budget":
                stop_reason = "budget"
                break
        return _summary(done, names, stop_reason, aborted, self.run_dir)

    def _significance(
        self, names: list[str], train: list[Example], val: list[Example]
    ) -> SignificanceBudget:
        """One significance budget for the whole program, planned over every predictor's
        decisions, so all of them together accept a useless edit with probability at most the
        gate's alpha; says before spending what the gate can certify on this valset."""
        gate = self.gate if self.gate is not None else Gate()
        budget = gate.significance_budget()
        from skillopt_dsl.optimizers.gradient_text import GradientText

        optimizer = self.optimizer if self.optimizer is not None else GradientText()
        per_predictor = optimizer.planned_decisions(len(train))
        budget.plan(None if per_predictor is None else per_predictor * len(names))
        check = preflight(gate, len(val), budget.planned)
        check.log(logger, f"program of {len(names)} predictor(s)")
        return budget

    def _adopt(self, program: DSPyProgram, name: str, result: CompileResult) -> PredictorResult:
        """Make the run's best skill the predictor's incumbent, normalised as DSPy stores it."""
        instructions = normalize_instructions(result.best_skill.text)
        program.instructions[name] = instructions
        if result.run_dir is not None and instructions != result.best_skill.text:
            export_skill(Skill(instructions), result.run_dir / "best_skill.md", result.metadata)
        logger.info(
            "predictor %r: val %.4f (seed %.4f), %d calls",
            name,
            result.val_score,
            result.seed_val_score,
            result.usage.calls,
        )
        return PredictorResult(name=name, instructions=instructions, result=result)

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
    threads: int = 4,
    seed: int = 0,
    max_errors: int | None = None,
) -> EvaluationReport:
    """Score a DSPy program (any: compiled by us, by GEPA or MIPROv2) with our evaluation.

    Every call goes through `lm` (cache, ledger, budget); a failed call scores 0, a budget stop
    raises `BudgetExceeded`, a broken metric raises `MetricError` (unlike `dspy.Evaluate`, which
    swallows every exception). The report's `mean` is in [0, 1].
    """
    accepted = program_inputs(program)
    rows = _examples(examples, accepted, where="examples")
    if not rows:
        raise UserInputError("evaluate_program needs at least one example")
    positions = _positions(rows, "examples")
    target = DSPyProgram(
        program,
        metric,
        inputs=_input_names(rows, positions, accepted),
        adapter=adapter,
        context=None,
    )
    target.positions.update(positions)
    module = target.module(target.predictor_names[0])
    return evaluate(
        module,
        rows,
        lm=_target_spec(lm),
        threads=threads,
        seed=seed,
        max_errors=max_errors,
        progress=False,
    )


def _refuse_dspy_lm(name: str, spec: Any) -> None:
    if isinstance(spec, dspy.BaseLM):
        raise UserInputError(
            f"{name}= takes a litellm model string (e.g. 'openai/gpt-4o-mini'), a skillopt LM or "
            "a Backend, not a dspy.LM: every call must go through skillopt's ledger and budget"
        )


def _target_spec(lm: ModelSpec) -> ModelSpec:
    """`lm`, refusing None when DSPy was configured with another LM (it would be ignored)."""
    configured = dspy.settings.lm
    if lm is None and configured is not None:
        raise UserInputError(
            f"dspy is configured with {getattr(configured, 'model', configured)!r}, but every "
            "call must go through skillopt's LM: pass lm='<that model string>' (None means the "
            "embedded local/smollm2-135m, which would silently replace it)"
        )
    return lm


@dataclass(frozen=True)
class ProgramInputs:
    """What a DSPy program's `forward` takes: every name it accepts, and those it requires."""

    accepted: tuple[str, ...]
    required: tuple[str, ...]

    @property
    def input_fields(self) -> tuple[str, ...]:
        """The accepted names (what `as_examples` takes as a dict row's inputs)."""
        return self.accepted


def program_inputs(program: dspy.Module) -> ProgramInputs | None:
    """The inputs `program` takes, from its `forward` signature; for a `forward(**kwargs)`
    module (`Predict`, `ReAct`) from its signature's input fields (`ChainOfThought`: its one
    predictor's). None when they cannot be known (a custom `forward(**kwargs)`)."""
    try:  # the class's function: DSPy warns when `module.forward` is read on an instance
        params = list(inspect.signature(type(program).forward).parameters.values())[1:]
    except (AttributeError, TypeError, ValueError):
        return None
    named = [
        p
        for p in params
        if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    ]
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        predictors = [p for _, p in program.named_predictors()]
        signature = getattr(program, "signature", None)
        if signature is None and len(predictors) == 1:  # ChainOfThought: its one predictor
            signature = predictors[0].signature
        fields_ = getattr(signature, "input_fields", None)
        if named or not fields_:
            return None
        return ProgramInputs(tuple(fields_), tuple(fields_))
    required = tuple(p.name for p in named if p.default is inspect.Parameter.empty)
    return ProgramInputs(tuple(p.name for p in named), required)


def _examples(items: Any, accepted: ProgramInputs | None, *, where: str) -> list[Example]:
    """The user's rows as `Example`s; dict rows take the program's inputs as their inputs."""
    return as_examples(items, module=cast(Any, accepted), where=where)


def _positions(examples: Sequence[Example], where: str) -> dict[str, str]:
    return {e.id: f"{where}[{i}]" for i, e in enumerate(examples)}


def _input_names(
    examples: Sequence[Example], positions: Mapping[str, str], accepted: ProgramInputs | None
) -> tuple[str, ...]:
    """The program's input fields: the same keys on every example, and keys the program takes
    (every required one present, none it does not accept)."""

    def named(example: Example) -> str:
        return f"{positions.get(example.id, 'example')} (id {example.id!r})"

    first = tuple(examples[0].inputs)
    for example in examples:
        if set(example.inputs) != set(first):
            raise DataError(
                f"{named(example)} has inputs {sorted(example.inputs)}, but "
                f"{named(examples[0])} has {sorted(first)}; give every example the same "
                ".with_inputs(...) keys"
            )
    if accepted is not None:
        missing = [k for k in accepted.required if k not in first]
        unknown = [k for k in first if k not in accepted.accepted]
        if missing or unknown:
            raise DataError(
                f"{named(examples[0])} has inputs {sorted(first)}, but the program takes "
                f"{list(accepted.accepted)} (missing {missing}, not taken {unknown}); mark the "
                "program's inputs with .with_inputs(...)"
            )
    return first


def _remaining(budget: Budget | None, spent: Sequence[UsageSnapshot]) -> Budget | None:
    """What the earlier predictors' runs left of `budget`."""
    if budget is None:
        return None
    calls = sum(u.calls for u in spent)
    tokens = sum(u.total_tokens for u in spent)
    usd = sum(u.cost_usd or 0.0 for u in spent)
    return Budget(
        max_calls=None if budget.max_calls is None else max(0, budget.max_calls - calls),
        max_tokens=None if budget.max_tokens is None else max(0, budget.max_tokens - tokens),
        max_usd=None if budget.max_usd is None else max(0.0, budget.max_usd - usd),
    )


def _total(usages: Sequence[UsageSnapshot]) -> UsageSnapshot:
    """The sum of several runs' usage (every counter, and the error types merged)."""
    errors: dict[str, int] = {}
    for usage in usages:
        for kind, count in usage.error_types.items():
            errors[kind] = errors.get(kind, 0) + count
    counters = {
        f.name: sum(getattr(u, f.name) for u in usages)
        for f in fields(UsageSnapshot)
        if f.name != "error_types"
    }
    return UsageSnapshot(**counters, error_types=MappingProxyType(errors))


def _minus(after: UsageSnapshot, before: UsageSnapshot) -> UsageSnapshot:
    """The counters of `after` less those of `before` (error types: `after`'s)."""
    counters = {
        f.name: getattr(after, f.name) - getattr(before, f.name)
        for f in fields(UsageSnapshot)
        if f.name != "error_types"
    }
    return UsageSnapshot(**counters)


def _summary(
    done: dict[str, PredictorResult],
    names: list[str],
    stop_reason: str,
    aborted: UsageSnapshot,
    run_dir: Path | None,
) -> SkillOptimizerResult:
    results = [p.result for p in done.values()]
    return SkillOptimizerResult(
        predictors=MappingProxyType(dict(done)),
        untrained=tuple(n for n in names if n not in done),
        stop_reason=stop_reason,
        usage=_total([*(r.usage for r in results), aborted]),
        run_dir=run_dir,
        seed_val_score=results[0].seed_val_score if results else None,
        val_score=results[-1].val_score if results else None,
    )
