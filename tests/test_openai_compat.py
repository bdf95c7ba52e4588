"""The lean OpenAI-compatible path (`OpenAICompatBackend`) against FAKE local servers.

It must be indistinguishable from the litellm path in everything a run records (answers, usage,
prices, cache keys), and keep the client's guarantees: retries of 429/5xx honouring
`Retry-After`, no retry of other 4xx, timeouts, and no API key in any error or file.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from skillopt_dsl.errors import ModelError, UserInputError
from skillopt_dsl.lm import LM, LiteLLMBackend, ResponseCache, SamplingParams
from skillopt_dsl.lm.openai_compat import (
    EndpointHTTPError,
    OpenAICompatBackend,
    backend_for,
)
from skillopt_dsl.testing import FakeOpenAIServer

KEY = "sk-lean-path-secret-0123456789"
MESSAGES = [
    {"role": "system", "content": "Answer with the last word."},
    {"role": "user", "content": "the quick brown fox"},
]


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(latency_s=0.0, max_lifetime_s=120) as fake:
        yield fake


@pytest.fixture(autouse=True)
def _loopback_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """No key from the environment; litellm (refused by conftest) and the lean path may reach
    the fake servers on 127.0.0.1 only."""
    from litellm import main

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)

    def loopback_completion(**kwargs: Any) -> Any:
        if not str(kwargs.get("api_base", "")).startswith("http://127.0.0.1:"):
            raise AssertionError(f"a unit test tried to call a real model: {kwargs.get('model')!r}")
        return main.completion(**kwargs)

    def loopback_post(self: OpenAICompatBackend, body: dict[str, Any]) -> dict[str, Any]:
        if not self.api_base.startswith("http://127.0.0.1:"):
            raise AssertionError(f"a unit test tried to reach {self.api_base}")
        return real_post(self, body)

    real_post = OpenAICompatBackend._post
    monkeypatch.setattr("litellm.completion", loopback_completion)
    monkeypatch.setattr(OpenAICompatBackend, "_post", loopback_post)


def _both(url: str, model: str) -> tuple[OpenAICompatBackend, LiteLLMBackend]:
    lean = OpenAICompatBackend(model, api_base=url, api_key=KEY)
    return lean, LiteLLMBackend(model, api_base=url, extra={"api_key": KEY})


@pytest.mark.parametrize("model", ["openai/gpt-4o-mini", "openai/fake"])
def test_lean_path_matches_litellm_answers_usage_and_cost(
    server: FakeOpenAIServer, model: str
) -> None:
    """Kills: the lean path reading usage or prices differently from litellm (e.g. pricing
    every token at the input rate, or 0.0 instead of None for a model litellm cannot price)."""
    lean, via_litellm = _both(server.url, model)
    for seed in range(3):
        params = SamplingParams(temperature=0.0, max_tokens=16, seed=seed)
        messages = [*MESSAGES[:1], {"role": "user", "content": f"say word{seed} now please"}]
        assert lean.generate(messages, params) == via_litellm.generate(messages, params)
    if model == "openai/fake":
        assert lean.generate(MESSAGES, SamplingParams()).cost_usd is None


def test_prices_equal_litellm_for_every_openai_chat_model() -> None:
    """Kills: a hand-kept price formula drifting from litellm's calculator (any model of
    litellm's OpenAI price table priced differently, or a priced model reported as unpriced)."""
    from skillopt_dsl.lm._litellm import litellm

    names = [
        name
        for name, entry in litellm.model_cost.items()
        if entry.get("litellm_provider") == "openai" and entry.get("mode") == "chat"
    ]
    assert len(names) > 50
    for name in names:
        backend = OpenAICompatBackend(f"openai/{name}", api_base="http://127.0.0.1:9/v1")
        for prompt, completion in ((10, 3), (12_345, 678)):
            usage = {"prompt_tokens": prompt, "completion_tokens": completion}
            payload = {"model": name, "usage": usage, "choices": [{"message": {"content": "x"}}]}
            try:
                expected = litellm.completion_cost(
                    completion_response=payload, model=f"openai/{name}"
                )
            except litellm.exceptions.ModelNotMappedError:
                expected = None
            assert backend._cost(payload, usage, prompt, completion) == expected, name
        backend.close()


def test_cache_entries_are_shared_with_the_litellm_path(
    server: FakeOpenAIServer, tmp_path: Path
) -> None:
    """Kills: the lean path keying the cache on its wire name (`gpt-4o-mini`) or another
    spelling than litellm's, which would re-pay every cached call after switching paths."""
    lean, via_litellm = _both(server.url, "openai/gpt-4o-mini")
    cache = ResponseCache(tmp_path / "cache.sqlite")
    first = LM(lean, cache=cache).complete(MESSAGES, seed=7)
    before = server.requests
    again = LM(via_litellm, cache=cache).complete(MESSAGES, seed=7)
    assert again.cached and server.requests == before
    assert (again.text, again.prompt_tokens, again.completion_tokens) == (
        first.text,
        first.prompt_tokens,
        first.completion_tokens,
    )
    compat = OpenAICompatBackend("openai-compat/gpt-4o-mini", api_base=server.url)
    assert LM(compat, cache=cache).complete(MESSAGES, seed=7).cached


def test_backend_selection() -> None:
    """Kills: `backend="litellm"` being ignored (no way back to litellm), the lean path
    taking strings of other providers, or `openai/...` without api_base silently leaving litellm
    (whose own settings such as OPENAI_API_BASE the user may rely on)."""
    url = "http://127.0.0.1:9/v1"
    assert isinstance(backend_for("openai/m", api_base=url), OpenAICompatBackend)
    assert isinstance(backend_for("openai-compat/m", api_base=url), OpenAICompatBackend)
    assert isinstance(backend_for("openai/m"), LiteLLMBackend)
    assert isinstance(backend_for("anthropic/claude-3-haiku", api_base=url), LiteLLMBackend)
    forced = backend_for("openai-compat/m", api_base=url, backend="litellm")
    assert isinstance(forced, LiteLLMBackend) and forced.model == "openai/m"
    lean = backend_for("openai/m", backend="lean")
    assert isinstance(lean, OpenAICompatBackend) and lean.api_base.startswith("https://api.openai")
    with pytest.raises(UserInputError, match="api_base"):
        backend_for("openai-compat/m")
    with pytest.raises(UserInputError, match="backend='lean' serves"):
        backend_for("anthropic/claude-3-haiku", backend="lean")
    with pytest.raises(UserInputError, match="backend must be"):
        backend_for("openai/m", backend="fast")  # type: ignore[arg-type]


def test_lm_takes_the_lean_path_for_a_model_string_with_api_base(server: FakeOpenAIServer) -> None:
    """Kills: `LM(..., api_base=...)` or `backend=` not reaching the backend choice (the lean
    path never used by model strings, or no way to force litellm through `LM`)."""
    lean = LM("openai/fake", api_base=server.url)
    assert isinstance(lean.backend, OpenAICompatBackend)
    assert lean.complete(MESSAGES).text == "fox"
    forced = LM("openai/fake", api_base=server.url, backend="litellm")
    assert isinstance(forced.backend, LiteLLMBackend)
    assert lean.identity() == forced.identity(), "one identity, so one cache entry per request"
    assert isinstance(LM("local/smollm2-135m").backend, LiteLLMBackend)
    with pytest.raises(UserInputError, match="model strings only"):
        LM(OpenAICompatBackend("openai/fake", api_base=server.url), api_base=server.url)


class _Scripted(ThreadingHTTPServer):
    """A FAKE endpoint: answers the first requests with scripted HTTP errors, then completions;
    counts TCP connections and requests, and keeps every request's Authorization header."""

    daemon_threads = True

    def __init__(self, errors: list[tuple[int, dict[str, str], str]]) -> None:
        super().__init__(("127.0.0.1", 0), _ScriptedHandler)
        self.errors, self.connections, self.requests = list(errors), 0, 0
        self.auth: list[str | None] = []
        self.bodies: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    def get_request(self) -> tuple[socket.socket, Any]:
        conn, addr = super().get_request()
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self.lock:
            self.connections += 1
        return conn, addr

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class _ScriptedHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Scripted

    def do_POST(self) -> None:
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with self.server.lock:
            self.server.requests += 1
            self.server.auth.append(self.headers.get("Authorization"))
            self.server.bodies.append(request)
            scripted = self.server.errors.pop(0) if self.server.errors else None
        if scripted is not None:
            status, headers, body = scripted
            self._send(status, body.encode(), headers)
            return
        text = request["messages"][-1]["content"].split()[-1]
        usage = {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}
        answer = {"choices": [{"message": {"role": "assistant", "content": text}}], "usage": usage}
        self._send(200, json.dumps(answer).encode(), {})

    def _send(self, status: int, data: bytes, headers: dict[str, str]) -> None:
        self.send_response(status)
        for name, value in {"Content-Type": "application/json", **headers}.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def scripted() -> Iterator[Any]:
    started: list[_Scripted] = []

    def start(*errors: tuple[int, dict[str, str], str]) -> _Scripted:
        endpoint = _Scripted(list(errors))
        threading.Thread(target=endpoint.serve_forever, daemon=True).start()
        started.append(endpoint)
        return endpoint

    yield start
    for endpoint in started:
        endpoint.shutdown()
        endpoint.server_close()


def _lm(url: str, sleeps: list[float], **settings: Any) -> LM:
    backend = OpenAICompatBackend("openai/fake", api_base=url, api_key=KEY, timeout_s=5.0)
    return LM(backend, sleep=sleeps.append, backoff_base_s=0.0, **settings)


def test_429_and_5xx_are_retried_after_retry_after(scripted: Any) -> None:
    """Kills: HTTP errors mapped to an exception the retry layer does not see as transient
    (no `status_code`), or the `Retry-After` header dropped (retrying a rate limit at once)."""
    endpoint = scripted(
        (429, {"Retry-After": "2.5"}, '{"error": {"message": "slow down"}}'),
        (503, {}, '{"error": {"message": "overloaded"}}'),
        (500, {"Retry-After": "1"}, "internal"),
    )
    sleeps: list[float] = []
    lm = _lm(endpoint.url, sleeps)
    assert lm.complete(MESSAGES).text == "fox"
    assert endpoint.requests == 4 and sleeps == [2.5, 0.0, 1.0]
    assert lm.ledger.snapshot().retries == 3


def test_other_4xx_fail_at_once_with_a_hint(scripted: Any) -> None:
    """Kills: retrying a request the provider rejected for good (a 400 retried max_retries times,
    burning budget), or a 4xx mapped to an exception without its status (no hint)."""
    endpoint = scripted((400, {}, '{"error": {"message": "bad max_tokens"}}'))
    sleeps: list[float] = []
    with pytest.raises(ModelError, match=r"HTTP 400 .*bad max_tokens.*rejected the request"):
        _lm(endpoint.url, sleeps).complete(MESSAGES)
    assert endpoint.requests == 1 and sleeps == []


def test_timeouts_are_retried_then_reported() -> None:
    """Kills: no timeout on the shared client (a hung endpoint blocks a worker forever), or a
    timeout mapped to a non-transient error (never retried)."""
    with FakeOpenAIServer(latency_s=1.0, max_lifetime_s=30) as slow:
        backend = OpenAICompatBackend("openai/fake", api_base=slow.url, timeout_s=0.2)
        sleeps: list[float] = []
        lm = LM(backend, max_retries=1, sleep=sleeps.append, backoff_base_s=0.0)
        with pytest.raises(ModelError, match=r"EndpointTimeout.*within 0\.2 s"):
            lm.complete(MESSAGES)
        assert slow.requests == 2 and len(sleeps) == 1


def test_connection_refused_is_transient() -> None:
    """Kills: a refused connection escaping as a raw httpx error the retry layer ignores."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    sleeps: list[float] = []
    backend = OpenAICompatBackend("openai/fake", api_base=f"http://127.0.0.1:{port}/v1")
    with pytest.raises(ModelError, match="EndpointConnectionError"):
        LM(backend, max_retries=2, sleep=sleeps.append).complete(MESSAGES)
    assert len(sleeps) == 2


def test_no_api_key_in_errors_or_files(scripted: Any, tmp_path: Path) -> None:
    """Kills: an endpoint's error body echoing the key ("Incorrect API key provided: sk-...")
    reaching the exception, the `ModelError`, the log or the cache file."""
    echo = json.dumps({"error": {"message": f"Incorrect API key provided: {KEY}"}})
    endpoint = scripted((401, {}, echo), (200, {}, f"not json {KEY}"))
    cache = ResponseCache(tmp_path / "cache.sqlite")
    backend = OpenAICompatBackend("openai/fake", api_base=endpoint.url, api_key=KEY)
    with pytest.raises(EndpointHTTPError) as raw:
        backend.generate(MESSAGES, SamplingParams())
    assert KEY not in str(raw.value) and "***" in str(raw.value)
    lm = LM(backend, cache=cache, sleep=lambda _: None)
    with pytest.raises(ModelError) as failed:
        lm.complete(MESSAGES)
    assert KEY not in str(failed.value) and "not a JSON object" in str(failed.value)
    lm.complete(MESSAGES, seed=1)
    cache.flush()
    assert endpoint.auth == [f"Bearer {KEY}"] * 3, "the key is sent, as a header only"
    for path in tmp_path.iterdir():
        assert KEY.encode() not in path.read_bytes(), path


def test_one_pooled_client_serves_many_threads(scripted: Any) -> None:
    """Kills: a new client (or connection) per call, which pays a TCP handshake per request and
    runs out of ports under load, and any shared state that mixes answers across threads."""
    endpoint = scripted()
    backend = OpenAICompatBackend("openai/fake", api_base=endpoint.url)
    requests = [[{"role": "user", "content": f"word{i}"}] for i in range(200)]
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda m: backend.generate(m, SamplingParams()).text, requests))
    assert answers == [f"word{i}" for i in range(200)]
    assert endpoint.requests == 200 and endpoint.connections <= 8
    assert endpoint.auth == [None] * 200, "no Authorization header without a key"


def test_request_carries_sampling_params_and_extras_but_no_key(scripted: Any) -> None:
    """Kills: optional sampling parameters (`top_p`, `stop`, ...) or provider extras dropped
    from the lean request while they still enter the cache key (cached answers to a request
    that was never sent), or the key leaking into the body."""
    endpoint = scripted()
    backend = OpenAICompatBackend(
        "openai-compat/served-model", api_base=endpoint.url, api_key=KEY, extra={"user": "u1"}
    )
    params = SamplingParams(temperature=0.5, max_tokens=9, seed=4, top_p=0.9, stop=("END",))
    backend.generate(MESSAGES, params)
    assert endpoint.bodies == [
        {
            "model": "served-model",
            "messages": MESSAGES,
            "temperature": 0.5,
            "max_tokens": 9,
            "seed": 4,
            "top_p": 0.9,
            "stop": ["END"],
            "user": "u1",
        }
    ]
    with pytest.raises(UserInputError, match="in one place only"):
        OpenAICompatBackend("openai/m", api_base=endpoint.url, extra={"top_p": 1}).generate(
            MESSAGES, params
        )
