"""DSPy programs of every shape, trained through an OpenAI-compatible FAKE server that counts
requests (issue 25): a typed pydantic output (ChatAdapter and JSONAdapter), a loop over chunks
with `.batch()` threads and a second predictor, `dspy.BestOfN` / `dspy.Refine` around a
predictor, and a retriever with a three-output signature.

For each: the compiled program trains each predictor with text about that predictor's own
fields only, every worked example written into a predictor parses with that predictor's own
adapter, and the requests the server answered never exceed the budget and equal what the result
reports. The target is `obedient_chat_model` (it speaks ChatAdapter's and JSONAdapter's formats
and obeys the rules in its instructions); the reflection model answers "no edits".
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pydantic
import pytest

dspy = pytest.importorskip("dspy", reason="needs the [dspy] extra: pip install -e '.[dspy]'")

import skillopt_dsl as sd  # noqa: E402
from skillopt_dsl.dspy import (  # noqa: E402
    DSPyProgram,
    SkillOptimizer,
    evaluate_program,
    reach,
)
from skillopt_dsl.lm import LM, Budget  # noqa: E402
from skillopt_dsl.optimizers import DemonstrationsProposer, GradientText  # noqa: E402
from skillopt_dsl.testing.fake_server import FakeOpenAIServer  # noqa: E402
from tests.helpers import assert_closed, record_caches  # noqa: E402
from tests.test_dspy_proposals import obedient_chat_model, request_for  # noqa: E402

_OPTIMIZER_SYSTEMS = ("You improve a skill document", "You edit a skill document", "You write")


@pytest.fixture(autouse=True)
def no_global_dspy_lm() -> Any:
    with dspy.context(lm=None, adapter=None):
        yield


def serve_target(target: Callable[[list[dict[str, str]]], str]) -> FakeOpenAIServer:
    """A FAKE server: the optimizer's prompts get "no edits", the program's calls `target`."""

    def respond(messages: list[dict[str, str]]) -> str:
        if messages[0]["content"].startswith(_OPTIMIZER_SYSTEMS):
            return '{"edits": []}'
        return target(messages)

    return FakeOpenAIServer(respond, latency_s=0.0)


def serve(policy: Any) -> FakeOpenAIServer:
    """`serve_target` with an obedient chat model that answers by `policy`."""
    return serve_target(obedient_chat_model(policy))


def model(server: FakeOpenAIServer) -> LM:
    return LM("openai/fake-target", api_base=server.url, max_retries=0)


def demos_of(text: str) -> list[str]:
    """The worked examples in a predictor's instructions (paragraphs starting `Input:`)."""
    return [block for block in text.split("\n\n") if block.startswith("Input:")]


def assert_every_example_parses(program: Any, adapter: Any) -> int:
    """Every worked example in every predictor parses with `adapter` into all of the
    predictor's output fields; returns how many there are."""
    count = 0
    for name, predictor in program.named_predictors():
        for demo in demos_of(predictor.signature.instructions):
            answer = demo.split("\nAnswer:\n", 1)[1]
            parsed = adapter.parse(predictor.signature, answer)
            wanted = list(predictor.signature.output_fields)
            assert list(parsed) == wanted, (name, demo)
            assert all(parsed[k] is not None for k in wanted), (name, demo)
            count += 1
    return count


def proposals(run_dir: Path, predictor: str) -> str:
    lines = (run_dir / predictor / "events.jsonl").read_text(encoding="utf-8").splitlines()
    return json.dumps([e for e in map(json.loads, lines) if e.get("event") == "proposal"])


# -- a typed Predict with a pydantic output ----------------------------------------------------


class Person(pydantic.BaseModel):
    name: str
    age: int


class ExtractPerson(dspy.Signature):
    """Extract the person the sentence is about."""

    sentence: str = dspy.InputField()
    person: Person = dspy.OutputField()


NAMES = ["Alice", "Bruno", "Chen", "Dana", "Emil", "Fay", "Gus", "Hana", "Ivo", "Jan", "Kai",
         "Lea", "Mo", "Nia", "Oto", "Pia"]  # fmt: skip


def people(start: int, count: int) -> list[Any]:
    return [
        dspy.Example(
            sentence=f"{NAMES[n % 16]} turned {20 + n} this year.",
            person=Person(name=NAMES[n % 16], age=20 + n),
        ).with_inputs("sentence")
        for n in range(start, start + count)
    ]


def person_policy(system: str, inputs: dict[str, str], wanted: list[str]) -> dict[str, Any]:
    """Right for names A-E; for the others only once its instructions hold a worked example."""
    name, _, rest = inputs.get("sentence", "? turned 0").partition(" turned ")
    knows = "Input:" in system or name[:1] in "ABCDE"
    return {"person": {"name": name if knows else name.lower(), "age": int(rest.split()[0])}}


@pytest.mark.parametrize("adapter", [dspy.ChatAdapter(), dspy.JSONAdapter()], ids=["chat", "json"])
def test_pydantic_labels_reach_the_metric_as_models_and_examples_parse(adapter: Any) -> None:
    """Kills: labels rebuilt from `Example.toDict()` (the metric's `gold.person.name` raises
    `AttributeError: 'dict' object has no attribute 'name'` under compile and
    `evaluate_program`), and worked examples the program's own adapter cannot parse."""
    golds: list[Any] = []

    def same_person(gold: Any, pred: Any, trace: Any = None) -> float:
        golds.append(gold.person)
        return float(pred.person is not None and pred.person.name == gold.person.name)

    with serve(person_policy) as server, dspy.context(adapter=adapter):
        tele = SkillOptimizer(
            same_person,
            optimizer=GradientText(
                lr=1.0, epochs=1, batch_size=8, proposers=[DemonstrationsProposer(per_step=2)]
            ),
            lm=model(server),
            budget=Budget(max_calls=80),
            threads=2,
        )
        compiled = tele.compile(dspy.Predict(ExtractPerson), trainset=people(0, 8),
                                valset=people(8, 8))  # fmt: skip
        assert server.requests == compiled.skillopt.usage.calls <= 80
        report = evaluate_program(compiled, people(0, 8), same_person, lm=model(server))
    assert golds and all(isinstance(g, Person) for g in golds)
    assert compiled.skillopt.val_score == 1.0 and report.mean == 1.0
    assert assert_every_example_parses(compiled, adapter) >= 1


# -- a loop over chunks (`.batch()` threads) and a combining predictor -----------------------


class Loop(dspy.Module):
    """`summarize` reads each chunk (in `.batch()` threads), `combine` joins the summaries.

    Program runs are evaluated one at a time here: DSPy's `.batch()` opens a tqdm bar even
    when disabled, and two opened at once in different threads can raise tqdm's
    `KeyError: <weakref ... 'tqdm'>` (seen about once in three runs with `threads=2`)."""

    def __init__(self) -> None:
        super().__init__()
        self.summarize = dspy.Predict("chunk -> summary")
        self.combine = dspy.Predict("summaries -> answer")

    def forward(self, document: str) -> Any:
        chunks = [dspy.Example(chunk=c).with_inputs("chunk") for c in document.split(" | ")]
        outs = self.summarize.batch(chunks, num_threads=2, disable_progress_bar=True)
        return self.combine(summaries=", ".join(str(o.summary) for o in outs))


FRUITS = ["apple", "pear", "fig", "plum"]


def documents(start: int, count: int) -> list[Any]:
    rows = []
    for n in range(start, start + count):
        bits = [(n >> i) & 1 for i in range(4)]
        text = " | ".join(f"{f} has {b}" for f, b in zip(FRUITS, bits, strict=True))
        answer = "".join(map(str, bits))
        rows.append(dspy.Example(document=text, answer=answer).with_inputs("document"))
    return rows


def loop_policy(system: str, inputs: dict[str, str], wanted: list[str]) -> dict[str, Any]:
    """`summarize` gives the chunk's digit; `combine` writes them with commas until its
    instructions state the answer's shape ("4 digits") or show a worked example."""
    if "summary" in wanted:
        return {"summary": inputs["chunk"].split()[-1]}
    joined = inputs["summaries"]
    fixed = "4 digits" in system or "Input:" in system
    return {"answer": joined.replace(", ", "") if fixed else joined}


def exact(gold: Any, pred: Any, trace: Any = None) -> float:
    return float(str(pred.answer).strip() == gold.answer)


def test_loop_program_label_rules_reach_only_the_predictor_of_the_labelled_field(
    tmp_path: Path,
) -> None:
    """Kills: the answer-shape rule mined from the program's `answer` labels ("The summary is
    one word: 4 digits ...") proposed to the intermediate `summarize` predictor, and any label
    text proposed to it; the `.batch()` threads' calls lost from the trace; the budget broken
    by threaded calls."""
    with serve(loop_policy) as server:
        tele = SkillOptimizer(
            exact,
            optimizer=GradientText(lr=1.0, epochs=1, batch_size=8),
            lm=model(server),
            budget=Budget(max_calls=400),
            threads=1,  # `.batch()` threads inside; several at once race in tqdm (see below)
            run_dir=tmp_path,
        )
        compiled = tele.compile(Loop(), trainset=documents(0, 8), valset=documents(8, 8))
        assert server.requests == compiled.skillopt.usage.calls <= 400
    summarize = proposals(tmp_path, "summarize")
    assert "digits" not in summarize and "answer" not in summarize
    assert "4 digits" in proposals(tmp_path, "combine")
    assert "4 digits" in compiled.combine.signature.instructions
    assert "digits" not in compiled.summarize.signature.instructions
    assert compiled.skillopt.val_score == 1.0
    assert_every_example_parses(compiled, dspy.ChatAdapter())


def test_an_intermediate_predictors_traced_example_comes_from_its_own_run() -> None:
    """Kills: worked examples for `summarize` from runs whose final answer was wrong, or from
    the labels (which hold no summary); its examples carry its own inputs and outputs."""
    program = DSPyProgram(Loop(), exact, inputs=("document",))
    module = program.module("summarize")
    rows = sd.data.as_examples(documents(0, 8), where="trainset")

    def half_right(system: str, inputs: dict[str, str], wanted: list[str]) -> dict[str, Any]:
        if "summary" in wanted:
            return {"summary": inputs["chunk"].split()[-1]}
        digits = inputs["summaries"].replace(", ", "")
        return {"answer": digits if digits.count("1") % 2 == 0 else "wrong"}

    with serve(half_right) as server:
        report = sd.evaluate(module, rows, lm=model(server), threads=1)
    assert [r.score for r in report.records] == [1.0, 0.0, 0.0, 1.0, 0.0, 1.0, 1.0, 0.0]
    demos = [module.worked_example(e, r) for e, r in zip(rows, report.records, strict=True)]
    assert [d is not None for d in demos] == [r.score == 1.0 for r in report.records]
    assert demos[0] == "Input:\nchunk: fig has 0\nAnswer:\n[[ ## summary ## ]]\n0"  # shortest
    assert all("answer" not in d for d in demos if d is not None)


# -- BestOfN / Refine around a ChainOfThought predictor --------------------------------------


def capital_policy(system: str, inputs: dict[str, str], wanted: list[str]) -> dict[str, Any]:
    if "advice" in wanted:  # dspy.Refine's own feedback predictor
        return {"discussion": "none", "advice": {"module.predict": "answer with the city"}}
    city = inputs.get("question", "").rsplit(" ", 1)[-1].rstrip("?")
    hinted = "hinted, " if "hint_" in inputs else ""
    return {"reasoning": f"{hinted}it is {city}", "answer": city}


def questions(count: int) -> list[Any]:
    return [
        dspy.Example(question=f"Which city is named Town{n}?", answer=f"Town{n}").with_inputs(
            "question"
        )
        for n in range(count)
    ]


def wrappers() -> Iterator[tuple[str, Any]]:
    def reward(args: dict[str, Any], pred: Any) -> float:
        """A second attempt on every question; Refine's (with its hint) wins."""
        return 1.0 if str(pred.reasoning).startswith("hinted") else 0.0

    yield "BestOfN", dspy.BestOfN(dspy.ChainOfThought("question -> answer"), 2, reward, 1.0)
    yield "Refine", dspy.Refine(dspy.ChainOfThought("question -> answer"), 2, reward, 1.0)


@pytest.mark.parametrize(("kind", "wrapped"), list(wrappers()), ids=["BestOfN", "Refine"])
def test_wrapper_copies_are_attributed_to_the_predictor_they_were_copied_from(
    kind: str, wrapped: Any
) -> None:
    """Kills: matching traced calls to the trained predictor by identity: BestOfN and Refine
    run deep copies, so reflection read "predictor 'module.predict' gave no parsed output"
    beside a real answer, and no worked example came from their traces; and Refine's `hint_`
    input (not the predictor's own field) copied into a worked example."""
    program = DSPyProgram(wrapped, exact, inputs=("question",))
    module = program.module("module.predict")
    rows = sd.data.as_examples(questions(4), where="trainset")
    with serve(capital_policy) as server:
        lm = model(server)
        report = sd.evaluate(module, rows, lm=lm)
        requests = server.requests
    assert [r.score for r in report.records] == [1.0] * 4
    assert lm.ledger.snapshot().calls == requests > 4  # retries (and Refine's advice) counted
    case = module.reflection_case(rows[0], report.records[0])
    assert "gave no parsed output" not in case, kind
    assert '"answer": "Town0"' in case and "hint_" not in case
    demo = module.worked_example(rows[0], report.records[0])
    assert demo is not None and "hint_" not in demo
    answer = demo.split("\nAnswer:\n", 1)[1]
    parsed = dspy.ChatAdapter().parse(program.signature("module.predict"), answer)
    assert parsed["answer"] == "Town0" and parsed["reasoning"].endswith("it is Town0")


# -- a retriever in forward and a three-output signature --------------------------------------

FACTS = {f"Town{n}": f"Town{n} lies on river R{n}." for n in range(32)}


class Cited(dspy.Module):
    """A Python retriever, then one ChainOfThought with three outputs."""

    def __init__(self) -> None:
        super().__init__()
        self.respond = dspy.ChainOfThought("context, question -> answer, confidence: float, source")

    def forward(self, question: str) -> Any:
        town = question.rsplit(" ", 1)[-1].rstrip("?")
        return self.respond(context=FACTS.get(town, ""), question=question)


def river_questions(start: int, count: int) -> list[Any]:
    return [
        dspy.Example(question=f"Which river passes Town{n}?", answer=f"R{n}").with_inputs(
            "question"
        )
        for n in range(start, start + count)
    ]


def river_policy(system: str, inputs: dict[str, str], wanted: list[str]) -> dict[str, Any]:
    """Right on even towns; on odd ones only once its instructions hold a worked example."""
    context = inputs.get("context", "")
    river = context.rsplit(" ", 1)[-1].rstrip(".")
    knows = "Input:" in system or int(river[1:] or 0) % 2 == 0
    return {
        "reasoning": "read the context",
        "answer": river if knows else "unknown",
        "confidence": 0.9,
        "source": context.split(" ", 1)[0],
    }


@pytest.mark.parametrize("adapter", [dspy.ChatAdapter(), dspy.JSONAdapter()], ids=["chat", "json"])
def test_three_output_examples_carry_every_output_field(adapter: Any) -> None:
    """Kills: worked examples from the labels with only `answer` (the adapter then fails
    `Expected [reasoning, answer, confidence, source] ... Actual [answer]`), and a label
    example without ChainOfThought's `reasoning`."""
    with serve(river_policy) as server, dspy.context(adapter=adapter):
        tele = SkillOptimizer(
            exact,
            optimizer=GradientText(
                lr=1.0, epochs=1, batch_size=8, proposers=[DemonstrationsProposer(per_step=2)]
            ),
            lm=model(server),
            budget=Budget(max_calls=80),
            threads=2,
        )
        compiled = tele.compile(Cited(), trainset=river_questions(0, 8),
                                valset=river_questions(8, 16))  # fmt: skip
        assert server.requests == compiled.skillopt.usage.calls <= 80
    assert compiled.skillopt.val_score == 1.0
    assert assert_every_example_parses(compiled, adapter) >= 1
    text = compiled.respond.predict.signature.instructions
    assert "null" not in text and re.search(r"confidence\W+0\.9", text)


def test_no_answer_shape_rule_is_mined_from_a_pydantic_label() -> None:
    """Kills: a Python-repr shape rule ("... (like {'name': 'Alice', 'age': 20})") mined from
    the labels of a pydantic output field; and labels reaching the metric as dicts when the
    program is run through `DSPyProgram` directly (rebuilt into the field's model)."""
    from skillopt_dsl.optimizers.proposers.answer_shape import AnswerShapeProposer

    def same_name(gold: Any, pred: Any, trace: Any = None) -> float:
        return float(pred.person.name == gold.person.name)

    program = DSPyProgram(dspy.Predict(ExtractPerson), same_name, inputs=("sentence",))
    module = program.module("self")
    rows = sd.data.as_examples(people(0, 6), where="trainset")
    assert [module.labelled_answer(e) for e in rows] == [None] * 6
    with serve(lambda system, inputs, wanted: {"person": {"name": "x", "age": 1}}) as server:
        report = sd.evaluate(module, rows, lm=model(server))
        request = request_for(module, rows, report, model(server))
    assert [r.score for r in report.records] == [0.0] * 6  # the metric read the labels' names
    assert AnswerShapeProposer().propose(request) == []


def test_the_reach_probe_closes_its_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Kills: the cache of the reach probe (a program of two predictors, run once before the
    search) left open until garbage collection, its SQLite `-wal` and `-shm` files beside the
    run's by chance."""
    opened = record_caches(monkeypatch, reach)
    with serve(loop_policy) as server:
        SkillOptimizer(
            exact, optimizer=GradientText(lr=1.0, epochs=1, batch_size=8), lm=model(server),
            budget=Budget(max_calls=200), threads=1, run_dir=tmp_path,
        ).compile(Loop(), trainset=documents(0, 8), valset=documents(8, 8))  # fmt: skip
    assert opened, "the probe ran no cache"
    for cache in opened:
        assert_closed(cache)
