"""End to end with FAKE models (ScriptedLM): a night stages a real improvement that adopt applies
and rollback undoes byte for byte; nights that cannot or do not improve stage no proposal; the
budget stops a night exactly at its limit; the lock and killed runs."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import pytest
from fixtures.sleep.world import (
    MEMORY,
    PROMPTS,
    learning_target,
    make_project,
    reflecting_optimizer,
    stubborn_target,
    write_sessions,
)

from skillopt_dsl.lm import Budget
from skillopt_dsl.optimizers import GradientText
from skillopt_dsl.sleep import (
    SleepConfig,
    SleepError,
    SleepLocked,
    SleepProject,
    StageMismatch,
    adopt,
    rollback,
    run_night,
)
from skillopt_dsl.sleep.memory import LEARNED_START
from skillopt_dsl.sleep.tasks import assign_split, task_id
from skillopt_dsl.testing import ScriptedLM


@pytest.fixture
def world(tmp_path: Path) -> tuple[Path, Path]:
    home = tmp_path / "home"
    write_sessions(home)
    return make_project(tmp_path), home


def _config(
    project: Path, home: Path, target: ScriptedLM, optimizer: ScriptedLM, **kw: object
) -> SleepConfig:
    base = SleepConfig(
        project=project,
        home=home,
        source="jsonl",
        lm=target,
        optimizer_lm=optimizer,
        mine_with_model=False,
        optimizer=GradientText(epochs=1, batch_size=8),
        threads=2,
    )
    return replace(base, **kw)  # type: ignore[arg-type]


def test_a_real_improvement_is_staged_adopted_and_rolled_back(world: tuple[Path, Path]) -> None:
    """Kills: staging without the gate's acceptance, adopt writing anything but the pinned
    proposal, and a rollback that does not restore the old bytes exactly."""
    project, home = world
    before = (project / "CLAUDE.md").read_bytes()
    result = run_night(_config(project, home, learning_target(), reflecting_optimizer()))
    report = result.report
    assert report.accepted and report.proposed_files == ["CLAUDE.md"]
    assert report.candidate_val is not None and report.seed_val is not None
    assert report.candidate_val > report.seed_val
    assert any(d["accepted"] for d in report.gate_decisions)
    assert (project / "CLAUDE.md").read_bytes() == before  # staging never touches live files
    staged = result.path / "proposed" / "CLAUDE.md"
    assert "Decimal" in staged.read_text() and LEARNED_START in staged.read_text()
    manifest = json.loads((result.path / "manifest.json").read_text())
    assert set(manifest["live"]) == {"CLAUDE.md"} and manifest["accepted"]
    for name in ("report.md", "report.json", "diff.patch", "evidence.jsonl", "tasks.jsonl"):
        assert (result.path / name).is_file(), name
    assert (result.path / "tasks").is_dir()
    assert (
        "+- Money is always `Decimal`." in (result.path / "diff.patch").read_text()
        or "Decimal" in (result.path / "diff.patch").read_text()
    )
    assert (project / "CLAUDE.md").read_text().startswith(MEMORY)

    sleep_project = SleepProject.open(project)
    adopt(sleep_project)
    assert (project / "CLAUDE.md").read_bytes() == staged.read_bytes()
    assert (project / "CLAUDE.md").read_text().startswith(MEMORY)  # the user's text is kept
    rollback(sleep_project)
    assert (project / "CLAUDE.md").read_bytes() == before


def test_a_night_where_nothing_passes_stages_no_proposal(world: tuple[Path, Path]) -> None:
    """Kills: staging the last candidate (or the seed as a "proposal") when the gate accepted
    nothing."""
    project, home = world
    result = run_night(_config(project, home, stubborn_target(), reflecting_optimizer()))
    assert not result.report.accepted
    assert not (result.path / "proposed").exists()
    assert (result.path / "diff.patch").read_text() == ""
    assert "no candidate passed the gate" in (result.report.blocked or "")
    assert json.loads((result.path / "manifest.json").read_text())["accepted"] is False
    with pytest.raises(SleepError, match=r"staged no proposal"):
        adopt(SleepProject.open(project), result.report.night_id)


def test_a_night_with_one_task_says_nothing_can_be_accepted(tmp_path: Path) -> None:
    """Kills: running the optimizer (and spending) on a night whose val is too small for the
    gate to accept anything, or not saying so in the report."""
    home = tmp_path / "home"
    write_sessions(home, PROMPTS[:1])
    project = make_project(tmp_path)
    target, optimizer = learning_target(), reflecting_optimizer()
    result = run_night(_config(project, home, target, optimizer))
    assert not result.report.accepted
    assert (
        "nothing can" in (result.report.blocked or "")
        or "no validation tasks" in (result.report.blocked or "")
        or "no training tasks" in (result.report.blocked or "")
    )
    assert target.calls == [] and optimizer.calls == []
    assert "nothing could be accepted" in (result.path / "report.md").read_text()


def test_val_smaller_than_the_gate_needs_is_reported(tmp_path: Path) -> None:
    """Kills: a night with a handful of val tasks pretending a gain could pass a gate whose
    significance test needs more."""
    home = tmp_path / "home"
    write_sessions(home, PROMPTS[:5])
    project = make_project(tmp_path)
    result = run_night(_config(project, home, learning_target(), reflecting_optimizer()))
    blocked = result.report.blocked or ""
    minimum = result.report.gate_minimum_val
    assert minimum is not None and result.report.tasks["val"] < minimum
    assert f"cannot accept a candidate on fewer than {minimum}" in blocked


def test_a_live_file_edited_after_staging_makes_adopt_refuse(world: tuple[Path, Path]) -> None:
    """Kills: adopt without the manifest's hash check (the user's new edit would be lost)."""
    project, home = world
    run_night(_config(project, home, learning_target(), reflecting_optimizer()))
    edited = (project / "CLAUDE.md").read_bytes() + b"\n- my new note\n"
    (project / "CLAUDE.md").write_bytes(edited)
    with pytest.raises(StageMismatch, match=r"CLAUDE\.md changed since night"):
        adopt(SleepProject.open(project))
    assert (project / "CLAUDE.md").read_bytes() == edited


def test_the_budget_stops_a_night_exactly_at_its_limit(world: tuple[Path, Path]) -> None:
    """Kills: a budget that is never read, one checked only after the calls, or mining and
    judging calls that are not counted against the night's limit.

    A limit below what scoring the live files needs stops the night exactly at it. A larger
    one lets the search run: it stops itself (by design) once the calls left cannot pay for
    another step and a gate decision, and says how many were left."""
    project, home = world
    target, optimizer = learning_target(), reflecting_optimizer()
    config = _config(
        project, home, target, optimizer, budget=Budget(max_calls=10), fractions=(0.5, 0.5, 0.0)
    )
    result = run_night(config)
    assert len(target.calls) + len(optimizer.calls) == 10
    assert "budget ran out" in (result.report.blocked or "")
    assert (result.path / "report.json").is_file()

    (project / ".skillopt" / "sleep" / "state.json").unlink()  # harvest the same sessions again
    target, optimizer = learning_target(), reflecting_optimizer()
    result = run_night(
        replace(config, lm=target, optimizer_lm=optimizer, budget=Budget(max_calls=70))
    )
    spent = len(target.calls) + len(optimizer.calls)
    assert optimizer.calls and spent <= 70, "the search ran a step, within the limit"
    assert result.report.spend["calls"] == spent, "every call is counted against the limit"
    assert result.report.stop_reason in ("budget", "perfect")  # "perfect": nothing to certify
    (events,) = result.path.rglob("events.jsonl")
    lines = events.read_text(encoding="utf-8").splitlines()
    records = [json.loads(line) for line in lines]
    (stop,) = [e for e in records if e["event"] == "stop"]
    # after the search, the validation tasks the best skill and the seed were never replayed on
    # are scored when the calls left pay for them: the stop said what was left before that
    assert 0 <= 70 - spent <= stop["calls_left"] < 70
    assert (result.path / "report.json").is_file()


def test_no_regression_guard_rejects_a_candidate_worse_on_any_val_task(
    world: tuple[Path, Path],
) -> None:
    """Kills: `--no-regression` implemented outside the gate, or a guard that compares means
    (a candidate better on average but worse on one val task would pass)."""
    project, home = world
    fractions = (0.4, 0.6, 0.0)
    victim = next(p for p in PROMPTS if assign_split(task_id("shop", p), fractions) == "val")

    def respond(messages: list[dict[str, str]]) -> str:
        system = messages[0]["content"] if messages[0]["role"] == "system" else ""
        if "Decimal" in system and victim in messages[-1]["content"]:
            return "I can't help with float amounts."
        return (
            "Keep every amount as a Decimal value." if "Decimal" in system else "Use float amounts."
        )

    target = ScriptedLM(respond, model="scripted/target")
    plain = run_night(_config(project, home, target, reflecting_optimizer(), fractions=fractions))
    assert plain.report.accepted  # better on average: the plain gate accepts it
    (project / ".skillopt" / "sleep" / "state.json").unlink()  # harvest the same sessions again
    guarded = run_night(
        _config(
            project, home, target, reflecting_optimizer(), fractions=fractions, no_regression=True
        )
    )
    assert guarded.report.no_regression
    assert not guarded.report.accepted
    assert any("no_regression" in d["reason"] for d in guarded.report.gate_decisions)


def test_a_second_run_names_the_lock_holder(world: tuple[Path, Path]) -> None:
    """Kills: two overlapping runs on one project (no lock), or a lock error that does not say
    who holds it."""
    project, home = world
    sleep_project = SleepProject.open(project)
    with (
        sleep_project.lock("sleep run --from-test"),
        pytest.raises(SleepLocked, match=rf"sleep run --from-test.*pid {os.getpid()}"),
    ):
        run_night(_config(project, home, learning_target(), reflecting_optimizer()))


def test_a_killed_run_leaves_no_half_written_stage(world: tuple[Path, Path]) -> None:
    """Kills: a stage written in place (a killed run would leave a folder that looks staged) or
    a stale lock that blocks every later run."""
    project, home = world
    sleep_project = SleepProject.open(project)
    partial = sleep_project.night_dir("20250101T000000Z.partial")
    (partial / "proposed").mkdir(parents=True)
    (partial / "proposed" / "CLAUDE.md").write_text("half")
    sleep_project.lock_path.write_text(
        json.dumps({"pid": 999999999, "host": os.uname().nodename, "command": "sleep run"})
    )
    result = run_night(_config(project, home, learning_target(), reflecting_optimizer()))
    assert not partial.exists()
    assert [p.name for p in sleep_project.nights()] == [result.report.night_id]
    assert not sleep_project.lock_path.exists()


def test_the_watermark_advances_only_after_the_stage_is_complete(world: tuple[Path, Path]) -> None:
    """Kills: a watermark saved before staging (a crash would skip sessions forever) or not
    saved at all (every night would re-read everything)."""
    project, home = world
    first = run_night(_config(project, home, stubborn_target(), reflecting_optimizer()))
    assert first.report.harvest["sessions"] == len(PROMPTS)
    mark = SleepProject.open(project).watermark()
    assert mark is not None and mark.tzinfo is not None
    second = run_night(_config(project, home, stubborn_target(), reflecting_optimizer()))
    assert second.report.harvest["sessions"] == 0
    assert second.report.harvest["skipped"]["before_watermark"] == len(PROMPTS)


def test_a_night_scores_its_test_tasks_for_the_seed_and_the_candidate(
    world: tuple[Path, Path],
) -> None:
    """Kills: consolidation dropping the night's test split (the report's test line would read
    n/a for both documents)."""
    project, home = world
    report = run_night(_config(project, home, learning_target(), reflecting_optimizer())).report
    assert report.tasks["test"] > 0
    assert report.seed_test is not None and report.candidate_test is not None
