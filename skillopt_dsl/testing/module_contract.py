"""A reusable contract suite every `SkillModule` must pass (ours and yours).

Subclass `SkillModuleContract` under a name pytest collects and implement `make_module()` and
`make_examples()`; override `respond(messages)` to give the target's scripted replies (default:
the text `"x"`, which a module must survive). Tests (the contract written in
`skillopt_dsl.module`'s docstring):

- it describes itself: a name, at least one input and one output field, a seed skill it accepts
  (`skill_refusal(seed)` is None);
- `parse` never raises: any text, garbage included, gives a `Prediction` holding exactly the
  declared output fields (a failure in its `error`);
- `run` returns a `RunOutcome` (tokens, calls and latency not negative) that `score` scores in
  [0, 1], and the same seed runs the same;
- the skill reaches the model: a line added to the skill appears in what the model is sent
  (`skill_reaches_model = False` for a module whose target is not the scripted model, e.g. an
  agent CLI);
- a model call that fails for good raises `ModelError` out of `run` (it is recorded as a failed
  rollout), never another exception and never a made-up prediction.
"""

from __future__ import annotations

from skillopt_dsl.errors import ModelError
from skillopt_dsl.lm import LM
from skillopt_dsl.lm.base import Message
from skillopt_dsl.module import RunOutcome, SkillModule
from skillopt_dsl.skill import Skill
from skillopt_dsl.testing.scripted import ScriptedLM
from skillopt_dsl.types import Example, Prediction

__all__ = ["GARBAGE", "MARKER", "SkillModuleContract"]

GARBAGE = ("", "   ", "}{", '{"unterminated": ', "\x00\x01", "word " * 400, "Answer: ")
"""Texts `parse` must survive."""

MARKER = "Contract marker line: ZQX-417."
"""The line added to the skill to see it reach the model."""


class SkillModuleContract:
    """The contract suite; subclass it as `TestSomething` and implement `make_module` and
    `make_examples`."""

    skill_reaches_model: bool = True
    """False for a module whose target is not the scripted model (an agent CLI)."""

    def make_module(self) -> SkillModule:
        """A fresh module under test."""
        raise NotImplementedError("subclass SkillModuleContract and implement make_module()")

    def make_examples(self) -> list[Example]:
        """A few examples the module runs on (at least one)."""
        raise NotImplementedError("subclass SkillModuleContract and implement make_examples()")

    def respond(self, messages: list[Message]) -> str:
        """The scripted target's reply to `messages` (default: "x")."""
        del messages
        return "x"

    def _run(self, skill: Skill, example: Example, seed: int = 0) -> tuple[RunOutcome, ScriptedLM]:
        fake = ScriptedLM(self.respond)
        return self.make_module().run(skill, example, LM(fake), seed=seed), fake

    def test_it_describes_itself(self) -> None:
        module = self.make_module()
        assert module.name, "a module needs a name"
        assert module.input_fields and module.output_fields, "declare input and output fields"
        assert isinstance(module.seed_skill, Skill)
        assert module.skill_refusal(module.seed_skill) is None, "the module refuses its seed"
        assert self.make_examples(), "make_examples() must give at least one example"

    def test_parse_never_raises(self) -> None:
        module = self.make_module()
        for text in GARBAGE:
            prediction = module.parse(text)
            assert isinstance(prediction, Prediction), f"parse({text[:20]!r}) gave {prediction!r}"
            assert set(prediction.outputs) == set(module.output_fields), text[:20]
            assert prediction.error is None or isinstance(prediction.error, str)

    def test_a_run_is_an_outcome_scored_in_the_unit_range(self) -> None:
        module = self.make_module()
        for example in self.make_examples():
            outcome, _ = self._run(module.seed_skill, example)
            assert isinstance(outcome, RunOutcome)
            assert min(outcome.prompt_tokens, outcome.completion_tokens, outcome.calls) >= 0
            assert outcome.latency_s >= 0
            score = module.score(example, outcome)
            assert 0.0 <= score.value <= 1.0, f"{example.id}: score {score.value} out of [0, 1]"

    def test_the_same_seed_runs_the_same(self) -> None:
        module = self.make_module()
        example = self.make_examples()[0]
        first, _ = self._run(module.seed_skill, example, seed=3)
        again, _ = self._run(module.seed_skill, example, seed=3)
        assert (first.output, first.prediction.outputs) == (again.output, again.prediction.outputs)

    def test_the_skill_reaches_the_model(self) -> None:
        if not self.skill_reaches_model:
            return
        module = self.make_module()
        marked = Skill(f"{module.seed_skill.text.rstrip()}\n{MARKER}\n".lstrip())
        _, fake = self._run(marked, self.make_examples()[0])
        sent = [m.get("content", "") for call in fake.calls for m in call]
        assert any(MARKER in text for text in sent), "the skill never reached the model"

    def test_a_failed_call_raises_model_error(self) -> None:
        def broken(messages: list[Message]) -> str:
            raise ValueError("contract: the provider failed for good")

        module = self.make_module()
        lm = LM(ScriptedLM(broken))
        try:
            outcome = module.run(module.seed_skill, self.make_examples()[0], lm, seed=0)
        except ModelError:
            return
        raise AssertionError(f"a failed call gave an outcome instead of ModelError: {outcome}")
