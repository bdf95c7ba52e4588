"""`ToolDemonstrationsProposer`: worked examples that show an agent the tool call, its result
and the answer.

A worked example is a real, short trajectory: the task, the reply that calls the tool in the
text protocol, the tool's actual result, and the answer. It comes from the example's reference
solution, its `tool_calls` label (a list of `{"tool": name, "arguments": {...}}`; the tool is
run for the real result), else from the agent's own successful run on that example in the
batch (every tool call it made ran, the metric scored it 1, and it called at least one tool).
An example with neither gives none: a worked example never shows an answer without the call
that found it (a model copying it would learn to skip the tool). Small models copy examples
well, so this is how a seed skill that never mentions the tools learns to use them. No model is
called; the edits are clipped to the learning rate and gated like any other.

It reads only what every tool-using module has (`ToolUser`: its environment, its tools and its
rendered task); a module without tools gets no proposal.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import islice
from typing import Any, Protocol, runtime_checkable

from skillopt_dsl.agents.protocol import ToolRequest, render_call
from skillopt_dsl.agents.tools import Tool
from skillopt_dsl.agents.trajectory import Trajectory
from skillopt_dsl.evaluate import Rollout
from skillopt_dsl.lm.base import Message
from skillopt_dsl.module import SkillModule
from skillopt_dsl.optimizers.proposers import (
    EditGroup,
    ProposalRequest,
    Proposer,
    edit_key,
    gold_answer,
)
from skillopt_dsl.skill import Add, Edit, Skill, token_distance
from skillopt_dsl.types import Example

__all__ = [
    "TOOLS_HEADING",
    "WORKED_HEADING",
    "ToolDemonstrationsProposer",
    "ToolUser",
    "render_tool_demo",
    "trajectory_demo",
]

WORKED_HEADING = "Worked examples"
TOOLS_HEADING = "Using tools"
PROTOCOL_RULE = (
    "To use a tool, reply with only a ```json block holding "
    '{"tool": "<name>", "arguments": {...}}. After you read the result, reply with the answer only.'
)
SHORT_RULE = (
    "Call a tool as the worked examples show. After you read its result, reply with the answer "
    "only."
)
"""The rule proposed with worked examples (they spell the call out; it fits beside them within
a small learning rate where `PROTOCOL_RULE` does not)."""


@runtime_checkable
class ToolUser(Protocol):
    """What the proposer reads of a tool-using module (`AgentModule` has it)."""

    env: Any

    def tools_for(self, state: Any) -> dict[str, Tool]: ...

    def render(self, skill: Skill, inputs: Example | Mapping[str, object]) -> list[Message]: ...


@dataclass(kw_only=True)
class ToolDemonstrationsProposer(Proposer):
    """Adds the tool-call rule once, with worked tool-use examples (failing examples first),
    as many as the step's learning rate holds: the short rule and the examples; else the
    examples alone; else, where no example can be had or none fits, the full rule
    (`PROTOCOL_RULE`). Measured on Qwen2.5-0.5B, which calls the tool unprompted but calls it
    again after every result: the rule's "reply with the answer only" is what ends its loop."""

    per_step: int = 2
    max_demos: int = 4
    name: str = "tool-demonstrations"

    def max_calls(self, batch_size: int) -> int:
        return 0  # no model call

    def propose(self, request: ProposalRequest) -> list[EditGroup]:
        if not isinstance(request.module, ToolUser):
            return []
        text = request.skill.text
        ruled = PROTOCOL_RULE in text or SHORT_RULE in text
        present = text.count("\nInput: ") + text.startswith("Input: ")
        room = max(0, min(self.per_step, self.max_demos - present))
        demos = list(islice((d for d in self._demos(request) if d not in text), 3 * room))
        # The short rule with worked examples (the rule says to answer once the result is in,
        # which a worked example shows but a small model does not infer); else the examples
        # alone; else the full rule, which spells the call out.
        plans = (
            [(None, demos)] if ruled else [(SHORT_RULE, demos), (None, demos), (PROTOCOL_RULE, [])]
        )
        for rule, offered in plans:
            fitted = _Fitted(request, rule, offered, room)
            if fitted.demos:
                break
        if not fitted.edits:
            return []
        failing = bool(request.failures())
        return [EditGroup(tuple(fitted.edits), self.name, failing, "worked tool-use examples")]

    @staticmethod
    def _demos(request: ProposalRequest) -> Iterator[str]:
        """Worked examples in the order they are offered: the batch's failures first, then
        the rest of the training set at random."""
        failing = [e for e, _ in request.failures()]
        others = [e for e in request.trainset if e not in failing]
        request.rng.shuffle(others)
        by_id = {e.id: r for e, r in zip(request.batch, request.rollouts, strict=True)}
        for example in failing + others:
            demo = render_tool_demo(request.module, example)
            if demo is None:
                demo = trajectory_demo(request.module, example, by_id.get(example.id))
            if demo is not None:
                yield demo


class _Fitted:
    """A proposal built edit by edit: `rule` (under its heading) if given, then as many of
    `demos` as fit (at most `room`), each kept only where the whole group still applies and stays within the
    step's learning-rate budget, measured as the optimizer measures it."""

    def __init__(
        self, request: ProposalRequest, rule: str | None, demos: list[str], room: int
    ) -> None:
        self.seed = self.skill = request.skill
        self.budget = request.budget_tokens
        self.rejected = {edit_key(e) for c in request.rejected for e in c.edits}
        self.edits: list[Edit] = []
        self.demos = 0
        if rule is not None:
            self.add(Add(after=None, text=f"## {TOOLS_HEADING}\n\n{rule}"))
        for demo in demos:
            if self.demos >= room:
                break
            if _has(self.skill):
                edit = Add(after=WORKED_HEADING, text=demo)
            else:
                edit = Add(after=None, text=f"## {WORKED_HEADING}\n\n{demo}")
            self.demos += self.add(edit)

    def add(self, edit: Edit) -> bool:
        if edit_key(edit) in self.rejected:
            return False
        trial, report = self.skill.apply([edit])
        if report.outcomes[0].status != "applied":
            return False
        if token_distance(self.seed.text, trial.text) > self.budget:
            return False
        self.skill, self.edits = trial, [*self.edits, edit]
        return True


def render_tool_demo(module: SkillModule, example: Example) -> str | None:
    """The worked example for `example` from its reference calls (None when it has no usable
    `tool_calls` label, or `module` has no tools)."""
    calls = _reference_calls(example)
    if not calls or not isinstance(module, ToolUser):
        return None
    state = module.env.reset(example) if module.env is not None else None
    tools = module.tools_for(state)
    lines = [f"Input: {_task(module, example)}"]
    for call in calls:
        chosen = tools.get(call.name)
        if chosen is None:
            return None
        result = chosen.invoke(call.arguments)
        lines += [f"Reply: {render_call(call)}", f"Result of {call.name}: {result.text}"]
    lines.append(f"Answer: {gold_answer(module, example)}")
    return "\n".join(lines)


def trajectory_demo(module: SkillModule, example: Example, rollout: Rollout | None) -> str | None:
    """The worked example for `example` from the agent's own run in `rollout`: the calls it
    made, their results and its answer; None unless the metric scored the run 1, it called at
    least one tool and every call ran."""
    trace = rollout.trace if rollout is not None else None
    if rollout is None or rollout.score < 1.0 or not isinstance(trace, Trajectory):
        return None
    calls = trace.tool_calls
    if not calls or not all(c.ok for c in calls) or not trace.answer.strip():
        return None
    lines = [f"Input: {_task(module, example)}"]
    for call in calls:
        request = ToolRequest(call.name, dict(call.arguments))
        lines += [f"Reply: {render_call(request)}", f"Result of {call.name}: {call.result}"]
    lines.append(f"Answer: {trace.answer.strip()}")
    return "\n".join(lines)


def _task(module: SkillModule, example: Example) -> str:
    return str(module.render(Skill(""), example)[-1]["content"])


def _reference_calls(example: Example) -> list[ToolRequest]:
    raw = example.labels.get("tool_calls")
    if not isinstance(raw, Sequence) or isinstance(raw, str):
        return []
    calls = []
    for item in raw:
        if not isinstance(item, Mapping) or not isinstance(item.get("tool"), str):
            return []
        arguments: Any = item.get("arguments") or {}
        if isinstance(arguments, str):
            arguments = json.loads(arguments)
        calls.append(ToolRequest(item["tool"], dict(arguments)))
    return calls


def _has(skill: Skill) -> bool:
    return any((s.heading or "").strip() == WORKED_HEADING for s in skill.sections())
