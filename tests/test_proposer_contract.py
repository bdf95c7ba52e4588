"""Every shipped proposer passes the shipped `ProposerContract`."""

from __future__ import annotations

import json
import random
import time

import pytest

from skillopt_dsl.agents.demos import ToolDemonstrationsProposer
from skillopt_dsl.evaluate import Rollout
from skillopt_dsl.optimizers import (
    AnswerShapeProposer,
    ConsolidationProposer,
    DemonstrationsProposer,
    FormatRuleProposer,
    PlainRuleProposer,
    Proposer,
    ReflectiveProposer,
)
from skillopt_dsl.optimizers.proposers import EditGroup, ProposalRequest
from skillopt_dsl.optimizers.proposers.format_rule import module_broke_format
from skillopt_dsl.skill import Add
from skillopt_dsl.testing.contract import ContractParity
from skillopt_dsl.testing.proposer_contract import ProposerContract
from skillopt_dsl.types import Prediction


class TestReflectiveProposerContract(ProposerContract):
    def make_proposer(self) -> Proposer:
        return ReflectiveProposer(group_size=2)


class TestDemonstrationsProposerContract(ProposerContract):
    def make_proposer(self) -> Proposer:
        return DemonstrationsProposer()


class TestFormatRuleProposerContract(ProposerContract):
    def make_proposer(self) -> Proposer:
        return FormatRuleProposer()


class TestConsolidationProposerContract(ProposerContract):
    def make_proposer(self) -> Proposer:
        return ConsolidationProposer(use_model=True)


class TestPlainRuleProposerContract(ProposerContract):
    def make_proposer(self) -> Proposer:
        return PlainRuleProposer()


class TestAnswerShapeProposerContract(ProposerContract):
    def make_proposer(self) -> Proposer:
        return AnswerShapeProposer()


class TestToolDemonstrationsProposerContract(ProposerContract):
    def make_proposer(self) -> Proposer:
        return ToolDemonstrationsProposer()


# -- the suite has teeth: FAKE proposers that each break one clause ------------------------------


class _FakeGlobalRandom(Proposer):
    name = "fake-global-random"

    def propose(self, request: ProposalRequest) -> list[EditGroup]:
        random.shuffle(list(request.batch))
        return []


class _FakeTrustingReply(Proposer):
    name = "fake-trusting-reply"

    def propose(self, request: ProposalRequest) -> list[EditGroup]:
        reply = request.optimizer_lm.complete([{"role": "user", "content": "edits?"}], seed=0)
        json.loads(reply.text)
        return []


class _FakeClock(Proposer):
    name = "fake-clock"

    def propose(self, request: ProposalRequest) -> list[EditGroup]:
        text = f"Checked at {time.perf_counter_ns()}."
        return [EditGroup((Add(after=None, text=text),), self.name, True)]


@pytest.mark.parametrize(
    ("fake", "clause"),
    [
        (_FakeGlobalRandom, "test_randomness_only_from_request_rng"),
        (_FakeTrustingReply, "test_one_bad_group_never_raises"),
        (_FakeClock, "test_deterministic_under_a_seed"),
    ],
)
def test_the_contract_fails_a_proposer_that_breaks_a_clause(
    fake: type[Proposer], clause: str
) -> None:
    """Kills: a contract clause that cannot fail (a suite every proposer passes by default)."""
    suite = ProposerContract()
    suite.make_proposer = fake  # type: ignore[method-assign]
    with pytest.raises((AssertionError, ValueError)):
        getattr(suite, clause)()


def test_the_format_check_reads_the_declared_field_beside_a_modules_derived_values() -> None:
    """Kills: reading a one-field module's answer by unpacking every output value (a
    `TriggerModule` prediction also carries its `trigger_rate`, and the describe compile
    crashed with `ValueError: too many values to unpack` on its first failing rollout)."""
    module = ContractParity()

    def rollout(raw: str, value: str) -> Rollout:
        prediction = Prediction({"answer": value, "trigger_rate": 0.0}, raw=raw)
        return Rollout("n1", raw, prediction, score=0.0)

    assert not module_broke_format(module, rollout("even", "even"))
    assert module_broke_format(module, rollout("The number is even.", "even"))
