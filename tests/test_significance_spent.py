"""Decisions that cannot pay: a spent significance budget (the door refuses candidates unscored,
the searches stop).

Early futility stops are charged their whole level (docs/concepts.md, "Evidence"), so a run can
spend all of its alpha; every later decision is then certain to reject. Each test names the
regression it kills. The fakes are the contract suite's parity task (the fix `GOOD` makes every
answer right) and a scripted proposer of fixed edit groups.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import skillopt_dsl as sd
from skillopt_dsl.driver import RunView, Verdict
from skillopt_dsl.evidence import SignificanceBudget, any_result_passes
from skillopt_dsl.optimizers import Beam, GradientText, Optimizer
from skillopt_dsl.signed_rank import paired_test
from skillopt_dsl.skill import Skill
from skillopt_dsl.testing.contract import ContractParity, contract_examples, contract_target
from skillopt_dsl.testing.scripted import ScriptedLM
from tests.test_search import GOOD, TRAIN, VAL, FixedProposer, compile_with, events


def spent() -> SignificanceBudget:
    """A budget an earlier run spent to the end (its one decision stopped for futility)."""
    budget = SignificanceBudget(alpha=0.05)
    budget.plan(1)
    budget.charge(level=budget.level(), charged=None)
    return budget


def run(tmp_path: Path, optimizer: Optimizer, significance: SignificanceBudget) -> sd.CompileResult:
    return compile_with(
        tmp_path, optimizer, significance=significance, budget=sd.Budget(max_calls=400)
    )


class SubmitTheFix(Optimizer):
    """A test optimizer: submits the fix once and records the verdict and its calls."""

    name = "submit-the-fix"
    lr, lr_floor_tokens = 1.0, 50

    def __init__(self) -> None:
        self.verdict: Verdict | None = None
        self.calls = -1

    def optimize(self, view: RunView) -> str | None:
        before = view.usage().calls
        fixed = Skill(f"{view.incumbent.text}\n{GOOD}\n")
        self.verdict = view.submit(fixed, lr=1.0, step=0, epoch=0, kind="test")
        view.commit({})
        self.calls = view.usage().calls - before
        return None

    def config(self) -> dict[str, Any]:
        return {}


def test_the_door_refuses_unscored_when_no_result_could_pass(tmp_path: Path) -> None:
    """Kills: a door that scores a candidate the gate is certain to reject (a level of zero:
    the run pays a whole validation pass for nothing). The same fix with significance left is
    scored and accepted, so the refusal is the spent budget's doing."""
    refused = SubmitTheFix()
    run(tmp_path / "spent", refused, spent())
    assert refused.verdict is not None and refused.verdict.status == "refused"
    assert "significance is spent" in refused.verdict.reason
    assert refused.calls == 0
    assert not events(tmp_path / "spent", "gate")
    accepted = SubmitTheFix()
    run(tmp_path / "fresh", accepted, SignificanceBudget(alpha=0.05))
    assert accepted.verdict is not None and accepted.verdict.accepted and accepted.calls > 0


def test_gradient_text_stops_when_the_significance_is_spent(tmp_path: Path) -> None:
    """Kills: a search that goes on taking steps (training rollouts, proposals, screens) whose
    candidates no decision could accept: it stops at once with `significance` and keeps the
    calls."""
    optimizer = GradientText(proposers=[FixedProposer(texts=[GOOD])], epochs=1)
    result = run(tmp_path, optimizer, spent())
    assert result.stop_reason == "significance"
    assert not [e for e in events(tmp_path, "evaluation") if e["split"] != "val"]
    assert not events(tmp_path, "screen") and not events(tmp_path, "refused")
    assert result.best_skill == result.seed_skill
    stop = events(tmp_path, "stop")[-1]
    assert stop["reason"] == "significance" and stop["calls_left"] >= 400 - len(VAL)


def test_beam_stops_when_the_significance_is_spent(tmp_path: Path) -> None:
    """Kills: Beam expanding rounds whose best child no decision could accept."""
    result = run(tmp_path, Beam(proposers=[FixedProposer(texts=[GOOD])]), spent())
    assert result.stop_reason == "significance"
    assert not [e for e in events(tmp_path, "evaluation") if e["split"] != "val"]
    assert events(tmp_path, "stop")[-1]["reason"] == "significance"


def test_a_set_too_small_for_any_acceptance_is_not_a_spent_budget(tmp_path: Path) -> None:
    """Kills: reading a validation set too small for the gate's whole alpha (4 examples: a
    perfect fix has p = 1/16) as spent significance. That set is the pre-flight's warning; a
    sweep's trials decide on such small selection splits, and stopping them at once would end
    every trial before its first proposal (tests/test_postgres_sweep.py)."""
    optimizer = GradientText(proposers=[FixedProposer(texts=[GOOD])], epochs=1)
    result = sd.compile(
        ContractParity(),
        TRAIN,
        VAL[:4],
        optimizer=optimizer,
        lm=ScriptedLM(contract_target),
        optimizer_lm=ScriptedLM(lambda m: "{}"),
        run_dir=tmp_path,
        threads=1,
    )
    assert result.stop_reason != "significance"
    assert events(tmp_path, "screen"), "the search took no step"


def test_a_spent_budget_is_spent_on_a_large_validation_set(tmp_path: Path) -> None:
    """Kills: a level of zero read as able to pass a clean fix of 40 or more examples (an
    absolute tolerance on the p-value: 2^-40 <= 0 + 1e-12). On a validation set of 40 or more,
    `can_accept` then stayed True once the significance was spent: the door scored candidates
    certain to be rejected and the searches went on spending calls instead of stopping. Also
    kills significance left over by float sums of a level's shares counting as unspent."""
    budget = SignificanceBudget(alpha=0.05)
    budget.plan(1)
    level = budget.level()
    whole, early = budget.split(level, 0.25)  # a futility stop charges both
    budget.charge(level=level, charged=whole + early)
    assert budget.remaining == 0.0
    assert not any_result_passes(60, budget.remaining)
    leftover = SignificanceBudget(alpha=0.05, spent=0.05 - 1e-14)  # float sums' residue
    assert leftover.remaining == 0.0
    optimizer = GradientText(proposers=[FixedProposer(texts=[GOOD])], epochs=1)
    result = compile_with(
        tmp_path,
        optimizer,
        val=contract_examples(100, 60),
        significance=spent(),
        budget=sd.Budget(max_calls=400),
    )
    assert result.stop_reason == "significance"
    assert not events(tmp_path, "screen") and not events(tmp_path, "gate")


def test_the_signed_rank_test_needs_nothing_it_cannot_reach_at_a_level_of_zero() -> None:
    """Kills: the signed-rank test's critical value under an absolute tolerance (its tail for
    40 or more ranks all won, 2^-40 or less, read as within a level of zero): a spent
    decision's record would name a statistic that passes."""
    differences = [0.5 + i / 100 for i in range(45)]  # distinct magnitudes: signed-rank
    assert paired_test(differences, level=0.0).critical is None
    assert paired_test(differences, level=0.05).critical is not None
