"""The shipped agent task on a real model: `compile(TableLookup(max_turns=3), ...)` with no
optimizer argument (compile's default search, which chooses an agent's proposers), Qwen2.5-0.5B
served by `bench/qwen_model.sh serve PORT` as target and optimizer model.

    bench/qwen_model.sh serve 8432
    python bench/bench_agent_qwen.py --api-base http://127.0.0.1:8432/v1 --calls 150 \
        --out agent_table_lookup_150

Splits: `load_benchmark("table_lookup", seed=0, sizes=(10, 20, 20))`. Every request goes
through the counting proxy (`bench/qwen_proxy.py`), so the calls are counted at the server. The
row: validation and test of the seed and of the result, calls (ours and the server's), seconds,
the gate's decisions, the stop reason and what each step proposed (its note); written to
`bench/results/<out>.json`, the run directory to `bench/results/runs/<out>/`.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _common import git_commit  # noqa: E402
from qwen_proxy import CountingProxy  # noqa: E402

import skillopt_dsl as sd  # noqa: E402
from skillopt_dsl.benchmarks import load_benchmark  # noqa: E402
from skillopt_dsl.benchmarks.table_lookup import TableLookup  # noqa: E402
from skillopt_dsl.lm import LM, SamplingParams  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--api-base", required=True)
    parser.add_argument("--model", default="openai/qwen2.5-coder-0.5b-instruct")
    parser.add_argument("--calls", type=int, default=150)
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--optimizer-max-tokens", type=int, default=256)
    parser.add_argument("--sizes", type=int, nargs=3, default=(10, 20, 20))
    parser.add_argument("--timeout-s", type=float, default=600.0)
    parser.add_argument("--out", default="agent_table_lookup")
    parser.add_argument("--commit", default=None,
                        help="the commit measured, when run from an exported tree")  # fmt: skip
    args = parser.parse_args()
    splits = load_benchmark("table_lookup", seed=0, sizes=tuple(args.sizes))
    out = HERE / "results" / f"{args.out}.json"
    run_dir = HERE / "results" / "runs" / args.out
    with CountingProxy(args.api_base.removesuffix("/v1"), timeout_s=args.timeout_s) as proxy:
        base = f"{proxy.url}/v1"
        target = LM(args.model, params=SamplingParams(max_tokens=args.max_tokens),
                    api_base=base, timeout_s=args.timeout_s, max_concurrency=1)  # fmt: skip
        reflector = LM(args.model, params=SamplingParams(max_tokens=args.optimizer_max_tokens),
                       api_base=base, timeout_s=args.timeout_s, max_concurrency=1)  # fmt: skip
        started = time.perf_counter()
        result = sd.compile(
            TableLookup(max_turns=3),
            splits.train,
            splits.val,
            testset=splits.test,
            lm=target,
            optimizer_lm=reflector,
            budget=sd.Budget(max_calls=args.calls),
            run_dir=run_dir,
            threads=1,
        )
        seconds = time.perf_counter() - started
        server = proxy.count()
    row = {
        "task": "table_lookup", "model": args.model, "budget_calls": args.calls,
        "sizes": list(args.sizes), "max_tokens": args.max_tokens,
        "optimizer_max_tokens": args.optimizer_max_tokens,
        "seed_val": result.seed_val_score, "val": result.val_score,
        "val_examples": result.val_examples, "val_size": result.val_size,
        "seed_test": result.seed_test_score, "test": result.test_score,
        "calls": result.usage.calls,
        "test_calls": None if result.test_usage is None else result.test_usage.calls,
        "server_calls": server, "seconds": round(seconds, 1),
        "stop_reason": result.stop_reason,
        "gate": [
            {"accepted": d.accepted, "delta": d.delta, "reason": d.reason,
             "stopped_early": d.stopped_early}
            for d in result.gate_log
        ],
        "steps": [{"step": h.step, "kind": h.kind, "note": h.note, "calls": h.calls,
                   "accepted": h.accepted} for h in result.history],
        "best_skill": result.best_skill.text,
        "git_commit": args.commit or git_commit(),
    }  # fmt: skip
    out.write_text(json.dumps(row, indent=2))
    print(json.dumps({k: v for k, v in row.items() if k not in ("steps", "best_skill")}))


if __name__ == "__main__":
    main()
