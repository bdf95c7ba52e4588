"""Rubric tasks judged by the optimizer model at a stated threshold (issue 26, item 2): a pass
at a score of at least 0.8, and the judge's calls counted and stopped by the run's budget."""

from __future__ import annotations

import json

import pytest

from skillopt_dsl.errors import BudgetExceeded
from skillopt_dsl.lm import LM, Budget, UsageLedger
from skillopt_dsl.sleep.errors import SleepError
from skillopt_dsl.sleep.judge import RUBRIC_PASS, TaskJudge
from skillopt_dsl.sleep.tasks import Task, to_example
from skillopt_dsl.testing import ScriptedLM
from skillopt_dsl.types import Prediction

TASK = Task(
    id="t1",
    project="/work/app",
    intent="Explain why the login test is flaky",
    rubric="Names the race between the session write and the redirect.",
)


def _judge(grade: int, mode: str = "hard") -> tuple[TaskJudge, ScriptedLM]:
    reply = json.dumps({"score": grade, "reason": f"graded {grade}"})
    fake = ScriptedLM(lambda messages: reply, model="scripted/judge")
    return TaskJudge(mode=mode, rubric_lm=LM(fake)), fake  # type: ignore[arg-type]


def _reply(text: str = "The session write races the redirect.") -> Prediction:
    return Prediction({"response": text}, raw=text)


@pytest.mark.parametrize(("grade", "hard", "soft"), [(5, 1.0, 1.0), (4, 0.0, 0.75), (1, 0.0, 0.0)])
def test_a_rubric_passes_at_the_stated_threshold(grade: int, hard: float, soft: float) -> None:
    """Kills: a rubric scored without the 0.8 pass (a 4/5, 0.75, counted as a pass in hard
    mode) or a feedback line that does not state the threshold."""
    assert RUBRIC_PASS == 0.8
    judge, fake = _judge(grade)
    score = judge(to_example(TASK), _reply())
    assert score.value == hard and len(fake.calls) == 1
    assert f"{'>=' if hard else '<'} 0.8" in (score.feedback or "")
    soft_judge, _ = _judge(grade, mode="soft")
    assert soft_judge(to_example(TASK), _reply()).value == pytest.approx(soft)


def test_the_rubric_judge_is_the_given_model_and_sees_the_rubric() -> None:
    """Kills: a rubric task scored without asking the model (a silent pass)."""
    judge, fake = _judge(5)
    judge(to_example(TASK), _reply())
    sent = " ".join(m["content"] for m in fake.calls[0])
    assert TASK.rubric in sent and "race" in sent


def test_rubric_calls_count_on_the_run_budget() -> None:
    """Kills: judge calls made outside the run's ledger (a budget that never stops them)."""
    judge, fake = _judge(5)
    ledger = UsageLedger(Budget(max_calls=2))
    judge.bind(ledger)
    example = to_example(TASK)
    judge(example, _reply("one"))
    judge(example, _reply("two"))
    assert ledger.snapshot().calls == 2
    with pytest.raises(BudgetExceeded):
        judge(example, _reply("three"))
    assert len(fake.calls) == 2


def test_a_threshold_outside_zero_one_is_refused() -> None:
    """Kills: a pass threshold of 0 (every rubric passes) accepted silently."""
    with pytest.raises(SleepError, match="rubric_pass"):
        TaskJudge(rubric_pass=0.0)
