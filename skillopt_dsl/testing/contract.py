"""A reusable contract suite every optimizer must pass (ours and yours), on a shipped fake task.

Subclass `OptimizerContract` in a test module under a name pytest collects, and return a fresh
optimizer from `make_optimizer()`::

    from skillopt_dsl.testing.contract import OptimizerContract

    class TestMyOptimizer(OptimizerContract):
        def make_optimizer(self):
            return MyOptimizer(proposers=[ReflectiveProposer(read_successes=False)])

The optimizer should use a `ReflectiveProposer` (the fake optimizer model below answers
reflection prompts). The task (`ContractParity`) is deterministic: the fake target answers
right only when the skill says "divisible by 2"; the fake optimizer model first proposes a
harmful edit, then (after seeing a rejection) a neutral one, then the fix. Tests:

- never below the seed on validation, and every acceptance is a strict gain;
- ties rejected (a run whose only proposals tie exports the seed byte-for-byte);
- budget respected (calls never exceed `Budget.max_calls`; the run stops with "budget");
- learning rate respected (every recorded step's change is within its token budget);
- deterministic under a seed with a deterministic model;
- resume equals uninterrupted (a fake target dies after N calls, then `resume=True`);
- the test set never influences the choice.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from skillopt_dsl.compile import CompileResult, compile
from skillopt_dsl.export import load_skill
from skillopt_dsl.lm import Budget
from skillopt_dsl.metrics import exact_match
from skillopt_dsl.module import InputField, OutputField, SkillModule
from skillopt_dsl.optimizers.base import Optimizer
from skillopt_dsl.testing.scripted import ScriptedLM
from skillopt_dsl.types import Example

__all__ = [
    "BAD_EDIT",
    "FIX_EDIT",
    "NEUTRAL_EDIT",
    "ContractParity",
    "OptimizerContract",
    "contract_examples",
    "contract_reflector",
    "contract_target",
]

Respond = Callable[[list[dict[str, str]]], str]


class ContractParity(SkillModule):
    """Say whether a number is even or odd."""

    number: str = InputField()
    answer: Literal["even", "odd"] = OutputField()

    skill = "Answer with one word."
    metric = exact_match("answer")


FIX_EDIT = {
    "kind": "add",
    "after": None,
    "text": "A number divisible by 2 is even.",
    "rationale": "parity",
}
NEUTRAL_EDIT = {"kind": "add", "after": None, "text": "Be brief.", "rationale": "style"}
BAD_EDIT = {
    "kind": "add",
    "after": None,
    "text": "Always hedge your answer.",
    "rationale": "caution",
}
HUGE_EDIT = {
    "kind": "add",
    "after": None,
    "text": " ".join(["filler"] * 400),
    "rationale": "too big",
}


def contract_examples(start: int, count: int) -> list[Example]:
    """Examples `n=start..start+count-1` labelled with their parity."""
    return [
        Example(
            id=f"n{n}",
            inputs={"number": str(n)},
            labels={"answer": "even" if n % 2 == 0 else "odd"},
        )
        for n in range(start, start + count)
    ]


def contract_target(messages: list[dict[str, str]]) -> str:
    """The fake target: a hedge breaks the format; the parity rule makes it right; else 'odd'."""
    system = next((m["content"] for m in messages if m["role"] == "system"), "")
    number = int(messages[-1]["content"].split()[-1])
    if "hedge" in system:
        return "maybe"
    if "divisible by 2" in system:
        return "even" if number % 2 == 0 else "odd"
    return "odd"


def contract_reflector(*plan: list[dict[str, Any]]) -> ScriptedLM:
    """A fake optimizer model: answers with `plan[k]`, k = rejections shown in the prompt.

    A function of the messages only, so a resumed run replays it exactly. Default plan: the
    harmful edit, then the neutral one, then the fix (and the fix from then on).
    """
    steps = plan or ([BAD_EDIT], [NEUTRAL_EDIT], [FIX_EDIT])

    def respond(messages: list[dict[str, str]]) -> str:
        prompt = messages[1]["content"] if len(messages) > 1 else ""
        seen = prompt.count("(delta ")
        return json.dumps({"edits": steps[min(seen, len(steps) - 1)]})

    return ScriptedLM(respond, model="scripted/contract-reflector")


TRAIN = contract_examples(0, 16)
VAL = contract_examples(100, 30)
TEST = contract_examples(200, 10)


class _Killed(BaseException):
    """Stands in for SIGKILL: unwinds without any cleanup code catching it."""


@dataclass(frozen=True)
class _Run:
    result: CompileResult
    target: ScriptedLM


class OptimizerContract:
    """The contract suite; subclass it as `TestSomething` and implement `make_optimizer`."""

    budget_calls: int = 40
    """`Budget.max_calls` for the budget test (small enough that the run must stop on it)."""

    kill_fraction: float = 0.5
    """Where the resume test kills the run, as a share of the uninterrupted run's target calls."""

    def make_optimizer(self) -> Optimizer:
        """Return a fresh optimizer under test (called once per run)."""
        raise NotImplementedError("subclass OptimizerContract and implement make_optimizer()")

    def run(
        self,
        run_dir: Path | None = None,
        *,
        target: Respond = contract_target,
        reflector: ScriptedLM | None = None,
        **kwargs: Any,
    ) -> _Run:
        """Compile `ContractParity` with fakes (no real model is ever called)."""
        fake = ScriptedLM(target, model="scripted/contract-target")
        result = compile(
            ContractParity(),
            TRAIN,
            VAL,
            optimizer=self.make_optimizer(),
            lm=fake,
            optimizer_lm=reflector or contract_reflector(),
            run_dir=run_dir,
            threads=kwargs.pop("threads", 1),
            **kwargs,
        )
        return _Run(result, fake)

    # -- the contract ----------------------------------------------------------------------
    def test_never_below_seed(self) -> None:
        result = self.run().result
        assert result.val_score >= result.seed_val_score, "the result scores below the seed"
        _assert_best_never_decreases(result)
        assert "hedge" not in result.best_skill.text, "a harmful edit passed the gate"
        assert result.improved and result.val_score == 1.0, "the fix was never found"

    def test_ties_rejected(self, tmp_path: Path) -> None:
        result = self.run(tmp_path, reflector=contract_reflector([NEUTRAL_EDIT])).result
        seed_text = ContractParity().seed_skill.text
        assert not result.improved, "a candidate that ties the incumbent was accepted"
        assert result.best_skill.text == seed_text, "the best skill is not the seed"
        assert load_skill(tmp_path / "best_skill.md").text == seed_text, "best_skill.md changed"
        for decision in result.gate_log:
            assert not decision.accepted, f"tie accepted: {decision}"

    def test_budget_respected(self, tmp_path: Path) -> None:
        result = self.run(tmp_path, budget=Budget(max_calls=self.budget_calls)).result
        calls = result.usage.calls
        assert calls <= self.budget_calls, f"{calls} calls > budget {self.budget_calls}"
        assert result.stop_reason == "budget", f"stopped with {result.stop_reason!r}"
        _assert_best_never_decreases(result)

    def test_learning_rate_respected(self) -> None:
        result = self.run(reflector=contract_reflector([HUGE_EDIT, FIX_EDIT])).result
        proposed = [h for h in result.history if h.candidate_hash is not None]
        assert proposed, "no step reached the gate"
        for record in proposed:
            assert record.change_tokens <= record.budget_tokens, record
        assert "filler" not in result.best_skill.text, (
            "an edit over the learning-rate budget reached the best skill"
        )

    def test_deterministic(self) -> None:
        first = self.run(threads=2).result
        second = self.run(threads=2).result
        assert first.best_skill == second.best_skill, "two seeded runs chose different skills"
        assert [d.to_dict() for d in first.gate_log] == [d.to_dict() for d in second.gate_log], (
            "two seeded runs logged different gate decisions"
        )
        assert first.usage.calls == second.usage.calls, "two seeded runs spent differently"

    def test_resume_equals_uninterrupted(self, tmp_path: Path) -> None:
        reference = self.run(tmp_path / "reference")
        kill_at = max(1, int(len(reference.target.calls) * self.kill_fraction))
        calls = {"n": 0}

        def dying(messages: list[dict[str, str]]) -> str:
            calls["n"] += 1
            if calls["n"] == kill_at:
                raise _Killed
            return contract_target(messages)

        try:
            self.run(tmp_path / "run", target=dying)
        except _Killed:
            pass
        else:
            raise AssertionError(f"the run was not killed at call {kill_at}")
        resumed = self.run(tmp_path / "run", resume=True).result
        assert resumed.best_skill == reference.result.best_skill, "resume chose another skill"
        assert [d.to_dict() for d in resumed.gate_log] == [
            d.to_dict() for d in reference.result.gate_log
        ], "resume logged different gate decisions"
        assert resumed.usage.calls == reference.result.usage.calls, (
            f"resume spent {resumed.usage.calls} calls, uninterrupted {reference.result.usage.calls}"
        )

    def test_test_set_never_used_for_choice(self) -> None:
        without = self.run().result
        spied = self.run(testset=TEST)
        with_test = spied.result
        assert with_test.best_skill == without.best_skill, "the test set changed the choice"
        assert [d.to_dict() for d in with_test.gate_log] == [
            d.to_dict() for d in without.gate_log
        ], "the test set changed the gate decisions"
        test_inputs = {e.inputs["number"] for e in TEST}
        test_calls = [c for c in spied.target.calls if c[-1]["content"].split()[-1] in test_inputs]
        assert len(test_calls) <= 2 * len(TEST), (
            "the test set was scored for more than seed and best"
        )
        assert with_test.test_score == 1.0, f"test score {with_test.test_score}, expected 1.0"


def _assert_best_never_decreases(result: CompileResult) -> None:
    best = result.seed_val_score
    for decision in result.gate_log:
        if decision.accepted:
            assert decision.candidate_score > best, f"accepted without a strict gain: {decision}"
            best = decision.candidate_score
        else:
            assert decision.candidate_score <= decision.incumbent_score, (
                f"wrongly rejected: {decision}"
            )
    assert result.val_score == best, "the final score is not the best accepted score"
