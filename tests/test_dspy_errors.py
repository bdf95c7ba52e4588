"""DSPy users' mistakes and failures, each a clear error before (or instead of) spending
(issue 19, parts 3 and 4). Targets are `ScriptedLM` FAKEs or a refused loopback port."""

from __future__ import annotations

from typing import Any

import pytest

dspy = pytest.importorskip("dspy", reason="needs the [dspy] extra: pip install -e '.[dspy]'")

from skillopt_dsl.dspy import (  # noqa: E402
    DSPyProgramError,
    RawSkillAdapter,
    SkillOptimizer,
    bridge_lm,
    evaluate_program,
)
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


# -- errors that point the right way (issue 25, item 6) ---------------------------------------


def capitals(count: int, start: int = 0) -> list[dict[str, Any]]:
    """Dict rows with explicit ids (so messages can be compared whole)."""
    return [
        {"id": f"q{n}", "question": f"capital number {n}?", "answer": "Paris"}
        for n in range(start, start + count)
    ]


def failure(call: Any) -> str:
    with pytest.raises(Exception) as caught:
        call()
    return str(caught.value)


def cot_compile(metric: Any, rows: list[Any], val: list[Any] | None = None, **kwargs: Any) -> Any:
    tele = SkillOptimizer(metric, optimizer=small(), lm=LM(ScriptedLM(lambda m: REPLY)), **kwargs)
    return tele.compile(dspy.ChainOfThought("question -> answer"), trainset=rows, valset=val)


def test_a_metric_error_blames_the_label_when_the_prediction_is_complete() -> None:
    """Kills: every `MetricError` ending "it must handle predictions whose fields are None",
    also when every field of the prediction is set and the label is what the metric chokes on
    (a dict label read as an object)."""

    def reads_a_model(gold: Any, pred: Any, trace: Any = None) -> float:
        return float(pred.answer == gold.answer.name)

    assert failure(lambda: cot_compile(reads_a_model, capitals(4), capitals(4, 10))) == (
        "metric 'reads_a_model' raised AttributeError: 'str' object has no attribute 'name' on "
        "valset[0] (id 'q10'); fix the metric or this example's labels ['answer'] (every field "
        "of the prediction is set here)"
    )

    def strict(gold: Any, pred: Any, trace: Any = None) -> float:
        return float(pred.answer.lower() == gold.answer.lower())

    empty = LM(ScriptedLM(lambda m: ""))
    program = dspy.Predict("question -> answer")
    assert failure(
        lambda: evaluate_program(program, capitals(2), strict, lm=empty, adapter=RawSkillAdapter())
    ) == (
        "metric 'strict' raised AttributeError: 'NoneType' object has no attribute 'lower' on "
        "examples[0] (id 'q0'); fix the metric: the prediction's fields ['answer'] are None "
        "here (an output that could not be parsed, or a program that returned nothing), so it "
        "must handle None"
    )


def test_a_metric_value_out_of_range_names_the_examples_position() -> None:
    """Kills: a metric returning 10.0 or None named by example id only."""

    def out_of_range(gold: Any, pred: Any, trace: Any = None) -> Any:
        return 10.0 if gold.question.endswith("12?") else None

    assert failure(lambda: cot_compile(out_of_range, capitals(4), capitals(4, 10))) == (
        "metric 'out_of_range' returned None for valset[0] (id 'q10'); return a bool, a float "
        "in [0, 1] or dspy.Prediction(score=<float in [0, 1]>, feedback=<text>)"
    )


def test_a_row_missing_the_programs_input_names_the_programs_inputs() -> None:
    """Kills: the data loader's "Fix input_fields/label_fields/id_field" for a dict row or a
    dspy.Example without `.with_inputs`, settings SkillOptimizer does not have."""
    rows = [{"q": f"capital number {n}?", "answer": "Paris"} for n in range(4)]
    assert failure(lambda: cot_compile(exact, rows, capitals(4, 10))) == (
        "trainset[0] has no ['question'] (its keys: ['answer', 'q']), but the program "
        "ChainOfThought takes ['question']; give every row the program's inputs under those "
        "names, or mark a dspy.Example's inputs with .with_inputs(...)"
    )
    unmarked = [dspy.Example(q="capital?", answer="Paris")] * 2
    assert failure(
        lambda: evaluate_program(dspy.Predict("question -> answer"), unmarked, exact)
    ).startswith(
        "examples[0] has no ['question'] (its keys: ['answer', 'q']), but the program Predict"
    )


def test_a_configured_dspy_lm_refusal_points_at_the_lm_itself() -> None:
    """Kills: the refusal suggesting lm='<that model string>', which drops the configured
    LM's api_base and key."""
    configured = dspy.LM("openai/served", api_base="http://127.0.0.1:9/v1")
    tele = SkillOptimizer(exact, optimizer=small())
    program = dspy.ChainOfThought("question -> answer")
    with dspy.context(lm=configured):
        assert failure(
            lambda: tele.compile(program, trainset=capitals(4), valset=capitals(4, 10))
        ) == (
            "dspy is configured with 'openai/served', but SkillOptimizer does not read DSPy's "
            "settings: pass lm=dspy.settings.lm (that dspy.LM, with its api_base, key and "
            "settings; every call then goes through skillopt's ledger and budget). None means "
            "the embedded local/smollm2-135m, which would silently replace it"
        )


def test_valset_equal_to_trainset_is_refused_by_position() -> None:
    """Kills: `valset=trainset` refused with content ids only (the driver's leak check)."""
    rows = capitals(6)
    assert failure(lambda: cot_compile(exact, rows, rows)) == (
        "6 valset example(s) are also in trainset (valset[0] = trainset[0], valset[1] = "
        "trainset[1], valset[2] = trainset[2], valset[3] = trainset[3], valset[4] = trainset[4] "
        "and 1 more; ids ['q0', 'q1', 'q2', 'q3', 'q4']): the gate must judge on examples the "
        "training never saw; pass examples disjoint from trainset, or leave valset out to let "
        "SkillOptimizer split the trainset"
    )
