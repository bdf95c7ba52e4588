"""Tests for the backends as one family: the native tool backend is built on the litellm one."""

from __future__ import annotations

from typing import Any

import pytest

from skillopt_dsl.agents import NativeToolBackend
from skillopt_dsl.lm import LM, ResponseCache, SamplingParams


def _answer_by_endpoint(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """A fake `litellm.completion` whose reply names the endpoint the request went to."""
    import litellm

    requests: list[dict[str, Any]] = []

    def fake_completion(**request: Any) -> Any:
        requests.append(request)
        return litellm.ModelResponse(
            choices=[
                {"index": 0, "message": {"role": "assistant", "content": request["api_base"]}}
            ],
            usage={"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
        )

    monkeypatch.setattr(litellm, "completion", fake_completion)
    return requests


def test_two_endpoints_with_one_model_name_never_share_a_cache_entry(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kills: a native backend without `identity()` (its `api_base` left out of the cache
    key), so the second server's question is answered with the first server's reply."""
    requests = _answer_by_endpoint(monkeypatch)
    cache = ResponseCache(tmp_path / "cache.sqlite")
    messages = [{"role": "user", "content": "which server?"}]
    replies = []
    for base in ("http://127.0.0.1:1/v1", "http://127.0.0.1:2/v1", "http://127.0.0.1:1/v1/"):
        backend = NativeToolBackend("openai/same-name", api_base=base, check_support=False)
        lm = LM(backend, cache=cache, max_retries=0, price=(0.0, 0.0))
        replies.append(lm.complete(messages, params=SamplingParams(max_tokens=8)))
    first, second = "http://127.0.0.1:1/v1", "http://127.0.0.1:2/v1"
    assert [r.text for r in replies] == [first, second, first]
    assert [r.cached for r in replies] == [False, False, True]
    assert len(requests) == 2


def _reply_without_price(monkeypatch: pytest.MonkeyPatch, error: Exception) -> None:
    """A fake completion that carries no stamped price, and a price lookup that raises."""
    import litellm

    def fake_completion(**request: Any) -> Any:
        response = litellm.ModelResponse(
            choices=[{"index": 0, "message": {"role": "assistant", "content": "odd"}}],
            usage={"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
        )
        response._hidden_params = {}
        return response

    def fake_cost(**kwargs: Any) -> float:
        raise error

    monkeypatch.setattr(litellm, "completion", fake_completion)
    monkeypatch.setattr(litellm, "completion_cost", fake_cost)


def test_native_cost_lookup_lets_a_real_error_out_and_reads_an_unknown_price_as_none(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Kills: a cost lookup that swallows every exception (a broken price map read as
    'unpriced', a real bug hidden as a missing price)."""
    import litellm

    backend = NativeToolBackend("openai/gpt-4o-mini")
    messages = [{"role": "user", "content": "9"}]
    _reply_without_price(monkeypatch, litellm.exceptions.ModelNotMappedError("no price"))
    assert backend.generate(messages, SamplingParams()).cost_usd is None
    _reply_without_price(monkeypatch, RuntimeError("price map is corrupt"))
    fresh = NativeToolBackend("openai/gpt-4o-mini")
    with pytest.raises(RuntimeError, match="price map is corrupt"):
        fresh.generate(messages, SamplingParams())


def test_native_identity_names_its_endpoint() -> None:
    """Kills: `backend_identity` recording `api_base: None` for the native backend."""
    from skillopt_dsl.lm.client import backend_identity

    backend = NativeToolBackend("openai/m", api_base="http://h:1/v1/", check_support=False)
    assert backend_identity(backend)["api_base"] == "http://h:1/v1"
