"""GradientText vs Beam vs OptunaLR on one shipped task, under the same call budget.

Runs the three optimizers on `recipes/navigate_local.py` (BIG-bench navigate, the embedded
SmolLM2-135M model, offline) with `Budget(max_calls=N)` each, then scores the seed and each
best skill on the test split (outside the budget, so every optimizer gets a test score), and
prints a table. Each optimizer gets its own in-memory response cache: no one reuses another's
calls.

    python bench/compare_optimizers.py --max-calls 300
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from dataclasses import replace
from pathlib import Path

from skillopt_dsl.compile import compile
from skillopt_dsl.evaluate import evaluate
from skillopt_dsl.lm import LM, Budget, resolve_lm
from skillopt_dsl.optimizers import Beam, GradientText, OptunaLR
from skillopt_dsl.optimizers.base import Optimizer
from skillopt_dsl.recipes import Recipe, load_recipe
from skillopt_dsl.skill import Skill

logger = logging.getLogger("bench.compare_optimizers")

RECIPE = Path(__file__).resolve().parents[1] / "recipes" / "navigate_local.py"


def optimizers(recipe: Recipe, trials: int) -> dict[str, Optimizer]:
    """The three contestants, sharing the recipe's proposers and learning rate."""
    base = recipe.optimizer
    if not isinstance(base, GradientText):
        raise SystemExit("the recipe must define a GradientText optimizer")
    return {
        "GradientText": base,
        "Beam": Beam(width=2, expansions=2, depth=3, proposers=base.proposers, lr=base.lr),
        "OptunaLR": OptunaLR(
            inner=replace(base, epochs=1),
            search_space={"lr": (0.05, 0.5, "log")},
            n_trials=trials,
            plots=False,
        ),
    }


def test_mean(recipe: Recipe, target: LM, skill: Skill, threads: int) -> float:
    """Test-split mean of `skill` (not counted against any optimizer's budget)."""
    report = evaluate(
        recipe.module, recipe.splits.test, skill=skill, lm=target, threads=threads, progress=False
    )
    return report.mean


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-calls", type=int, default=300)
    parser.add_argument("--trials", type=int, default=3, help="OptunaLR trials")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path("bench/results/compare_optimizers.json"))
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    recipe = load_recipe(RECIPE)
    tester = resolve_lm(recipe.lm, cache=None, ledger=None)
    rows = []
    seed_test = test_mean(recipe, tester, recipe.module.seed_skill, args.threads)
    for name, optimizer in optimizers(recipe, args.trials).items():
        start = time.perf_counter()
        result = compile(
            recipe.module,
            recipe.splits.train,
            recipe.splits.val,
            optimizer=optimizer,
            lm=recipe.lm,
            budget=Budget(max_calls=args.max_calls),
            seed=0,
            threads=args.threads,
        )
        best_test = (
            seed_test
            if result.best_skill == result.seed_skill
            else test_mean(recipe, tester, result.best_skill, args.threads)
        )
        rows.append(
            {
                "optimizer": name,
                "calls": result.usage.calls,
                "stop": result.stop_reason,
                "seed_val": result.seed_val_score,
                "val": result.val_score,
                "seed_test": seed_test,
                "test": best_test,
                "accepted": sum(d.accepted for d in result.gate_log),
                "seconds": round(time.perf_counter() - start, 1),
            }
        )
    table = format_table(rows, args.max_calls)
    print(table)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"max_calls": args.max_calls, "rows": rows}, indent=2) + "\n")


def format_table(rows: list[dict[str, object]], max_calls: int) -> str:
    """A plain-text table of the comparison."""
    header = f"navigate / local/smollm2-135m / Budget(max_calls={max_calls}) per optimizer"
    cols = [
        "optimizer",
        "calls",
        "stop",
        "seed_val",
        "val",
        "seed_test",
        "test",
        "accepted",
        "seconds",
    ]
    lines = [header, " | ".join(f"{c:>12}" for c in cols)]
    for row in rows:
        cells = [
            f"{row[c]:>12.3f}"
            if isinstance(row[c], float) and c != "seconds"
            else f"{row[c]!s:>12}"
            for c in cols
        ]
        lines.append(" | ".join(cells))
    return "\n".join(lines)


if __name__ == "__main__":
    main()
