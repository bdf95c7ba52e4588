"""A DSPy program as `SkillModule`s: one module per predictor, the whole program per example.

`DSPyProgram` holds a private working copy of the user's program, the current instructions of
every predictor, the metric, an optional adapter and the caller's `contextvars` context.
`DSPyProgram.module(name)` is a `PredictorModule`: its skill is that predictor's instructions,
while every other predictor keeps its current instructions. To every optimizer, the gate, the
budget and the run directory it is just another module, through the two seam methods:

- `run(skill, example, lm, seed=)` runs the **whole program** on the example with the
  predictor's instructions set to the skill, every model call going through `lm` (our cache,
  ledger and hard budget) via the bridge. It runs inside a copy of the caller's context with
  `dspy.context(lm=<bridge>, trace=[], ...)`, so the evaluation's worker threads see the caller's
  DSPy settings (a plain thread pool does not carry them) and nothing global is configured.
- `score(example, outcome)` calls the DSPy metric (either form) on the program's prediction.

Failure rules: a budget stop anywhere in the program (even one DSPy code caught) raises our
`BudgetExceeded`, never a 0 score; a model call that failed after our retries raises
`ModelError` (a failed rollout, scored 0 by evaluate); an `AdapterParseError` is a rollout
scored `failure_score` with feedback naming the predictor whose call raised it and the expected
format (a field a `RawSkillAdapter` could not parse: the metric scores the None field); any
other exception after a model call is model-caused (a reply the program choked on): scored
`failure_score`, its traceback in the feedback; one before any model call, or on every row the
program ran, is a `DSPyProgramError` naming the example and the cause.

Instructions are normalised with `inspect.cleandoc` (what DSPy's getter applies), so the text a
predictor runs with, its hash and an exported `best_skill.md` agree.
"""

from __future__ import annotations

import contextvars
import inspect
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import dspy
import pydantic
from dspy.utils.exceptions import AdapterParseError

from skillopt_dsl.dspy.adapter import signature_fields, signature_module
from skillopt_dsl.dspy.bridge import RunRecord, bridge_lm
from skillopt_dsl.dspy.calls import (
    ORIGIN,
    CallWatch,
    ProgramTrace,
    copy_program,
    failure_note,
    origin,
    outputs_of,
)
from skillopt_dsl.dspy.demos import split_demos, with_demos
from skillopt_dsl.dspy.hooks import ProposerHooks
from skillopt_dsl.dspy.metrics import dspy_score, metric_form
from skillopt_dsl.dspy.proposals import adapter_format, adapter_style, format_rule_for
from skillopt_dsl.dspy.route import ROUTE_KEY, Route, charged, refuse_unroutable
from skillopt_dsl.errors import SkillOptError, UserInputError
from skillopt_dsl.lm import LM, UsageSnapshot
from skillopt_dsl.metrics.score import Score
from skillopt_dsl.module import FieldSpec, RunOutcome, SkillModule
from skillopt_dsl.optimizers.proposers import format_rule
from skillopt_dsl.skill import Skill
from skillopt_dsl.types import Example, Prediction

__all__ = [
    "DSPyProgram",
    "DSPyProgramError",
    "PredictorModule",
    "ProgramTrace",
    "normalize_instructions",
    "to_dspy_example",
]

_COPIES_KEPT = 4
_FAILED_ROWS_TO_STOP = 6
"""A program that raised on this many rows (or on every row it knows, if fewer) and finished
none is broken itself, not by its model's replies: the run stops."""


class DSPyProgramError(SkillOptError):
    """The DSPy program itself raised (not a model, budget or output-format failure)."""


def normalize_instructions(text: str) -> str:
    """The text DSPy's `signature.instructions` getter returns for `text` (`inspect.cleandoc`)."""
    return inspect.cleandoc(text)


def to_dspy_example(example: Example) -> dspy.Example:
    """Our `Example` as the `dspy.Example` a DSPy metric expects (inputs marked). Its values
    are the JSON forms our `Example` holds; `DSPyProgram.gold` gives the user's own example
    (pydantic labels as models) when the program knows it."""
    return dspy.Example(**example.inputs, **example.labels).with_inputs(*example.inputs)


class DSPyProgram:
    """A private working copy of a DSPy program and the current instructions of its predictors.

    Args:
        student: the user's program (never modified: it is deep-copied once here).
        metric: a DSPy metric, `(gold, pred, trace=None)` or GEPA's five-argument form.
        inputs: the program's input field names (the keys of `Example.inputs()`).
        adapter: a DSPy adapter for every call (None: whatever the caller's settings say).
        context: the caller's `contextvars` context (default: the current one); every run
            enters a copy of it, so worker threads see the caller's `dspy.context` settings.
        demos: each predictor's demos are part of its skill (`skillopt_dsl.dspy.demos`): its
            own demos are written into its seed skill under `## Examples`, the proposers'
            worked examples are written there as demos, and `built` turns that section's
            demos into `predictor.demos`, never into the instructions. False: demos are left
            as the student has them and worked examples stay in the instructions.

    Attributes:
        style: the output format of the adapter the program runs with (`adapter`, else the
            caller's `dspy.settings.adapter`, else DSPy's default `ChatAdapter`); the proposers'
            worked examples and format rules are written in it.
        positions: how to name an example in an error, by id (`"valset[3]"`); examples not in
            it are named by id.
        golds: the user's own examples, by id, as the metric receives them (pydantic labels
            stay models); examples not in it are rebuilt from our `Example`, a label named as
            an output field typed with a pydantic model validated back into that model.
    """

    def __init__(
        self,
        student: dspy.Module,
        metric: Callable[..., Any],
        *,
        inputs: Sequence[str],
        adapter: Any = None,
        context: contextvars.Context | None = None,
        demos: bool = False,
        failure_score: float = 0.0,
    ) -> None:
        if not isinstance(student, dspy.Module):
            raise UserInputError(f"expected a dspy.Module program, got {type(student).__name__}")
        if not callable(metric):
            raise UserInputError(f"metric must be callable, got {type(metric).__name__}")
        self._base = copy_program(student)
        self.program_name = type(student).__name__
        self.metric = metric
        self.inputs = tuple(inputs)
        self.adapter = adapter
        self.demos = demos
        self.failure_score = failure_score
        self.context = context if context is not None else contextvars.copy_context()
        chosen = adapter if adapter is not None else self.context.run(_configured_adapter)
        self.style = adapter_style(chosen)
        self.parser = chosen if chosen is not None else dspy.ChatAdapter()
        self.adapter_name = type(self.parser).__name__
        self.positions: dict[str, str] = {}
        self.golds: dict[str, dspy.Example] = {}
        predictors = dict(self._base.named_predictors())
        if not predictors:
            raise UserInputError(f"the program {self.program_name} has no predictors to train")
        self._output_types = {
            name: info.annotation
            for predictor in predictors.values()
            for name, info in predictor.signature.output_fields.items()
        }
        _refuse_own_lms(predictors)
        refuse_unroutable(self.program_name, self._base)
        refuse_unroutable("the adapter", adapter)
        refuse_unroutable("dspy.settings.adapter", self.context.run(_configured_adapter))
        self.last_lm: LM | None = None
        self.traced: set[str] = set()  # predictors with a call in a run scored a success
        self.instructions: dict[str, str] = {
            name: self._seed_skill(p) for name, p in predictors.items()
        }
        self._copies: OrderedDict[tuple[str, ...], dspy.Module] = OrderedDict()
        self._lock = threading.Lock()
        self._sent = RunRecord()
        self._reach: dict[str, set[str]] = {}
        self._finished: set[str] = set()
        self._failed: set[str] = set()

    def _seed_skill(self, predictor: Any) -> str:
        """A predictor's seed skill: its instructions (and, with demos on, its own demos)."""
        instructions = normalize_instructions(predictor.signature.instructions)
        if not self.demos:
            return instructions
        return normalize_instructions(
            with_demos(instructions, predictor.signature, list(predictor.demos or []))
        )

    def describe(self, example_id: str) -> str:
        """An example as a user can find it: its position in their list and its id."""
        where = self.positions.get(example_id)
        return f"{where} (id {example_id!r})" if where else f"example {example_id!r}"

    def gold(self, example: Example) -> dspy.Example:
        """The example as the program and its metric receive it: the user's own `dspy.Example`
        when known (labels exactly as DSPy gives them), else rebuilt from `example`."""
        own = self.golds.get(example.id)
        if own is not None:
            return own
        labels = {k: _as_model(self._output_types.get(k), v) for k, v in example.labels.items()}
        return dspy.Example(**example.inputs, **labels).with_inputs(*example.inputs)

    @property
    def predictor_names(self) -> list[str]:
        """The predictors' names, in the program's order (`named_predictors()`)."""
        return list(self.instructions)

    def signature(self, name: str) -> Any:
        """The signature of predictor `name`."""
        return dict(self._base.named_predictors())[name].signature

    def module(self, name: str) -> PredictorModule:
        """The `SkillModule` whose skill is predictor `name`'s instructions."""
        if name not in self.instructions:
            raise UserInputError(
                f"the program {self.program_name} has no predictor {name!r}; "
                f"its predictors are {self.predictor_names}"
            )
        return _predictor_module_class(self, name)(program=self, predictor=name)

    def built(self, instructions: Mapping[str, str] | None = None) -> dspy.Module:
        """A fresh deep copy of the program with `instructions` (default: the current ones);
        with demos on, each skill's demos become the predictor's `demos`."""
        chosen = {**self.instructions, **(instructions or {})}
        program = copy_program(self._base)
        for name, predictor in program.named_predictors():
            text = chosen[name]
            if self.demos:
                text, predictor.demos = split_demos(text, predictor.signature)
            predictor.signature = predictor.signature.with_instructions(text)
        return program

    def account(self, record: RunRecord) -> None:
        """Add what one run sent to the provider to the program's running total."""
        with self._lock:
            self._sent.sent_calls += record.sent_calls
            prompt, completion = self._sent.sent_tokens
            self._sent.sent_tokens = (
                prompt + record.sent_tokens[0],
                completion + record.sent_tokens[1],
            )
            self._sent.sent_cost_usd += record.sent_cost_usd

    def reached(self, example_id: str) -> frozenset[str]:
        """The predictors some run of the program called on the example (none: never run)."""
        with self._lock:
            return frozenset(self._reach.get(example_id, ()))

    def reached_on(self, example_ids: Sequence[str]) -> set[str]:
        """The predictors some run called on at least one of the examples."""
        with self._lock:
            return {name for i in example_ids for name in self._reach.get(i, ())}

    def always_reached(self, name: str) -> bool:
        """Whether every row run so far called predictor `name` (False: none was run)."""
        with self._lock:
            return bool(self._reach) and all(name in r for r in self._reach.values())

    def ran(self, example_ids: Sequence[str]) -> bool:
        """Whether any of the examples has been run."""
        with self._lock:
            return any(i in self._reach for i in example_ids)

    def note_run(self, example_id: str, watch: CallWatch, *, raised: bool) -> bool:
        """Record a run's reach and whether it finished; True when every row run so far
        raised and there were enough of them to call the program broken."""
        with self._lock:
            self._reach.setdefault(example_id, set()).update(watch.reached)
            (self._failed if raised else self._finished).add(example_id)
            known = len(self.positions)  # the rows it will run; 0: not told (evaluate alone)
            enough = min(_FAILED_ROWS_TO_STOP, known) if known else _FAILED_ROWS_TO_STOP
            return raised and not self._finished and len(self._failed) >= enough

    def sent(self) -> UsageSnapshot:
        """What every run of this program has sent to the provider so far (target calls)."""
        with self._lock:
            prompt, completion = self._sent.sent_tokens
            return UsageSnapshot(
                calls=self._sent.sent_calls,
                prompt_tokens=prompt,
                completion_tokens=completion,
                priced_cost_usd=self._sent.sent_cost_usd,
            )

    def shared_copy(self, instructions: Mapping[str, str]) -> dspy.Module:
        """A copy with `instructions`, shared by the runs that use the same instructions."""
        key = tuple(instructions[name] for name in self.instructions)
        with self._lock:
            program = self._copies.get(key)
            if program is None:
                program = self.built(instructions)
                for name, predictor in program.named_predictors():
                    setattr(predictor, ORIGIN, name)
                self._copies[key] = program
                while len(self._copies) > _COPIES_KEPT:
                    self._copies.popitem(last=False)
            else:
                self._copies.move_to_end(key)
            return program


def _configured_adapter() -> Any:
    return dspy.settings.adapter


def _refuse_own_lms(predictors: Mapping[str, Any]) -> None:
    """A predictor with its own LM would bypass the bridge (cache, ledger, budget): refuse it."""
    own = [name for name, predictor in predictors.items() if getattr(predictor, "lm", None)]
    if own:
        raise UserInputError(
            f"predictors {own} have their own LM (predictor.lm), which would bypass the budget "
            "and the ledger; set predictor.lm = None and pass the model as lm= instead"
        )


def _predictor_module_class(program: DSPyProgram, name: str) -> type[PredictorModule]:
    """A `PredictorModule` subclass declaring the program's inputs and the predictor's outputs."""
    signature = program.signature(name)
    namespace: dict[str, Any] = {"__annotations__": {}}
    for field_name in program.inputs:
        namespace["__annotations__"][field_name] = Any
        namespace[field_name] = FieldSpec(role="input")
    for field_name, (annotation, desc) in signature_fields(signature.output_fields).items():
        namespace["__annotations__"][field_name] = annotation
        namespace[field_name] = FieldSpec(role="output", desc=desc)
    rule = format_rule_for(signature, program.style)
    fixed = (
        f" The output format is set by the program's DSPy adapter, not by the document: {rule}"
        " Do not ask for another format."
        if rule and program.style != "raw"
        else ""
    )
    namespace["__doc__"] = (
        f"Predictor `{name}` ({signature.signature}) of the DSPy program {program.program_name}; "
        f"its instructions are the skill, the whole program runs on every example.{fixed}"
    )
    safe_name = re.sub(r"\W", "_", name)
    class_name = f"{program.program_name}_{safe_name}"
    return type(class_name, (PredictorModule,), namespace)


class PredictorModule(ProposerHooks, SkillModule):
    """One predictor of a `DSPyProgram` as a `SkillModule` (see the module docstring).

    Build it with `DSPyProgram.module(name)`, which declares its fields.
    """

    if TYPE_CHECKING:  # the hooks read it as `ProgramFacts`; the module runs all of it
        program: DSPyProgram

    def __init__(self, *, program: DSPyProgram, predictor: str) -> None:
        self.program = program
        self.predictor = predictor
        seed = Skill(program.instructions[predictor])
        super().__init__(skill=seed, metric=self._metric_on_prediction)

    # -- the seam ------------------------------------------------------------------------------
    def run(self, skill: Skill, example: Example, lm: LM, *, seed: int) -> RunOutcome:
        """Run the whole program on `example` with this predictor's instructions = `skill`."""
        instructions = {
            **self.program.instructions,
            self.predictor: normalize_instructions(skill.text),
        }
        program = self.program.shared_copy(instructions)
        gold = self.program.gold(example)
        record, trace, watch = RunRecord(), list[Any](), CallWatch()
        started = time.perf_counter()
        try:
            prediction = self.program.context.copy().run(
                self._call, program, gold, lm, seed, (record, trace, watch)
            )
            failure: tuple[str, str | None] | None = None
        except Exception as exc:
            record.raise_recorded_failure()
            prediction, failure = None, self._failure(exc, example, record, watch)
        finally:
            self.program.account(record)
        record.raise_recorded_failure()
        if failure is None:
            self.program.note_run(example.id, watch, raised=False)
        return self._outcome(gold, prediction, (trace, watch, lm), record, failure, started)

    def score(self, example: Example, outcome: RunOutcome) -> Score:
        """The DSPy metric on the program's prediction; 0 with format feedback for a parse
        failure. Outcomes without a program trace (a constant baseline) are scored too."""
        run = outcome.trace if isinstance(outcome.trace, ProgramTrace) else None
        if run is not None and run.failure is not None:
            return Score(self.program.failure_score, run.failure)
        gold = run.gold if run is not None else self.program.gold(example)
        pred = run.prediction if run is not None else dspy.Prediction(**outcome.prediction.outputs)
        feedback_form = metric_form(self.program.metric) == "feedback"
        lm = run.lm if run is not None else self.program.last_lm
        context = self.program.context.copy()
        with_trace = run is not None and feedback_form
        score, judge = context.run(
            _judged,
            lm,
            lambda: dspy_score(
                self.program.metric,
                gold,
                pred,
                trace=list(run.trace) if run is not None and with_trace else None,
                pred_name=self.predictor,
                pred_trace=list(run.pred_trace) if run is not None else None,
                example_id=example.id,
                where=self.program.describe(example.id),
            ),
        )
        self.program.account(judge)
        judge.raise_recorded_failure()  # a judge's budget stop the metric swallowed
        if run is not None and score.value >= 1.0 and run.failure is None and not run.unparsed:
            self.program.traced.update(n for n in map(origin, (s[0] for s in run.trace)) if n)
        note = outcome.prediction.error
        if note is None:
            return score
        return Score(score.value, note if not score.feedback else f"{score.feedback}\n{note}")

    # -- running ---------------------------------------------------------------------------------
    def _call(
        self,
        program: dspy.Module,
        gold: dspy.Example,
        lm: LM,
        seed: int,
        run: tuple[RunRecord, list[Any], CallWatch],
    ) -> Any:
        record, trace, watch = run
        self.program.last_lm = lm
        settings: dict[str, Any] = {
            "lm": bridge_lm(lm, seed=seed, record=record),
            ROUTE_KEY: Route(lm, seed, record),
            "trace": trace,
            "disable_history": True,
            "callbacks": [*(dspy.settings.get("callbacks") or []), watch],
        }
        if self.program.adapter is not None:
            settings["adapter"] = self.program.adapter
        with dspy.context(**settings):
            return program(**gold.inputs())

    def _failure(
        self, exc: Exception, example: Example, record: RunRecord, watch: CallWatch
    ) -> tuple[str, str | None]:
        """Why a run that raised scores `failure_score`, and the predictor whose output could
        not be parsed (None: a model-caused failure elsewhere in the program); a failure of
        the program itself (before any model call, or on every row) is raised."""
        for link in _chain(exc):
            if isinstance(link, SkillOptError):
                raise link from None
        parse = next((e for e in _chain(exc) if isinstance(e, AdapterParseError)), None)
        if parse is not None:
            self.program.note_run(example.id, watch, raised=False)  # the model broke the format
            return self._parse_failure(parse, watch)
        name, where = self.program.program_name, self.program.describe(example.id)
        cause = f"{type(exc).__name__}: {exc}"
        if record.calls == 0:
            raise DSPyProgramError(
                f"the DSPy program {name} raised {cause} on {where} before any model call: the "
                "program itself failed, not its model's reply; fix the program"
            ) from exc
        if self.program.note_run(example.id, watch, raised=True):
            raise DSPyProgramError(
                f"the DSPy program {name} raised {cause} on {where} after {record.calls} model "
                "call(s), and it raised on every row it ran, finishing none: the program itself "
                "fails, whatever its model replies; fix the program (a failure on some rows "
                "only is scored failure_score)"
            ) from exc
        return failure_note(exc, record.calls, self.program.failure_score), None

    def _parse_failure(self, parse: AdapterParseError, watch: CallWatch) -> tuple[str, str]:
        """Feedback for an output DSPy could not parse, and the predictor whose call raised it
        (by the call, not by field names), naming the adapter the program runs with."""
        where = (
            watch.unparsed[0] if watch.unparsed else _predictor_of(self.program, parse.signature)
        )
        reason = str(parse.message or "").strip().splitlines() or ["no detail"]
        used = self.program.adapter_name
        fallback = (
            f", then DSPy's {parse.adapter_name} fallback" if parse.adapter_name != used else ""
        )
        signature = (
            self.program.signature(where) if where in self.program.instructions else parse.signature
        )
        feedback = (
            f"could not parse the output of predictor {where!r} ({used}{fallback}): "
            f"{reason[0]}. Expected format: {adapter_format(signature, self.program.style)}"
        )
        return feedback, where

    def _outcome(
        self,
        gold: dspy.Example,
        prediction: Any,
        calls: tuple[list[Any], CallWatch, LM],
        record: RunRecord,
        failure: tuple[str, str | None] | None,
        started: float,
    ) -> RunOutcome:
        outputs = outputs_of(prediction) if failure is None else dict.fromkeys(self.output_fields)
        errors = [self._raw_parse_error(sig, err) for sig, err in record.parse_errors]
        error = failure[0] if failure else ("; ".join(errors) if errors else None)
        trace, watch, lm = calls
        unparsed = [self._predictor_named(sig) for sig, _ in record.parse_errors]
        if failure is not None and failure[1] is not None:
            unparsed.append(failure[1])
        return RunOutcome(
            prediction=Prediction(outputs, raw=record.last_text, error=error),
            output=record.last_text,
            prompt_tokens=record.prompt_tokens,
            completion_tokens=record.completion_tokens,
            latency_s=time.perf_counter() - started,
            cached=record.all_cached,
            calls=record.calls,
            trace=ProgramTrace(
                gold=gold,
                prediction=prediction,
                trace=tuple(trace),
                pred_trace=tuple(step for step in trace if origin(step[0]) == self.predictor),
                failure=failure[0] if failure else None,
                unparsed=tuple(dict.fromkeys(unparsed)),
                reached=tuple(watch.reached),
                predictor=self.predictor,
                lm=lm,
            ),
        )

    def _raw_parse_error(self, signature_text: str, error: str) -> str:
        """A `RawSkillAdapter` parse failure, naming the predictor and the format it needed."""
        name = self._predictor_named(signature_text)
        rule = (
            format_rule(signature_module(self.program.signature(name)))
            if name in self.program.instructions
            else ""
        )
        return (
            f"predictor {name!r} {error}. Expected format: {rule or 'its declared output fields'}"
        )

    def _predictor_named(self, signature_text: str) -> str:
        """The predictor named `signature_text`, else the one whose signature reads it (else
        the text itself)."""
        if signature_text in self.program.instructions:
            return signature_text
        return next(
            (
                n
                for n in self.program.predictor_names
                if self.program.signature(n).signature == signature_text
            ),
            signature_text,
        )

    def _metric_on_prediction(self, example: Example, prediction: Prediction) -> Score:
        """The metric on a bare prediction (no program run), for `metric_fn` callers."""
        return self.score(
            example, RunOutcome(prediction=prediction, output=prediction.raw, calls=0)
        )


def _judged(lm: LM | None, metric: Callable[[], Score]) -> tuple[Score, RunRecord]:
    """The metric, under the caller's DSPy settings (a judge set with `dspy.context(lm=...)`
    is seen), each judge call charged to `lm`; and what the judge calls did."""
    with charged(lm) as record:
        return metric(), record


def _as_model(annotation: Any, value: Any) -> Any:
    """`value` as the pydantic model `annotation` names, when it is one and `value` its JSON
    object; else `value` unchanged."""
    model = isinstance(annotation, type) and issubclass(annotation, pydantic.BaseModel)
    return annotation.model_validate(value) if model and isinstance(value, Mapping) else value


def _chain(exc: BaseException) -> list[BaseException]:
    """`exc` and its causes / contexts, outermost first (cycles cut)."""
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and all(current is not s for s in seen):
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def _predictor_of(program: DSPyProgram, signature: Any) -> str:
    """The predictor whose output fields match `signature`'s (else the signature's text)."""
    wanted = list(getattr(signature, "output_fields", {}) or {})
    for name in program.predictor_names:
        if list(program.signature(name).output_fields) == wanted:
            return name
    return str(getattr(signature, "signature", signature))
