"""Guards on the searches' promises (issue 56): each test names the promise and, in its
docstring, the one-spot mutation of the code it kills (ScriptedLM only, each well under 2 s)."""

from __future__ import annotations

import pytest

import skillopt_dsl as sd
from skillopt_dsl.optimizers import Beam
from skillopt_dsl.testing import ScriptedLM
from skillopt_dsl.testing.contract import ContractParity, contract_examples, contract_target


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
