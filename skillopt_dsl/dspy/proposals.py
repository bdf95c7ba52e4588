"""What the proposers write into a DSPy predictor's instructions, in the program's own terms.

A `PredictorModule` trains one predictor of a program, but its examples are labelled for the
whole program, and its calls are formatted by a DSPy adapter, not by our renderer. The proposers'
defaults (a worked example from the labels, a format rule from the declared types, a reflection
case from the rollout's final text) would write the wrong thing: null outputs for a predictor the
labels do not cover, a JSON rule into a `ChatAdapter` program, another predictor's reply shown as
this one's. The functions here give the three proposer hooks of `PredictorModule`
(`worked_example`, `output_format_rule`, `reflection_case`) what fits:

- **Worked examples** come only from real data of that predictor: a call it made in a run the
  metric scored as a success (its real inputs and outputs, from the DSPy trace; a run where one
  of its calls lacks an output gives none), or the example's labels when they give every output
  field of the predictor (with its inputs taken from the example, or from its traced call on
  that example). Every example holds every output field the predictor's adapter expects
  (`ChainOfThought`'s `reasoning`, each field of a multi-output signature), so the adapter
  parses it; a field no real data gives means no example, never an invented value.
- **Format rules** are written in the adapter's format: `[[ ## field ## ]]` markers for
  `ChatAdapter`, one JSON object for `JSONAdapter`, tags for `XMLAdapter`, our renderer's rule
  for `RawSkillAdapter`; allowed values of a `Literal` field are named per field. An adapter we
  do not know gets no rule (it owns its format).
- **Reflection cases** show the predictor's own calls on the example (inputs and outputs from the
  trace), then the program's result, the program's labels and the metric's feedback, each named
  for what it is.
"""

from __future__ import annotations

import enum
import json
import typing
from collections.abc import Mapping
from typing import Any, Literal

import dspy

from skillopt_dsl.dspy.adapter import RawSkillAdapter, signature_module
from skillopt_dsl.optimizers.proposers import format_rule
from skillopt_dsl.skill import Skill
from skillopt_dsl.types import Example

__all__ = [
    "AdapterStyle",
    "adapter_format",
    "adapter_style",
    "answer_parses",
    "format_rule_for",
    "plain_value",
    "reflection_case",
    "worked_example",
    "worked_values",
]

AdapterStyle = Literal["chat", "json", "xml", "raw", "other"]

_MAX_VALUE_CHARS = 600


def adapter_style(adapter: Any) -> AdapterStyle:
    """The output format `adapter` asks a model for (None: DSPy's default, `ChatAdapter`)."""
    if adapter is None:
        return "chat"
    if isinstance(adapter, RawSkillAdapter):
        return "raw"
    if isinstance(adapter, dspy.JSONAdapter):
        return "json"
    xml = getattr(dspy, "XMLAdapter", None)
    if xml is not None and isinstance(adapter, xml):
        return "xml"
    if isinstance(adapter, dspy.ChatAdapter):
        return "chat"
    return "other"


def format_rule_for(signature: Any, style: AdapterStyle) -> str | None:
    """A one-paragraph output rule for `signature`'s outputs, in the adapter's own format;
    None for an adapter whose format we do not know."""
    outputs = list(signature.output_fields)
    if style == "raw":
        return format_rule(signature_module(signature))
    if style == "chat":
        markers = ", then ".join(f"`[[ ## {k} ## ]]`" for k in outputs)
        head = (
            f"Write each output field on the lines after its own marker: {markers}, and end "
            "with `[[ ## completed ## ]]`."
        )
    elif style == "json":
        keys = ", ".join(f'"{k}"' for k in outputs)
        head = f"Reply with one JSON object with the keys {keys}."
    elif style == "xml":
        tags = ", then ".join(f"<{k}>...</{k}>" for k in outputs)
        head = f"Write each output field inside its own tags: {tags}."
    else:
        return None
    values = [_value_rule(name, info.annotation) for name, info in signature.output_fields.items()]
    return " ".join([head, *(v for v in values if v)])


def adapter_format(signature: Any, style: AdapterStyle) -> str:
    """The expected output format in words, for a parse failure's feedback."""
    rule = format_rule_for(signature, style)
    return rule or f"the output fields {list(signature.output_fields)} as the adapter asks"


def _value_rule(name: str, annotation: Any) -> str:
    if typing.get_origin(annotation) is Literal:
        options = ", ".join(str(a) for a in typing.get_args(annotation))
        return f"The `{name}` field is exactly one of: {options}."
    if annotation in (int, float):
        return f"The `{name}` field is a number, in digits."
    if annotation is bool:
        return f"The `{name}` field is true or false."
    return ""


# -- worked examples --------------------------------------------------------------------------


def worked_example(
    signature: Any,
    style: AdapterStyle,
    example: Example,
    calls: tuple[Any, ...],
    succeeded: bool,
) -> str | None:
    """A worked example for the predictor with `signature`, from real data only (see the module
    docstring); None when there is none. Every output field of the signature is in it with a
    real value (the predictor's own adapter parses its answer), or there is no example.

    Args:
        signature: the predictor's signature.
        style: the program's adapter format.
        example: the program's example (inputs and the program's labels).
        calls: the predictor's traced calls on this example, `(predictor, inputs, prediction)`.
        succeeded: the metric scored the run that made `calls` as a success, and none of the
            run's outputs failed to parse.
    """
    values = worked_values(signature, example, calls, succeeded)
    return None if values is None else _render(signature, style, *values)


def worked_values(
    signature: Any, example: Example, calls: tuple[Any, ...], succeeded: bool
) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """The inputs and outputs of `worked_example` (same arguments, same rules), unrendered:
    every input and output field of the signature with a real value, or None."""
    outputs_wanted = list(signature.output_fields)
    if succeeded and calls:
        traced = [{k: _get(prediction, k) for k in outputs_wanted} for _, _, prediction in calls]
        if all(v is not None for outputs in traced for v in outputs.values()):
            first = min(range(len(calls)), key=lambda i: _order(signature, calls[i][1]))
            return _own_inputs(signature, calls[first][1]), traced[first]
    if any(example.labels.get(k) is None for k in outputs_wanted):
        return None  # the labels do not give every output field (reasoning, other outputs)
    labelled = {k: example.labels[k] for k in outputs_wanted}
    if all(k in example.inputs for k in signature.input_fields):
        given = {k: example.inputs[k] for k in signature.input_fields}
    elif calls and succeeded:  # a failed run's inputs may be an earlier predictor's misreading
        given = _own_inputs(signature, calls[0][1])
    else:
        return None
    return given, labelled


def _order(signature: Any, inputs: Mapping[str, Any]) -> tuple[int, str]:
    """A call's place in a deterministic order (shortest inputs first: a loop's first step),
    whatever order parallel calls (`.batch()`, `dspy.Parallel`) finished in."""
    text = _json(_own_inputs(signature, inputs))
    return len(text), text


def _own_inputs(signature: Any, inputs: Mapping[str, Any]) -> dict[str, Any]:
    """The traced inputs of the signature's own input fields (a wrapper's extras, such as
    `dspy.Refine`'s `hint_`, left out)."""
    return {k: inputs[k] for k in signature.input_fields if k in inputs}


def _render(
    signature: Any, style: AdapterStyle, inputs: Mapping[str, Any], outputs: Mapping[str, Any]
) -> str:
    """`Input: ...` then `Answer: ...` (the shape `DemonstrationsProposer` keeps and swaps), the
    answer written as the adapter asks for it; one paragraph (no blank line inside)."""
    if style == "raw":  # as `RawSkillAdapter` renders the inputs and parses the answer
        module = signature_module(signature)
        user = module.render(Skill(""), {k: inputs.get(k, "") for k in module.input_fields})
        return _one_paragraph(f"Input: {user[-1]['content']}\nAnswer: {_answer(style, outputs)}")
    given = "\n".join(f"{k}: {_text(v)}" for k, v in inputs.items())
    return _one_paragraph(f"Input:\n{given}\nAnswer:\n{_answer(style, outputs)}")


def _answer(style: AdapterStyle, outputs: Mapping[str, Any]) -> str:
    """A worked example's answer, written as the adapter of `style` asks for it."""
    if style == "raw" and len(outputs) == 1:
        return _text(next(iter(outputs.values())))
    if style in ("raw", "json"):
        return json.dumps({k: _plain(v) for k, v in outputs.items()}, ensure_ascii=False)
    if style == "xml":
        return "\n".join(f"<{k}>{_text(v)}</{k}>" for k, v in outputs.items())
    if style == "chat":
        return "\n".join(f"[[ ## {k} ## ]]\n{_text(v)}" for k, v in outputs.items())
    return "\n".join(f"{k}: {_text(v)}" for k, v in outputs.items())


def answer_parses(signature: Any, adapter: Any, outputs: Mapping[str, Any]) -> bool:
    """Whether `adapter` (the program's own) parses `outputs`, written as a worked example
    writes them for it, back into every output field of `signature` (an Enum written as its
    name, or a value of the wrong type, does not)."""
    style = adapter_style(adapter)
    text = _answer(style, outputs)
    if style == "chat":
        text = text.replace("\n[[ ## ", "\n\n[[ ## ") + "\n\n[[ ## completed ## ]]"
    try:
        parsed = adapter.parse(signature, text)
    except Exception:  # AdapterParseError, or a value the field's type refuses
        return False
    return all(parsed.get(k) is not None for k in signature.output_fields)


# -- reflection -------------------------------------------------------------------------------


def reflection_case(
    predictor: str,
    example: Example,
    calls: tuple[Any, ...],
    program_outputs: Mapping[str, Any],
    feedback: str,
    signature: Any = None,
    *,
    called: bool = True,
) -> str:
    """One case for the reflection prompt: the predictor's own calls (at most three; with
    `signature`, only its own input fields), then the program's result (its labelled fields),
    labels and feedback, each named for what it is. `called=False`: the program's path did
    not go through the predictor on this row (said so, instead of a missing output)."""
    lines = [f"- program inputs: {_json(example.inputs)}"]
    if not called:
        lines.append(f"  predictor {predictor!r} was not called on this row (another path)")
    elif not calls:
        lines.append(f"  predictor {predictor!r} gave no parsed output in this run")
    for index, (_, inputs, prediction) in enumerate(calls[:3], start=1):
        lines.append(f"  predictor {predictor!r} call {index} of {len(calls)}:")
        own = inputs if signature is None else _own_inputs(signature, inputs)
        lines.append(f"    its inputs: {_json(own)}")
        lines.append(f"    its outputs: {_json(_fields(prediction))}")
    # The labelled fields only: the program's other outputs are other predictors' replies.
    shown = {k: v for k, v in program_outputs.items() if k in example.labels} or program_outputs
    lines.append(f"  program result: {_json(shown) if shown else '(the program did not finish)'}")
    lines.append(f"  expected (the program's labels): {_json(example.labels)}")
    lines.append(f"  feedback: {feedback}")
    return "\n".join(lines)


# -- values -----------------------------------------------------------------------------------


def _get(prediction: Any, name: str) -> Any:
    try:
        return prediction.get(name) if hasattr(prediction, "get") else getattr(prediction, name)
    except Exception:  # a dspy.Prediction without the field
        return None


def _fields(prediction: Any) -> dict[str, Any]:
    items = getattr(prediction, "items", None)
    if callable(items):
        return dict(items())
    return dict(prediction) if isinstance(prediction, Mapping) else {"output": prediction}


def _plain(value: Any) -> Any:
    if isinstance(value, enum.Enum):  # written as its value, which every adapter parses
        return _plain(value.value)
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return str(value)


def plain_value(value: Any) -> Any:
    """`value` in JSON form (a pydantic model dumped, containers converted, others as text)."""
    return _plain(value)


def _text(value: Any) -> str:
    plain = _plain(value)
    return plain if isinstance(plain, str) else json.dumps(plain, ensure_ascii=False)


def _json(values: Mapping[str, Any]) -> str:
    text = json.dumps({str(k): _plain(v) for k, v in values.items()}, ensure_ascii=False)
    return text if len(text) <= _MAX_VALUE_CHARS else text[:_MAX_VALUE_CHARS] + "..."


def _one_paragraph(text: str) -> str:
    """Blank lines removed (a worked example is one paragraph of the skill)."""
    return "\n".join(line.rstrip() for line in text.splitlines() if line.strip())
