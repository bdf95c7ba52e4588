"""Small call budgets (issue 36, item 4): the batch a budget plans, the last affordable decision
waiting for the steps before it, the lean step that still gets a decision where no screened step
fits, and the share of a DSPy program's budget each predictor gets.

Each test names the regression it kills.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import skillopt_dsl as sd
from skillopt_dsl.benchmarks import load_benchmark
from skillopt_dsl.benchmarks.table_lookup import TableLookup
from skillopt_dsl.errors import UserInputError
from skillopt_dsl.lm import Budget
from skillopt_dsl.optimizers import GradientText, ReflectiveProposer
from skillopt_dsl.optimizers.proposers import (
    AnswerShapeProposer,
    DemonstrationsProposer,
    FormatRuleProposer,
)
from skillopt_dsl.testing import ScriptedLM
from skillopt_dsl.testing.contract import ContractParity, contract_examples, contract_target
from skillopt_dsl.testing.search_contract import BARE, OfferedEdits, table_agent
from tests.helpers import Parity
from tests.test_early_acceptance import DOOR, TRAIN, VAL, reflector, rule_target, two_rules


def train_batches(run_dir: Path) -> list[int]:
    """The sizes of the training evaluations a run made, in order."""
    lines = (run_dir / "events.jsonl").read_text(encoding="utf-8").splitlines()
    records = [json.loads(line) for line in lines]
    return [r["n"] for r in records if r.get("event") == "evaluation" and r["split"] == "train"]


def parity_run(run_dir: Path, max_calls: int, **settings: object) -> sd.CompileResult:
    optimizer = GradientText(batch_size=8, proposers=[OfferedEdits(texts=["A note."])], **settings)  # type: ignore[arg-type]
    return sd.compile(
        ContractParity(), contract_examples(0, 24), contract_examples(100, 30),
        optimizer=optimizer, lm=ScriptedLM(contract_target),
        optimizer_lm=ScriptedLM(lambda m: "{}"), budget=Budget(max_calls=max_calls),
        run_dir=run_dir, threads=1,
    )  # fmt: skip


def test_a_small_budget_plans_more_smaller_steps(tmp_path: Path) -> None:
    """Kills: the planned batch ignored (`GradientTextState.batch_cap` not applied in
    `_batch_within`): 100 calls leave about 70 for training after a decision, fewer than
    three steps of 8 (at about 3.25 calls an example), so the run's steps take 4."""
    parity_run(tmp_path / "planned", 100)
    parity_run(tmp_path / "whole", 100, budget_steps=None)
    assert set(train_batches(tmp_path / "planned")[:3]) == {4}
    assert set(train_batches(tmp_path / "whole")[:3]) == {8}


def test_a_large_budget_keeps_the_batch_size(tmp_path: Path) -> None:
    """Kills: a batch planned smaller whatever the budget (the run would take more, noisier
    steps where the calls pay for the batch asked for)."""
    parity_run(tmp_path, 400)
    assert set(train_batches(tmp_path)[:3]) == {8}


def test_budget_steps_below_one_is_refused() -> None:
    """Kills: a `budget_steps=0` taken (a division by zero at the first budgeted step)."""
    with pytest.raises(UserInputError, match="budget_steps"):
        GradientText(budget_steps=0)


class SubmitAtOnce(GradientText):
    """GradientText whose ready candidate never waits for the budget's tail."""

    def _last_decision_waits(self, view: object, state: object) -> bool:
        return False


def test_the_last_affordable_decision_waits_for_the_steps_that_fit_before_it() -> None:
    """Kills: a ready candidate sent to the gate at once when its decision is the last the
    budget pays for and a step still fits before it (`_last_decision_waits` dropped): the
    calls after it would go to steps whose proposals no decision can judge. Here 'Rule A.'
    is ready after the first step; the steps before the budget's tail add 'Rule B.', and one
    decision judges both (submitted at once, each rule takes a decision of its own)."""
    a, b = two_rules()

    def run(optimizer: GradientText) -> sd.CompileResult:
        return sd.compile(
            Parity(), TRAIN, VAL, optimizer=optimizer, lm=ScriptedLM(rule_target(a, b)),
            optimizer_lm=reflector("Rule A.", "Rule B."), threads=1, seed=5,
            budget=sd.Budget(max_calls=140),
        )  # fmt: skip

    settings = dict(epochs=1, batch_size=8, slow_update=False, **DOOR)
    waited = run(GradientText(proposers=[ReflectiveProposer()], **settings))  # type: ignore[arg-type]
    at_once = run(SubmitAtOnce(proposers=[ReflectiveProposer()], **settings))  # type: ignore[arg-type]
    assert len(waited.gate_log) == 1 and waited.gate_log[0].accepted
    assert "Rule A." in waited.best_skill.text and "Rule B." in waited.best_skill.text
    assert waited.usage.calls <= 140
    assert len(at_once.gate_log) == 2  # the control: without the wait, two decisions


def agent_run(max_calls: int, proposer: OfferedEdits) -> sd.CompileResult:
    table = load_benchmark("table_lookup", seed=0, sizes=(10, 12, 10))
    return sd.compile(
        TableLookup(), table.train, table.val,
        optimizer=GradientText(proposers=[proposer], batch_size=4),
        lm=ScriptedLM(table_agent), optimizer_lm=ScriptedLM(lambda m: "{}"),
        budget=Budget(max_calls=max_calls), threads=1,
    )  # fmt: skip


def test_a_budget_that_pays_one_decision_but_no_screened_step_still_decides() -> None:
    """Kills: no lean step (`_lean_batch` returning 0): at 80 calls the seed's validation
    (12 episodes of 3 calls) and a candidate's leave too little for a screened step, so the
    run stopped on its budget with no decision; a lean step (a small batch, its proposers,
    no screen) sends the fix straight to the gate, within the budget."""
    result = agent_run(80, OfferedEdits(texts=[BARE]))
    assert result.gate_log and result.gate_log[0].accepted, result.gate_log
    assert result.usage.calls <= 80
    assert BARE in result.best_skill.text
    assert [s.kind for s in result.history if s.accepted] == ["lean"]


class CostlyOffers(OfferedEdits):
    """OfferedEdits that declares up to 20 model calls a run (it makes none)."""

    def max_calls(self, batch_size: int) -> int:
        return 20


def test_a_lean_step_leaves_the_calls_its_proposers_may_make() -> None:
    """Kills: a lean step priced without `Proposer.max_calls`: proposers that may make 20
    calls cannot be paid at 80 calls together with a rollout and the gate's first look, so
    no lean step is taken (the gate's look would be cut short by the proposers' calls)."""
    result = agent_run(80, CostlyOffers(texts=[BARE]))
    assert not result.gate_log
    assert result.stop_reason == "budget"


@pytest.mark.parametrize(
    ("proposer", "batch", "calls"),
    [
        (ReflectiveProposer(), 1, 2),  # one group of failures, a reply and its retry
        (ReflectiveProposer(), 4, 4),  # a group of failures and one of successes
        (ReflectiveProposer(), 12, 6),  # two groups of failures at most, and the successes
        (ReflectiveProposer(read_successes=False), 4, 2),
        (FormatRuleProposer(), 8, 0),
        (AnswerShapeProposer(), 8, 0),
        (DemonstrationsProposer(), 8, 0),
    ],
)
def test_a_proposer_declares_the_calls_it_may_make(proposer, batch, calls) -> None:  # type: ignore[no-untyped-def]
    """Kills: a reflective proposer priced at one call (its retry and its groups unpaid) and
    a proposer that calls no model priced at one (a lean step refused where it fits)."""
    assert proposer.max_calls(batch) == calls
