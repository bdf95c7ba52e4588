"""What every screened search promises, whichever optimizer runs it (GradientText, Beam).

The shared pieces (`screening.EditEvidence`, the measured `RunView.calls_per_rollout`, the
reserve of `RunView.decision_calls`) are held to one set of promises here, parametrised over
the optimizers that use them. Each test names the regression it kills.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import skillopt_dsl as sd
from skillopt_dsl.benchmarks.table_lookup import TableLookup
from skillopt_dsl.optimizers import Beam, GradientText, Optimizer
from skillopt_dsl.testing.contract import ContractParity, contract_examples, contract_target
from skillopt_dsl.testing.scripted import ScriptedLM
from tests.test_search_hard_ground import BARE, GOOD, TABLE, Offers, looking_agent

TRAIN = contract_examples(0, 24)
VAL = contract_examples(100, 30)
CALLS = 180


def optimizers(text: str) -> list[Optimizer]:
    """Each optimizer that runs the screened search, with a fake proposer offering `text`."""
    return [
        GradientText(proposers=[Offers(texts=[text])], batch_size=4),
        Beam(proposers=[Offers(texts=[text])], batch_size=4, width=2, expansions=1),
    ]


def events(run_dir: Path, kind: str) -> list[dict[str, Any]]:
    lines = (run_dir / "events.jsonl").read_text(encoding="utf-8").splitlines()
    return [e for e in map(json.loads, lines) if e["event"] == kind]


@pytest.mark.parametrize("index", [0, 1], ids=["gradient-text", "beam"])
def test_a_multi_call_agent_gets_its_decision_within_its_budget(
    tmp_path: Path, index: int
) -> None:
    """Kills: an optimizer whose reserve prices an agent episode (three calls) at one call: it
    starts screens and expansions the budget cannot follow with a decision (the fix is found
    and never judged), or lets a budget stop escape as a traceback."""
    optimizer = optimizers(BARE)[index]
    result = sd.compile(
        TableLookup(), TABLE.train, TABLE.val, optimizer=optimizer,
        lm=ScriptedLM(looking_agent), optimizer_lm=ScriptedLM(lambda m: "{}"),
        budget=sd.Budget(max_calls=CALLS), run_dir=tmp_path, threads=1,
    )  # fmt: skip
    assert result.usage.calls <= CALLS
    (check,) = events(tmp_path, "budget_check")
    assert check["calls_per_rollout"] == pytest.approx(3.0)
    assert result.gate_log and result.gate_log[0].accepted, result.gate_log


@pytest.mark.parametrize("index", [0, 1], ids=["gradient-text", "beam"])
def test_a_clear_fix_reaches_the_gate_within_a_tight_budget(tmp_path: Path, index: int) -> None:
    """Kills: a screen or an expansion that eats the calls the decision needs (the clear fix is
    found and never judged)."""
    optimizer = optimizers(GOOD)[index]
    result = sd.compile(
        ContractParity(), TRAIN, VAL, optimizer=optimizer, lm=ScriptedLM(contract_target),
        optimizer_lm=ScriptedLM(lambda m: "{}"), budget=sd.Budget(max_calls=120),
        run_dir=tmp_path, threads=1,
    )  # fmt: skip
    assert result.usage.calls <= 120
    assert result.gate_log and result.gate_log[0].accepted, result.gate_log
    assert GOOD in result.best_skill.text
