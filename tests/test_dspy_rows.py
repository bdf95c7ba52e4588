"""The rows a DSPy user hands `SkillOptimizer` (`skillopt_dsl.dspy.rows`; issue 38, item 7):
dict rows carry JSON values in our `Example` while the metric gets the user's own objects, and
a program input with a default is optional in a row. Targets are `ScriptedLM` FAKEs."""

from __future__ import annotations

from typing import Any

import pytest

dspy = pytest.importorskip("dspy", reason="needs the [dspy] extra: pip install -e '.[dspy]'")

from skillopt_dsl.dspy import evaluate_program  # noqa: E402
from skillopt_dsl.dspy.rows import given_examples, input_names, program_inputs  # noqa: E402
from skillopt_dsl.lm import LM  # noqa: E402
from skillopt_dsl.testing import ScriptedLM  # noqa: E402
from tests.test_dspy_shapes import ExtractPerson, Person  # noqa: E402

REPLY = "[[ ## answer ## ]]\nParis\n\n[[ ## completed ## ]]"


def test_dict_rows_carry_json_values_and_the_metric_gets_the_users_objects() -> None:
    """Kills: a dict row's pydantic label kept as the model object in our `Example` (its
    id, cache keys and run files need JSON values), or the metric's gold given the JSON
    object instead of the user's model."""
    program = dspy.Predict(ExtractPerson)
    rows = [{"sentence": "Ada turned 36", "person": Person(name="Ada", age=36)}]
    (given,) = given_examples(rows, program_inputs(program), where="trainset", program=program)
    assert given.example.labels["person"] == {"name": "Ada", "age": 36}
    assert type(given.example.labels["person"]) is dict
    assert given.gold is not None and given.gold.person == Person(name="Ada", age=36)
    assert given.where == "trainset[0]"


class WithHint(dspy.Module):
    def __init__(self) -> None:
        super().__init__()
        self.answer = dspy.Predict("question -> answer")

    def forward(self, question: str, hint: str | None = None) -> Any:
        return self.answer(question=question if hint is None else f"{question} ({hint})")


def test_an_optional_program_input_is_optional_in_rows() -> None:
    """Kills: `forward(self, question, hint=None)` refusing rows without `hint` (every
    accepted name taken as required), or refusing rows that do give it."""
    program = WithHint()
    accepted = program_inputs(program)
    assert accepted is not None and accepted.required == ("question",)
    assert accepted.accepted == ("question", "hint")
    bare = [{"question": f"capital {n}?", "answer": "Paris"} for n in range(3)]
    hinted = [{**row, "hint": "France"} for row in bare]
    for rows in (bare, hinted):
        given = given_examples(rows, accepted, where="examples", program=program)
        examples = [g.example for g in given]
        assert set(input_names(examples, {}, accepted)) == set(rows[0]) - {"answer"}

    def exact(gold: Any, pred: Any, trace: Any = None) -> float:
        return float(pred.answer == gold.answer)

    report = evaluate_program(program, bare, exact, lm=LM(ScriptedLM(lambda m: REPLY)))
    assert report.mean == 1.0
