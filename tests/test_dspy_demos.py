"""Demos as a trainable part of a DSPy program (`SkillOptimizer(demos=True)`, issue 25 item 7).

The FAKE target below learns only from demos: it answers a review's code word right when a
demo turn of the request (a user/assistant pair before the input) shows that word with its
label, and says "negative" otherwise; worked examples written into the instructions teach it
nothing. Requests are counted at an OpenAI-compatible fake server.
"""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Literal, cast

import pytest

dspy = pytest.importorskip("dspy", reason="needs the [dspy] extra: pip install -e '.[dspy]'")

from skillopt_dsl.dspy import DSPyProgram, SkillOptimizer  # noqa: E402
from skillopt_dsl.dspy.demos import render_demo, split_demos, with_demos  # noqa: E402
from skillopt_dsl.dspy.program import ProgramTrace  # noqa: E402
from skillopt_dsl.lm import LM, Budget  # noqa: E402
from skillopt_dsl.optimizers import DemonstrationsProposer, GradientText  # noqa: E402
from skillopt_dsl.testing.fake_server import FakeOpenAIServer  # noqa: E402
from skillopt_dsl.types import Example  # noqa: E402

_WORD = re.compile(r"\b(zorp|blick)\b")
_ANSWER = re.compile(r"\[\[ ## answer ## \]\]\s*(\w+)")


class CodedSentiment(dspy.Signature):
    """Classify the sentiment of a coded product review."""

    review: str = dspy.InputField()
    answer: Literal["positive", "negative"] = dspy.OutputField()


def reviews(start: int, count: int) -> list[Any]:
    return [
        dspy.Example(
            review=f"review {n}: {'zorp' if n % 2 == 0 else 'blick'}",
            answer="positive" if n % 2 == 0 else "negative",
        ).with_inputs("review")
        for n in range(start, start + count)
    ]


def demo_follower(messages: list[dict[str, str]]) -> str:
    """A FAKE ChatAdapter target that follows demo turns only (see the module docstring);
    the optimizer's prompts get "no edits"."""
    if messages[0]["content"].startswith(("You improve", "You edit", "You write")):
        return '{"edits": []}'
    taught: dict[str, str] = {}
    turns = messages[1:-1]
    for user, assistant in zip(turns[::2], turns[1::2], strict=False):
        word, label = _WORD.search(user["content"]), _ANSWER.search(assistant["content"])
        if word and label:
            taught[word.group(1)] = label.group(1)
    word = _WORD.search(messages[-1]["content"])
    answer = taught.get(word.group(1) if word else "", "negative")
    return f"[[ ## answer ## ]]\n{answer}\n\n[[ ## completed ## ]]"


def exact(gold: Any, pred: Any, trace: Any = None) -> float:
    return float(pred.answer == gold.answer)


@pytest.fixture(autouse=True)
def no_global_dspy_lm() -> Any:
    with dspy.context(lm=None, adapter=None):
        yield


def train(server: FakeOpenAIServer, student: Any, *, demos: bool | None) -> Any:
    """`SkillOptimizer` over the fake server; `demos=None` leaves the setting at its default."""
    chosen = {} if demos is None else {"demos": demos}
    tele = SkillOptimizer(
        exact,
        optimizer=GradientText(
            lr=1.0, epochs=1, batch_size=8, proposers=[DemonstrationsProposer(per_step=2)]
        ),
        lm=LM("openai/fake-target", api_base=server.url, max_retries=0),
        budget=Budget(max_calls=150),
        threads=2,
        **chosen,
    )
    return tele.compile(student, trainset=reviews(0, 8), valset=reviews(8, 30))


def test_demos_are_learned_through_the_gate_and_compiled_into_predictor_demos(
    tmp_path: Path,
) -> None:
    """Kills: worked examples written into the instructions with demos on (the fake target
    learns nothing from them), `built` not turning the `## Examples` section into
    `predictor.demos`, demos that the ChatAdapter cannot parse, a student mutated by the run,
    and requests past the budget."""
    student = dspy.Predict(CodedSentiment)
    seed_instructions = student.signature.instructions
    with FakeOpenAIServer(demo_follower, latency_s=0.0) as server:
        compiled = train(server, student, demos=True)
        assert server.requests == compiled.skillopt.usage.calls <= 150
    result = compiled.skillopt
    assert (result.seed_val_score, result.val_score) == (0.5, 1.0)
    assert [d.accepted for d in result.predictors["self"].result.gate_log] == [True]
    (predictor,) = [p for _, p in compiled.named_predictors()]
    assert predictor.demos and "Input:" not in predictor.signature.instructions
    assert "## Examples" not in predictor.signature.instructions
    assert {d.answer for d in predictor.demos} >= {"positive"}
    adapter = dspy.ChatAdapter()
    for demo in predictor.demos:
        assert set(demo.inputs()) == {"review"}
        answer = adapter.format_assistant_message_content(CodedSentiment, demo)
        assert adapter.parse(CodedSentiment, answer) == {"answer": demo.answer}
    assert student.demos == [] and student.signature.instructions == seed_instructions
    compiled.save(str(tmp_path / "program.json"))
    loaded = dspy.Predict(CodedSentiment)
    loaded.load(str(tmp_path / "program.json"))
    assert [dict(d.items()) for d in loaded.demos] == [dict(d.items()) for d in predictor.demos]
    assert loaded.signature.instructions == predictor.signature.instructions


@pytest.mark.parametrize("demos", [None, False], ids=["default", "off"])
def test_without_demos_worked_examples_stay_in_the_instructions(demos: bool | None) -> None:
    """Kills: demos turned on by default (the student's instructions would lose their worked
    examples to `predictor.demos` without being asked)."""
    with FakeOpenAIServer(demo_follower, latency_s=0.0) as server:
        compiled = train(server, dspy.Predict(CodedSentiment), demos=demos)
        assert server.requests == compiled.skillopt.usage.calls <= 150
    (predictor,) = [p for _, p in compiled.named_predictors()]
    assert predictor.demos == []
    assert compiled.skillopt.val_score == compiled.skillopt.seed_val_score == 0.5


def test_the_students_own_demos_are_the_seed_and_stay_unless_the_gate_changes_them() -> None:
    """Kills: the student's demos dropped from the seed skill (a demos=True run would erase
    them without a gate decision), and demos read from other sections or other fields."""
    student = dspy.Predict(CodedSentiment)
    student.demos = [
        dspy.Example(review="review 90: zorp", answer="positive").with_inputs("review"),
        dspy.Example(review="partial, no answer"),
    ]
    program = DSPyProgram(student, exact, inputs=("review",), demos=True)
    seed = program.instructions["self"]
    assert seed.endswith(
        "## Examples\n\n" + render_demo({"review": "review 90: zorp"}, {"answer": "positive"})
    )
    (built,) = [p for _, p in program.built().named_predictors()]
    assert [d.toDict() for d in built.demos] == [
        {"review": "review 90: zorp", "answer": "positive"}
    ]
    assert built.signature.instructions == student.signature.instructions
    off = DSPyProgram(student, exact, inputs=("review",))
    assert off.instructions["self"] == student.signature.instructions
    (kept,) = [p for _, p in off.built().named_predictors()]
    assert len(kept.demos) == 2


def test_only_demo_paragraphs_of_the_examples_section_leave_the_instructions() -> None:
    """Kills: a split that drops prose of the `## Examples` section, takes a paragraph naming
    another predictor's fields as a demo, or reads demos from another section."""
    other = 'Input: {"question": "q"}\nAnswer: {"answer": "positive"}'
    mine = render_demo({"review": "r"}, {"answer": "negative"})
    assert with_demos("Be brief.", CodedSentiment, []) == "Be brief."
    text = f"Be brief.\n\n## Rules\n\n{mine}\n\n## Examples\n\nShort ones.\n\n{other}\n\n{mine}"
    instructions, demos = split_demos(text, CodedSentiment)
    assert [d.toDict() for d in demos] == [{"review": "r", "answer": "negative"}]
    assert (
        instructions == f"Be brief.\n\n## Rules\n\n{mine}\n\n## Examples\n\nShort ones.\n\n{other}"
    )


def test_a_traced_call_missing_an_input_field_gives_no_demo() -> None:
    """Kills: a demo written from a traced call that lacks one of the predictor's input
    fields (a wrapper's call with other keys): DSPy would show it as "Not supplied"."""
    program = DSPyProgram(dspy.Predict(CodedSentiment), exact, inputs=("doc",), demos=True)
    module = program.module("self")
    example = Example(id="x", inputs={"doc": "d"}, labels={"answer": "positive"})
    call = (None, {"hint_": "h"}, dspy.Prediction(answer="positive"))
    trace = ProgramTrace(gold=None, prediction=None, trace=(call,), pred_trace=(call,))
    rollout = SimpleNamespace(score=1.0, trace=trace)
    assert module.worked_example(example, cast(Any, rollout)) is None
    full = (None, {"review": "r"}, dspy.Prediction(answer="positive"))
    rollout.trace = ProgramTrace(gold=None, prediction=None, trace=(full,), pred_trace=(full,))
    assert module.worked_example(example, cast(Any, rollout)) == render_demo(
        {"review": "r"}, {"answer": "positive"}
    )


def test_a_demo_paragraph_of_another_predictors_fields_never_becomes_this_predictors_demo() -> None:
    """Kills (issue 38, item 7): `_demo` taking a paragraph whose answer holds another
    predictor's output field (`summary`), or whose input adds another predictor's input
    (`question`) to this one's, as a demo of this predictor; it stays in the instructions."""
    foreign = [
        'Input: {"review": "r"}\nAnswer: {"summary": "s"}',
        'Input: {"review": "r"}\nAnswer: {"answer": "positive", "summary": "s"}',
        'Input: {"review": "r", "question": "q"}\nAnswer: {"answer": "positive"}',
    ]
    mine = render_demo({"review": "r"}, {"answer": "negative"})
    for paragraph in foreign:
        text = f"Be brief.\n\n## Examples\n\n{paragraph}\n\n{mine}"
        instructions, demos = split_demos(text, CodedSentiment)
        assert [d.toDict() for d in demos] == [{"review": "r", "answer": "negative"}]
        assert instructions == f"Be brief.\n\n## Examples\n\n{paragraph}"
