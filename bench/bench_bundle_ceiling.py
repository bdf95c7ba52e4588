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

`--family RESULTS` reads a family bench's results (bench/bench_search_family.py) and judges, in
each member of its two draws and in each of its seeds, the seed skill with every useful rule of
the member (no harmful rule, no note) by the same one test at `--alpha`'s first level: what one
decision of an honest search can keep there at best. Printed beside gepa's and the default's
mean gain at each budget: the members where that ceiling falls more than 0.02 below gepa (no
search whose changes pass the gate can come within 0.02 of gepa there; several decisions each
test at a lower level on part of the signal), and where gepa gains on a null member (its
validation-chosen notes; the gate keeps none).

    python bench/bench_bundle_ceiling.py --family bench/results/search_family_failed_screen.json
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
from dataclasses import replace
from pathlib import Path
from typing import Any

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


def all_rules(world: RuleWorld) -> str:
    """The seed skill with every useful rule of `world` (none in a null world)."""
    if world.p_right == 0:
        return world.seed_skill
    rules = (f"Rule R{c}: items of kind {c} follow rule {c}." for c in range(world.classes))
    return "\n".join([world.seed_skill, *rules])


def member_ceiling(world: RuleWorld, n_val: int, n_test: int, alpha: float) -> float:
    """The test gain the gate keeps from `all_rules` in one decision at `alpha` (0 if rejected)."""
    text, seed = all_rules(world), world.seed_skill
    val = world.items("val", n_val)
    wins = sum(world.right(text, e.id) and not world.right(seed, e.id) for e in val)
    losses = sum(world.right(seed, e.id) and not world.right(text, e.id) for e in val)
    if wins <= losses or binomial_upper_tail(wins, wins + losses) > alpha:
        return 0.0
    test = world.items("test", n_test)
    return world.accuracy(text, test) - world.accuracy(seed, test)


def family_rows(results: dict[str, Any], alpha: float) -> list[list[Any]]:
    """One row per member of each draw: its ceiling over the results' seeds beside gepa's and
    the default's mean gains, and where the ceiling (or a null member) bars the default from
    gepa - 0.02 at each budget."""
    from skillopt_dsl.testing.world_family import WorldFamily

    args, rows = results["args"], []
    seeds = range(args.get("first_seed") or 0, (args.get("first_seed") or 0) + args["runs"])
    for draw, draw_seed in results["draw_seeds"].items():
        gains = {(r["member"], r["optimizer"], r["calls"]): r["gain"]
                 for r in results["draws"][draw]["rows"]}  # fmt: skip
        for member in WorldFamily().draw(draw_seed, args["members"]):
            worlds = [member.seeded(s) for s in seeds]
            ceiling = statistics.mean(
                member_ceiling(w, member.val, member.test, alpha) for w in worlds
            )
            gepa = [gains[member.name, "gepa", c] for c in args["calls"]]
            barred = [c for c, g in zip(args["calls"], gepa, strict=True) if ceiling < g - 0.02]
            rows.append([
                f"{draw} {draw_seed}", member.name + (" null" if member.null else ""), member.val,
                f"{ceiling:+.3f}", " ".join(f"{g:+.3f}" for g in gepa),
                " ".join(f"{gains[member.name, 'default', c]:+.3f}" for c in args["calls"]),
                " ".join(map(str, barred)) or "-",
            ])  # fmt: skip
    return rows


def family(path: Path, alpha: float) -> None:
    """Print `family_rows` for the family results at `path`, and the count barred per draw."""
    results = json.loads(path.read_text(encoding="utf-8"))
    rows = family_rows(results, alpha)
    calls = " / ".join(map(str, results["args"]["calls"]))
    print_table(
        f"the ceiling of one decision at alpha {alpha:g} in each member ({path.name})",
        ["draw", "member", "val", "ceiling", f"gepa {calls}", f"default {calls}", "barred at"],
        rows,
    )
    for draw in sorted({r[0] for r in rows}):
        for c in results["args"]["calls"]:
            barred = [r[1] for r in rows if r[0] == draw and str(c) in r[6].split()]
            print(f"{draw}, {c} calls: {len(barred)} of {sum(r[0] == draw for r in rows)} "
                  f"members barred from gepa - 0.02 {barred}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--val", type=int, default=30)
    parser.add_argument("--alpha", type=float, nargs="+", default=[0.05, 0.0333])
    parser.add_argument("--classes", type=int, default=8)
    parser.add_argument("--class-share", type=float, default=0.08)
    parser.add_argument("--noise", type=float, default=0.1)
    parser.add_argument("--name", default="bundle_ceiling")
    parser.add_argument("--family", type=Path, default=None,
                        help="a family bench's results: the ceiling in each of its members")  # fmt: skip
    args = parser.parse_args()
    if args.family is not None:
        family(args.family, args.alpha[0])
        return
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
