"""`ScriptedLM`: a FAKE model for tests. It never calls a real provider.

It answers each request with whatever a Python function returns, records every request it
saw (with its sampling parameters), and reports tokens as whitespace-separated words. Wrap it in
`skillopt_dsl.lm.LM` to get the real cache, budget, retry and concurrency behaviour around it.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable

from skillopt_dsl.lm.base import Completion, Message, SamplingParams
from skillopt_dsl.lm.pricing import Price


class ScriptedLM:
    """A fake `Backend` for tests: `respond(messages) -> text`, thread-safe, records `.calls`.

    `respond` may raise to simulate provider failures (the `LM` client retries transient ones).
    `cost_per_call` is its price (`price()` is a flat per-call fee, what a dollar budget
    reserves); `None` simulates a model with an unknown price. `send_usage=False` simulates a
    provider reply without token usage (0 tokens reported, which `LM` estimates and flags).

    >>> from skillopt_dsl.lm import LM
    >>> fake = ScriptedLM(lambda messages: "plausible")
    >>> LM(fake).complete([{"role": "user", "content": "Is it?"}]).text
    'plausible'
    >>> len(fake.calls)
    1
    """

    def __init__(
        self,
        respond: Callable[[list[Message]], str],
        *,
        model: str = "scripted/fake",
        cost_per_call: float | None = 0.0,
        send_usage: bool = True,
    ) -> None:
        self._respond = respond
        self._model = model
        self._cost_per_call = cost_per_call
        self._send_usage = send_usage
        self._lock = threading.Lock()
        self._calls: list[list[Message]] = []
        self._params: list[SamplingParams] = []

    @property
    def model(self) -> str:
        """The fake model name."""
        return self._model

    @property
    def calls(self) -> list[list[Message]]:
        """Copies of the messages of every request, in arrival order."""
        with self._lock:
            return copy.deepcopy(self._calls)

    @property
    def params(self) -> list[SamplingParams]:
        """The sampling parameters of every request, in arrival order."""
        with self._lock:
            return list(self._params)

    def price(self) -> Price | None:
        """`cost_per_call` as a flat per-call price (None: unknown)."""
        return None if self._cost_per_call is None else Price(0.0, 0.0, self._cost_per_call)

    def generate(self, messages: list[Message], params: SamplingParams) -> Completion:
        """Record the request, then answer with `respond(messages)`."""
        with self._lock:
            self._calls.append(copy.deepcopy(messages))
            self._params.append(params)
        text = self._respond(copy.deepcopy(messages))
        if not self._send_usage:
            return Completion(text=text, prompt_tokens=0, completion_tokens=0, cost_usd=0.0)
        return Completion(
            text=text,
            prompt_tokens=sum(len(m.get("content", "").split()) for m in messages),
            completion_tokens=len(text.split()),
            cost_usd=self._cost_per_call,
        )

    def __repr__(self) -> str:
        return f"ScriptedLM(model={self._model!r})"
