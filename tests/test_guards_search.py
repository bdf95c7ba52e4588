"""Guards on the searches' promises (issue 56): each test names the promise and, in its
docstring, the one-spot mutation of the code it kills (ScriptedLM only, each well under 2 s)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

import skillopt_dsl as sd
from skillopt_dsl.driver.looks import SequentialJudge
from skillopt_dsl.evidence import SignificanceBudget
from skillopt_dsl.optimizers import Beam, Bundle, GradientText
from skillopt_dsl.optimizers.base import Optimizer
from skillopt_dsl.testing import ScriptedLM
from skillopt_dsl.testing.contract import ContractParity, contract_examples, contract_target
from skillopt_dsl.testing.search_contract import PARITY_FIX, OfferedEdits

VAL30 = contract_examples(100, 30)
FIXES = [f"{PARITY_FIX} ({k})" for k in range(6)]
UNPAID = "the calls left do not pay for the next look"


@pytest.mark.timeout(60)
@pytest.mark.parametrize("calls", [80, 100])
def test_beam_ends_on_a_set_too_small_to_certify_with_its_default_proposers(calls: int) -> None:
    """Kills: Beam without its idle-round stop (`IDLE_ROUNDS` unused): on 6 training and 3
    validation examples, with the default proposers and a model that proposes nothing, every
    round after the first was served from the cache and the run never returned (issue 56)."""
    result = sd.compile(
        ContractParity(), contract_examples(0, 6), contract_examples(100, 3),
        optimizer=Beam(width=2), lm=ScriptedLM(contract_target),
        optimizer_lm=ScriptedLM(lambda _: "{}"), budget=sd.Budget(max_calls=calls), threads=1,
    )  # fmt: skip
    assert result.stop_reason == "plateau" and result.usage.calls <= calls
    assert not result.improved


def _judge(gate: sd.Gate) -> SequentialJudge:
    budget = SignificanceBudget(alpha=gate.alpha, first_share=gate.first_share)
    budget.plan(1)
    return SequentialJudge(gate, budget, tuple(VAL30), tuple(VAL30))


def _brevity(example: sd.Example, prediction: object) -> bool:
    return True


@pytest.mark.parametrize(
    ("gate", "size"),
    [
        (sd.Gate(), 15),
        (sd.Gate(early_share=0.0), 30),
        (sd.Gate(guards=[sd.Guard.metric("brevity", _brevity)]), 30),
        (sd.Gate(looks=(0.15, 0.5), min_look=4), 15),
    ],
)
def test_the_reserved_look_is_the_first_at_which_the_gate_could_accept(
    gate: sd.Gate, size: int
) -> None:
    """Kills: a decision reserve of the gate's first look whatever the gate (`deciding_look`
    returning the first look where early acceptance is off, with `early_share=0` or a guard,
    or where the first look is too small for a clean fix to pass its share of the level: 4
    examples, 2^-4 above it): the reserve is the first look that could accept."""
    judge = _judge(gate)
    assert len(judge.deciding_look()) == size
    whole = judge.calls_needed(frozenset())
    assert judge.calls_needed(frozenset(), first_look=True) == (size * 2 if size < 30 else whole)


OPTIMIZERS: dict[str, Callable[[], Optimizer]] = {
    "bundle": lambda: Bundle(proposers=[OfferedEdits(texts=FIXES)], failures_per_step=4),
    "gradient-text": lambda: GradientText(proposers=[OfferedEdits(texts=FIXES)]),
}


@pytest.mark.parametrize(
    ("name", "calls"),
    [("bundle", 60), ("bundle", 72), ("gradient-text", 56), ("gradient-text", 60)],
)
@pytest.mark.parametrize("gate", ["early_share=0", "guard"])
def test_a_search_near_its_budgets_end_keeps_the_calls_of_a_decision_that_could_accept(
    name: str, calls: int, gate: str
) -> None:
    """Kills: Bundle and GradientText reserving only the gate's first look in the budget's
    tail where the gate cannot accept there (`early_share=0`, or any guard): their candidate
    went to a decision stopped at look 1 "for lack of calls" (the parity fix, 0.5 ahead, at
    56-76 calls), its calls and its significance spent for nothing (issue 56). A decision
    either runs to a look that could accept it, or is not started."""
    chosen = (
        sd.Gate(early_share=0.0)
        if gate == "early_share=0"
        else sd.Gate(guards=[sd.Guard.metric("brevity", _brevity)])
    )
    result = sd.compile(
        ContractParity(), contract_examples(0, 24), VAL30, optimizer=OPTIMIZERS[name](),
        lm=ScriptedLM(contract_target), optimizer_lm=ScriptedLM(lambda _: "{}"), gate=chosen,
        budget=sd.Budget(max_calls=calls), threads=1,
    )  # fmt: skip
    stopped = [d for d in result.gate_log if UNPAID in d.reason]
    assert not stopped, stopped
    assert result.usage.calls <= calls
