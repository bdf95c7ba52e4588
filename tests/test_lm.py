"""The model layer: cache, budget, retries, concurrency and accounting (ScriptedLM, no network)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import pytest

from skillopt_dsl.errors import BudgetExceeded, ModelError, UserInputError
from skillopt_dsl.lm import (
    LM,
    Budget,
    LiteLLMBackend,
    Message,
    ResponseCache,
    SamplingParams,
    UsageLedger,
    UsageSnapshot,
    resolve_lm,
)
from skillopt_dsl.lm.tokens import count_prompt_tokens
from skillopt_dsl.testing import ScriptedLM


def _msgs(text: str = "Is it plausible?") -> list[Message]:
    return [{"role": "system", "content": "Answer in one word."}, {"role": "user", "content": text}]


def _echo(messages: list[Message]) -> str:
    return "answer to " + messages[-1]["content"]


class _Sleeps:
    """Records requested sleeps instead of sleeping."""

    def __init__(self) -> None:
        self.calls: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.calls.append(seconds)


def _failing(errors: list[BaseException], then: str = "ok") -> Callable[[list[Message]], str]:
    """A respond function raising `errors` in order, then answering `then`."""
    pending = list(errors)

    def respond(messages: list[Message]) -> str:
        if pending:
            raise pending.pop(0)
        return then

    return respond


# --- cache -------------------------------------------------------------------------------------


def test_cache_hit_is_free_counted_and_skips_the_backend() -> None:
    fake = ScriptedLM(_echo, cost_per_call=0.01)
    lm = LM(fake, cache=ResponseCache(None))
    first = lm.complete(_msgs())
    second = lm.complete(_msgs())
    assert (first.cached, second.cached) == (False, True)
    assert second.text == first.text == "answer to Is it plausible?"
    assert first.cost_usd == 0.01 and second.cost_usd == 0.0
    usage = lm.ledger.snapshot()
    assert (usage.calls, usage.cache_hits) == (1, 1)
    assert usage.cost_usd == pytest.approx(0.01)
    assert len(fake.calls) == 1


def test_persistent_cache_survives_a_new_client(tmp_path) -> None:
    path = tmp_path / "cache" / "responses.sqlite"
    first_cache = ResponseCache(path)
    LM(ScriptedLM(_echo), cache=first_cache).complete(_msgs(), seed=3)
    first_cache.close()
    fresh = ScriptedLM(lambda m: "never used")
    response = LM(fresh, cache=ResponseCache(path)).complete(_msgs(), seed=3)
    assert response.cached is True
    assert response.text == "answer to Is it plausible?"
    assert fresh.calls == []


def test_a_shared_cache_answers_another_run_free_and_never_counts_as_its_payment(
    tmp_path,
) -> None:
    """Kills: a run's cache that ignores the shared one (the next run pays again), one that
    does not store its replies there, one whose replayed replies (a resume) never reach it, and
    one that copies a shared reply into its own file (a resume would count it as paid)."""
    shared = ResponseCache(None)
    first = LM(ScriptedLM(_echo), cache=ResponseCache(tmp_path / "a.sqlite", shared=shared))
    first.complete(_msgs(), seed=1)
    second_cache = ResponseCache(tmp_path / "b.sqlite", shared=shared)
    fresh = ScriptedLM(lambda m: "never used")
    reply = LM(fresh, cache=second_cache).complete(_msgs(), seed=1)
    assert reply.cached and reply.text == "answer to Is it plausible?" and fresh.calls == []
    assert len(second_cache) == 0 and second_cache.completions_after(0) == []
    replayed = ResponseCache(None)  # a resumed program: the first run replays its own file
    LM(ScriptedLM(_echo), cache=ResponseCache(tmp_path / "a.sqlite", shared=replayed)).complete(
        _msgs(), seed=1
    )
    assert len(replayed) == 1


def test_different_seed_or_params_miss_same_seed_hits() -> None:
    fake = ScriptedLM(_echo)
    lm = LM(fake, cache=ResponseCache(None))
    lm.complete(_msgs(), seed=1)
    lm.complete(_msgs(), seed=2)
    lm.complete(_msgs(), seed=1, params=SamplingParams(temperature=0.7))
    assert len(fake.calls) == 3
    assert lm.complete(_msgs(), seed=2).cached is True
    assert len(fake.calls) == 3


def test_cache_key_material_never_holds_api_keys(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-SECRET123")
    path = tmp_path / "c.sqlite"
    cache = ResponseCache(path)
    LM(ScriptedLM(_echo), cache=cache).complete(_msgs())
    cache.close()
    assert b"SECRET123" not in path.read_bytes()


# --- budget ------------------------------------------------------------------------------------


def _hammer(lm: LM, n: int, threads: int = 32) -> tuple[int, int]:
    """Run `n` distinct calls on `threads` threads; return (successes, BudgetExceeded count)."""

    def one(i: int) -> str:
        try:
            lm.complete(_msgs(f"question {i}"))
        except BudgetExceeded:
            return "budget"
        return "ok"

    with ThreadPoolExecutor(max_workers=threads) as pool:
        outcomes = list(pool.map(one, range(n)))
    return outcomes.count("ok"), outcomes.count("budget")


def _slow_echo(messages: list[Message]) -> str:
    time.sleep(0.001)
    return _echo(messages)


def test_max_calls_never_exceeded_by_32_threads() -> None:
    fake = ScriptedLM(_slow_echo)
    lm = LM(fake, ledger=UsageLedger(Budget(max_calls=17)), max_concurrency=32)
    ok, refused = _hammer(lm, 300)
    assert (ok, refused) == (17, 283)
    assert len(fake.calls) == 17
    assert lm.ledger.snapshot().calls == 17
    assert lm.ledger.in_flight == 0


def test_max_tokens_budget_stops_before_the_limit() -> None:
    fake = ScriptedLM(lambda m: "a b")
    params = SamplingParams(max_tokens=5)
    lm = LM(fake, ledger=UsageLedger(Budget(max_tokens=60)), params=params)
    with pytest.raises(BudgetExceeded, match="max_tokens=60"):
        for i in range(100):
            lm.complete([{"role": "user", "content": f"q{i}"}])
    used = lm.ledger.snapshot()
    reserve = 5 + count_prompt_tokens(fake.model, [{"role": "user", "content": "q0"}])
    assert used.total_tokens <= 60
    assert used.total_tokens + reserve > 60  # it stopped only when the next call could overrun
    assert used.calls == len(fake.calls) > 0


def test_max_tokens_budget_holds_under_threads() -> None:
    def slow_three_words(messages: list[Message]) -> str:
        time.sleep(0.002)
        return "one two three"

    fake = ScriptedLM(slow_three_words)
    ledger = UsageLedger(Budget(max_tokens=500))
    lm = LM(fake, ledger=ledger, params=SamplingParams(max_tokens=3), max_concurrency=32)
    ok, refused = _hammer(lm, 200)
    assert ok > 0 and refused > 0
    assert ledger.snapshot().total_tokens <= 500
    assert ledger.snapshot().calls == ok == len(fake.calls)


def test_max_usd_budget_counts_priced_calls() -> None:
    lm = LM(ScriptedLM(_echo, cost_per_call=0.5), ledger=UsageLedger(Budget(max_usd=1.0)))
    lm.complete(_msgs("a"))
    lm.complete(_msgs("b"))
    with pytest.raises(BudgetExceeded, match=r"max_usd=1\.0"):
        lm.complete(_msgs("c"))


def test_budget_rejects_negative_limits() -> None:
    with pytest.raises(UserInputError, match="max_calls"):
        Budget(max_calls=-1)


# --- retries -----------------------------------------------------------------------------------


def test_transient_errors_are_retried_then_succeed() -> None:
    sleeps = _Sleeps()
    fake = ScriptedLM(_failing([TimeoutError("slow"), ConnectionError("reset")]))
    lm = LM(fake, sleep=sleeps, max_retries=4)
    assert lm.complete(_msgs()).text == "ok"
    assert len(fake.calls) == 3 and len(sleeps.calls) == 2
    usage = lm.ledger.snapshot()
    assert (usage.calls, usage.errors, usage.retries) == (1, 0, 2)
    assert dict(usage.error_types) == {"TimeoutError": 1, "ConnectionError": 1}


def test_backoff_grows_and_is_capped() -> None:
    sleeps = _Sleeps()
    fake = ScriptedLM(_failing([TimeoutError("t")] * 10))
    lm = LM(fake, sleep=sleeps, max_retries=6, backoff_base_s=1.0, backoff_max_s=4.0)
    with pytest.raises(ModelError, match="6 retries"):
        lm.complete(_msgs())
    assert len(fake.calls) == 7
    assert all(0.0 <= s <= min(4.0, 2.0**i) for i, s in enumerate(sleeps.calls))
    assert lm.ledger.snapshot().errors == 1


class _Throttled(Exception):
    status_code = 429

    def __init__(self, retry_after: float) -> None:
        super().__init__("slow down")
        self.retry_after = retry_after


class _Response:
    def __init__(self, status_code: int, headers: dict[str, str]) -> None:
        self.status_code = status_code
        self.headers = headers


class _HttpError(Exception):
    def __init__(self, response: _Response) -> None:
        super().__init__(f"HTTP {response.status_code}")
        self.response = response


def test_retry_after_is_honoured() -> None:
    sleeps = _Sleeps()
    errors: list[BaseException] = [
        _Throttled(retry_after=7.5),
        _HttpError(_Response(503, {"retry-after": "3"})),
    ]
    lm = LM(ScriptedLM(_failing(errors)), sleep=sleeps, backoff_base_s=0.01)
    assert lm.complete(_msgs()).text == "ok"
    assert sleeps.calls[0] >= 7.5
    assert sleeps.calls[1] >= 3.0


def test_litellm_rate_limit_headers_are_honoured() -> None:
    from skillopt_dsl.lm._litellm import litellm

    limited = litellm.exceptions.RateLimitError(
        message="rate limited", llm_provider="openai", model="gpt", headers={"retry-after": "4"}
    )
    sleeps = _Sleeps()
    lm = LM(ScriptedLM(_failing([limited])), sleep=sleeps, backoff_base_s=0.01)
    assert lm.complete(_msgs()).text == "ok"
    assert sleeps.calls == [pytest.approx(4.0, abs=0.02)]


class _AuthError(Exception):
    status_code = 401


def test_auth_error_fails_at_once_without_leaking_the_key(monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-SECRET123")
    sleeps = _Sleeps()
    fake = ScriptedLM(_failing([_AuthError("Incorrect API key provided: sk-test-SECRET123.")]))
    lm = LM(fake, sleep=sleeps)
    with pytest.raises(ModelError) as caught:
        lm.complete(_msgs())
    message = str(caught.value)
    assert "SECRET123" not in message
    assert "***" in message and "API key" in message
    assert caught.value.__cause__ is None
    assert len(fake.calls) == 1 and sleeps.calls == []
    usage = lm.ledger.snapshot()
    assert (usage.calls, usage.errors, usage.retries) == (1, 1, 0)


def test_bad_request_is_not_retried() -> None:
    fake = ScriptedLM(_failing([ValueError("unsupported parameter")]))
    with pytest.raises(ModelError, match="not retried"):
        LM(fake, sleep=_Sleeps()).complete(_msgs())
    assert len(fake.calls) == 1


# --- accounting --------------------------------------------------------------------------------


def test_unknown_price_is_none_not_zero() -> None:
    lm = LM(ScriptedLM(_echo, cost_per_call=None))
    response = lm.complete(_msgs())
    assert response.cost_usd is None
    assert lm.ledger.snapshot().cost_usd is None
    assert lm.ledger.snapshot().unpriced_calls == 1


def test_mixed_prices_sum_the_known_ones() -> None:
    ledger = UsageLedger()
    LM(ScriptedLM(_echo, cost_per_call=None), ledger=ledger).complete(_msgs())
    LM(ScriptedLM(_echo, cost_per_call=0.25), ledger=ledger).complete(_msgs())
    usage = ledger.snapshot()
    assert usage.cost_usd == pytest.approx(0.25)
    assert usage.unpriced_calls == 1


def test_token_counts_flow_into_the_ledger() -> None:
    lm = LM(ScriptedLM(lambda m: "one two three"))
    response = lm.complete([{"role": "user", "content": "a b c d"}])
    assert (response.prompt_tokens, response.completion_tokens) == (4, 3)
    assert lm.ledger.snapshot().total_tokens == 7


def test_ledger_restore_continues_the_spent_budget() -> None:
    first = UsageLedger()
    lm = LM(ScriptedLM(_echo, cost_per_call=0.1), ledger=first)
    for i in range(3):
        lm.complete(_msgs(str(i)))
    saved = json.dumps(first.snapshot().to_dict())
    resumed = UsageLedger(Budget(max_calls=5))
    resumed.restore(UsageSnapshot.from_dict(json.loads(saved)))
    assert resumed.snapshot() == first.snapshot()
    resumed_lm = lm.with_ledger(resumed)
    resumed_lm.complete(_msgs("x"))
    resumed_lm.complete(_msgs("y"))
    with pytest.raises(BudgetExceeded, match="5 calls made"):
        resumed_lm.complete(_msgs("z"))
    assert first.snapshot().calls == 3  # the copy reported to the new ledger only


def test_snapshot_from_dict_rejects_unknown_keys() -> None:
    with pytest.raises(UserInputError, match="clls"):
        UsageSnapshot.from_dict({"clls": 3})


# --- concurrency -------------------------------------------------------------------------------


def test_concurrency_limit_is_respected() -> None:
    lock = threading.Lock()
    state = {"now": 0, "peak": 0}

    def respond(messages: list[Message]) -> str:
        with lock:
            state["now"] += 1
            state["peak"] = max(state["peak"], state["now"])
        time.sleep(0.01)
        with lock:
            state["now"] -= 1
        return "ok"

    lm = LM(ScriptedLM(respond), max_concurrency=3)
    with ThreadPoolExecutor(max_workers=16) as pool:
        list(pool.map(lambda i: lm.complete(_msgs(str(i))), range(48)))
    assert 2 <= state["peak"] <= 3


# --- construction ------------------------------------------------------------------------------


def test_resolve_lm_handles_each_kind_and_rejects_others() -> None:
    fake = ScriptedLM(_echo)
    lm = resolve_lm(fake)
    assert lm.model == "scripted/fake" and lm.backend is fake
    assert resolve_lm(lm) is lm
    ledger = UsageLedger()
    rebound = resolve_lm(lm, ledger=ledger)
    assert rebound.ledger is ledger and rebound.backend is fake and lm.ledger is not ledger
    assert resolve_lm(None, default="openai/gpt-4o-mini").model == "openai/gpt-4o-mini"
    with pytest.raises(UserInputError, match="int"):
        resolve_lm(42)  # type: ignore[arg-type]


def test_bad_messages_and_settings_are_user_errors() -> None:
    lm = LM(ScriptedLM(_echo))
    with pytest.raises(UserInputError, match="non-empty"):
        lm.complete([])
    with pytest.raises(UserInputError, match=r"messages\[0\]"):
        lm.complete([{"role": "user"}])
    with pytest.raises(UserInputError, match="max_concurrency"):
        LM(ScriptedLM(_echo), max_concurrency=0)
    with pytest.raises(UserInputError, match="timeout_s"):
        LM(ScriptedLM(_echo), timeout_s=5.0)


def test_litellm_backend_prices_known_models_and_not_unknown_ones(monkeypatch) -> None:
    from skillopt_dsl.lm._litellm import litellm

    sent: list[dict[str, object]] = []

    def offline_completion(**kwargs: object) -> object:
        sent.append(kwargs)
        usage = litellm.Usage(prompt_tokens=100, completion_tokens=10, total_tokens=110)
        response = litellm.ModelResponse(model=str(kwargs["model"]), usage=usage)
        response.choices[0].message.content = "hi"
        return response

    monkeypatch.setattr(litellm, "completion", offline_completion)
    known = LiteLLMBackend("openai/gpt-4o-mini").generate(_msgs(), SamplingParams(seed=7))
    unknown = LiteLLMBackend("openai/no-such-model-xyz").generate(_msgs(), SamplingParams())
    assert known.cost_usd is not None and known.cost_usd > 0.0
    assert (known.text, known.prompt_tokens, known.completion_tokens) == ("hi", 100, 10)
    assert unknown.cost_usd is None
    assert sent[0]["seed"] == 7 and sent[0]["max_retries"] == 0  # LM owns the retries


def test_litellm_backend_rejects_unknown_local_models_and_reserved_extras() -> None:
    with pytest.raises(UserInputError, match="local/smollm2-135m"):
        LiteLLMBackend("local/no-such-model")
    with pytest.raises(UserInputError, match="seed"):
        LiteLLMBackend("openai/gpt-4o-mini", extra={"seed": 3})


def test_resume_counts_calls_paid_after_the_checkpoint(tmp_path) -> None:
    cache = ResponseCache(tmp_path / "c.sqlite")
    ledger = UsageLedger()
    lm = LM(ScriptedLM(_echo, cost_per_call=0.5), cache=cache, ledger=ledger)
    lm.complete(_msgs("before"))
    saved, mark = ledger.snapshot(), cache.max_rowid
    lm.complete(_msgs("after 1"))
    lm.complete(_msgs("after 2"))
    lm.complete(_msgs("after 1"))  # a hit: stores nothing new
    assert cache.max_rowid == mark + 2
    resumed = UsageLedger(Budget(max_usd=1.5))
    resumed.restore(saved)
    resumed.add_paid(cache.completions_after(mark))
    assert resumed.snapshot().calls == 3
    assert resumed.snapshot().cost_usd == pytest.approx(1.5)
    with pytest.raises(BudgetExceeded, match="max_usd"):
        resumed.reserve(max_new_tokens=10, prompt_tokens_estimate=10, max_cost_usd=0.01)


def test_flush_folds_the_wal_so_the_file_alone_keeps_every_entry(tmp_path) -> None:
    import shutil

    from skillopt_dsl.lm import Completion, ResponseCache

    cache = ResponseCache(tmp_path / "cache.sqlite")
    cache.put("0" * 64, Completion("yo", 1, 1, 0.0))
    cache.flush()
    (tmp_path / "copy").mkdir()
    shutil.copy(tmp_path / "cache.sqlite", tmp_path / "copy" / "cache.sqlite")
    copied = ResponseCache(tmp_path / "copy" / "cache.sqlite")
    assert len(copied) == 1


class _PricedResponse:
    def __init__(self, cost: object) -> None:
        self._hidden_params = {"response_cost": cost}


def test_litellm_backend_reuses_the_price_litellm_stamped() -> None:
    from skillopt_dsl.lm.litellm_backend import LiteLLMBackend, _stamped_cost

    assert _stamped_cost(_PricedResponse(1.5e-05)) == 1.5e-05
    assert _stamped_cost(_PricedResponse(None)) is None
    assert _stamped_cost(_PricedResponse(True)) is None
    assert _stamped_cost(object()) is None
    backend = LiteLLMBackend("openai/gpt-4o-mini")
    assert backend._cost(_PricedResponse(9e-07)) == 9e-07
