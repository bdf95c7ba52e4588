"""The gate is sacred: with a gate that rejects everything, no optimizer may change the best skill.

If any code path assigned the incumbent without an accepted `GateDecision`, these tests fail.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

import skillopt_dsl as sd
from skillopt_dsl.driver import LearningRateBound, RunView, UncommittedVerdict
from skillopt_dsl.evaluate import EvaluationReport
from skillopt_dsl.optimizers import Beam, GradientText, Optimizer, OptunaLR, ReflectiveProposer
from skillopt_dsl.optimizers.schedules import lr_at
from skillopt_dsl.runs import RunDirectory
from skillopt_dsl.testing import ScriptedLM
from skillopt_dsl.testing.contract import TEST, TRAIN, VAL, contract_reflector, contract_target
from tests.helpers import Parity


class RejectEverything(sd.Gate):
    """A gate that never accepts, however good the candidate."""

    def decide(
        self,
        candidate: EvaluationReport,
        incumbent: EvaluationReport,
        *,
        decision_index: int = 0,
        alpha: float | None = None,
    ) -> sd.GateDecision:
        decision = super().decide(candidate, incumbent, decision_index=decision_index, alpha=alpha)
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


# -- the door: it measures the change itself, against the declared lr ---------------------------

LONG_SEED = " ".join(f"Rule {i}: answer with one word." for i in range(100))  # 800 tokens


class Rogue(Optimizer):
    """A test optimizer that submits `texts` in turn, each declaring the matching `lrs`."""

    name = "rogue"

    def __init__(self, texts: list[str], lrs: list[float]) -> None:
        self.texts, self.lrs, self.verdicts = texts, lrs, []  # type: ignore[var-annotated]

    def lr_bound(self) -> LearningRateBound:
        return LearningRateBound(max_lr=0.1, floor_tokens=4)

    def optimize(self, view: RunView) -> None:
        for step, (text, lr) in enumerate(zip(self.texts, self.lrs, strict=True)):
            self.verdicts.append(
                view.submit(sd.Skill(text), lr=lr, step=step, epoch=0, kind="rogue")
            )
            view.commit({})

    def config(self) -> dict[str, object]:
        return {"optimizer": self.name}


class LongParity(Parity):
    skill = LONG_SEED


def rogue_run(rogue: Rogue, tmp_path: Path) -> sd.CompileResult:
    return sd.compile(
        LongParity(),
        TRAIN,
        VAL,
        optimizer=rogue,
        lm=ScriptedLM(contract_target),
        optimizer_lm=contract_reflector(),
        run_dir=tmp_path,
        threads=1,
    )


def test_the_door_refuses_a_step_over_the_declared_lr(tmp_path: Path) -> None:
    """Kills: a door that trusts the optimizer about its change (skips its own measurement),
    and a step budget that ignores the declared `lr` (uses the run's maximum or the floor):
    +38 tokens is over lr=0.01 of 800 tokens (8) but within lr=0.1 (80)."""
    fix = LONG_SEED + " A number divisible by 2 is even. " + "Be brief. " * 10
    rogue = Rogue([fix, fix], [0.01, 0.1])
    result = rogue_run(rogue, tmp_path)
    refused, judged = rogue.verdicts
    assert refused.status == "refused" and refused.budget_tokens == 8, refused
    assert refused.change_tokens == 38 and refused.decision is None
    assert judged.status == "accepted" and judged.budget_tokens == 80, judged
    assert [d.candidate_hash for d in result.gate_log] == [judged.candidate_hash], (
        "the refused step reached the gate"
    )
    assert result.history[0].note.startswith("refused") and not result.history[0].accepted


def test_a_resubmitted_text_is_a_duplicate_never_an_accept(tmp_path: Path) -> None:
    """Kills: the door returning the earlier (accepted) decision for a text it already judged,
    which an optimizer reads as a fresh accept."""
    fix = LONG_SEED + " A number divisible by 2 is even."
    rogue = Rogue([fix, fix, LONG_SEED + " Be brief.", LONG_SEED + " Be brief."], [0.1] * 4)
    result = rogue_run(rogue, tmp_path)
    statuses = [v.status for v in rogue.verdicts]
    assert statuses == ["accepted", "duplicate", "rejected", "duplicate"], statuses
    assert not any(v.accepted for v in rogue.verdicts if v.duplicate)
    assert len(result.gate_log) == 2, "a duplicate reached the gate"
    assert [h.note for h in result.history] == ["", "duplicate", "", "duplicate"]


def test_gradient_text_declares_the_scheduled_lr(tmp_path: Path) -> None:
    """Kills: a step budget that ignores the schedule (GradientText clipping or declaring the
    base `lr` at every step) or ignores `lr` (budget from the floor only): with an 800-token
    seed and a 1-token floor, every step's budget is ceil(lr_t * tokens) for the step
    schedule's lr_t, and no honest step is refused by the door.

    Each note makes every answer right (so it passes the screen and goes to the door in its
    own step); the gate rejects everything, so the incumbent, and the budget's base, stay the
    800-token seed."""
    paragraphs = [" ".join(f"Note {k} word {i}." for i in range(8)) for k in range(8)]
    plan = [[{"kind": "add", "after": None, "text": p, "rationale": "r"}] for p in paragraphs]
    optimizer = GradientText(
        proposers=[ReflectiveProposer(read_successes=False)],
        lr=0.1,
        schedule="step",
        lr_floor_tokens=1,
        epochs=1,
        batch_size=8,
        slow_update=False,
        compose=1,
        confirm_steps=0,
        min_net=1.0,
        submit_at_net=0.0,
    )

    def noted(messages: list[dict[str, str]]) -> str:
        if "Note" in messages[0]["content"]:
            return "even" if int(messages[-1]["content"].split()[-1]) % 2 == 0 else "odd"
        return contract_target(messages)

    result = sd.compile(
        LongParity(),
        TRAIN,
        VAL,
        optimizer=optimizer,
        lm=ScriptedLM(noted),
        optimizer_lm=contract_reflector(*plan),
        gate=RejectEverything(),
        run_dir=tmp_path,
        threads=1,
    )
    total = len(TRAIN) // 8
    tokens = LongParity().seed_skill.token_count
    assert [h.lr_budget for h in result.history] == [
        lr_at("step", 0.1, step, total) for step in range(total)
    ]
    for record in result.history:
        assert record.budget_tokens == max(math.ceil(record.lr_budget * tokens), 1), record
        assert not record.note.startswith("refused"), record
    sent = [h for h in result.history if h.candidate_hash is not None]
    clipped = [
        h
        for h in result.history
        if h.candidate_hash is None
        and any("learning-rate budget" in o["reason"] for o in h.edit_report)
    ]
    assert sent and clipped, "early steps fit their budget, late (halved) ones clip the edit"


class Forgetful(Rogue):
    """A fake optimizer that submits each text and commits its state only when told to."""

    def __init__(self, texts: list[str], *, commit: bool) -> None:
        super().__init__(texts, [0.1] * len(texts))
        self.commit = commit

    def optimize(self, view: RunView) -> None:
        for step, text in enumerate(self.texts):
            self.verdicts.append(view.submit(sd.Skill(text), lr=0.1, step=step, epoch=0, kind="f"))
            if self.commit:
                view.commit({"submitted": step + 1})


def test_the_door_takes_nothing_more_until_the_state_after_a_verdict_is_committed(
    tmp_path: Path,
) -> None:
    """Kills: a door that checkpoints a verdict without the optimizer's state after it (the
    state handed over by `RunView.commit` is what a resumed run reads), one that takes a second
    candidate while the first verdict's state is uncommitted, and a search allowed to end with
    its last verdict's state never handed over."""
    fix = LONG_SEED + " A number divisible by 2 is even."
    committed = Forgetful([fix, fix + " Be brief."], commit=True)
    rogue_run(committed, tmp_path / "committed")
    checkpoint = RunDirectory(tmp_path / "committed").load_checkpoint()
    assert checkpoint is not None and checkpoint["optimizer"] == {"submitted": 2}
    with pytest.raises(UncommittedVerdict, match="cannot submit a candidate"):
        rogue_run(Forgetful([fix, fix + " Be brief."], commit=False), tmp_path / "twice")
    with pytest.raises(UncommittedVerdict, match="cannot end the search"):
        rogue_run(Forgetful([fix], commit=False), tmp_path / "once")
