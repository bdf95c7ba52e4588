"""`ReflectiveProposer`: the optimizer model reads failures and proposes edits as JSON."""

from __future__ import annotations

import json
import logging
import math
import re
import typing
from dataclasses import dataclass

import pydantic

from skillopt_dsl.errors import ModelError
from skillopt_dsl.evaluate import Rollout
from skillopt_dsl.lm import LM
from skillopt_dsl.optimizers.proposers.base import (
    EditGroup,
    ProposalRequest,
    Proposer,
)
from skillopt_dsl.optimizers.proposers.common import (
    gold_answer,
)
from skillopt_dsl.skill import Add, Delete, Edit, Replace
from skillopt_dsl.types import Example

logger = logging.getLogger(__name__)


_EditItem = typing.Annotated[Add | Replace | Delete, pydantic.Field(discriminator="kind")]


class _EditBatch(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")
    edits: list[_EditItem]


_SYSTEM = """You improve a skill document: the instructions a model reads before doing a task.
You are shown the document and examples of the model's work with the expected answers and the
metric's feedback. Propose small, general edits to the document that would fix the failures
without breaking the successes. Do not copy example answers; state rules.
Reply with JSON only, in this form:
{"edits": [{"kind": "add", "after": "<heading or exact text, or null for the end>", "text": "<new text>", "rationale": "<why>"},
           {"kind": "replace", "old": "<exact text in the document>", "new": "<replacement>", "rationale": "<why>"},
           {"kind": "delete", "old": "<exact text in the document>", "rationale": "<why>"}]}"""

_FROM_TOOLS = """
The answers come from the tools: the model finds them only by calling a tool and reading its
result. Never write an example's answer or any value a tool returned into the document; teach
when and how to call the tools and how to read their results."""


@dataclass(kw_only=True)
class ReflectiveProposer(Proposer):
    """The optimizer model reads groups of rollouts and proposes typed edits (JSON).

    Failures are read in groups of `group_size`; successes (at most one group) separately, to
    learn what to keep. Invalid output is retried once with the validation error; a group
    still invalid is dropped and recorded, never a crash. An agent's rollout is shown with its
    trajectory (each tool call, its result or error, and the answer).

    `state_answers=False` (an agent whose answers only its tools know): the model is told so,
    and an edit whose text states a training example's answer (a label, as a word of at least
    `MIN_ANSWER_CHARS` characters) is dropped and noted (`reflection_answer_dropped`): a
    rule such as "The population of Telkesstad is 156766." teaches the agent to answer from
    memory, never to call the tool.
    """

    group_size: int = 4
    max_failure_groups: int = 2
    read_successes: bool = True
    max_edits_per_group: int = 3
    state_answers: bool = True
    name: str = "reflective"

    def max_calls(self, batch_size: int) -> int:
        """Two calls (a reply and its one retry) for each group read: the failures' groups and
        one group of successes."""
        failure_groups = min(math.ceil(batch_size / self.group_size), self.max_failure_groups)
        return 2 * (failure_groups + int(self.read_successes and batch_size > 1))

    def propose(self, request: ProposalRequest) -> list[EditGroup]:
        failures = request.failures()
        groups: list[tuple[bool, list[tuple[Example, Rollout]]]] = [
            (True, failures[i : i + self.group_size])
            for i in range(0, len(failures), self.group_size)
        ][: self.max_failure_groups]
        successes = request.successes()
        if self.read_successes and successes:
            groups.append((False, successes[: self.group_size]))
        result: list[EditGroup] = []
        answers = () if self.state_answers else _answers(request)
        for index, (failure_driven, group) in enumerate(groups):
            edits = self._reflect(request, group, failure_driven, index)
            if answers:
                edits = _without_answers(request, edits, answers, index)
            if edits:
                addresses = tuple(e.id for e, _ in group) if failure_driven else ()
                kept = tuple(edits[: self.max_edits_per_group])
                result.append(EditGroup(kept, self.name, failure_driven, addresses=addresses))
        return result

    def _reflect(
        self,
        request: ProposalRequest,
        group: list[tuple[Example, Rollout]],
        failure_driven: bool,
        index: int,
    ) -> list[Edit]:
        system = _SYSTEM if self.state_answers else _SYSTEM + _FROM_TOOLS
        messages = [
            {"role": "system", "content": system},
            {"role": "user", "content": _reflection_prompt(request, group, failure_driven)},
        ]
        edits = ask_for_edits(request.optimizer_lm, messages, seed=request.step * 100 + index)
        if isinstance(edits, str):
            reason, _, reply = edits.partition("\n")
            request.note("reflection_dropped", group=index, reason=reason, reply=reply[:500])
            return []
        return edits


TOLD_REJECTED = 5
"""How many of the last rejected or struck proposals the prompt lists (the first
`TOLD_EDITS` edits of each): the proposer is told not to propose them again."""
TOLD_EDITS = 3

MIN_ANSWER_CHARS = 3
"""The shortest answer `state_answers=False` looks for in an edit (a one- or two-character
answer, such as a digit, is a word of too many rules to tell)."""


def _answers(request: ProposalRequest) -> tuple[re.Pattern[str], ...]:
    """The training examples' answers (every label that is one text or number: a program's
    labels name its answer, not this predictor's fields), each as a whole-word pattern (case
    ignored)."""
    golds = {
        str(value).strip()
        for example in [*request.trainset, *request.batch]
        for value in example.labels.values()
        if isinstance(value, str | int | float) and not isinstance(value, bool)
    }
    return tuple(
        re.compile(rf"(?<!\w){re.escape(g)}(?!\w)", re.IGNORECASE)
        for g in sorted(golds)
        if len(g) >= MIN_ANSWER_CHARS
    )


def _without_answers(
    request: ProposalRequest, edits: list[Edit], answers: tuple[re.Pattern[str], ...], group: int
) -> list[Edit]:
    """`edits` less those whose new text states one of `answers` (noted)."""
    kept = []
    for edit in edits:
        text = edit.new if isinstance(edit, Replace) else edit.text if isinstance(edit, Add) else ""
        if any(a.search(text) for a in answers):
            request.note("reflection_answer_dropped", group=group, text=text[:300])
        else:
            kept.append(edit)
    return kept


def ask_for_edits(lm: LM, messages: list[dict[str, str]], *, seed: int) -> list[Edit] | str:
    """Ask the optimizer model for `{"edits": [...]}`; validate with pydantic; retry once with
    the validation error. An unreadable reply keeps the whole edits it did write
    (`_complete_edits`) without a retry. Returns the edits, or a string saying why the reply
    was dropped (first line: the reason; then the last reply). Never raises for bad output."""
    for attempt in range(2):
        try:
            reply = lm.complete(messages, seed=seed).text
        except ModelError as exc:
            return f"model error: {exc}"
        try:
            return list(_EditBatch.model_validate_json(_json_block(reply)).edits)
        except (pydantic.ValidationError, ValueError) as exc:
            completed = _complete_edits(reply)
            if completed:
                return completed
            if attempt == 1:
                return f"{_brief(exc)}\n{reply}"
            retry = f"That reply was invalid: {_brief(exc)}. Reply with the JSON only."
            messages = [
                *messages,
                {"role": "assistant", "content": reply},
                {"role": "user", "content": retry},
            ]
    return "no valid reply"


_EDIT: pydantic.TypeAdapter[Edit] = pydantic.TypeAdapter(_EditItem)


def _complete_edits(text: str) -> list[Edit]:
    """The edits an unreadable reply did complete: the whole `{...}` objects at the start of
    its array of edits, in order, up to the first that is cut off or is not an edit.

    A small model's reply is often cut by `max_tokens` in the middle of its second or third
    edit; the edits written before the cut are kept (they are screened like any other) rather
    than paying for a retry that is cut off again."""
    decoder = json.JSONDecoder()
    position = text.find("[") + 1
    edits: list[Edit] = []
    while 0 < position < len(text):
        position = len(text) - len(text[position:].lstrip(" \t\r\n,"))
        if not text.startswith("{", position):
            break
        try:
            item, position = decoder.raw_decode(text, position)
            edits.append(_EDIT.validate_python(item))
        except (json.JSONDecodeError, pydantic.ValidationError):
            break
    return edits


def _json_block(text: str) -> str:
    """The reply's JSON: the outermost object, or a bare array of edits (small models often
    drop the `{"edits": ...}` wrapper), wrapped as the object the schema expects."""
    start, end = text.find("{"), text.rfind("}")
    array_start, array_end = text.find("["), text.rfind("]")
    if 0 <= array_start < start and array_end > end:
        return '{"edits": ' + text[array_start : array_end + 1] + "}"
    if start < 0 or end <= start:
        raise ValueError("the reply contains no JSON object")
    return text[start : end + 1]


def _brief(exc: Exception) -> str:
    if isinstance(exc, pydantic.ValidationError):
        return "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:3])
    return str(exc)[:300]


def _reflection_prompt(
    request: ProposalRequest, group: list[tuple[Example, Rollout]], failure_driven: bool
) -> str:
    what = "FAILED" if failure_driven else "SUCCEEDED (keep what made these work)"
    parts = [
        f"# Task\n{request.module.description or request.module.name}",
        f"# Document\n{request.skill.text or '(empty)'}",
    ]
    cases = [f"# Examples the model {what}"]
    hook = getattr(request.module, "reflection_case", None)
    for example, rollout in group:
        if callable(hook):
            cases.append(hook(example, rollout))
            continue
        cases.append(
            f"- input: {json.dumps(dict(example.inputs), ensure_ascii=False, default=str)[:600]}\n"
            f"  output: {rollout.output[:300]!r}\n"
            # an agent's trace (Trajectory, HarnessRun) renders itself compactly
            + (
                f"  trajectory:\n{rollout.trace.render_for_reflection()}\n"
                if callable(getattr(rollout.trace, "render_for_reflection", None))
                else ""
            )
            + f"  expected: {gold_answer(request.module, example)}\n"
            f"  feedback: {rollout.feedback or rollout.prediction.error or ''}"
        )
    parts.append("\n".join(cases))
    if request.rejected:
        tried = [
            f"- {e.model_dump_json(exclude={'rationale'})} (delta {c.delta:+.3f})"
            for c in request.rejected[-TOLD_REJECTED:]
            for e in c.edits[:TOLD_EDITS]
        ]
        parts.append("# Already tried and rejected (do not propose again)\n" + "\n".join(tried))
    parts.append(f"# Limit\nYour edits together may change at most {request.budget_tokens} tokens.")
    return "\n\n".join(parts)
