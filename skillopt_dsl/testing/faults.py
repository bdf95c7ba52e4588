"""`FaultyBackend`: a FAKE, fault-injecting wrapper around any `Backend`, for reliability tests.

It never calls a real provider by itself: it forwards to the backend it wraps (normally a
`ScriptedLM`) and, at a set rate, replaces a call with a fault instead:

- `"exception"`: an `InjectedServerError` (HTTP 503, transient: the `LM` client retries it);
- `"timeout"`: an `InjectedTimeout` (a `TimeoutError`, transient);
- `"rate_limit"`: an `InjectedRateLimit` (HTTP 429 with a `Retry-After` header, transient);
- `"empty"`: a completion with empty text (not an exception: it reaches the parser);
- `"garbage"`: a completion of random printable noise;
- `"overlong"`: the inner answer followed by filler far past `params.max_tokens`.

Which call faults is a pure function of `(seed, request, how many times this request was seen)`,
so a run is reproducible under its seed whatever the thread interleaving, and a retried request
draws afresh (a retry can succeed).
"""

from __future__ import annotations

import hashlib
import json
import random
import string
import threading
from collections import Counter
from collections.abc import Sequence
from typing import Literal, get_args

from skillopt_dsl.lm.base import Backend, Completion, Message, SamplingParams

__all__ = [
    "FaultKind",
    "FaultyBackend",
    "InjectedRateLimit",
    "InjectedServerError",
    "InjectedTimeout",
]

FaultKind = Literal["exception", "timeout", "rate_limit", "empty", "garbage", "overlong"]
ALL_FAULTS: tuple[FaultKind, ...] = get_args(FaultKind)
RAISING_FAULTS: frozenset[str] = frozenset({"exception", "timeout", "rate_limit"})


class InjectedServerError(Exception):
    """A fake HTTP 503 from a provider (transient)."""

    status_code = 503


class InjectedTimeout(TimeoutError):
    """A fake request timeout (transient)."""


class InjectedRateLimit(Exception):
    """A fake HTTP 429 carrying a `Retry-After` header (transient)."""

    status_code = 429

    def __init__(self, message: str, retry_after_s: float) -> None:
        super().__init__(message)
        self.headers = {"Retry-After": f"{retry_after_s:g}"}


class FaultyBackend:
    """A FAKE `Backend` that injects faults into calls to `inner` (see the module docstring).

    Args:
        inner: the backend that answers the calls that do not fault.
        rate: probability in [0, 1] that one call faults.
        seed: makes the choice of faulty calls and fault kinds reproducible.
        kinds: the fault kinds to draw from (uniformly).
        retry_after_s: the `Retry-After` value of rate-limit faults.
        message: extra text appended to every raised fault's message (e.g. to test scrubbing).

    `injected` counts the faults injected so far by kind; `calls` counts every request seen.

    >>> from skillopt_dsl.testing import ScriptedLM
    >>> faulty = FaultyBackend(ScriptedLM(lambda m: "ok"), rate=1.0, seed=0, kinds=("empty",))
    >>> faulty.generate([{"role": "user", "content": "hi"}], SamplingParams()).text
    ''
    """

    def __init__(
        self,
        inner: Backend,
        *,
        rate: float,
        seed: int,
        kinds: Sequence[FaultKind] = ALL_FAULTS,
        retry_after_s: float = 0.01,
        message: str = "",
    ) -> None:
        if not 0.0 <= rate <= 1.0:
            raise ValueError(f"rate must be in [0, 1], got {rate}")
        unknown = sorted(set(kinds) - set(ALL_FAULTS))
        if unknown or not kinds:
            raise ValueError(f"kinds must be a non-empty subset of {ALL_FAULTS}, got {kinds!r}")
        self._inner, self._rate, self._seed = inner, rate, seed
        self._kinds: tuple[FaultKind, ...] = tuple(kinds)
        self._retry_after_s, self._message = retry_after_s, message
        self._lock = threading.Lock()
        self._seen: Counter[str] = Counter()
        self.injected: Counter[str] = Counter()
        self.calls = 0

    @property
    def model(self) -> str:
        """The wrapped backend's model name."""
        return self._inner.model

    @property
    def raised(self) -> int:
        """How many faults were raised as exceptions (what the `LM` ledger must count)."""
        with self._lock:
            return sum(n for kind, n in self.injected.items() if kind in RAISING_FAULTS)

    def generate(self, messages: list[Message], params: SamplingParams) -> Completion:
        """Forward to `inner`, or inject the fault drawn for this request and attempt."""
        fault, rng = self._draw(messages, params)
        if fault is None:
            return self._inner.generate(messages, params)
        with self._lock:
            self.injected[fault] += 1
        return self._inject(fault, rng, messages, params)

    def _draw(
        self, messages: list[Message], params: SamplingParams
    ) -> tuple[FaultKind | None, random.Random]:
        key = json.dumps([messages, params.seed, params.max_tokens], sort_keys=True)
        with self._lock:
            self.calls += 1
            attempt = self._seen[key]
            self._seen[key] += 1
        digest = hashlib.sha256(f"{self._seed}|{attempt}|{key}".encode()).digest()
        rng = random.Random(digest)
        if rng.random() >= self._rate:
            return None, rng
        return rng.choice(self._kinds), rng

    def _inject(
        self, fault: FaultKind, rng: random.Random, messages: list[Message], params: SamplingParams
    ) -> Completion:
        suffix = f" {self._message}" if self._message else ""
        if fault == "exception":
            raise InjectedServerError(f"injected 503 Service Unavailable{suffix}")
        if fault == "timeout":
            raise InjectedTimeout(f"injected request timeout{suffix}")
        if fault == "rate_limit":
            raise InjectedRateLimit(f"injected 429 Too Many Requests{suffix}", self._retry_after_s)
        if fault == "empty":
            text = ""
        elif fault == "garbage":
            text = "".join(rng.choice(string.printable) for _ in range(rng.randint(1, 80)))
        else:
            answer = self._inner.generate(messages, params).text
            text = answer + " filler" * (params.max_tokens * 4)
        prompt_tokens = sum(len(m.get("content", "").split()) for m in messages)
        return Completion(text, prompt_tokens, len(text.split()), cost_usd=0.0)

    def __repr__(self) -> str:
        return f"FaultyBackend({self._inner!r}, rate={self._rate}, seed={self._seed})"
