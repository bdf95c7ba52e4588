"""Hard budgets (dollars, tokens, calls) and the model identity behind caches and resume.

Offline: `ScriptedLM` and the shipped `FakeOpenAIServer` (reached through the real litellm path).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

import skillopt_dsl as sd
from skillopt_dsl.errors import BudgetExceeded, RunDirError, UserInputError
from skillopt_dsl.lm import (
    LM,
    Budget,
    LiteLLMBackend,
    Message,
    Price,
    ResponseCache,
    SamplingParams,
    UsageLedger,
)
from skillopt_dsl.lm.tokens import count_prompt_tokens, count_text_tokens
from skillopt_dsl.optimizers import GradientText, ReflectiveProposer
from skillopt_dsl.runs import RunDirectory
from skillopt_dsl.testing import ScriptedLM
from skillopt_dsl.testing.fake_server import FakeOpenAIServer
from tests.helpers import Parity, parity_examples, parity_target

CJK_400 = ("这是一个关于体育的句子请判断它是否合理" * 21)[:400]


def _msgs(text: str = "Is it plausible?") -> list[Message]:
    return [{"role": "system", "content": "Answer in one word."}, {"role": "user", "content": text}]


def _fake_endpoint_lm(url: str, **kwargs: Any) -> LM:
    """The real litellm path to a fake OpenAI-compatible endpoint (`openai/<name>`)."""
    model = kwargs.pop("model", "openai/gpt-4o-mini")
    backend = LiteLLMBackend(model, api_base=url, extra={"api_key": "sk-fake"}, timeout_s=10)
    return LM(backend, max_retries=0, **kwargs)


@pytest.fixture(autouse=True)
def _loopback_only_litellm(monkeypatch: pytest.MonkeyPatch) -> None:
    """litellm may reach the fake servers on 127.0.0.1 here, and nothing else (conftest refuses
    every litellm call; this re-opens exactly the loopback ones)."""
    from litellm import main

    def loopback_completion(**kwargs: Any) -> Any:
        if not str(kwargs.get("api_base", "")).startswith("http://127.0.0.1:"):
            raise AssertionError(f"a unit test tried to call a real model: {kwargs.get('model')!r}")
        return main.completion(**kwargs)

    monkeypatch.setattr("litellm.completion", loopback_completion)


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(lambda m: "plausible", latency_s=0.0, max_lifetime_s=300) as running:
        yield running


# --- dollars -----------------------------------------------------------------------------------


def _spend(lm: LM, calls: int, threads: int) -> list[str]:
    """Run `calls` distinct calls on `threads` threads; each outcome is "ok" or "budget"."""
    start = threading.Barrier(threads) if threads > 1 else None

    def one(i: int) -> str:
        if start is not None and i < threads:
            start.wait()
        try:
            lm.complete(_msgs(f"question {i}"))
        except BudgetExceeded:
            return "budget"
        return "ok"

    with ThreadPoolExecutor(max_workers=threads) as pool:
        return list(pool.map(one, range(calls)))


@pytest.mark.parametrize("threads", [1, 8, 64])
def test_dollar_budget_refuses_the_call_that_could_overrun_before_it_is_sent(threads: int) -> None:
    """Kills: a dollar budget that checks only what was spent after earlier calls (not the
    in-flight reservations plus this call's worst case): $0.60 calls against max_usd=1.00 then
    spend $1.20 on one thread and more on many."""

    def slow(messages: list[Message]) -> str:
        time.sleep(0.01)  # keeps calls in flight together
        return "plausible"

    fake = ScriptedLM(slow, cost_per_call=0.60)
    lm = LM(fake, ledger=UsageLedger(Budget(max_usd=1.00)), max_concurrency=64)
    outcomes = _spend(lm, calls=max(2, threads * 2), threads=threads)
    assert outcomes.count("ok") == 1 and len(fake.calls) == 1
    usage = lm.ledger.snapshot()
    assert usage.cost_usd == pytest.approx(0.60) and usage.cost_usd <= 1.00
    assert lm.ledger.in_flight == 0


def test_dollar_reservation_prices_the_prompt_and_max_tokens(server: FakeOpenAIServer) -> None:
    """Kills: a reservation that leaves out the output price x max_tokens (or the prompt), so a
    call whose worst case is over the budget is sent anyway."""
    sent = server.requests
    price = Price(input_per_token=1e-3, output_per_token=1e-3)
    roomy = _fake_endpoint_lm(
        server.url, price=price, ledger=UsageLedger(Budget(max_usd=1.0)),
        params=SamplingParams(max_tokens=900),
    )  # fmt: skip
    answered = roomy.complete(_msgs())  # worst case: ~20 prompt + 900 output tokens = $0.92
    assert answered.cost_usd == pytest.approx(price.cost(answered.prompt_tokens, 1))
    assert server.requests == sent + 1
    tight = _fake_endpoint_lm(
        server.url, price=price, ledger=UsageLedger(Budget(max_usd=1.0)),
        params=SamplingParams(max_tokens=990),
    )  # fmt: skip
    with pytest.raises(BudgetExceeded, match=r"max_usd=1\.0"):
        tight.complete(_msgs())  # ~20 + 990 tokens could cost $1.01: refused, nothing sent
    assert server.requests == sent + 1


def test_unknown_price_is_refused_under_a_dollar_budget(server: FakeOpenAIServer) -> None:
    """Kills: treating an unknown price as free (or skipping the dollar check) under max_usd,
    which lets an unpriced model spend without bound; and a refusal that does not say how to
    set a price."""
    fake = ScriptedLM(lambda m: "plausible", cost_per_call=None)
    with pytest.raises(UserInputError, match=r"price=\(input_usd_per_token") as refused:
        LM(fake, ledger=UsageLedger(Budget(max_usd=5.0))).complete(_msgs())
    assert "litellm.register_model" in str(refused.value) and fake.calls == []
    sent = server.requests
    budget = UsageLedger(Budget(max_usd=5.0))
    with pytest.raises(UserInputError, match="openai/no-such-model-xyz"):
        _fake_endpoint_lm(server.url, model="openai/no-such-model-xyz", ledger=budget).complete(
            _msgs()
        )
    assert server.requests == sent
    priced = _fake_endpoint_lm(
        server.url, model="openai/no-such-model-xyz", ledger=budget, price=(1e-6, 2e-6)
    )
    assert priced.complete(_msgs()).cost_usd == pytest.approx(
        Price(1e-6, 2e-6).cost(sum(len(m["content"].split()) for m in _msgs()), 1)
    )
    assert LM(fake).complete(_msgs()).cost_usd is None  # no dollar budget: allowed, unpriced


def test_the_embedded_model_is_free_under_a_dollar_budget() -> None:
    """Kills: the local model priced as unknown (refused under max_usd) or given a made-up price."""
    from skillopt_dsl.lm.local import installed_runtimes

    if not installed_runtimes():
        pytest.skip("no runtime for the embedded model is installed (prebuilt or llama-cpp-python)")
    lm = LM("local/smollm2-135m", ledger=UsageLedger(Budget(max_usd=0.0)))
    assert lm.price() == Price(0.0, 0.0)


# --- tokens ------------------------------------------------------------------------------------


def test_a_reply_without_usage_is_estimated_and_flagged(server: FakeOpenAIServer) -> None:
    """Kills: recording a provider reply without usage as 0 tokens (litellm's own zero) and
    $0.00, or estimating it without saying so."""
    with FakeOpenAIServer(lambda m: "plausible indeed", latency_s=0.0, send_usage=False) as bare:
        lm = _fake_endpoint_lm(bare.url)
        response = lm.complete(_msgs())
    expected_prompt = count_prompt_tokens("openai/gpt-4o-mini", _msgs())
    expected_answer = count_text_tokens("openai/gpt-4o-mini", "plausible indeed")
    assert expected_prompt > 0 and expected_answer > 0
    assert (response.prompt_tokens, response.completion_tokens) == (
        expected_prompt, expected_answer,
    )  # fmt: skip
    assert response.usage_estimated is True
    assert response.cost_usd is not None and response.cost_usd > 0  # priced from the estimate
    usage = lm.ledger.snapshot()
    assert usage.estimated_usage_calls == 1
    assert usage.total_tokens == expected_prompt + expected_answer
    reported = _fake_endpoint_lm(server.url).complete(_msgs())
    assert reported.usage_estimated is False and reported.prompt_tokens == 7  # the server's words


def test_a_scripted_reply_without_usage_is_estimated_too() -> None:
    """Kills: an estimate applied to one backend only (the rule lives in `LM`)."""
    lm = LM(ScriptedLM(lambda m: "one two three", cost_per_call=0.25, send_usage=False))
    response = lm.complete(_msgs())
    assert response.usage_estimated and response.prompt_tokens > 0
    assert response.completion_tokens == 3 and response.cost_usd == pytest.approx(0.25)


def test_cjk_prompt_tokens_are_counted_with_the_tokenizer() -> None:
    """Kills: the characters/3 estimate (400 CJK characters counted as ~138 tokens): a prompt
    that cannot fit a token budget is sent anyway."""
    messages: list[Message] = [{"role": "user", "content": CJK_400}]
    counted = count_prompt_tokens("openai/gpt-4o-mini", messages)
    assert 250 <= counted <= 800, counted
    fake = ScriptedLM(lambda m: "ok")
    lm = LM(fake, ledger=UsageLedger(Budget(max_tokens=300)), params=SamplingParams(max_tokens=16))
    with pytest.raises(BudgetExceeded, match="max_tokens=300"):
        lm.complete(messages)
    assert fake.calls == []


@pytest.mark.parametrize("threads", [1, 16])
def test_token_and_call_budgets_hold_at_any_thread_count(threads: int) -> None:
    """Kills: a token or call check that ignores calls in flight (threads overrun it together)."""

    def slow(messages: list[Message]) -> str:
        time.sleep(0.002)
        return "one two three"

    for budget in (Budget(max_tokens=400), Budget(max_calls=7)):
        fake = ScriptedLM(slow)
        lm = LM(fake, ledger=UsageLedger(budget), params=SamplingParams(max_tokens=3),
                max_concurrency=32)  # fmt: skip
        outcomes = _spend(lm, calls=60, threads=threads)
        usage = lm.ledger.snapshot()
        assert "budget" in outcomes and usage.calls == outcomes.count("ok") == len(fake.calls)
        assert usage.total_tokens <= (budget.max_tokens or 10**9)
        assert usage.calls <= (budget.max_calls or 10**9)


# --- identity: cache keys and resume --------------------------------------------------------


SAME_REQUEST_VARIANTS: dict[str, SamplingParams] = {
    "top_p": SamplingParams(top_p=0.5),
    "stop": SamplingParams(stop=("\n",)),
    "response_format": SamplingParams(response_format={"type": "json_object"}),
    "reasoning_effort": SamplingParams(reasoning_effort="low"),
    "temperature": SamplingParams(temperature=0.7),
    "max_tokens": SamplingParams(max_tokens=32),
    "seed": SamplingParams(seed=5),
}


@pytest.mark.parametrize("field", sorted(SAME_REQUEST_VARIANTS))
def test_every_sampling_parameter_separates_cache_entries(field: str) -> None:
    """Kills: a cache key that leaves out any sampling parameter (top_p, stop, response_format,
    reasoning effort, ...): a request with another setting is answered from the cache."""
    fake = ScriptedLM(lambda m: "plausible")
    lm = LM(fake, cache=ResponseCache())
    lm.complete(_msgs())
    lm.complete(_msgs(), params=SAME_REQUEST_VARIANTS[field])
    assert len(fake.calls) == 2
    assert getattr(fake.params[1], field) == getattr(SAME_REQUEST_VARIANTS[field], field)
    assert lm.complete(_msgs(), params=SAME_REQUEST_VARIANTS[field]).cached


def test_two_endpoints_serving_one_model_string_never_share_answers() -> None:
    """Kills: a cache key without api_base: the second endpoint is answered with the first's."""
    cache = ResponseCache()
    with (
        FakeOpenAIServer(lambda m: "from-a", latency_s=0.0) as a,
        FakeOpenAIServer(lambda m: "from-b", latency_s=0.0) as b,
    ):
        first = _fake_endpoint_lm(a.url, cache=cache).complete(_msgs())
        second = _fake_endpoint_lm(b.url, cache=cache).complete(_msgs())
        again = _fake_endpoint_lm(b.url + "/", cache=cache).complete(_msgs())
    assert (first.text, second.text) == ("from-a", "from-b") and not second.cached
    assert again.cached and again.text == "from-b"  # one endpoint, two spellings
    assert b.requests == 1


def test_provider_params_reach_the_endpoint_and_the_key_but_secrets_do_not(
    server: FakeOpenAIServer,
) -> None:
    """Kills: SamplingParams fields that are keyed but never sent, extra provider keywords
    missing from the key, or an API key recorded in the identity (config.json, cache key)."""
    backend = LiteLLMBackend(
        "openai/gpt-4o-mini", api_base=server.url,
        extra={"api_key": "sk-SECRET-1234", "api_version": "2024-01"}, timeout_s=10,
    )  # fmt: skip
    params = SamplingParams(top_p=0.5, stop=["END"], response_format={"type": "json_object"})
    lm = LM(backend, params=params, max_retries=0)
    lm.complete(_msgs())
    body = server.bodies[-1]
    assert (body["top_p"], body["stop"], body["response_format"]) == (
        0.5, ["END"], {"type": "json_object"},
    )  # fmt: skip
    identity = lm.identity()
    assert identity["provider_params"] == {"api_version": "2024-01"}
    assert identity["api_base"] == server.url and identity["sampling"]["stop"] == ["END"]
    assert "SECRET" not in json.dumps(identity)
    other = LiteLLMBackend("openai/gpt-4o-mini", api_base=server.url, extra={"api_version": "x"})
    assert LM(other, params=params).identity_hash() != lm.identity_hash()
    with pytest.raises(UserInputError, match="top_p"):
        LiteLLMBackend("openai/m", extra={"top_p": 0.9}).generate(_msgs(), params)


def test_resume_with_another_api_base_is_refused_naming_the_field(tmp_path: Path) -> None:
    """Kills: a resume check that compares only the model string (or top-level keys without
    naming the differing field), so a run resumes against another endpoint."""
    run = RunDirectory(tmp_path)
    run.write_config({"lm": _identity("http://a"), "seed": 0}, resume=False)
    run.write_config({"lm": _identity("http://a"), "seed": 0}, resume=True)  # same: accepted
    with pytest.raises(RunDirError) as refused:
        run.write_config({"lm": _identity("http://b"), "seed": 0}, resume=True)
    message = str(refused.value)
    assert "lm.api_base: 'http://a' -> 'http://b'" in message
    assert "new run_dir" in message and "original settings" in message


def _identity(api_base: str) -> dict[str, Any]:
    return LM(LiteLLMBackend("openai/gpt-4o-mini", api_base=api_base)).identity()


def test_compile_resume_refuses_a_changed_endpoint(tmp_path: Path) -> None:
    """Kills: compile recording only the model string in config.json (the endpoint and the
    sampling parameters unrecorded), so resume cannot see they changed."""
    optimizer = GradientText(epochs=1, batch_size=4, proposers=[ReflectiveProposer()])
    reflector = ScriptedLM(lambda m: json.dumps({"edits": []}), model="scripted/reflector")
    train, val = parity_examples(0, 4), parity_examples(100, 4)
    with (
        FakeOpenAIServer(parity_target, latency_s=0.0) as a,
        FakeOpenAIServer(parity_target, latency_s=0.0) as b,
    ):
        sd.compile(Parity(), train, val, lm=_fake_endpoint_lm(a.url), optimizer_lm=reflector,
                   optimizer=optimizer, run_dir=tmp_path, threads=2)  # fmt: skip
        config = json.loads((tmp_path / "config.json").read_text(encoding="utf-8"))
        assert config["lm"]["api_base"] == a.url
        with pytest.raises(RunDirError, match=r"lm\.api_base: '.*' -> '.*'"):
            sd.compile(Parity(), train, val, lm=_fake_endpoint_lm(b.url), optimizer_lm=reflector,
                       optimizer=optimizer, run_dir=tmp_path, resume=True)  # fmt: skip
        assert b.requests == 0


def test_a_run_that_ran_out_resumes_with_a_raised_budget(tmp_path: Path) -> None:
    """Kills: the resume check treating the budget as a model setting, which refuses exactly
    what the `BudgetExceeded` message tells the user to do ("raise Budget.max_calls to
    continue"), and a raised budget that is not recorded in config.json."""
    target = ScriptedLM(parity_target)

    def run(max_calls: int, resume: bool) -> sd.CompileResult:
        return sd.compile(
            Parity(),
            parity_examples(0, 6),
            parity_examples(100, 6),
            lm=target,
            optimizer_lm=ScriptedLM(lambda m: "{}"),
            budget=sd.Budget(max_calls=max_calls),
            run_dir=tmp_path / "run",
            resume=resume,
        )

    assert run(20, resume=False).stop_reason == "budget"
    resumed = run(400, resume=True)
    assert resumed.usage.calls > 20
    config = json.loads((tmp_path / "run" / "config.json").read_text(encoding="utf-8"))
    assert config["budget"]["max_calls"] == 400
    with pytest.raises(RunDirError, match="seed"):
        sd.compile(
            Parity(),
            parity_examples(0, 6),
            parity_examples(100, 6),
            lm=target,
            budget=sd.Budget(max_calls=400),
            run_dir=tmp_path / "run",
            resume=True,
            seed=1,
        )


# --- budgets across a kill ---------------------------------------------------------------------

KILLED_RUN = r"""
import json, sys
import skillopt_dsl as sd
from skillopt_dsl.lm import LM
from skillopt_dsl.optimizers import DemonstrationsProposer, GradientText
from tests.helpers import Parity, parity_examples

url, run_dir, resume, out = sys.argv[1], sys.argv[2], sys.argv[3] == "1", sys.argv[4]
lm = LM("openai/fake-model", api_base=url, max_retries=0)
result = sd.compile(
    Parity(), parity_examples(0, 16), parity_examples(100, 8),
    optimizer=GradientText(proposers=[DemonstrationsProposer(per_step=1, max_demos=40)],
                           epochs=40, batch_size=4, lr=1.0),
    lm=lm, optimizer_lm=lm, budget=sd.Budget(max_calls=int(sys.argv[5])),
    run_dir=run_dir, resume=resume, threads=4,
)
with open(out, "w") as f:
    json.dump({"calls": result.usage.calls, "lost": result.usage.lost_calls,
               "stop": result.stop_reason}, f)
"""


def test_a_kill_with_calls_in_flight_then_resume_stays_within_max_calls(tmp_path: Path) -> None:
    """Kills: a reservation that is not durable before its call is sent. A run SIGKILLed with
    calls in flight at a slow server never recorded them; its resume then spent the whole
    budget again, so the server received more than `max_calls` requests (204 for 200)."""
    import signal
    import subprocess
    import sys

    max_calls, root = 40, Path(__file__).resolve().parents[1]
    script, run_dir, out = tmp_path / "run.py", tmp_path / "run", tmp_path / "out.json"
    script.write_text(KILLED_RUN, encoding="utf-8")
    env = {"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1",
           "OPENAI_API_KEY": "sk-fake"}  # fmt: skip
    with FakeOpenAIServer(parity_target, latency_s=0.4, max_lifetime_s=300) as server:

        def command(resume: bool) -> list[str]:
            return [sys.executable, str(script), server.url, str(run_dir), str(int(resume)),
                    str(out), str(max_calls)]  # fmt: skip

        killed = subprocess.Popen(command(False), cwd=root, env=env, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 120
        while server.requests < 12:  # the seed is scored (8 calls), the search has started
            assert killed.poll() is None, (
                killed.stderr.read().decode()[-2000:] if killed.stderr else ""
            )
            assert time.monotonic() < deadline, "the run made no progress"
            time.sleep(0.005)
        killed.send_signal(signal.SIGKILL)  # mid-latency: the latest request is in flight
        killed.wait(timeout=30)
        assert killed.returncode == -signal.SIGKILL
        done = subprocess.run(command(True), cwd=root, env=env, capture_output=True, text=True,
                              timeout=300)  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
        resumed = json.loads(out.read_text(encoding="utf-8"))
        assert resumed["stop"] == "budget"
        assert resumed["lost"] >= 1  # the kill left calls in flight, and the resume counted them
        assert server.requests <= resumed["calls"] <= max_calls


def test_unpriced_agent_runs_are_refused_under_a_dollar_budget(tmp_path: Path) -> None:
    """Kills: a dollar budget that lets unpriced runs through (three CommandAgent runs of an
    unpriced model under Budget(max_usd=1.0) were all sent, `cost_usd: None`); and a declared
    price per run that is not charged for a run reporting no cost."""
    import sys

    from skillopt_dsl.agents import CommandAgent

    marker = tmp_path / "runs.txt"
    argv = [sys.executable, "-c",
            f"open({str(marker)!r}, 'a').write('x'); print('done')", "{prompt}"]  # fmt: skip
    rows = [sd.Example(f"t{i}", {"task": f"task {i}"}, {"answer": "done"}) for i in range(3)]

    def agent(**kwargs: Any) -> CommandAgent:
        return CommandAgent(argv=argv, output="text", metric=sd.metrics.exact_match("answer"),
                            env_allowlist=["PATH"], **kwargs)  # fmt: skip

    ledger = UsageLedger(Budget(max_usd=1.0))
    with pytest.raises(UserInputError, match=r"no known price.*max_usd_per_run"):
        sd.evaluate(agent(), rows, lm=LM(ScriptedLM(lambda m: ""), ledger=ledger), threads=1)
    assert not marker.exists() and ledger.snapshot().calls == 0  # nothing was started
    priced = UsageLedger(Budget(max_usd=1.0))
    with pytest.raises(BudgetExceeded, match=r"\$0\.8000 spent.*up to \$0\.4000"):
        sd.evaluate(agent(max_usd_per_run=0.4), rows,
                    lm=LM(ScriptedLM(lambda m: ""), ledger=priced), threads=1)  # fmt: skip
    assert marker.read_text() == "xx"  # the third run (up to $1.20 in all) was never started
    assert priced.snapshot().cost_usd == pytest.approx(0.8)


# --- fail fast ---------------------------------------------------------------------------------

UNREACHABLE = "http://127.0.0.1:9/v1"  # the discard port: nothing listens, connections refused


def test_an_unreachable_endpoint_stops_compile_and_sleep_before_the_search(tmp_path: Path) -> None:
    """Kills: a run whose every seed call failed going on to search (it returned normally after
    43 s with stop=budget, 40 errors and 160 retries), for `compile` and for Sleep's
    consolidation alike; and an error that does not name the endpoint and the first failure."""
    from skillopt_dsl.data import Splits
    from skillopt_dsl.reachability import TargetUnreachable
    from skillopt_dsl.settings import CompileSettings
    from skillopt_dsl.sleep.consolidate import consolidate

    train, val = parity_examples(0, 6), parity_examples(100, 8)
    reflector = ScriptedLM(lambda m: "{}")
    GATE = sd.Gate.mean_only()  # a night this small can accept a candidate only without a test

    def unreachable(ledger: UsageLedger | None = None) -> LM:
        return LM("openai/fake-model", api_base=UNREACHABLE, max_retries=0, ledger=ledger)

    with pytest.raises(TargetUnreachable, match=r"127\.0\.0\.1:9.*first failure") as err:
        sd.compile(Parity(), train, val, lm=unreachable(), optimizer_lm=reflector,
                   budget=sd.Budget(max_calls=200), run_dir=tmp_path / "compile")  # fmt: skip
    assert "8 of 8" in str(err.value) and "openai/fake-model" in str(err.value)
    assert reflector.calls == []  # no proposal: the search never started
    night = sd.SkillModule.create(name="Night", inputs={"request": str}, outputs={"answer": str},
                                  metric=sd.metrics.exact_match("answer"))  # fmt: skip
    tasks = [sd.Example(f"t{i}", {"request": f"task {i}"}, {"answer": "done"}) for i in range(14)]
    with pytest.raises(TargetUnreachable, match=r"127\.0\.0\.1:9"):
        settings = CompileSettings(gate=GATE, budget=sd.Budget(max_calls=200), lm=unreachable(),
                                   optimizer_lm=reflector, run_dir=tmp_path / "night")  # fmt: skip
        consolidate(night, Splits(tasks[:6], tasks[6:], []), optimizer=GradientText(),
                    settings=settings)  # fmt: skip
    assert reflector.calls == []


def test_a_server_that_refuses_every_call_fails_fast_naming_the_refusal(tmp_path: Path) -> None:
    """Kills: treating a reachable endpoint that answers every call with an error (a bad key,
    an unknown model) as a run to search on; the error names the server's reply."""
    from skillopt_dsl.reachability import TargetUnreachable

    with FakeOpenAIServer(max_requests=0, latency_s=0.0) as refusing:  # answers 503 to all
        lm = LM("openai/fake-model", api_base=refusing.url, max_retries=0)
        with pytest.raises(TargetUnreachable, match=r"503"):
            sd.compile(Parity(), parity_examples(0, 6), parity_examples(100, 8), lm=lm,
                       optimizer_lm=ScriptedLM(lambda m: "{}"))  # fmt: skip
    # one answered call is enough: a model that answers, even wrongly, is the gate's business
    half = {"n": 0}

    def flaky(messages: list[Message]) -> str:
        half["n"] += 1
        if half["n"] % 2:
            raise ConnectionError("dropped")
        return "odd"

    result = sd.compile(Parity(), parity_examples(0, 6), parity_examples(100, 8),
                        lm=LM(ScriptedLM(flaky), max_retries=0),
                        optimizer_lm=ScriptedLM(lambda m: "{}"),
                        budget=sd.Budget(max_calls=30), threads=1)  # fmt: skip
    assert result.seed_val_score == 0.5  # n100, n102, ... failed; n101, n103, ... said "odd"


def test_a_target_answering_empty_strings_is_not_declared_unreachable() -> None:
    """Kills: an empty answer taken for a failed call (a model that answers "" every time is
    reachable: it scores 0, and the gate, not the reachability check, deals with that)."""
    from skillopt_dsl.reachability import require_an_answer

    result = sd.compile(Parity(), parity_examples(0, 6), parity_examples(100, 8),
                        lm=ScriptedLM(lambda m: ""), optimizer_lm=ScriptedLM(lambda m: "{}"),
                        budget=sd.Budget(max_calls=40), threads=1)  # fmt: skip
    assert result.seed_val_score == 0.0 and not result.improved
    seed = sd.evaluate(Parity(), parity_examples(100, 3), lm=ScriptedLM(lambda m: ""), threads=1)
    assert all(r.error is None and r.output == "" for r in seed.records)
    require_an_answer(seed, LM(ScriptedLM(lambda m: "")))  # does not raise


def test_reservation_ids_stay_unique_after_a_second_resume(tmp_path: Path) -> None:
    """Kills: a replayed ledger numbering its reservations from 1 again: after a second resume
    a new reservation reuses the id of a call lost at the first kill, its settlement is taken
    for that call's, and the lost call disappears from the count."""
    from skillopt_dsl.lm import Completion

    journal = tmp_path / "ledger.jsonl"
    first = UsageLedger()
    first.open_journal(journal, replay=True)
    for _ in range(2):
        first.settle(first.reserve(5, 10), Completion("ok", 10, 5, None))
    first.reserve(5, 10)  # id 3: in flight when the process is killed
    second = UsageLedger()
    second.open_journal(journal, replay=True)
    assert (second.snapshot().calls, second.snapshot().lost_calls) == (3, 1)
    for _ in range(3):
        second.settle(second.reserve(5, 10), Completion("ok", 10, 5, None))
    third = UsageLedger()
    third.open_journal(journal, replay=True)
    snap = third.snapshot()
    assert (snap.calls, snap.lost_calls) == (6, 1)
    assert snap.total_tokens == 5 * 15 + 15


def test_the_usage_journal_replays_settled_lost_and_interrupted_calls(tmp_path: Path) -> None:
    """Kills: an interrupted call counted as a plain failure (no tokens, not lost) in the
    process that saw it; replay that drops unsettled reservations; a torn last line (a kill
    mid-write) that breaks the resume, or a damaged middle line that is silently skipped."""
    from skillopt_dsl.lm import Completion

    journal = tmp_path / "ledger.jsonl"
    ledger = UsageLedger(Budget(max_calls=10, max_usd=1.0))
    assert ledger.open_journal(journal, replay=True) is False  # nothing to replay yet
    done = ledger.reserve(5, 20, max_cost_usd=0.1)
    ledger.settle(done, Completion("ok", 20, 3, 0.05))
    cut = ledger.reserve(5, 20, max_cost_usd=0.1)
    ledger.settle(cut, None, error_type="interrupted")
    ledger.reserve(7, 30, max_cost_usd=0.2)  # in flight when the process dies
    live = ledger.snapshot()
    assert (live.calls, live.lost_calls, live.total_tokens) == (2, 1, 23 + 25)
    assert live.priced_cost_usd == pytest.approx(0.15)
    with journal.open("ab") as handle:
        handle.write(b'{"op":"reserve","id":9')  # a torn last line
    resumed = UsageLedger(Budget(max_calls=10, max_usd=1.0))
    assert resumed.open_journal(journal, replay=True) is True
    snap = resumed.snapshot()
    assert (snap.calls, snap.lost_calls, snap.errors) == (3, 2, 2)
    assert snap.total_tokens == 23 + 25 + 37 and snap.priced_cost_usd == pytest.approx(0.35)
    assert dict(snap.error_types) == {"interrupted": 1, "lost": 1}
    resumed.settle(resumed.reserve(1, 1, max_cost_usd=0.0), Completion("x", 1, 1, 0.0))
    assert UsageLedger().open_journal(journal, replay=True)  # the torn line was cut cleanly
    journal.write_text('{"op":"cache_hit"}\nnot json\n{"op":"cache_hit"}\n', encoding="utf-8")
    with pytest.raises(RunDirError, match="line 2 is damaged"):
        UsageLedger().open_journal(journal, replay=True)
