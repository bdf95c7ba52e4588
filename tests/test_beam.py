"""Beam search: scoring once per candidate, the trust-region learning rate, Pareto parents,
JSON state for resume (ScriptedLM only; the shared contract is in test_contract.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import skillopt_dsl as sd
from skillopt_dsl.driver import _look_order
from skillopt_dsl.optimizers import Beam, ReflectiveProposer
from skillopt_dsl.optimizers.beam import BeamMember, BeamState, pareto_front
from skillopt_dsl.testing import ScriptedLM
from skillopt_dsl.testing.contract import (
    BAD_EDIT,
    FIX_EDIT,
    NEUTRAL_EDIT,
    TRAIN,
    VAL,
    ContractParity,
    contract_reflector,
    contract_target,
)


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
    scored = _look_order(VAL, 0)[: accepted[0].examples_scored]
    seed_there = sum(int(e.inputs["number"]) % 2 for e in scored) / len(scored)
    assert len(accepted) == 1 and accepted[0].incumbent_score == pytest.approx(seed_there)
    state = json.loads((tmp_path / "checkpoint.json").read_text())["optimizer"]
    restored = BeamState.from_dict(state)
    assert restored.round >= 1 and restored.members
    assert any("hedge" in r["edits"][0]["text"] for r in restored.rejected), (
        "children worse than their parent are remembered"
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
    selection split, the gate never able to judge the fix it found; 0 decisions)."""
    result = run(beam(width=2, expansions=2, depth=3), budget=sd.Budget(max_calls=150))
    assert result.stop_reason == "budget"
    assert [d.accepted for d in result.gate_log] == [True]
    assert result.val_score == 1.0 and "divisible by 2" in result.best_skill.text
    assert result.usage.calls <= 150
