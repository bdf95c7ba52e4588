"""Guards on the door (`RunView.submit`) that the mutation audit of issue 20 found unguarded:
the declared lr against the run's `max_lr`, the change measured from the incumbent, the
incumbent resubmitted as a duplicate, and a duplicate counted as no progress by patience.

`Submitter` is a fake optimizer that submits the texts it is given; `ScriptedLM` fakes both
models (`contract_target` answers right only when the skill says "divisible by 2").
"""

from __future__ import annotations

from pathlib import Path

import pytest

import skillopt_dsl as sd
from skillopt_dsl.driver import LearningRateBound, RunView, Verdict
from skillopt_dsl.optimizers import GradientText, Optimizer, ReflectiveProposer
from skillopt_dsl.skill import token_distance
from skillopt_dsl.testing import ScriptedLM
from skillopt_dsl.testing.contract import (
    FIX_EDIT,
    NEUTRAL_EDIT,
    SAME_TEXT_EDIT,
    TRAIN,
    VAL,
    ContractParity,
    contract_reflector,
    contract_target,
)

LONG_SEED = " ".join(f"Rule {i}: answer with one word." for i in range(100))  # 800 tokens
FIX = LONG_SEED + " A number divisible by 2 is even."


class LongParity(ContractParity):
    skill = LONG_SEED


class Submitter(Optimizer):
    """A fake optimizer: submits `steps` (text, declared lr) in turn under max_lr 0.1 and a
    4-token floor, and keeps every verdict."""

    name = "submitter"

    def __init__(self, steps: list[tuple[str, float]]) -> None:
        self.steps = steps
        self.verdicts: list[Verdict] = []

    def lr_bound(self) -> LearningRateBound:
        return LearningRateBound(max_lr=0.1, floor_tokens=4)

    def optimize(self, view: RunView) -> None:
        for step, (text, lr) in enumerate(self.steps):
            verdict = view.submit(sd.Skill(text), lr=lr, step=step, epoch=0, kind="fake")
            view.commit({})
            self.verdicts.append(verdict)

    def config(self) -> dict[str, object]:
        return {"optimizer": self.name}


def run(
    optimizer: Optimizer, tmp_path: Path, module: sd.SkillModule | None = None
) -> sd.CompileResult:
    return sd.compile(
        module or LongParity(),
        TRAIN,
        VAL,
        optimizer=optimizer,
        lm=ScriptedLM(contract_target),
        optimizer_lm=contract_reflector(),
        run_dir=tmp_path,
        threads=1,
    )


def test_a_step_declared_above_max_lr_is_refused(tmp_path: Path) -> None:
    """Kills: the door's `lr <= max_lr` check dropped. The fix is a small change (well within
    the budget of lr 0.5, and of lr 0.1), so only the declared rate itself can refuse it."""
    submitter = Submitter([(FIX, 0.5)])
    result = run(submitter, tmp_path)
    (verdict,) = submitter.verdicts
    assert verdict.status == "refused", verdict
    assert "outside (0, 0.1]" in verdict.reason
    assert result.gate_log == [], "a step over max_lr reached the gate"
    assert result.best_skill == LongParity().seed_skill


def test_the_change_is_measured_from_the_incumbent_not_the_seed(tmp_path: Path) -> None:
    """Kills: the door measuring the edit distance from the seed instead of the incumbent.
    After the fix is accepted, a 2-token addition at lr 0.005 (budget max(ceil(0.005 * 808),
    4) = 5 tokens) is within budget from the incumbent, but 10 tokens from the seed."""
    small = FIX + " Be brief."
    submitter = Submitter([(FIX, 0.1), (small, 0.005)])
    result = run(submitter, tmp_path)
    accepted, second = submitter.verdicts
    assert accepted.accepted, accepted
    from_incumbent, from_seed = token_distance(FIX, small), token_distance(LONG_SEED, small)
    assert from_incumbent <= second.budget_tokens < from_seed, (second, from_seed)
    assert second.change_tokens == from_incumbent
    assert second.status == "rejected", second  # judged by the gate (a neutral edit)
    assert len(result.gate_log) == 2


def test_resubmitting_the_incumbent_is_a_duplicate_not_a_gate_decision(tmp_path: Path) -> None:
    """Kills: the duplicate-of-incumbent check dropped (only texts already judged are
    duplicates): the seed text resubmitted would be scored and gated, spending a decision."""
    submitter = Submitter([(LONG_SEED, 0.1), (FIX, 0.1), (FIX, 0.1)])
    result = run(submitter, tmp_path)
    statuses = [v.status for v in submitter.verdicts]
    assert statuses == ["duplicate", "accepted", "duplicate"], statuses
    assert [d.candidate_hash for d in result.gate_log] == [sd.Skill(FIX).hash]
    assert result.gate_log[0].decision_index == 0, "the resubmitted seed spent a decision"


@pytest.mark.timeout(120)
def test_a_duplicate_counts_towards_patience(tmp_path: Path) -> None:
    """Kills: a duplicate verdict not counting towards `patience_steps` (only rejections
    counted). The fake reflector proposes a neutral edit (rejected), then the same text by
    another edit (a duplicate), then the fix: with patience_steps=2 the run stops after the
    duplicate, before the fix is ever proposed.

    "Be brief." helps on the training numbers only: it passes the screen, reaches the door in
    its own step and is rejected on validation; the same text again passes the screen too,
    and the door answers "duplicate"."""
    optimizer = GradientText(
        proposers=[ReflectiveProposer(read_successes=False)],
        epochs=1,
        batch_size=8,
        patience_steps=2,
        slow_update=False,
        compose=1,
        confirm_steps=0,
        min_net=1.0,
        submit_at_net=0.0,
    )
    training = {int(e.inputs["number"]) for e in TRAIN}

    def overfit(messages: list[dict[str, str]]) -> str:
        number = int(messages[-1]["content"].split()[-1])
        if "Be brief." in messages[0]["content"] and number in training:
            return "even" if number % 2 == 0 else "odd"
        return contract_target(messages)

    result = sd.compile(
        ContractParity(),
        TRAIN,
        VAL,
        optimizer=optimizer,
        lm=ScriptedLM(overfit),
        optimizer_lm=contract_reflector([NEUTRAL_EDIT], [SAME_TEXT_EDIT], [FIX_EDIT]),
        run_dir=tmp_path,
        threads=1,
    )
    assert [h.note for h in result.history] == ["", "duplicate"], result.history
    assert not result.improved, "the run went on past its patience and reached the fix"
    events = (tmp_path / "events.jsonl").read_text(encoding="utf-8")
    assert '"reason": "patience_steps"' in events
