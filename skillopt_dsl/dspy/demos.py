"""Demos as a trainable part of a DSPy predictor (`SkillOptimizer(demos=True)`).

With demos on, a predictor's skill is its instructions plus an `## Examples` section of worked
examples, one paragraph each, written as two JSON objects of the predictor's own fields::

    ## Examples

    Input: {"review": "loved it"}
    Answer: {"answer": "positive"}

The proposers add and swap these paragraphs like any other text (`DemonstrationsProposer` writes
under `## Examples` and swaps blocks starting `Input:`), so the same learning rate, screen and
gate apply to them. When the bridge builds a program (`DSPyProgram.built`), every paragraph of
the `## Examples` section that parses as a demo of the predictor (an input object whose keys are
input fields of the signature, an answer object whose keys are its output fields) becomes a
`dspy.Example` in `predictor.demos`, in order, and is removed from the instructions (the
section's heading too, once nothing else is left in it). Anything else in the section stays in
the instructions, as written. The predictor's own demos (from the student) are written into the
seed skill the same way, so they are kept, swapped or dropped only through the gate.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

import dspy
import pydantic

from skillopt_dsl.dspy.proposals import plain_value
from skillopt_dsl.optimizers.proposers.common import EXAMPLES_HEADING

__all__ = ["DEMOS_HEADING", "labelled_demo", "render_demo", "split_demos", "with_demos"]

DEMOS_HEADING = EXAMPLES_HEADING
"""The section whose demo paragraphs become `predictor.demos` (the heading the proposers'
worked examples go under)."""

_HEADING = re.compile(r"^(#{1,6})[ \t]+(.*?)[ \t#]*$")
_DEMO = re.compile(r"\AInput: (\{.*\})\nAnswer: (\{.*\})\Z", re.DOTALL)


def render_demo(inputs: Mapping[str, Any], outputs: Mapping[str, Any]) -> str:
    """One demo paragraph: `Input: {json}` then `Answer: {json}` (one line each)."""
    given = json.dumps({k: plain_value(v) for k, v in inputs.items()}, ensure_ascii=False)
    answer = json.dumps({k: plain_value(v) for k, v in outputs.items()}, ensure_ascii=False)
    return f"Input: {given}\nAnswer: {answer}"


RATIONALE_FIELDS = frozenset({"reasoning"})
"""Output fields a labelled demo may leave to the model: `dspy.ChainOfThought`'s rationale."""


def labelled_demo(
    signature: Any, inputs: Mapping[str, Any], labels: Mapping[str, Any]
) -> str | None:
    """A demo paragraph from an example's labels alone, as MIPROv2's labelled demos are: every
    input field, every labelled output field, and the rationale (`RATIONALE_FIELDS`, a
    `ChainOfThought`'s `reasoning`) left for the model (DSPy's adapters write it "Not supplied
    for this particular example"). None when an input is missing, no output field is
    labelled, or an output other than the rationale is unlabelled."""
    if any(inputs.get(k) is None for k in signature.input_fields):
        return None
    given = {k: labels[k] for k in signature.output_fields if labels.get(k) is not None}
    left = set(signature.output_fields) - set(given)
    if not given or not left <= RATIONALE_FIELDS:
        return None
    return render_demo({k: inputs[k] for k in signature.input_fields}, given)


def with_demos(instructions: str, signature: Any, demos: Sequence[Any]) -> str:
    """`instructions` with the predictor's complete `demos` (every field of `signature` given)
    written under `## Examples`; the instructions alone when there are none."""
    fields = [*signature.input_fields, *signature.output_fields]
    blocks = []
    for demo in demos:
        values = dict(demo.items()) if hasattr(demo, "items") else dict(demo)
        if any(values.get(k) is None for k in fields):
            continue  # a partial demo (DSPy allows them) cannot be written as a worked example
        blocks.append(
            render_demo(
                {k: values[k] for k in signature.input_fields},
                {k: values[k] for k in signature.output_fields},
            )
        )
    if not blocks:
        return instructions
    section = "\n\n".join([f"## {DEMOS_HEADING}", *blocks])
    return f"{instructions.rstrip()}\n\n{section}" if instructions.strip() else section


def split_demos(text: str, signature: Any) -> tuple[str, list[dspy.Example]]:
    """The instructions without their demo paragraphs, and those demos as `dspy.Example`s
    (inputs marked; an output typed with a pydantic model validated into it)."""
    lines = text.split("\n")
    kept: list[str] = []
    demos: list[dspy.Example] = []
    index = 0
    while index < len(lines):
        level = _demos_heading_level(lines[index])
        if level is None:
            kept.append(lines[index])
            index += 1
            continue
        end = _section_end(lines, index, level)
        body, found = _take_demos(lines[index + 1 : end], signature)
        demos += found
        if not found:
            kept += lines[index:end]
        elif body.strip():
            kept += [lines[index], "", body.strip("\n"), ""]
        index = end
    instructions = re.sub(r"\n{3,}", "\n\n", "\n".join(kept)).strip()
    return instructions, demos


def _demos_heading_level(line: str) -> int | None:
    match = _HEADING.match(line)
    if match is None or match.group(2).strip().casefold() != DEMOS_HEADING.casefold():
        return None
    return len(match.group(1))


def _section_end(lines: list[str], start: int, level: int) -> int:
    for index in range(start + 1, len(lines)):
        match = _HEADING.match(lines[index])
        if match is not None and len(match.group(1)) <= level:
            return index
    return len(lines)


def _take_demos(lines: list[str], signature: Any) -> tuple[str, list[dspy.Example]]:
    """The section's paragraphs that are not demos (as text), and the demos."""
    rest: list[str] = []
    demos: list[dspy.Example] = []
    for block in re.split(r"\n[ \t]*\n", "\n".join(lines)):
        demo = _demo(block.strip(), signature)
        if demo is None:
            rest.append(block.strip("\n"))
        else:
            demos.append(demo)
    return "\n\n".join(b for b in rest if b.strip()), demos


def _demo(block: str, signature: Any) -> dspy.Example | None:
    match = _DEMO.match(block)
    if match is None:
        return None
    try:
        given, answer = json.loads(match.group(1)), json.loads(match.group(2))
    except json.JSONDecodeError:
        return None
    if not (isinstance(given, dict) and isinstance(answer, dict) and given and answer):
        return None
    if set(given) - set(signature.input_fields) or set(answer) - set(signature.output_fields):
        return None  # another predictor's fields: not a demo of this one
    outputs = {k: _typed(signature.output_fields[k].annotation, v) for k, v in answer.items()}
    if any(v is _INVALID for v in outputs.values()):
        return None
    return dspy.Example(**given, **outputs).with_inputs(*given)


_INVALID = object()


def _typed(annotation: Any, value: Any) -> Any:
    """`value` as the pydantic model `annotation` names (`_INVALID` when it does not validate);
    any other value as it is."""
    if isinstance(annotation, type) and issubclass(annotation, pydantic.BaseModel):
        try:
            return annotation.model_validate(value)
        except pydantic.ValidationError:
            return _INVALID
    return value
