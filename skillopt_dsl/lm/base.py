"""The backend contract every model implements, and the records a call produces.

A *backend* turns one chat request into one completion. It knows nothing of caching, budgets,
retries or accounting: `skillopt_dsl.lm.LM` wraps any backend with those. Two backends ship:
`LiteLLMBackend` (any litellm provider string, the embedded `local/smollm2-135m` included) and the
test fake `skillopt_dsl.testing.ScriptedLM`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

Message = dict[str, str]
"""One chat message: `{"role": "system" | "user" | "assistant", "content": "..."}`."""


@dataclass(frozen=True)
class SamplingParams:
    """Sampling parameters sent with every call; part of the cache key.

    `seed` is the rollout seed: two calls that differ only in seed are distinct cache entries,
    so repeated stochastic rollouts stay distinct while reruns of one seed hit the cache.
    """

    temperature: float = 0.0
    max_tokens: int = 256
    seed: int = 0


@dataclass(frozen=True)
class Completion:
    """What a backend returns for one call. `cost_usd` is `None` when the price is unknown."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float | None = None


@runtime_checkable
class Backend(Protocol):
    """A model: `generate` must be thread-safe and may raise on failure (the client retries)."""

    @property
    def model(self) -> str:
        """The model's name as litellm spells it (`openai/gpt-4o-mini`, `local/smollm2-135m`)."""
        ...

    def generate(self, messages: list[Message], params: SamplingParams) -> Completion:
        """Run one chat completion."""
        ...
