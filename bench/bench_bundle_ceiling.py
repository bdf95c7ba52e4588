"""What one gate decision can certify in a rule world: the ceiling of any honest search.

No search runs here and no model is called. For each seeded rule world (the fake of
`skillopt_dsl.testing.rule_world`, the world of bench/bench_search_yield.py) and each bundle
size k, the seed skill plus k distinct useful rules (chosen at random, no harmful rule, as a
perfect search would send them) is judged once by the gate's test: the exact one-sided sign test
on the validation set's paired outcomes against the seed, at the level given (`--alpha`: 0.05
is a run's whole significance; 0.0333 is what a default run's first of several planned
decisions gets). Reported: how often the bundle is accepted, and the mean gain on the test items
over all runs (0 where rejected), i.e. what a search that finds k useful rules, keeps every
harmful one out and spends all its significance on one decision can expect.

    python bench/bench_bundle_ceiling.py --classes 8 --class-share 0.08 --noise 0.1
    python bench/bench_bundle_ceiling.py --classes 6 --class-share 0.1 --noise 0.12
"""

from __future__ import annotations

import argparse
import random
import statistics
from dataclasses import replace

from _common import machine, print_table, write_results

from skillopt_dsl.evidence import binomial_upper_tail
from skillopt_dsl.testing.rule_world import SEED_SKILL, RuleWorld


def bundle(world: RuleWorld, k: int) -> str:
    """The seed skill with k distinct useful rules of `world`, drawn with its seed."""
    classes = random.Random(f"bundle:{world.seed}:{k}").sample(range(world.classes), k)
    rules = (f"Rule R{c}: items of kind {c} follow rule {c}." for c in classes)
    return "\n".join([SEED_SKILL, *rules])


def judged(world: RuleWorld, k: int, alpha: float, n_val: int) -> tuple[bool, float]:
    """Whether the gate's sign test accepts the k-rule bundle on `n_val` validation items, and
    its true gain on 200 test items."""
    text = bundle(world, k)
    val = world.items("val", n_val)
    wins = sum(world.right(text, e.id) and not world.right(SEED_SKILL, e.id) for e in val)
    losses = sum(world.right(SEED_SKILL, e.id) and not world.right(text, e.id) for e in val)
    accepted = wins > losses and binomial_upper_tail(wins, wins + losses) <= alpha
    test = world.items("test", 200)
    return accepted, world.accuracy(text, test) - world.accuracy(SEED_SKILL, test)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--val", type=int, default=30)
    parser.add_argument("--alpha", type=float, nargs="+", default=[0.05, 0.0333])
    parser.add_argument("--classes", type=int, default=8)
    parser.add_argument("--class-share", type=float, default=0.08)
    parser.add_argument("--noise", type=float, default=0.1)
    parser.add_argument("--name", default="bundle_ceiling")
    args = parser.parse_args()
    base = RuleWorld(classes=args.classes, class_share=args.class_share, noise=args.noise)
    figures: dict[str, object] = {"machine": machine(), "args": vars(args), "rows": []}
    rows = []
    for alpha in args.alpha:
        for k in range(1, args.classes + 1):
            outcomes = [judged(replace(base, seed=s), k, alpha, args.val) for s in range(args.runs)]
            accept = statistics.mean(a for a, _ in outcomes)
            gain = statistics.mean(g if a else 0.0 for a, g in outcomes)
            worth = statistics.mean(g for _, g in outcomes)
            row = {"alpha": alpha, "k": k, "accepted": accept, "gain": gain, "worth": worth}
            figures["rows"].append(row)  # type: ignore[attr-defined]
            rows.append([f"{alpha:g}", k, f"{worth:+.3f}", f"{accept:.2f}", f"{gain:+.3f}"])
    print_table(
        f"one decision on k useful rules ({args.val} validation examples, {args.runs} worlds)",
        ["alpha", "k rules", "bundle worth", "accepted", "mean gain"],
        rows,
    )
    print("results:", write_results(args.name, figures))


if __name__ == "__main__":
    main()
