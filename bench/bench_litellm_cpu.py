"""Bench 6: client CPU per chat call, from a raw HTTP POST up to the full `LM.complete`.

The fake OpenAI server (`skillopt_dsl.testing.FakeOpenAIServer`, zero latency) runs in a child
process, so `time.process_time()` in this process counts the client only (every thread of it,
litellm's logging workers included). Each transport makes `--n` sequential calls after a short
warm-up, in `--rounds` rounds interleaved across transports (so a burst of load from elsewhere
on the machine hits all of them alike); reported: the median round's CPU ms and wall ms per call.

Transports: a raw `httpx.Client.post` (floor), the `openai` SDK, `litellm.completion` with its
defaults (as a user would call it), our `LiteLLMBackend.generate` (litellm + cost) and our lean
`OpenAICompatBackend.generate` (one pooled httpx client + cost from litellm's price table), each
for the unpriced `openai/fake` (as in benches 2 and 5) and a priced name (`openai/gpt-4o-mini`),
and `LM.complete` over the lean backend (the whole client layer: identity, budget reservation,
ledger, retries wrapper; no cache).

Run: `python bench/bench_litellm_cpu.py [--n 300] [--rounds 5]`.
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import time
from collections.abc import Callable
from typing import Any

from _common import parity_answer, print_table, write_results

from skillopt_dsl.lm import LM, LiteLLMBackend, SamplingParams
from skillopt_dsl.lm.openai_compat import OpenAICompatBackend
from skillopt_dsl.testing import FakeOpenAIServer

MESSAGES = [
    {"role": "system", "content": "Answer with one word: even or odd."},
    {"role": "user", "content": "number: 42"},
]
WARMUP = 20


def serve(port_out: Any, stop: Any) -> None:
    """Child process: run the fake server until `stop` is set."""
    with FakeOpenAIServer(parity_answer, latency_s=0.0, max_lifetime_s=900) as server:
        port_out.put(server.url)
        stop.wait()


def raw_httpx(url: str) -> Callable[[], str]:
    import httpx

    client = httpx.Client(timeout=30)
    body = {"model": "fake", "messages": MESSAGES, "max_tokens": 8}

    def call() -> str:
        response = client.post(f"{url}/chat/completions", json=body)
        response.raise_for_status()
        return str(response.json()["choices"][0]["message"]["content"])

    return call


def openai_sdk(url: str) -> Callable[[], str]:
    import openai

    client = openai.OpenAI(base_url=url, api_key="sk-fake", max_retries=0)

    def call() -> str:
        out = client.chat.completions.create(model="fake", messages=MESSAGES, max_tokens=8)  # type: ignore[arg-type]
        return out.choices[0].message.content or ""

    return call


def litellm_defaults(url: str) -> Callable[[], str]:
    import litellm

    def call() -> str:
        out = litellm.completion(
            model="openai/fake", messages=MESSAGES, api_base=url, api_key="sk-fake", max_tokens=8
        )
        return str(out.choices[0].message.content)

    return call


def ours(url: str, model: str = "openai/fake") -> Callable[[], str]:
    backend = LiteLLMBackend(model, api_base=url, extra={"api_key": "sk-fake"})
    params = SamplingParams(temperature=0.0, max_tokens=8)

    def call() -> str:
        return backend.generate(list(MESSAGES), params).text  # type: ignore[arg-type]

    return call


def lean(url: str, model: str = "openai/fake") -> Callable[[], str]:
    backend = OpenAICompatBackend(model, api_base=url, api_key="sk-fake")
    params = SamplingParams(temperature=0.0, max_tokens=8)

    def call() -> str:
        return backend.generate(list(MESSAGES), params).text  # type: ignore[arg-type]

    return call


def lean_lm(url: str) -> Callable[[], str]:
    lm = LM("openai/gpt-4o-mini", api_base=url, params=SamplingParams(max_tokens=8))
    assert isinstance(lm.backend, OpenAICompatBackend)

    def call() -> str:
        return lm.complete(MESSAGES).text  # type: ignore[arg-type]

    return call


def warm_up(call: Callable[[], str]) -> Callable[[], str]:
    """First calls (imports, connection, caches) are not measured; they also check the answer."""
    for _ in range(WARMUP):
        assert call() == "even"
    return call


def measure(call: Callable[[], str], n: int) -> tuple[float, float]:
    """(CPU ms per call, wall ms per call) over `n` sequential calls."""
    cpu0, wall0 = time.process_time(), time.perf_counter()
    for _ in range(n):
        call()
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    return cpu / n * 1000, wall / n * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    ctx = multiprocessing.get_context("spawn")
    urls, stop = ctx.Queue(), ctx.Event()
    child = ctx.Process(target=serve, args=(urls, stop), daemon=True)
    child.start()
    url = urls.get(timeout=60)
    transports = [
        ("raw httpx.Client.post", raw_httpx),
        ("openai SDK", openai_sdk),
        ("litellm.completion (defaults)", litellm_defaults),
        ("LiteLLMBackend.generate (ours)", ours),
        ("ours, priced model (gpt-4o-mini)", lambda url: ours(url, "openai/gpt-4o-mini")),
        ("OpenAICompatBackend.generate (lean)", lean),
        ("lean, priced model (gpt-4o-mini)", lambda url: lean(url, "openai/gpt-4o-mini")),
        ("LM.complete over lean, priced (full client)", lean_lm),
    ]
    rows: list[list[Any]] = []
    figures: dict[str, Any] = {"n": args.n, "rounds": args.rounds, "runs": []}
    try:
        calls = [warm_up(make(url)) for _, make in transports]
        rounds = [[measure(call, args.n) for call in calls] for _ in range(args.rounds)]
    finally:
        stop.set()
        child.join(timeout=10)
    for i, (name, _) in enumerate(transports):
        cpu_ms = statistics.median(r[i][0] for r in rounds)
        wall_ms = statistics.median(r[i][1] for r in rounds)
        rows.append([name, args.n * args.rounds, cpu_ms, wall_ms])
        figures["runs"].append({"transport": name, "calls": args.n * args.rounds,
                                "cpu_ms_per_call": cpu_ms, "wall_ms_per_call": wall_ms,
                                "cpu_ms_per_round": [r[i][0] for r in rounds]})  # fmt: skip
    print_table(
        f"Client CPU per call: median of {args.rounds} rounds of {args.n} sequential calls, "
        "zero-latency fake server in a child process",
        ["transport", "calls", "CPU ms/call", "wall ms/call"],
        rows,
    )
    write_results("litellm_cpu", figures)


if __name__ == "__main__":
    main()
