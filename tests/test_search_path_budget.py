"""The working candidate fits its path budget whole (issue 26: on the real home, two proposals
confirmed in one step each fitted the step's room alone, the door refused them together, and
the night ended with no gate decision)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import skillopt_dsl as sd
from skillopt_dsl.optimizers import GradientText
from skillopt_dsl.optimizers.proposers import EditGroup, ProposalRequest, Proposer
from skillopt_dsl.skill import Add, Skill, token_distance
from skillopt_dsl.testing.contract import ContractParity, contract_examples, contract_target
from skillopt_dsl.testing.scripted import ScriptedLM

SHORT = "A number divisible by 2 is even."
LONG = "Any whole number divisible by 2 is even; every other whole number is odd, always."


@dataclass(kw_only=True)
class TwoFixes(Proposer):
    """A fake proposer: the same two useful edit groups (one `Add` each) at every step."""

    texts: Sequence[str] = (SHORT, LONG)
    name: str = "two-fixes"

    def propose(self, request: ProposalRequest) -> list[EditGroup]:
        return [EditGroup((Add(after=None, text=t),), self.name, True, t) for t in self.texts]


def _distance(*texts: str) -> int:
    seed = Skill(ContractParity.skill)
    return token_distance(seed.text, seed.apply([Add(after=None, text=t) for t in texts])[0].text)


def test_proposals_joined_in_one_step_that_overflow_together_do_not_lose_the_decision(
    tmp_path: Path,
) -> None:
    """Kills: sending the working candidate whole when the proposals that joined in one step
    overflow its path budget together (the door refuses it: no gate decision at all)."""
    room = max(_distance(SHORT), _distance(LONG))
    assert _distance(SHORT, LONG) > room  # each fits the step alone, both do not
    optimizer = GradientText(
        proposers=[TwoFixes()], lr_floor_tokens=room, lr=0.01,
        compose=2, confirm_steps=0, min_net=1.0, submit_at_net=1000.0, epochs=1, batch_size=8,
        slow_update=False,
    )  # fmt: skip
    result = sd.compile(
        ContractParity(),
        contract_examples(0, 8),
        contract_examples(100, 20),
        optimizer=optimizer,
        lm=ScriptedLM(contract_target),
        optimizer_lm=ScriptedLM(lambda m: "{}"),
        run_dir=tmp_path,
        threads=1,
    )
    lines = (tmp_path / "events.jsonl").read_text(encoding="utf-8").splitlines()
    refused = [e for e in map(json.loads, lines) if e["event"] == "refused"]
    assert not refused, refused
    assert result.gate_log and result.gate_log[0].accepted
    assert SHORT in result.best_skill.text
