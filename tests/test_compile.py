"""compile() with GradientText on a deterministic synthetic task (ScriptedLM only).

The fake target answers right only when the skill says "divisible by 2"; the fake reflector
proposes edits. Several tests here exist to catch a gate violation: the best validation score
must never decrease, and nothing may replace the best skill without an accepted decision.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import skillopt_dsl as sd
from skillopt_dsl.optimizers import GradientText, ReflectiveProposer
from skillopt_dsl.optimizers.proposers import EditGroup, ProposalRequest, Proposer
from skillopt_dsl.optimizers.schedules import SCHEDULES
from skillopt_dsl.skill import parse_edits
from skillopt_dsl.testing import ScriptedLM
from tests.helpers import Parity, assert_closed, parity_examples, parity_target, record_caches

TRAIN = parity_examples(0, 16)
VAL = parity_examples(100, 30)
"""30 examples: the fix (0.5 -> 1.0, 15 wins, no loss) is significant under any sane gate."""
TEST = parity_examples(200, 10)

GOOD = {
    "kind": "add",
    "after": None,
    "text": "Check if the number is divisible by 2.",
    "rationale": "parity",
}
NOISE = {"kind": "add", "after": None, "text": "Be brief.", "rationale": "style"}


def reflector(
    first: list[dict[str, Any]], after_rejection: list[dict[str, Any]] | None = None
) -> ScriptedLM:
    """A deterministic fake optimizer model: proposes `first`, or `after_rejection` once the
    prompt shows a rejected candidate (a function of the messages only, so resume replays it)."""

    def respond(messages: list[dict[str, str]]) -> str:
        seen_rejection = "Already tried and rejected" in messages[-1]["content"]
        edits = after_rejection if seen_rejection and after_rejection is not None else first
        return json.dumps({"edits": edits})

    return ScriptedLM(respond, model="scripted/reflector")


DOOR: dict[str, Any] = dict(compose=1, confirm_steps=0, min_net=1.0, submit_at_net=0.0)
"""Every proposal that passes its own mini-batch screen goes to the gate alone, in that step."""
TRAIN_NUMBERS = frozenset(e.inputs["number"] for e in TRAIN)


def overfit_target(line: str) -> Any:
    """A FAKE target on which `line` makes every *training* answer right and changes nothing on
    other numbers: it passes the screen, and the gate rejects it on validation."""

    def respond(messages: list[dict[str, str]]) -> str:
        number = messages[-1]["content"].split()[-1]
        if line in messages[0]["content"] and number in TRAIN_NUMBERS:
            return "even" if int(number) % 2 == 0 else "odd"
        return parity_target(messages)

    return respond


def events(run_dir: Path, kind: str) -> list[dict[str, Any]]:
    lines = (run_dir / "events.jsonl").read_text().splitlines()
    return [e for e in map(json.loads, lines) if e["event"] == kind]


def gradient(**kwargs: Any) -> GradientText:
    kwargs.setdefault("proposers", [ReflectiveProposer(read_successes=False)])
    kwargs.setdefault("epochs", 2)
    kwargs.setdefault("batch_size", 8)
    return GradientText(**kwargs)


def run(tmp_path: Path | None = None, **kwargs: Any) -> sd.CompileResult:
    kwargs.setdefault("optimizer", gradient())
    kwargs.setdefault("lm", ScriptedLM(parity_target))
    kwargs.setdefault("optimizer_lm", reflector([NOISE], [GOOD]))
    kwargs.setdefault("threads", 1)
    return sd.compile(Parity(), TRAIN, VAL, run_dir=tmp_path, **kwargs)


def assert_best_never_decreases(result: sd.CompileResult) -> None:
    best = result.seed_val_score
    for decision in result.gate_log:
        if decision.accepted:
            assert decision.candidate_score > decision.incumbent_score
            assert decision.candidate_score > best
            best = decision.candidate_score
        else:
            assert decision.candidate_score <= decision.incumbent_score
    assert result.val_score == best


def test_compile_improves_validation(tmp_path: Path) -> None:
    result = run(tmp_path)
    assert result.seed_val_score == pytest.approx(0.5)
    assert result.val_score == 1.0
    assert "divisible by 2" in result.best_skill.text
    assert result.improved
    assert_best_never_decreases(result)
    # The noise edit is tried on training data first and never reaches the gate: screening
    # spends no validation call and no significance on it.
    proposed = {
        e["step"]: [x["text"] for g in e["groups"] for x in g["edits"]]
        for e in events(tmp_path, "proposal")
    }
    noisy_steps = {step for step, texts in proposed.items() if "Be brief." in texts}
    assert noisy_steps and noisy_steps != set(proposed), "the plan: noise, then the fix"
    noise_screens = [
        s for s in events(tmp_path, "screen") if s["step"] in noisy_steps and s["stage"] == "batch"
    ]
    assert noise_screens and not any(s["passed"] for s in noise_screens)
    assert all(d.accepted for d in result.gate_log), "a screened-out edit reached the gate"
    assert "Be brief." not in result.best_skill.text


def test_run_directory_files(tmp_path: Path) -> None:
    result = run(tmp_path)
    for name in ("config.json", "events.jsonl", "best_skill.md", "summary.json", "checkpoint.json"):
        assert (tmp_path / name).is_file(), name
    assert (tmp_path / "skills" / "v0001.md").read_text() == Parity().seed_skill.text
    assert sd.load_skill(tmp_path / "best_skill.md") == result.best_skill
    kinds = {
        json.loads(line)["event"] for line in (tmp_path / "events.jsonl").read_text().splitlines()
    }
    assert {"proposal", "edit_report", "evaluation", "gate", "step", "finish"} <= kinds
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["val_score"] == 1.0 and summary["usage"]["calls"] == result.usage.calls


def test_nothing_accepted_exports_the_seed_byte_for_byte(tmp_path: Path) -> None:
    result = run(tmp_path, optimizer_lm=reflector([NOISE]))
    assert not result.improved
    assert result.best_skill.text == Parity().seed_skill.text
    exported = result.export(tmp_path / "out.md")
    assert sd.load_skill(exported).text == Parity().seed_skill.text
    assert sd.load_skill(tmp_path / "best_skill.md").text == Parity().seed_skill.text


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_learning_rate_respected_for_every_schedule(schedule: str) -> None:
    huge = {
        "kind": "add",
        "after": None,
        "text": " ".join(["filler"] * 300),
        "rationale": "too big",
    }
    optimizer = gradient(schedule=schedule, lr=0.5, lr_floor_tokens=12, epochs=3, batch_size=4)
    result = run(optimizer=optimizer, optimizer_lm=reflector([huge, NOISE], [huge, GOOD]))
    steps = [h for h in result.history if h.candidate_hash is not None]
    assert steps
    for record in steps:
        assert record.change_tokens <= record.budget_tokens
        assert record.lr_budget > 0
    refused = [
        o for h in result.history for o in h.edit_report if "learning-rate budget" in o["reason"]
    ]
    assert refused, "the oversized edit must be clipped, not applied"
    assert "filler" not in result.best_skill.text


def test_max_edits_caps_each_proposal(tmp_path: Path) -> None:
    """`max_edits` caps the edits of one proposal (each is screened alone): the fix the
    reflector lists first is kept, the rule it adds in the same reply is refused."""
    b = {"kind": "add", "after": None, "text": "Rule B.", "rationale": ""}
    result = run(
        tmp_path, optimizer=gradient(max_edits=1, epochs=1), optimizer_lm=reflector([GOOD, b])
    )
    reports = [e["outcomes"] for e in events(tmp_path, "edit_report")]
    assert reports and all(sum(o["status"] == "applied" for o in r) <= 1 for r in reports)
    assert any("max_edits=1" in o["reason"] for r in reports for o in r)
    assert result.val_score == 1.0 and "Rule B." not in result.best_skill.text


def test_invalid_optimizer_output_retried_then_dropped(tmp_path: Path) -> None:
    garbage = ScriptedLM(lambda m: "I'm ready to help!", model="scripted/garbage")
    result = run(tmp_path, optimizer_lm=garbage, optimizer=gradient(epochs=1))
    assert not result.improved
    events = [json.loads(x) for x in (tmp_path / "events.jsonl").read_text().splitlines()]
    dropped = [e for e in events if e["event"] in ("reflection_dropped", "consolidation_dropped")]
    assert dropped and "I'm ready" in dropped[0]["reply"]
    retries = [c for c in garbage.calls if len(c) == 4]
    assert len(retries) == len(dropped), "each group is retried exactly once"


def test_slow_update_consolidates_through_the_gate(tmp_path: Path) -> None:
    """The slow update's proposals are screened and gated like any other: deleting the repeated
    paragraph only ties on training data and is screened out (it never reaches the gate, the
    skill keeps it); the optimizer model's deletion of a harmful line passes the screen and is
    accepted by the gate, within the learning rate."""
    hedge = "Always hedge your answer."
    repeated = (
        "Answer with one word.\n\nCheck if the number is divisible by 2.\n\n"
        "check if the NUMBER is divisible by 2.\n"
    )
    module = Parity(skill=f"{hedge}\n\n{repeated}")
    delete_hedge = {"kind": "delete", "old": hedge, "rationale": "contradicts the rule"}
    result = sd.compile(
        module,
        TRAIN,
        VAL,
        optimizer=gradient(epochs=1, proposers=[], **DOOR),
        lm=ScriptedLM(parity_target),
        optimizer_lm=reflector([delete_hedge]),
        run_dir=tmp_path,
        threads=1,
    )
    slow = [h for h in result.history if h.kind == "slow_update"]
    assert len(slow) == 1 and slow[0].candidate_hash is not None
    assert slow[0].change_tokens <= slow[0].budget_tokens
    screens = {s["rationale"]: s for s in events(tmp_path, "screen")}
    assert not screens["repeated paragraphs"]["passed"], "a consolidation that only ties passed"
    assert screens["consolidation"]["passed"]
    (decision,) = result.gate_log
    assert decision.accepted and decision.candidate_hash == slow[0].candidate_hash
    assert result.best_skill.text.strip() == repeated.strip()


class Scripted(Proposer):
    """A FAKE proposer: the same edit groups at every step (no model call)."""

    name = "scripted"

    def __init__(self, *groups: tuple[str, list[dict[str, Any]]]) -> None:
        self.groups = groups

    def propose(self, request: ProposalRequest) -> list[EditGroup]:
        return [
            EditGroup(tuple(parse_edits(edits)), self.name, True, why) for why, edits in self.groups
        ]


def test_several_proposals_are_each_screened_alone(tmp_path: Path) -> None:
    """Kills: proposals bundled before they are screened (the harmful line would sink the fix,
    or ride along with it). Replaces the test of the removed model aggregation.

    Four proposals in one step: two useless rules, the fix, and a line that breaks every
    answer. Each is tried alone on the mini-batch; only the fix passes and reaches the gate."""
    hedge = {"kind": "add", "after": None, "text": "Always hedge your answer.", "rationale": ""}
    rules = [
        {"kind": "add", "after": None, "text": f"Rule {i}.", "rationale": ""} for i in range(3)
    ]
    proposer = Scripted(
        ("rules", rules[:2]), ("fix", [GOOD]), ("hedge", [hedge]), ("rule", rules[2:])
    )
    result = run(tmp_path, optimizer=gradient(epochs=1, proposers=[proposer]))
    first = [s for s in events(tmp_path, "screen") if s["step"] == 0]
    assert [(s["rationale"], s["passed"]) for s in first] == [
        ("rules", False), ("fix", True), ("hedge", False), ("rule", False)
    ]  # fmt: skip
    fix = first[1]
    assert fix["fixes"] > 0 and fix["breaks"] == 0
    (decision,) = result.gate_log
    assert decision.accepted and result.val_score == 1.0
    assert (
        result.best_skill.text
        == Parity().seed_skill.apply([sd.Add(text=str(GOOD["text"]))])[0].text
    )


def test_duplicate_candidates_are_not_re_evaluated(tmp_path: Path) -> None:
    """The noise line helps on training numbers only: it passes the screen and is rejected by
    the gate; then the reflector reaches the same text by another edit, which passes the screen
    again (a new proposal) and must not be scored on validation a second time."""
    same_text = {**NOISE, "after": "Answer with one word.", "rationale": "style again"}
    target = ScriptedLM(overfit_target("Be brief."))
    result = run(
        tmp_path,
        lm=target,
        optimizer=gradient(epochs=3, slow_update=False, **DOOR),
        optimizer_lm=reflector([NOISE], [same_text]),
    )
    assert events(tmp_path, "duplicate"), "the same text never came back to the door"
    hashes = [d.candidate_hash for d in result.gate_log]
    assert len(hashes) == len(set(hashes))
    val_numbers = {e.inputs["number"] for e in VAL}
    noisy_skill = Parity().seed_skill.apply([sd.Add(text="Be brief.")])[0].text
    noisy_val_calls = [
        c
        for c in target.calls
        if c[-1]["content"] in val_numbers and c[0]["content"] == noisy_skill
    ]
    (judged,) = [d for d in result.gate_log if d.candidate_hash == sd.Skill(noisy_skill).hash]
    assert len(noisy_val_calls) == judged.examples_scored, "the noisy candidate was re-scored"


def test_budget_respected_exactly_and_best_kept(tmp_path: Path) -> None:
    result = run(tmp_path, budget=sd.Budget(max_calls=40))
    assert result.usage.calls <= 40
    assert result.stop_reason == "budget"
    assert sd.load_skill(tmp_path / "best_skill.md") == result.best_skill
    assert_best_never_decreases(result)


def test_test_set_never_influences_selection() -> None:
    without = run()
    with_test = run(testset=TEST)
    assert with_test.best_skill == without.best_skill
    assert [d.to_dict() for d in with_test.gate_log] == [d.to_dict() for d in without.gate_log]
    assert with_test.test_score == 1.0 and with_test.seed_test_score == pytest.approx(0.5)
    assert without.test_score is None


class Killed(BaseException):
    """Stands in for SIGKILL: unwinds without any cleanup code catching it."""


@pytest.mark.parametrize("kill_fraction", [0.3, 0.55, 0.8])
def test_kill_and_resume_equals_uninterrupted(tmp_path: Path, kill_fraction: float) -> None:
    reference_target = ScriptedLM(parity_target)
    reference = run(tmp_path / "ref", lm=reference_target, optimizer_lm=reflector([NOISE], [GOOD]))
    kill_at = int(len(reference_target.calls) * kill_fraction)
    calls = {"n": 0}

    def dying(messages: list[dict[str, str]]) -> str:
        calls["n"] += 1
        if calls["n"] == kill_at:
            raise Killed
        return parity_target(messages)

    with pytest.raises(Killed):
        run(tmp_path / "run", lm=ScriptedLM(dying), optimizer_lm=reflector([NOISE], [GOOD]))
    resumed_target = ScriptedLM(parity_target)
    resumed = run(
        tmp_path / "run", resume=True, lm=resumed_target, optimizer_lm=reflector([NOISE], [GOOD])
    )
    assert resumed.best_skill == reference.best_skill
    assert [d.to_dict() for d in resumed.gate_log] == [d.to_dict() for d in reference.gate_log]
    # the call the kill interrupted counts once as lost and once when the resume sends it again
    assert resumed.usage.lost_calls == 1
    assert resumed.usage.calls - resumed.usage.lost_calls == reference.usage.calls, (
        "spent budget is neither reset nor double counted"
    )
    assert len(resumed_target.calls) < len(reference_target.calls) - kill_at + 2, (
        "scored work is not redone"
    )

    def steps(result: sd.CompileResult) -> list[dict[str, Any]]:
        return [h.to_dict() | {"calls": 0} for h in result.history]

    assert steps(resumed) == steps(reference)


def test_resume_refuses_changed_settings(tmp_path: Path) -> None:
    run(tmp_path, optimizer=gradient(epochs=1))
    with pytest.raises(sd.RunDirError, match="differ"):
        run(tmp_path, resume=True, optimizer=gradient(epochs=1, lr=0.2))
    with pytest.raises(sd.RunDirError, match="already holds a run"):
        run(tmp_path, optimizer=gradient(epochs=1))


def test_overlapping_splits_refused() -> None:
    with pytest.raises(sd.UserInputError, match="shared ids"):
        sd.compile(Parity(), TRAIN, TRAIN[:3], lm=ScriptedLM(parity_target))


# -- what a gain must beat: the constant answer and the untouched test split -------------------
def test_compile_reports_the_constant_baseline_and_warns_when_not_beaten(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Kills: a baseline skipped by compile (None, absent from summary.json), one computed with
    the wrong label, and a missing warning when the skill only ties the constant answer."""
    flat = run(tmp_path / "flat", optimizer_lm=reflector([NOISE]), testset=TEST)
    assert flat.baseline == sd.Baseline("even", 0.5, 0.5)  # parity splits are balanced: a tie
    assert flat.val_score == 0.5 and flat.test_score == 0.5
    assert flat.baseline_warning is not None and "'even' on test" in flat.baseline_warning
    assert any("does not beat the constant answer" in r.message for r in caplog.records)
    summary = json.loads((tmp_path / "flat" / "summary.json").read_text())
    assert summary["baseline"] == {"label": "even", "val_score": 0.5, "test_score": 0.5}
    assert summary["baseline_warning"] == flat.baseline_warning
    events = [json.loads(x) for x in (tmp_path / "flat" / "events.jsonl").read_text().splitlines()]
    assert [e["label"] for e in events if e["event"] == "baseline"] == ["even"]
    learned = run(tmp_path / "learned", testset=TEST)
    assert learned.test_score == 1.0 and learned.baseline_warning is None


def test_budget_stop_still_ends_with_test_scores_on_their_own_ledger(tmp_path: Path) -> None:
    """Kills: test scores missing after a budget stop (test skipped when the search budget is
    spent, or scored through the search's ledger, which then refuses), and test scoring charged
    to the search budget (the search would then spend more than its 40 calls)."""
    result = run(tmp_path, budget=sd.Budget(max_calls=40), testset=TEST)
    assert result.stop_reason == "budget"
    assert result.usage.calls <= 40
    assert result.seed_test_score == 0.5 and result.test_score is not None
    assert result.test_usage is not None and result.test_usage.calls >= len(TEST)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["usage"]["calls"] == result.usage.calls
    assert summary["test_usage"]["calls"] == result.test_usage.calls


def test_test_scoring_is_counted_apart_and_never_charged_to_the_search() -> None:
    """Kills: test calls recorded in the search's ledger (the search usage would grow by the
    20 test calls), and a `test_budget` that is ignored."""
    without = run()
    with_test = run(testset=TEST)
    assert with_test.best_skill != with_test.seed_skill, "seed and best are both scored on test"
    assert with_test.usage.calls == without.usage.calls
    assert with_test.test_usage is not None and with_test.test_usage.calls == 2 * len(TEST)
    assert without.test_usage is None
    capped = run(testset=TEST, test_budget=sd.Budget(max_calls=5))
    assert capped.test_score is None and capped.seed_test_score is None
    assert capped.usage.calls == without.usage.calls and capped.best_skill == without.best_skill


def test_compile_names_its_first_argument_module() -> None:
    """Kills: the first parameter named `skill` again (the keyword call below fails), and the
    positional call no longer accepted."""
    target = ScriptedLM(parity_target)
    by_keyword = sd.compile(
        module=Parity(),
        trainset=TRAIN,
        valset=VAL,
        optimizer=gradient(epochs=1),
        lm=target,
        optimizer_lm=reflector([GOOD]),
        threads=1,
    )
    by_position = sd.compile(
        Parity(),
        TRAIN,
        VAL,
        optimizer=gradient(epochs=1),
        lm=target,
        optimizer_lm=reflector([GOOD]),
    )
    assert by_keyword.best_skill == by_position.best_skill
    assert by_keyword.val_score == 1.0


def test_compile_preflight_states_the_level_its_first_decision_uses() -> None:
    """Kills: a pre-flight computed from a fresh budget of the gate's alpha instead of the
    level the run draws (a shared budget an earlier run spent from, or a per-decision gate):
    the user would be told a level, and so a clean fix, the run does not test at."""
    from skillopt_dsl.evidence import SignificanceBudget

    shared = SignificanceBudget(alpha=0.05)
    shared.plan(4)
    shared.charge(level=shared.level(), charged=None)  # an earlier run spent its first share
    spent = run(significance=shared, optimizer_lm=reflector([GOOD]))
    assert spent.preflight is not None and spent.gate_log
    assert spent.preflight.first_level == pytest.approx(spent.gate_log[0].alpha)
    assert spent.preflight.first_level == pytest.approx(0.05 / 3 / 3)
    per_decision = run(gate=sd.Gate(spending="per-decision"), optimizer_lm=reflector([GOOD]))
    assert per_decision.preflight is not None
    # per decision: the early looks take their share of the decision's own alpha
    first = per_decision.gate_log[0]
    assert per_decision.preflight.first_level == first.alpha == pytest.approx(0.05 * 0.75)
    assert first.early_alpha is not None and first.alpha + first.early_alpha == pytest.approx(0.05)


def test_the_run_closes_its_response_cache_when_it_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kills: the run's cache left open until garbage collection, which leaves SQLite's
    `cache.sqlite-wal` and `-shm` beside the run's files for as long as a reference cycle
    lives (a Sleep night's staged folder then lists them, or not, by chance). Checked after a
    finished run and after one that was killed."""
    from skillopt_dsl import settings as settings_module

    opened = record_caches(monkeypatch, settings_module)
    run(tmp_path / "done")

    def dying(_messages: list[dict[str, str]]) -> str:
        raise Killed

    with pytest.raises(Killed):
        run(tmp_path / "stopped", lm=ScriptedLM(dying))
    assert len(opened) == 2
    for cache in opened:
        assert_closed(cache)
    for directory in ("done", "stopped"):
        assert not list((tmp_path / directory).glob("cache.sqlite-*"))
