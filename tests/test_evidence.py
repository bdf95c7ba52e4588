"""Evidence: the run's significance budget, sequential looks and pre-flight power.

Each test names the regression it kills (the smallest code change that would break the
guarantee it holds).
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import skillopt_dsl as sd
from skillopt_dsl.errors import UserInputError
from skillopt_dsl.evaluate import EvaluationReport, Rollout
from skillopt_dsl.evidence import SignificanceBudget, preflight, sign_test_critical
from skillopt_dsl.optimizers import GradientText, ReflectiveProposer
from skillopt_dsl.testing import ScriptedLM
from skillopt_dsl.testing.contract import contract_examples, contract_target
from skillopt_dsl.types import Prediction
from tests.helpers import Parity

TRAIN = contract_examples(0, 16)
TRAIN_NUMBERS = frozenset(int(e.inputs["number"]) for e in TRAIN)
FIX = "A number divisible by 2 is even."


def report(scores: list[float], name: str = "h") -> EvaluationReport:
    records = tuple(Rollout(f"e{i}", "x", Prediction({}), s) for i, s in enumerate(scores))
    return EvaluationReport(records, name, "fake")


def fixer(messages: list[dict[str, str]]) -> str:
    """FAKE reflector: always proposes the fix."""
    return json.dumps({"edits": [{"kind": "add", "after": None, "text": FIX, "rationale": "r"}]})


def one_step(**kwargs: object) -> GradientText:
    return GradientText(
        epochs=1, batch_size=8, slow_update=False, proposers=[ReflectiveProposer()], **kwargs
    )


DOOR: dict[str, Any] = dict(compose=1, confirm_steps=0, min_net=1.0, submit_at_net=0.0)
"""Every proposal that passes its own mini-batch screen goes to the gate in the same step, alone:
the gate (not the screen's batching) decides, as often as the search lets it."""


def overfit(messages: list[dict[str, str]]) -> str:
    """FAKE target: the fix helps on the training numbers only (it passes the screen on training
    data, and validation shows no gain: the gate must reject it, and pay for that)."""
    number = int(messages[-1]["content"].split()[-1])
    return contract_target(messages) if number in TRAIN_NUMBERS else "odd"


# -- the budget ------------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(
    planned=st.one_of(st.none(), st.integers(0, 12)),
    outcomes=st.lists(
        st.tuples(st.sampled_from(["accept", "stop", "reject"]), st.floats(0, 1)), max_size=40
    ),
)
def test_recycling_never_spends_more_than_alpha(
    planned: int | None, outcomes: list[tuple[str, float]]
) -> None:
    """Kills: a level computed from alpha instead of what is left (e.g. every decision taking
    `first_share * alpha`), or a charge that is not counted: the run would spend past alpha.

    Whatever the plan and the verdicts, no level exceeds what is left and the levels of the
    decisions that were not accepted (the only ones that can be false accepts under the fallback
    argument) never add up to more than alpha."""
    budget = SignificanceBudget(alpha=0.05)
    budget.plan(planned)
    spent_levels = 0.0
    for verdict, attained in outcomes:
        level = budget.level()
        assert 0 <= level <= budget.remaining + 1e-15
        if verdict == "accept":
            budget.charge(level=level, charged=0.0)
        elif verdict == "stop":
            budget.charge(level=level, charged=None)
            spent_levels += level
        else:
            budget.charge(level=level, charged=attained * level)
            spent_levels += attained * level
    assert budget.spent <= 0.05 + 1e-12
    assert spent_levels <= 0.05 + 1e-9


def test_plan_gives_the_first_decision_its_share_and_splits_the_rest() -> None:
    """Kills: ignoring the plan (the open-ended 6/(pi^2 k^2) schedule: 0.0304 for the first),
    or splitting uniformly (0.0125 each for 4): both leave a 12-example set unable to certify
    a clean fix of 5 (p = 2**-5 = 0.03125)."""
    budget = SignificanceBudget(alpha=0.05)
    budget.plan(4)
    assert budget.level() == pytest.approx(0.05 * 2 / 3)
    budget.charge(level=budget.level(), charged=None)
    assert budget.level() == pytest.approx(0.05 / 3 / 3)  # what is left over 3 decisions


def test_a_one_decision_plan_tests_at_all_of_alpha() -> None:
    """Kills: the first decision's share applied to a plan of one decision (tested at 2/3 of
    alpha, a third of the budget never used by the run's only decision)."""
    budget = SignificanceBudget(alpha=0.05)
    budget.plan(1)
    assert budget.level() == pytest.approx(0.05)
    assert preflight(sd.Gate(early_share=0), 30, 1).first_level == pytest.approx(0.05)
    # with early acceptance and nothing else left, its looks take their share from it
    assert preflight(sd.Gate(), 30, 1).first_level == pytest.approx(0.05 * 0.75)
    assert preflight(sd.Gate(), 12, 1).first_level == pytest.approx(0.05)  # 12: no interim look
    two = SignificanceBudget(alpha=0.05)
    two.plan(2)
    assert two.level() == pytest.approx(0.05 * 2 / 3)  # the share still applies to a real plan


def test_accepted_decision_passes_its_level_on() -> None:
    """Kills: charging an accepted decision (the fallback procedure passes its level on)."""
    gate = sd.Gate()
    decision = gate.decide(report([1.0] * 12), report([0.0] * 12), alpha=0.03)
    assert decision.accepted and decision.charged == 0.0


def test_discrete_test_is_charged_its_attained_size() -> None:
    """Kills: charging nothing for a rejected decision (a run could then test forever at the
    same level) and charging more than the test can use (no recycling of the discrete rest).

    12 discordant pairs at level 0.05: the sign test needs 10 wins, attained size 0.0193."""
    decision = sd.Gate().decide(
        report([1.0] * 9 + [0.0] * 3), report([0.0] * 9 + [1.0] * 3), alpha=0.05
    )
    assert not decision.accepted
    assert decision.critical == 10
    assert decision.charged == pytest.approx(sign_test_critical(12, 0.05)[1])
    assert 0 < decision.charged < 0.05


def test_signed_rank_critical_value_matches_its_p_value() -> None:
    """Kills: a signed-rank critical value or attained size inconsistent with the p-value
    (accepting where p > level, or charging a size the test does not have)."""
    cand = [1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1, 0.0, 0.0]
    held = [0.0, 0.0, 0.1, 0.0, 0.0, 0.1, 0.0, 0.0, 0.0, 0.0, 0.3, 0.2]
    for level in (0.001, 0.01, 0.05):
        decision = sd.Gate().decide(report(cand), report(held), alpha=level)
        assert decision.test == "signed-rank"
        passed = decision.p_value is not None and decision.p_value <= level
        assert decision.accepted == passed
        assert decision.critical is not None and (decision.statistic >= decision.critical) == passed
        assert decision.charged is not None and decision.charged <= level


# -- sequential looks ------------------------------------------------------------------------


def late_winner_target(late_numbers: set[str]):
    """FAKE target: with 'Late.' in the skill, right exactly on `late_numbers`; otherwise the
    contract target (the seed answers 'odd' always: right on half)."""

    def answer(messages: list[dict[str, str]]) -> str:
        number = messages[-1]["content"].split()[-1]
        if "Late." in messages[0]["content"]:
            right = "even" if int(number) % 2 == 0 else "odd"
            wrong = "odd" if right == "even" else "even"
            return right if number in late_numbers else wrong
        return contract_target(messages)

    return answer


def late_line(messages: list[dict[str, str]]) -> str:
    """FAKE reflector: proposes 'Late.'."""
    return json.dumps(
        {"edits": [{"kind": "add", "after": None, "text": "Late.", "rationale": "r"}]}
    )


def test_loser_stopped_early_is_never_accepted(tmp_path: Path) -> None:
    """Kills: ignoring the futility stop (scoring on and accepting a candidate that was behind
    at a look) and a stopped candidate scored on the whole set anyway (no calls saved).

    The candidate is wrong on every example of the first look and right on all the others:
    on the whole set it would beat the seed (0.75 against 0.5, p < 0.001); behind at look 1,
    it stops there and is rejected."""
    from skillopt_dsl.driver import look_order

    val = contract_examples(100, 40)
    first_look = {e.inputs["number"] for e in look_order(val, 0)[:10]}
    late = {e.inputs["number"] for e in val} - first_look | {e.inputs["number"] for e in TRAIN}
    target = ScriptedLM(late_winner_target(late))
    result = sd.compile(
        Parity(),
        TRAIN,
        val,
        optimizer=one_step(),
        lm=target,
        optimizer_lm=ScriptedLM(late_line),
        gate=sd.Gate(looks=(0.25,), min_look=10),
        threads=1,
        run_dir=tmp_path,
    )
    decision = result.gate_log[0]
    assert decision.stopped_early and not decision.accepted, decision.reason
    assert decision.stopped_at_look == 1 and decision.examples_scored == 10
    # charged everything it could have spent: its whole-set level and its early looks'
    assert decision.early_alpha is not None and decision.alpha is not None
    assert decision.calls_saved == 30
    assert decision.charged == pytest.approx(decision.alpha + decision.early_alpha)
    late_skill = [c for c in target.calls if "Late." in c[0]["content"]]
    val_numbers = {e.inputs["number"] for e in val}
    assert sum(c[-1]["content"].split()[-1] in val_numbers for c in late_skill) == 10
    assert "Late." not in result.best_skill.text and not result.improved


def tied_then_right_target(first_look: set[str]):
    """FAKE target: with 'Late.' in the skill, answers like the seed on `first_look` and right
    everywhere else; otherwise the contract target (the seed answers 'odd' always)."""

    def answer(messages: list[dict[str, str]]) -> str:
        number = messages[-1]["content"].split()[-1]
        if "Late." in messages[0]["content"] and number not in first_look:
            return "even" if int(number) % 2 == 0 else "odd"
        return contract_target(messages)

    return answer


def test_a_candidate_tied_at_an_interim_look_stops_being_scored(tmp_path: Path) -> None:
    """Kills: a futility stop that lets a tie go on (only a candidate behind would stop): the
    candidate ties the seed on every example of look 1 and wins all later ones, so scored on
    the whole set it would pass; tied at look 1, it stops there."""
    from skillopt_dsl.driver import look_order

    val = contract_examples(100, 40)
    first_look = {e.inputs["number"] for e in look_order(val, 0)[:10]}
    result = sd.compile(
        Parity(),
        TRAIN,
        val,
        optimizer=one_step(),
        lm=ScriptedLM(tied_then_right_target(first_look)),
        optimizer_lm=ScriptedLM(late_line),
        gate=sd.Gate(looks=(0.25,), min_look=10),
        threads=1,
        run_dir=tmp_path,
    )
    decision = result.gate_log[0]
    assert decision.stopped_at_look == 1 and not decision.accepted, decision.reason
    assert decision.delta == 0 and decision.examples_scored == 10 and decision.calls_saved == 30
    assert not result.improved


def test_looks_are_fixed_fractions_with_a_minimum_size() -> None:
    """Kills: looks on tiny prefixes (a real edit stopped on 3 examples) or a missing final look."""
    gate = sd.Gate()
    assert gate.look_sizes(12) == [12]
    assert gate.look_sizes(40) == [10, 20, 30, 40]
    assert gate.look_sizes(100) == [25, 50, 75, 100]
    assert sd.Gate.mean_only().look_sizes(100) == [100]


# -- small validation sets and sharing ---------------------------------------------------------


def twelve_val() -> list[sd.Example]:
    """7 odd and 5 even numbers: the seed (always 'odd') is right on 7, the fix on all 12."""
    pool = contract_examples(200, 20)
    odd = [e for e in pool if int(e.inputs["number"]) % 2][:7]
    even = [e for e in pool if not int(e.inputs["number"]) % 2][:5]
    return odd + even


def test_twelve_examples_accept_a_clean_fix_of_five() -> None:
    """Kills: a plan that splits alpha evenly, or the open-ended schedule: on 12 validation
    examples a candidate fixing 5 answers and breaking none (p = 0.03125) would be rejected, as
    the evidence issue saw with a DSPy program."""
    result = sd.compile(
        Parity(),
        TRAIN,
        twelve_val(),
        lm=ScriptedLM(contract_target),
        optimizer_lm=ScriptedLM(fixer),
        threads=1,
    )
    first = result.gate_log[0]
    assert first.accepted, first.reason
    assert first.p_value == pytest.approx(2**-5)
    assert result.val_score == 1.0


def test_runs_sharing_a_budget_share_alpha() -> None:
    """Kills: each run starting a fresh budget (one alpha per DSPy predictor or per Sleep
    candidate, so a program of k predictors could accept useless edits k times as often)."""
    shared = SignificanceBudget(alpha=0.05)
    shared.plan(4)  # its owner plans both runs: 2 decisions each
    val = contract_examples(300, 30)
    # The fix passes the screen on training data but gains nothing on validation: each run's
    # gate rejects it and charges the shared budget.
    common = dict(optimizer=one_step(**DOOR), optimizer_lm=ScriptedLM(fixer), threads=1)
    first = sd.compile(Parity(), TRAIN, val, lm=ScriptedLM(overfit), significance=shared, **common)
    assert not first.gate_log[0].accepted and first.gate_log[0].alpha == pytest.approx(0.05 * 2 / 3)
    level_after_first = shared.level()
    second = sd.compile(Parity(), TRAIN, val, lm=ScriptedLM(overfit), significance=shared, **common)
    assert second.gate_log[0].alpha == pytest.approx(level_after_first)
    assert second.gate_log[0].alpha < 0.05 * 2 / 3
    assert shared.decisions == len(first.gate_log) + len(second.gate_log)
    assert shared.spent <= 0.05


def test_a_replan_counts_from_the_decisions_already_made() -> None:
    """Kills: `replan` setting the plan to the new decisions alone (a run that made a decision
    before handing off would draw the next one past its plan, at the open-ended series'
    share), and a replan that gives the next decision more than is left."""
    budget = SignificanceBudget(alpha=0.05)
    budget.plan(6)
    level = budget.level()
    budget.charge(level=level, charged=0.02)  # one decision made, rejected
    budget.replan(1)
    assert budget.planned == 2
    assert budget.level() == pytest.approx(0.03)  # all that is left, and no more
    with pytest.raises(UserInputError, match="decisions >= 0"):
        budget.replan(-1)


# -- pre-flight ---------------------------------------------------------------------------------


def test_preflight_warns_when_the_set_is_too_small_and_says_what_to_do() -> None:
    """Kills: a pre-flight that never warns (a user with 12 examples spends a run on a gate
    that can certify only huge gains) or one that always does."""
    small = preflight(sd.Gate(), 12, 4)
    assert small.clean_fix == 5 and small.warning is not None
    assert "more validation examples" in small.warning and "Gate.mean_only()" in small.warning
    large = preflight(sd.Gate(), 100, 4)
    assert large.warning is None and large.clean_fix == 5
    assert large.even_chance_gain is not None and large.even_chance_gain < 0.2
    assert preflight(sd.Gate.mean_only(), 100, 4).warning is not None


def test_preflight_never_says_no_gain_can_be_certified_when_a_full_fix_passes() -> None:
    """Kills: a clean-fix search that stops one short of the whole set, or a warning that
    reads the even-chance gain instead of the clean fix: on 5 examples at alpha 0.05 a
    candidate fixing all 5 passes (p = 1/32), and the gate itself accepts it."""
    five = preflight(sd.Gate(), 5, 1)
    assert five.clean_fix == 5 and five.warning is not None
    assert "no gain can be certified" not in five.warning
    assert "only a gain above" in five.warning
    assert sd.Gate().decide(report([1.0] * 5), report([0.0] * 5), alpha=0.05).accepted
    four = preflight(sd.Gate(), 4, 1)  # 1/16 > 0.05: no candidate can pass
    assert four.clean_fix is None and four.warning is not None
    assert "no gain can be certified" in four.warning


def test_small_set_warning_is_logged_at_warning_level(caplog: pytest.LogCaptureFixture) -> None:
    """Kills: the pre-flight warning logged at info (or not logged), so a user with 12
    validation examples sees no warning on the console before the run spends its budget."""
    caplog.set_level(logging.INFO, logger="skillopt_dsl")
    sd.compile(
        Parity(),
        TRAIN,
        twelve_val(),
        optimizer=one_step(),
        lm=ScriptedLM(contract_target),
        optimizer_lm=ScriptedLM(fixer),
        threads=1,
    )
    warned = [
        r
        for r in caplog.records
        if r.levelno == logging.WARNING and "too few for the gate" in r.getMessage()
    ]
    assert len(warned) == 1, [(r.levelname, r.getMessage()) for r in caplog.records]
    assert "Use more validation examples" in warned[0].getMessage()


def test_compile_reports_preflight_and_every_decisions_evidence(tmp_path: Path) -> None:
    """Kills: a run that does not say before spending what its gate can certify, or decisions
    recorded without their alpha and charge."""
    result = sd.compile(
        Parity(),
        TRAIN,
        contract_examples(400, 30),
        optimizer=one_step(),
        lm=ScriptedLM(contract_target),
        optimizer_lm=ScriptedLM(fixer),
        threads=1,
        run_dir=tmp_path,
    )
    assert result.preflight is not None and result.preflight.planned == 2
    events = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()]
    kinds = [e["event"] for e in events]
    assert kinds.index("preflight") < kinds.index("seed")
    for decision in result.gate_log:
        assert decision.alpha is not None and decision.charged is not None
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["preflight"]["clean_fix"] == result.preflight.clean_fix


# -- the bound under the null, through the driver ----------------------------------------------


def noisy_target(run_seed: int):
    """FAKE target: a fixed half-right pattern, each answer flipped with probability 0.2 per
    skill text (zero true effect: any change of text redraws the noise)."""

    def uniform(*parts: object) -> float:
        digest = hashlib.blake2b(repr(parts).encode(), digest_size=8).digest()
        return int.from_bytes(digest, "big") / 2**64

    def answer(messages: list[dict[str, str]]) -> str:
        system, number = messages[0]["content"], int(messages[-1]["content"].split()[-1])
        right = (uniform(run_seed, number) < 0.5) ^ (uniform(run_seed, system, number) < 0.2)
        even = number % 2 == 0
        return "even" if even == right else "odd"

    return answer


def noise_line(messages: list[dict[str, str]]) -> str:
    """FAKE reflector: a new useless line each time (its text drawn from the prompt)."""
    tag = hashlib.sha1(messages[1]["content"].encode()).hexdigest()[:8]
    return json.dumps(
        {"edits": [{"kind": "add", "after": None, "text": f"Note {tag}.", "rationale": "r"}]}
    )


@pytest.mark.timeout(240)
def test_driver_false_accepts_stay_under_alpha_and_mean_only_does_not() -> None:
    """Kills: a driver that tests every decision at the full alpha or forgets charges (the run
    bound fails), shown against mean-only on the same runs, which noise fools most of the time
    (so the protocol can see a false accept). With the door settings every noise line that the
    training noise lets through the screen is gated alone (about two decisions a run), so the
    bound is tested on the driver's budget, not on the screen's filtering."""
    val = contract_examples(500, 30)
    runs = 60

    def fooled(gate: sd.Gate) -> int:
        count = 0
        for run_seed in range(runs):
            result = sd.compile(
                Parity(),
                contract_examples(0, 32),
                val,
                optimizer=one_step(**DOOR),
                lm=ScriptedLM(noisy_target(run_seed)),
                optimizer_lm=ScriptedLM(noise_line),
                gate=gate,
                threads=1,
                seed=run_seed,
            )
            count += result.improved
        return count

    assert fooled(sd.Gate()) <= 5  # alpha = 0.05 of 60 runs is 3; the bench measures more runs
    assert fooled(sd.Gate.mean_only()) >= 20


def test_sleep_night_states_what_its_gate_can_certify() -> None:
    """Kills: a night report without the gate's statement (`gate_statement` returning None),
    or one that hides the small-set warning."""
    from skillopt_dsl.sleep.night import gate_statement

    small = gate_statement(sd.Gate(), 12)
    assert small is not None and "clean fix of 6" in small and "WARNING" in small  # open-ended
    large = gate_statement(sd.Gate(), 200)
    assert large is not None and "WARNING" not in large
    assert gate_statement(sd.Gate(), 0) is None
