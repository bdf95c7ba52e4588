from __future__ import annotations

import threading

import pytest

import skillopt_dsl as sd
from skillopt_dsl.evaluate import EvaluationCache
from skillopt_dsl.lm import LM, UsageLedger
from skillopt_dsl.testing import ScriptedLM
from skillopt_dsl.types import Example
from tests.helpers import Parity, parity_examples, parity_target


def test_report_has_one_record_per_example_and_mean() -> None:
    examples = parity_examples(0, 6)
    report = sd.evaluate(Parity(), examples, lm=ScriptedLM(parity_target), threads=3)
    assert [r.example_id for r in report.records] == [e.id for e in examples]
    assert report.mean == pytest.approx(0.5)
    wrong = next(r for r in report.records if r.score == 0)
    assert wrong.feedback and "even" in wrong.feedback
    assert all(r.prompt_tokens > 0 for r in report.records)


def test_skill_changes_the_score() -> None:
    examples = parity_examples(0, 6)
    report = sd.evaluate(
        Parity(), examples, skill="Check if divisible by 2.", lm=ScriptedLM(parity_target)
    )
    assert report.mean == 1.0


def test_parse_failures_are_scored_not_raised() -> None:
    report = sd.evaluate(Parity(), parity_examples(0, 4), lm=ScriptedLM(lambda m: "banana"))
    assert report.mean == 0.0
    assert all(not r.prediction.ok and r.error is None for r in report.records)
    assert report.summary()["parse_failures"] == 4


def test_metric_that_raises_names_the_example() -> None:
    def broken(example: Example, prediction: sd.Prediction) -> float:
        if example.id == "n3":
            raise KeyError("boom")
        return 1.0

    with pytest.raises(sd.MetricError, match="n3") as info:
        sd.evaluate(
            Parity(metric=broken), parity_examples(0, 5), lm=ScriptedLM(parity_target), threads=2
        )
    assert info.value.example_id == "n3"
    assert info.value.metric == "broken"


def test_failed_calls_recorded_then_max_errors_stops() -> None:
    def flaky(messages: list[dict[str, str]]) -> str:
        if messages[-1]["content"] in {"1", "2"}:
            raise ValueError("bad request")
        return "odd"

    lm = LM(ScriptedLM(flaky), max_retries=0)
    report = sd.evaluate(Parity(), parity_examples(0, 5), lm=lm, threads=1)
    failed = [r for r in report.records if r.error]
    assert [r.example_id for r in failed] == ["n1", "n2"]
    assert all(r.score == 0.0 for r in failed)
    with pytest.raises(sd.TooManyErrors, match="max_errors=1"):
        sd.evaluate(
            Parity(),
            parity_examples(0, 5),
            lm=LM(ScriptedLM(flaky), max_retries=0),
            max_errors=1,
            threads=1,
        )


def test_incumbent_is_never_rerun_with_a_cache() -> None:
    fake = ScriptedLM(parity_target)
    cache = EvaluationCache()
    examples = parity_examples(0, 4)
    sd.evaluate(Parity(), examples, lm=fake, cache=cache)
    sd.evaluate(Parity(), examples, lm=fake, cache=cache)
    assert len(fake.calls) == 4


def test_budget_never_exceeded_under_parallel_evaluation() -> None:
    lock = threading.Lock()
    seen: list[int] = []

    def counting(messages: list[dict[str, str]]) -> str:
        with lock:
            seen.append(1)
        return "odd"

    ledger = UsageLedger(sd.Budget(max_calls=7))
    lm = LM(ScriptedLM(counting), ledger=ledger)
    with pytest.raises(sd.BudgetExceeded):
        sd.evaluate(Parity(), parity_examples(0, 40), lm=lm, threads=8)
    assert len(seen) == 7
    assert ledger.snapshot().calls == 7


def test_duplicate_ids_refused() -> None:
    examples = parity_examples(0, 2) * 2
    with pytest.raises(sd.UserInputError, match="unique"):
        sd.evaluate(Parity(), examples, lm=ScriptedLM(parity_target))


def test_failed_call_scores_zero_without_calling_any_metric() -> None:
    """Kills: a failed call scored by the metric (a metric that returns 1.0 on anything would
    then score every failed call 1.0), or by an extra (guard) metric."""
    called: list[str] = []

    def always_one(example: Example, prediction: sd.Prediction) -> float:
        called.append(example.id)
        return 1.0

    def fails_on_small(messages: list[dict[str, str]]) -> str:
        if messages[-1]["content"] in {"1", "2"}:
            raise ValueError("prompt is longer than the context window")
        return "odd"

    report = sd.evaluate(
        Parity(metric=always_one),
        parity_examples(0, 4),
        lm=LM(ScriptedLM(fails_on_small), max_retries=0),
        extra_metrics={"guard": always_one},
        threads=1,
    )
    assert report.scores == {"n0": 1.0, "n1": 0.0, "n2": 0.0, "n3": 1.0}
    assert [dict(r.extra_scores) for r in report.records][1:3] == [{"guard": 0.0}] * 2
    assert sorted(called) == ["n0", "n0", "n3", "n3"]
