"""Search yield: what a call budget buys when most proposals hurt, beside gepa.optimize.

The world (`skillopt_dsl.testing.rule_world.RuleWorld`, a fake: no model is called): items of
latent classes, each answered right only when the skill states its class's rule; harmful rules
break a share of all items; any text change flips a share of answers; one reflection offers
three rules with the world's odds, each saying which failing item it is for (as a reflection
that read the failures does; `--unnamed`: it says nothing, and our screen starts from all the
failing items). Each optimizer gets the same world, seed and call budget:

- ours: `compile`'s default optimizer (`HandOff()`: GradientText, handing the run to Bundle
  where its screens show only small effects; their defaults) with the world's reflection as
  its only proposer, under `Budget(max_calls=N)` (target and reflection calls);
- gradient-text: `GradientText()` alone, the same proposer and budget (`--peers ... gradient-text`);
- beam: `Beam()` with its defaults and the same proposer and budget (`--peers ... beam`);
- bundle: `Bundle()` with its defaults, the same proposer and budget (`--peers ... bundle`);
- gepa: `gepa.optimize` with its `DefaultAdapter` on a callable model (the world's target) and
  a callable reflection that adds one rule drawn with the same odds to the current instruction,
  `max_metric_calls=N` and a stop callback once its target and reflection calls reach N
  (checked between iterations, so its last iteration may run over: the table shows its total).

Reported per budget, averaged over seeds: the gain in true accuracy on `--test` items over the
seed, gate decisions, accepted, useful and harmful rules kept, calls spent. The null world
(`p_right=0`: no proposal helps) counts false accepts: runs whose final skill differs from the
seed. Usage::

    python bench/bench_search_yield.py --runs 20 --calls 60 100 200 400
    python bench/bench_search_yield.py --classes 6 --class-share 0.13 --p-right 0.15
"""

from __future__ import annotations

import argparse
import logging
import random
import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from _common import machine, print_table, write_results

import skillopt_dsl as sd
from skillopt_dsl.lm import LM
from skillopt_dsl.optimizers import Beam, Bundle, GradientText, HandOff, Optimizer
from skillopt_dsl.testing.rule_world import (
    SEED_SKILL,
    RuleWorld,
    RuleWorldProposer,
    RuleWorldTask,
    rules_in,
)


@dataclass(frozen=True)
class Outcome:
    """One run: gain on test, gate decisions, accepted, rules kept, calls spent."""

    gain: float
    decisions: int
    accepted: int
    useful: int
    harmful: int
    calls: int
    changed: bool


def splits(world: RuleWorld, n_train: int, n_val: int, n_test: int) -> tuple[list[Any], ...]:
    return world.items("train", n_train), world.items("val", n_val), world.items("test", n_test)


def kept(world: RuleWorld, text: str) -> tuple[int, int]:
    rights, harms, _ = rules_in(text)
    return len(rights), len(harms)


SETTINGS: dict[str, Any] = {}
"""GradientText settings overridden from the command line (`--set batch_size=6`), for
GradientText alone and as the default's first search."""


NAMES_TARGETS = True
"""Whether the world's reflection names the failing item each rule is for (`--unnamed`: no)."""


def run_ours(world: RuleWorld, calls: int, sizes: tuple[int, int, int]) -> Outcome:
    proposers = [RuleWorldProposer(use_addresses=NAMES_TARGETS)]
    first = GradientText(proposers=proposers, **SETTINGS)
    optimizer = HandOff(first=first, then=Bundle(proposers=proposers))
    return run_optimizer(optimizer, world, calls, sizes)


def run_gradient_text(world: RuleWorld, calls: int, sizes: tuple[int, int, int]) -> Outcome:
    proposer = RuleWorldProposer(use_addresses=NAMES_TARGETS)
    return run_optimizer(GradientText(proposers=[proposer], **SETTINGS), world, calls, sizes)


def run_beam(world: RuleWorld, calls: int, sizes: tuple[int, int, int]) -> Outcome:
    proposer = RuleWorldProposer(use_addresses=NAMES_TARGETS)
    return run_optimizer(Beam(proposers=[proposer]), world, calls, sizes)


def run_bundle(world: RuleWorld, calls: int, sizes: tuple[int, int, int]) -> Outcome:
    proposer = RuleWorldProposer(use_addresses=NAMES_TARGETS)
    return run_optimizer(Bundle(proposers=[proposer]), world, calls, sizes)


def run_optimizer(
    optimizer: Optimizer, world: RuleWorld, calls: int, sizes: tuple[int, int, int]
) -> Outcome:
    train, val, test = splits(world, *sizes)
    result = sd.compile(
        RuleWorldTask(),
        train,
        val,
        optimizer=optimizer,
        lm=LM(world.target()),
        optimizer_lm=LM(world.reflector()),
        budget=sd.Budget(max_calls=calls),
        seed=world.seed,
        threads=1,
    )
    text = result.best_skill.text
    useful, harmful = kept(world, text)
    return Outcome(
        gain=world.accuracy(text, test) - world.accuracy(SEED_SKILL, test),
        decisions=len(result.gate_log),
        accepted=sum(d.accepted for d in result.gate_log),
        useful=useful,
        harmful=harmful,
        calls=result.usage.calls,
        changed=text != RuleWorldTask().seed_skill.text,
    )


def run_gepa(world: RuleWorld, calls: int, sizes: tuple[int, int, int]) -> Outcome:
    import gepa
    from gepa.adapters.default_adapter.default_adapter import DefaultAdapter

    train, val, test = splits(world, *sizes)
    target = world.target()
    counts = {"target": 0, "reflection": 0}

    def task_lm(messages: Sequence[Any]) -> str:
        counts["target"] += 1
        return target._respond([dict(m) for m in messages])

    def reflection_lm(prompt: str) -> str:
        counts["reflection"] += 1
        current = prompt.split("```")[1].strip("\n")
        failing = [
            m.group(1)
            for chunk in prompt.split("# Example")
            if "incorrect" in chunk and (m := re.search(r"item (\S+)", chunk))
        ]
        rng = random.Random(f"gepa:{world.seed}:{counts['reflection']}:{prompt}")
        return f"```\n{current}\n{world.draw_rule(rng, failing)}\n```"

    def data(items: Sequence[Any]) -> list[dict[str, Any]]:
        return [
            {"input": e.inputs["item"], "additional_context": {}, "answer": e.labels["answer"]}
            for e in items
        ]

    result = gepa.optimize(
        seed_candidate={"system_prompt": SEED_SKILL},
        trainset=data(train),
        valset=data(val),
        adapter=DefaultAdapter(model=task_lm),
        reflection_lm=reflection_lm,
        max_metric_calls=calls,
        stop_callbacks=[lambda _state: counts["target"] + counts["reflection"] >= calls],
        seed=world.seed,
        display_progress_bar=False,
        logger=_Silent(),
        raise_on_exception=True,
    )
    text = result.best_candidate["system_prompt"]
    useful, harmful = kept(world, text)
    accepted = len(result.candidates) - 1
    return Outcome(
        gain=world.accuracy(text, test) - world.accuracy(SEED_SKILL, test),
        decisions=accepted,
        accepted=accepted,
        useful=useful,
        harmful=harmful,
        calls=counts["target"] + counts["reflection"],
        changed=text != SEED_SKILL,
    )


class _Silent:
    """gepa's logger protocol, discarding its per-iteration lines."""

    def log(self, message: str) -> None:
        del message


def summarise(outcomes: Sequence[Outcome]) -> dict[str, float]:
    return {
        "gain": statistics.mean(o.gain for o in outcomes),
        "decisions": statistics.mean(o.decisions for o in outcomes),
        "accepted": statistics.mean(o.accepted for o in outcomes),
        "useful": statistics.mean(o.useful for o in outcomes),
        "harmful": statistics.mean(o.harmful for o in outcomes),
        "calls": statistics.mean(o.calls for o in outcomes),
        "changed": sum(o.changed for o in outcomes),
    }


def _setting(value: str) -> Any:
    """A `--set` value: None, true/false, an int or a float."""
    if value in ("None", "none"):
        return None
    if value.lower() in ("true", "false"):
        return value.lower() == "true"
    return float(value) if "." in value else int(value)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--calls", type=int, nargs="+", default=[60, 100, 200, 400])
    parser.add_argument("--sizes", type=int, nargs=3, default=[30, 30, 200])
    parser.add_argument("--classes", type=int, default=4)
    parser.add_argument("--class-share", type=float, default=0.2)
    parser.add_argument("--luck", type=float, default=0.25)
    parser.add_argument("--harm", type=float, default=0.25)
    parser.add_argument("--noise", type=float, default=0.08)
    parser.add_argument("--p-right", type=float, default=0.3)
    parser.add_argument("--p-harm", type=float, default=0.45)
    parser.add_argument(
        "--peers",
        nargs="+",
        default=["ours", "gepa"],
        choices=["ours", "gradient-text", "beam", "bundle", "gepa"],
    )
    parser.add_argument("--no-null", action="store_true", help="skip the null world")
    parser.add_argument(
        "--unnamed",
        action="store_true",
        help="the reflection does not say which failing item each rule is for",
    )
    parser.add_argument("--set", nargs="*", default=[], help="GradientText settings, name=value")
    parser.add_argument("--name", default="search_yield")
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    global NAMES_TARGETS
    NAMES_TARGETS = not args.unnamed
    for item in args.set:
        name, _, value = item.partition("=")
        SETTINGS[name] = _setting(value)
    base = RuleWorld(
        classes=args.classes, class_share=args.class_share, luck=args.luck, harm=args.harm,
        noise=args.noise, p_right=args.p_right, p_harm=args.p_harm,
    )  # fmt: skip
    worlds = (
        {"world": base} if args.no_null else {"world": base, "null": replace(base, p_right=0.0)}
    )
    runners = {
        "ours": run_ours, "gradient-text": run_gradient_text, "beam": run_beam,
        "bundle": run_bundle, "gepa": run_gepa,
    }  # fmt: skip
    figures: dict[str, Any] = {"machine": machine(), "args": vars(args), "rows": []}
    rows = []
    for world_name, world in worlds.items():
        for calls in args.calls:
            for peer in args.peers:
                outcomes = [
                    runners[peer](replace(world, seed=s), calls, tuple(args.sizes))
                    for s in range(args.runs)
                ]
                s = summarise(outcomes)
                figures["rows"].append({"world": world_name, "budget": calls, "peer": peer, **s})
                rows.append([
                    world_name, calls, peer, f"{s['gain']:+.3f}", f"{s['decisions']:.1f}",
                    f"{s['accepted']:.2f}", f"{s['useful']:.2f}", f"{s['harmful']:.2f}",
                    f"{s['calls']:.0f}", f"{s['changed']}/{args.runs}",
                ])  # fmt: skip
                print(rows[-1], flush=True)
    print_table(
        "search yield (means over seeded runs)",
        ["world", "budget", "optimizer", "gain", "decisions", "accepted", "useful kept",
         "harmful kept", "calls", "changed"],
        rows,
    )  # fmt: skip
    print("results:", write_results(args.name, figures))


if __name__ == "__main__":
    main()
