"""Stage: a night's folder is written whole or not at all; a leftover `.partial` folder is
described as what it is — the stage of a run that failed (with its error), or of one that was
killed before it could say."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from fixtures.sleep.world import PROMPTS, make_project, write_sessions
from typer.testing import CliRunner

from skillopt_dsl.sleep import SleepConfig, SleepProject, run_night
from skillopt_dsl.sleep.cli import sleep_app
from skillopt_dsl.sleep.errors import SleepError
from skillopt_dsl.sleep.stage import FAILED_NOTE, describe_partial


def _failed_run(tmp_path: Path) -> tuple[Path, Path]:
    """A project whose night fails after its partial folder exists (a broken tasks file)."""
    project = make_project(tmp_path)
    broken = tmp_path / "tasks.jsonl"
    broken.write_text('{"id": "t1", "project": "p", "intent": "x", "checks": "not json"}\n')
    with pytest.raises(SleepError):
        run_night(SleepConfig(project=project, tasks=broken))
    (partial,) = SleepProject.open(project).partial_nights()
    return project, partial


def test_a_failed_runs_partial_folder_is_not_reported_as_a_killed_run(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Kills: a run that stops on an error leaving its `.partial` folder unmarked, so that
    `sleep status` and the next run call it "a killed run" (issue 26, item 5)."""
    project, partial = _failed_run(tmp_path)
    assert (partial / FAILED_NOTE).is_file()
    status = CliRunner().invoke(sleep_app, ["status", "--project", str(project)])
    assert f"leftover {partial.name}: the unfinished stage of a run that failed: " in status.output
    assert "SleepError" in status.output and "killed" not in status.output
    assert "the next `skillopt-dsl sleep run` removes it" in status.output
    home = tmp_path / "home"
    write_sessions(home, PROMPTS[:1])
    with caplog.at_level(logging.WARNING, logger="skillopt_dsl.sleep.night"):
        run_night(SleepConfig(project=project, home=home, source="jsonl", mine_with_model=False))
    removed = [r.getMessage() for r in caplog.records if r.getMessage().startswith("removed")]
    assert removed == [
        f"removed {partial.name}: the unfinished stage of a run that failed: "
        + removed[0].split("failed: ", 1)[1]
    ]
    assert "SleepError" in removed[0] and not partial.exists()


def test_a_partial_folder_without_a_note_is_a_killed_run(tmp_path: Path) -> None:
    """Kills: describing every leftover folder as failed (a SIGKILL leaves no note)."""
    partial = tmp_path / "20260301T030000Z.partial"
    partial.mkdir()
    assert describe_partial(partial) == (
        "20260301T030000Z.partial: the unfinished stage of a run that was killed (or crashed) "
        "before it finished"
    )
