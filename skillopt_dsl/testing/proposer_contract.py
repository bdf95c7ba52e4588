"""A reusable contract suite every proposer must pass (ours and yours), on the shipped parity task.

Subclass `ProposerContract` in a test module under a name pytest collects, and return a fresh
proposer from `make_proposer()`::

    from skillopt_dsl.testing.proposer_contract import ProposerContract

    class TestMyProposer(ProposerContract):
        def make_proposer(self):
            return MyProposer()

The request is `ContractParity` with a batch of failures (one of them a parse failure) and
successes; the optimizer model is a fake whose first reply is not JSON and whose later replies
are one valid edit. Tests (the contract written in `skillopt_dsl.optimizers.proposers`):

- returns a list of `EditGroup`s holding typed `Edit`s, each named by the proposer;
- never raises for one bad group (an optimizer reply that is not JSON, a rollout that did not
  parse): it is skipped, the rest still proposed;
- draws randomness only from `request.rng` (the `random` module's own functions raise here);
- deterministic: the same request and seed give the same groups.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from skillopt_dsl.evaluate import Rollout
from skillopt_dsl.lm import LM
from skillopt_dsl.optimizers.proposers import EditGroup, ProposalRequest, Proposer
from skillopt_dsl.skill import Add, Delete, Replace
from skillopt_dsl.testing.contract import FIX_EDIT, ContractParity, contract_examples
from skillopt_dsl.testing.scripted import ScriptedLM

__all__ = ["ProposerContract", "contract_request"]

_GLOBAL_RANDOM = ("random", "randrange", "randint", "choice", "choices", "shuffle", "sample")


def _replies_not_json_first() -> ScriptedLM:
    """A fake optimizer model: its first reply is not JSON, every later one the fix edit."""
    calls = {"n": 0}

    def respond(messages: list[dict[str, str]]) -> str:
        calls["n"] += 1
        return "I would rather chat." if calls["n"] == 1 else json.dumps({"edits": [FIX_EDIT]})

    return ScriptedLM(respond, model="scripted/proposer-contract")


def contract_request(seed: int = 0, *, optimizer_lm: LM | None = None) -> ProposalRequest:
    """A step's request on `ContractParity`: 8 examples, the odd ones answered wrong (one of
    them unparsable), the even ones right; a fresh fake optimizer model unless given."""
    module = ContractParity()
    examples = contract_examples(0, 8)
    rollouts = []
    for n, example in enumerate(examples):
        gold = example.labels["answer"]
        output = gold if n % 2 == 0 else ("maybe?" if n == 1 else "even")
        prediction = module.parse(output)
        rollouts.append(
            Rollout(example.id, output, prediction, float(prediction.outputs["answer"] == gold))
        )
    return ProposalRequest(
        module=module,
        skill=module.seed_skill,
        batch=examples,
        rollouts=rollouts,
        trainset=contract_examples(0, 24),
        rejected=[],
        optimizer_lm=optimizer_lm or LM(_replies_not_json_first()),
        rng=random.Random(seed),
        budget_tokens=256,
    )


@contextmanager
def _no_global_random() -> Iterator[None]:
    """The `random` module's own functions raise while the proposer runs."""
    saved = {name: getattr(random, name) for name in _GLOBAL_RANDOM}

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a proposer drew from the global random module, not request.rng")

    try:
        for name in _GLOBAL_RANDOM:
            setattr(random, name, refuse)
        yield
    finally:
        for name, function in saved.items():
            setattr(random, name, function)


class ProposerContract:
    """The contract suite; subclass it as `TestSomething` and implement `make_proposer`."""

    def make_proposer(self) -> Proposer:
        """Return a fresh proposer under test (called once per request)."""
        raise NotImplementedError("subclass ProposerContract and implement make_proposer()")

    def propose(self, seed: int = 0) -> list[EditGroup]:
        """The proposer's groups for `contract_request(seed)`."""
        return self.make_proposer().propose(contract_request(seed))

    def test_returns_edit_groups_of_typed_edits(self) -> None:
        groups = self.propose()
        assert isinstance(groups, list), f"propose returned {type(groups).__name__}, not a list"
        name = self.make_proposer().name
        for group in groups:
            assert isinstance(group, EditGroup), f"{group!r} is not an EditGroup"
            assert group.edits and all(isinstance(e, Add | Replace | Delete) for e in group.edits)
            assert group.source == name, f"group named {group.source!r}, proposer {name!r}"

    def test_one_bad_group_never_raises(self) -> None:
        request = contract_request()
        groups = self.make_proposer().propose(request)  # a non-JSON reply, an unparsed rollout
        assert isinstance(groups, list)

    def test_randomness_only_from_request_rng(self) -> None:
        with _no_global_random():
            self.propose(seed=3)

    def test_deterministic_under_a_seed(self) -> None:
        assert self.propose(seed=5) == self.propose(seed=5)
