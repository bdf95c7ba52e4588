"""Bench 2: wall time and client CPU against an OpenAI-compatible fake server with fixed latency.

`--n` examples (default 400) at 1, 8, 32 and 128 threads, every runner against the same
`skillopt_dsl.testing.FakeOpenAIServer` (50 ms latency) running in a **child process**, so
`time.process_time()` here counts the client alone (all its threads). Reported per runner and
thread count: wall time, its ratio to the ideal `n * latency / threads`, client CPU ms per call,
server calls and accuracy.

Runners, one run, side by side:
- `skillopt_dsl.evaluate`, lean path: `LM("openai/fake", api_base=...)` -> `OpenAICompatBackend`;
- `skillopt_dsl.evaluate`, litellm path: the same with `backend="litellm"` (the path before);
- raw `litellm.completion` in a thread pool (no evaluation layer at all);
- `dspy.Evaluate` + `dspy.Predict` (caches off) and GEPA's `DefaultAdapter.evaluate`, when
  installed (reported as "not available" otherwise).

Run: `python bench/bench_concurrency.py [--latency 0.05] [--n 400] [--threads 1 8 32 128]`.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import re
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from _common import Parity, optional, parity_examples, print_table, write_results

import skillopt_dsl as sd
from skillopt_dsl.lm import LM
from skillopt_dsl.testing import FakeOpenAIServer

THREADS = (1, 8, 32, 128)
KEY = "sk-fake"
os.environ.setdefault("OPENAI_API_KEY", KEY)  # both of our paths read it, as litellm does
_NUMBER = re.compile(r"(\d+)\s*(?:\n|$)")

Measured = tuple[float, float] | None
"""(wall seconds, accuracy), or None when the runner is not installed."""


def answer(messages: list[dict[str, str]]) -> str:
    """Right parity for our prompts, DSPy's chat-adapter prompts and GEPA's."""
    content = messages[-1]["content"]
    found = _NUMBER.search(content)
    word = "even" if found and int(found.group(1)) % 2 == 0 else "odd"
    if "[[ ## " in content or "[[ ## " in messages[0]["content"]:
        return f"[[ ## answer ## ]]\n{word}\n\n[[ ## completed ## ]]"
    return word


def serve(latency: float, commands: Any, replies: Any) -> None:
    """Child process: serve until told to stop; answer "count" with the requests so far."""
    with FakeOpenAIServer(answer, latency_s=latency, max_lifetime_s=1800) as server:
        replies.put(server.url)
        while (command := commands.get()) != "stop":
            replies.put(server.requests if command == "count" else None)


def ours(backend: str) -> Callable[[str, list[Any], int], Measured]:
    def run(url: str, examples: list[Any], threads: int) -> Measured:
        lm = LM("openai/fake", api_base=url, backend=backend, max_concurrency=threads)  # type: ignore[arg-type]
        start = time.perf_counter()
        report = sd.evaluate(Parity(), examples, lm=lm, threads=threads, progress=False)
        seconds = time.perf_counter() - start
        assert len(report.records) == len(examples) and report.n_errors == 0
        return seconds, report.mean

    return run


def raw_litellm(url: str, examples: list[Any], threads: int) -> Measured:
    import litellm

    system = Parity().seed_skill.text

    def one(example: Any) -> bool:
        out = litellm.completion(
            model="openai/fake",
            api_base=url,
            api_key=KEY,
            max_tokens=16,
            messages=[
                {"role": "system", "content": system},
                {"role": "user", "content": f"number: {example.inputs['number']}"},
            ],
        )
        return bool(out.choices[0].message.content == example.labels["answer"])

    start = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        right = list(pool.map(one, examples))
    return time.perf_counter() - start, sum(right) / len(right)


def dspy_run(url: str, examples: list[Any], threads: int) -> Measured:
    dspy = optional("dspy")
    if dspy is None:
        return None
    dspy.configure_cache(enable_disk_cache=False, enable_memory_cache=False)
    lm = dspy.LM("openai/fake", api_base=url, api_key=KEY, cache=False, num_retries=0)
    dspy.configure(lm=lm)
    devset = [
        dspy.Example(number=e.inputs["number"], answer=e.labels["answer"]).with_inputs("number")
        for e in examples
    ]
    evaluate = dspy.Evaluate(
        devset=devset,
        metric=lambda ex, pred, trace=None: ex.answer == pred.answer,
        num_threads=threads,
        display_progress=False,
    )
    start = time.perf_counter()
    result = evaluate(dspy.Predict("number -> answer"))
    return time.perf_counter() - start, float(getattr(result, "score", result)) / 100


def gepa_run(url: str, examples: list[Any], threads: int) -> Measured:
    if optional("gepa") is None:
        return None
    from gepa.adapters.default_adapter.default_adapter import DefaultAdapter

    adapter = DefaultAdapter(
        "openai/fake",
        max_litellm_workers=threads,
        litellm_batch_completion_kwargs={"api_base": url, "api_key": KEY},
    )
    batch = [
        {"input": e.inputs["number"], "answer": e.labels["answer"], "additional_context": {}}
        for e in examples
    ]
    start = time.perf_counter()
    result = adapter.evaluate(batch, {"system_prompt": Parity().seed_skill.text})
    return time.perf_counter() - start, sum(result.scores) / len(result.scores)


RUNNERS: dict[str, Callable[[str, list[Any], int], Measured]] = {
    "skillopt_dsl, lean path": ours("auto"),
    "skillopt_dsl, litellm path (before)": ours("litellm"),
    "raw litellm.completion": raw_litellm,
    "dspy.Evaluate": dspy_run,
    "gepa DefaultAdapter": gepa_run,
}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--n", type=int, default=400)
    parser.add_argument("--threads", type=int, nargs="+", default=list(THREADS))
    args = parser.parse_args()
    examples = parity_examples(args.n)
    ctx = multiprocessing.get_context("spawn")
    commands, replies = ctx.Queue(), ctx.Queue()
    child = ctx.Process(target=serve, args=(args.latency, commands, replies), daemon=True)
    child.start()
    url = replies.get(timeout=60)

    def served() -> int:
        commands.put("count")
        return int(replies.get(timeout=30))

    rows: list[list[Any]] = []
    figures: dict[str, Any] = {"n": args.n, "latency_s": args.latency, "runs": []}
    try:
        for fn in RUNNERS.values():  # warm up: imports and first connections
            fn(url, examples[:8], 2)
        for runner, fn in RUNNERS.items():
            for threads in args.threads:
                before, cpu0 = served(), time.process_time()
                measured = fn(url, examples, threads)
                cpu_s, calls = time.process_time() - cpu0, served() - before
                if measured is None:
                    rows.append([runner, threads, "not available", *[None] * 5])
                    continue
                seconds, accuracy = measured
                ideal = args.n * args.latency / threads
                cpu_ms = cpu_s / max(calls, 1) * 1000
                rows.append([runner, threads, seconds, ideal, seconds / ideal, cpu_ms, calls,
                             accuracy])  # fmt: skip
                figures["runs"].append({"runner": runner, "threads": threads, "seconds": seconds,
                                        "ideal_s": ideal, "ratio": seconds / ideal,
                                        "client_cpu_ms_per_call": cpu_ms, "server_calls": calls,
                                        "accuracy": accuracy})  # fmt: skip
    finally:
        commands.put("stop")
        child.join(timeout=10)
    print_table(
        f"Concurrency: {args.n} examples, fake server (child process) latency "
        f"{args.latency * 1000:.0f} ms",
        ["runner", "threads", "wall s", "ideal s", "x ideal", "client CPU ms/call", "calls",
         "accuracy"],
        rows,
    )  # fmt: skip
    write_results("concurrency", figures)


if __name__ == "__main__":
    main()
