"""The budget's tail: decisions the calls cannot finish, and clear fixes that skip confirmation.

Each test names the regression it kills. The fakes are the contract suite's parity task (the
fix `GOOD` makes every answer right), a scripted proposer of fixed edit groups, and a scorer
over fixed per-example scores.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import pytest

import skillopt_dsl as sd
from skillopt_dsl.driver.looks import SequentialJudge, look_cost
from skillopt_dsl.errors import BudgetExceeded
from skillopt_dsl.evidence import SignificanceBudget
from skillopt_dsl.optimizers import GradientText
from skillopt_dsl.optimizers.gradient_text_state import GradientTextState
from skillopt_dsl.optimizers.search import ScreenedSteps
from skillopt_dsl.optimizers.search import step as search_step
from skillopt_dsl.optimizers.search.screening import ScreenResult
from skillopt_dsl.skill import Skill
from skillopt_dsl.testing.contract import contract_target
from skillopt_dsl.types import Example
from tests.test_early_acceptance import synthetic
from tests.test_search import GOOD, MILD, FixedProposer, compile_with, events, mild_target

EXAMPLES = tuple(Example(id=f"e{i}", inputs={}, labels={}) for i in range(40))
SEED = {f"e{i}": float(i % 2) for i in range(40)}
AHEAD = {**SEED, "e0": 1.0, "e2": 1.0}  # ahead at the first look, never significant


def judge_with() -> tuple[SequentialJudge, SignificanceBudget]:
    budget = SignificanceBudget(alpha=0.05)
    budget.plan(1)
    return SequentialJudge(sd.Gate(), budget, EXAMPLES, EXAMPLES), budget


def test_a_decision_the_calls_cannot_finish_stops_at_the_last_look_they_paid() -> None:
    """Kills: a decision that starts the next look without the calls for it (the ledger then
    ends the run mid-look and the decision is lost), and a cost that counts the candidate's
    earlier looks again (they are cached: only the examples the next look adds cost calls).
    The calls end mid-decision although they paid for the whole set when it began (a rollout
    costs more than measured): the first two asks (the whole set, the deciding look) are paid,
    nothing after them."""
    asked: list[int] = []

    def can_pay(examples: Sequence[Example]) -> bool:
        asked.append(len(examples))
        return len(asked) <= 2

    score, scored = synthetic({"seed": SEED, "cand": AHEAD})
    judge, budget = judge_with()
    seed_report = score(Skill("seed"), EXAMPLES)
    sizes = sd.Gate().look_sizes(len(EXAMPLES))
    _, decision = judge.judge(
        Skill("cand"), score=score, incumbent_on=lambda _: seed_report, index=0, can_pay=can_pay
    )
    assert not decision.accepted and decision.stopped_at_look == 1, decision.reason
    assert "calls left do not pay for the next look" in decision.reason
    assert decision.examples_scored == sizes[0]
    assert asked == [len(EXAMPLES), sizes[0], sizes[1] - sizes[0]]
    assert scored[1:] == [("cand", sizes[0])], "the candidate was scored past the paid look"
    spendable = (decision.alpha or 0.0) + (decision.early_alpha or 0.0)
    assert budget.spent == pytest.approx(spendable)  # charged like a futility stop


def paying(calls: int, scored: list[tuple[str, int]]):
    """A FAKE call ledger: `calls` left for the rollouts `scored` records from now on."""
    start = len(scored)

    def can_pay(examples: Sequence[Example]) -> bool:
        return sum(n for _, n in scored[start:]) + len(examples) <= calls

    return can_pay


# Wins on 5 of the first 10 examples, nothing else changed: p = 1/32 on those 10 (a test at
# the decision's whole level, 0.05, passes; one at a look's early share, 0.0125 over 3 looks,
# could not), a tie on the rest.
FIVE_WINS = {**SEED, **{f"e{i}": 1.0 for i in range(0, 10, 2)}}


def test_a_decision_the_calls_cannot_finish_is_one_test_on_the_examples_they_pay_for() -> None:
    """Kills: a decision started in looks the calls cannot finish (it was stopped at the last
    paid look, the found gain thrown away: issue 55's +0.4 agent fix, family member m13's
    +0.5 bundles at 100 calls), and a truncated test at a look's early share of the level."""
    score, scored = synthetic({"seed": SEED, "cand": FIVE_WINS})
    judge, budget = judge_with()
    seed_report = score(Skill("seed"), EXAMPLES)
    _, decision = judge.judge(
        Skill("cand"), score=score, incumbent_on=lambda _: seed_report, index=0,
        can_pay=paying(10, scored),
    )  # fmt: skip
    assert decision.accepted, decision.reason
    assert decision.examples_scored == 10 and "10 of 40 examples" in decision.reason
    assert decision.alpha == pytest.approx(0.05) and decision.p_value == pytest.approx(1 / 32)
    assert scored[1:] == [("cand", 10)]
    assert budget.spent == 0.0


def test_a_truncated_decision_still_stops_a_candidate_that_is_not_ahead() -> None:
    """Kills: a truncated decision that scores every paid example of a candidate behind at its
    first look (the calls a futility stop saves go to the search; stopping only rejects)."""
    behind = {**SEED, "e1": 0.0, "e3": 0.0}
    score, scored = synthetic({"seed": SEED, "cand": behind})
    judge, budget = judge_with()
    seed_report = score(Skill("seed"), EXAMPLES)
    first = sd.Gate().look_sizes(len(EXAMPLES))[0]
    _, decision = judge.judge(
        Skill("cand"), score=score, incumbent_on=lambda _: seed_report, index=0,
        can_pay=paying(30, scored),
    )  # fmt: skip
    assert not decision.accepted and decision.stopped_at_look == 1, decision.reason
    assert scored[1:] == [("cand", first)]
    assert budget.spent == pytest.approx(0.05)


def test_a_decision_without_calls_for_its_first_look_is_not_started() -> None:
    """Kills: a door that sends a candidate's first look with no calls to finish it (the calls
    it spends before the ledger stops it buy no decision)."""
    score, scored = synthetic({"seed": SEED, "cand": AHEAD})
    judge, budget = judge_with()
    with pytest.raises(BudgetExceeded, match="first look"):
        judge.judge(
            Skill("cand"),
            score=score,
            incumbent_on=lambda ex: score(Skill("seed"), ex),
            index=0,
            can_pay=lambda _: False,
        )
    assert scored == [] and budget.decisions == 0


def test_a_look_costs_the_candidate_and_the_incumbent_where_it_was_not_scored() -> None:
    """Kills: a reserve that forgets the incumbent's unscored examples (after an early
    acceptance the new incumbent has only the accepting look's) or counts scored ones."""
    assert look_cost(EXAMPLES[:10], {"e0", "e1", "e99"}) == 10 + 8
    assert look_cost(EXAMPLES[:10], {e.id for e in EXAMPLES}) == 10


def test_a_fix_reaches_the_gate_when_the_budget_pays_only_its_first_looks(tmp_path: Path) -> None:
    """Kills: a search that keeps a whole decision's calls in reserve to the end. With 56
    calls (30 for the seed's validation score) the old loop never asked the gate and returned
    the seed; the fix is now accepted at the gate's first look, within the budget."""
    optimizer = GradientText(proposers=[FixedProposer(texts=[GOOD])], epochs=1)
    result = compile_with(tmp_path, optimizer, budget=sd.Budget(max_calls=56))
    assert result.usage.calls <= 56
    assert [d.accepted_at_look for d in result.gate_log] == [1], result.gate_log
    assert GOOD in result.best_skill.text


def test_a_run_whose_calls_end_mid_decision_decides_on_what_they_pay_for(tmp_path: Path) -> None:
    """Kills: a door that does not check the calls left before a look (the ledger then stops
    the run inside the second look, and the decision is lost), and a decision that starts
    looks it cannot finish: the real, small fix MILD (ahead at the first look, not yet
    significant there) was stopped at look 1 for lack of calls and the seed kept; it is now
    tested on the 26 of 30 examples the calls pay for, at the decision's whole-set level."""
    optimizer = GradientText(proposers=[FixedProposer(texts=[MILD])], epochs=1)
    result = compile_with(tmp_path, optimizer, target=mild_target, budget=sd.Budget(max_calls=56))
    assert result.usage.calls <= 56
    [decision] = result.gate_log
    assert decision.accepted and decision.stopped_at_look is None, decision.reason
    assert decision.examples_scored == 26 and "26 of 30 examples" in decision.reason
    assert decision.alpha == pytest.approx(0.05 * 0.75)  # the whole-set level, not a look's
    assert MILD in result.best_skill.text


def test_a_clear_fix_joins_without_confirmation(tmp_path: Path) -> None:
    """Kills: confirming every proposal on a further mini-batch, even one that fixed half its
    own (the clear fix then reaches the gate a step later, its calls spent on confirmation)."""
    for join_at_net, first_step in ((4.0, 0), (None, 1)):
        run_dir = tmp_path / str(join_at_net)
        optimizer = GradientText(
            proposers=[FixedProposer(texts=[GOOD])], batch_size=12, join_at_net=join_at_net
        )
        compile_with(run_dir, optimizer)
        assert events(run_dir, "screen")[0]["net"] >= 4  # it fixed at least 4 of its batch
        assert events(run_dir, "compose")[0]["step"] == first_step, join_at_net


def test_the_seed_is_scored_on_the_first_look_so_a_small_budget_decides(
    tmp_path: Path,
) -> None:
    """Kills: scoring the seed on the whole validation set before the search. With 40 calls
    that took 30, and the 10 left paid for no decision; the seed is now scored on the gate's
    first look (15 of 30) and the fix is accepted there, compared with the seed on the same
    15 examples."""
    optimizer = GradientText(proposers=[FixedProposer(texts=[GOOD])], epochs=1)
    result = compile_with(tmp_path, optimizer, budget=sd.Budget(max_calls=40))
    first_val = next(e for e in events(tmp_path, "evaluation") if e["split"] == "val")
    assert first_val["n"] == 15 and events(tmp_path, "seed")[0]["n"] == 15
    assert result.usage.calls <= 40
    assert [d.accepted_at_look for d in result.gate_log] == [1], result.gate_log
    assert (result.val_examples, result.val_size) == (15, 30)
    assert result.val_score == 1.0 and result.seed_val_score < 1.0


# -- issue 38 item 2: the calls a screen, a step and a look may spend ---------------------------


def test_the_reserve_for_a_gate_decision_counts_the_screens_own_calls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kills: a reserve check that asks only whether the calls left still hold the reserve
    before a screen, not after it (with 57 calls and six passing proposals the screens ate
    the first look's calls: no gate decision, the seed returned)."""
    real, after = search_step.screen, []

    def screen(view: Any, *args: Any, **kwargs: Any) -> ScreenResult:
        result = real(view, *args, **kwargs)
        after.append(view.calls_left() - view.decision_calls(first_look=True))
        return result

    monkeypatch.setattr(search_step, "screen", screen)
    goods = [f"{GOOD} ({k})" for k in range(6)]
    optimizer = GradientText(proposers=[FixedProposer(texts=goods)], epochs=1, batch_size=8)
    result = compile_with(tmp_path, optimizer, budget=sd.Budget(max_calls=57))
    assert after and min(after) >= 0, after  # every screen left the gate's first look
    assert [d.accepted for d in result.gate_log] == [True] and result.usage.calls <= 57


@pytest.mark.parametrize("step_rate", [0.0, 2.5, 3.0, 7.0])
@pytest.mark.parametrize("calls_per_rollout", [1.0, 3.0])
def test_a_tight_budgets_batch_never_costs_more_than_the_calls_it_may_use(
    step_rate: float, calls_per_rollout: float
) -> None:
    """Kills: a batch rounded up past the calls the step may use, or sized at one call per
    example, or at a first guess below the costliest rate a step has shown (each leaves the
    gate's reserve short by the step's overrun). It is the largest such batch, at least 2."""
    optimizer = GradientText(proposers=[], batch_size=8)
    state = GradientTextState(max_step_rate=step_rate)
    guess = optimizer._step_cost_guess(calls_per_rollout) / optimizer.batch_size
    per_example = step_rate or guess
    assert guess >= 3 * calls_per_rollout
    for calls in range(80):
        size = optimizer._batch_within(state, calls, calls_per_rollout)
        assert size == 0 or 2 <= size <= optimizer.batch_size
        assert size * per_example <= calls, (calls, size)
        bigger = min(max(size + 1, 2), optimizer.batch_size + 1)
        assert bigger > optimizer.batch_size or bigger * per_example > calls, (calls, size)


@pytest.mark.parametrize(("fix", "max_calls", "examples_scored"), [(GOOD, 42, 15), (MILD, 70, 30)])
def test_a_look_the_calls_left_pay_exactly_is_paid(
    tmp_path: Path, fix: str, max_calls: int, examples_scored: int
) -> None:
    """Kills: a door (or a search) that asks for a call to spare before a look: here the calls
    left pay the first look's 15 examples (the fix, accepted on them) or the whole set (the
    mild fix) exactly, and the decision is made with the last of them (`budget_steps=None`: the
    batch asked for, whose step leaves the calls exactly)."""
    texts = [MILD] if fix == MILD else [f"{GOOD} ({k})" for k in range(3)]
    optimizer = GradientText(proposers=[FixedProposer(texts=texts)], epochs=1, budget_steps=None)
    target = mild_target if fix == MILD else contract_target
    result = compile_with(tmp_path, optimizer, target=target, budget=sd.Budget(max_calls=max_calls))
    assert [(d.accepted, d.examples_scored) for d in result.gate_log] == [
        (True, examples_scored)
    ], result.gate_log
    assert result.usage.calls == max_calls


class CallsView:
    """The part of a run view the search's call checks read: `left` calls left, a first look
    that costs `first_look` calls."""

    def __init__(self, left: int, first_look: int) -> None:
        self.left, self.first_look = left, first_look

    def calls_left(self) -> int | None:
        return self.left

    def decision_calls(self, *, first_look: bool = False) -> int:
        return self.first_look if first_look else 2 * self.first_look

    def can_accept(self) -> bool:
        return True


def test_the_search_takes_a_first_look_the_calls_left_pay_exactly_as_paid() -> None:
    """Kills: a search that wants a call to spare before it sends its working candidate (at
    the budget's tail, and after the search, a decision the calls pay exactly is not made),
    and a screen that may not spend the calls down to the reserve exactly."""
    paid = ScreenedSteps.first_look_paid
    assert paid(cast(Any, CallsView(15, 15))) and not paid(cast(Any, CallsView(14, 15)))
    keeps = search_step.keeps_reserve
    assert keeps(cast(Any, CallsView(23, 15)), 8, 15)
    assert not keeps(cast(Any, CallsView(22, 15)), 8, 15)
