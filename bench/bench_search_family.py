"""Search across a family of rule worlds: a development draw and a fresh draw, beside gepa and
another revision's GradientText.

The family (`skillopt_dsl.testing.world_family.WorldFamily`, fakes: no model is called) draws
members across the rule world's axes (addresses, noise key, the reflection's draw, alternatives,
repeats, answers) and its sizes and odds; a share are null (no proposal helps). Two draws:

- dev: `--dev-seed` (fixed; work against it);
- fresh: `--fresh-seed`, by default new each run (from `os.urandom`, printed), so nothing can
  be tuned to it.

Each member runs `--runs` seeds (the world's seed: items, luck, proposals) at each budget of
`--calls`, for each of `--optimizers`:

- default: compile's default (`HandOff`: GradientText, handing the run to Bundle), the
  world's reflection as its only proposer, under `Budget(max_calls=N)`;
- gradient-text, bundle, beam: each search alone, its defaults, the same proposer and budget;
- gepa: `gepa.optimize` as in bench/bench_search_yield.py (a reflection adding one rule drawn
  with the member's odds; it does not repeat proposals), `max_metric_calls=N` and a stop at N
  calls; gepa checks both between iterations, so its last one runs past N;
- gepa-cut: the same run held to N calls: its pick as it stood at its last check within N;
- gepa-gated: gepa's pick kept only where one sign test on validation passes at 0.05;
- default-at-gepa-spend (asked for by name, not in the default set): in each seed, gepa runs
  first and compile's default then runs under `Budget(max_calls=S)`, S being the calls gepa
  spent in that seed at that budget (its overrun included): the two searches at equal spend;
- rev: GradientText as it was at `--revision` (default 0bef2b7), run in a subprocess with a
  worktree of that revision on PYTHONPATH (`git worktree add --detach /tmp/rev-REV REV`, made
  when missing, never committed); this tree's world module is loaded by its file path there.

Reported per member and budget: the mean gain over seeds in true accuracy on the member's test
items over the seed skill, harmful rules kept a run (default), runs changed (null members), and
per draw and budget the issue's summary lines. Usage::

    python bench/bench_search_family.py --runs 20 --calls 100 200 400 --workers 2
    python bench/bench_search_family.py --draws dev --optimizers default gepa --runs 5
    python bench/bench_search_family.py --runs 2 --first-seed 3 --fresh-seed N  # more seeds
    python bench/bench_search_family.py --table bench/results/search_family_5seeds.json

`FAMILY_RUN_TIMEOUT` (seconds, default 180) cuts a run; it is counted as timed out and left
out of the means.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import json
import logging
import math
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from multiprocessing import Pool
from pathlib import Path
from types import ModuleType
from typing import Any

HERE = Path(__file__).resolve().parent
WORLD_FILE = HERE.parent / "skillopt_dsl" / "testing" / "rule_world.py"
FAMILY_FILE = HERE.parent / "skillopt_dsl" / "testing" / "world_family.py"
OPTIMIZERS = (
    "default", "gradient-text", "bundle", "beam", "gepa", "gepa-cut", "gepa-gated", "rev"
)  # fmt: skip
AT_GEPA_SPEND = "default-at-gepa-spend"
"""The default under the calls gepa spent in the same seed and budget (run only when named)."""
GATED_ALPHA = 0.05
"""gepa-gated: gepa's pick kept only where a one-sided sign test on validation against the
seed passes at this level (the run's whole significance spent on one decision)."""
sys.path.insert(0, str(HERE))
from family_ablation import ABLATIONS, render_ablation  # noqa: E402
from family_ablation import build as build_ablation  # noqa: E402

RUN_TIMEOUT_S = int(os.environ.get("FAMILY_RUN_TIMEOUT", "180"))
PROPOSER_READS = os.environ.get("FAMILY_PROPOSER_READS", "request")
"""What our searches' fake reflection reads (`RuleWorldProposer.reads`): "request" (the failing
ids, the skill and the rejected proposals, as `ReflectiveProposer`'s prompt holds them; the
family's default since 2026-12-06) or "failures" (the ids alone, as before)."""


@dataclass(frozen=True)
class Outcome:
    """One run: gain on test over the seed, rules kept, changed, calls; timed out: no figures."""

    gain: float
    useful: int
    harmful: int
    changed: bool
    calls: int
    timed_out: bool = False
    stop: str = ""
    false_claim: bool = False
    """Our searches: the run stopped `train_solved` with a training example the skill kept
    fails, or `perfect` with a validation example it fails (a stop that says more than holds)."""


@dataclass(frozen=True)
class Job:
    """One member and optimizer over its budgets and seeds (sent to a worker or a subprocess)."""

    draw: str
    member: str
    world: dict[str, Any]
    sizes: tuple[int, int, int]
    optimizer: str
    budgets: tuple[int, ...]
    seeds: tuple[int, ...]
    revision_path: str = ""


@functools.cache
def world_modules() -> tuple[ModuleType, ModuleType]:
    """This tree's rule world and family, loaded by their file paths under the package's own
    module names, so that their imports resolve to the package on PYTHONPATH (a worktree of
    `--base` or `--revision`: the optimizers measured are a commit's, not a shared working
    tree's edits in progress)."""
    import skillopt_dsl.testing  # noqa: F401  (the parent package, from PYTHONPATH)

    loaded = []
    for name, path in (("rule_world", WORLD_FILE), ("world_family", FAMILY_FILE)):
        spec = importlib.util.spec_from_file_location(f"skillopt_dsl.testing.{name}", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        loaded.append(module)
    return loaded[0], loaded[1]


def run_seeds(job: Job, rw: ModuleType) -> list[list[Outcome]]:
    """The job's outcomes, one list of seeds per budget."""
    logging.disable(logging.WARNING)
    per_budget = []
    for calls in job.budgets:
        outcomes = []
        for seed in job.seeds:
            world = rw.RuleWorld(**{**job.world, "seed": seed})
            signal.alarm(RUN_TIMEOUT_S)
            try:
                outcomes.append(run_one(job.optimizer, world, job.sizes, calls, rw))
            except _RunTimeout:
                outcomes.append(Outcome(0.0, 0, 0, False, 0, timed_out=True))
            finally:
                signal.alarm(0)
        per_budget.append(outcomes)
    return per_budget


class _RunTimeout(Exception):
    pass


def _alarm(signum: int, frame: object) -> None:
    raise _RunTimeout


def run_one(
    optimizer: str, world: Any, sizes: tuple[int, int, int], calls: int, rw: ModuleType
) -> Outcome:
    train, val, test = (
        world.items(s, n) for s, n in zip(("train", "val", "test"), sizes, strict=True)
    )
    stop = ""
    if optimizer == AT_GEPA_SPEND:
        spent_by_gepa = _gepa(world, train, val, calls)[1]
        text, spent, stop = _ours("default", world, train, val, spent_by_gepa, rw)
    elif optimizer in ("gepa", "gepa-gated", "gepa-cut"):
        text, spent = _gepa(world, train, val, calls, cut=optimizer == "gepa-cut")
        if optimizer == "gepa-gated" and not _sign_test_passes(world, text, val):
            text = world.seed_skill
    else:
        text, spent, stop = _ours(optimizer, world, train, val, calls, rw)
    claimed = {"train_solved": train, "perfect": val}.get(stop)
    rights, harms, _ = rw.rules_in(text)
    return Outcome(
        gain=world.accuracy(text, test) - world.accuracy(world.seed_skill, test),
        useful=len(rights),
        harmful=len(harms),
        changed=text != world.seed_skill,
        calls=spent,
        stop=stop,
        false_claim=claimed is not None and world.accuracy(text, claimed) < 1.0,
    )


def _ours(
    optimizer: str, world: Any, train: list[Any], val: list[Any], calls: int, rw: ModuleType
) -> tuple[str, int, str]:
    """Our search `optimizer` in `world`: the skill it keeps, the calls it spent, its stop."""
    import skillopt_dsl as sd
    from skillopt_dsl import optimizers as opt
    from skillopt_dsl.lm import LM

    proposers = [rw.RuleWorldProposer(reads=PROPOSER_READS)]
    if optimizer in ABLATIONS:
        search = build_ablation(optimizer, opt, proposers)
    elif optimizer == "default":
        search = opt.HandOff(
            first=opt.GradientText(proposers=proposers), then=opt.Bundle(proposers=proposers)
        )
    elif optimizer in ("gradient-text", "rev"):
        search = opt.GradientText(proposers=proposers)
    elif optimizer == "bundle":
        search = opt.Bundle(proposers=proposers)
    else:
        search = opt.Beam(proposers=proposers)
    result = sd.compile(
        world.task(),
        train,
        val,
        optimizer=search,
        lm=LM(world.target()),
        optimizer_lm=LM(world.reflector()),
        budget=sd.Budget(max_calls=calls),
        seed=world.seed,
        threads=1,
    )
    return result.best_skill.text, result.usage.calls, result.stop_reason


def _sign_test_passes(world: Any, text: str, val: Sequence[Any]) -> bool:
    """Whether `text` beats the seed on `val` by a one-sided exact sign test at `GATED_ALPHA`
    (the discordant pairs: items one gets right and the other wrong)."""
    wins = losses = 0
    for example in val:
        new, old = world.right(text, example.id), world.right(world.seed_skill, example.id)
        wins, losses = wins + (new and not old), losses + (old and not new)
    n = wins + losses
    p_value = sum(math.comb(n, k) for k in range(wins, n + 1)) / 2**n if n else 1.0
    return p_value <= GATED_ALPHA


def _gepa(
    world: Any, train: list[Any], val: list[Any], calls: int, *, cut: bool = False
) -> tuple[str, int]:
    """bench_search_yield.py's gepa run, on the member's seed skill: its pick and the calls it
    spent. gepa checks its budget between iterations, so its last iteration runs past `calls`
    (a whole validation pass of a new candidate: 1.06-1.25 of the budget, bench/README §9j).
    `cut`: its pick as it stood at the last check within `calls` (the best validation mean
    then), and the calls spent to that point: gepa held to the budget the others are held to."""
    import gepa
    from gepa.adapters.default_adapter.default_adapter import DefaultAdapter

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

    within: list[tuple[str, int]] = []  # (its pick, calls spent) at each check within `calls`

    def stop(state: Any) -> bool:
        spent = counts["target"] + counts["reflection"]
        if spent <= calls:
            scores = state.program_full_scores_val_set
            best = max(range(len(scores)), key=scores.__getitem__)  # gepa's own best_idx
            within.append((state.program_candidates[best]["system_prompt"], spent))
        return spent >= calls

    result = gepa.optimize(
        seed_candidate={"system_prompt": world.seed_skill},
        trainset=data(train),
        valset=data(val),
        adapter=DefaultAdapter(model=task_lm),
        reflection_lm=reflection_lm,
        max_metric_calls=calls,
        stop_callbacks=[stop],
        seed=world.seed,
        display_progress_bar=False,
        logger=_Silent(),
        raise_on_exception=True,
    )
    if cut:
        return within[-1] if within else (world.seed_skill, 0)
    return result.best_candidate["system_prompt"], counts["target"] + counts["reflection"]


class _Silent:
    def log(self, message: str) -> None:
        del message


def run_job(job: Job) -> tuple[Job, list[list[Outcome]], float]:
    """A worker's job: in this process, or the revision's GradientText in a subprocess."""
    signal.signal(signal.SIGALRM, _alarm)
    start = time.monotonic()
    if job.optimizer != "rev":
        return job, run_seeds(job, world_modules()[0]), time.monotonic() - start
    env = {**os.environ, "PYTHONPATH": job.revision_path}
    done = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--one", json.dumps(asdict(job))],
        env=env,
        cwd="/tmp",
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S * len(job.seeds) * len(job.budgets),
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"revision run failed: {done.stderr[-2000:]}")
    reply = json.loads(done.stdout.strip().splitlines()[-1])
    outcomes = [[Outcome(**o) for o in budget] for budget in reply]
    return job, outcomes, time.monotonic() - start


def one(payload: str) -> None:
    """`--one`: run a job under the package on PYTHONPATH (another revision) and print JSON."""
    raw = json.loads(payload)
    job = Job(**{**raw, "sizes": tuple(raw["sizes"]), "seeds": tuple(raw["seeds"]),
                 "budgets": tuple(raw["budgets"])})  # fmt: skip
    signal.signal(signal.SIGALRM, _alarm)
    outcomes = run_seeds(job, world_modules()[0])
    sys.stdout.write(json.dumps([[asdict(o) for o in budget] for budget in outcomes]) + "\n")


def worktree(revision: str) -> str:
    """A detached worktree of `revision` under /tmp (made when missing)."""
    path = Path(f"/tmp/rev-{revision}")
    if not (path / "skillopt_dsl").is_dir():
        subprocess.run(
            ["git", "-C", str(HERE.parent), "worktree", "add", "--detach", str(path), revision],
            check=True,
            capture_output=True,
        )
    return str(path)


def realistic(member: dict[str, Any], calibration: dict[str, Any] | None) -> bool:
    """Whether a member's mechanics match the product's and the real model's figures (bench
    README §14, bench/bench_world_calibration.py on Qwen2.5-0.5B): addresses the product gives
    (the group read, or none), a draw from any failing item, not null, and a noise no larger than
    the calibration allows (twice the larger share of answers moved by whitespace-only and
    neutral-sentence changes, at least 0.02: a few hundred answers cannot tell 0 from 0.01).
    The reflection's p_right (at most about 0.18 there) is not required: few members would stay."""
    w = member["world"]
    if w["addresses"] not in ("group", "none") or w["draw"] != "any_failing" or member["null"]:
        return False
    return w["noise"] <= noise_bound(calibration)


def noise_bound(calibration: dict[str, Any] | None) -> float:
    """The largest noise a realistic member has (1.0 without calibration figures)."""
    if calibration is None:
        return 1.0
    kinds = calibration["answers"]["by_kind"]
    moved = max(kinds[k]["moved_share"] for k in ("whitespace", "neutral") if k in kinds)
    return max(0.02, 2 * moved)


def render(figures: dict[str, Any], calibration: dict[str, Any] | None) -> None:
    """Print each draw's table (mean gain per member, budget and optimizer; the default's
    harmful rules kept a run and runs changed) and its summary lines, from a results file."""
    sys.path.insert(0, str(HERE))
    from _common import print_table

    args = figures["args"]
    for d, draw in figures["draws"].items():
        members = draw["members"]
        rows = {(r["member"], r["optimizer"], r["calls"]): r for r in draw["rows"]}
        opts = [o for o in args["optimizers"]]
        table = []
        for m in members:
            tag = (
                m["name"]
                + (" null" if m["null"] else "")
                + (" real" if realistic(m, calibration) else "")
            )
            for calls in args["calls"]:
                cells = [_gain(rows.get((m["name"], o, calls))) for o in opts]
                r = rows.get((m["name"], "default", calls))
                extra = (
                    [f"{r['harmful']:.2f}", f"{r['changed']}/{len(r['gains'])}"]
                    if r
                    else ["-", "-"]
                )
                table.append([tag, calls, *cells, *extra])
        print_table(
            f"{d} draw (seed {draw['seed']}): mean gain over {args['runs']} seeds, base {figures.get('base')}",
            ["member", "calls", *opts, "harmful kept", "changed"],
            table,
        )
        for calls in args["calls"]:
            print(json.dumps(summary(members, rows, calls, calibration)))


def _gain(row: dict[str, Any] | None) -> str:
    return "-" if row is None or row["gain"] is None else f"{row['gain']:+.3f}"


def summary(
    members: Sequence[dict[str, Any]],
    rows: dict[tuple[str, str, int], dict[str, Any]],
    calls: int,
    calibration: dict[str, Any] | None,
) -> dict[str, Any]:
    """The issue's "Done when" lines for one draw and budget."""

    def mean(name: str, opt: str) -> float | None:
        row = rows.get((name, opt, calls))
        return None if row is None else row["gain"]

    def means(group: Sequence[dict[str, Any]]) -> dict[str, float]:
        out = {}
        for opt in (*OPTIMIZERS, AT_GEPA_SPEND):
            values = [x for m in group if (x := mean(m["name"], opt)) is not None]
            if values:
                out[opt] = round(statistics.mean(values), 4)
        return out

    def level_with(peer: str, ours: str = "default") -> tuple[str, list[str]]:
        """Members where `ours` is at least `peer` - 0.02 ("k/n"), and those more than 0.02
        below it."""
        pairs = [(m["name"], mean(m["name"], ours), mean(m["name"], peer)) for m in members]
        known = [(n, d, p) for n, d, p in pairs if d is not None and p is not None]
        below = [n for n, d, p in known if d < p - 0.02]
        return f"{len(known) - len(below)}/{len(known)}", below

    def spent(opt: str) -> float | None:
        shares = [r["calls_spent"] / c for (_, o, c), r in rows.items() if o == opt and c == calls]
        return round(statistics.mean(shares), 3) if shares else None

    level_gepa, below_gepa = level_with("gepa")
    level_cut, below_cut = level_with("gepa-cut")
    level_matched = {}
    if any(opt == AT_GEPA_SPEND and c == calls for (_, opt, c) in rows):
        level, below = level_with("gepa", ours=AT_GEPA_SPEND)
        level_matched = {
            "at_gepa_spend_ge_gepa_minus_002": level,
            "at_gepa_spend_below_gepa_by_002": below,
        }
    below_rev = level_with("rev")[1]
    befores = sorted({o for (_, o, _) in rows if o.startswith("default@")})
    peers = ("gepa", "gepa-cut", "rev", *befores)
    paired = {p: b for p in peers if (b := paired_below(members, rows, calls, p))}
    harmful = [r["harmful"] for (_, opt, c), r in rows.items() if opt == "default" and c == calls]
    return {
        "calls": calls,
        "default_ge_gepa_minus_002": level_gepa,
        "below_gepa_by_002": below_gepa,
        "default_ge_gepa_cut_minus_002": level_cut,
        "below_gepa_cut_by_002": below_cut,
        **level_matched,
        "budget_spent": {o: x for o in (*OPTIMIZERS, AT_GEPA_SPEND) if (x := spent(o)) is not None},
        "mean_over_members": means(members),
        "mean_over_realistic": means([m for m in members if realistic(m, calibration)]),
        "below_rev_by_002": below_rev,
        "paired_below_by_002": paired,
        "null_changed_default": {
            m["name"]: rows[(m["name"], "default", calls)]["changed"]
            for m in members
            if m["null"] and (m["name"], "default", calls) in rows
        },
        "harmful_kept_per_run_default": round(statistics.mean(harmful), 3) if harmful else None,
        "timed_out": sum(r["timed_out"] for (_, _, c), r in rows.items() if c == calls),
        "false_claims": _false_claims(rows, calls),
    }


def _false_claims(rows: dict[tuple[str, str, int], dict[str, Any]], calls: int) -> dict[str, str]:
    """Per search, the runs at `calls` that stopped `train_solved` or `perfect` though the
    skill kept fails an example of that set, of the runs that stopped so ("false/claimed";
    results written before 2026-12-07 hold no stops)."""
    out: dict[str, list[int]] = {}
    for (_, opt, c), r in rows.items():
        if c == calls and "stops" in r:
            claimed = r["stops"].get("train_solved", 0) + r["stops"].get("perfect", 0)
            tally = out.setdefault(opt, [0, 0])
            tally[0], tally[1] = tally[0] + r["false_claims"], tally[1] + claimed
    return {opt: f"{false}/{claimed}" for opt, (false, claimed) in out.items() if claimed}


def paired_below(
    members: Sequence[dict[str, Any]],
    rows: dict[tuple[str, str, int], dict[str, Any]],
    calls: int,
    peer: str,
    ours: str = "default",
) -> dict[str, list[float]]:
    """The members where `ours` is more than 0.02 below `peer` at `calls`, each with the mean
    of its per-seed differences (the same seed is the same world for both), the standard error
    of that mean and their ratio: a member 0.03 below at a standard error of 0.04 is within
    what 20 seeds can resolve, one at z = -3 is not."""
    out = {}
    for m in members:
        a, b = rows.get((m["name"], ours, calls)), rows.get((m["name"], peer, calls))
        if a is None or b is None or len(a["gains"]) != len(b["gains"]) or len(a["gains"]) < 2:
            continue
        diffs = [x - y for x, y in zip(a["gains"], b["gains"], strict=True)]
        mean = statistics.mean(diffs)
        se = round(statistics.stdev(diffs) / math.sqrt(len(diffs)), 6)  # 0 where every seed agrees
        if mean < -0.02:
            out[m["name"]] = [
                round(mean, 3),
                round(se, 3),
                round(mean / se, 2) if se else -math.inf,
            ]
    return out


def beside(figures: dict[str, Any], paths: Sequence[str]) -> dict[str, Any]:
    """`figures` with the rows of other results files of the same draws added (`--beside`):
    a column already present keeps its own rows, and the other file's is named
    `optimizer@base` (a before run's default beside the after run's)."""
    for path in paths:
        other = json.loads(Path(path).read_text())
        for d, draw in figures["draws"].items():
            theirs = other["draws"].get(d)
            if theirs is None:
                continue
            if theirs["seed"] != draw["seed"]:
                raise SystemExit(
                    f"{path}: its {d} draw is seed {theirs['seed']}, not {draw['seed']}"
                )
            present = {r["optimizer"] for r in draw["rows"]}
            for r in theirs["rows"]:
                name = (
                    r["optimizer"]
                    if r["optimizer"] not in present
                    else f"{r['optimizer']}@{other['base']}"
                )
                draw["rows"].append({**r, "optimizer": name})
    known = figures["args"]["optimizers"]
    for r in (r for draw in figures["draws"].values() for r in draw["rows"]):
        if r["optimizer"] not in known:
            known.append(r["optimizer"])
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--dev-seed", type=int, default=2026)
    parser.add_argument("--fresh-seed", type=int, default=None, help="default: os.urandom")
    parser.add_argument("--draws", nargs="+", default=["dev", "fresh"], choices=["dev", "fresh"])
    parser.add_argument("--members", type=int, default=24)
    parser.add_argument("--only", nargs="*", default=[], help="member names to run (m03 ...)")
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--first-seed", type=int, default=0, help="seeds first..first+runs-1")
    parser.add_argument("--calls", type=int, nargs="+", default=[100, 200, 400])
    parser.add_argument(
        "--optimizers", nargs="+", default=None, choices=[*OPTIMIZERS, AT_GEPA_SPEND, *ABLATIONS]
    )
    parser.add_argument(
        "--ablation",
        action="store_true",
        help="the default and each rule of the search off (family_ablation.py), not the peers",
    )
    parser.add_argument("--revision", default="0bef2b7")
    parser.add_argument(
        "--base",
        default="HEAD",
        help="the revision whose optimizers run as this tree's (a worktree of it on PYTHONPATH);"
        " 'working-tree': the shared working tree as it is",
    )
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--calibration", default=str(HERE / "results" / "world_calibration.json"))
    parser.add_argument("--name", default="search_family")
    parser.add_argument("--table", help="print the tables of a results file (runs nothing)")
    parser.add_argument(
        "--beside",
        nargs="+",
        default=[],
        help="with --table: other results files of the same draws, their columns added (one"
        " already present as optimizer@base)",
    )
    parser.add_argument(
        "--by-key",
        action="store_const",
        const="noise_key",
        dest="by",
        help="with --table: the mean gain over the non-null members of each noise key",
    )
    parser.add_argument(
        "--by",
        choices=AXES,
        help="with --table: the mean gain over the non-null members of each value of this axis",
    )
    args = parser.parse_args()
    if args.one:
        one(args.one)
        return
    if args.optimizers is None:
        args.optimizers = ["default", *ABLATIONS] if args.ablation else list(OPTIMIZERS)
    if args.table:
        figures = beside(json.loads(Path(args.table).read_text()), args.beside)
        _render_all(figures, _calibration(args.calibration))
        if args.by:
            render_by_axis(figures, args.by)
        return
    if args.base != "working-tree" and "FAMILY_BASE" not in os.environ:
        base = _short(args.base)
        path = worktree(base)
        env = {**os.environ, "PYTHONPATH": path, "FAMILY_BASE": base}
        os.execve(
            sys.executable, [sys.executable, str(Path(__file__).resolve()), *sys.argv[1:]], env
        )
    base = os.environ.get("FAMILY_BASE", "working-tree")
    sys.path.insert(0, str(HERE))
    from _common import write_results

    family = world_modules()[1].WorldFamily()
    print(f"base {base} (skillopt_dsl from {sys.modules['skillopt_dsl'].__file__})", flush=True)

    fresh = args.fresh_seed
    if fresh is None:
        fresh = int.from_bytes(os.urandom(4), "big")
    seeds = {"dev": args.dev_seed, "fresh": fresh}
    print(f"draw seeds: dev {args.dev_seed}, fresh {fresh}", flush=True)
    calibration = _calibration(args.calibration)
    revision_path = worktree(_short(args.revision)) if "rev" in args.optimizers else ""
    draws = {d: family.draw(seeds[d], args.members) for d in args.draws}
    jobs = [
        Job(d, m.name, _world_fields(m.world), (m.train, m.val, m.test), opt,
            tuple(args.calls), tuple(range(args.first_seed, args.first_seed + args.runs)),
            revision_path)
        for d, members in draws.items()
        for m in members
        if not args.only or m.name in args.only
        for opt in args.optimizers
    ]  # fmt: skip
    rows: dict[str, dict[tuple[str, str, int], list[Outcome]]] = {d: {} for d in draws}
    seconds: dict[str, float] = {}
    start = time.monotonic()
    with Pool(args.workers) as pool:
        for n, (job, outcomes, took) in enumerate(pool.imap_unordered(run_job, jobs), 1):
            for calls, budget in zip(job.budgets, outcomes, strict=True):
                rows[job.draw][(job.member, job.optimizer, calls)] = budget
            seconds[job.optimizer] = seconds.get(job.optimizer, 0.0) + took
            done = [[round(o.gain, 4) for o in budget] for budget in outcomes]
            print("job", job.draw, job.member, job.optimizer, json.dumps(done), flush=True)
            if n % 20 == 0 or n == len(jobs):
                print(f"{n}/{len(jobs)} jobs, {time.monotonic() - start:.0f} s", flush=True)
    figures: dict[str, Any] = {
        "args": {k: v for k, v in vars(args).items() if k != "one"},
        "base": base,
        "draw_seeds": seeds,
        "wall_s": time.monotonic() - start,
        "wall_s_per_member_all_budgets": {
            k: v / sum(j.optimizer == k for j in jobs) for k, v in seconds.items()
        },
        "draws": {},
    }
    for d, members in draws.items():
        members = [m for m in members if not args.only or m.name in args.only]
        figures["draws"][d] = {
            "seed": seeds[d],
            "members": [
                {"name": m.name, "describe": m.describe(), "null": m.null,
                 "world": _world_fields(m.world), "sizes": [m.train, m.val, m.test]}
                for m in members
            ],
            "rows": [
                {"member": name, "optimizer": opt, "calls": calls,
                 "gain": statistics.mean(o.gain for o in rs if not o.timed_out) if any(not o.timed_out for o in rs) else None,
                 "harmful": statistics.mean(o.harmful for o in rs),
                 "useful": statistics.mean(o.useful for o in rs),
                 "changed": sum(o.changed for o in rs),
                 "calls_spent": statistics.mean(o.calls for o in rs),
                 "timed_out": sum(o.timed_out for o in rs),
                 "stops": dict(Counter(o.stop for o in rs if o.stop)),
                 "false_claims": sum(o.false_claim for o in rs),
                 "gains": [round(o.gain, 4) for o in rs]}
                for (name, opt, calls), rs in sorted(rows[d].items())
            ],
        }  # fmt: skip
    _render_all(figures, calibration)
    for d, members in draws.items():
        for m in members:
            print(f"  {d} {m.name}: {m.describe()}")
    write_results(args.name, figures)


def _render_all(figures: dict[str, Any], calibration: dict[str, Any] | None) -> None:
    """The family tables, and the ablation table where the run holds variants."""
    if any(o in ABLATIONS for o in figures["args"]["optimizers"]):
        from _common import print_table

        render_ablation(figures, print_table)
    else:
        render(figures, calibration)


AXES = ("noise_key", "addresses", "draw", "answers")
"""The world's mechanics a table can be split by (`--by`; `rule_world.RuleWorld`'s axes)."""


def render_by_axis(figures: dict[str, Any], axis: str) -> None:
    """Per draw and value of the world's `axis` (`AXES`: the noise key, what a proposal names,
    what the reflection draws a rule for, the answers), each optimizer's mean gain over the
    non-null members with that value at each budget."""
    from _common import print_table

    calls, optimizers = figures["args"]["calls"], figures["args"]["optimizers"]
    for name, draw in figures["draws"].items():
        gains = {(r["member"], r["optimizer"], r["calls"]): r["gain"] for r in draw["rows"]}
        table = []
        for value in sorted({m["world"][axis] for m in draw["members"]}):
            members = [
                m["name"] for m in draw["members"]
                if m["world"][axis] == value and not m["null"]
            ]  # fmt: skip
            for opt in optimizers if members else []:
                means = [statistics.fmean(gains[m, opt, c] for m in members) for c in calls]
                table.append([value, len(members), opt, *(f"{g:+.3f}" for g in means)])
        print_table(
            f"{name} draw (seed {draw['seed']}): mean gain by {axis}, non-null members",
            [axis, "members", "optimizer", *(f"{c} calls" for c in calls)],
            table,
        )


def _calibration(path: str) -> dict[str, Any] | None:
    file = Path(path)
    return json.loads(file.read_text()) if file.is_file() else None


def _short(revision: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(HERE.parent), "rev-parse", "--short", revision],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    return done.stdout.strip()


def _world_fields(world: Any) -> dict[str, Any]:
    fields = asdict(world)
    del fields["seed"]
    return fields


if __name__ == "__main__":
    main()
