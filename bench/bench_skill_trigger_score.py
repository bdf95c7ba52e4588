"""Score one description on `bench_skill_trigger.py`'s test split, beside a finished run's seed.

A reference row, not a method (issue 53): is the router movable at all? It routes the test split
of the run whose results file is given (the same split sizes, seed, samples, temperature and
reply cap, read from that file) under `--description`, prints the trigger summary, and the
measured pre-flight from the per-request paired difference against that run's seed row (no new
seed call). Usage::

    bench/qwen_model.sh serve 8301
    cd bench && python bench_skill_trigger_score.py --api-base http://127.0.0.1:8301/v1 \\
        --run results/skill_trigger_qwen_k3_40_18_20.json \\
        --description "Writes release notes and changelog entries for a new version: ..." \\
        --out skill_trigger_qwen_k3_reference
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict
from pathlib import Path

import bench_skill_trigger as trigger
from _common import write_results
from qwen_proxy import CountingProxy


def parse_args() -> argparse.Namespace:
    """The command line (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--api-base", required=True, help="the Qwen server")
    parser.add_argument(
        "--run", type=Path, required=True, help="a bench_skill_trigger results file"
    )
    parser.add_argument("--description", required=True, help="the description to score")
    parser.add_argument("--out", default="skill_trigger_qwen_reference_row")
    return parser.parse_args()


def run_args(run: dict, api_base: str) -> argparse.Namespace:
    """`bench_skill_trigger`'s arguments as the finished run used them."""
    sizes = [str(run["sizes"][name]["n"]) for name in ("train", "val", "test")]
    words = ["--api-base", api_base, "--sizes", *sizes, "--seed", str(run["split_seed"]),
             "--shown-others", str(run["shown_others"]), "--samples", str(run["samples"]),
             "--temperature", str(run["temperature"]),
             "--router-max-tokens", str(run["router_max_tokens"])]  # fmt: skip
    return trigger.parse_args(words)


def main() -> None:
    args = parse_args()
    run = json.loads(args.run.read_text())
    setup = trigger.build_setup(run_args(run, args.api_base))
    proxy = CountingProxy(args.api_base, timeout_s=900.0).start()
    started = time.perf_counter()
    row = trigger.score_test(setup, proxy, trigger.MethodRow("reference", args.description))
    seed_row = run["rows"][0]
    seed = trigger.MethodRow(seed_row["method"], seed_row["description"], extra=seed_row["extra"])
    summary = row.summary
    if summary is None:
        raise RuntimeError("the test split was not scored")
    figures = {
        "run": str(args.run), "description": args.description,
        "test": {**asdict(summary), "accuracy": summary.accuracy,
                 "precision": summary.precision, "recall": summary.recall},
        "server_calls": trigger.server_count(proxy), "seconds": time.perf_counter() - started,
        "measured_preflight": trigger.paired_preflight(setup, seed, row),
        "test_scores": (row.extra or {}).get("test_scores"),
    }  # fmt: skip
    print(summary.line("reference"))
    print(f"measured pre-flight: {figures['measured_preflight']}")
    write_results(args.out, figures)


if __name__ == "__main__":
    main()
