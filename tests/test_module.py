from __future__ import annotations

from pathlib import Path
from typing import Literal

import pydantic
import pytest

import skillopt_dsl as sd
from skillopt_dsl.types import Example
from tests.helpers import Parity


class Person(pydantic.BaseModel):
    name: str
    age: int


class Extract(sd.SkillModule):
    """Extract facts."""

    text: str = sd.InputField("the passage")
    context: str = sd.InputField()
    city: str = sd.OutputField()
    year: int = sd.OutputField()

    skill = "Extract."
    metric = sd.metrics.exact_match("city")


def test_class_declaration_collects_typed_fields() -> None:
    module = Parity()
    assert list(module.input_fields) == ["number"]
    assert list(module.output_fields) == ["answer"]
    assert module.output_fields["answer"].annotation == Literal["even", "odd"]
    assert module.description == "Say whether a number is even or odd."
    assert module.seed_skill.text == "Answer with one word."


def test_render_system_is_skill_text_exactly() -> None:
    module = Parity()
    skill = sd.Skill("# Rules\n\n  keep   spacing\n")
    messages = module.render(skill, Example("a", {"number": "4"}, {"answer": "even"}))
    assert messages[0] == {"role": "system", "content": "# Rules\n\n  keep   spacing\n"}
    assert messages[1] == {"role": "user", "content": "4"}


def test_render_several_inputs_and_outputs_asks_for_json() -> None:
    messages = Extract().render(sd.Skill("x"), {"text": "Paris 1999", "context": "c"})
    assert messages[1]["content"].startswith("text (the passage): Paris 1999\ncontext: c")
    assert "JSON object with the keys: city, year" in messages[1]["content"]


def test_empty_skill_sends_no_system_message() -> None:
    messages = Parity().render(sd.Skill(""), {"number": "3"})
    assert [m["role"] for m in messages] == ["user"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("even", "even"),
        ("Answer: Odd.", "odd"),
        ("<answer>even</answer>", "even"),
        ('"odd"', "odd"),
        ("The number is even.", "even"),
        ("answer: even", "even"),
    ],
)
def test_tolerant_single_field_parsing(text: str, expected: str) -> None:
    prediction = Parity().parse(text)
    assert prediction.ok, prediction.error
    assert prediction.answer == expected


@pytest.mark.parametrize("text", ["", "it is even or odd", "banana", "   "])
def test_parse_failure_is_carried_not_raised(text: str) -> None:
    prediction = Parity().parse(text)
    assert not prediction.ok
    assert prediction.answer is None
    assert "could not parse" in (prediction.error or "")
    assert prediction.raw == text


def test_int_and_pydantic_outputs() -> None:
    number = sd.SkillModule.create(
        name="Num", inputs={"q": str}, outputs={"n": int}, metric=lambda e, p: 1.0
    )
    assert number.parse("The answer is 1,234.").n == 1234
    assert not number.parse("3.5").ok
    people = sd.SkillModule.create(name="People", inputs={"q": str}, outputs={"who": Person})
    parsed = people.parse('Here: {"name": "Ada", "age": 36}')
    assert parsed.who == Person(name="Ada", age=36)
    assert not people.parse('{"name": "Ada"}').ok


def test_several_fields_parse_json_with_validation() -> None:
    module = Extract()
    ok = module.parse('```json\n{"city": "Paris", "year": "1999"}\n```')
    assert ok.ok and ok.city == "Paris" and ok.year == 1999
    bad = module.parse('{"city": "Paris", "year": "soon"}')
    assert not bad.ok and "year" in (bad.error or "")
    assert bad.city is None


def test_functional_create_matches_class_form() -> None:
    module = sd.SkillModule.create(
        name="Sports",
        inputs={"statement": (str, "a sentence")},
        outputs={"answer": Literal["plausible", "implausible"]},
        skill="Answer with one word.",
        metric=sd.metrics.exact_match("answer"),
        description="Judge plausibility.",
    )
    assert module.name == "Sports" and module.description == "Judge plausibility."
    assert module.parse("Implausible").answer == "implausible"


def test_skill_from_path(tmp_path: Path) -> None:
    path = tmp_path / "seed.md"
    path.write_text("# Seed\r\nexact bytes\n", encoding="utf-8", newline="")
    module = Parity(skill=path)
    assert module.seed_skill.text == "# Seed\r\nexact bytes\n"
    with pytest.raises(sd.UserInputError, match="does not exist"):
        Parity(skill=str(tmp_path / "missing.md"))


def test_module_without_fields_or_metric_is_a_clear_error() -> None:
    class Empty(sd.SkillModule):
        pass

    with pytest.raises(sd.UserInputError, match="InputField"):
        Empty()
    no_metric = sd.SkillModule.create(name="NoMetric", inputs={"q": str}, outputs={"a": str})
    with pytest.raises(sd.UserInputError, match="no metric"):
        _ = no_metric.metric_fn


class Described(sd.SkillModule):
    """Classify a review."""

    review: str = sd.InputField("a product review, verbatim")
    sentiment: Literal["positive", "negative"] = sd.OutputField("the reviewer's overall verdict")

    skill = "Classify."
    metric = sd.metrics.exact_match("sentiment")


def test_declared_field_descriptions_reach_the_model() -> None:
    """Kills: dropping `InputField("...")` / `OutputField("...")` descriptions from the prompt
    (the user declared them for the model; they were silently ignored before)."""
    user = Described().render(sd.Skill("Classify."), {"review": "Broke in a day."})[-1]["content"]
    assert "review (a product review, verbatim): Broke in a day." in user
    assert user.endswith("sentiment: the reviewer's overall verdict")
    several = Extract().render(sd.Skill("Extract."), {"text": "Paris, 1900", "context": "c"})
    assert "text (the passage): Paris, 1900" in several[-1]["content"]
    assert "keys: city, year." in several[-1]["content"]


def test_undescribed_single_input_renders_bare_value() -> None:
    """Kills: labelling every input (changes every existing prompt and cache key)."""
    assert Parity().render(sd.Skill("x"), {"number": 4})[-1]["content"] == "4"


def test_one_reply_becomes_one_outcome_with_its_usage_and_cache_flag() -> None:
    """Kills: the completion -> outcome conversion dropping the cache flag, the tokens or the
    latency (a cached rerun billed as a fresh call, usage lost from the run record)."""
    from skillopt_dsl.agents.command import HarnessRun
    from skillopt_dsl.lm import LM, ResponseCache
    from skillopt_dsl.testing import ScriptedLM

    module = Parity()
    example = Example("e1", {"number": "4"}, {"answer": "even"})
    lm = LM(ScriptedLM(lambda messages: "even"), cache=ResponseCache())
    fresh, again = (module.run(module.seed_skill, example, lm, seed=0) for _ in range(2))
    assert (fresh.cached, again.cached) == (False, True)
    assert fresh.prediction.answer == again.output == "even" and fresh.calls == 1
    assert fresh.prompt_tokens > 0 and fresh.completion_tokens > 0 and fresh.latency_s >= 0
    run = HarnessRun(("agent",), 0, "", "", "odd", 7, 3, duration_s=2.5)
    outcome = module.outcome(run, trace=run)
    assert (outcome.output, outcome.prompt_tokens, outcome.completion_tokens) == ("odd", 7, 3)
    assert (outcome.latency_s, outcome.cached, outcome.trace) == (2.5, False, run)
