"""`RawSkillAdapter`: a DSPy adapter that sends the skill verbatim and parses tolerantly.

DSPy's `ChatAdapter` wraps a predictor's instructions in field scaffolding (indented, between
`[[ ## field ## ]]` markers) and raises `AdapterParseError` when a reply does not follow it; the
JSON fallback then costs a second call. Small local models (the embedded SmolLM2-135M among them)
fail that format most of the time. `RawSkillAdapter` renders a predictor exactly as a
`SkillModule` renders a task:

- the system message is the signature's instructions verbatim (the skill; omitted when empty);
- the user message holds the inputs: the bare value for one undescribed input, `name: value`
  lines otherwise; with several output fields it ends asking for a JSON object with those keys;
- demos become user/assistant pairs before the input;
- parsing is our tolerant parser (tags, quotes and `Answer:` prefixes cleaned, the value converted
  to the declared type; several fields from the first JSON object). It never raises: a field that
  cannot be parsed is None and the error is recorded for the run (a `SkillOptimizer` rollout then
  scores 0 with feedback naming the expected format).

Use it for DSPy programs on small local models: `dspy.configure(adapter=RawSkillAdapter())`, or
`SkillOptimizer(..., adapter=RawSkillAdapter())`.
"""

from __future__ import annotations

import contextvars
import functools
import logging
from collections.abc import Mapping
from typing import Any, cast

import dspy
from dspy.utils.exceptions import AdapterParseError

from skillopt_dsl.dspy.bridge import engine_record
from skillopt_dsl.dspy.calls import origin
from skillopt_dsl.module import SkillModule
from skillopt_dsl.skill import Skill

__all__ = ["RawSkillAdapter", "signature_fields", "signature_module"]

logger = logging.getLogger(__name__)

_PARSE_ERRORS: contextvars.ContextVar[list[tuple[str, str]] | None] = contextvars.ContextVar(
    "skillopt_raw_adapter_parse_errors", default=None
)


def _description(name: str, info: Any) -> str:
    """The field's declared description; DSPy's `${name}` placeholder counts as none."""
    desc = str((info.json_schema_extra or {}).get("desc") or "")
    return "" if desc == f"${{{name}}}" else desc


def signature_fields(fields: Mapping[str, Any]) -> dict[str, tuple[Any, str]]:
    """DSPy field infos as `{name: (annotation, description)}` (the form `SkillModule.create`
    takes)."""
    return {name: (info.annotation, _description(name, info)) for name, info in fields.items()}


def signature_module(signature: type[dspy.Signature]) -> SkillModule:
    """A `SkillModule` with the signature's fields: it renders and parses for the adapter."""
    return _signature_module(cast(Any, signature))


@functools.lru_cache(maxsize=256)
def _signature_module(signature: Any) -> SkillModule:
    return SkillModule.create(
        name="DSPyPredictor",
        inputs=signature_fields(signature.input_fields),
        outputs=signature_fields(signature.output_fields),
        metric=lambda example, prediction: 0.0,  # never scored: the adapter only formats/parses
    )


class RawSkillAdapter(dspy.Adapter):
    """The skill verbatim as the system message, inputs as the user message, tolerant parsing.

    See the module docstring. One call per predictor: no JSON fallback, no second call.
    """

    def __call__(
        self,
        lm: Any,
        lm_kwargs: dict[str, Any],
        signature: type[dspy.Signature],
        demos: list[dict[str, Any]],
        inputs: dict[str, Any],
    ) -> list[dict[str, Any]]:
        """Format, call, parse; parse failures are recorded on the bridged LM's run record,
        under the calling program predictor's name when it has one (else the signature)."""
        errors: list[tuple[str, str]] = []
        callers = dspy.settings.caller_modules or [None]
        label = origin(callers[-1]) or signature.signature
        token = _PARSE_ERRORS.set(errors)
        try:
            try:
                return list(super().__call__(lm, lm_kwargs, signature, demos, inputs))
            except AdapterParseError as exc:  # an empty completion
                errors.append((label, f"could not parse the output: {exc.message}"))
                return [dict.fromkeys(signature.output_fields)]
        finally:
            _PARSE_ERRORS.reset(token)
            _report(lm, [(label, error) for _, error in errors])

    def format(
        self,
        signature: type[dspy.Signature],
        demos: list[dict[str, Any]],
        inputs: dict[str, Any],
    ) -> list[dict[str, Any]]:
        """System = instructions verbatim; then demo pairs; then the rendered inputs."""
        module = signature_module(signature)
        skill = Skill(signature.instructions)
        # A missing input renders empty, as DSPy's own adapters leave it out (Predict warned).
        filled = {name: inputs.get(name, "") for name in signature.input_fields}
        rendered = module.render(skill, filled)
        system, user = rendered[:-1], rendered[-1]
        return [*system, *self._demo_messages(module, signature, demos), user]

    def parse(self, signature: type[dspy.Signature], completion: str) -> dict[str, Any]:
        """Our tolerant parser; never raises (a failed field is None, the error recorded)."""
        prediction = signature_module(signature).parse(completion)
        if prediction.error is not None:
            errors = _PARSE_ERRORS.get()
            if errors is not None:
                errors.append((signature.signature, prediction.error))
            logger.debug("RawSkillAdapter: %s: %s", signature.signature, prediction.error)
        return dict(prediction.outputs)

    def _demo_messages(
        self,
        module: SkillModule,
        signature: type[dspy.Signature],
        demos: list[dict[str, Any]],
    ) -> list[dict[str, str]]:
        """Each complete demo (every input and output field present) as a user/assistant pair."""
        messages: list[dict[str, str]] = []
        outputs = list(signature.output_fields)
        for demo in demos:
            values = dict(demo.items()) if hasattr(demo, "items") else dict(demo)
            if any(values.get(k) is None for k in [*signature.input_fields, *outputs]):
                continue
            messages.append(module.render(Skill(""), values)[-1])
            messages.append({"role": "assistant", "content": _answer_text(values, outputs)})
        return messages


def _answer_text(values: Mapping[str, Any], outputs: list[str]) -> str:
    """A demo's outputs as the model should write them: the bare value, or a JSON object."""
    import json

    if len(outputs) == 1:
        return str(values[outputs[0]])
    return json.dumps({k: values[k] for k in outputs}, ensure_ascii=False, default=str)


def _report(lm: Any, errors: list[tuple[str, str]]) -> None:
    record = engine_record(lm)
    if record is not None:
        for signature, error in errors:
            record.parse_failed(signature, error)
