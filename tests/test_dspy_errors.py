"""DSPy users' mistakes and failures, each a clear error before (or instead of) spending
(issue 19, parts 3 and 4). Targets are `ScriptedLM` FAKEs or a refused loopback port."""

from __future__ import annotations

from typing import Any

import pytest

dspy = pytest.importorskip("dspy", reason="needs the [dspy] extra: pip install -e '.[dspy]'")

from skillopt_dsl.dspy import DSPyProgramError, SkillOptimizer, bridge_lm, evaluate_program  # noqa: E402
from skillopt_dsl.errors import BudgetExceeded, DataError, MetricError  # noqa: E402
from skillopt_dsl.lm import LM, Budget, UsageLedger  # noqa: E402
from skillopt_dsl.optimizers import FormatRuleProposer, GradientText  # noqa: E402
from skillopt_dsl.reachability import TargetUnreachable  # noqa: E402
from skillopt_dsl.testing import ScriptedLM  # noqa: E402

REPLY = "[[ ## reasoning ## ]]\nrecall\n\n[[ ## answer ## ]]\nParis\n\n[[ ## completed ## ]]"


def exact(gold: Any, pred: Any, trace: Any = None) -> float:
    return float(pred.answer == gold.answer)


def rows(count: int, start: int = 0) -> list[Any]:
    return [
        dspy.Example(question=f"capital number {n}?", answer="Paris").with_inputs("question")
        for n in range(start, start + count)
    ]


def small() -> GradientText:
    return GradientText(lr=1.0, epochs=1, batch_size=4, proposers=[FormatRuleProposer()])


@pytest.fixture(autouse=True)
def no_global_dspy_lm() -> Any:
    with dspy.context(lm=None, adapter=None):
        yield


def test_skill_optimizer_fails_fast_on_an_unreachable_endpoint() -> None:
    """Kills: SkillOptimizer spending its budget on failed calls and returning normally
    (`stop=budget`, 40 errors) when nothing answers; the error names the endpoint."""
    lm = LM("openai/fake-model", api_base="http://127.0.0.1:9/v1", max_retries=0)
    tele = SkillOptimizer(exact, optimizer=small(), lm=lm, budget=Budget(max_calls=200))
    with pytest.raises(TargetUnreachable, match=r"127\.0\.0\.1:9/v1.*first failure"):
        tele.compile(
            dspy.ChainOfThought("question -> answer"), trainset=rows(4), valset=rows(6, 10)
        )


def test_dict_examples_work_as_the_compile_docstring_promises() -> None:
    """Kills: refusing dicts with an `id` (the docstring promised them) or losing their ids."""
    fake = ScriptedLM(lambda messages: REPLY)
    data = [
        {"id": f"q{n}", "question": f"capital number {n}?", "answer": "Paris"} for n in range(8)
    ]
    tele = SkillOptimizer(exact, optimizer=small(), lm=LM(fake))
    compiled = tele.compile(
        dspy.ChainOfThought("question -> answer"), trainset=data[:4], valset=data[4:]
    )
    assert compiled.skillopt.seed_val_score == 1.0
    report = evaluate_program(compiled, data[4:], exact, lm=LM(fake))
    assert report.example_ids == ("q4", "q5", "q6", "q7")


def test_errors_name_an_example_by_its_position_in_the_users_list() -> None:
    """Kills: naming examples by content hash only, which a DSPy user cannot trace to a row."""
    fake = ScriptedLM(lambda messages: REPLY)

    def picky(gold: Any, pred: Any, trace: Any = None) -> float:
        if gold.question.endswith("12?"):
            raise KeyError("no such row")
        return 1.0

    tele = SkillOptimizer(picky, optimizer=small(), lm=LM(fake))
    with pytest.raises(MetricError, match=r"valset\[2\] \(id '[0-9a-f]+'\)"):
        tele.compile(
            dspy.ChainOfThought("question -> answer"), trainset=rows(4), valset=rows(4, 10)
        )

    class Broken(dspy.Module):
        def __init__(self) -> None:
            super().__init__()
            self.answer = dspy.ChainOfThought("question -> answer")

        def forward(self, question: str) -> Any:
            if question.endswith("3?"):
                raise ZeroDivisionError("a bug")
            return self.answer(question=question)

    with pytest.raises(DSPyProgramError, match=r"examples\[3\] \(id '[0-9a-f]+'\)"):
        evaluate_program(Broken(), rows(5), exact, lm=LM(fake))


def test_examples_whose_inputs_the_program_does_not_take_are_refused_before_any_call() -> None:
    """Kills: running examples whose `.with_inputs(...)` names match none of the program's
    inputs (DSPy only warns, every call then answers an empty question)."""
    fake = ScriptedLM(lambda messages: REPLY)
    wrong = [
        dspy.Example(query=f"capital number {n}?", answer="Paris").with_inputs("query")
        for n in range(8)
    ]
    tele = SkillOptimizer(exact, optimizer=small(), lm=LM(fake))
    with pytest.raises(
        DataError, match=r"trainset\[0\].*takes \['question'\].*missing \['question'\]"
    ):
        tele.compile(
            dspy.ChainOfThought("question -> answer"), trainset=wrong[:4], valset=wrong[4:]
        )
    with pytest.raises(DataError, match=r"examples\[0\].*not taken \['query'\]"):
        evaluate_program(dspy.Predict("question -> answer"), wrong, exact, lm=LM(fake))
    assert fake.calls == []


def test_a_budget_stop_through_bridge_lm_is_our_budget_exceeded() -> None:
    """Kills: a budget stop surfacing as `dspy.utils.exceptions.LMUnexpectedError` with
    `BudgetExceeded` only in the chain (an `except BudgetExceeded` would miss it)."""
    fake = ScriptedLM(lambda messages: REPLY)
    lm = LM(fake, ledger=UsageLedger(Budget(max_calls=1)))
    program = dspy.ChainOfThought("question -> answer")
    with dspy.context(lm=bridge_lm(lm)):
        assert program(question="capital?").answer == "Paris"
        with pytest.raises(BudgetExceeded, match="max_calls=1"):
            program(question="another capital?")
    assert len(fake.calls) == 1
