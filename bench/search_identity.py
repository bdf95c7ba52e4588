"""Whether a change to the search is behaviour-preserving: a digest of fixed runs, to compare.

A refactor of the search (bench/README §9y) must leave every run as it was: the same model
calls in the same order, the same random draws, the same decisions, events and checkpoints.
This script runs a fixed matrix of FAKE rule-world searches (GradientText, Bundle and HandOff
under several settings; five worlds, among them the rare-kind, null and noisy ones; budgets of
120 and 400 calls and none; extra seeds) and writes, per run, its stop, validation score,
calls, best skill, every event and the final checkpoint, with wall times and paths left out.
Run it on the revision before and after, then compare the two files byte for byte:

    PYTHONPATH=<before> python bench/search_identity.py --out /tmp/before.json
    PYTHONPATH=<after> python bench/search_identity.py --out /tmp/after.json
    cmp /tmp/before.json /tmp/after.json

About 1.5 minutes on one core. A run that raises is recorded with its error, so a difference
there shows too. Measured, never asserted: the matrix is an instrument, not a test.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import skillopt_dsl as sd
from skillopt_dsl.lm import LM
from skillopt_dsl.optimizers import Bundle, GradientText, HandOff, Optimizer
from skillopt_dsl.testing.rule_world import RuleWorld, RuleWorldProposer, RuleWorldTask

RARE = {"classes": 8, "class_share": 0.08, "noise": 0.1, "p_right": 0.143, "p_harm": 0.5}
WORLDS: dict[str, dict[str, Any]] = {
    "default": {},
    "rare": RARE,
    "null": {"p_right": 0.0},
    "group": {"addresses": "group", "noise_key": "content"},
    "repeats": {"repeats": 0.3, "draw": "any_failing", "addresses": "partly_wrong"},
}
"""The worlds (`RuleWorld` settings): the published one, rare kinds, no useful rule, the
proposer naming its group with noise keyed on the content, repeats with partly wrong names."""


def _proposers(**settings: Any) -> list[RuleWorldProposer]:
    return [RuleWorldProposer(**settings)]


SEARCHES: dict[str, Callable[[], Optimizer]] = {
    "gt": lambda: GradientText(proposers=_proposers()),
    "gt-request": lambda: GradientText(proposers=_proposers(reads="request"), epochs=1),
    "gt-no-screen": lambda: GradientText(proposers=_proposers(), screen=False, compose=1),
    "gt-no-trials": lambda: GradientText(
        proposers=_proposers(), confirm_steps=0, join_at_net=None, gate_strikes=1
    ),
    "gt-stops": lambda: GradientText(
        proposers=_proposers(), submit_at_net=3.0, patience_steps=6, plateau=2, patience=2
    ),
    "gt-settings": lambda: GradientText(
        proposers=_proposers(), schedule="cosine", batch_size=5, max_edits=1,
        budget_steps=None, bench_after=None, hand_off_after=2, hand_off_decisions=3,
    ),
    "gt-epochs": lambda: GradientText(proposers=_proposers(), until_budget=False, epochs=3),
    "bundle": lambda: Bundle(proposers=_proposers()),
    "bundle-small": lambda: Bundle(
        proposers=_proposers(reads="request"), pool_size=10, audit_size=4, audit_strikes=2,
        patience=3, max_steps=6, failures_per_step=2,
    ),
    "hand-off": lambda: HandOff.with_proposers(_proposers()),
    "hand-off-request": lambda: HandOff.with_proposers(_proposers(reads="request")),
    "hand-off-probe2": lambda: HandOff(
        first=GradientText(proposers=_proposers()), then=Bundle(proposers=_proposers()),
        probe_steps=2, bundle_decisions=None,
    ),
}  # fmt: skip
"""The searches, each at settings that reach a different part of its code."""

_UNTIMED = {"elapsed", "elapsed_s", "time", "ts", "wall_s", "duration_s", "seconds", "run_id"}
_UNTIMED |= {"run_dir"}


def matrix() -> list[tuple[str, str, int | None, int]]:
    """(search, world, calls, seed) of every run: each search in each world at 120 and 400
    calls and without a budget (but unbudgeted GradientText in the slow worlds), and three
    searches on two more seeds."""
    runs: list[tuple[str, str, int | None, int]] = []
    slow = {"gt", "gt-request", "gt-no-screen", "gt-no-trials"}
    for search in SEARCHES:
        for world in WORLDS:
            for calls in (120, 400, None):
                if calls is None and search in slow and world in ("rare", "repeats"):
                    continue
                runs.append((search, world, calls, 19))
    for seed in (3, 7):
        for search in ("gt", "bundle", "hand-off"):
            runs += [(search, "rare", 250, seed), (search, "default", 800, seed)]
    return runs


def _untimed(value: Any) -> Any:
    """`value` without wall times, run ids and temporary paths (which differ run to run)."""
    if isinstance(value, dict):
        return {k: _untimed(v) for k, v in value.items() if k not in _UNTIMED}
    if isinstance(value, list):
        return [_untimed(v) for v in value]
    if isinstance(value, str) and tempfile.gettempdir() in value:
        return "<path>"
    return value


def one_run(search: str, world_name: str, calls: int | None, seed: int) -> dict[str, Any]:
    """One compile of `search` in the world, and its digest (or the error it raised)."""
    world = RuleWorld(seed=seed, **WORLDS[world_name])
    with tempfile.TemporaryDirectory() as folder:
        run_dir = Path(folder) / "run"
        try:
            result = sd.compile(
                RuleWorldTask(), world.items("train", 30), world.items("val", 30),
                optimizer=SEARCHES[search](), lm=LM(world.target()),
                optimizer_lm=LM(world.reflector()),
                budget=sd.Budget(max_calls=calls) if calls else None, seed=seed, threads=1,
                run_dir=run_dir,
            )  # fmt: skip
        except Exception as exc:  # recorded: a run that raises is a behaviour too
            return {"error": repr(exc), "traceback": traceback.format_exc()[-800:]}
        lines = (run_dir / "events.jsonl").read_text(encoding="utf-8").splitlines()
        checkpoint = json.loads((run_dir / "checkpoint.json").read_text(encoding="utf-8"))
    return {
        "stop": result.stop_reason,
        "val": result.val_score,
        "calls": result.usage.calls,
        "best": result.best_skill.text,
        "steps": len(result.history),
        "events": [_untimed(json.loads(line)) for line in lines],
        "checkpoint": _untimed(checkpoint),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="the digest's JSON file")
    parser.add_argument("--only", nargs="*", default=[], help="runs whose name holds one of these")
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    digests: dict[str, Any] = {}
    for search, world, calls, seed in matrix():
        name = f"{search}|{world}|{calls}|{seed}"
        if args.only and not any(part in name for part in args.only):
            continue
        digests[name] = one_run(search, world, calls, seed)
        sys.stderr.write(f"{name} {digests[name].get('stop', digests[name].get('error'))}\n")
    Path(args.out).write_text(json.dumps(digests, indent=0, sort_keys=True, default=str) + "\n")
    sys.stderr.write(f"wrote {args.out} ({len(digests)} runs; skillopt_dsl at {sd.__file__})\n")


if __name__ == "__main__":
    main()
