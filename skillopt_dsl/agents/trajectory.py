"""Trajectory records: what an agent did on one example, turn by turn.

A `Trajectory` is what `AgentModule.run` puts in `RunOutcome.trace` (and so in `Rollout.trace`):
the exact messages, every turn's reply with the tool calls it made (arguments, result, error,
duration), the final answer parsed into the module's outputs, the environment's final state and
why the loop stopped. Metrics that take a `trace` argument receive it; reflection reads its
compact rendering (`render_for_reflection`).

Compact rendering rule (stated, so a reader knows what was cut): a tool result or reply longer
than `CUT_ABOVE` characters keeps its first `KEEP_HEAD` and last `KEEP_TAIL` characters, with the
number of characters removed written between them. The first step that went wrong is marked with
`>>`: the first failed tool call (unknown tool, bad arguments, a raise or a timeout), else the
last turn when the loop ran out of turns, else the final answer.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypedDict

from skillopt_dsl.json_types import JSONObject
from skillopt_dsl.lm.base import Message
from skillopt_dsl.types import Prediction

__all__ = [
    "CUT_ABOVE",
    "KEEP_HEAD",
    "KEEP_TAIL",
    "StopReason",
    "ToolCall",
    "ToolCallRecord",
    "Trajectory",
    "Turn",
    "TurnRecord",
]

CUT_ABOVE = 240
KEEP_HEAD = 160
KEEP_TAIL = 40

StopReason = Literal["answered", "max_turns"]


class ToolCallRecord(TypedDict):
    """`ToolCall.to_dict()`: a tool call as JSON (arguments made JSON where they are not)."""

    name: str
    arguments: JSONObject
    result: str
    error: str | None
    duration_s: float
    call_id: str


class TurnRecord(TypedDict):
    """`Turn.to_dict()`: one model call of the loop and its tool calls."""

    index: int
    reply: str
    calls: list[ToolCallRecord]
    cached: bool


@dataclass(frozen=True)
class ToolCall:
    """One tool call: what the model asked for and what it got back."""

    name: str
    arguments: Mapping[str, object]
    result: str
    error: str | None = None
    duration_s: float = 0.0
    call_id: str = ""

    @property
    def ok(self) -> bool:
        """True when the tool ran and returned."""
        return self.error is None

    def to_dict(self) -> ToolCallRecord:
        """A JSON-ready dict."""
        return {
            "name": self.name,
            "arguments": _jsonable(dict(self.arguments)),
            "result": self.result,
            "error": self.error,
            "duration_s": round(self.duration_s, 4),
            "call_id": self.call_id,
        }


@dataclass(frozen=True)
class Turn:
    """One model call of the loop: its reply and the tool calls the reply asked for."""

    index: int
    reply: str
    calls: tuple[ToolCall, ...] = ()
    cached: bool = False

    def to_dict(self) -> TurnRecord:
        """A JSON-ready dict."""
        return {
            "index": self.index,
            "reply": self.reply,
            "calls": [c.to_dict() for c in self.calls],
            "cached": self.cached,
        }


@dataclass(frozen=True)
class Trajectory:
    """Everything one agent run did (see the module docstring)."""

    messages: tuple[Message, ...]
    turns: tuple[Turn, ...]
    answer: str
    prediction: Prediction
    stop_reason: StopReason
    max_turns: int
    final_state: Any = None

    @property
    def tool_calls(self) -> tuple[ToolCall, ...]:
        """Every tool call, in order."""
        return tuple(call for turn in self.turns for call in turn.calls)

    @property
    def n_turns(self) -> int:
        """How many model calls the run made."""
        return len(self.turns)

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready dict (the final state as JSON where it can be, else its repr)."""
        return {
            "messages": [dict(m) for m in self.messages],
            "turns": [t.to_dict() for t in self.turns],
            "answer": self.answer,
            "outputs": _jsonable(dict(self.prediction.outputs)),
            "error": self.prediction.error,
            "stop_reason": self.stop_reason,
            "max_turns": self.max_turns,
            "final_state": _jsonable(self.final_state),
        }

    def render_for_reflection(self) -> str:
        """A compact, numbered account of the run for an optimizer model (see the module doc)."""
        marked = self._failing_step()
        lines: list[str] = []
        for turn in self.turns:
            if not turn.calls:
                continue
            for position, call in enumerate(turn.calls):
                flag = ">>" if marked == (turn.index, position) else "  "
                args = json.dumps(_jsonable(dict(call.arguments)), ensure_ascii=False)
                outcome = f"ERROR {call.error}" if call.error else cut(call.result)
                lines.append(f"{flag} {turn.index}. call {call.name}({cut(args)}) -> {outcome}")
        lines.append(self._ending(marked))
        return "\n".join(lines)

    def _ending(self, marked: tuple[int, int] | None) -> str:
        flag = ">>" if marked == (self.n_turns, -1) else "  "
        if self.stop_reason == "max_turns":
            return f"{flag} stopped: no answer within max_turns={self.max_turns}"
        answer = cut(self.answer)
        why = f" (could not parse: {self.prediction.error})" if self.prediction.error else ""
        return f"{flag} {self.n_turns}. answered {answer!r}{why}"

    def _failing_step(self) -> tuple[int, int] | None:
        for turn in self.turns:
            for position, call in enumerate(turn.calls):
                if not call.ok:
                    return (turn.index, position)
        return (self.n_turns, -1)


def cut(text: str) -> str:
    """`text`, or its head and tail with the count of removed characters (the stated rule)."""
    text = " ".join(text.split())
    if len(text) <= CUT_ABOVE:
        return text
    removed = len(text) - KEEP_HEAD - KEEP_TAIL
    return f"{text[:KEEP_HEAD]} …[{removed} chars cut]… {text[-KEEP_TAIL:]}"


def _jsonable(value: Any) -> Any:
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        pass
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_jsonable(v) for v in value]
    return repr(value)
