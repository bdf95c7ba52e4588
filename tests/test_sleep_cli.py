"""`skillopt-dsl sleep ...`: registered on the main app, `--json` for scripts, one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

from fixtures.sleep.world import (
    PROMPTS,
    learning_target,
    make_project,
    reflecting_optimizer,
    write_sessions,
)
from typer.testing import CliRunner

from skillopt_dsl.optimizers import GradientText
from skillopt_dsl.sleep import SleepConfig, SleepProject, run_night
from skillopt_dsl.sleep.cli import sleep_app


def test_sleep_is_a_subcommand_of_the_main_cli() -> None:
    """Kills: forgetting to register the sub-app (`skillopt-dsl sleep` would not exist)."""
    from skillopt_dsl.cli import app

    done = CliRunner().invoke(app, ["sleep", "--help"])
    assert done.exit_code == 0
    for command in (
        "harvest",
        "run",
        "status",
        "diff",
        "adopt",
        "rollback",
        "schedule",
        "unschedule",
    ):
        assert command in done.output


def test_run_json_reports_a_blocked_night_without_model_calls(tmp_path: Path) -> None:
    """Kills: `--json` output that is not one JSON object, or a tiny night that spends calls."""
    home = tmp_path / "home"
    write_sessions(home, PROMPTS[:1])
    project = make_project(tmp_path)
    done = CliRunner().invoke(
        sleep_app,
        [
            "run",
            "--project",
            str(project),
            "--home",
            str(home),
            "--source",
            "jsonl",
            "--heuristic-only",
            "--json",
        ],
    )
    assert done.exit_code == 0, done.output
    data = json.loads(done.stdout)
    assert data["accepted"] is False and data["blocked"] and data["spend"]["calls"] == 0
    assert Path(data["path"], "report.md").is_file()


def test_status_diff_and_adopt_on_a_staged_night(tmp_path: Path) -> None:
    """Kills: `adopt` through the CLI bypassing the lock or the receipt, and `status` not
    showing the staged proposal."""
    home = tmp_path / "home"
    write_sessions(home)
    project = make_project(tmp_path)
    night = run_night(
        SleepConfig(
            project=project,
            home=home,
            source="jsonl",
            lm=learning_target(),
            optimizer_lm=reflecting_optimizer(),
            mine_with_model=False,
            optimizer=GradientText(epochs=1, batch_size=8),
            threads=2,
        )
    )
    runner = CliRunner()
    status = json.loads(
        runner.invoke(sleep_app, ["status", "--project", str(project), "--json"]).stdout
    )
    assert status["nights"][0]["proposal"] is True and status["nights"][0]["adopted"] is False
    diff = runner.invoke(sleep_app, ["diff", "--project", str(project)])
    assert "+++ b/CLAUDE.md" in diff.output
    adopted = runner.invoke(sleep_app, ["adopt", "--project", str(project), "--json"])
    assert adopted.exit_code == 0, adopted.output
    assert json.loads(adopted.stdout)["night_id"] == night.report.night_id
    assert (project / "CLAUDE.md").read_bytes() == (
        night.path / "proposed" / "CLAUDE.md"
    ).read_bytes()


def test_errors_are_one_line(tmp_path: Path) -> None:
    """Kills: tracebacks for user errors (a locked project, a missing project folder)."""
    project = make_project(tmp_path)
    runner = CliRunner()
    missing = runner.invoke(sleep_app, ["status", "--project", str(tmp_path / "nope")])
    assert (
        missing.exit_code == 1
        and "does not exist" in missing.output
        and "Traceback" not in missing.output
    )
    with SleepProject.open(project).lock("sleep run (other)"):
        locked = runner.invoke(sleep_app, ["adopt", "--project", str(project)])
    assert locked.exit_code == 1 and "holds this project's lock" in locked.output
