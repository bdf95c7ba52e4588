"""HandOff (`compile`'s default): GradientText first, Bundle for the rest where effects prove
small; each part on its own checkpointed state (`RunView.within`, `driver.state_parts`)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import skillopt_dsl as sd
from skillopt_dsl.compile import default_optimizer
from skillopt_dsl.driver.state_parts import nest_part, phase_state, read_part
from skillopt_dsl.errors import RunDirError, UserInputError
from skillopt_dsl.evidence import SignificanceBudget
from skillopt_dsl.lm import LM
from skillopt_dsl.optimizers import Bundle, GradientText, HandOff
from skillopt_dsl.optimizers.hand_off import BUNDLE_DECISIONS, PROBE_STEPS
from skillopt_dsl.optimizers.proposers import EditGroup, ProposalRequest, Proposer
from skillopt_dsl.skill import Add
from skillopt_dsl.testing.rule_world import RuleWorld, RuleWorldProposer, RuleWorldTask, rules_in
from skillopt_dsl.testing.scripted import ScriptedLM
from skillopt_dsl.types import Example

RARE = {"classes": 8, "class_share": 0.08, "noise": 0.1, "p_right": 0.143, "p_harm": 0.5}
"""The rare-kind world of bench/bench_search_yield.py: eight kinds of 8 %, rules worth +0.06."""


def _events(run_dir: Path) -> list[dict[str, Any]]:
    lines = (run_dir / "events.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines]


def run_rare(
    optimizer: sd.optimizers.Optimizer,
    run_dir: Path,
    *,
    target: Callable[[list[dict[str, str]]], str] | None = None,
    resume: bool = False,
    max_calls: int = 400,
) -> sd.CompileResult:
    world = RuleWorld(seed=19, **RARE)  # type: ignore[arg-type]
    respond = target if target is not None else world.target()._respond
    return sd.compile(
        RuleWorldTask(), world.items("train", 30), world.items("val", 30),
        optimizer=optimizer, lm=LM(ScriptedLM(respond)), optimizer_lm=LM(world.reflector()),
        budget=sd.Budget(max_calls=max_calls), seed=19, threads=1, run_dir=run_dir,
        resume=resume,
    )  # fmt: skip


def test_compiles_default_is_the_hand_off() -> None:
    """Kills: `compile` (and `SkillOptimizer`) falling back to GradientText alone."""
    chosen = default_optimizer()
    assert isinstance(chosen, HandOff) and chosen.probe_steps == PROBE_STEPS == 1


def test_a_run_whose_screens_confirm_nothing_is_handed_to_bundle(tmp_path: Path) -> None:
    """Kills: no hand-off (GradientText alone keeps nothing on this seed of the rare-kind
    world, where no mini-batch can confirm a rule worth +0.06); Bundle, handed the run after
    two steps, collects the small fixes and one decision accepts them; and a `stop` event (the
    progress line "search stopped") written in the run's middle by the part that hands off."""
    result = run_rare(HandOff.with_proposers([RuleWorldProposer()]), tmp_path)
    events = _events(tmp_path)
    (hand_off,) = [e for e in events if e["event"] == "hand_off"]
    assert hand_off["step"] == PROBE_STEPS and hand_off["to"] == "bundle", hand_off
    # one stop, the run's, after the hand-off (GradientText's hand-off is no "search stopped")
    stops = [i for i, e in enumerate(events) if e["event"] == "stop"]
    assert len(stops) == 1 and stops[0] > events.index(hand_off), [events[i] for i in stops]
    assert events[stops[0]]["reason"] == result.stop_reason != "small_effects"
    useful, harmful, _ = rules_in(result.best_skill.text)
    assert len(useful) >= 4 and not harmful, result.best_skill.text
    assert result.usage.calls <= 400


def test_bundle_decides_at_all_the_significance_gradient_text_left(tmp_path: Path) -> None:
    """Kills: Bundle's one decision drawn under GradientText's plan after the hand-off (two
    thirds of the run's alpha when it planned several and made none; bench/README §9u), and a
    replan that forgets the decisions already made."""
    result = run_rare(HandOff.with_proposers([RuleWorldProposer()]), tmp_path)
    events = _events(tmp_path)
    (preflight,) = [e for e in events if e["event"] == "preflight"]
    assert preflight["planned"] > 1 and preflight["first_level"] < 0.05, preflight
    assert any(e["event"] == "hand_off" for e in events)
    first = result.gate_log[0]
    # nothing was spent before it: its whole-set and early levels together are all of alpha
    assert first.alpha + (first.early_alpha or 0.0) == pytest.approx(0.05), first


def test_a_hand_off_keeps_the_plan_of_a_budget_shared_with_other_runs(tmp_path: Path) -> None:
    """Kills: a hand-off that replans a budget its run does not own (a DSPy program's or a
    Sleep night's: the owner planned every run's decisions, and the other runs' shares would be
    given to this one)."""
    shared = SignificanceBudget(alpha=0.05)
    shared.plan(8)  # its owner plans this run's decisions and others'
    world = RuleWorld(seed=19, **RARE)  # type: ignore[arg-type]
    sd.compile(
        RuleWorldTask(), world.items("train", 30), world.items("val", 30),
        optimizer=HandOff.with_proposers([RuleWorldProposer()]),
        lm=LM(ScriptedLM(world.target()._respond)), optimizer_lm=LM(world.reflector()),
        budget=sd.Budget(max_calls=400), seed=19, threads=1, run_dir=tmp_path,
        significance=shared,
    )  # fmt: skip
    assert any(e["event"] == "hand_off" for e in _events(tmp_path))
    assert shared.planned == 8 and shared.decisions >= 1


@pytest.mark.parametrize(("max_calls", "handed_off"), [(60, False), (70, True)])
def test_a_quiet_run_is_handed_off_only_while_the_calls_left_pay_for_a_whole_decision(
    tmp_path: Path, max_calls: int, handed_off: bool
) -> None:
    """Kills: a hand-off whatever the calls left (before 2026-12-07), or priced at the gate's
    first look only: with 60 calls the probe step leaves 43, fewer than a whole decision on
    the 30 validation examples costs (45 at the run's start), and Bundle's one decision would be cut
    to a first look that rarely certifies a sum of small fixes (bench/README §9r); GradientText
    keeps the run. With 70 calls, 53 are left and the run is handed off (a rule that never
    hands off fails there)."""
    result = run_rare(HandOff.with_proposers([RuleWorldProposer()]), tmp_path, max_calls=max_calls)
    events = _events(tmp_path)
    hand_offs = [e for e in events if e["event"] == "hand_off"]
    assert bool(hand_offs) == handed_off, hand_offs
    (check,) = [e for e in events if e["event"] == "budget_check"]
    if hand_offs:
        assert hand_offs[0]["calls_left"] >= check["decision_calls"], (hand_offs, check)
    else:
        assert "hand_off" not in {h.kind for h in result.history}
        assert result.gate_log, "GradientText kept the run and made its decision"


@dataclass(kw_only=True)
class TellingRules(RuleWorldProposer):
    """The world's reflection, noting what each step's request tells it was rejected."""

    told: dict[int, list[str]] = field(default_factory=dict)

    def propose(self, request: ProposalRequest) -> list[EditGroup]:
        self.told[request.step] = [
            e.text for c in request.rejected for e in c.edits if isinstance(e, Add)
        ]
        return super().propose(request)


def test_both_searches_of_a_hand_off_search_in_the_runs_one_memory(tmp_path: Path) -> None:
    """Kills: Bundle starting from a memory of its own (what GradientText struck in its probe
    step not told to Bundle's proposers, or screened again), and a part's screens missing from
    the run's memory (checkpoint.json's `memory` counts every screen of both parts)."""
    proposer = TellingRules()
    run_rare(HandOff.with_proposers([proposer]), tmp_path)
    events = _events(tmp_path)
    (hand_off,) = [e for e in events if e["event"] == "hand_off"]
    probe = [e for e in events if e["event"] == "screen" and e["step"] < hand_off["step"]]
    struck = {e["rationale"] for e in probe if not e["passed"]}
    assert struck, probe  # GradientText's probe step struck something
    assert struck <= set(proposer.told[hand_off["step"]]), proposer.told  # Bundle's first step
    checkpoint = json.loads((tmp_path / "checkpoint.json").read_text(encoding="utf-8"))
    batch = [e for e in events if e["event"] == "screen" and e["stage"] == "batch"]
    assert checkpoint["memory"]["screen_stats"]["batch_screened"] == len(batch)
    assert checkpoint["memory"]["step"] > hand_off["step"]


def test_a_run_resumed_after_the_hand_off_resumes_bundle(tmp_path: Path) -> None:
    """Kills: a resume that starts GradientText again (its state lost under Bundle's, or the
    phase not saved): the resumed run then spends other calls and ends elsewhere."""
    reference = run_rare(HandOff.with_proposers([RuleWorldProposer()]), tmp_path / "reference")
    world = RuleWorld(seed=19, **RARE)  # type: ignore[arg-type]
    (hand_off,) = [e for e in _events(tmp_path / "reference") if e["event"] == "hand_off"]
    kill_at, served = 400 - hand_off["calls_left"] + 40, {"n": 0}

    def dying(messages: list[dict[str, str]]) -> str:
        served["n"] += 1
        if served["n"] == kill_at:
            raise KeyboardInterrupt
        return world.target()._respond(messages)

    with pytest.raises(KeyboardInterrupt):
        run_rare(HandOff.with_proposers([RuleWorldProposer()]), tmp_path / "run", target=dying)
    checkpoint = json.loads((tmp_path / "run" / "checkpoint.json").read_text(encoding="utf-8"))
    assert checkpoint["optimizer"]["phase"] == "then", checkpoint["optimizer"].keys()
    resumed = run_rare(HandOff.with_proposers([RuleWorldProposer()]), tmp_path / "run", resume=True)
    assert resumed.best_skill == reference.best_skill
    assert [d.to_dict() for d in resumed.gate_log] == [d.to_dict() for d in reference.gate_log]
    assert resumed.usage.calls <= 400  # the call lost at the kill counts: one fewer at the end


def test_a_checkpoint_written_before_the_run_owned_the_memory_resumes(tmp_path: Path) -> None:
    """Kills: an old checkpoint (the search memory in each part's state under `parts/...`, no
    `memory` of its own) refused on resume, or resumed with an empty memory (the memory not
    read from the part that saved last): the resumed run then screens again what it had
    struck and ends elsewhere."""
    reference = run_rare(HandOff.with_proposers([RuleWorldProposer()]), tmp_path / "reference")
    world = RuleWorld(seed=19, **RARE)  # type: ignore[arg-type]
    (hand_off,) = [e for e in _events(tmp_path / "reference") if e["event"] == "hand_off"]
    kill_at, served = 400 - hand_off["calls_left"] + 40, {"n": 0}

    def dying(messages: list[dict[str, str]]) -> str:
        served["n"] += 1
        if served["n"] == kill_at:
            raise KeyboardInterrupt
        return world.target()._respond(messages)

    with pytest.raises(KeyboardInterrupt):
        run_rare(HandOff.with_proposers([RuleWorldProposer()]), tmp_path / "run", target=dying)
    path = tmp_path / "run" / "checkpoint.json"
    checkpoint = json.loads(path.read_text(encoding="utf-8"))
    memory = checkpoint.pop("memory")
    assert memory["rejected"] or memory["struck"], memory  # something to lose
    legacy = {k: v for k, v in memory.items() if k not in ("version", "remembered")}
    for part in checkpoint["optimizer"]["parts"].values():
        part.update(legacy)  # where each part's state held it before
    path.write_text(json.dumps(checkpoint), encoding="utf-8")
    resumed = run_rare(HandOff.with_proposers([RuleWorldProposer()]), tmp_path / "run", resume=True)
    assert resumed.best_skill == reference.best_skill
    assert [d.to_dict() for d in resumed.gate_log] == [d.to_dict() for d in reference.gate_log]
    assert resumed.rejected == reference.rejected


def small_fix_target(messages: list[dict[str, str]]) -> str:
    """Training items numbered 0 mod 12 (at most one in a mini-batch of 8) and validation items
    numbered 0 mod 3 fail under any skill without `SMALL`, which fixes them; nothing else
    moves: a real edit whose training mini-batches each show one fix."""
    system = next((m["content"] for m in messages if m["role"] == "system"), "")
    item = messages[-1]["content"].split()[-1]
    number = int("".join(c for c in item if c.isdigit()))
    fails = number % (12 if item.startswith("train") else 3) == 0
    return "B" if fails and "SMALL" not in system else "A"


@dataclass(kw_only=True)
class SmallFix(Proposer):
    """Offers the small fix at every step, naming the step's failures."""

    name: str = "small-fix"

    def propose(self, request: ProposalRequest) -> list[EditGroup]:
        names = tuple(e.id for e, _ in request.failures())
        text = "SMALL: items of kind zero are A."
        return [EditGroup((Add(after=None, text=text),), self.name, True, text, addresses=names)]


def test_a_proposal_on_trial_keeps_the_run_with_gradient_text(tmp_path: Path) -> None:
    """Kills: a hand-off that cuts GradientText short while a proposal is on trial (a real
    edit whose mini-batch showed one fix, as on few or noisy training examples): its
    confirmation never runs, and it is flushed to the gate unconfirmed or dropped."""
    examples = [
        Example(id=f"{split}{i}", inputs={"item": f"item {split}{i}"}, labels={"answer": "A"})
        for split, count in (("train", 24), ("val", 40))
        for i in range(count)
    ]
    optimizer = HandOff.with_proposers([SmallFix()], probe_steps=1)
    result = sd.compile(
        RuleWorldTask(), examples[:24], examples[24:], optimizer=optimizer,
        lm=LM(ScriptedLM(small_fix_target)), optimizer_lm=LM(ScriptedLM(lambda m: "{}")),
        budget=sd.Budget(max_calls=300), run_dir=tmp_path, threads=1,
    )  # fmt: skip
    events = _events(tmp_path)
    kinds = [e["event"] if e["event"] != "screen" else e["stage"] for e in events]
    assert "hand_off" not in kinds
    assert "confirm" in kinds and kinds.index("confirm") < kinds.index("gate"), kinds
    assert result.gate_log and result.gate_log[0].accepted, result.gate_log
    assert "SMALL" in result.best_skill.text


@pytest.mark.parametrize(
    ("max_calls", "bundle_decisions", "handed_off"),
    [(300, BUNDLE_DECISIONS, False), (1000, BUNDLE_DECISIONS, True), (1000, None, False)],
)
def test_a_budget_for_many_decisions_hands_a_run_with_nothing_accepted_to_bundle(
    tmp_path: Path, max_calls: int, bundle_decisions: int | None, handed_off: bool
) -> None:
    """Kills: the rule ignored (the small fix on trial keeps a 1,000-call run with GradientText,
    whose decisions would split the significance), priced at one decision instead of
    `bundle_decisions` (the 300-call run, which pays for fewer than six, handed off too), a
    `None` that does not turn it off, and a hand-off that still sends GradientText's working
    candidate to the gate (the run's first decision must be Bundle's)."""
    examples = [
        Example(id=f"{split}{i}", inputs={"item": f"item {split}{i}"}, labels={"answer": "A"})
        for split, count in (("train", 24), ("val", 40))
        for i in range(count)
    ]
    optimizer = HandOff(
        first=GradientText(proposers=[SmallFix()]),
        then=Bundle(proposers=[SmallFix()]),
        bundle_decisions=bundle_decisions,
    )
    result = sd.compile(
        RuleWorldTask(), examples[:24], examples[24:], optimizer=optimizer,
        lm=LM(ScriptedLM(small_fix_target)), optimizer_lm=LM(ScriptedLM(lambda m: "{}")),
        budget=sd.Budget(max_calls=max_calls), run_dir=tmp_path, threads=1,
    )  # fmt: skip
    events = _events(tmp_path)
    kinds = [e["event"] for e in events]
    assert ("hand_off" in kinds) == handed_off, kinds
    assert result.gate_log and result.gate_log[0].accepted, result.gate_log
    assert "SMALL" in result.best_skill.text
    if handed_off:
        (hand_off,) = [e for e in events if e["event"] == "hand_off"]
        (check,) = [e for e in events if e["event"] == "budget_check"]
        assert hand_off["calls_left"] >= BUNDLE_DECISIONS * check["decision_calls"], hand_off
        assert kinds.index("hand_off") < kinds.index("gate"), kinds
        notes = [h.note for h in result.history if h.kind == "hand_off"]
        assert notes == ["the calls left pay for 6 gate decisions: handed to bundle"], notes
        (first_gate,) = [e for e in events if e["event"] == "gate"][:1]
        assert first_gate["step"] > hand_off["step"], first_gate


def test_a_run_begun_before_bundle_decisions_existed_resumes_with_it_off(tmp_path: Path) -> None:
    """Kills: `bundle_decisions` or GradientText's `hand_off_decisions` written to config.json
    when None (a run begun before they existed, whose config lacks them, could never be
    resumed), and a resume under the new default that is not refused (the resumed search would
    follow a rule the run did not begin with)."""
    reference = run_rare(HandOff.with_proposers([RuleWorldProposer()]), tmp_path, max_calls=70)
    config_file = tmp_path / "config.json"
    config = json.loads(config_file.read_text(encoding="utf-8"))
    assert config["optimizer"].pop("bundle_decisions") == BUNDLE_DECISIONS
    assert "hand_off_decisions" not in json.dumps(config["optimizer"])
    config_file.write_text(json.dumps(config), encoding="utf-8")  # as a run before 2026-12-07
    with pytest.raises(RunDirError, match="bundle_decisions"):
        run_rare(HandOff.with_proposers([RuleWorldProposer()]), tmp_path, max_calls=70, resume=True)
    proposers = [RuleWorldProposer()]
    old = HandOff(
        first=GradientText(proposers=proposers),
        then=Bundle(proposers=proposers),
        bundle_decisions=None,
    )
    resumed = run_rare(old, tmp_path, max_calls=70, resume=True)
    assert resumed.best_skill == reference.best_skill


def test_a_part_saves_its_own_state_and_keeps_the_others() -> None:
    """Kills: a part's save replacing its siblings' states, or `phase` not naming the part that
    saved last."""
    state = nest_part({}, ["first"], {"rejected": [1], "step": 2})
    state = nest_part(state, ["then"], {"rejected": [3]})
    assert read_part(state, ["first"]) == {"rejected": [1], "step": 2}
    assert phase_state(state) == {"rejected": [3]}
    inner = nest_part(state, ["then", "deep"], {"x": 1})
    assert phase_state(inner) == {"x": 1} and read_part(inner, ["first"])["step"] == 2


def test_the_larger_learning_rate_of_the_two_bounds_the_door() -> None:
    """Kills: a bound from GradientText's settings alone (Bundle's larger steps refused)."""
    optimizer = HandOff(first=GradientText(lr=0.2), then=Bundle(lr=0.4, lr_floor_tokens=64))
    bound = optimizer.lr_bound()
    assert bound.max_lr == 0.4 and bound.floor_tokens == 128


def test_a_probe_of_no_steps_is_refused() -> None:
    with pytest.raises(UserInputError, match="probe_steps"):
        HandOff(probe_steps=0)
    with pytest.raises(UserInputError, match="bundle_decisions"):
        HandOff(bundle_decisions=0)
