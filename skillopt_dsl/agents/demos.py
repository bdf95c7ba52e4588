"""`ToolDemonstrationsProposer`: worked examples that show an agent the tool-call format.

A worked example is a real, short trajectory: the task, the reply that calls the tool in the
text protocol, the tool's actual result (the tool is run), and the answer. The calls come from
the example's reference solution, its `tool_calls` label: a list of
`{"tool": name, "arguments": {...}}`. Examples without one are skipped. Small models copy
examples well, so this is how a seed skill that never mentions the tools learns to use them.
No model is called; the edits are clipped to the learning rate and gated like any other.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from skillopt_dsl.agents.module import AgentModule
from skillopt_dsl.agents.protocol import ToolRequest, render_call
from skillopt_dsl.optimizers.proposers import (
    EditGroup,
    ProposalRequest,
    Proposer,
    edit_key,
    gold_answer,
)
from skillopt_dsl.skill import Add, Edit, Skill, tokenize
from skillopt_dsl.types import Example

__all__ = ["TOOLS_HEADING", "WORKED_HEADING", "ToolDemonstrationsProposer", "render_tool_demo"]

WORKED_HEADING = "Worked examples"
TOOLS_HEADING = "Using tools"
PROTOCOL_RULE = (
    "To use a tool, reply with only a ```json block holding "
    '{"tool": "<name>", "arguments": {...}}. After you read the result, reply with the answer only.'
)


@dataclass(kw_only=True)
class ToolDemonstrationsProposer(Proposer):
    """Adds the tool-call rule once, then worked tool-use examples (failing examples first)."""

    per_step: int = 2
    max_demos: int = 4
    name: str = "tool-demonstrations"

    def max_calls(self, batch_size: int) -> int:
        return 0  # no model call

    def propose(self, request: ProposalRequest) -> list[EditGroup]:
        module = request.module
        if not isinstance(module, AgentModule):
            return []
        rejected = {edit_key(e) for c in request.rejected for e in c.edits}
        edits: list[Edit] = []
        if PROTOCOL_RULE not in request.skill.text:
            edits.append(Add(after=None, text=f"## {TOOLS_HEADING}\n\n{PROTOCOL_RULE}"))
        edits += self._demos(request, module, rejected, has_section=_has(request.skill))
        edits = [e for e in edits if edit_key(e) not in rejected]
        if not edits:
            return []
        failing = bool(request.failures())
        return [EditGroup(tuple(edits), self.name, failing, "worked tool-use examples")]

    def _demos(
        self, request: ProposalRequest, module: AgentModule, rejected: set[str], has_section: bool
    ) -> list[Edit]:
        present = request.skill.text.count("\nInput: ") + request.skill.text.startswith("Input: ")
        room = max(0, min(self.per_step, self.max_demos - present))
        failing = [e for e, _ in request.failures()]
        others = [e for e in request.trainset if e not in failing]
        request.rng.shuffle(others)
        edits: list[Edit] = []
        for example in failing + others:
            if len(edits) >= room:
                break
            demo = render_tool_demo(module, example)
            if demo is None or demo in request.skill.text:
                continue
            if len(tokenize(demo)) > request.budget_tokens:
                continue
            text = demo if has_section or edits else f"## {WORKED_HEADING}\n\n{demo}"
            edit = Add(after=WORKED_HEADING if has_section or edits else None, text=text)
            if edit_key(edit) not in rejected:
                edits.append(edit)
        return edits


def render_tool_demo(module: AgentModule, example: Example) -> str | None:
    """The worked example for `example` (None when it has no usable `tool_calls` label)."""
    calls = _reference_calls(example)
    if not calls:
        return None
    state = module.env.reset(example) if module.env is not None else None
    tools = module.tools_for(state)
    task = module.render(Skill(""), example)[-1]["content"]
    lines = [f"Input: {task}"]
    for call in calls:
        chosen = tools.get(call.name)
        if chosen is None:
            return None
        result = chosen.invoke(call.arguments)
        lines += [f"Reply: {render_call(call)}", f"Result of {call.name}: {result.text}"]
    lines.append(f"Answer: {gold_answer(module, example)}")
    return "\n".join(lines)


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
