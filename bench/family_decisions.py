"""Where the default search's gate decisions go, over the family of worlds.

    python bench/family_decisions.py --calls 400 --runs 5 --draw-seed 2026
    python bench/family_decisions.py --calls 400 --runs 5 --draw-seed 179247267

For each member of a draw (`skillopt_dsl.testing.world_family`, fakes: no model is called) and
each seed, compile's default (`HandOff`) runs under `Budget(max_calls=N)` with the family's
proposer (`bench_search_family.PROPOSER_READS`). Every candidate it submits is recorded with the
door's verdict; its *true* worth is the test accuracy it gains over the incumbent it was
submitted against (the world knows it; the search never sees it). A decision is *useful* where
that gain is above 0.02. Printed per kind of submission (GradientText's `step`, `slow_update`
and `final`; Bundle's `bundle`): useful accepted; useful rejected, with how many of those were
judged at a level below 0.01 (the run's significance mostly spent), how many were stopped for
futility at an interim look, how many added a harmful rule to the incumbent's, and their mean
true gain; useless rejected; useless accepted; and
the submissions the door turned away unjudged (duplicate, refused). The recording wraps `RunView.submit` in this process only (it observes
the verdict; it changes nothing).
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import bench_search_family as family  # noqa: E402
from _common import print_table  # noqa: E402

USEFUL = 0.02
"""The true test gain above which a submitted candidate counts as useful."""
LOW_LEVEL = 0.01
"""A decision judged at a level below this found the run's significance mostly spent."""


def record_submissions(log: list[tuple[str, Any, str]]) -> None:
    """Wrap `RunView.submit` so that each call appends (candidate text, verdict, kind)."""
    from skillopt_dsl.driver import view

    original = view.RunView.submit

    def submit(self: Any, candidate: Any, **kwargs: Any) -> Any:
        verdict = original(self, candidate, **kwargs)
        log.append((candidate.text, verdict, str(kwargs.get("kind"))))
        return verdict

    view.RunView.submit = submit  # type: ignore[method-assign]


def run_member(member: Any, calls: int, seeds: range, log: list[Any]) -> list[dict[str, Any]]:
    """Every submission of compile's default on `member` over `seeds`, classified."""
    import skillopt_dsl as sd
    from skillopt_dsl import optimizers as opt
    from skillopt_dsl.lm import LM

    rw = family.world_modules()[0]
    found = []
    for seed in seeds:
        world = member.seeded(seed)
        sizes = (member.train, member.val, member.test)
        splits = zip(("train", "val", "test"), sizes, strict=True)
        train, val, test = (world.items(split, n) for split, n in splits)
        proposers = [rw.RuleWorldProposer(reads=family.PROPOSER_READS)]
        search = opt.HandOff.with_proposers(proposers)
        log.clear()
        sd.compile(world.task(), train, val, optimizer=search, lm=LM(world.target()),
                   optimizer_lm=LM(world.reflector()), budget=sd.Budget(max_calls=calls),
                   seed=seed, threads=1)  # fmt: skip
        incumbent = world.seed_skill
        for text, verdict, kind in log:
            gain = world.accuracy(text, test) - world.accuracy(incumbent, test)
            decision = verdict.decision
            level = decision.alpha if decision is not None else None
            stopped = decision is not None and decision.stopped_at_look is not None
            harmful = len(rw.rules_in(text)[1]) > len(rw.rules_in(incumbent)[1])
            found.append({"kind": kind, "status": verdict.status, "gain": gain, "level": level,
                          "stopped": stopped, "harmful": harmful})  # fmt: skip
            if verdict.status == "accepted":
                incumbent = text
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draw-seed", type=int, default=2026)
    parser.add_argument("--members", type=int, default=24)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--calls", type=int, default=400)
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    log: list[tuple[str, Any, str]] = []
    record_submissions(log)
    members = family.world_modules()[1].WorldFamily().draw(args.draw_seed, args.members)
    counts: Counter[tuple[str, str]] = Counter()
    gains: defaultdict[str, list[float]] = defaultdict(list)
    for member in members:
        for s in run_member(member, args.calls, range(args.runs), log):
            useful = s["gain"] > USEFUL
            if s["status"] in ("duplicate", "refused"):
                cell = "unjudged"
            else:
                cell = ("useful " if useful else "useless ") + s["status"]
            counts[(s["kind"], cell)] += 1
            if useful and s["status"] == "rejected":
                gains[s["kind"]].append(s["gain"])
                counts[(s["kind"], "low level")] += (
                    s["level"] is not None and s["level"] < LOW_LEVEL
                )
                counts[(s["kind"], "stopped")] += s["stopped"]
                counts[(s["kind"], "harmful")] += s["harmful"]
    cells = ["useful accepted", "useful rejected", "useless rejected", "useless accepted",
             "unjudged", "low level", "stopped", "harmful"]  # fmt: skip
    kinds = sorted({k for k, _ in counts})
    rows = [
        [kind, *(counts[(kind, c)] for c in cells),
         f"{statistics.mean(gains[kind]):+.3f}" if gains[kind] else "-"]
        for kind in kinds
    ]  # fmt: skip
    print_table(
        f"draw {args.draw_seed}, {args.members} members x {args.runs} seeds, {args.calls} calls,"
        f" proposer reads {family.PROPOSER_READS!r}",
        [
            "kind",
            *cells[:-3],
            "useful rejected: at level < 0.01",
            "stopped at a look",
            "adding a harmful rule",
            "their mean true gain",
        ],
        rows,
    )


if __name__ == "__main__":
    main()
