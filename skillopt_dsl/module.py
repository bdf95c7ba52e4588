"""`SkillModule`: a typed task whose instructions are a trainable skill document.

Declare a module as a class::

    class Sports(SkillModule):
        \"\"\"Judge whether a sentence about sports is plausible.\"\"\"
        statement: str = InputField()
        answer: Literal["plausible", "implausible"] = OutputField()
        skill = "Answer with one word."
        metric = metrics.exact_match("answer")

or functionally with `SkillModule.create(...)`.

Rendering contract: the system message is the skill text exactly (omitted when the skill is
empty); the user message is the rendered inputs — the bare value for a single undescribed input
field, `name: value` lines otherwise, written `name (description): value` where a description was
declared. With several output fields the user message ends with one line asking for a JSON object
with those keys (each with its description, where declared); a single output field's declared
description ends the message as `name: description`. Descriptions are the user's words, so they
reach the model; the skill itself is never altered by them.

Parsing contract: `parse(text)` never raises. One output field takes the completion, cleaned of
tags, quotes and `Answer:` prefixes, converted to the declared type; several fields take the first
JSON object, validated by pydantic. A failure yields a `Prediction` whose `error` says why.

Running contract (the seam every kind of target plugs into): `run(skill, example, lm, seed=)`
decides how one example runs under a skill and returns a `RunOutcome`; `score(example, outcome)`
decides how it is scored. The defaults are one model call (render → complete → parse) and the
module's metric on the prediction. A DSPy program, a tool-using agent or an agent CLI overrides
these two methods and is then, to every optimizer, the gate, the budget and the run directory,
just another module. `run` raises `ModelError` when the target failed for good (the rollout is
recorded as failed and scores 0 without calling the metric), lets `BudgetExceeded` propagate,
and never raises for a bad *output* (that is a prediction with an `error`, which the metric
scores).
"""

from __future__ import annotations

import json
import re
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol

import pydantic

from skillopt_dsl.errors import UserInputError
from skillopt_dsl.lm.base import Message
from skillopt_dsl.metrics.score import Score, call_metric
from skillopt_dsl.skill import Skill
from skillopt_dsl.types import Example, Prediction

if TYPE_CHECKING:
    from skillopt_dsl.lm import LM

__all__ = ["FieldSpec", "InputField", "OutputField", "RunOutcome", "SkillModule"]


@dataclass(frozen=True)
class RunOutcome:
    """What running one example under a skill produced, before it is scored.

    Attributes:
        prediction: the parsed outputs (parse failures carried in `prediction.error`).
        output: the final text the target produced (the completion, an agent's last answer).
        prompt_tokens / completion_tokens: tokens of every model call the run made.
        latency_s: wall time of the run.
        cached: True when every model call was answered from the response cache.
        calls: how many model calls (or harness runs) the run made.
        trace: a module-specific record for metrics and reflection (a DSPy trace, an agent
            trajectory); None for a single call.
    """

    prediction: Prediction
    output: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    cached: bool = False
    calls: int = 1
    trace: Any = None


class ModelReply(Protocol):
    """What one model call (or one agent-harness run) reports: its text and its usage.

    `skillopt_dsl.lm.LMResponse` is one; `SkillModule.outcome` turns any of them into a
    `RunOutcome`.
    """

    @property
    def text(self) -> str:
        """The final text the target produced."""
        ...

    @property
    def prompt_tokens(self) -> int:
        """Prompt tokens of the call."""
        ...

    @property
    def completion_tokens(self) -> int:
        """Completion tokens of the call."""
        ...

    @property
    def latency_s(self) -> float:
        """Wall time of the call."""
        ...

    @property
    def cached(self) -> bool:
        """True when the response cache answered."""
        ...


@dataclass(frozen=True)
class FieldSpec:
    """One declared field: its role, Python type and a short description."""

    role: Literal["input", "output"]
    desc: str = ""
    annotation: Any = str
    name: str = ""


def InputField(desc: str = "") -> Any:
    """Declare an input field of a `SkillModule` (its type comes from the annotation)."""
    return FieldSpec(role="input", desc=desc)


def OutputField(desc: str = "") -> Any:
    """Declare an output field of a `SkillModule` (its type comes from the annotation)."""
    return FieldSpec(role="output", desc=desc)


def _seed_skill(value: str | Path | Skill | None) -> Skill:
    if value is None:
        return Skill("")
    if isinstance(value, Skill):
        return value
    if isinstance(value, Path) or (value.endswith(".md") and "\n" not in value):
        path = Path(value)
        if not path.is_file():
            raise UserInputError(
                f"seed skill file {str(path)!r} does not exist; pass the text or a real .md path"
            )
        return Skill.from_file(path)
    return Skill(value)


class SkillModule:
    """A typed task: input and output fields, a seed skill and a metric.

    Subclasses declare fields with `InputField()` / `OutputField()` and set the class attributes
    `skill` (seed text, a `Skill`, or a path to a `.md` file) and `metric` (any callable
    `(example, prediction) -> float | bool | Score`). The class docstring is the description.
    """

    skill: ClassVar[str | Path | Skill | None] = None
    metric: ClassVar[Callable[..., Any] | None] = None
    input_fields: ClassVar[dict[str, FieldSpec]] = {}
    output_fields: ClassVar[dict[str, FieldSpec]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        hints = typing.get_type_hints(cls, include_extras=True)
        inputs: dict[str, FieldSpec] = {}
        outputs: dict[str, FieldSpec] = {}
        for name in hints:
            spec = cls.__dict__.get(name, _inherited_spec(cls, name))
            if not isinstance(spec, FieldSpec):
                continue
            bound = FieldSpec(role=spec.role, desc=spec.desc, annotation=hints[name], name=name)
            (inputs if spec.role == "input" else outputs)[name] = bound
        cls.input_fields = inputs
        cls.output_fields = outputs

    def __init__(
        self, *, skill: str | Path | Skill | None = None, metric: Callable[..., Any] | None = None
    ):
        if not self.input_fields or not self.output_fields:
            raise UserInputError(
                f"{type(self).__name__} needs at least one InputField and one OutputField"
            )
        self.seed_skill: Skill = _seed_skill(skill if skill is not None else type(self).skill)
        chosen_metric = metric if metric is not None else type(self).__dict__.get("metric")
        if chosen_metric is None:
            chosen_metric = _inherited_metric(type(self))
        self._metric = chosen_metric
        self._output_model = _output_model(type(self).__name__, self.output_fields)

    # -- description -----------------------------------------------------------------------
    @property
    def name(self) -> str:
        """The module's name (its class name)."""
        return type(self).__name__

    @property
    def description(self) -> str:
        """The class docstring, stripped; empty when there is none."""
        return (type(self).__doc__ or "").strip()

    @property
    def metric_fn(self) -> Callable[..., Any]:
        """The metric; a module without one cannot be evaluated."""
        if self._metric is None:
            raise UserInputError(
                f"{self.name} has no metric; set `metric = ...` on the class or pass metric="
            )
        return self._metric

    # -- rendering --------------------------------------------------------------------------
    def render(self, skill: Skill, inputs: Example | Mapping[str, object]) -> list[Message]:
        """The exact messages sent to the target model for these inputs under `skill`."""
        values = inputs.inputs if isinstance(inputs, Example) else inputs
        missing = [name for name in self.input_fields if name not in values]
        if missing:
            raise UserInputError(f"{self.name}: inputs are missing field(s) {missing}")
        messages: list[Message] = []
        if skill.text:
            messages.append({"role": "system", "content": skill.text})
        messages.append({"role": "user", "content": self._render_user(values)})
        return messages

    def _render_user(self, values: Mapping[str, object]) -> str:
        described = any(spec.desc for spec in self.input_fields.values())
        if len(self.input_fields) == 1 and not described:
            (name,) = self.input_fields
            body = _render_value(values[name])
        else:
            body = "\n".join(
                f"{_labelled(spec)}: {_render_value(values[name])}"
                for name, spec in self.input_fields.items()
            )
        if len(self.output_fields) > 1:
            keys = ", ".join(_labelled(spec) for spec in self.output_fields.values())
            body += f"\n\nRespond with a JSON object with the keys: {keys}."
        else:
            (spec,) = self.output_fields.values()
            if spec.desc:
                body += f"\n\n{spec.name}: {spec.desc}"
        return body

    # -- parsing ----------------------------------------------------------------------------
    def parse(self, text: str) -> Prediction:
        """Parse a completion into typed outputs. Never raises; failures are in `.error`."""
        try:
            if len(self.output_fields) == 1:
                (spec,) = self.output_fields.values()
                return Prediction({spec.name: _parse_single(text, spec)}, raw=text)
            return Prediction(_parse_json_fields(text, self._output_model), raw=text)
        except (ValueError, pydantic.ValidationError, TypeError) as exc:
            empty = dict.fromkeys(self.output_fields)
            return Prediction(empty, raw=text, error=_short_error(exc))

    def failed_prediction(self, error: str, raw: str = "") -> Prediction:
        """A prediction for a call that produced no usable output (the error is kept)."""
        return Prediction(dict.fromkeys(self.output_fields), raw=raw, error=error)

    # -- running and scoring one example (the seam; see the module docstring) ----------------
    def run(self, skill: Skill, example: Example, lm: LM, *, seed: int) -> RunOutcome:
        """Run `example` under `skill` with the target model `lm`: one call by default.

        Raises `ModelError` when the call failed for good; `BudgetExceeded` propagates.
        """
        return self.outcome(lm.complete(self.render(skill, example), seed=seed))

    def outcome(self, reply: ModelReply, *, trace: Any = None) -> RunOutcome:
        """The outcome of a run that made one call: `reply`'s text parsed into the prediction,
        its usage kept (the one completion -> `RunOutcome` conversion)."""
        return RunOutcome(
            prediction=self.parse(reply.text),
            output=reply.text,
            prompt_tokens=reply.prompt_tokens,
            completion_tokens=reply.completion_tokens,
            latency_s=reply.latency_s,
            cached=reply.cached,
            trace=trace,
        )

    def skill_refusal(self, skill: Skill) -> str | None:
        """Why this module cannot run `skill` at all (None: it can); the door refuses such a
        candidate before the gate sees it, so a limit of the text's destination (a skill
        folder's one-line description, for instance) is never enforced by truncation later.
        The default accepts every text."""
        del skill
        return None

    def score(self, example: Example, outcome: RunOutcome) -> Score:
        """Score a run that completed: the module's metric on the prediction by default.

        Never called for a failed run (a failed call scores 0 for every metric)."""
        return call_metric(self.metric_fn, example, outcome.prediction)

    # -- functional construction ------------------------------------------------------------
    @classmethod
    def create(
        cls,
        *,
        name: str,
        inputs: Mapping[str, object],
        outputs: Mapping[str, object],
        skill: str | Path | Skill | None = None,
        metric: Callable[..., Any] | None = None,
        description: str = "",
    ) -> SkillModule:
        """Build a module without a class statement.

        `inputs` / `outputs` map field names to a type, or to `(type, description)`.
        """
        namespace = declared_namespace(name, inputs, outputs, description)
        namespace["skill"] = skill
        namespace["metric"] = metric
        subclass = type(name, (cls,), namespace)
        instance: SkillModule = subclass()
        return instance


def declared_namespace(
    name: str, inputs: Mapping[str, object], outputs: Mapping[str, object], description: str
) -> dict[str, Any]:
    """The class namespace of a module declared without a class statement (`create`): the
    docstring and one `FieldSpec` per field, `inputs` / `outputs` mapping each field name to a
    type or `(type, description)`."""
    if not name.isidentifier():
        raise UserInputError(f"module name {name!r} must be a Python identifier")
    namespace: dict[str, Any] = {"__doc__": description, "__annotations__": {}}
    for role, fields in (("input", inputs), ("output", outputs)):
        for field_name, declared in fields.items():
            annotation, desc = declared if isinstance(declared, tuple) else (declared, "")
            namespace["__annotations__"][field_name] = annotation
            namespace[field_name] = FieldSpec(role=role, desc=desc)  # type: ignore[arg-type]
    return namespace


def _inherited_spec(cls: type, name: str) -> Any:
    for base in cls.__mro__[1:]:
        if name in getattr(base, "input_fields", {}):
            return base.input_fields[name]  # type: ignore[attr-defined]
        if name in getattr(base, "output_fields", {}):
            return base.output_fields[name]  # type: ignore[attr-defined]
    return None


def _inherited_metric(cls: type) -> Callable[..., Any] | None:
    for base in cls.__mro__:
        value = base.__dict__.get("metric")
        if value is not None:
            return value  # type: ignore[no-any-return]
    return None


def _labelled(spec: FieldSpec) -> str:
    """`name`, or `name (description)` when the user declared a description."""
    return f"{spec.name} ({spec.desc})" if spec.desc else spec.name


def _render_value(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, pydantic.BaseModel):
        return value.model_dump_json()
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return "\n".join(f"- {v}" for v in value)
    return json.dumps(value, ensure_ascii=False, default=str)


def _output_model(name: str, fields: Mapping[str, FieldSpec]) -> type[pydantic.BaseModel]:
    definitions: dict[str, Any] = {fname: (spec.annotation, ...) for fname, spec in fields.items()}
    return pydantic.create_model(f"{name}Outputs", **definitions)


_TAG = re.compile(r"</?[A-Za-z_][\w-]*>")
_PREFIX = re.compile(r"^\s*(?:final\s+answer|answer|output|result)\s*[:：-]\s*", re.IGNORECASE)
_QUOTES = "\"'`“”‘’"


def _clean(text: str, field: str) -> str:
    cleaned = _TAG.sub(" ", text).strip()
    field_prefix = re.compile(rf"^\s*{re.escape(field)}\s*[:：=-]\s*", re.IGNORECASE)
    for _ in range(2):
        cleaned = field_prefix.sub("", _PREFIX.sub("", cleaned)).strip()
    cleaned = cleaned.strip(_QUOTES).strip()
    return cleaned


def _parse_single(text: str, spec: FieldSpec) -> Any:
    cleaned = _clean(text, spec.name)
    if not cleaned:
        raise ValueError("the completion is empty")
    annotation = spec.annotation
    if typing.get_origin(annotation) is Literal:
        return _pick_literal(cleaned, typing.get_args(annotation))
    if annotation in (int, float):
        return _first_number(cleaned, annotation)
    if annotation is bool:
        return _parse_bool(cleaned)
    if isinstance(annotation, type) and issubclass(annotation, pydantic.BaseModel):
        return annotation.model_validate_json(_first_json_object(cleaned))
    if annotation is str:
        return cleaned.rstrip(".").strip() if "\n" not in cleaned else cleaned
    return pydantic.TypeAdapter(annotation).validate_python(cleaned)


def _pick_literal(cleaned: str, choices: tuple[Any, ...]) -> Any:
    lowered = cleaned.strip(". ").casefold()
    for choice in choices:
        if str(choice).casefold() == lowered:
            return choice
    found = [
        c
        for c in choices
        if re.search(rf"(?<!\w){re.escape(str(c))}(?!\w)", cleaned, re.IGNORECASE)
    ]
    if len(found) == 1:
        return found[0]
    options = ", ".join(repr(c) for c in choices)
    why = "several of" if found else "none of"
    raise ValueError(f"the completion names {why} the allowed answers ({options})")


_NUMBER = re.compile(r"[-+]?\d[\d,]*(?:\.\d+)?")


def _first_number(cleaned: str, kind: type) -> Any:
    match = _NUMBER.search(cleaned)
    if match is None:
        raise ValueError("the completion contains no number")
    raw = match.group().replace(",", "")
    value = float(raw)
    if kind is int:
        if not value.is_integer():
            raise ValueError(f"expected an integer, found {raw}")
        return int(value)
    return value


def _parse_bool(cleaned: str) -> bool:
    word = cleaned.strip(". ").split()[0].casefold() if cleaned.strip(". ") else ""
    if word in {"true", "yes", "y", "1"}:
        return True
    if word in {"false", "no", "n", "0"}:
        return False
    raise ValueError(f"expected yes/no or true/false, got {cleaned[:40]!r}")


def _first_json_object(text: str) -> str:
    start = text.find("{")
    if start < 0:
        raise ValueError("the completion contains no JSON object")
    depth, in_string, escaped = 0, False, False
    for index in range(start, len(text)):
        char = text[index]
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
            continue
        if char == '"':
            in_string = True
        elif char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return text[start : index + 1]
    raise ValueError("the JSON object in the completion is not closed")


def _parse_json_fields(text: str, model: type[pydantic.BaseModel]) -> dict[str, Any]:
    parsed = model.model_validate_json(_first_json_object(text))
    return {name: getattr(parsed, name) for name in model.model_fields}


def _short_error(exc: Exception) -> str:
    message = str(exc).strip().splitlines()
    head = message[0] if message else type(exc).__name__
    if isinstance(exc, pydantic.ValidationError):
        head = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:3])
    return f"could not parse the output: {head}"
