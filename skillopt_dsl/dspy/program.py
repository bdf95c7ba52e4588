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
`ModelError` (a failed rollout, scored 0 by evaluate); an `AdapterParseError` (or a field a
`RawSkillAdapter` could not parse) is a rollout scored 0 with feedback naming the expected
format; any other exception from the program is a `DSPyProgramError` naming the example.

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
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import dspy
import pydantic
from dspy.utils.exceptions import AdapterParseError

from skillopt_dsl.dspy.adapter import signature_fields, signature_module
from skillopt_dsl.dspy.bridge import RunRecord, bridge_lm
from skillopt_dsl.dspy.demos import render_demo, split_demos, with_demos
from skillopt_dsl.dspy.metrics import dspy_score, metric_form
from skillopt_dsl.dspy.proposals import (
    adapter_format,
    adapter_style,
    format_rule_for,
    reflection_case,
    worked_example,
    worked_values,
)
from skillopt_dsl.errors import SkillOptError, UserInputError
from skillopt_dsl.lm import LM, UsageSnapshot
from skillopt_dsl.metrics.score import Score
from skillopt_dsl.module import FieldSpec, RunOutcome, SkillModule
from skillopt_dsl.optimizers.proposers import format_rule, mentions_format
from skillopt_dsl.skill import Skill
from skillopt_dsl.types import Example, Prediction

if TYPE_CHECKING:
    from skillopt_dsl.evaluate import Rollout

__all__ = [
    "DSPyProgram",
    "DSPyProgramError",
    "PredictorModule",
    "ProgramTrace",
    "normalize_instructions",
    "to_dspy_example",
]

_COPIES_KEPT = 4
_ORIGIN = "_skillopt_predictor"
"""The attribute naming the program predictor a run copy's predictor stands for. Deep copies
keep it, so calls of the copies that `dspy.BestOfN`, `dspy.Refine` or `dspy.Parallel` make are
attributed to the predictor they were copied from."""


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


@dataclass(frozen=True)
class ProgramTrace:
    """What one program run left for scoring and reflection (kept on `Rollout.trace`).

    Attributes:
        gold: the example as a `dspy.Example`.
        prediction: what the program returned (None when it could not finish).
        trace: DSPy's trace: `(predictor, inputs, prediction)` for every predictor call.
        pred_trace: the entries of `trace` made by the predictor being trained, or by a copy
            of it (`dspy.BestOfN`, `dspy.Refine`, `dspy.Parallel` run deep copies).
        failure: why the rollout scores 0 without calling the metric (an unparseable output,
            naming the expected format); None when the program finished.
        unparsed: the predictors whose output could not be parsed in this run.
    """

    gold: dspy.Example
    prediction: Any
    trace: tuple[Any, ...]
    pred_trace: tuple[Any, ...]
    failure: str | None = None
    unparsed: tuple[str, ...] = ()


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
    ) -> None:
        if not isinstance(student, dspy.Module):
            raise UserInputError(f"expected a dspy.Module program, got {type(student).__name__}")
        if not callable(metric):
            raise UserInputError(f"metric must be callable, got {type(metric).__name__}")
        self._base = student.deepcopy()
        self.program_name = type(student).__name__
        self.metric = metric
        self.inputs = tuple(inputs)
        self.adapter = adapter
        self.demos = demos
        self.context = context if context is not None else contextvars.copy_context()
        chosen = adapter if adapter is not None else self.context.run(_configured_adapter)
        self.style = adapter_style(chosen)
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
        self.instructions: dict[str, str] = {
            name: self._seed_skill(p) for name, p in predictors.items()
        }
        self._copies: OrderedDict[tuple[str, ...], dspy.Module] = OrderedDict()
        self._lock = threading.Lock()
        self._sent = RunRecord()

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
        program = self._base.deepcopy()
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
                    setattr(predictor, _ORIGIN, name)
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


class PredictorModule(SkillModule):
    """One predictor of a `DSPyProgram` as a `SkillModule` (see the module docstring).

    Build it with `DSPyProgram.module(name)`, which declares its fields.
    """

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
        record, trace = RunRecord(), list[Any]()
        started = time.perf_counter()
        try:
            prediction = self.program.context.copy().run(
                self._call, program, gold, lm, seed, record, trace
            )
            failure: tuple[str, str] | None = None
        except Exception as exc:
            record.raise_recorded_failure()
            prediction, failure = None, self._output_failure(exc, example)
        finally:
            self.program.account(record)
        record.raise_recorded_failure()
        return self._outcome(gold, prediction, trace, record, failure, started)

    def score(self, example: Example, outcome: RunOutcome) -> Score:
        """The DSPy metric on the program's prediction; 0 with format feedback for a parse
        failure. Outcomes without a program trace (a constant baseline) are scored too."""
        run = outcome.trace if isinstance(outcome.trace, ProgramTrace) else None
        if run is not None and run.failure is not None:
            return Score(0.0, run.failure)
        gold = run.gold if run is not None else self.program.gold(example)
        pred = run.prediction if run is not None else dspy.Prediction(**outcome.prediction.outputs)
        feedback_form = metric_form(self.program.metric) == "feedback"
        score = dspy_score(
            self.program.metric,
            gold,
            pred,
            trace=list(run.trace) if run is not None and feedback_form else None,
            pred_name=self.predictor,
            pred_trace=list(run.pred_trace) if run is not None else None,
            example_id=example.id,
            where=self.program.describe(example.id),
        )
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
        record: RunRecord,
        trace: list[Any],
    ) -> Any:
        settings: dict[str, Any] = {
            "lm": bridge_lm(lm, seed=seed, record=record),
            "trace": trace,
            "disable_history": True,
        }
        if self.program.adapter is not None:
            settings["adapter"] = self.program.adapter
        with dspy.context(**settings):
            return program(**gold.inputs())

    def _output_failure(self, exc: Exception, example: Example) -> tuple[str, str]:
        """Feedback for an output DSPy could not parse, and the predictor whose output it was;
        any other failure is raised."""
        for link in _chain(exc):
            if isinstance(link, SkillOptError):
                raise link from None
        parse = next((e for e in _chain(exc) if isinstance(e, AdapterParseError)), None)
        if parse is None:
            raise DSPyProgramError(
                f"the DSPy program {self.program.program_name} raised {type(exc).__name__}: "
                f"{exc} on {self.program.describe(example.id)}; fix the program"
            ) from exc
        where = _predictor_of(self.program, parse.signature)
        reason = (str(parse.message).strip().splitlines() or ["no detail"])[0]
        feedback = (
            f"could not parse the output of predictor {where!r} ({parse.adapter_name}): "
            f"{reason}. Expected format: {adapter_format(parse.signature, self.program.style)}"
        )
        return feedback, where

    def _outcome(
        self,
        gold: dspy.Example,
        prediction: Any,
        trace: list[Any],
        record: RunRecord,
        failure: tuple[str, str] | None,
        started: float,
    ) -> RunOutcome:
        outputs = _outputs(prediction) if failure is None else dict.fromkeys(self.output_fields)
        errors = [self._raw_parse_error(sig, err) for sig, err in record.parse_errors]
        error = failure[0] if failure else ("; ".join(errors) if errors else None)
        unparsed = [self._predictor_named(sig) for sig, _ in record.parse_errors]
        if failure is not None:
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
        """The predictor whose signature reads `signature_text` (else the text itself)."""
        return next(
            (
                n
                for n in self.program.predictor_names
                if self.program.signature(n).signature == signature_text
            ),
            signature_text,
        )

    # -- proposer hooks (see skillopt_dsl.dspy.proposals) ---------------------------------------
    def worked_example(self, example: Example, rollout: Rollout | None) -> str | None:
        """A worked example for this predictor from real data only (None: there is none): its
        own traced call in a run the metric scored a success with every output parsed, or the
        labels when they give every one of its output fields."""
        run = _program_trace(rollout)
        succeeded = (
            rollout is not None
            and rollout.score >= 1.0
            and run is not None
            and not run.failure
            and not run.unparsed
        )
        signature = self.program.signature(self.predictor)
        calls = run.pred_trace if run is not None else ()
        if not self.program.demos:
            return worked_example(signature, self.program.style, example, calls, succeeded)
        values = worked_values(signature, example, calls, succeeded)
        if values is None or set(values[0]) != set(signature.input_fields):
            return None  # a demo needs every input field too
        return render_demo(*values)

    def labelled_answer(self, example: Example) -> str | None:
        """The example's label for this predictor's one labelled output field (a
        ChainOfThought's `answer`, not its `reasoning`), as text, for rules
        mined from labels (an answer's shape); None when the labels do not give this
        predictor's field (an intermediate predictor: the program's final labels are not its
        outputs) or the field is structured (a pydantic model, a list)."""
        labelled = [name for name in self.output_fields if name in example.labels]
        if len(labelled) != 1:
            return None  # no field of this predictor's is labelled, or several are
        (name,) = labelled
        value = example.labels.get(name)
        if value is None or isinstance(value, Mapping | list | tuple):
            return None  # a pydantic model's label is its JSON object here
        return str(value)

    def output_broke_format(self, rollout: Rollout) -> bool:
        """Whether this predictor's own output broke its adapter's format in `rollout` (or
        the metric's feedback says the format is wrong); another predictor's parse failure or
        a program output that is merely wrong is not this predictor's format failure."""
        run = _program_trace(rollout)
        if run is None:
            return not rollout.prediction.ok
        if self.predictor in run.unparsed:
            return True
        return run.failure is None and not run.unparsed and mentions_format(rollout.feedback)

    def output_format_rule(self) -> str | None:
        """The output rule in the program's adapter format (None: an adapter we do not know)."""
        return format_rule_for(self.program.signature(self.predictor), self.program.style)

    def reflection_case(self, example: Example, rollout: Rollout) -> str:
        """This predictor's own calls on `example`, then the program's result and feedback."""
        run = _program_trace(rollout)
        finished = run is not None and run.prediction is not None and not run.failure
        return reflection_case(
            self.predictor,
            example,
            run.pred_trace if run is not None else (),
            _outputs(run.prediction) if finished and run is not None else {},
            rollout.feedback or rollout.prediction.error or "",
            self.program.signature(self.predictor),
        )

    def _metric_on_prediction(self, example: Example, prediction: Prediction) -> Score:
        """The metric on a bare prediction (no program run), for `metric_fn` callers."""
        return self.score(
            example, RunOutcome(prediction=prediction, output=prediction.raw, calls=0)
        )


def _as_model(annotation: Any, value: Any) -> Any:
    """`value` as the pydantic model `annotation` names, when it is one and `value` its JSON
    object; else `value` unchanged."""
    model = isinstance(annotation, type) and issubclass(annotation, pydantic.BaseModel)
    return annotation.model_validate(value) if model and isinstance(value, Mapping) else value


def origin(predictor: Any) -> str | None:
    """The program predictor a traced predictor is (or was copied from); None for a predictor
    the program does not own (one a wrapper builds on the fly, such as `dspy.Refine`'s)."""
    name = getattr(predictor, _ORIGIN, None)
    return name if isinstance(name, str) else None


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


def _program_trace(rollout: Rollout | None) -> ProgramTrace | None:
    trace = getattr(rollout, "trace", None)
    return trace if isinstance(trace, ProgramTrace) else None


def _outputs(prediction: Any) -> dict[str, Any]:
    """The fields of what the program returned (a `dspy.Prediction` or a mapping)."""
    items = getattr(prediction, "items", None)
    if callable(items):
        return dict(items())
    if isinstance(prediction, Mapping):
        return dict(prediction)
    return {"output": prediction}
