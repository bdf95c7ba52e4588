"""`AgentModule`: a tool-using, multi-turn target, trained like any other `SkillModule`.

Declare the task as usual (typed input and output fields, a seed skill, a metric) and add the
tools (typed functions) and, for tasks whose success is a state, an `Environment`::

    def lookup(city: str) -> dict:
        \"\"\"Look up a city's record.

        Args:
            city: the city's name.
        \"\"\"
        return TABLE[city]

    class Cities(AgentModule):
        \"\"\"Answer questions about cities using the lookup tool.\"\"\"
        question: str = InputField()
        answer: str = OutputField()
        skill = "Answer the question."
        tools = [lookup]
        metric = metrics.exact_match("answer")

How one example runs (`run`, the seam every optimizer uses): the skill is the system message and
the rendered inputs the user message; then a loop of at most `max_turns` model calls, each through
the run's `LM` (cached, counted, retried, and budgeted before it is sent: a `BudgetExceeded`
propagates mid-trajectory, after exactly the calls the budget allowed). A reply that asks for
tools runs them and sends each result back; a reply without a tool call is the final answer,
parsed into the output fields like any module's completion. A tool that raises, runs past its
timeout, does not exist or gets arguments of the wrong type returns the error to the model as its
result; none of them ends the run. A run that never answers stops at `max_turns` with a
prediction carrying that error.

Protocols: `"text"` appends the tool list and the fenced-JSON protocol
(`skillopt_dsl.agents.protocol`) to the user message and sends results back as user messages;
`"native"` uses the provider's own tool calling through litellm (the `LM` must wrap a
`NativeToolBackend`); `"auto"` picks native when the `LM` wraps a `NativeToolBackend`, text
otherwise (the embedded model included).

Scoring (`score`): the metric, when declared; a metric with a `trace` parameter receives the whole
`Trajectory` (messages, tool calls with arguments and results, final answer, final state) as
`trace=`. Without a metric, the environment's `check` of the final state is the score.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from skillopt_dsl.agents.demos import ToolDemonstrationsProposer
from skillopt_dsl.agents.environment import Environment
from skillopt_dsl.agents.protocol import (
    ToolRequest,
    bind_positional,
    parse_tool_calls,
    render_tool_guide,
)
from skillopt_dsl.agents.tools import Tool, ToolResult, as_tools
from skillopt_dsl.agents.trajectory import StopReason, ToolCall, Trajectory, Turn
from skillopt_dsl.errors import BudgetExceeded, MetricError, ModelError, UserInputError
from skillopt_dsl.lm.base import Message
from skillopt_dsl.metrics.score import Score, call_metric, to_score
from skillopt_dsl.module import RunOutcome, SkillModule
from skillopt_dsl.optimizers.proposers import (
    AnswerShapeProposer,
    FormatRuleProposer,
    Proposer,
    ReflectiveProposer,
)
from skillopt_dsl.skill import Skill
from skillopt_dsl.types import Example

if TYPE_CHECKING:
    from skillopt_dsl.lm import LM

__all__ = ["AgentModule", "Protocol"]

Protocol = Literal["auto", "text", "native"]

MAX_CALLS_PER_TURN = 4
"""Tool calls run from one reply; further calls in the same reply are answered with an error."""

_FENCE = re.compile(r"```.*?```", re.DOTALL)


class AgentModule(SkillModule):
    """A `SkillModule` whose examples run as a tool-using loop (see the module docstring).

    Class attributes (each also a keyword argument of the constructor): `tools` (typed functions
    or `Tool`s), `environment` (an `Environment`, or None), `max_turns` (model calls per example),
    `protocol` ("auto", "text" or "native") and `max_result_chars` (a tool result longer than
    this reaches the model cut, with the cut stated).
    """

    tools: ClassVar[Sequence[Tool | Callable[..., Any]]] = ()
    environment: ClassVar[Environment[Any] | None] = None
    max_turns: ClassVar[int] = 6
    protocol: ClassVar[Protocol] = "auto"
    max_result_chars: ClassVar[int] = 2000

    def __init__(
        self,
        *,
        skill: str | Path | Skill | None = None,
        metric: Callable[..., Any] | None = None,
        tools: Sequence[Tool | Callable[..., Any]] | None = None,
        environment: Environment[Any] | None = None,
        max_turns: int | None = None,
        protocol: Protocol | None = None,
    ) -> None:
        super().__init__(skill=skill, metric=metric)
        self.settings = _AgentSettings(
            max_turns=max_turns if max_turns is not None else type(self).max_turns,
            protocol=protocol if protocol is not None else type(self).protocol,
            max_result_chars=type(self).max_result_chars,
        )
        self.toolset: dict[str, Tool] = as_tools(tools if tools is not None else type(self).tools)
        self.env: Environment[Any] | None = (
            environment if environment is not None else type(self).environment
        )
        if not self.toolset and self.env is None:
            raise UserInputError(
                f"{self.name} has no tools and no environment; give it tools=[...] "
                "(typed functions) or an Environment"
            )

    # -- running one example -------------------------------------------------------------------
    def run(self, skill: Skill, example: Example, lm: LM, *, seed: int) -> RunOutcome:
        """Run the tool loop on `example` under `skill` (see the module docstring)."""
        started = time.perf_counter()
        state = self.env.reset(example) if self.env is not None else None
        tools = self.episode_tools(skill, state)
        native = self._uses_native(lm)
        loop = _Loop(self, tools, native, self._first_messages(skill, example, tools, native))
        stop = loop.run(lm, seed)
        final = loop.turns[-1].reply if stop == "answered" else ""
        prediction = (
            self.parse(final)
            if stop == "answered"
            else self.failed_prediction(
                f"the agent gave no final answer within max_turns={self.settings.max_turns}",
                raw=loop.turns[-1].reply if loop.turns else "",
            )
        )
        trajectory = Trajectory(
            messages=tuple(loop.messages),
            turns=tuple(loop.turns),
            answer=final,
            prediction=prediction,
            stop_reason=stop,
            max_turns=self.settings.max_turns,
            final_state=self.env.snapshot(state) if self.env is not None else None,
        )
        return RunOutcome(
            prediction=prediction,
            output=final,
            prompt_tokens=loop.prompt_tokens,
            completion_tokens=loop.completion_tokens,
            latency_s=time.perf_counter() - started,
            cached=bool(loop.turns) and all(t.cached for t in loop.turns),
            calls=len(loop.turns),
            trace=trajectory,
        )

    def score(self, example: Example, outcome: RunOutcome) -> Score:
        """The metric (given the trajectory as `trace=` when it takes one), else the
        environment's check of the final state."""
        trajectory = outcome.trace
        if self._metric is not None:
            return call_agent_metric(self._metric, example, outcome, trajectory)
        if self.env is not None and isinstance(trajectory, Trajectory):
            return _check_state(self.env, example, trajectory)
        return call_metric(self.metric_fn, example, outcome.prediction)

    def default_proposers(self) -> list[Proposer]:
        """The proposers that suit an agent (what `compile`'s default search uses on it): worked
        examples that show the tool call, its result and the answer
        (`ToolDemonstrationsProposer`, from the rows' `tool_calls` or the agent's own successful
        runs), the output-format and answer-shape rules (no model call), and reflection that
        reads each trajectory and never writes a training example's answer into the skill
        (`ReflectiveProposer(state_answers=False)`). Worked examples without the call
        (`DemonstrationsProposer`) are not among them: an agent whose answers only a tool
        knows would learn from them to answer without it. Override to choose others."""
        return [
            ToolDemonstrationsProposer(),
            FormatRuleProposer(),
            AnswerShapeProposer(),
            ReflectiveProposer(state_answers=False),
        ]

    def tool_guide(self, tools: dict[str, Tool] | None = None) -> str:
        """The text-protocol tool list and instructions appended to the user message."""
        return render_tool_guide(tools if tools is not None else self.toolset)

    def episode_tools(self, skill: Skill, state: Any) -> dict[str, Tool]:
        """The tools of one episode under `skill`: the module's and the environment's
        (`tools_for`) by default. A module whose tools read the skill being trained (a skill
        folder's reference files) overrides this; the loop itself is the same."""
        del skill
        return self.tools_for(state)

    # -- helpers ---------------------------------------------------------------------------------
    def tools_for(self, state: Any) -> dict[str, Tool]:
        if self.env is None:
            return self.toolset
        bound = as_tools(self.env.tools(state))
        clash = sorted(set(bound) & set(self.toolset))
        if clash:
            raise UserInputError(f"{self.name}: tools {clash} come from both the module and env")
        return {**self.toolset, **bound}

    def _uses_native(self, lm: LM) -> bool:
        from skillopt_dsl.agents.native import NativeToolBackend

        wraps_native = isinstance(lm.backend, NativeToolBackend)
        if self.settings.protocol == "native" and not wraps_native:
            raise UserInputError(
                f"{self.name} uses protocol='native', but the LM wraps {lm.backend!r}; pass "
                "lm=LM(NativeToolBackend('<model>')) or use protocol='text'"
            )
        return wraps_native and self.settings.protocol != "text"

    def _first_messages(
        self, skill: Skill, example: Example, tools: dict[str, Tool], native: bool
    ) -> list[Message]:
        messages = self.render(skill, example)
        if native:
            schemas = json.dumps([t.schema() for t in tools.values()], sort_keys=True)
            messages[0] = {**messages[0], "tools": schemas}
        else:
            user = messages[-1]
            messages[-1] = {**user, "content": f"{user['content']}\n\n{self.tool_guide(tools)}"}
        return messages


@dataclass(frozen=True)
class _AgentSettings:
    max_turns: int
    protocol: Protocol
    max_result_chars: int

    def __post_init__(self) -> None:
        if self.max_turns < 1:
            raise UserInputError(f"max_turns must be >= 1, got {self.max_turns}")
        if self.protocol not in ("auto", "text", "native"):
            raise UserInputError(
                f"protocol must be 'auto', 'text' or 'native', got {self.protocol!r}"
            )
        if self.max_result_chars < 1:
            raise UserInputError(f"max_result_chars must be >= 1, got {self.max_result_chars}")


@dataclass
class _Loop:
    """One example's conversation: messages, turns and token totals."""

    module: AgentModule
    tools: dict[str, Tool]
    native: bool
    messages: list[Message]
    turns: list[Turn] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def run(self, lm: LM, seed: int) -> StopReason:
        for index in range(1, self.module.settings.max_turns + 1):
            response = lm.complete(self.messages, seed=seed)
            self.prompt_tokens += response.prompt_tokens
            self.completion_tokens += response.completion_tokens
            requests = parse_tool_calls(response.text, self.tools)
            if not requests:
                self.turns.append(Turn(index, response.text, (), response.cached))
                return "answered"
            calls = [self._call(request, index, n) for n, request in enumerate(requests)]
            self.turns.append(Turn(index, response.text, tuple(calls), response.cached))
            self._append_exchange(response.text, calls)
        return "max_turns"

    def _call(self, request: ToolRequest, turn: int, position: int) -> ToolCall:
        call_id = request.call_id or f"call_{turn}_{position + 1}"
        result = self._execute(request, position)
        text = _cut_for_model(result.text, self.module.settings.max_result_chars)
        return ToolCall(
            request.name, dict(request.arguments), text, result.error, result.duration_s, call_id
        )

    def _execute(self, request: ToolRequest, position: int) -> ToolResult:
        if position >= MAX_CALLS_PER_TURN:
            return ToolResult("", f"not run: at most {MAX_CALLS_PER_TURN} tool calls per reply")
        chosen = self.tools.get(request.name)
        if chosen is None:
            names = ", ".join(self.tools) or "(none)"
            return ToolResult(
                "", f"there is no tool named {request.name!r}; the tools are: {names}"
            )
        if request.problem is not None:
            return ToolResult("", f"bad arguments for tool {request.name!r}: {request.problem}")
        return chosen.invoke(bind_positional(chosen, request.arguments))

    def _append_exchange(self, reply: str, calls: list[ToolCall]) -> None:
        if self.native:
            self.messages.append(_native_assistant(reply, calls))
            self.messages += [
                {"role": "tool", "content": c.result, "tool_call_id": c.call_id, "name": c.name}
                for c in calls
            ]
            return
        self.messages.append({"role": "assistant", "content": reply})
        self.messages += [
            {"role": "user", "content": f"Result of {c.name}: {c.result}"} for c in calls
        ]


def _native_assistant(reply: str, calls: list[ToolCall]) -> Message:
    tool_calls = [
        {
            "id": c.call_id,
            "type": "function",
            "function": {"name": c.name, "arguments": json.dumps(dict(c.arguments))},
        }
        for c in calls
    ]
    prose = _FENCE.sub("", reply).strip()
    return {"role": "assistant", "content": prose, "tool_calls": json.dumps(tool_calls)}


def _cut_for_model(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n[... {len(text) - limit} more characters cut]"


def call_agent_metric(
    metric: Callable[..., Any], example: Example, outcome: RunOutcome, trace: Any
) -> Score:
    """Run a metric on an agent run: `call_metric` with the run's record (a trajectory, a
    harness run) as what a `trace` form receives. A metric that raises is a `MetricError`."""
    return call_metric(metric, example, outcome.prediction, trace=trace)


def _check_state(env: Environment[Any], example: Example, trajectory: Trajectory) -> Score:
    name = f"{type(env).__name__}.check"
    try:
        result = env.check(example, trajectory.final_state)
    except (MetricError, BudgetExceeded, ModelError):
        raise
    except NotImplementedError as exc:
        raise UserInputError(str(exc)) from None
    except Exception as exc:
        raise MetricError(
            f"{name} raised {type(exc).__name__}: {exc} on example {example.id!r}",
            example_id=example.id,
            metric=name,
        ) from exc
    return to_score(result, metric=name, example_id=example.id)
