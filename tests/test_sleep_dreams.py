"""Dream variants, contrastive GOOD/BAD rollouts and rejected edits remembered across nights
(issue 26, item 3): all off by default, variants only in training, the gate unchanged."""

from __future__ import annotations

import json
import random
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from fixtures.sleep.world import _system, learning_target, make_project, write_sessions

import skillopt_dsl.sleep.night as night_module
from skillopt_dsl.data import Splits
from skillopt_dsl.lm import LM, Budget, UsageLedger
from skillopt_dsl.lm.base import Message
from skillopt_dsl.optimizers import GradientText, HandOff
from skillopt_dsl.optimizers.proposers import ReflectiveProposer, RejectedCandidate
from skillopt_dsl.skill import Add, Skill
from skillopt_dsl.sleep import SleepConfig, SleepProject, run_night
from skillopt_dsl.sleep.dreams import REWORD_SYSTEM, dream_variants, perturb
from skillopt_dsl.sleep.judge import Entry, ScoreBook, TaskJudge
from skillopt_dsl.sleep.rejections import REJECTED_FILE, load_rejected, remember_rejected
from skillopt_dsl.sleep.replay import Replay
from skillopt_dsl.sleep.tasks import Contains, Task, to_example
from skillopt_dsl.testing import ScriptedLM
from skillopt_dsl.types import Example, Prediction

TASKS = [
    Task(
        id=f"t{i}",
        project="/p",
        intent=f"Fix the parser bug number {i}",
        checks=[Contains(value="x")],
    )
    for i in range(3)
]


def _config(project: Path, home: Path, optimizer: ScriptedLM, **kw: Any) -> SleepConfig:
    base = SleepConfig(
        project=project,
        home=home,
        source="jsonl",
        lm=learning_target(),
        optimizer_lm=optimizer,
        mine_with_model=False,
        optimizer=GradientText(epochs=1, batch_size=8),
        threads=2,
    )
    return replace(base, **kw)


def test_everything_dreamy_is_off_by_default() -> None:
    """Kills: dreams or cross-night memory switched on without being asked for."""
    config = SleepConfig(project=Path("."))
    assert (config.dream_variants, config.contrastive, config.remember_rejected) == (
        0,
        False,
        False,
    )
    assert dream_variants([to_example(t) for t in TASKS], 0) == []


def test_variants_reword_train_tasks_and_keep_their_checks() -> None:
    """Kills: variants that copy the request unchanged, lose the checks, or reword recurring
    copies (`<id>~2`) again."""
    train = [to_example(t) for t in TASKS] + [Example("t0~2", {"request": "r"}, {})]
    variants = dream_variants(train, 2, seed=3)
    assert [v.id for v in variants][:2] == ["t0~dream1", "t0~dream2"] and len(variants) == 6
    for variant in variants:
        source = next(e for e in train if e.id == variant.id.split("~")[0])
        assert variant.labels == source.labels
        assert variant.inputs["request"] != source.inputs["request"]
    assert dream_variants(train, 2, seed=3) == variants  # seeded
    assert perturb("Fix it", random.Random(0)) != "Fix it"


def test_model_rewordings_are_budgeted_and_fall_back() -> None:
    """Kills: rewording calls outside the night's budget, or a spent budget that stops the
    night instead of falling back to perturbations."""
    fake = ScriptedLM(lambda m: "Please repair parser defect " + m[-1]["content"][-1], model="s/o")
    ledger = UsageLedger(Budget(max_calls=2))
    variants = dream_variants([to_example(t) for t in TASKS], 1, lm=LM(fake, ledger=ledger))
    assert len(fake.calls) == 2 and fake.calls[0][0]["content"] == REWORD_SYSTEM
    assert variants[0].inputs["request"] == "Please repair parser defect 0"
    assert len(variants) == 3 and "Fix the parser bug number 2" in variants[2].inputs["request"]


def _bad_optimizer(seen: list[str]) -> ScriptedLM:
    """FAKE optimizer that always proposes the same useless rule (the gate rejects it)."""

    def respond(messages: list[Message]) -> str:
        if _system(messages).startswith("You improve a skill document"):
            seen.append(messages[-1]["content"])
            edit = {
                "kind": "add",
                "after": None,
                "text": "- Prefer short replies.",
                "rationale": "r",
            }
            return json.dumps({"edits": [edit]})
        return json.dumps({"edits": []})

    return ScriptedLM(respond, model="scripted/optimizer")


def test_variants_join_training_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Kills: dream variants in validation or test (the gate would judge on invented tasks)."""
    home = tmp_path / "home"
    write_sessions(home)
    seen: list[Splits] = []
    real = night_module.consolidate

    def spy(module: Any, splits: Splits, **kw: Any) -> Any:
        seen.append(splits)
        return real(module, splits, **kw)

    monkeypatch.setattr(night_module, "consolidate", spy)
    project = make_project(tmp_path)
    night = run_night(_config(project, home, _bad_optimizer([]), dream_variants=2))
    splits = seen[0]
    dreamed = [e for e in splits.train if "~dream" in e.id]
    assert dreamed and night.report.tasks["dream_variants"] == len(dreamed)
    assert not any("~" in e.id for e in splits.val + splits.test)
    assert len(splits.val) == night.report.tasks["val"]


def test_contrastive_feedback_pairs_a_bad_reply_with_a_good_one() -> None:
    """Kills: the GOOD/BAD pair missing from a failing reply's feedback, or changing its score."""
    judge = TaskJudge(mode="hard")
    book = ScoreBook()
    example = to_example(TASKS[0])
    book.record("other-skill", "t0~dream1", Entry(1.0, "ok", "x marks the spot"))
    module = Replay(skill=Skill("s"), judge=judge, book=book, contrastive=True)
    plain = Replay(skill=Skill("s"), judge=judge, book=ScoreBook(), contrastive=False)
    outcome = _outcome("no letter")
    score = module.score(example, outcome)
    assert score.value == 0.0 and "GOOD reply to this task was: 'x marks the spot'" in (
        score.feedback or ""
    )
    assert "GOOD" not in (plain.score(example, outcome).feedback or "")


def test_the_reply_the_user_accepted_is_a_good_reply() -> None:
    """Kills: the session's accepted reply not used as the GOOD side when no replay passed."""
    task = TASKS[1].model_copy(update={"reference": "use x here"})
    module = Replay(skill=Skill("s"), judge=TaskJudge(), book=ScoreBook(), contrastive=True)
    score = module.score(to_example(task), _outcome("nothing"))
    assert "'use x here'" in (score.feedback or "")


def _outcome(text: str) -> Any:
    from skillopt_dsl.module import RunOutcome

    return RunOutcome(
        prediction=Prediction({"response": text}, raw=text), output=text, trace={"skill_hash": "h"}
    )


REFLECT_ONLY = GradientText(epochs=1, batch_size=8, proposers=[ReflectiveProposer()])


def test_rejected_edits_are_remembered_across_nights(tmp_path: Path) -> None:
    """Kills: a rejected edit proposed again on the next night (the memory not read, not told
    to the proposers, or its edits not filtered)."""
    home = tmp_path / "home"
    write_sessions(home)
    project = make_project(tmp_path)
    config = _config(project, home, _bad_optimizer([]), remember_rejected=True)
    first = run_night(replace(config, optimizer=REFLECT_ONLY))
    assert not first.report.accepted  # the rule is screened out (or rejected by the gate)
    remembered = load_rejected(SleepProject.open(project))
    assert [e.text for c in remembered for e in c.edits] == ["- Prefer short replies."]
    prompts: list[str] = []
    tasks = first.path / "tasks.jsonl"
    second = run_night(
        replace(config, optimizer_lm=_bad_optimizer(prompts), tasks=tasks, optimizer=REFLECT_ONLY)
    )
    assert second.report.tasks["remembered_rejected"] == 1
    assert prompts and "Already tried and rejected" in prompts[0]
    assert "Prefer short replies" in prompts[0].split("Already tried and rejected")[1]
    assert second.report.gate_decisions == []  # never submitted again


def test_a_night_with_the_default_search_keeps_earlier_nights_rejections(tmp_path: Path) -> None:
    """Kills: earlier nights' rejections dropped when the night runs compile's default search
    (`HandOff`, which has no `proposers` of its own: the old wrapper of the optimizer's
    proposers left it unwrapped, with only a warning), and the remembered edit screened again
    by either part of it."""
    home = tmp_path / "home"
    write_sessions(home)
    project = make_project(tmp_path)
    config = _config(project, home, _bad_optimizer([]), remember_rejected=True)
    first = run_night(replace(config, optimizer=REFLECT_ONLY))
    assert load_rejected(SleepProject.open(project))
    prompts: list[str] = []
    default = replace(config, optimizer=None, optimizer_lm=_bad_optimizer(prompts))
    replay = Replay(skill=Skill("s"), judge=TaskJudge(), book=ScoreBook())
    night = night_module._Night(SleepProject.open(project), default, None)
    assert isinstance(night._optimizer(replay), HandOff)
    second = run_night(replace(default, tasks=first.path / "tasks.jsonl"))
    assert second.report.tasks["remembered_rejected"] == 1
    assert prompts and all(
        "Prefer short replies" in p.split("Already tried and rejected")[1] for p in prompts
    )
    (events_file,) = second.path.rglob("events.jsonl")
    events = [json.loads(line) for line in events_file.read_text(encoding="utf-8").splitlines()]
    fitted = [e for e in events if e["event"] == "edit_report"]
    assert not any("Prefer short replies" in json.dumps(e) for e in fitted), fitted
    assert any(e["event"] == "remembered_rejection" for e in events)


def test_without_the_flag_nothing_is_remembered(tmp_path: Path) -> None:
    """Kills: the memory file written (or read) when `remember_rejected` is off."""
    home = tmp_path / "home"
    write_sessions(home)
    project = make_project(tmp_path)
    night = run_night(_config(project, home, _bad_optimizer([])))
    assert not (project / ".skillopt" / "sleep" / REJECTED_FILE).exists()
    edit = Add(after=None, text="- Prefer short replies.")
    remember_rejected(SleepProject.open(project), "n0", [RejectedCandidate((edit,), -0.1, 1, 0)])
    again = run_night(_config(project, home, _bad_optimizer([]), tasks=night.path / "tasks.jsonl"))
    assert again.report.tasks["remembered_rejected"] == 0


def test_the_cli_flags_reach_the_night(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Kills: `--dream-variants`, `--contrastive` or `--remember-rejected` accepted by the CLI
    but not passed to the night (advice a user could not act on)."""
    from typer.testing import CliRunner

    import skillopt_dsl.sleep.cli as cli_module
    from skillopt_dsl.sleep import SleepError

    seen: list[SleepConfig] = []

    def capture(config: SleepConfig, **kw: Any) -> Any:
        seen.append(config)
        raise SleepError("captured")

    monkeypatch.setattr(cli_module, "run_night", capture)
    args = ["run", "--project", str(make_project(tmp_path)), "--heuristic-only"]
    flags = ["--dream-variants", "2", "--contrastive", "--remember-rejected"]
    done = CliRunner().invoke(cli_module.sleep_app, args + flags)
    assert "captured" in done.output and len(seen) == 1
    assert (seen[0].dream_variants, seen[0].contrastive, seen[0].remember_rejected) == (
        2,
        True,
        True,
    )
