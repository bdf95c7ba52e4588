"""Early acceptance at the gate's interim looks, the lazily scored incumbent, and honest scores.

Each test names the regression it kills.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest

import skillopt_dsl as sd
from skillopt_dsl.driver import RunView, look_order
from skillopt_dsl.driver.looks import SequentialJudge
from skillopt_dsl.evaluate import EvaluationReport, Rollout
from skillopt_dsl.evidence import SignificanceBudget
from skillopt_dsl.optimizers import GradientText, Optimizer, ReflectiveProposer
from skillopt_dsl.skill import Skill
from skillopt_dsl.testing import ScriptedLM
from skillopt_dsl.testing.contract import contract_examples, contract_target
from skillopt_dsl.types import Example, Prediction
from tests.helpers import Parity

TRAIN = contract_examples(0, 16)
VAL = contract_examples(100, 40)
ORDER = look_order(VAL, 0)  # the looks' order: 10, 20, 30, then all 40
FIX = "A number divisible by 2 is even."
DOOR: dict[str, Any] = dict(compose=1, confirm_steps=0, min_net=1.0, submit_at_net=0.0)


def even(example: Example) -> bool:
    return int(example.inputs["number"]) % 2 == 0


def one_step() -> GradientText:
    return GradientText(
        epochs=1, batch_size=8, slow_update=False, proposers=[ReflectiveProposer()], **DOOR
    )


def reflector(*lines: str) -> ScriptedLM:
    """FAKE optimizer model: proposes `lines[k]` once the document holds lines[:k]."""

    def propose(messages: list[dict[str, str]]) -> str:
        document = messages[1]["content"].split("# Document", 1)[1].split("\n# ", 1)[0]
        text = next((line for line in lines if line not in document), lines[-1])
        return json.dumps(
            {"edits": [{"kind": "add", "after": None, "text": text, "rationale": "r"}]}
        )

    return ScriptedLM(propose)


def compile_fix(budget: sd.Budget | None = None) -> tuple[sd.CompileResult, ScriptedLM]:
    target = ScriptedLM(contract_target)
    result = sd.compile(
        Parity(), TRAIN, VAL, optimizer=one_step(), lm=target,
        optimizer_lm=reflector(FIX), threads=1, budget=budget,
    )  # fmt: skip
    return result, target


def fixed_on_val(target: ScriptedLM) -> list[str]:
    """The validation numbers the fixed skill was asked about, in order."""
    asked = [c[-1]["content"].split()[-1] for c in target.calls if FIX in c[0]["content"]]
    return [n for n in asked if int(n) >= 100]


def test_a_clear_winner_is_accepted_at_an_interim_look() -> None:
    """Kills: no early acceptance (the winner scored on all 40 before it is accepted).

    The fix turns every even number right; the seed answers 'odd'. By look 2 (20 examples) the
    candidate has won on every even one, far past the look's share of the early level. With no
    call limit the run then scores the rest of validation once, so the result compares the
    best skill and the seed on all 40."""
    result, target = compile_fix()
    decision = result.gate_log[0]
    assert decision.accepted and decision.accepted_at_look is not None, decision.reason
    scored = decision.examples_scored
    assert scored < 40 and decision.calls_saved == 40 - scored and decision.charged == 0.0
    # its test ran at its look's share of the early level (3 interim looks: 10, 20, 30)
    assert decision.early_alpha is not None and decision.look_alpha is not None
    assert decision.look_alpha == pytest.approx(decision.early_alpha / 3)
    assert decision.p_value is not None and decision.p_value <= decision.look_alpha
    assert sorted(fixed_on_val(target)) == sorted(e.inputs["number"] for e in VAL)  # once each
    assert result.val_examples == result.val_size == 40
    assert result.val_score == 1.0 and result.seed_val_score == 0.5


def test_a_run_that_cannot_pay_for_the_rest_compares_on_the_same_examples() -> None:
    """Kills: a result that compares the best skill's score on the accepting look's examples
    with the seed's (or the constant answer's) on the whole set, and a completion under a
    token limit (what the rest would cost in tokens is unknown before the calls)."""
    result, target = compile_fix(sd.Budget(max_tokens=10**9))
    decision = result.gate_log[0]
    scored = decision.examples_scored
    assert decision.accepted and scored < 40
    assert len(fixed_on_val(target)) == scored  # never scored on the rest
    prefix = ORDER[:scored]
    assert result.val_examples == scored and result.val_size == 40
    assert result.val_score == 1.0
    assert result.seed_val_score == pytest.approx(sum(not even(e) for e in prefix) / scored)
    assert result.baseline is not None
    chosen = sum(even(e) == (result.baseline.label == "even") for e in prefix)  # on all 40
    assert result.baseline.val_score == pytest.approx(chosen / scored)
    assert result.summary()["val_examples"] == scored


def rule_target(a: set[str], b: set[str]):
    """FAKE target: 'Rule A.' makes the examples in `a` right, 'Rule B.' those in `b`; every
    other answer is the seed's ('odd')."""

    def answer(messages: list[dict[str, str]]) -> str:
        system, number = messages[0]["content"], messages[-1]["content"].split()[-1]
        fixed = ("Rule A." in system and number in a) or ("Rule B." in system and number in b)
        if fixed:
            return "even" if int(number) % 2 == 0 else "odd"
        return "odd"

    return answer


def two_rules() -> tuple[set[str], set[str]]:
    """The numbers 'Rule A.' and 'Rule B.' fix (see the test below), for look-order seed 5."""
    order = look_order(VAL, 5)  # seed 5: 12 evens in the first 20, 5 in the next 10
    evens_early = [e.inputs["number"] for e in order[:20] if even(e)]
    assert len(evens_early) == 12, "the look order must hold 12 evens in its first 20"
    spared = next(e.inputs["number"] for e in order[:10] if even(e))
    train_evens = {e.inputs["number"] for e in TRAIN if even(e)}
    a = (set(evens_early) - {spared}) | {n for n in train_evens if int(n) % 4 == 0}
    b = {spared} | {e.inputs["number"] for e in order[20:] if even(e)} | train_evens
    return a, b


def test_the_incumbent_accepted_early_is_scored_lazily_where_later_looks_need_it() -> None:
    """Kills: a later decision compared with the early-accepted incumbent's partial report (a
    KeyError or a comparison on the wrong examples), and an incumbent scored twice on an example.

    'Rule A.' fixes the even numbers of looks 1-2 but one (it is accepted at look 2); 'Rule B.'
    fixes that one and every even number after look 2: ahead by one at looks 1 and 2, far from
    significant, it goes on to look 3 and the whole set, where the incumbent is scored on the
    examples it was never scored on, once each."""
    a, b = two_rules()
    target = ScriptedLM(rule_target(a, b))
    result = sd.compile(
        Parity(), TRAIN, VAL, optimizer=one_step(), lm=target,
        optimizer_lm=reflector("Rule A.", "Rule B."), threads=1, seed=5,
    )  # fmt: skip
    first, second = result.gate_log[:2]
    assert first.accepted and first.accepted_at_look == 2, first.reason
    assert second.accepted and second.accepted_at_look is None, second.reason
    assert second.examples_scored == 40 and second.incumbent_score == pytest.approx(
        sum(e.inputs["number"] in a or not even(e) for e in VAL) / 40
    )
    rule_a_only = [
        c[-1]["content"].split()[-1]
        for c in target.calls
        if "Rule A." in c[0]["content"] and "Rule B." not in c[0]["content"]
    ]
    on_val = [n for n in rule_a_only if int(n) >= 100]
    assert sorted(on_val) == sorted(e.inputs["number"] for e in VAL)  # each once, all of them
    assert result.val_examples == 40 and result.val_score == 1.0


# -- the judge's arithmetic, on synthetic reports ---------------------------------------------


def synthetic(skill_scores: dict[str, dict[str, float]]):
    """A FAKE scorer over fixed per-example scores, by skill text; it logs what it scored."""
    scored: list[tuple[str, int]] = []

    def score(skill: Skill, examples: Any) -> EvaluationReport:
        scored.append((skill.text, len(examples)))
        table = skill_scores[skill.text]
        records = tuple(Rollout(e.id, "x", Prediction({}), table[e.id]) for e in examples)
        return EvaluationReport(records, skill.hash, "fake")

    return score, scored


def test_a_rejected_decision_is_charged_the_attained_size_of_every_look() -> None:
    """Kills: early looks that cost nothing when the decision goes on (the run's false-accept
    bound then fails), and early looks paid from the whole-set level when the budget has room.

    A candidate ahead at every look and never significant: its charge is the whole-set test's
    attained size plus each interim test's, and the budget is charged exactly that."""
    examples = tuple(Example(id=f"e{i}", inputs={}, labels={}) for i in range(40))
    seed_scores = {f"e{i}": float(i % 2) for i in range(40)}
    # ahead at every look (4, 6, 6-5, 8-5 wins-losses), never significant
    cand = dict(seed_scores)
    for i in (0, 2, 4, 6, 10, 12, 30, 32):
        cand[f"e{i}"] = 1.0
    for i in range(21, 30, 2):
        cand[f"e{i}"] = 0.0
    score, _ = synthetic({"seed": seed_scores, "cand": cand})
    budget = SignificanceBudget(alpha=0.05, first_share=2 / 3)
    budget.plan(4)
    judge = SequentialJudge(sd.Gate(), budget, examples, examples)
    seed_report = score(Skill("seed"), examples)
    report, decision = judge.judge(
        Skill("cand"), score=score, incumbent_on=lambda ex: seed_report, index=0
    )
    assert not decision.accepted and decision.stopped_at_look is None, decision.reason
    assert decision.alpha == pytest.approx(0.05 * 2 / 3)  # room: the whole-set level is kept
    assert decision.early_alpha == pytest.approx(0.05 * 2 / 3 * 0.25)
    final_only = sd.Gate().decide(report, seed_report, alpha=decision.alpha).charged
    assert final_only is not None and decision.charged is not None
    assert decision.charged > final_only  # the looks' tests were charged too
    assert budget.spent == pytest.approx(decision.charged)


class SubmitThenSpend(Optimizer):
    """A test optimizer: submits the fix, then spends training calls until `keep` are left."""

    name = "submit-then-spend"
    lr, lr_floor_tokens = 1.0, 50

    def __init__(self, keep: int) -> None:
        self.keep = keep

    def optimize(self, view: RunView) -> str | None:
        fixed = Skill(f"{view.incumbent.text}\n{FIX}\n")
        view.submit(fixed, lr=1.0, step=0, epoch=0, kind="test")
        view.commit({})
        for example in itertools.islice(itertools.cycle(view.trainset), 1000):  # never hangs
            left = view.calls_left()
            if left is None or left <= self.keep:
                break
            view.evaluate(Skill(f"{view.incumbent.text}\n# {left}\n"), [example])
        return None

    def config(self) -> dict[str, Any]:
        return {"keep": self.keep}


@pytest.mark.parametrize("keep", [39, 40])
def test_the_rest_of_validation_is_scored_only_within_the_call_limit(keep: int) -> None:
    """Kills: a completion that ignores the call limit (the run would end in BudgetExceeded,
    or past its budget): the best skill, accepted at the look of 20, and the seed, scored there
    too, each miss 20 of the 40; with 39 calls left nothing more is scored and both are
    compared on the 20; with 40 both are scored on all 40, and the run spends its limit."""
    result = sd.compile(
        Parity(), TRAIN, VAL, optimizer=SubmitThenSpend(keep), lm=ScriptedLM(contract_target),
        optimizer_lm=reflector(FIX), threads=1, budget=sd.Budget(max_calls=200),
    )  # fmt: skip
    decision = result.gate_log[0]
    assert decision.accepted and decision.examples_scored == 20, decision.reason
    assert result.usage.calls == (200 - keep if keep < 40 else 200)
    assert result.val_examples == (20 if keep < 40 else 40)


class SubmitAtOnce(GradientText):
    """GradientText that never holds a ready candidate back for the budget's tail (the last
    affordable decision waits there by default, `_last_decision_waits`): the test below needs
    two decisions, one early and one late, whatever the budget planning does."""

    def _last_decision_waits(self, view: RunView, state: Any) -> bool:
        return False


def test_a_best_skill_scored_past_the_seed_is_compared_where_both_were_scored() -> None:
    """Kills: a result (and best_skill.md's front matter) comparing the best skill's score on
    all 40 with the seed's on the 20 it was scored on. 'Rule A.' is accepted at look 2 (the
    seed scored on 20), 'Rule B.' on all 40 against it; the 4 calls left cannot pay for the
    seed's other 20, so both are compared on the 20 the seed was scored on."""
    a, b = two_rules()
    optimizer = SubmitAtOnce(
        epochs=1, batch_size=8, slow_update=False, proposers=[ReflectiveProposer()], **DOOR
    )
    result = sd.compile(
        Parity(), TRAIN, VAL, optimizer=optimizer, lm=ScriptedLM(rule_target(a, b)),
        optimizer_lm=reflector("Rule A.", "Rule B."), threads=1, seed=5,
        budget=sd.Budget(max_calls=140),
    )  # fmt: skip
    assert [d.examples_scored for d in result.gate_log] == [20, 40]
    assert result.gate_log[1].accepted and result.usage.calls > 140 - 20
    assert (result.val_examples, result.val_size) == (20, 40)
    assert result.val_score == 1.0 and result.seed_val_score == pytest.approx(0.4)
    assert (result.metadata["val_examples"], result.metadata["seed_val_score"]) == (20, 0.4)


def test_a_gate_with_guards_never_accepts_at_an_interim_look() -> None:
    """Kills: early acceptance for a gate with guards (`or gate.guards` dropped from
    `SequentialJudge._levels`): the guards would be checked on the accepting look's prefix
    only, and a candidate whose guard regresses on the rest of the set would be accepted.

    The candidate wins every example (significant at the first look's share of the early
    level); its guard holds on the first look's 10 examples and regresses on the other 30, so
    the gate must go on to the whole set and reject it there."""
    examples = tuple(Example(id=f"e{i}", inputs={}, labels={}) for i in range(40))

    def score(skill: Skill, chosen: Any) -> EvaluationReport:
        def rollout(i: int) -> Rollout:
            won = skill.text == "cand"
            brief = 1.0 if not won or i < 10 else 0.0  # the guard regresses after look 1
            example_id = f"e{i}"
            return Rollout(
                example_id, "x", Prediction({}), float(won), extra_scores={"brief": brief}
            )

        return EvaluationReport(tuple(rollout(int(e.id[1:])) for e in chosen), skill.hash, "fake")

    gate = sd.Gate(guards=[sd.Guard.metric("brief", lambda example, prediction: 1.0)])
    budget = SignificanceBudget(alpha=0.05, first_share=2 / 3)
    budget.plan(4)
    judge = SequentialJudge(gate, budget, examples, examples)
    seed_report = score(Skill("seed"), examples)
    report, decision = judge.judge(
        Skill("cand"), score=score, incumbent_on=lambda ex: seed_report, index=0
    )
    assert decision.accepted_at_look is None and decision.early_alpha is None, decision.reason
    assert not decision.accepted and "guard 'brief' regressed" in decision.reason
    assert len(report.records) == 40  # decided on the whole set


def test_the_rest_of_validation_is_never_scored_under_a_dollar_limit() -> None:
    """Kills: a completion that runs under a dollar limit (`budget.max_usd is None` dropped
    from `ValidationBook._affordable`): what the rest of validation would cost in dollars is
    unknown before the calls, so a run under `max_usd` compares the best skill and the seed on
    the accepting look's examples, however far the limit is."""
    result, target = compile_fix(sd.Budget(max_usd=10**6))
    decision = result.gate_log[0]
    scored = decision.examples_scored
    assert decision.accepted and scored < 40, decision.reason
    assert len(fixed_on_val(target)) == scored  # never scored on the rest
    assert (result.val_examples, result.val_size) == (scored, 40)
