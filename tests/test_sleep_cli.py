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
        "review",
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


REAL = Path(__file__).parent / "fixtures" / "sleep" / "real_home"


def test_harvest_writes_what_it_read_and_prints_the_path(tmp_path: Path) -> None:
    """Kills: `sleep harvest` not showing what was read (issue 18, item 2: no sessions.jsonl),
    rows without the redacted prompts in order, or figures for the whole home shown as the
    project's."""
    project = tmp_path / "app"
    (project / ".skillopt").mkdir(parents=True)
    (project / ".skillopt" / "sleep.json").write_text(json.dumps({"session_cwds": ["/work/app"]}))
    done = CliRunner().invoke(
        sleep_app,
        ["harvest", "--project", str(project), "--home", str(REAL), "--heuristic-only"],
    )
    assert done.exit_code == 0, done.output
    path = project / ".skillopt" / "sleep" / "review" / "sessions.jsonl"
    assert f"sessions read: {path}" in done.output
    assert "this project: 3 session(s)" in done.output and "8 redaction(s)" in done.output
    assert "home-wide (every file under the home): 5 file(s)" in done.output
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["agent"] for r in rows] == ["codex", "claude", "codex"]
    claude = rows[1]
    assert set(claude) == {
        "id",
        "agent",
        "cwd",
        "started",
        "prompts",
        "tool_calls",
        "assistant_chars",
    }
    assert claude["prompts"][0].startswith("/fix-issue the login page crashes")
    assert claude["tool_calls"] == 2 and claude["assistant_chars"] > 0
    assert "ghp_Q7rT2mX9" not in path.read_text() and "[REDACTED:github_token]" in path.read_text()


def test_heuristic_only_is_documented_in_the_help() -> None:
    """Kills: `--heuristic-only` without help text (issue 18, item 5)."""
    import typer

    group = typer.main.get_command(sleep_app)
    for command in ("harvest", "run"):
        params = group.commands[command].params  # type: ignore[attr-defined]
        option = next(p for p in params if p.name == "heuristic_only")
        assert option.help and option.help.startswith("Mine tasks without a model"), command


def test_status_shows_figures_or_says_why_there_are_none(tmp_path: Path) -> None:
    """Kills: `sleep status` printing `val None -> None` for a night that could not replay
    (issue 18, item 5) instead of the reason."""
    home = tmp_path / "home"
    write_sessions(home, PROMPTS[:1])
    project = make_project(tmp_path)
    runner = CliRunner()
    empty = runner.invoke(sleep_app, ["status", "--project", str(project)])
    assert "no staged night yet" in empty.output
    runner.invoke(
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
        ],
    )
    status = runner.invoke(sleep_app, ["status", "--project", str(project)])
    assert status.exit_code == 0, status.output
    assert "None" not in status.output
    assert "no val scores: no validation tasks" in status.output
