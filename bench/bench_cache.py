"""Bench 4: an identical compile rerun with a warm response cache.

The first compile runs cold (fresh run directory, empty `cache.sqlite`); the rerun uses a new
run directory whose `cache.sqlite` (with its `-wal` file: the cache runs in WAL mode) is a
copy of the first one, so every model call is answered
from the cache. Reported: provider calls (expected 0 on the rerun), cache hits, wall-time ratio,
and whether the result is identical. The fake models have a fixed latency (like a provider).

Run: `python bench/bench_cache.py [--latency 0.02]`.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import Parity, parity_answer, parity_examples, print_table, timer, write_results

import skillopt_dsl as sd
from skillopt_dsl.optimizers import GradientText, ReflectiveProposer
from skillopt_dsl.testing import ScriptedLM

RULE = {"kind": "add", "after": None, "text": "Check if divisible by 2.", "rationale": "parity"}
NOISE = {"kind": "add", "after": None, "text": "Be brief.", "rationale": "style"}


def models(latency: float) -> tuple[ScriptedLM, ScriptedLM]:
    def target(messages: list[dict[str, str]]) -> str:
        time.sleep(latency)
        if "divisible by 2" in messages[0]["content"]:
            return parity_answer(messages)
        return "odd"

    def reflector(messages: list[dict[str, str]]) -> str:
        time.sleep(latency)
        rejected = "Already tried and rejected" in messages[-1]["content"]
        return json.dumps({"edits": [RULE if rejected else NOISE]})

    return ScriptedLM(target), ScriptedLM(reflector, model="scripted/reflector")


def compile_once(run_dir: Path, latency: float) -> tuple[float, Any, int]:
    target, reflector = models(latency)
    optimizer = GradientText(
        proposers=[ReflectiveProposer(read_successes=False)], epochs=3, batch_size=8
    )
    with timer() as elapsed:
        result = sd.compile(
            Parity(), parity_examples(32), parity_examples(40, start=100), optimizer=optimizer,
            lm=target, optimizer_lm=reflector, run_dir=run_dir, threads=8,
            testset=parity_examples(40, start=200),
        )  # fmt: skip
    return elapsed(), result, len(target.calls) + len(reflector.calls)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--latency", type=float, default=0.02)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-cache-"))
    try:
        cold_s, cold, cold_calls = compile_once(root / "cold", args.latency)
        (root / "warm").mkdir()
        for name in ("cache.sqlite", "cache.sqlite-wal", "cache.sqlite-shm"):  # WAL mode
            if (root / "cold" / name).exists():
                shutil.copy(root / "cold" / name, root / "warm" / name)
        warm_s, warm, warm_calls = compile_once(root / "warm", args.latency)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    same = warm.best_skill == cold.best_skill and [d.to_dict() for d in warm.gate_log] == [
        d.to_dict() for d in cold.gate_log
    ]
    figures = {
        "latency_s": args.latency,
        "cold": {
            "seconds": cold_s,
            "provider_calls": cold_calls,
            "cache_hits": cold.usage.cache_hits,
        },
        "warm": {
            "seconds": warm_s,
            "provider_calls": warm_calls,
            "cache_hits": warm.usage.cache_hits,
        },
        "wall_ratio_warm_to_cold": warm_s / cold_s,
        "identical_result": same,
    }
    print_table(
        f"Cache: identical compile, fake models with {args.latency * 1000:.0f} ms latency",
        ["run", "wall s", "provider calls", "cache hits", "same result"],
        [["cold", cold_s, cold_calls, cold.usage.cache_hits, "-"],
         ["warm", warm_s, warm_calls, warm.usage.cache_hits, same]],
    )  # fmt: skip
    print(f"warm / cold wall time: {warm_s / cold_s:.3f}")
    write_results("cache", figures)


if __name__ == "__main__":
    main()
