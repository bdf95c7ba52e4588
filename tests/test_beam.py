"""Beam search: scoring once per candidate, the trust-region learning rate, Pareto parents,
JSON state for resume (ScriptedLM only; the shared contract is in test_contract.py)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import pytest

import skillopt_dsl as sd
from skillopt_dsl.driver import look_order
from skillopt_dsl.driver.door import SelectionSplit
from skillopt_dsl.lm import LM
from skillopt_dsl.optimizers import Beam, ReflectiveProposer
from skillopt_dsl.optimizers.beam import BeamMember, BeamState, pareto_front
from skillopt_dsl.optimizers.proposers import EditGroup, ProposalRequest, Proposer
from skillopt_dsl.search_memory import SearchMemory
from skillopt_dsl.skill import Add
from skillopt_dsl.testing import ScriptedLM
from skillopt_dsl.testing.contract import (
    BAD_EDIT,
    FIX_EDIT,
    NEUTRAL_EDIT,
    TRAIN,
    VAL,
    ContractParity,
    contract_examples,
    contract_reflector,
    contract_target,
)
from skillopt_dsl.testing.rule_world import RuleWorld, RuleWorldProposer, RuleWorldTask
from skillopt_dsl.testing.search_contract import PARITY_FIX, OfferedEdits
from tests.test_search import GOOD, HEDGE, FixedProposer


def beam(**kwargs: Any) -> Beam:
    kwargs.setdefault("proposers", [ReflectiveProposer(read_successes=False)])
    return Beam(**kwargs)


def run(
    optimizer: Beam, target: ScriptedLM | None = None, run_dir: Path | None = None, **kwargs: Any
) -> sd.CompileResult:
    return sd.compile(
        ContractParity(),
        TRAIN,
        VAL,
        optimizer=optimizer,
        lm=target or ScriptedLM(contract_target),
        optimizer_lm=kwargs.pop("reflector", None) or contract_reflector(),
        run_dir=run_dir,
        threads=1,
        **kwargs,
    )


def test_beam_finds_the_fix_and_submits_only_through_the_gate(tmp_path: Path) -> None:
    result = run(beam(width=2, expansions=2, depth=3), run_dir=tmp_path)
    assert result.val_score == 1.0 and "divisible by 2" in result.best_skill.text
    assert "hedge" not in result.best_skill.text
    assert all(h.kind == "beam" for h in result.history)
    accepted = [d for d in result.gate_log if d.accepted]
    # compared with the seed (right on the odd numbers) on the examples the decision scored
    scored = look_order(VAL, 0)[: accepted[0].examples_scored]
    seed_there = sum(int(e.inputs["number"]) % 2 for e in scored) / len(scored)
    assert len(accepted) == 1 and accepted[0].incumbent_score == pytest.approx(seed_there)
    checkpoint = json.loads((tmp_path / "checkpoint.json").read_text())
    restored = BeamState.from_dict(checkpoint["optimizer"])
    memory = SearchMemory.from_dict(checkpoint["memory"])
    assert restored.round >= 1 and restored.members
    assert any("hedge" in r.to_dict()["edits"][0]["text"] for r in memory.told()), (
        "children worse than their parent, or struck by the screen, are remembered"
    )


def test_candidates_are_chosen_on_the_selection_split_and_only_submissions_see_val() -> None:
    """Kills: Beam scoring its children on the gate's validation examples (a best-of-N on
    val): only the seed and the submitted round winners may be scored on validation, each once;
    every other child is scored once, on the selection split carved from the trainset."""
    target = ScriptedLM(contract_target)
    result = run(beam(width=3, expansions=3, depth=3), target=target)
    val_numbers = {e.inputs["number"] for e in VAL}
    on_val: dict[str, int] = {}
    for call in target.calls:
        if call[-1]["content"].split()[-1] in val_numbers:
            on_val[call[0]["content"]] = on_val.get(call[0]["content"], 0) + 1
    gated = {d.candidate_hash for d in result.gate_log}
    seed = ContractParity().seed_skill
    assert all(n == len(VAL) for n in on_val.values()), "a skill was scored on val twice"
    assert {sd.Skill(text).hash for text in on_val} <= gated | {seed.hash}, (
        "a child that never reached the gate was scored on validation"
    )
    children = {c[0]["content"] for c in target.calls} - set(on_val) - {seed.text}
    assert children, "children were proposed and scored on the selection split"


def test_trust_region_keeps_children_within_one_step_of_the_incumbent() -> None:
    small = {"kind": "add", "after": None, "text": "Think.", "rationale": ""}
    reflector = contract_reflector([small], [NEUTRAL_EDIT], [FIX_EDIT])
    result = run(beam(width=3, expansions=2, depth=3, lr_floor_tokens=6), reflector=reflector)
    for record in result.history:
        assert record.change_tokens <= record.budget_tokens
    refused = [
        e for e in result.history for o in e.edit_report if "learning-rate" in o.get("reason", "")
    ]
    assert not refused, "Beam's edit reports are events, not history records"


def test_pareto_front_keeps_per_example_winners() -> None:
    a = BeamMember("a", {"x": 1.0, "y": 0.0, "z": 0.0})
    b = BeamMember("b", {"x": 0.0, "y": 1.0, "z": 0.0})
    c = BeamMember("c", {"x": 0.5, "y": 0.5, "z": 1.0})
    dominated = BeamMember("d", {"x": 0.0, "y": 0.0, "z": 1.0})
    assert [m.text for m in pareto_front([a, b, c, dominated])] == ["a", "b", "c"]
    left, right = BeamMember("l", {"x": 1.0, "y": 0.0}), BeamMember("r", {"x": 0.0, "y": 1.0})
    mean_only = BeamMember("m", {"x": 0.9, "y": 0.9})
    assert pareto_front([left, right, mean_only]) == [mean_only, left, right], (
        "the best mean is kept even when it wins no single example"
    )


def test_pareto_selection_runs_and_is_seeded() -> None:
    first = run(beam(width=2, expansions=2, depth=3, selection="pareto"))
    second = run(beam(width=2, expansions=2, depth=3, selection="pareto"))
    assert first.best_skill == second.best_skill and first.val_score == 1.0


def test_no_improvement_keeps_the_seed() -> None:
    result = run(beam(depth=2), reflector=contract_reflector([BAD_EDIT], [NEUTRAL_EDIT]))
    assert not result.improved
    assert result.best_skill.text == ContractParity().seed_skill.text


@pytest.mark.parametrize(
    "kwargs",
    [{"width": 0}, {"depth": 0}, {"lr": 0.0}, {"selection": "random"}, {"max_edits": 0}],
)
def test_bad_settings_are_refused(kwargs: dict[str, Any]) -> None:
    with pytest.raises(sd.UserInputError):
        Beam(**kwargs)


def test_a_small_call_budget_keeps_a_gate_decision_affordable() -> None:
    """Kills: Beam expanding until the budget is gone (150 calls: every child scored on the
    selection split, the gate never able to judge the fix it found; 0 decisions). Its fix
    accepted, the next round finds validation perfect and stops there."""
    result = run(beam(width=2, expansions=2, depth=3), budget=sd.Budget(max_calls=150))
    assert result.stop_reason == "perfect"
    assert [d.accepted for d in result.gate_log] == [True]
    assert result.val_score == 1.0 and "divisible by 2" in result.best_skill.text
    assert result.usage.calls <= 150


# -- issue 38 item 3: Beam's memory, its expansion price, its plateau ---------------------------


def screens_of(run_dir: Path, rationale: str) -> list[dict[str, Any]]:
    lines = (run_dir / "events.jsonl").read_text(encoding="utf-8").splitlines()
    return [
        e for e in map(json.loads, lines) if e["event"] == "screen" and e["rationale"] == rationale
    ]


def test_beam_never_rescreens_edits_its_memory_rejected(tmp_path: Path) -> None:
    """Kills: Beam screening again, at every expansion, an edit it already remembers as
    rejected (a proposal named for the batch's failures that fixed none of them: its calls
    are spent again and again on a known loser). As in GradientText, one failure is a strike:
    the edit is screened again when proposed again until its `screen_strikes`-th, then never."""
    optimizer = Beam(
        proposers=[FixedProposer(texts=[HEDGE], named=True)], width=1, expansions=2, depth=3
    )
    result = run(optimizer, run_dir=tmp_path)
    assert len(screens_of(tmp_path, HEDGE)) == optimizer.screen_strikes == 2
    assert any(HEDGE in e.text for c in result.rejected for e in c.edits if isinstance(e, Add))


class ExpansionView:
    """The part of a run view `Beam._can_expand` reads: `left` calls left, `rate` calls a
    rollout, and a gate decision of 45 calls (30 validation examples, the incumbent's 15 of
    them unscored)."""

    validation_size = 30

    def __init__(self, left: int, rate: float) -> None:
        self.left, self.rate = left, rate

    def calls_left(self) -> int | None:
        return self.left

    def calls_per_rollout(self) -> float:
        return self.rate

    def decision_calls(self, *, first_look: bool = False) -> int:
        return 15 if first_look else 45


@pytest.mark.parametrize(("rate", "enough"), [(1.0, 71), (3.0, 115)])
def test_beams_expansion_price_includes_the_screens_mini_batch(rate: float, enough: int) -> None:
    """Kills: an expansion priced without the screen's mini-batch (the candidate's rollouts on
    it cost as much as the parent's), at one call a rollout whatever was measured, or reserving
    the validation set's size instead of the next decision's calls (`decision_calls`): each
    lets a small budget start an expansion that leaves the gate unable to decide. Here:
    8 parent rollouts, 8 screen rollouts, 6 selection rollouts at `rate`, 4 proposal calls."""
    optimizer = Beam(proposers=[], batch_size=8)
    select = tuple(contract_examples(0, 6))
    split = SelectionSplit(fit=tuple(contract_examples(6, 18)), select=select, fraction=0.25)
    assert optimizer._can_expand(cast(Any, ExpansionView(enough, rate)), split)
    assert not optimizer._can_expand(cast(Any, ExpansionView(enough - 1, rate)), split)
    tail = enough - 30  # the budget's tail reserves the decision's first look (15, not 45)
    assert optimizer._can_expand(cast(Any, ExpansionView(tail, rate)), split, first_look=True)
    view = cast(Any, ExpansionView(tail - 1, rate))
    assert not optimizer._can_expand(view, split, first_look=True)


@dataclass(kw_only=True)
class OneRound(Proposer):
    """A fake proposer: `text` in round `at` only, nothing in the others."""

    text: str
    at: int
    name: str = "one-round"

    def propose(self, request: ProposalRequest) -> list[EditGroup]:
        if request.epoch != self.at:
            return []
        return [EditGroup((Add(after=None, text=self.text),), self.name, True, self.text)]


def wrong_on_sevens(messages: list[dict[str, str]]) -> str:
    """The contract's target, wrong on multiples of 7 whatever the skill says (so the fix
    leaves validation short of perfect, and the search goes on after it)."""
    answer = contract_target(messages)
    if int(messages[-1]["content"].split()[-1]) % 7:
        return answer
    return "odd" if answer == "even" else "even"


def test_beams_plateau_counts_consecutive_empty_rounds_only(tmp_path: Path) -> None:
    """Kills: a plateau that counts every empty round of the run (an empty round, a round that
    submits the fix, then one empty round would stop a `plateau=2` search: two empty rounds,
    but not in a row)."""
    proposers = [OneRound(text=GOOD, at=1)]
    optimizer = Beam(proposers=proposers, width=1, expansions=1, depth=10, plateau=2)
    result = run(optimizer, ScriptedLM(wrong_on_sevens), run_dir=tmp_path)
    assert [d.accepted for d in result.gate_log] == [True]
    lines = (tmp_path / "events.jsonl").read_text(encoding="utf-8").splitlines()
    (stop,) = [e for e in map(json.loads, lines) if e["event"] == "stop"]
    assert stop["reason"] == "plateau" and stop["round"] == 4, stop


def test_a_round_that_outgrows_a_whole_decision_leaves_the_tail_to_the_next_round(
    tmp_path: Path,
) -> None:
    """Kills: a round that can no longer afford its next expansion with a whole gate decision
    after it ending the run (a rule world at 100 calls stopped with 65 of them left, after one
    expansion): the round closes, and the next expands while the decision's first look fits."""
    world = RuleWorld(seed=1)
    result = sd.compile(
        RuleWorldTask(), world.items("train", 30), world.items("val", 30),
        optimizer=Beam(proposers=[RuleWorldProposer()]), lm=LM(world.target()),
        optimizer_lm=LM(world.reflector()), budget=sd.Budget(max_calls=100), seed=1,
        threads=1, run_dir=tmp_path,
    )  # fmt: skip
    lines = (tmp_path / "events.jsonl").read_text(encoding="utf-8").splitlines()
    expansions = [e for e in map(json.loads, lines) if e["event"] == "proposer"]
    assert len(expansions) >= 2 and result.usage.calls <= 100
    assert result.stop_reason == "budget"


def test_a_round_decides_its_tail_after_paying_the_incumbents_selection_scores(
    tmp_path: Path,
) -> None:
    """Kills: a round that decides whether it is in the budget's tail before scoring the
    incumbent on the selection split (80 calls: the whole decision fitted before those 6
    calls and not after, the round expanded nothing and the run stopped with 59 calls left
    and the fix never proposed)."""
    fixes = [f"{PARITY_FIX} ({k})" for k in range(6)]
    optimizer = Beam(proposers=[OfferedEdits(texts=fixes)], batch_size=4, width=2, expansions=1)
    result = sd.compile(
        ContractParity(), contract_examples(0, 24), contract_examples(100, 30),
        optimizer=optimizer, lm=ScriptedLM(contract_target),
        optimizer_lm=ScriptedLM(lambda m: "{}"), budget=sd.Budget(max_calls=80), threads=1,
        run_dir=tmp_path,
    )  # fmt: skip
    assert [d.accepted for d in result.gate_log] == [True] and result.usage.calls <= 80
    lines = (tmp_path / "events.jsonl").read_text(encoding="utf-8").splitlines()
    (stop,) = [e for e in map(json.loads, lines) if e["event"] == "stop"]
    # accepted at an early look, perfect there; the calls left do not pay for the rest
    assert stop["reason"] == "budget" and stop["detail"].startswith("perfect on"), stop
