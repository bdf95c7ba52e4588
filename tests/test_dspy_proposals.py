"""What the proposers write into a DSPy predictor's instructions (issue 19, part 1).

Programs written as DSPy's tutorials write them: a typed `Predict` classifier with a `Literal`
output, a `ChainOfThought` QA, a two-`ChainOfThought` multi-hop with a Python search step, and
`dspy.ReAct` with two tools, all through DSPy's default `ChatAdapter`. The target is a FAKE
model that speaks ChatAdapter's `[[ ## field ## ]]` format and *obeys* format rules it finds in
its instructions (a JSON rule makes it answer JSON, which costs ChatAdapter a parse failure and a
second call), so a proposal that contradicts the adapter shows up as lost score or extra calls.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import pytest

dspy = pytest.importorskip("dspy", reason="needs the [dspy] extra: pip install -e '.[dspy]'")

import skillopt_dsl as sd  # noqa: E402
from skillopt_dsl.dspy import DSPyProgram, SkillOptimizer, evaluate_program  # noqa: E402
from skillopt_dsl.lm import LM  # noqa: E402
from skillopt_dsl.optimizers import (  # noqa: E402
    DemonstrationsProposer,
    FormatRuleProposer,
    GradientText,
    ReflectiveProposer,
)
from skillopt_dsl.optimizers.proposers import ProposalRequest  # noqa: E402
from skillopt_dsl.testing import ScriptedLM  # noqa: E402

Policy = Callable[[str, dict[str, str], list[str]], dict[str, Any]]
_FIELD = re.compile(r"\[\[ ## (\w+) ## \]\]\n(.*?)(?=\n\n\[\[ ## |\Z)", re.S)


def obedient_chat_model(policy: Policy) -> Callable[[list[dict[str, str]]], str]:
    """A FAKE target speaking DSPy's ChatAdapter (and JSONAdapter) format. `policy(system,
    inputs, wanted)` picks the output values (`inputs["_body"]`: the whole request). Like an instruction-following model, it obeys the
    format rules in its instructions: "Write nothing else" gets a bare value, an instruction
    asking for JSON (a rule, or worked answers written as JSON objects) gets JSON."""

    def respond(messages: list[dict[str, str]]) -> str:
        system, user = messages[0]["content"], messages[-1]["content"]
        body, _, request = user.partition("Respond with")
        inputs = {k: v.strip() for k, v in _FIELD.findall(body)} | {"_body": body}
        if request.startswith(" a JSON object"):
            wanted = re.findall(r"`(\w+)`", request)
        else:
            wanted = [m for m in re.findall(r"\[\[ ## (\w+) ## \]\]", request) if m != "completed"]
        values = policy(system, inputs, wanted)
        asks_json = "JSON object" in system or re.search(r"Answer: \{", system) is not None
        if request.startswith(" a JSON object") or asks_json:
            return json.dumps(values)
        if "Write nothing else" in system:
            return str(next(iter(values.values())))
        chunks = [
            f"[[ ## {k} ## ]]\n{v if isinstance(v, str) else json.dumps(v)}"
            for k, v in values.items()
        ]
        return "\n\n".join([*chunks, "[[ ## completed ## ]]"])

    return respond


def exact(gold: Any, pred: Any, trace: Any = None) -> float:
    return float(str(pred.answer).strip().lower() == str(gold.answer).lower())


@pytest.fixture(autouse=True)
def no_global_dspy_lm() -> Any:
    with dspy.context(lm=None, adapter=None):
        yield


def request_for(module: Any, examples: list[Any], report: Any, optimizer_lm: LM) -> ProposalRequest:
    return ProposalRequest(
        module=module,
        skill=module.seed_skill,
        batch=examples,
        rollouts=report.records,
        trainset=examples,
        rejected=[],
        optimizer_lm=optimizer_lm,
        rng=random.Random(0),
        budget_tokens=2000,
    )


def added_text(groups: list[Any]) -> str:
    return "\n\n".join(getattr(e, "text", "") for g in groups for e in g.edits)


# -- a typed Predict classifier (Literal output) ----------------------------------------------


class Sentiment(dspy.Signature):
    """Classify the sentiment of a product review."""

    review: str = dspy.InputField()
    answer: Literal["positive", "negative"] = dspy.OutputField()


def reviews(start: int, count: int) -> list[Any]:
    rows = []
    for n in range(start, start + count):
        good = n % 2 == 0
        review = f"review {n}: {'loved it' if good else 'broke at once'}"
        rows.append(
            dspy.Example(review=review, answer="positive" if good else "negative").with_inputs(
                "review"
            )
        )
    return rows


def sentiment_policy(system: str, inputs: dict[str, str], wanted: list[str]) -> dict[str, Any]:
    """Right only once its instructions name the allowed values; "meh" (unparseable) before."""
    if "exactly one of: positive, negative" not in system:
        return dict.fromkeys(wanted, "meh")
    return {"answer": "positive" if "loved" in inputs.get("review", "") else "negative"}


def test_format_rule_for_a_chat_adapter_classifier_keeps_chat_format() -> None:
    """Kills: a ChatAdapter program's format rule written for our own renderer ("Reply with
    exactly one of: ... Write nothing else."): an obedient model then drops the markers, every
    call fails ChatAdapter's parse and costs a JSON fallback, and nothing passes the gate."""
    fake = ScriptedLM(obedient_chat_model(sentiment_policy))
    tele = SkillOptimizer(
        exact,
        optimizer=GradientText(lr=1.0, epochs=1, batch_size=6, proposers=[FormatRuleProposer()]),
        lm=LM(fake),
        threads=2,
    )
    compiled = tele.compile(
        dspy.Predict(Sentiment), trainset=reviews(0, 6), valset=reviews(100, 12)
    )
    instructions = compiled.signature.instructions
    assert (
        "`[[ ## answer ## ]]`" in instructions
        and "exactly one of: positive, negative" in instructions
    )
    assert "Write nothing else" not in instructions and "JSON" not in instructions
    assert compiled.skillopt.val_score == 1.0
    before = len(fake.calls)
    report = evaluate_program(compiled, reviews(200, 8), exact, lm=LM(fake))
    assert report.mean == 1.0 and len(fake.calls) - before == 8  # one call each: no fallback


# -- ChainOfThought QA -----------------------------------------------------------------------

CAPITALS = {"France": "Paris", "Peru": "Lima", "Chad": "Ndjamena", "Fiji": "Suva", "Iraq": "Baghdad",
            "Laos": "Vientiane", "Mali": "Bamako", "Oman": "Muscat", "Togo": "Lome", "Cuba": "Havana",
            "Iran": "Tehran", "Niue": "Alofi", "Nepal": "Kathmandu", "Qatar": "Doha", "Yemen": "Sanaa",
            "Gabon": "Libreville", "Ghana": "Accra", "Kenya": "Nairobi", "Malta": "Valletta",
            "Samoa": "Apia", "Tonga": "Nukualofa", "Benin": "Porto-Novo", "Chile": "Santiago",
            "Egypt": "Cairo"}  # fmt: skip


def capitals(names: list[str]) -> list[Any]:
    return [
        dspy.Example(question=f"What is the capital of {c}?", answer=CAPITALS[c]).with_inputs(
            "question"
        )
        for c in names
    ]


def qa_policy(system: str, inputs: dict[str, str], wanted: list[str]) -> dict[str, Any]:
    """Right on countries A-F; on the others only once its instructions hold a worked example
    (any)."""
    country = re.sub(r"^.* of |\?$", "", inputs.get("question", ""))
    knows = "Input:" in system or country[:1] in "ABCDEF"
    answer = CAPITALS.get(country, "unknown") if knows else "unknown"
    return {"reasoning": f"recalling the capital of {country}", "answer": answer}


def test_chain_of_thought_worked_examples_hold_real_labels_in_chat_format() -> None:
    """Kills: worked examples rendered with invented outputs (`"reasoning": null`) as JSON in a
    ChatAdapter program: the obedient model answers JSON, every call of the compiled program
    costs a parse failure and a fallback (24 calls for 12 examples instead of 12); and
    examples without the `reasoning` field ChainOfThought's adapter expects (a label has no
    reasoning: only the runs that succeeded give one)."""
    names = list(CAPITALS)
    fake = ScriptedLM(obedient_chat_model(qa_policy))
    tele = SkillOptimizer(
        exact,
        optimizer=GradientText(
            lr=1.0, epochs=1, batch_size=6, proposers=[DemonstrationsProposer(per_step=2)]
        ),
        lm=LM(fake),
        threads=2,
    )
    compiled = tele.compile(
        dspy.ChainOfThought("question -> answer"),
        trainset=capitals(names[:6]),
        valset=capitals(names[6:12]),
    )
    instructions = compiled.predict.signature.instructions
    assert "null" not in instructions and "{" not in instructions
    demos = re.findall(r"\[\[ ## answer ## \]\]\n(\S+)", instructions)
    assert demos and set(demos) <= {CAPITALS[c] for c in ("France", "Chad", "Fiji")}
    assert instructions.count("[[ ## reasoning ## ]]\nrecalling the capital of") == len(demos)
    before = len(fake.calls)
    report = evaluate_program(compiled, capitals(names[12:24]), exact, lm=LM(fake))
    assert report.mean == 1.0 and len(fake.calls) - before == 12


# -- a two-ChainOfThought multi-hop with a Python search step ---------------------------------

FAVOURITES = {"Ada": "blue", "Bo": "green", "Cy": "red", "Di": "teal", "Ed": "gold", "Flo": "pink"}
ANSWER_REASONING = "ANSWER-PREDICTOR-REASONING"


class MultiHop(dspy.Module):
    def __init__(self) -> None:
        super().__init__()
        self.generate_query = dspy.ChainOfThought("question -> query")
        self.generate_answer = dspy.ChainOfThought("context, question -> answer")

    def forward(self, question: str) -> Any:
        query = self.generate_query(question=question).query
        context = f"{query}: {FAVOURITES.get(query.split()[-1], 'no entry')}"  # the search step
        return self.generate_answer(context=context, question=question)


def multihop_policy(system: str, inputs: dict[str, str], wanted: list[str]) -> dict[str, Any]:
    if "query" in wanted:
        name = re.sub(r"^.* of |\?$", "", inputs["question"])
        person = name if name in ("Ada", "Bo", "Cy") else "nobody"  # three get a good query
        return {"reasoning": "find the person", "query": f"favourite colour of {person}"}
    color = inputs.get("context", "").rsplit(": ", 1)[-1]
    return {"reasoning": ANSWER_REASONING, "answer": color}


def people() -> list[Any]:
    return [
        dspy.Example(question=f"What is the favourite colour of {p}?", answer=c).with_inputs(
            "question"
        )
        for p, c in FAVOURITES.items()
    ]


def test_multihop_query_predictor_gets_only_its_own_traced_examples_and_chat_rules() -> None:
    """Kills: worked examples for `generate_query` from the program's labels (which hold no
    query: `{"reasoning": null, "query": null}`), a trace demo from a failed run, and a JSON
    format rule in a ChatAdapter program."""
    program = DSPyProgram(MultiHop(), exact, inputs=("question",))
    module = program.module("generate_query.predict")
    rows = sd.data.as_examples(people(), where="trainset")
    report = sd.evaluate(module, rows, lm=LM(ScriptedLM(obedient_chat_model(multihop_policy))))
    assert [r.score for r in report.records] == [1.0, 1.0, 1.0, 0.0, 0.0, 0.0]
    groups = DemonstrationsProposer(per_step=6).propose(
        request_for(module, rows, report, LM(ScriptedLM(lambda m: "{}")))
    )
    demos = added_text(groups)
    assert "null" not in demos and "{" not in demos
    queries = re.findall(r"\[\[ ## query ## \]\]\n(.*)", demos)
    assert sorted(queries) == [f"favourite colour of {p}" for p in ("Ada", "Bo", "Cy")]
    assert "[[ ## reasoning ## ]]\nfind the person" in demos  # the trace's real reasoning


def test_multihop_format_rule_and_reflection_are_the_trained_predictors_own() -> None:
    """Kills: the reflection showing the program's last reply (the *answer* predictor's) as the
    query predictor's output, expected outputs rendered as nulls, and a format rule that is not
    ChatAdapter's."""
    program = DSPyProgram(MultiHop(), exact, inputs=("question",))
    module = program.module("generate_query.predict")
    rows = sd.data.as_examples(people(), where="trainset")

    def broken(system: str, inputs: dict[str, str], wanted: list[str]) -> dict[str, Any]:
        if "query" in wanted and "Ed" in inputs["question"]:
            return {"reasoning": "?"}  # no query field: ChatAdapter and its fallback both fail
        return multihop_policy(system, inputs, wanted)

    report = sd.evaluate(module, rows, lm=LM(ScriptedLM(obedient_chat_model(broken))))
    prompts: list[str] = []

    def reflector(messages: list[dict[str, str]]) -> str:
        prompts.append(messages[-1]["content"])
        return '{"edits": []}'

    request = request_for(module, rows, report, LM(ScriptedLM(reflector)))
    rule = added_text(FormatRuleProposer().propose(request))
    assert "`[[ ## reasoning ## ]]`, then `[[ ## query ## ]]`" in rule and "JSON" not in rule
    ReflectiveProposer(read_successes=True).propose(request)
    failed = next(p for p in prompts if "FAILED" in p)
    assert ANSWER_REASONING not in failed  # the other predictor's reply is not shown as ours
    assert '"query": "favourite colour of nobody"' in failed  # its own output is
    assert "null" not in failed
    assert "could not parse the output of predictor 'generate_query.predict'" in failed


# -- ReAct with two tools ---------------------------------------------------------------------

BOOKS = {"Dune": "Herbert", "Emma": "Austen", "Ulysses": "Joyce", "Beloved": "Morrison"}


def author_of(title: str) -> str:
    """The author of a book."""
    return BOOKS.get(title, "unknown")


def year_of(title: str) -> str:
    """The year a book appeared."""
    return "1965"


def react_policy(system: str, inputs: dict[str, str], wanted: list[str]) -> dict[str, Any]:
    title = re.sub(r"^Who wrote |\?$", "", inputs.get("question", ""))
    if "next_tool_name" in wanted:
        if "observation_0" in inputs["_body"]:
            return {"next_thought": "done", "next_tool_name": "finish", "next_tool_args": {}}
        return {
            "next_thought": f"look up {title}",
            "next_tool_name": "author_of",
            "next_tool_args": {"title": title},
        }
    found = re.search(r"observation_0 ## \]\]\n(\w+)", inputs["_body"])
    return {"reasoning": "from the tool", "answer": found.group(1) if found else "unknown"}


def test_react_step_predictor_gets_traced_steps_never_null_tool_calls() -> None:
    """Kills: worked examples for ReAct's `react` predictor built from the program's labels
    (`{"next_thought": null, "next_tool_name": null, "next_tool_args": null}`), and a format
    rule that does not name the tools `next_tool_name` may take."""
    program = DSPyProgram(
        dspy.ReAct("question -> answer", tools=[author_of, year_of]), exact, inputs=("question",)
    )
    module = program.module("react")
    rows = sd.data.as_examples(
        [
            dspy.Example(question=f"Who wrote {t}?", answer=a).with_inputs("question")
            for t, a in BOOKS.items()
        ]
        + [dspy.Example(question="Who wrote Nothing?", answer="Nobody").with_inputs("question")],
        where="trainset",
    )
    report = sd.evaluate(module, rows, lm=LM(ScriptedLM(obedient_chat_model(react_policy))))
    assert [r.score for r in report.records] == [1.0, 1.0, 1.0, 1.0, 0.0]
    request = request_for(module, rows, report, LM(ScriptedLM(lambda m: "{}")))
    demos = added_text(DemonstrationsProposer(per_step=6).propose(request))
    assert demos and "null" not in demos
    assert demos.count("[[ ## next_tool_name ## ]]\nauthor_of") == 4
    assert module.output_format_rule() == (
        "Write each output field on the lines after its own marker: `[[ ## next_thought ## ]]`, "
        "then `[[ ## next_tool_name ## ]]`, then `[[ ## next_tool_args ## ]]`, and end with "
        "`[[ ## completed ## ]]`. The `next_tool_name` field is exactly one of: author_of, "
        "year_of, finish."
    )


def test_multihop_compiles_end_to_end_without_invented_text_in_any_predictor(
    tmp_path: Path,
) -> None:
    """Kills: any proposer path (format rule, worked examples, reflection) writing null outputs
    or a JSON rule into either predictor of a ChatAdapter multi-hop program compiled with the
    default proposers."""
    reflections: list[str] = []

    def reflector(messages: list[dict[str, str]]) -> str:
        reflections.append(messages[-1]["content"])
        return '{"edits": []}'

    tele = SkillOptimizer(
        exact,
        optimizer=GradientText(lr=1.0, epochs=1, batch_size=6),
        lm=LM(ScriptedLM(obedient_chat_model(multihop_policy))),
        optimizer_lm=LM(ScriptedLM(reflector, model="scripted/reflector")),
        threads=2,
        run_dir=tmp_path,
    )
    val = [
        dspy.Example(question=f"Tell me the favourite colour of {p}?", answer=c).with_inputs(
            "question"
        )
        for p, c in FAVOURITES.items()
    ]
    compiled = tele.compile(MultiHop(), trainset=people(), valset=val)
    for name, predictor in compiled.named_predictors():
        text = predictor.signature.instructions
        assert "null" not in text and "JSON" not in text and "Write nothing else" not in text, name
    proposed = [
        json.loads(line)
        for events in tmp_path.glob("*/events.jsonl")
        for line in events.read_text(encoding="utf-8").splitlines()
    ]
    edits = json.dumps([e for e in proposed if e.get("event") == "proposal"])
    assert "Input:" in edits  # worked examples were proposed, for the query predictor too
    assert "null" not in edits.replace('"after": null', "") and "JSON object" not in edits
    mine = [r for r in reflections if r.startswith("# Task\nPredictor `generate_query.predict`")]
    assert mine and all(ANSWER_REASONING not in r for r in mine)


def test_the_reflection_model_is_told_the_adapter_owns_the_output_format() -> None:
    """Kills: a reflection prompt that leaves the model free to propose its own output format
    for a ChatAdapter predictor (it would write a JSON rule the adapter then fails to parse)."""
    prompts: list[str] = []

    def reflector(messages: list[dict[str, str]]) -> str:
        prompts.append(messages[-1]["content"])
        return '{"edits": []}'

    program = DSPyProgram(dspy.Predict(Sentiment), exact, inputs=("review",))
    module = program.module("self")
    rows = sd.data.as_examples(reviews(0, 4), where="trainset")
    report = sd.evaluate(module, rows, lm=LM(ScriptedLM(obedient_chat_model(sentiment_policy))))
    ReflectiveProposer().propose(request_for(module, rows, report, LM(ScriptedLM(reflector))))
    assert prompts and all(
        "set by the program's DSPy adapter" in p and "`[[ ## answer ## ]]`" in p for p in prompts
    )


def test_worked_examples_never_invent_null_for_an_output_field_a_trace_lacks() -> None:
    """Kills: a worked example rendered from a traced call that lacks an output field
    (`[[ ## reasoning ## ]]\\nnull`), from a run where another call of the predictor lacked
    one, or from labels that do not give every output field (ChainOfThought's `reasoning`)."""
    from skillopt_dsl.dspy.proposals import worked_example

    signature = dspy.ChainOfThought("question -> answer").predict.signature
    example = sd.Example("e1", {"question": "capital of Peru?"}, {"answer": "Lima"})
    lacking = (
        None,
        {"question": "capital of Peru?"},
        dspy.Prediction(reasoning=None, answer="Lima"),
    )
    full = (
        None,
        {"question": "capital of Peru?"},
        dspy.Prediction(reasoning="recall", answer="Lima"),
    )
    for style in ("chat", "json", "xml", "raw"):
        assert worked_example(signature, style, example, (lacking,), True) is None, style
        assert worked_example(signature, style, example, (full, lacking), True) is None, style
        assert worked_example(signature, style, example, (), False) is None, style
    assert worked_example(signature, "chat", example, (full,), True) == (
        "Input:\nquestion: capital of Peru?\nAnswer:\n[[ ## reasoning ## ]]\nrecall\n"
        "[[ ## answer ## ]]\nLima"
    )
    assert worked_example(signature, "json", example, (full,), True) == (
        'Input:\nquestion: capital of Peru?\nAnswer:\n{"reasoning": "recall", "answer": "Lima"}'
    )


def test_a_format_rule_is_proposed_only_for_outputs_that_broke_the_adapters_format() -> None:
    """Kills: counting every wrong ChatAdapter answer as a format failure (its raw completion,
    markers included, "says more than its value"): a format rule with the rationale "4 of 4
    outputs broke the expected format" when all of them parsed."""
    program = DSPyProgram(dspy.Predict(Sentiment), exact, inputs=("review",))
    module = program.module("self")
    rows = sd.data.as_examples(reviews(0, 8), where="trainset")

    def always_positive(system: str, inputs: dict[str, str], wanted: list[str]) -> dict[str, Any]:
        return {"answer": "positive"}

    report = sd.evaluate(module, rows, lm=LM(ScriptedLM(obedient_chat_model(always_positive))))
    request = request_for(module, rows, report, LM(ScriptedLM(lambda m: "{}")))
    assert [r.score for r in report.records].count(0.0) == 4
    assert FormatRuleProposer().propose(request) == []
    report = sd.evaluate(module, rows, lm=LM(ScriptedLM(obedient_chat_model(sentiment_policy))))
    groups = FormatRuleProposer().propose(request_for(module, rows, report, request.optimizer_lm))
    assert [g.rationale for g in groups] == ["8 of 8 outputs broke the expected format"]
