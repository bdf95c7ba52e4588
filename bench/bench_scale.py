"""Bench 5: 10,000 examples at 64 threads on the fake server: wall time, peak memory, no loss.

A server call above one per example is a transient failure the LM layer retried (reported).
Peak memory is the process's maximum resident set size (`resource.getrusage`), measured in a
fresh process so nothing else inflates it; the baseline after imports is reported too.

Run: `python bench/bench_scale.py [--n 10000] [--threads 64] [--latency 0.05]`.
"""

from __future__ import annotations

import argparse
import resource
from typing import Any

from _common import Parity, parity_answer, parity_examples, print_table, timer, write_results

import skillopt_dsl as sd
from skillopt_dsl.lm import LM, LiteLLMBackend, ResponseCache
from skillopt_dsl.testing import FakeOpenAIServer


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--threads", type=int, default=64)
    parser.add_argument("--latency", type=float, default=0.05)
    args = parser.parse_args()
    examples = parity_examples(args.n)
    with FakeOpenAIServer(parity_answer, latency_s=args.latency, max_lifetime_s=900) as server:
        backend = LiteLLMBackend("openai/fake", api_base=server.url, extra={"api_key": "sk-x"})
        lm = LM(backend, max_concurrency=args.threads, cache=ResponseCache())
        warm_up = parity_examples(8, start=10 * args.n)
        sd.evaluate(Parity(), warm_up, lm=lm, threads=8, progress=False)
        baseline = peak_rss_mib()
        before = server.requests
        with timer() as elapsed:
            report = sd.evaluate(Parity(), examples, lm=lm, threads=args.threads,
                                 progress=False)  # fmt: skip
        seconds = elapsed()
        calls = server.requests - before
    ids = [r.example_id for r in report.records]
    expected = [e.id for e in examples]
    figures: dict[str, Any] = {
        "n": len(expected),
        "threads": args.threads,
        "latency_s": args.latency,
        "seconds": seconds,
        "ideal_s": len(expected) * args.latency / args.threads,
        "rollouts_per_s": len(expected) / seconds,
        "peak_rss_mib": peak_rss_mib(),
        "rss_after_imports_mib": baseline,
        "records": len(ids),
        "records_in_order": ids == expected,
        "errors": report.n_errors,
        "server_calls": calls,
        "ledger_calls": lm.ledger.snapshot().calls,
        "retries": lm.ledger.snapshot().retries,
        "retried_error_types": dict(lm.ledger.snapshot().error_types),
        "mean": report.mean,
    }
    figures["ratio"] = seconds / figures["ideal_s"]
    print_table(
        f"Scale: {len(expected)} examples at {args.threads} threads, {args.latency * 1000:.0f} ms",
        ["wall s", "ideal s", "x ideal", "rollouts/s", "peak RSS MiB", "records", "errors",
         "server calls"],
        [[seconds, figures["ideal_s"], figures["ratio"], figures["rollouts_per_s"],
          figures["peak_rss_mib"], len(ids), report.n_errors, calls]],
    )  # fmt: skip
    print(f"retried transient failures: {figures['retries']} {figures['retried_error_types']}")
    assert ids == expected and report.n_errors == 0, "records lost"
    write_results("scale", figures)


if __name__ == "__main__":
    main()
