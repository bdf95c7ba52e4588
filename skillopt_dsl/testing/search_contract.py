"""A reusable contract suite for every optimizer that runs the screened search (issue 36's
promises: calls priced as measured, a confirmed fix submitted while the budget pays for it).

Subclass `ScreenedSearchContract` in a test module under a name pytest collects, and build the
optimizer around the proposer it is given::

    from skillopt_dsl.testing.search_contract import ScreenedSearchContract

    class TestMySearch(ScreenedSearchContract):
        def make_optimizer(self, proposer):
            return MyOptimizer(proposers=[proposer], batch_size=4)

The fakes: `OfferedEdits`, a proposer that offers the same edits at every step; the shipped
`TableLookup` agent task driven by `table_agent`, a scripted agent that spends three model
calls an episode (two `lookup` calls, then the answer) and answers bare only when the skill
says `BARE`; and the contract's parity task (`ContractParity`), fixed by `PARITY_FIX`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from skillopt_dsl.benchmarks import load_benchmark
from skillopt_dsl.benchmarks.table_lookup import TableLookup, rows
from skillopt_dsl.compile import compile
from skillopt_dsl.driver import RunView
from skillopt_dsl.json_types import json_float
from skillopt_dsl.lm import Budget
from skillopt_dsl.optimizers.base import Optimizer
from skillopt_dsl.optimizers.proposers import EditGroup, ProposalRequest, Proposer
from skillopt_dsl.optimizers.search import step as search_step
from skillopt_dsl.optimizers.search.screening import ScreenResult
from skillopt_dsl.skill import Add
from skillopt_dsl.testing.contract import ContractParity, contract_examples, contract_target
from skillopt_dsl.testing.scripted import ScriptedLM

if TYPE_CHECKING:
    import pytest

__all__ = [
    "BARE",
    "HEDGE",
    "PARITY_FIX",
    "OfferedEdits",
    "ScreenedSearchContract",
    "table_agent",
]

BARE = "Reply with the bare answer only."
"""The rule that fixes `TableLookup` for `table_agent`."""
PARITY_FIX = "A number divisible by 2 is even."
"""The rule that fixes `ContractParity` for `contract_target`."""
HEDGE = "Always hedge your answer."
"""A rule that breaks every `ContractParity` answer for `contract_target` (its format)."""

_ANSWERS = {str(r["question"]): str(r["answer"]) for r in rows()}


@dataclass(kw_only=True)
class OfferedEdits(Proposer):
    """A fake proposer: the same edit groups (one `Add` each) at every step, each naming the
    batch's failures it was written for."""

    texts: Sequence[str]
    name: str = "offers"
    told: list[list[str]] = field(default_factory=list)
    """Per request, the texts of the rejected edits it told this proposer about."""

    def propose(self, request: ProposalRequest) -> list[EditGroup]:
        self.told.append([e.text for c in request.rejected for e in c.edits if isinstance(e, Add)])
        names = tuple(e.id for e, _ in request.failures())
        return [
            EditGroup((Add(after=None, text=t),), self.name, True, t, addresses=names)
            for t in self.texts
        ]


def table_agent(messages: list[dict[str, str]]) -> str:
    """A scripted multi-turn agent for `TableLookup`: it calls `lookup` twice (three model
    calls an episode), then answers; the bare answer only when the skill says `BARE`."""
    question = messages[1]["content"].split("\n")[0]
    turns = sum(m["role"] == "assistant" for m in messages)
    if turns < 2:
        city = question.split(" is ")[-1].split(" in")[0].rstrip("?") if " is " in question else ""
        return "```json\n" + json.dumps({"tool": "lookup", "arguments": {"city": city}}) + "\n```"
    answer = _ANSWERS.get(question, "unknown")
    return answer if BARE in messages[0]["content"] else f"I believe it is {answer}."


def _events(run_dir: Path, kind: str) -> list[dict[str, object]]:
    lines = (run_dir / "events.jsonl").read_text(encoding="utf-8").splitlines()
    return [r for r in map(json.loads, lines) if r.get("event") == kind]


def _budget_checks(run_dir: Path) -> list[float]:
    return [json_float(r["calls_per_rollout"]) for r in _events(run_dir, "budget_check")]


class ScreenedSearchContract:
    """The promises every screened search keeps; subclass and implement `make_optimizer`."""

    agent_calls = 100
    parity_calls = 120
    crowded_calls = 76

    def make_optimizer(self, proposer: Proposer) -> Optimizer:
        """A fresh optimizer whose only proposer is `proposer`."""
        raise NotImplementedError

    def test_a_multi_call_agent_gets_its_decision_within_its_budget(self, tmp_path: Path) -> None:
        """Kills: a reserve that prices an agent episode (three calls) at one call (screens or
        expansions the budget cannot follow with a decision), a reserve that holds a whole
        decision back in the budget's tail (no expansion at all: the fix never found), a budget
        stop escaping `compile` as a traceback, and a search that goes on once validation is
        perfect (it stops: the fix was accepted at an early look, and the calls left do not
        pay for the rest of validation, so the stop says `budget` and that it was perfect on
        the part scored)."""
        table = load_benchmark("table_lookup", seed=0, sizes=(10, 20, 10))
        result = compile(
            TableLookup(), table.train, table.val,
            optimizer=self.make_optimizer(OfferedEdits(texts=[BARE])),
            lm=ScriptedLM(table_agent), optimizer_lm=ScriptedLM(lambda m: "{}"),
            budget=Budget(max_calls=self.agent_calls), run_dir=tmp_path, threads=1,
        )  # fmt: skip
        assert result.usage.calls <= self.agent_calls
        assert _budget_checks(tmp_path) == [3.0]
        assert result.gate_log and result.gate_log[0].accepted, result.gate_log
        (stop,) = _events(tmp_path, "stop")
        assert stop["reason"] == "budget" and str(stop["detail"]).startswith("perfect on"), stop

    def test_a_clear_fix_reaches_the_gate_within_a_tight_budget(self, tmp_path: Path) -> None:
        """Kills: a screen or an expansion that eats the calls the decision needs (the clear
        fix is found and never judged)."""
        result = compile(
            ContractParity(), contract_examples(0, 24), contract_examples(100, 30),
            optimizer=self.make_optimizer(OfferedEdits(texts=[PARITY_FIX])),
            lm=ScriptedLM(contract_target), optimizer_lm=ScriptedLM(lambda m: "{}"),
            budget=Budget(max_calls=self.parity_calls), run_dir=tmp_path, threads=1,
        )  # fmt: skip
        assert result.usage.calls <= self.parity_calls
        assert result.gate_log and result.gate_log[0].accepted, result.gate_log
        assert PARITY_FIX in result.best_skill.text

    def test_a_failing_proposal_is_struck_told_and_blocked_at_its_strikes(
        self, tmp_path: Path
    ) -> None:
        """Kills, in the search step every screened search shares: a loser screened again at
        every step (no memory: it is blocked once its summed evidence rules it out), one
        blocked at its first failure (one unlucky mini-batch ends a good edit), proposers not
        told of a struck proposal, and a screen missing from the run's search memory
        (checkpoint.json's `memory`: `screen_stats`, the proposal's summed evidence)."""
        offers = OfferedEdits(texts=[HEDGE])
        optimizer = self.make_optimizer(offers)
        compile(
            ContractParity(), contract_examples(0, 24), contract_examples(100, 30),
            optimizer=optimizer, lm=ScriptedLM(contract_target),
            optimizer_lm=ScriptedLM(lambda m: "{}"), budget=Budget(max_calls=self.parity_calls),
            run_dir=tmp_path, threads=1,
        )  # fmt: skip
        screens = [s for s in _events(tmp_path, "screen") if s["rationale"] == HEDGE]
        strikes = getattr(optimizer, "screen_strikes", None)
        assert strikes == 2 and strikes <= len(screens) < len(offers.told), (screens, offers.told)
        assert offers.told[0] == [] and HEDGE in offers.told[1], offers.told  # after one strike
        checkpoint = json.loads((tmp_path / "checkpoint.json").read_text(encoding="utf-8"))
        memory: dict[str, Any] = checkpoint["memory"]  # the run's, whichever part searched
        assert memory["screen_stats"]["batch_screened"] == len(screens), memory["screen_stats"]
        (evidence,) = memory["evidence"].values()
        assert evidence["screens"] == len(screens)
        assert evidence["scored"] == sum(json_float(s["scored"]) for s in screens)

    def test_every_screen_leaves_the_gates_first_look(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Kills: a reserve checked only before a step or an expansion, not before each
        screen: six passing proposals (each screened, and for Beam scored on its selection
        split) eat the calls of the gate's first look, and the fix they found is never judged."""
        real, after = search_step.screen, []

        def screen(view: RunView, *args: Any, **kwargs: Any) -> ScreenResult:
            result = real(view, *args, **kwargs)
            left = view.calls_left()
            assert left is not None
            after.append(left - view.decision_calls(first_look=True))
            return result

        monkeypatch.setattr(search_step, "screen", screen)
        fixes = [f"{PARITY_FIX} ({k})" for k in range(6)]
        result = compile(
            ContractParity(), contract_examples(0, 24), contract_examples(100, 30),
            optimizer=self.make_optimizer(OfferedEdits(texts=fixes)),
            lm=ScriptedLM(contract_target), optimizer_lm=ScriptedLM(lambda m: "{}"),
            budget=Budget(max_calls=self.crowded_calls), run_dir=tmp_path, threads=1,
        )  # fmt: skip
        assert after and min(after) >= 0, after  # every screen left the first look
        assert result.gate_log and result.gate_log[0].accepted, result.gate_log
        assert result.usage.calls <= self.crowded_calls
