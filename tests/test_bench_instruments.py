"""The bench's new read-outs: the family's means by an axis of the world (the noise key, what a
proposal names), the power bench's runs with no gate decision (bench/README §9m) and the path
its fake proposer takes (`--names-read`), the ceiling of one decision per family member (§9q).
Each test names the miscount it kills."""

from __future__ import annotations

import json
import logging
import statistics
import types
from typing import Any

import pytest

from tests.helpers import BENCH, load_bench


def _member(name: str, key: str, addresses: str, *, null: bool = False) -> dict[str, Any]:
    return {"name": name, "null": null, "world": {"noise_key": key, "addresses": addresses}}


def _row(member: str, optimizer: str, calls: int, gain: float) -> dict[str, Any]:
    return {"member": member, "optimizer": optimizer, "calls": calls, "gain": gain}


@pytest.mark.parametrize(
    ("axis", "expected"),
    [
        ("noise_key", {"text": ["1", "default", "+0.200"], "content": ["2", "default", "+0.300"]}),
        ("addresses", {"group": ["2", "default", "+0.350"], "none": ["1", "default", "+0.100"]}),
    ],
)
def test_the_means_by_an_axis_leave_out_null_members_and_keep_values_apart(
    capsys: pytest.CaptureFixture[str], axis: str, expected: dict[str, list[str]]
) -> None:
    """Kills: a null member counted in its value's mean (its 0.000 would pull the mean down),
    and members grouped by another axis than the one asked (`--by`; `--by-key` is
    `noise_key`)."""
    pytest.importorskip("gepa")
    bench = load_bench("bench_search_family")
    members = [
        _member("m00", "text", "group"),
        _member("m01", "text", "none", null=True),
        _member("m02", "content", "group"),
        _member("m03", "content", "none"),
    ]
    rows = [
        _row("m00", "default", 100, 0.2),
        _row("m01", "default", 100, 0.0),
        _row("m02", "default", 100, 0.5),
        _row("m03", "default", 100, 0.1),
    ]
    figures = {
        "args": {"calls": [100], "optimizers": ["default"]},
        "draws": {"dev": {"seed": 7, "members": members, "rows": rows}},
    }
    bench.render_by_axis(figures, axis)
    lines = [line.split() for line in capsys.readouterr().out.splitlines()]
    values = {"text", "content", "difficulty", "exact", "group", "none", "partly_wrong"}
    table = {line[0]: line[1:] for line in lines if line and line[0] in values}
    assert table == expected, table  # a value no member has (difficulty, exact) has no row


def test_the_power_summary_counts_the_runs_that_asked_the_gate_nothing() -> None:
    """Kills: runs with no decision counted from the accepted decisions (a run whose decisions
    were all rejected is not a run without one) or not counted at all."""
    bench = load_bench("bench_search_power")
    figures = [
        bench.RunFigures(hit=False, decisions=0, accepted=0, calls=130, stop="finished"),
        bench.RunFigures(hit=False, decisions=2, accepted=0, calls=300, stop="finished"),
        bench.RunFigures(hit=True, decisions=1, accepted=1, calls=240, stop="finished"),
    ]
    summary = bench.summary(figures)
    assert summary["no_decision"] == 1, summary
    assert summary["runs"] == 3


def test_the_power_fake_names_the_failures_it_read_only_when_asked() -> None:
    """Kills: `--names-read` dropped on its way to a column's proposer (that column would
    measure the unnamed path while the table says it names what it read)."""
    bench = load_bench("bench_search_power")
    for names_read in (False, True):
        for name in ("default", "gate alone", "bundle"):
            search = bench.optimizer(name, 4, names_read=names_read)
            proposers = search.first.proposers if name == "default" else search.proposers
            assert [p.names_read for p in proposers] == [names_read], (name, names_read)
    failing = [(types.SimpleNamespace(id=f"n{k}"), None) for k in range(6)]
    request = types.SimpleNamespace(
        skill=types.SimpleNamespace(text="seed"), step=0, failures=lambda: failing
    )
    named = [g.addresses for g in bench.UsefulLineProposer(names_read=True).propose(request)]
    unnamed = [g.addresses for g in bench.UsefulLineProposer().propose(request)]
    assert named == [("n0", "n1", "n2", "n3")] and unnamed == [()], (named, unnamed)


def test_the_explore_variants_change_only_what_they_name() -> None:
    """Kills: a gate variant whose settings are dropped (the default gate measured under the
    variant's name), and a split variant that hands off before its share of the calls is spent
    (bench/README §9n's screen, bench/family_explore.py)."""
    pytest.importorskip("gepa")
    explore = load_bench("family_explore")
    from skillopt_dsl import optimizers as opt
    from skillopt_dsl.gate import Gate

    search, gate = explore.VARIANTS["gate-no-early"](opt, [], Gate)
    assert isinstance(search, opt.HandOff) and gate == Gate(early_share=0.0)
    assert explore.VARIANTS["default"](opt, [], Gate)[1] is None
    split, _ = explore.VARIANTS["split-50"](opt, [], Gate)

    class View:
        memory = type("Memory", (), {"step": 0})()
        version = 2

        def __init__(self, spent: int, left: int) -> None:
            self.spent, self.left = spent, left

        def calls_left(self) -> int:
            return self.left

        def usage(self) -> Any:
            return type("Usage", (), {"calls": self.spent})()

    state = type("State", (), {"pending": [], "trials": []})()
    assert not split.first._hands_off(View(99, 101), state)
    assert split.first._hands_off(View(100, 100), state)


def test_the_after_accept_variants_hand_off_after_an_acceptance_only_when_quiet() -> None:
    """Kills: an `after-accept` variant that never hands off after an acceptance (measured as
    the default under its name, bench/README §9r), one that hands off with a proposal on trial,
    and `after-accept-probe` handing off before a step on the new incumbent confirmed nothing."""
    pytest.importorskip("gepa")
    explore = load_bench("family_explore")
    from skillopt_dsl import optimizers as opt
    from skillopt_dsl.gate import Gate

    class View:
        memory = type("Memory", (), {"step": 3})()
        version = 2

        def calls_left(self) -> int:
            return 1000

        def decision_calls(self, *, first_look: bool = False) -> int:
            return 10

    def state(trials: list[str], since: int) -> Any:
        return type("State", (), {"pending": [], "trials": trials, "steps_since_accept": since})()

    def first(name: str) -> Any:
        search, _ = explore.VARIANTS[name](opt, [], Gate)
        assert isinstance(search, opt.HandOff)
        return search.first

    at_once, probed = first("after-accept"), first("after-accept-probe")
    at_once.hand_off_after = probed.hand_off_after = 1
    assert at_once._hands_off(View(), state([], since=0))
    assert not at_once._hands_off(View(), state(["on trial"], since=5))
    assert not probed._hands_off(View(), state([], since=0))
    assert probed._hands_off(View(), state([], since=1))
    for name in ("back-on-plateau", "tail-first-member", "back-at-tail"):
        assert isinstance(explore.VARIANTS[name](opt, [], Gate)[0], opt.HandOff), name


def test_the_family_ceiling_bars_a_member_only_where_gepa_is_above_it_by_the_margin() -> None:
    """Kills: a member counted as barred when gepa is within 0.02 of its ceiling (the bar's
    margin dropped), or judged against the default's gain instead of gepa's (bench/README §9q,
    `bench_bundle_ceiling.py --family`)."""
    bench = load_bench("bench_bundle_ceiling")
    from skillopt_dsl.testing.world_family import WorldFamily

    members = WorldFamily().draw(7, 2)
    ceilings = [
        statistics.mean(bench.member_ceiling(m.seeded(s), m.val, m.test, 0.05) for s in range(2))
        for m in members
    ]
    above = (0.01, 0.03)  # gepa above each member's ceiling by this much; the default at 0
    rows = [
        _row(m.name, optimizer, 100, c + lift if optimizer == "gepa" else 0.0)
        for m, c, lift in zip(members, ceilings, above, strict=True)
        for optimizer in ("gepa", "default")
    ]
    results = {
        "args": {"runs": 2, "first_seed": 0, "members": 2, "calls": [100]},
        "draw_seeds": {"dev": 7},
        "draws": {"dev": {"rows": rows}},
    }
    barred = [row[6] for row in bench.family_rows(results, 0.05)]
    assert barred == ["-", "100"], (ceilings, barred)


def test_the_screened_hand_off_variants_hand_off_only_where_their_condition_holds() -> None:
    """Kills: an extra hand-off whose condition is dropped (every quiet-or-not run handed off,
    measured as `always-hand-off` under another name), one that ignores the calls a decision
    needs, `drop` ignored (the working candidate then goes to the gate as GradientText stops),
    and a `waiting-unjudged` / `no-wait` ablation that admits the waiting survivors after all
    (bench/README §9s)."""
    pytest.importorskip("gepa")
    explore, ablation = load_bench("family_explore"), load_bench("family_ablation")
    from skillopt_dsl import optimizers as opt
    from skillopt_dsl.gate import Gate
    from skillopt_dsl.optimizers.bundle_state import BundleMember, BundleState
    from skillopt_dsl.skill import Add

    class View:
        memory = type("Memory", (), {"step": 2})()
        version = 1

        def __init__(self, validation_size: int = 30, left: int = 200) -> None:
            self.validation_size, self.left = validation_size, left

        def calls_left(self) -> int:
            return self.left

        def decision_calls(self, *, first_look: bool = False) -> int:
            return self.validation_size

        def certifiable_gain(self) -> float:
            return 0.5

    def state(rejected: bool = False, net: float = 1.0) -> Any:
        held = type("Held", (), {"net": net, "scored": 8})()
        fields = {"pending": [held], "trials": [], "rejected_hashes": ["h"] if rejected else []}
        return type("State", (), fields)()

    def first(name: str) -> Any:
        search, _ = explore.VARIANTS[name](opt, [], Gate)
        search.first.hand_off_after = 1
        return search.first

    small, after, certifiable = (
        first(n) for n in ("small-validation-40", "hand-off-after-rejection", "probe-certifiable")
    )
    dropped = state()
    assert small._hands_off(View(30), dropped) and not dropped.pending
    assert not small._hands_off(View(40), state())
    assert not small._hands_off(View(30, left=20), state())
    assert after._hands_off(View(90), state(rejected=True))
    assert not after._hands_off(View(90), state())
    kept = state(net=1.0)  # 1 of 8 < 0.5 certifiable
    assert certifiable._hands_off(View(90), kept) and kept.pending
    assert not certifiable._hands_off(View(90), state(net=6.0))
    assert isinstance(explore.VARIANTS["bundle-after-rejection"](opt, [], Gate)[0], opt.HandOff)
    trials = first("trials-needs-2")  # §9w: only proposals on trial, calls for two decisions

    def on_trial() -> Any:
        return type("State", (), {"pending": [], "trials": ["t"], "rejected_hashes": []})()

    dropped_trials = on_trial()
    assert trials._hands_off(View(30, left=60), dropped_trials) and not dropped_trials.trials
    assert not trials._hands_off(View(30, left=59), on_trial())
    assert not trials._hands_off(View(30, left=60), state())  # a proposal joined: kept
    assert explore.VARIANTS["probe-3"](opt, [], Gate)[0].probe_steps == 3

    waiting = BundleMember((Add(after=None, text="A rule."),), ("train0",), ("train1",))
    for name in ("waiting-unjudged", "no-wait"):
        search = ablation.build(name, opt, [])
        bundle_state = BundleState(waiting=[waiting])
        search.then._admit_waiting(None, bundle_state)
        assert bundle_state.waiting == [waiting] and not bundle_state.members, name


def _logging_state() -> tuple[object, ...]:
    loggers = [logging.getLogger(name) for name in ("", "skillopt_dsl", "skillopt_dsl.runs")]
    shown = [(lg.level, lg.disabled, lg.propagate, tuple(lg.handlers)) for lg in loggers]
    return (logging.root.manager.disable, *shown)


@pytest.mark.parametrize("name", sorted(path.stem for path in BENCH.glob("*.py")))
def test_importing_a_bench_script_leaves_the_logging_alone(name: str) -> None:
    """Kills: a bench script that quiets the library at import (bench_gate_noise set the package
    to ERROR there), which silenced every later test's warning in the same pytest worker (CI
    failed on test_kill_resume's torn-line warning). Quieting belongs in the script's `main`."""
    before = _logging_state()
    package = logging.getLogger("skillopt_dsl")
    level = package.level
    try:
        load_bench(name)
        assert _logging_state() == before, f"bench/{name}.py changed the logging at import"
    finally:
        package.setLevel(level)


def test_the_probe_ablations_keep_the_hand_off_they_do_not_switch_off() -> None:
    """Kills: an ablation of one rule of the probe that also switches off the hand-off where
    the calls left pay for six decisions (two rules off where the table names one), and a
    `no-bundle-decisions` that leaves that hand-off on (bench/README §9t)."""
    from dataclasses import replace

    from skillopt_dsl import optimizers as opt

    ablation = load_bench("family_ablation")
    view = types.SimpleNamespace(
        memory=types.SimpleNamespace(step=2),
        version=1,
        calls_left=lambda: 200,
        decision_calls=lambda first_look=False: 30,
    )
    joined = types.SimpleNamespace(net=6.0, scored=8, fixes=("t1",) * 6, breaks=())
    for name in ("probe-gained-only", "probe-clear-fix-only", "hand-off-undecidable"):
        first = ablation.build(name, opt, []).first
        state = types.SimpleNamespace(pending=[joined], trials=[])
        assert replace(first, hand_off_after=1, hand_off_decisions=6)._hands_off(view, state), name
        assert not replace(first, hand_off_after=1, hand_off_decisions=7)._hands_off(view, state)
    assert ablation.build("no-bundle-decisions", opt, []).bundle_decisions is None


def test_the_replan_ablation_leaves_the_plan_and_the_default_replans() -> None:
    """Kills: a `no-replan` variant that still plans the run again at the hand-off (the
    ablation would compare the default with itself), or one that also changes the hand-off
    (bench/README §9u)."""
    from skillopt_dsl import optimizers as opt

    ablation = load_bench("family_ablation")
    plans: list[int] = []
    view = types.SimpleNamespace(
        trainset=(), calls_left=lambda: 200, validation_size=30, replan=plans.append
    )
    opt.HandOff.with_proposers([])._plan_then(view)
    assert plans == [1]
    off = ablation.build("no-replan", opt, [])
    off._plan_then(view)
    assert plans == [1], "the variant planned the run again"
    assert isinstance(off, opt.HandOff) and off.bundle_decisions == opt.HandOff().bundle_decisions


def test_the_screened_budget_variants_are_the_hand_off_they_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Kills: a `bundle-decisions-K` screen row that is not the default with K (the screen of
    bench/README §9t would then measure another rule), a `start-many-decisions` that hands off
    at the start whatever the budget or after a step, and `many-decisions-6-unless-joined`
    handing off a run whose working candidate holds a clear fix, and a `quiet-needs-2` that
    hands a quiet run off with the calls for one decision only."""
    pytest.importorskip("gepa")
    from dataclasses import replace

    explore = load_bench("family_explore")
    from skillopt_dsl import optimizers as opt
    from skillopt_dsl.gate import Gate

    for name, count in (("bundle-decisions-4", 4), ("bundle-decisions-10", 10)):
        search, _ = explore.VARIANTS[name](opt, [], Gate)
        assert search.bundle_decisions == count, name
    assert explore.VARIANTS["bundle-decisions-off"](opt, [], Gate)[0].bundle_decisions is None

    handed: list[int] = []
    start, _ = explore.VARIANTS["start-many-decisions-4"](opt, [], Gate)
    start._hand_off = lambda view: handed.append(view.memory.step)
    monkeypatch.setattr(opt.HandOff, "optimize", lambda self, view: None)  # the run itself
    assert start.bundle_decisions is None  # the screen ran before §9t's rule
    for left, step in ((120, 0), (119, 0), (400, 3)):
        view = types.SimpleNamespace(
            calls_left=lambda left=left: left,
            decision_calls=lambda first_look=False: 30,
            optimizer_state={},
            memory=types.SimpleNamespace(step=step),
        )
        start.optimize(view)
    assert handed == [0], handed

    joined = types.SimpleNamespace(pending=[object()], trials=[])
    quiet = types.SimpleNamespace(pending=[], trials=[object()])
    unless, _ = explore.VARIANTS["many-decisions-6-unless-joined"](opt, [], Gate)
    assert unless.bundle_decisions is None
    first = unless.first
    first.hand_off_after = 1
    view = types.SimpleNamespace(
        memory=types.SimpleNamespace(step=2),
        version=1,
        calls_left=lambda: 180,
        decision_calls=lambda first_look=False: 30,
    )
    assert first._hands_off(view, quiet) and not first._hands_off(view, joined)

    needs, _ = explore.VARIANTS["quiet-needs-2"](opt, [], Gate)
    probe = replace(needs.first, hand_off_after=1)
    silent = types.SimpleNamespace(pending=[], trials=[])
    for left, handed_off in ((60, True), (59, False)):
        view.calls_left = lambda left=left: left
        assert probe._hands_off(view, silent) is handed_off, left


def test_flips_keyed_on_the_content_ignore_the_wording_and_keyed_on_the_text_do_not() -> None:
    """Kills: a `--noise-key content` that still draws the flips from the exact text (every
    rewording of the useful line would redraw them, the mechanic the content key is there to
    take away), or one that ignores what the text states (the useful line and a note would
    move the same answers)."""
    noise = load_bench("bench_gate_noise")
    useful = noise.USEFUL
    first, second = f"{useful} (wording 1)", f"{useful} (wording 7)"
    numbers = range(200)
    for key, same in (("content", True), ("text", False)):
        outcomes = noise.Outcomes(3, 0.0, 0.2, key)
        moved = [outcomes.right(first, n) != outcomes.right(second, n) for n in numbers]
        assert (not any(moved)) == same, key
    content = noise.Outcomes(3, 0.0, 0.2, "content")
    note = "Note 5: stay calm."
    assert any(content.right(first, n) != content.right(note, n) for n in numbers)


def test_the_passengers_ablation_lets_small_effects_ride_and_the_default_does_not() -> None:
    """Kills: a `passengers-ride` variant that keeps the product's rule (the ablation would
    compare the default with itself), or whose GradientText loses its other settings
    (bench/README §9v)."""
    from skillopt_dsl import optimizers as opt
    from skillopt_dsl.optimizers.gradient_text_state import GradientTextState
    from skillopt_dsl.optimizers.search import ScreenedProposal
    from skillopt_dsl.skill import Add

    def proposal(key: str, net: float) -> ScreenedProposal:
        edits = (Add(after=None, text=key),)
        return ScreenedProposal(key, edits, "t", True, key, net, 8, screens=1)

    ablation = load_bench("family_ablation")
    view = types.SimpleNamespace(certifiable_gain=lambda: 0.1, emit=lambda *a, **k: None)
    for name, rides in (("default", False), ("passengers-ride", True)):
        search = (
            opt.HandOff.with_proposers([]) if name == "default" else ablation.build(name, opt, [])
        )
        state = GradientTextState(pending=[proposal("R0", 6)], trials=[proposal("N1", 1)])
        search.first.screened.compose_small_effects(view, state)
        assert (len(state.pending) == 2) == rides, name
    assert ablation.build("passengers-ride", opt, []).first.screened.confirm_steps == 2


def test_the_default_at_gepa_spend_runs_under_the_calls_gepa_spent_in_that_seed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Kills: the matched column run at the nominal budget (gepa's overrun not given to it),
    or under another seed's spend; and its summary counting a member it did not run."""
    pytest.importorskip("gepa")
    bench = load_bench("bench_search_family")
    rw = bench.world_modules()[0]
    budgets: list[int] = []

    def gepa(world: Any, train: Any, val: Any, calls: int, *, cut: bool = False) -> Any:
        return world.seed_skill, calls + 10 * world.seed  # an overrun that differs by seed

    def ours(optimizer: str, world: Any, train: Any, val: Any, calls: int, rw: Any) -> Any:
        assert optimizer == "default"
        budgets.append(calls)
        return world.seed_skill, calls, "budget"

    monkeypatch.setattr(bench, "_gepa", gepa)
    monkeypatch.setattr(bench, "_ours", ours)
    for seed in (1, 2):
        world = rw.RuleWorld(seed=seed)
        outcome = bench.run_one(bench.AT_GEPA_SPEND, world, (8, 18, 20), 100, rw)
        assert outcome.calls == 100 + 10 * seed
    assert budgets == [110, 120]
    members = [_member("m00", "text", "exact"), _member("m01", "text", "exact")]
    runs = [("m00", "gepa", 0.30), ("m00", bench.AT_GEPA_SPEND, 0.25), ("m01", "gepa", 0.10)]
    done = {"calls_spent": 110, "timed_out": 0}
    rows = {(m, o, 100): {**_row(m, o, 100, g), **done} for m, o, g in runs}

    def level(rows: dict[Any, Any]) -> dict[str, Any]:
        summary = bench.summary(members, rows, 100, None)
        return {k: v for k, v in summary.items() if k.startswith("at_gepa_spend")}

    assert level(rows) == {
        "at_gepa_spend_ge_gepa_minus_002": "0/1",
        "at_gepa_spend_below_gepa_by_002": ["m00"],
    }
    gepa_only = {k: v for k, v in rows.items() if k[1] == "gepa"}
    assert level(gepa_only) == {}


def test_a_stop_that_says_more_than_holds_is_counted_against_the_set_it_names(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Kills: a `train_solved` stop taken at its word (the skill kept fails training: before
    3e0cb65 a rejected bundle's stops were), `perfect` checked on training instead of
    validation, and a tally that counts another budget's runs or gepa's (which has no stop)."""
    pytest.importorskip("gepa")
    bench = load_bench("bench_search_family")
    rw = bench.world_modules()[0]
    sizes = (8, 18, 20)

    class World(rw.RuleWorld):  # type: ignore[misc, name-defined]
        """Training solved or not (`solved`), validation never."""

        solved = True

        def accuracy(self, text: str, items: Any) -> float:
            return 1.0 if self.solved and all(e.id.startswith("train") for e in items) else 0.5

    world = World(seed=1)
    cases = [
        (True, "train_solved", False), (True, "perfect", True), (True, "budget", False),
        (False, "train_solved", True), (False, "budget", False),
    ]  # fmt: skip
    for solved, stop, false in cases:
        World.solved = solved
        monkeypatch.setattr(bench, "_ours", lambda *a, s=stop: (rw.SEED_SKILL, 50, s))
        outcome = bench.run_one("default", world, sizes, 100, rw)
        assert (outcome.stop, outcome.false_claim) == (stop, false), (solved, stop)
    rows = {
        ("m00", "default", 100): {"stops": {"train_solved": 2, "budget": 3}, "false_claims": 1},
        ("m01", "default", 100): {"stops": {"perfect": 1}, "false_claims": 1},
        ("m00", "default", 200): {"stops": {"train_solved": 4}, "false_claims": 4},
        ("m00", "gepa", 100): {"stops": {}, "false_claims": 0},
        ("m01", "bundle", 100): {"stops": {"budget": 5}, "false_claims": 0},
    }
    assert bench._false_claims(rows, 100) == {"default": "2/3"}


def test_the_paired_gap_is_taken_seed_by_seed_and_the_before_run_sits_beside(
    tmp_path: Any,
) -> None:
    """Kills: the paired gap taken between the means (the same figure whatever the seeds
    show, with no standard error), a standard error of the gains rather than of their
    per-seed differences, and `--beside` rows overwriting the run's own default."""
    bench = load_bench("bench_search_family")
    members = [_member("m00", "text", "exact"), _member("m01", "text", "exact")]
    per_seed = {
        ("m00", "default"): [0.5, 0.0, 0.5, 0.0],
        ("m00", "gepa"): [0.54, 0.04, 0.54, 0.04],  # 0.04 above in every seed: certain
        ("m01", "default"): [0.0, 0.5, 0.0, 0.5],
        ("m01", "gepa"): [0.54, 0.04, 0.54, 0.04],  # 0.04 above on the mean, seeds apart
    }
    rows = {
        (m, o, 100): {**_row(m, o, 100, statistics.mean(g)), "gains": g}
        for (m, o), g in per_seed.items()
    }
    below = bench.paired_below(members, rows, 100, "gepa")
    assert below["m00"] == [-0.04, 0.0, float("-inf")]
    assert below["m01"][0] == -0.04 and below["m01"][1] > 0.2 and below["m01"][2] > -0.2
    draw = {
        "seed": 7,
        "members": members,
        "rows": [{**_row("m00", "default", 100, 0.2), "gains": [0.2]}],
    }
    before = {"base": "abc1234", "draws": {"fresh": {"seed": 7, "rows": [
        {**_row("m00", "default", 100, 0.1), "gains": [0.1]}]}}}  # fmt: skip
    path = tmp_path / "before.json"
    path.write_text(json.dumps(before))
    figures = bench.beside({"args": {"optimizers": ["default"]}, "draws": {"fresh": draw}}, [path])
    gains = {r["optimizer"]: r["gain"] for r in figures["draws"]["fresh"]["rows"]}
    assert gains == {"default": 0.2, "default@abc1234": 0.1}
    assert figures["args"]["optimizers"] == ["default", "default@abc1234"]


def test_the_min_audit_variant_leaves_a_survivor_only_where_the_calls_cut_its_audit_short(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Kills: a `min-audit-N` variant that refuses every audit (or none), or one that refuses
    an audit the pool cannot fill (the incumbent right on fewer than N examples), measured
    under its name in bench/README §9x."""
    explore = load_bench("family_explore")
    from skillopt_dsl import optimizers as opt
    from skillopt_dsl.gate import Gate

    bundle = explore.VARIANTS["min-audit-4"](opt, [], Gate)[0].then
    monkeypatch.setattr(opt.Bundle, "_audit", lambda *args: "audited")
    right = type("Rollout", (), {"score": 1.0})()

    class View:
        def __init__(self, left: int) -> None:
            self.left = left

        def calls_left(self) -> int:
            return self.left

        def calls_per_rollout(self) -> float:
            return 1.0

        def decision_calls(self, *, first_look: bool = False) -> int:
            return 30

    def audit(left: int, pool_right: int) -> Any:
        monkeypatch.setattr(bundle, "_scored", lambda *a: [(None, right)] * pool_right)
        monkeypatch.setattr(bundle, "_score_more", lambda *a: False)
        return bundle._audit(View(left), type("S", (), {"tail": False})(), None, [])

    assert audit(30 + 3 * 4, pool_right=24) == "audited"  # four examples paid: audited
    assert audit(30 + 3 * 3, pool_right=24) is None  # three: the survivor waits
    assert audit(30 + 3 * 1, pool_right=2) == "audited"  # the pool holds two: audit those


def test_the_identity_digest_is_the_same_for_the_same_search_and_keeps_what_a_run_decided() -> None:
    """Kills: a digest that keeps wall times or temporary paths (two runs of one revision
    would differ, and `cmp` would flag every refactor), and one that drops the events or the
    checkpoint (a change of behaviour that ends at the same stop would pass)."""
    bench = load_bench("search_identity")
    first = bench.one_run("bundle", "default", 120, 19)
    again = bench.one_run("bundle", "default", 120, 19)
    assert first == again and "error" not in first
    assert first["events"] and first["checkpoint"]
    assert bench._untimed({"wall_s": 1.5, "a": [{"elapsed": 2, "b": "/tmp/x/run"}]}) == {
        "a": [{"b": "<path>"}]
    }
    other = bench.one_run("bundle", "default", 400, 19)
    assert other["events"] != first["events"]


@pytest.mark.timeout(120)
def test_every_ablation_runs_a_budgeted_search_to_its_end() -> None:
    """Kills: an ablation that crashes on the search it switches a rule off in (before
    2026-12-07 `no-audit-repeat` returned a count where Bundle's `_repeats` returns the
    breaks, and every run of it raised: the ablation table's row could not be made)."""
    import skillopt_dsl as sd
    from skillopt_dsl import optimizers as opt
    from skillopt_dsl.lm import LM
    from skillopt_dsl.testing.rule_world import RuleWorld, RuleWorldProposer, RuleWorldTask

    ablation = load_bench("family_ablation")
    world = RuleWorld(seed=3, classes=8, class_share=0.08, noise=0.1, p_right=0.143, p_harm=0.5)
    train, val = world.items("train", 20), world.items("val", 20)
    for name in ablation.ABLATIONS:
        result = sd.compile(
            RuleWorldTask(), train, val,
            optimizer=ablation.build(name, opt, [RuleWorldProposer()]),
            lm=LM(world.target()), optimizer_lm=LM(world.reflector()),
            budget=sd.Budget(max_calls=150), seed=3, threads=1,
        )  # fmt: skip
        assert result.usage.calls <= 150, name


def test_the_final_variant_skips_futility_only_for_a_budgeted_final_decision(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Kills: the `final-no-futility` screen variant skipping the futility stop for every
    decision (it would measure something else under its name), for a final decision without
    a call budget, or leaving the skip on after the decision (bench/README §9y)."""
    explore = load_bench("family_explore")
    from skillopt_dsl import optimizers as opt

    class AlwaysFutile:
        def is_futile(self, candidate: Any, incumbent: Any) -> bool:
            return True

    search, gate = explore.VARIANTS["final-no-futility"](opt, [], AlwaysFutile)
    seen: list[tuple[str, bool]] = []

    def submit(self: Any, view: Any, state: Any, *, kind: str, step: Any = None) -> None:
        seen.append((kind, gate.is_futile(None, None)))

    monkeypatch.setattr(opt.GradientText, "_submit_working", submit)

    class View:
        def __init__(self, left: int | None) -> None:
            self.left = left

        def calls_left(self) -> int | None:
            return self.left

    for kind, left in (("final", 10), ("final", None), ("step", 10)):
        search.first._submit_working(View(left), None, kind=kind)
    assert seen == [("final", False), ("final", True), ("step", True)]
    assert gate.is_futile(None, None)


def test_the_search_line_count_counts_code_not_docstrings_comments_or_blank_lines() -> None:
    """Kills: a line count that takes docstrings, comments or blank lines for code, drops the
    continuation lines of a statement, or counts a file outside the search (Beam, OptunaLR,
    the proposers) toward issue 50's "the search's line count goes down" (bench/README §9z)."""
    lines = load_bench("search_lines")
    text = (
        '"""Module docstring,\n    on two lines."""\n'
        "# a comment\n"
        "x = 1  # code with a comment\n"
        "\n"
        "def f() -> tuple[int, int]:\n"
        '    """One line."""\n'
        "    return (1,\n"
        "            2)\n"
        "\n"
        "class C:\n"
        '    """A class docstring."""\n'
        '    note = """a string that is code"""\n'
    )
    assert lines.code_lines(text) == 6  # x, def, return, its continuation, class, note
    files = lines.search_files("wt")
    assert "skillopt_dsl/optimizers/gradient_text.py" in files
    assert "skillopt_dsl/search_memory.py" in files
    assert not any(
        f.endswith(("beam.py", "optuna_lr.py", "optimizers/__init__.py")) or "/proposers/" in f
        for f in files
    )
