"""A reusable contract suite every model backend must pass (ours and yours).

Subclass `BackendContract` under a name pytest collects and implement `make_backend(api_base,
monkeypatch, cleanup)`: a backend whose calls answer `REPLY` without leaving the machine (a
`FakeOpenAIServer`, a patched `litellm.completion`, a script), or a real in-process model with
`reply = None` (then every call must answer the same non-empty text: greedy decoding). `api_base` is an endpoint URL
to build it for (a backend without endpoints ignores it); `cleanup(fn)` runs `fn` after the
test. Tests (the contract written in `skillopt_dsl.lm.base.Backend`):

- it is a `Backend`: a non-empty `model` and a `generate` that returns a `Completion` (the
  expected text, token counts that are not negative, a cost that is None or not negative);
- its identity (`LM`'s `backend_identity`) is JSON-ready, names its model, and never records a
  secret;
- a backend with endpoints records its endpoint: built for two endpoints, the two identities
  (hence the response-cache keys) differ;
- it is thread-safe: eight threads calling at once all get their completion (the same text).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from skillopt_dsl.lm.base import Backend, Completion, SamplingParams
from skillopt_dsl.lm.client import backend_identity

__all__ = ["REPLY", "BackendContract"]

REPLY = "pong"
"""What every call to the backend under test must answer."""

ENDPOINTS = ("http://127.0.0.1:9/one", "http://127.0.0.1:9/two")
MESSAGES = [{"role": "user", "content": "ping"}]


class BackendContract:
    """The contract suite; subclass it as `TestSomething` and implement `make_backend`."""

    has_endpoints: bool = True
    """False for a backend that has no endpoint (an in-process model, a fake)."""

    secret: str | None = None
    """A credential `make_backend` passed to the backend, which no identity may record."""

    reply: str | None = REPLY
    """What every call answers; None for a real model (any non-empty text, the same each call)."""

    def make_backend(
        self, api_base: str, monkeypatch: Any, cleanup: Callable[[Callable[[], None]], None]
    ) -> Backend:
        """Return a fresh backend for `api_base` whose calls answer `REPLY` offline."""
        raise NotImplementedError("subclass BackendContract and implement make_backend()")

    def _backend(self, request: Any, monkeypatch: Any, api_base: str = ENDPOINTS[0]) -> Backend:
        return self.make_backend(api_base, monkeypatch, request.addfinalizer)

    def test_generate_returns_a_completion(self, request: Any, monkeypatch: Any) -> None:
        backend = self._backend(request, monkeypatch)
        assert isinstance(backend, Backend) and backend.model.strip()
        completion = backend.generate([dict(m) for m in MESSAGES], SamplingParams(max_tokens=8))
        assert isinstance(completion, Completion) and completion.text.strip()
        assert self.reply is None or completion.text == self.reply
        assert completion.prompt_tokens >= 0 and completion.completion_tokens >= 0
        assert completion.cost_usd is None or completion.cost_usd >= 0

    def test_identity_is_json_ready_and_keeps_no_secret(
        self, request: Any, monkeypatch: Any
    ) -> None:
        identity = backend_identity(self._backend(request, monkeypatch))
        text = json.dumps(identity, sort_keys=True)
        assert identity["model"] and {"model", "api_base", "provider_params"} <= set(identity)
        assert self.secret is None or self.secret not in text, "an identity recorded a secret"

    def test_two_endpoints_have_two_identities(self, request: Any, monkeypatch: Any) -> None:
        if not self.has_endpoints:
            return
        one, two = (backend_identity(self._backend(request, monkeypatch, e)) for e in ENDPOINTS)
        assert one != two, "two endpoints would share response-cache entries"

    def test_thread_safe(self, request: Any, monkeypatch: Any) -> None:
        backend = self._backend(request, monkeypatch)

        def call(n: int) -> str:
            params = SamplingParams(seed=n, max_tokens=8)
            return backend.generate([dict(m) for m in MESSAGES], params).text

        with ThreadPoolExecutor(8) as pool:
            texts = list(pool.map(call, range(16)))
        assert texts == [self.reply or texts[0]] * 16 and texts[0].strip()
