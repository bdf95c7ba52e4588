"""`NativeToolBackend`: a provider's own tool calling, through litellm, behind the `LM` door.

`AgentModule` keeps one transcript for both protocols, as plain string-valued messages, so every
turn goes through `LM.complete` and its cache, budget, retries and accounting unchanged. In
native mode the transcript carries the provider's fields as strings, which this backend turns
into litellm's request and back:

- the first message carries `tools`: the JSON list of the tools' schemas (so the tools are part of
  the cache key); it becomes litellm's `tools=` argument;
- an assistant message that called tools carries `tool_calls` as a JSON string;
- each result is a `{"role": "tool", "tool_call_id": ..., "name": ..., "content": ...}` message.

The reply's native tool calls come back as fenced JSON calls with their ids
(`skillopt_dsl.agents.protocol.render_call`), which the agent's parser reads like any other.

Use it as `LM(NativeToolBackend("openai/gpt-4o-mini"))`. A model litellm does not list as
supporting function calling is refused at construction (use the text protocol instead) unless
`check_support=False` (e.g. an OpenAI-compatible server litellm does not know).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from skillopt_dsl.agents.protocol import ToolRequest, render_call
from skillopt_dsl.errors import UserInputError
from skillopt_dsl.lm.base import SamplingParams
from skillopt_dsl.lm.litellm_backend import LiteLLMBackend

__all__ = ["NativeToolBackend"]


class NativeToolBackend(LiteLLMBackend):
    """A `Backend` calling `litellm.completion` with `tools=` (see the module docstring).

    Built on `LiteLLMBackend`: the request, the price, the cost lookup and `identity()` (the
    endpoint included, so two servers with one model name never share a cache entry) are
    that backend's; this one only turns the transcript into native messages and `tools=`, and
    the reply's native tool calls back into fenced calls.

    Args:
        model: a litellm model string with native tool calling.
        api_base: optional endpoint (an OpenAI-compatible server).
        timeout_s: per-request timeout.
        check_support: refuse models litellm does not list as supporting function calling.
    """

    def __init__(
        self,
        model: str,
        *,
        api_base: str | None = None,
        timeout_s: float = 120.0,
        check_support: bool = True,
    ) -> None:
        if not isinstance(model, str) or not model.strip() or model.startswith("local/"):
            raise UserInputError(
                f"NativeToolBackend needs a provider model string with tool calling, got "
                f"{model!r}; the embedded local models use the text protocol (protocol='text')"
            )
        super().__init__(model, api_base=api_base, timeout_s=timeout_s)
        if check_support and not _supports_tools(model):
            raise UserInputError(
                f"litellm does not list {model!r} as supporting function calling; use the "
                "text protocol (a plain model string), or pass check_support=False if it does"
            )

    def _request(
        self, messages: Sequence[Mapping[str, object]], params: SamplingParams
    ) -> dict[str, object]:
        """`LiteLLMBackend`'s request, with native messages and the transcript's `tools`."""
        request = super()._request([to_native(m) for m in messages], params)
        tools = _tools_of(messages)
        if tools:
            request["tools"] = tools
        return request

    def _reply_text(self, message: Any) -> str:
        return reply_text(message)

    def __repr__(self) -> str:
        return f"NativeToolBackend({self.model!r})"


def to_native(message: Mapping[str, object]) -> dict[str, object]:
    """A transcript message as the provider expects it (the `tools` key removed)."""
    native: dict[str, object] = {k: v for k, v in message.items() if k != "tools"}
    if "tool_calls" in native:
        calls = native["tool_calls"]
        native["tool_calls"] = json.loads(calls) if isinstance(calls, str | bytes) else calls
        native["content"] = native.get("content") or None
    return native


def reply_text(message: Any) -> str:
    """The reply's prose followed by its native tool calls in the canonical fenced form."""
    parts = [str(getattr(message, "content", None) or "")]
    for call in getattr(message, "tool_calls", None) or []:
        function = call.function
        raw = function.arguments or "{}"
        try:
            arguments = json.loads(raw)
        except ValueError:
            arguments = {"_unparsed": raw}
        if not isinstance(arguments, dict):
            arguments = {"_unparsed": raw}
        parts.append(render_call(ToolRequest(str(function.name), arguments, str(call.id or ""))))
    return "\n".join(p for p in parts if p)


def _tools_of(messages: Sequence[Mapping[str, object]]) -> list[Any]:
    for message in messages:
        if "tools" in message:
            raw = message["tools"]
            tools = json.loads(raw) if isinstance(raw, str | bytes | bytearray) else raw
            return tools if isinstance(tools, list) else []
    return []


def _supports_tools(model: str) -> bool:
    from skillopt_dsl.lm._litellm import litellm

    try:
        return bool(litellm.supports_function_calling(model=model))
    except Exception:  # litellm raises for models it has never heard of
        return False
