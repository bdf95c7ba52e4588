"""The gate is sacred: these tests fail if any rule of strict, significant improvement is broken."""

from __future__ import annotations

import itertools
import json
import math
import random
from pathlib import Path
from typing import Any

import pytest

import skillopt_dsl as sd
from skillopt_dsl import signed_rank
from skillopt_dsl.evaluate import EvaluationReport, Rollout
from skillopt_dsl.gate import paired_test
from skillopt_dsl.optimizers import Beam, GradientText, Optimizer, ReflectiveProposer
from skillopt_dsl.testing import ScriptedLM
from skillopt_dsl.testing.contract import contract_examples, contract_reflector, contract_target
from skillopt_dsl.types import Example, Prediction
from tests.helpers import Parity

TRAIN = contract_examples(0, 16)
VAL = contract_examples(100, 40)
FIX = "A number divisible by 2 is even."
CAREFUL = "Careful mode."
DOOR: dict[str, Any] = dict(compose=1, confirm_steps=0, min_net=1.0, submit_at_net=0.0)
"""Every proposal that passes its own mini-batch screen goes to the gate alone, in that step."""


def report(
    scores: list[float],
    skill_hash: str = "h",
    extra: dict[str, list[float]] | None = None,
    errors: tuple[int, ...] = (),
) -> EvaluationReport:
    """A report whose rows in `errors` are failed calls (keeping whatever score they were given)."""
    records = []
    for i, score in enumerate(scores):
        extras = {name: values[i] for name, values in (extra or {}).items()}
        error = "model call failed" if i in errors else None
        records.append(
            Rollout(f"e{i}", "x", Prediction({"a": "x"}), score, error=error, extra_scores=extras)
        )
    return EvaluationReport(tuple(records), skill_hash, "fake")


# -- the rule ------------------------------------------------------------------------------


def test_clear_gain_accepted_and_recorded() -> None:
    """Kills: a default gate that rejects real gains, or a decision without its test record."""
    decision = sd.Gate().decide(report([1.0] * 12 + [0.0] * 8), report([0.0] * 20))
    assert decision.accepted
    assert decision.delta == pytest.approx(0.6)
    assert decision.test == "sign" and decision.p_value == pytest.approx(2.0**-12)
    assert decision.alpha == pytest.approx(0.05 * 6 / math.pi**2)
    assert decision.decision_index == 0


@pytest.mark.parametrize("gate", [sd.Gate(), sd.Gate.mean_only()], ids=["default", "mean_only"])
def test_ties_rejected(gate: sd.Gate) -> None:
    """Kills: ties accepted (`delta >= 0`, or the tie check dropped in favour of the test alone).

    The graded tie is one the signed-rank test alone calls significant: 20 small gains, one
    large loss, equal means.
    """
    decision = gate.decide(report([1, 0, 1]), report([0, 1, 1]))
    assert not decision.accepted and "tie" in decision.reason
    graded = gate.decide(report([0.55] * 20 + [0.0]), report([0.5] * 20 + [1.0]))
    assert graded.delta == pytest.approx(0.0, abs=1e-9)
    assert paired_test([0.05] * 20 + [-1.0]).p_value < 0.001
    assert not graded.accepted and "tie" in graded.reason


def test_loss_rejected() -> None:
    """Kills: a gate that accepts on the test alone, or on a change in either direction."""
    decision = sd.Gate().decide(report([0] * 10), report([1] * 10))
    assert not decision.accepted and decision.delta < 0


def test_min_delta() -> None:
    """Kills: `min_delta` ignored."""
    gate = sd.Gate.mean_only(min_delta=0.5)
    assert not gate.decide(report([1, 1, 0, 0]), report([1, 0, 0, 0])).accepted
    assert gate.decide(report([1, 1, 1, 1]), report([1, 0, 0, 0])).accepted


def test_small_gain_not_significant_but_mean_only_takes_it() -> None:
    """Kills: a default gate without the paired test (SkillOpt's mean-only rule as default)."""
    candidate, incumbent = report([1, 1, 1, 0] + [1] * 14), report([0, 0, 0, 1] + [1] * 14)
    noisy = sd.Gate().decide(candidate, incumbent)
    assert not noisy.accepted and "not significant" in noisy.reason
    assert noisy.p_value == pytest.approx(5 / 16)
    assert sd.Gate.mean_only().decide(candidate, incumbent).accepted


def test_alpha_is_spent_across_decisions() -> None:
    """Kills: alpha not spent (every decision tested at the full alpha).

    A gain significant at the first decision (p = 2**-6 = 0.0156 < 0.0304) is not at the
    fourth (alpha_4 = 0.0019); the shares sum to at most alpha over any number of decisions.
    """
    gate = sd.Gate()
    candidate, incumbent = report([1] * 6 + [0] * 4), report([0] * 10)
    assert gate.decide(candidate, incumbent, decision_index=0).accepted
    late = gate.decide(candidate, incumbent, decision_index=3)
    assert not late.accepted and late.alpha == pytest.approx(0.05 * 6 / (math.pi**2 * 16))
    shares = [gate.alpha_for(k) or 0.0 for k in range(100_000)]
    assert sum(shares) <= 0.05 and shares == sorted(shares, reverse=True)
    per_decision = sd.Gate(spending="per-decision")
    assert per_decision.decide(candidate, incumbent, decision_index=3).accepted


def test_exact_signed_rank_matches_enumeration() -> None:
    """Kills: a wrong null distribution (mid-ranks, ties or the tail off by one)."""
    for diffs in ([0.5, 0.25, -0.25, 0.75, 0.5, -0.1, 0.3], [0.2, 0.2, -0.2, 0.4, 0.1, 0.3, -0.4]):
        result = paired_test(diffs)
        assert result.name == "signed-rank"
        ranks = _midranks([abs(d) for d in diffs])
        observed = sum(r for r, d in zip(ranks, diffs, strict=True) if d > 0)
        sums = [
            sum(r for r, s in zip(ranks, signs, strict=True) if s)
            for signs in itertools.product([0, 1], repeat=len(diffs))
        ]
        expected = sum(1 for s in sums if s >= observed - 1e-9) / len(sums)
        assert result.statistic == pytest.approx(observed)
        assert result.p_value == pytest.approx(expected)


def _midranks(values: list[float]) -> list[float]:
    ordered = sorted(values)
    return [(ordered.index(v) + 1 + len(ordered) - ordered[::-1].index(v)) / 2 for v in values]


def test_normal_approximation_agrees_with_the_exact_test(monkeypatch: pytest.MonkeyPatch) -> None:
    """Kills: a normal approximation off in scale or centre (it decides valsets over 500)."""
    rng = random.Random(0)
    for shift in (0.0, 0.02, 0.04):
        diffs = [round(rng.uniform(-0.5, 0.5) + shift, 2) for _ in range(300)]
        exact = paired_test(diffs)
        monkeypatch.setattr(signed_rank, "EXACT_LIMIT", 10)
        approx = paired_test(diffs)
        monkeypatch.undo()
        assert (exact.name, approx.name) == ("signed-rank", "signed-rank-normal")
        assert approx.statistic == exact.statistic
        assert approx.p_value == pytest.approx(exact.p_value, abs=0.005)


def test_a_rejected_decision_by_the_normal_approximation_is_charged_its_alpha() -> None:
    """Kills: a rejected decision over 500 differences charged nothing (the normal
    approximation has no exact attained size, so the whole level is spent): a run could test
    large validation sets forever at the same level."""
    differences = [0.25] * 260 + [-0.25] * 250 + [0.5] * 45 + [-0.5] * 45  # 600, none zero
    random.Random(3).shuffle(differences)
    held = [0.5] * len(differences)
    candidate = [0.5 + d for d in differences]
    decision = sd.Gate().decide(report(candidate), report(held), alpha=0.01)
    assert decision.test == "signed-rank-normal", decision.test
    assert decision.delta > 0 and not decision.accepted, decision.reason
    assert "not significant" in decision.reason
    assert decision.charged == 0.01


def test_a_candidate_tied_at_an_interim_look_stops() -> None:
    """Kills: a futility rule that stops only a candidate behind the incumbent (a tie at an
    interim look would keep being scored); a candidate ahead by one goes on."""
    gate = sd.Gate()
    held = report([1.0, 0.0] * 10)
    assert gate.is_futile(report([1.0, 0.0] * 5), held)  # the same answers on the look
    assert gate.is_futile(report([0.0, 1.0] * 5), held)  # five fixed, five broken
    assert gate.is_futile(report([0.0, 0.0] * 5), held)  # behind
    assert not gate.is_futile(report([1.0, 1.0] + [1.0, 0.0] * 4), held)  # ahead by one


# -- errors never score --------------------------------------------------------------------


def test_failed_calls_never_score_for_the_candidate() -> None:
    """Kills: the gate trusting a failed row's score (a metric that says 1.0 on anything).

    Every candidate row is a failed call carrying score 1.0: it is credited 0 and rejected.
    """
    candidate = report([1.0] * 20, errors=tuple(range(20)))
    decision = sd.Gate.mean_only().decide(candidate, report([0.0] * 10 + [1.0] * 10))
    assert not decision.accepted and decision.candidate_score == 0.0


def test_failed_calls_never_score_for_the_incumbent() -> None:
    """Kills: an incumbent's failed row kept at its score (a later real gain then looks like a tie)."""
    incumbent = report([1.0] * 20, errors=tuple(range(10)))
    decision = sd.Gate().decide(report([1.0] * 20), incumbent)
    assert decision.incumbent_score == pytest.approx(0.5)
    # where the incumbent failed the candidate is credited 0 too: no gain can come from errors
    assert decision.candidate_score == pytest.approx(0.5)
    assert not decision.accepted and "tie" in decision.reason


def test_all_failing_candidate_rejected_through_compile() -> None:
    """Kills: a failed call scored by the metric end to end (evaluate calling the metric on a
    failed rollout *and* the gate trusting that score; each layer alone is killed by
    `test_failed_call_scores_zero_without_calling_any_metric` and the credited-score tests above).

    The metric says 1.0 for anything that is not a wrong answer (so 1.0 on a failed call); the
    proposed line makes every target call fail. Scored by the metric, the candidate would reach
    1.0 against the seed's 0.5 and pass; credited 0, it is rejected.
    """

    def lenient(example: Example, prediction: sd.Prediction) -> float:
        answer = prediction.outputs.get("answer")
        return 0.0 if answer not in (None, example.labels["answer"]) else 1.0

    def target(messages: list[dict[str, str]]) -> str:
        number = messages[-1]["content"].split()[-1]
        if "Think at length." in messages[0]["content"]:
            # thinking gets the short (training) numbers right and overflows on the long ones
            if len(number) >= 3:
                raise ValueError("prompt is longer than the context window")
            return "even" if int(number) % 2 == 0 else "odd"
        return contract_target(messages)

    # The line passes the screen on training data (it fixes the evens there), so it reaches
    # the gate, where every validation call fails.
    line = {"kind": "add", "after": None, "text": "Think at length.", "rationale": "r"}
    result = sd.compile(
        Parity(metric=lenient),
        TRAIN,
        VAL,
        optimizer=GradientText(
            epochs=1, batch_size=16, slow_update=False, proposers=[ReflectiveProposer()], **DOOR
        ),
        lm=ScriptedLM(target),
        optimizer_lm=contract_reflector([line]),
        threads=1,
    )
    assert len(result.gate_log) == 1
    assert result.gate_log[0].candidate_score == 0.0
    assert not result.improved and result.best_skill == Parity().seed_skill


# -- the comparison target comes from the driver -------------------------------------------


def careful_target(messages: list[dict[str, str]]) -> str:
    """The fix makes every validation answer but those ending in 1 right (an incumbent that is
    not perfect, so the search goes on) and misses the training evens not divisible by 4; 'Careful mode.'
    on top gets those right on training data (it passes the screen against the incumbent) and
    loses them on validation (numbers from 100)."""
    system = messages[0]["content"]
    number = int(messages[-1]["content"].split()[-1])
    if FIX in system and CAREFUL not in system and number >= 100 and number % 10 == 1:
        return "even"
    if FIX in system and number < 100 and CAREFUL not in system and number % 4 == 2:
        return "odd"
    if FIX in system and CAREFUL in system and number >= 100:
        return "even" if number % 4 == 0 else "odd"
    return contract_target(messages)


def fix_then_careful(messages: list[dict[str, str]]) -> str:
    """A fake optimizer model: proposes the fix, then (once the fix is in) 'Careful mode.'."""
    document = messages[1]["content"].split("# Document", 1)[1].split("\n# ", 1)[0]
    text = CAREFUL if FIX in document else FIX
    return json.dumps({"edits": [{"kind": "add", "after": None, "text": text, "rationale": "r"}]})


def test_candidate_beating_the_seed_but_not_the_incumbent_is_rejected() -> None:
    """Kills: the gate comparing with the seed instead of the incumbent.

    Seed 0.5, the accepted fix 0.9, then a candidate at 0.75: clean wins over the seed but a
    loss against the incumbent (it stops at the first look, behind the incumbent).
    """
    result = sd.compile(
        Parity(),
        TRAIN,
        VAL,
        optimizer=GradientText(
            epochs=1, batch_size=8, slow_update=False, proposers=[ReflectiveProposer()], **DOOR
        ),
        lm=ScriptedLM(careful_target),
        optimizer_lm=ScriptedLM(fix_then_careful),
        threads=1,
    )
    first, second = result.gate_log
    assert first.accepted and first.candidate_score >= 0.85
    assert second.candidate_score > result.seed_val_score  # on the examples it was scored on
    assert not second.accepted and second.incumbent_score >= second.candidate_score  # the fix's
    assert result.best_skill.text.count(CAREFUL) == 0 and result.val_score == 0.9
    assert [d.decision_index for d in result.gate_log] == [0, 1]
    # Two planned decisions: the first may use 2/3 of alpha on the whole set (its early looks
    # are paid from the rest); accepted, it spends nothing, so the second (the last planned)
    # gets the whole of alpha (the fallback passes it on), early looks included.
    assert first.alpha == pytest.approx(0.05 * 2 / 3) and first.charged == 0.0
    assert second.early_alpha is not None
    assert second.alpha + second.early_alpha == pytest.approx(0.05)


# -- guards --------------------------------------------------------------------------------


def test_guard_regression_rejected() -> None:
    """Kills: guards ignored by the gate."""
    guard = sd.Guard.metric("safety", lambda e, p: 1.0, tolerance=0.05)
    gate = sd.Gate.mean_only(guards=(guard,))
    candidate = report([1, 1, 1], extra={"safety": [0.0, 0.0, 1.0]})
    incumbent = report([0, 0, 1], extra={"safety": [1.0, 1.0, 1.0]})
    decision = gate.decide(candidate, incumbent)
    assert not decision.accepted
    assert "safety" in decision.reason
    within = gate.decide(report([1, 1, 1], extra={"safety": [1, 1, 1]}), incumbent)
    assert within.accepted


def test_guard_metric_on_a_failed_call_scores_zero() -> None:
    """Kills: a guard reading a failed row's recorded guard score instead of crediting 0."""
    guard = sd.Guard.metric("safety", lambda e, p: 1.0)
    gate = sd.Gate.mean_only(guards=(guard,))
    candidate = report([1, 1, 1, 1], extra={"safety": [1.0] * 4}, errors=(3,))
    decision = gate.decide(candidate, report([0, 0, 0, 0], extra={"safety": [1.0] * 4}))
    assert decision.guards["safety"]["candidate"] == pytest.approx(0.75)
    assert not decision.accepted and "safety" in decision.reason


def says_odd(example: Example, prediction: sd.Prediction) -> float:
    """A guard metric the fix regresses (it flips half the answers to 'even')."""
    return 1.0 if prediction.answer == "odd" else 0.0


def guard_optimizers() -> list[Optimizer]:
    reflective = [ReflectiveProposer(read_successes=False)]
    return [
        GradientText(epochs=1, batch_size=8, slow_update=False, proposers=reflective),
        Beam(width=2, expansions=2, depth=2, proposers=reflective),
    ]


@pytest.mark.parametrize("optimizer", guard_optimizers(), ids=lambda o: o.name)
def test_guards_work_through_compile(optimizer: Optimizer, tmp_path: Path) -> None:
    """Kills: the driver not passing the gate's guard metrics to `evaluate` (the run then fails
    with "has no scores"), and a guard that compile records but the gate does not apply."""
    kept = sd.Guard.metric("always", lambda e, p: 1.0)
    regressed = sd.Guard.metric("says_odd", says_odd)
    results = {}
    for guard in (kept, regressed):
        results[guard.name] = sd.compile(
            Parity(),
            TRAIN,
            VAL,
            optimizer=optimizer,
            lm=ScriptedLM(contract_target),
            optimizer_lm=contract_reflector([contract_fix()]),
            gate=sd.Gate(guards=[guard]),
            run_dir=tmp_path / guard.name,
            threads=1,
        )
    passed = results["always"]
    assert passed.improved and passed.val_score == 1.0
    assert any(d.accepted and d.guards["always"]["candidate"] == 1.0 for d in passed.gate_log)
    blocked = results["says_odd"]
    assert not blocked.improved and blocked.gate_log
    assert all("says_odd" in d.reason for d in blocked.gate_log if d.delta > 0)


def contract_fix() -> dict[str, object]:
    return {"kind": "add", "after": None, "text": FIX, "rationale": "parity"}


# -- settings ------------------------------------------------------------------------------


def test_different_examples_refused() -> None:
    """Kills: a gate comparing reports on different examples."""
    other = EvaluationReport((Rollout("zzz", "x", Prediction({}), 1.0),), "h", "m")
    with pytest.raises(sd.UserInputError, match="same validation examples"):
        sd.Gate().decide(other, report([0.0]))


def test_decision_is_pure_and_serialisable() -> None:
    """Kills: hidden state in the gate, or a record field lost on the way to the run."""
    gate = sd.Gate()
    first = gate.decide(report([1] * 8), report([0] * 8), decision_index=2)
    second = gate.decide(report([1] * 8), report([0] * 8), decision_index=2)
    assert first == second
    assert sd.GateDecision.from_dict(json.loads(json.dumps(first.to_dict()))) == first


def test_bad_gate_settings() -> None:
    """Kills: typos in gate settings silently accepted."""
    with pytest.raises(sd.UserInputError):
        sd.Gate(min_delta=-1)
    with pytest.raises(sd.UserInputError, match="mean_only"):
        sd.Gate(test="bootstrap")  # type: ignore[arg-type]
    with pytest.raises(sd.UserInputError, match="spending"):
        sd.Gate(spending="none")  # type: ignore[arg-type]
    with pytest.raises(sd.UserInputError, match="unique"):
        sd.Gate(guards=[sd.Guard.error_rate(), sd.Guard.error_rate()])
    with pytest.raises(sd.UserInputError, match="metric function"):
        sd.Guard.metric("brevity", 0.1)  # type: ignore[arg-type]
    with pytest.raises(sd.UserInputError, match="decision_index"):
        sd.Gate().decide(report([1]), report([0]), decision_index=-1)
