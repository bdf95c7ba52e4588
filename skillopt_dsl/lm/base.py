"""The backend contract every model implements, and the records a call produces.

A *backend* turns one chat request into one completion. It knows nothing of caching, budgets,
retries or accounting: `skillopt_dsl.lm.LM` wraps any backend with those. Two backends ship:
`LiteLLMBackend` (any litellm provider string, the embedded `local/smollm2-135m` included) and the
test fake `skillopt_dsl.testing.ScriptedLM`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Literal, Protocol, runtime_checkable

from skillopt_dsl.errors import UserInputError
from skillopt_dsl.json_types import JSONObject, JSONValue

Message = dict[str, str]
"""One chat message: `{"role": "system" | "user" | "assistant", "content": "..."}`."""

ReasoningEffort = Literal["minimal", "low", "medium", "high"]


@dataclass(frozen=True)
class SamplingParams:
    """Sampling parameters sent with every call; every field is part of the cache key.

    `seed` is the rollout seed: two calls that differ only in seed are distinct cache entries,
    so repeated stochastic rollouts stay distinct while reruns of one seed hit the cache.
    `max_tokens` also bounds what a call may cost, so budgets reserve it before the call.
    The optional fields are sent only when set: `top_p`, `stop` (a list is kept as a tuple),
    `response_format` (a JSON-ready mapping such as `{"type": "json_object"}`) and
    `reasoning_effort` (for reasoning models).
    """

    temperature: float = 0.0
    max_tokens: int = 256
    seed: int = 0
    top_p: float | None = None
    stop: tuple[str, ...] | None = None
    response_format: Mapping[str, JSONValue] | None = None
    reasoning_effort: ReasoningEffort | None = None

    def __post_init__(self) -> None:
        if self.stop is not None:
            stops = (self.stop,) if isinstance(self.stop, str) else tuple(self.stop)
            if not all(isinstance(s, str) for s in stops):
                raise UserInputError(f"SamplingParams.stop must be strings, got {self.stop!r}.")
            object.__setattr__(self, "stop", stops)
        if self.response_format is not None:
            try:  # a private copy, so mutating the caller's dict cannot change a cache key
                copied = json.loads(json.dumps(self.response_format, sort_keys=True))
            except (TypeError, ValueError) as exc:
                raise UserInputError(
                    f"SamplingParams.response_format must be JSON-ready ({exc}); pass a dict "
                    'such as {"type": "json_object"}.'
                ) from None
            object.__setattr__(self, "response_format", copied)

    def to_dict(self) -> JSONObject:
        """A JSON-ready record of every field (what the cache key and config.json hold)."""
        record = {f.name: getattr(self, f.name) for f in fields(self)}
        record["stop"] = None if self.stop is None else list(self.stop)
        record["response_format"] = (
            None if self.response_format is None else dict(self.response_format)
        )
        return record

    def provider_kwargs(self) -> JSONObject:
        """The optional fields that are set, as litellm / OpenAI request keywords."""
        optional: JSONObject = {
            "top_p": self.top_p,
            "stop": None if self.stop is None else list(self.stop),
            "response_format": None if self.response_format is None else dict(self.response_format),
            "reasoning_effort": self.reasoning_effort,
        }
        return {k: v for k, v in optional.items() if v is not None}


@dataclass(frozen=True)
class Completion:
    """What a backend returns for one call. `cost_usd` is `None` when the price is unknown.

    A backend whose provider sent no usage reports 0 tokens; `LM` then counts them with the
    model's tokenizer and sets `usage_estimated=True` (never records a real call as 0 tokens).
    """

    text: str
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float | None = None
    usage_estimated: bool = False


@runtime_checkable
class Backend(Protocol):
    """A model: `generate` must be thread-safe and may raise on failure (the client retries).

    Two optional methods refine what `LM` knows before a call; without them `LM` asks litellm
    about `model`:

    - `price() -> Price | None`: the model's price (None: unknown), used to reserve the worst
      case cost of a call under `Budget(max_usd=...)`.
    - `identity() -> Mapping[str, JSONValue]`: a JSON-ready record of everything besides the
      sampling parameters that changes an answer: `{"model", "api_base", "provider_params"}`
      (never an API key). It enters the response cache key and the run's config.json.
    """

    @property
    def model(self) -> str:
        """The model's name as litellm spells it (`openai/gpt-4o-mini`, `local/smollm2-135m`)."""
        ...

    def generate(self, messages: list[Message], params: SamplingParams) -> Completion:
        """Run one chat completion."""
        ...
