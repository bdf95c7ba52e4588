"""The gate is sacred: with a gate that rejects everything, no optimizer may change the best skill.

If any code path assigned the incumbent without an accepted `GateDecision`, these tests fail.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import skillopt_dsl as sd
from skillopt_dsl.evaluate import EvaluationReport
from skillopt_dsl.optimizers import Beam, GradientText, Optimizer, OptunaLR, ReflectiveProposer
from skillopt_dsl.testing import ScriptedLM
from skillopt_dsl.testing.contract import TEST, TRAIN, VAL, contract_reflector, contract_target
from tests.helpers import Parity


class RejectEverything(sd.Gate):
    """A gate that never accepts, however good the candidate."""

    def decide(
        self, candidate: EvaluationReport, incumbent: EvaluationReport, *, decision_index: int = 0
    ) -> sd.GateDecision:
        decision = super().decide(candidate, incumbent, decision_index=decision_index)
        return sd.GateDecision(
            accepted=False,
            candidate_score=decision.candidate_score,
            incumbent_score=decision.incumbent_score,
            delta=decision.delta,
            reason="rejected by the test gate",
            candidate_hash=decision.candidate_hash,
            incumbent_hash=decision.incumbent_hash,
            n_examples=decision.n_examples,
        )


def optimizers() -> list[Optimizer]:
    reflective = [ReflectiveProposer(read_successes=False)]
    return [
        GradientText(epochs=2, batch_size=8, proposers=reflective),
        Beam(width=2, expansions=2, depth=2, proposers=reflective),
        OptunaLR(inner=GradientText(epochs=1, batch_size=8, proposers=reflective), n_trials=2),
    ]


@pytest.mark.parametrize("optimizer", optimizers(), ids=lambda o: o.name)
def test_no_optimizer_changes_the_best_skill_without_the_gate(
    optimizer: Optimizer, tmp_path: Path
) -> None:
    seed = Parity().seed_skill
    result = sd.compile(
        Parity(),
        TRAIN,
        VAL,
        optimizer=optimizer,
        lm=ScriptedLM(contract_target),
        optimizer_lm=contract_reflector(),
        gate=RejectEverything(),
        run_dir=tmp_path,
        testset=TEST,
        threads=1,
    )
    gate_events = [
        line
        for log in tmp_path.rglob("events.jsonl")
        for line in log.read_text().splitlines()
        if '"event": "gate"' in line
    ]
    assert gate_events, "candidates were proposed and judged (in the run or its sweep trials)"
    assert all('"accepted": false' in line for line in gate_events)
    assert not any(d.accepted for d in result.gate_log)
    assert result.best_skill == seed
    assert result.val_score == result.seed_val_score
    assert sd.load_skill(tmp_path / "best_skill.md").text == seed.text
    assert [p.name for p in (tmp_path / "skills").iterdir()] == ["v0001.md"]
