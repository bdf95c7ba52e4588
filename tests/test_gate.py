"""The gate is sacred: these tests fail if any rule of strict improvement is broken."""

from __future__ import annotations

import pytest

import skillopt_dsl as sd
from skillopt_dsl.evaluate import EvaluationReport, Rollout
from skillopt_dsl.types import Prediction


def report(
    scores: list[float], skill_hash: str = "h", extra: dict[str, list[float]] | None = None
) -> EvaluationReport:
    records = []
    for i, score in enumerate(scores):
        extras = {name: values[i] for name, values in (extra or {}).items()}
        records.append(Rollout(f"e{i}", "x", Prediction({"a": "x"}), score, extra_scores=extras))
    return EvaluationReport(tuple(records), skill_hash, "fake")


def test_strict_gain_accepted() -> None:
    decision = sd.Gate().decide(report([1, 1, 0]), report([1, 0, 0]))
    assert decision.accepted
    assert decision.delta == pytest.approx(1 / 3)
    assert decision.candidate_score > decision.incumbent_score


def test_ties_rejected() -> None:
    decision = sd.Gate().decide(report([1, 0, 1]), report([0, 1, 1]))
    assert not decision.accepted
    assert "tie" in decision.reason


def test_loss_rejected() -> None:
    decision = sd.Gate().decide(report([0, 0, 1]), report([1, 0, 1]))
    assert not decision.accepted and decision.delta < 0


def test_min_delta() -> None:
    gate = sd.Gate(min_delta=0.5)
    assert not gate.decide(report([1, 1, 0, 0]), report([1, 0, 0, 0])).accepted
    assert gate.decide(report([1, 1, 1, 1]), report([1, 0, 0, 0])).accepted


def test_paired_test_rejects_noisy_gain_on_few_examples() -> None:
    gate = sd.Gate(test="paired", alpha=0.05)
    noisy = gate.decide(report([1, 1, 0]), report([0, 0, 0]))
    assert not noisy.accepted
    assert noisy.p_value is not None and noisy.p_value >= 0.05
    assert "not significant" in noisy.reason
    many = gate.decide(report([1.0] * 20), report([0.0] * 20))
    assert many.accepted and many.p_value is not None and many.p_value < 0.05


def test_guard_regression_rejected() -> None:
    guard = sd.Guard.metric("safety", tolerance=0.05)
    gate = sd.Gate(guards=(guard,))
    candidate = report([1, 1, 1], extra={"safety": [0.0, 0.0, 1.0]})
    incumbent = report([0, 0, 1], extra={"safety": [1.0, 1.0, 1.0]})
    decision = gate.decide(candidate, incumbent)
    assert not decision.accepted
    assert "safety" in decision.reason
    within = gate.decide(report([1, 1, 1], extra={"safety": [1, 1, 1]}), incumbent)
    assert within.accepted


def test_different_examples_refused() -> None:
    other = EvaluationReport((Rollout("zzz", "x", Prediction({}), 1.0),), "h", "m")
    with pytest.raises(sd.UserInputError, match="same validation examples"):
        sd.Gate().decide(other, report([0.0]))


def test_errors_count_against_the_candidate() -> None:
    errored = EvaluationReport(
        (Rollout("e0", "", Prediction({"a": None}, error="boom"), 0.0, error="timeout"),), "c", "m"
    )
    assert not sd.Gate().decide(errored, report([1.0])).accepted


def test_decision_is_pure_and_serialisable() -> None:
    gate = sd.Gate()
    first = gate.decide(report([1, 0]), report([0, 0]))
    second = gate.decide(report([1, 0]), report([0, 0]))
    assert first == second
    assert sd.GateDecision.from_dict(first.to_dict()) == first


def test_bad_gate_settings() -> None:
    with pytest.raises(sd.UserInputError):
        sd.Gate(min_delta=-1)
    with pytest.raises(sd.UserInputError):
        sd.Gate(test="bootstrap")  # type: ignore[arg-type]
