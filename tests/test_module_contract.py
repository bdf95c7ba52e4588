"""The `SkillModule` contract suite (`skillopt_dsl.testing.module_contract`) on the shipped kinds
of module: a declared one-field module, a shipped benchmark module, a module built with
`SkillModule.create` with several output fields, and a tool-using `AgentModule`."""

from __future__ import annotations

from typing import Literal

import pytest

from skillopt_dsl.agents import AgentModule
from skillopt_dsl.benchmarks.tasks import SportsUnderstanding
from skillopt_dsl.lm import LM
from skillopt_dsl.lm.base import Message
from skillopt_dsl.metrics import exact_match
from skillopt_dsl.module import InputField, OutputField, RunOutcome, SkillModule
from skillopt_dsl.skill import Skill
from skillopt_dsl.testing.contract import ContractParity, contract_examples, contract_target
from skillopt_dsl.testing.module_contract import SkillModuleContract
from skillopt_dsl.types import Example, Prediction


class TestDeclaredModule(SkillModuleContract):
    def make_module(self) -> SkillModule:
        return ContractParity()

    def make_examples(self) -> list[Example]:
        return contract_examples(0, 4)

    def respond(self, messages: list[Message]) -> str:
        return contract_target(messages)


class TestBenchmarkModule(SkillModuleContract):
    def make_module(self) -> SkillModule:
        return SportsUnderstanding()

    def make_examples(self) -> list[Example]:
        return [
            Example(
                "s1", {"statement": "The goalie scored a touchdown."}, {"answer": "implausible"}
            )
        ]


class TestCreatedModuleWithTwoOutputs(SkillModuleContract):
    def make_module(self) -> SkillModule:
        return SkillModule.create(
            name="Sizes",
            inputs={"item": str},
            outputs={"size": Literal["small", "large"], "reason": str},
            skill="Judge the size.",
            metric=exact_match("size"),
        )

    def make_examples(self) -> list[Example]:
        return [Example("a", {"item": "an ant"}, {"size": "small"})]

    def respond(self, messages: list[Message]) -> str:
        return '{"size": "small", "reason": "ants are small"}'


def lookup(key: str) -> str:
    """Look up `key` in the table."""
    return {"a": "1"}.get(key, "none")


class Lookup(AgentModule):
    """Answer with the table's value for the key."""

    key: str = InputField()
    answer: str = OutputField()

    skill = "Use the lookup tool, then answer with the value."
    metric = exact_match("answer")
    tools = (lookup,)
    protocol = "text"
    max_turns = 2


class TestAgentModule(SkillModuleContract):
    def make_module(self) -> SkillModule:
        return Lookup()

    def make_examples(self) -> list[Example]:
        return [Example("k", {"key": "a"}, {"answer": "1"})]


class _DropsTheSkill(ContractParity):
    def run(self, skill: Skill, example: Example, lm: LM, *, seed: int) -> RunOutcome:
        return super().run(Skill(""), example, lm, seed=seed)


class _ParseRaises(ContractParity):
    def parse(self, text: str) -> Prediction:
        if not text.strip():
            raise ValueError("empty")
        return super().parse(text)


class _BrokenSuite(TestDeclaredModule):
    __test__ = False

    def __init__(self, module: SkillModule) -> None:
        self.module = module

    def make_module(self) -> SkillModule:
        return self.module


def test_the_suite_fails_modules_that_break_the_contract() -> None:
    """Kills: a suite that cannot fail: a module that drops the skill, or whose parse raises."""
    with pytest.raises(AssertionError, match="never reached the model"):
        _BrokenSuite(_DropsTheSkill()).test_the_skill_reaches_the_model()
    with pytest.raises(ValueError, match="empty"):
        _BrokenSuite(_ParseRaises()).test_parse_never_raises()
