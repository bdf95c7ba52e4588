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
- the test set never influences the choice;
- never selects on validation: a skill's validation calls come in one block that ends in its
  own gate decision (a target records the order of calls and gate events);
- a duplicate is no progress: a proposal that recreates a judged text gets one "duplicate"
  step, is remembered, and is never resubmitted or accepted;
- the door's bound: every accepted version on disk is within the step's budget, recomputed
  here from the texts and the declared learning rate;
- the read-only view: the optimizer gets a `RunView` without the validation set, gate log,
  history or scored set, whose attributes cannot be set and whose `evaluate` refuses the
  gate's examples;
- it ends, whatever the data: on a set too small for the gate to certify anything (6 training,
  3 validation examples), at several call budgets, with a proposer model that proposes and one
  that says nothing, every run returns within a time limit with its stop reason.

The validation set has 30 examples (15 where the fix matters), so the default gate, which
spends its significance over the run's decisions, can accept the fix as a third decision; the
training set has 48, so an optimizer's selection split has room for its own gate.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from skillopt_dsl.compile import CompileResult, compile
from skillopt_dsl.driver import RunView
from skillopt_dsl.errors import UserInputError
from skillopt_dsl.events import as_event
from skillopt_dsl.export import load_skill
from skillopt_dsl.lm import Budget
from skillopt_dsl.metrics import exact_match
from skillopt_dsl.module import InputField, OutputField, SkillModule
from skillopt_dsl.optimizers.base import Optimizer
from skillopt_dsl.skill import Skill, token_distance
from skillopt_dsl.testing.scripted import ScriptedLM
from skillopt_dsl.types import Example

__all__ = [
    "BAD_EDIT",
    "FIX_EDIT",
    "NEUTRAL_EDIT",
    "ContractParity",
    "OptimizerContract",
    "RunTimedOut",
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
SAME_TEXT_EDIT = {
    "kind": "add",
    "after": "Answer with one word.",
    "text": "Be brief.",
    "rationale": "style again",
}
"""Another edit whose result is NEUTRAL_EDIT's text (a duplicate candidate)."""
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


TRAIN = contract_examples(0, 48)
VAL = contract_examples(100, 30)
TEST = contract_examples(200, 10)
VAL_NUMBERS = frozenset(e.inputs["number"] for e in VAL)


class _Killed(BaseException):
    """Stands in for SIGKILL: unwinds without any cleanup code catching it."""


class RunTimedOut(BaseException):
    """A contract run went past its time limit (`OptimizerContract.run`'s `seconds`); a
    BaseException, so that no optimizer's error handling swallows it."""


@dataclass(frozen=True)
class _Run:
    result: CompileResult
    target: ScriptedLM
    log: list[tuple[str, str, str]] = field(default_factory=list)
    """("call", skill hash, number) and ("gate", candidate hash, "") in arrival order."""


class OptimizerContract:
    """The contract suite; subclass it as `TestSomething` and implement `make_optimizer`."""

    budget_calls: int = 40
    """`Budget.max_calls` for the budget test (small enough that the run must stop on it)."""

    kill_fraction: float = 0.5
    """Where the resume test kills the run, as a share of the uninterrupted run's target calls."""

    ending_budgets: tuple[int, ...] = (60, 80, 100, 200)
    """`Budget.max_calls` of the runs the ending test makes on a set where nothing can be
    certified."""

    ending_seconds: float = 30.0
    """The time limit of each of those runs (a run that has not returned by then never will)."""

    def make_optimizer(self) -> Optimizer:
        """Return a fresh optimizer under test (called once per run)."""
        raise NotImplementedError("subclass OptimizerContract and implement make_optimizer()")

    def run(
        self,
        run_dir: Path | None = None,
        *,
        target: Respond = contract_target,
        reflector: ScriptedLM | None = None,
        trainset: list[Example] = TRAIN,
        valset: list[Example] = VAL,
        seconds: float | None = None,
        **kwargs: Any,
    ) -> _Run:
        """Compile `ContractParity` with fakes (no real model is ever called). `seconds`: the
        run is stopped (`RunTimedOut`) at its first model call or event after that long."""
        log: list[tuple[str, str, str]] = []
        deadline = None if seconds is None else time.monotonic() + seconds

        def in_time() -> None:
            if deadline is not None and time.monotonic() > deadline:
                raise RunTimedOut(f"the run had not returned after {seconds} s")

        def logged(messages: list[dict[str, str]]) -> str:
            in_time()
            system = next((m["content"] for m in messages if m["role"] == "system"), "")
            log.append(("call", Skill(system).hash, messages[-1]["content"].split()[-1]))
            return target(messages)

        def on_event(kind: str, payload: Mapping[str, object]) -> None:
            in_time()
            event = as_event(kind, payload)
            if event is not None and event["event"] == "gate":
                kind = "accepted" if event.get("accepted") else "gate"
                log.append((kind, str(event["candidate_hash"]), ""))

        fake = ScriptedLM(logged, model="scripted/contract-target")
        result = compile(
            ContractParity(),
            trainset,
            valset,
            optimizer=kwargs.pop("optimizer", None) or self.make_optimizer(),
            lm=fake,
            optimizer_lm=reflector or contract_reflector(),
            run_dir=run_dir,
            threads=kwargs.pop("threads", 1),
            on_event=on_event,
            **kwargs,
        )
        return _Run(result, fake, log)

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
        # The call in flight at the kill counts as lost (it may have been served) and is sent
        # again on resume: the resumed run spends its uninterrupted twin's calls plus its lost ones.
        spent = resumed.usage.calls - resumed.usage.lost_calls
        assert spent == reference.result.usage.calls, (
            f"resume spent {resumed.usage.calls} calls ({resumed.usage.lost_calls} lost), "
            f"uninterrupted {reference.result.usage.calls}"
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

    def test_never_selects_on_validation(self) -> None:
        """Kills: an optimizer choosing among candidates by their validation scores (Beam
        scoring children on the gate's examples, a sweep ranking trials on val): any skill
        scored on validation must go straight to its own gate decision. The seed and skills
        the gate accepted may be scored again (an incumbent accepted at an interim look is
        scored on more validation examples when a later decision needs them)."""
        run = self.run()
        incumbents = {ContractParity().seed_skill.hash}
        pending: str | None = None
        for kind, skill, number in run.log:
            if kind in ("gate", "accepted"):
                assert pending in (None, skill), f"{pending} was scored on val, then not gated"
                pending = None
                if kind == "accepted":
                    incumbents.add(skill)
            elif number in VAL_NUMBERS and skill not in incumbents:
                assert pending in (None, skill), (
                    f"two candidates ({pending}, {skill}) scored on validation before the gate: "
                    "the optimizer selects on the gate's examples"
                )
                pending = skill
            else:
                assert pending is None, (
                    f"{pending} was scored on validation, then the optimizer went on without "
                    "the gate: it selects on the gate's examples"
                )
        assert pending is None, f"{pending} was scored on validation and never gated"

    def test_duplicate_is_no_progress(self, tmp_path: Path) -> None:
        """Kills: a duplicate verdict treated as an accept (the old accepted decision returned,
        or the optimizer resetting its patience and not remembering the edit), which makes the
        optimizer resubmit the same text step after step."""
        reflector = contract_reflector([NEUTRAL_EDIT], [SAME_TEXT_EDIT])
        result = self.run(tmp_path, reflector=reflector).result
        duplicates = [h for h in result.history if h.note == "duplicate"]
        hashes = [h.candidate_hash for h in duplicates]
        assert len(hashes) == len(set(hashes)), f"a duplicate was resubmitted: {hashes}"
        assert not any(h.accepted for h in duplicates), "a duplicate was counted as an accept"
        assert not result.improved and result.best_skill == ContractParity().seed_skill
        judged = [d.candidate_hash for d in result.gate_log]
        assert len(judged) == len(set(judged)), "the gate judged one text twice"

    def test_door_bound_holds_on_disk(self, tmp_path: Path) -> None:
        """Kills: a door that trusts what the optimizer says about its change, or that ignores
        the declared lr: each accepted version on disk must be within the budget recomputed
        here from the previous version's text and the step's declared learning rate."""
        optimizer = self.make_optimizer()
        bound = optimizer.lr_bound()
        result = self.run(tmp_path, optimizer=optimizer).result
        accepted = [h for h in result.history if h.accepted]
        assert accepted, "nothing was accepted"
        versions = sorted((tmp_path / "skills").glob("v*.md"))
        assert len(versions) == len(accepted) + 1
        for record, before, after in zip(accepted, versions, versions[1:], strict=False):
            old, new = before.read_text(encoding="utf-8"), after.read_text(encoding="utf-8")
            distance, tokens = token_distance(old, new), Skill(old).token_count
            assert record.change_tokens == distance, "the door mis-measured the change"
            assert distance <= record.budget_tokens, record
            if record.kind != "sweep":  # one step: recompute its budget from lr and length
                assert record.budget_tokens == max(
                    math.ceil(record.lr_budget * tokens), bound.floor_tokens
                ), record

    def test_ends_where_nothing_can_be_certified(self) -> None:
        """Kills: a search whose rounds spend nothing and submit nothing going on forever
        (Beam on 6 training and 3 validation examples closed empty round after empty round,
        every rollout cached and no proposer asked anything new, so the budget never ended
        it): on a set too small for the gate to certify anything, at each budget, with a
        proposer model that proposes and one that says nothing, the run returns in time with
        a stop reason, within its budget, and accepts nothing."""
        silent = ScriptedLM(lambda _: "{}", model="scripted/silent")
        for budget in self.ending_budgets:
            for reflector in (contract_reflector(), silent):
                try:
                    result = self.run(
                        reflector=reflector, trainset=TRAIN[:6], valset=VAL[:3],
                        budget=Budget(max_calls=budget), seconds=self.ending_seconds,
                    ).result  # fmt: skip
                except RunTimedOut:
                    raise AssertionError(
                        f"at {budget} calls ({reflector.model}) the run had not returned after "
                        f"{self.ending_seconds} s: a search that spends nothing never ends"
                    ) from None
                where = f"at {budget} calls ({reflector.model})"
                assert result.stop_reason, f"{where} the run stated no stop reason"
                assert result.usage.calls <= budget, f"{where}: {result.usage.calls} calls"
                assert not result.improved, f"{where} the gate certified a gain on 3 examples"

    def test_optimizer_sees_a_read_only_view(self) -> None:
        """Kills: handing the optimizer the driver (its validation set, gate log, history or
        scored set reachable and writable), or a view whose `evaluate` accepts val examples."""
        optimizer = self.make_optimizer()
        seen: list[RunView] = []
        original = optimizer.optimize

        def spy(view: RunView) -> None:
            seen.append(view)
            original(view)

        object.__setattr__(optimizer, "optimize", spy)
        self.run(optimizer=optimizer)
        view = seen[0]
        assert isinstance(view, RunView), f"the optimizer got {type(view).__name__}"
        for name in ("valset", "gate_log", "history", "scored", "gate", "run", "ledger"):
            assert not hasattr(view, name), f"the view exposes {name!r}"
        for name in ("incumbent", "trainset", "module", "rng", "version", "extra"):
            try:
                setattr(view, name, None)
            except AttributeError:
                continue
            raise AssertionError(f"view.{name} can be assigned")
        try:
            view.evaluate(view.incumbent, VAL[:1])
        except UserInputError:
            return
        raise AssertionError("view.evaluate scored a validation example")


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
