"""Bench 2: wall time against a local OpenAI-compatible fake server with fixed latency.

400 examples at 1, 8 and 32 threads, reached through litellm (`openai/fake`, `api_base` pointed
at `skillopt_dsl.testing.FakeOpenAIServer`) exactly as a real provider. Reported: wall time and
its ratio to the ideal `calls * latency / threads`. DSPy (`dspy.Evaluate` + `dspy.LM`, caches
off) and GEPA (`DefaultAdapter.evaluate`, litellm batch completion) run on the same server.

Run: `python bench/bench_concurrency.py [--latency 0.05] [--n 400]`.
"""

from __future__ import annotations

import argparse
import re
from typing import Any

from _common import Parity, optional, parity_examples, print_table, timer, write_results

import skillopt_dsl as sd
from skillopt_dsl.lm import LM, LiteLLMBackend
from skillopt_dsl.testing import FakeOpenAIServer

THREADS = (1, 8, 32)
_NUMBER = re.compile(r"(\d+)\s*(?:\n|$)")


def answer(messages: list[dict[str, str]]) -> str:
    """Right parity for our prompts, DSPy's chat-adapter prompts and GEPA's."""
    content = messages[-1]["content"]
    found = _NUMBER.search(content)
    word = "even" if found and int(found.group(1)) % 2 == 0 else "odd"
    if "[[ ## " in content or "[[ ## " in messages[0]["content"]:
        return f"[[ ## answer ## ]]\n{word}\n\n[[ ## completed ## ]]"
    return word


def ours(url: str, examples: list[Any], threads: int) -> tuple[float, float]:
    backend = LiteLLMBackend("openai/fake", api_base=url, extra={"api_key": "sk-fake"})
    lm = LM(backend, max_concurrency=threads)
    with timer() as elapsed:
        report = sd.evaluate(Parity(), examples, lm=lm, threads=threads, progress=False)
    assert len(report.records) == len(examples) and report.n_errors == 0
    return elapsed(), report.mean


def dspy_run(url: str, examples: list[Any], threads: int) -> tuple[float, float] | None:
    dspy = optional("dspy")
    if dspy is None:
        return None
    dspy.configure_cache(enable_disk_cache=False, enable_memory_cache=False)
    lm = dspy.LM("openai/fake", api_base=url, api_key="sk-fake", cache=False, num_retries=0)
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
    with timer() as elapsed:
        result = evaluate(dspy.Predict("number -> answer"))
    return elapsed(), float(getattr(result, "score", result)) / 100


def gepa_run(url: str, examples: list[Any], threads: int) -> tuple[float, float] | None:
    if optional("gepa") is None:
        return None
    from gepa.adapters.default_adapter.default_adapter import DefaultAdapter

    adapter = DefaultAdapter(
        "openai/fake",
        max_litellm_workers=threads,
        litellm_batch_completion_kwargs={"api_base": url, "api_key": "sk-fake"},
    )
    batch = [
        {"input": e.inputs["number"], "answer": e.labels["answer"], "additional_context": {}}
        for e in examples
    ]
    with timer() as elapsed:
        result = adapter.evaluate(batch, {"system_prompt": Parity().seed_skill.text})
    return elapsed(), sum(result.scores) / len(result.scores)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--n", type=int, default=400)
    args = parser.parse_args()
    examples = parity_examples(args.n)
    rows: list[list[Any]] = []
    figures: dict[str, Any] = {"n": args.n, "latency_s": args.latency, "runs": []}
    with FakeOpenAIServer(answer, latency_s=args.latency, max_lifetime_s=900) as server:
        ours(server.url, examples[:4], 2)  # warm up: litellm import and first connection
        for runner, fn in (("skillopt_dsl", ours), ("dspy.Evaluate", dspy_run),
                           ("gepa DefaultAdapter", gepa_run)):  # fmt: skip
            for threads in THREADS:
                before = server.requests
                measured = fn(server.url, examples, threads)
                ideal = args.n * args.latency / threads
                if measured is None:
                    rows.append([runner, threads, "not available", None, None, None, None])
                    continue
                seconds, accuracy = measured
                calls = server.requests - before
                rows.append([runner, threads, seconds, ideal, seconds / ideal, calls, accuracy])
                figures["runs"].append({"runner": runner, "threads": threads, "seconds": seconds,
                                        "ideal_s": ideal, "ratio": seconds / ideal,
                                        "server_calls": calls, "accuracy": accuracy})  # fmt: skip
    print_table(
        f"Concurrency: {args.n} examples, fake server latency {args.latency * 1000:.0f} ms",
        ["runner", "threads", "wall s", "ideal s", "x ideal", "calls", "accuracy"],
        rows,
    )
    write_results("concurrency", figures)


if __name__ == "__main__":
    main()
