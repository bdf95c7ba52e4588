"""Beam parent selection: top-k vs per-example Pareto (GEPA style) on a synthetic ScriptedLM task.

The task needs several rules, each for a different subset of examples (four "kinds" of
question, 40/20/20/20%). The fake target answers a question right only when the skill holds the
rule for its kind; a tempting shortcut rule ("answer yes when unsure") helps the majority kind
and hurts the others. The fake optimizer model reads the failures it is shown and proposes the
rule for the commonest failing kind — sometimes in a useless paraphrase, sometimes the
shortcut (chosen by a hash of its prompt, so runs are deterministic). Same call budget for both.

    python bench/bench_pareto.py --seeds 8
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import statistics
from collections import Counter
from pathlib import Path
from typing import Literal

from skillopt_dsl.compile import compile
from skillopt_dsl.lm import Budget
from skillopt_dsl.metrics import exact_match
from skillopt_dsl.module import InputField, OutputField, SkillModule
from skillopt_dsl.optimizers import Beam, ReflectiveProposer
from skillopt_dsl.testing import ScriptedLM
from skillopt_dsl.types import Example

KINDS = {"a": 0.4, "b": 0.2, "c": 0.2, "d": 0.2}
RULES = {
    "a": "For kind a, yes means the number is even.",
    "b": "For kind b, yes means the number is above 50.",
    "c": "For kind c, yes means the number is a multiple of 3.",
    "d": "For kind d, yes means the number ends in 7.",
}
PARAPHRASE = "Think about kind {kind} carefully."
SHORTCUT = "Answer yes when unsure."


class Kinds(SkillModule):
    """Answer yes or no to a question of a given kind about a number."""

    kind: str = InputField()
    number: int = InputField()
    answer: Literal["yes", "no"] = OutputField()

    skill = "Answer yes or no."
    metric = exact_match("answer")


def truth(kind: str, n: int) -> bool:
    """The rule of each kind."""
    return {"a": n % 2 == 0, "b": n > 50, "c": n % 3 == 0, "d": n % 10 == 7}[kind]


def examples(prefix: str, count: int, offset: int) -> list[Example]:
    """`count` examples with kinds in the KINDS proportions."""
    kinds = [k for k, share in KINDS.items() for _ in range(round(share * count))]
    return [
        Example(
            id=f"{prefix}{i}",
            inputs={"kind": kind, "number": (offset + 37 * i) % 100},
            labels={"answer": "yes" if truth(kind, (offset + 37 * i) % 100) else "no"},
        )
        for i, kind in enumerate(kinds)
    ]


def target(messages: list[dict[str, str]]) -> str:
    """Right for a kind only with its rule; the shortcut says yes otherwise; else no."""
    system, user = messages[0]["content"], messages[-1]["content"]
    kind = re.search(r"kind: (\w)", user)
    number = re.search(r"number: (\d+)", user)
    if kind is None or number is None:
        raise ValueError(f"unexpected prompt: {user!r}")
    k, n = kind.group(1), int(number.group(1))
    if RULES[k] in system:
        return "yes" if truth(k, n) else "no"
    return "yes" if SHORTCUT in system else "no"


def reflector(messages: list[dict[str, str]]) -> str:
    """Proposes the rule for the commonest failing kind (or a paraphrase, or the shortcut)."""
    prompt = messages[-1]["content"]
    failing = Counter(re.findall(r'"kind": "(\w)"', prompt.split("# Examples the model", 1)[-1]))
    if not failing:
        return json.dumps({"edits": []})
    kind = failing.most_common(1)[0][0]
    roll = int(hashlib.sha256(prompt.encode()).hexdigest(), 16) % 10
    if roll < 3:
        text = PARAPHRASE.format(kind=kind)
    elif roll < 5:
        text = SHORTCUT
    else:
        text = RULES[kind]
    return json.dumps({"edits": [{"kind": "add", "after": None, "text": text, "rationale": "r"}]})


def run(selection: Literal["top-k", "pareto"], seed: int, max_calls: int) -> dict[str, float]:
    """One compile; returns val, test and calls."""
    train, val, test = examples("t", 40, 1), examples("v", 20, 500), examples("s", 40, 900)
    result = compile(
        Kinds(),
        train,
        val,
        optimizer=Beam(
            width=3,
            expansions=2,
            depth=6,
            batch_size=6,
            selection=selection,
            lr_floor_tokens=14,
            proposers=[
                ReflectiveProposer(read_successes=False, max_failure_groups=1, group_size=6)
            ],
        ),
        lm=ScriptedLM(target),
        optimizer_lm=ScriptedLM(reflector, model="scripted/reflector"),
        budget=Budget(max_calls=max_calls),
        testset=test,
        seed=seed,
        threads=1,
    )
    return {
        "val": result.val_score,
        "test": result.test_score if result.test_score is not None else float("nan"),
        "calls": float(result.usage.calls),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--max-calls", type=int, default=600)
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).parent / "results" / "pareto.json"
    )
    args = parser.parse_args()
    rows = []
    for selection in ("top-k", "pareto"):
        runs = [run(selection, seed, args.max_calls) for seed in range(args.seeds)]
        rows.append(
            {
                "selection": selection,
                "val_mean": statistics.mean(r["val"] for r in runs),
                "test_mean": statistics.mean(r["test"] for r in runs),
                "test_min": min(r["test"] for r in runs),
                "calls_mean": statistics.mean(r["calls"] for r in runs),
                "runs": runs,
            }
        )
    lines = [f"Beam selection, {args.seeds} seeds, Budget(max_calls={args.max_calls})"]
    lines.append(f"{'selection':>10} | {'val':>6} | {'test':>6} | {'test min':>8} | {'calls':>7}")
    for row in rows:
        lines.append(
            f"{row['selection']:>10} | {row['val_mean']:6.3f} | {row['test_mean']:6.3f} | "
            f"{row['test_min']:8.3f} | {row['calls_mean']:7.0f}"
        )
    print("\n".join(lines))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"max_calls": args.max_calls, "rows": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
