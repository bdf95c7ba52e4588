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
from collections.abc import Mapping
from typing import Any

from skillopt_dsl.agents.protocol import ToolRequest, render_call
from skillopt_dsl.errors import UserInputError
from skillopt_dsl.lm.base import Completion, Message, SamplingParams

__all__ = ["NativeToolBackend"]


class NativeToolBackend:
    """A `Backend` calling `litellm.completion` with `tools=` (see the module docstring).

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
        if timeout_s <= 0:
            raise UserInputError(f"timeout_s must be > 0, got {timeout_s!r}.")
        if check_support and not _supports_tools(model):
            raise UserInputError(
                f"litellm does not list {model!r} as supporting function calling; use the "
                "text protocol (a plain model string), or pass check_support=False if it does"
            )
        self._model, self._api_base, self._timeout_s = model, api_base, timeout_s

    @property
    def model(self) -> str:
        """The litellm model string."""
        return self._model

    def generate(self, messages: list[Message], params: SamplingParams) -> Completion:
        """One completion with native tools; tool calls come back as fenced JSON calls."""
        from skillopt_dsl.lm._litellm import litellm

        request: dict[str, Any] = {
            "model": self._model,
            "messages": [to_native(m) for m in messages],
            "temperature": params.temperature,
            "max_tokens": params.max_tokens,
            "seed": params.seed,
            "timeout": self._timeout_s,
            "max_retries": 0,
            "num_retries": 0,
            "drop_params": True,
            **params.provider_kwargs(),  # top_p, stop, response_format, reasoning effort
        }
        tools = _tools_of(messages)
        if tools:
            request["tools"] = tools
        if self._api_base is not None:
            request["api_base"] = self._api_base
        response = litellm.completion(**request)
        usage = getattr(response, "usage", None)
        return Completion(
            text=reply_text(response.choices[0].message),
            prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
            completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
            cost_usd=_cost(response, self._model),
        )

    def __repr__(self) -> str:
        return f"NativeToolBackend({self._model!r})"


def to_native(message: Mapping[str, str]) -> dict[str, Any]:
    """A transcript message as the provider expects it (the `tools` key removed)."""
    native: dict[str, Any] = {k: v for k, v in message.items() if k != "tools"}
    if "tool_calls" in native:
        native["tool_calls"] = json.loads(native["tool_calls"])
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


def _tools_of(messages: list[Message]) -> list[Any]:
    for message in messages:
        if "tools" in message:
            tools = json.loads(message["tools"])
            return tools if isinstance(tools, list) else []
    return []


def _supports_tools(model: str) -> bool:
    from skillopt_dsl.lm._litellm import litellm

    try:
        return bool(litellm.supports_function_calling(model=model))
    except Exception:  # litellm raises for models it has never heard of
        return False


def _cost(response: Any, model: str) -> float | None:
    hidden = getattr(response, "_hidden_params", None)
    stamped = hidden.get("response_cost") if isinstance(hidden, Mapping) else None
    if isinstance(stamped, int | float) and not isinstance(stamped, bool):
        return float(stamped)
    from skillopt_dsl.lm._litellm import litellm

    try:
        return float(litellm.completion_cost(completion_response=response, model=model))
    except Exception:  # litellm has no price for this model: unpriced, never a made-up 0
        return None
