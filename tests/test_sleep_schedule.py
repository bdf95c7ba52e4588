"""Schedule: a managed crontab block that unschedule removes exactly; tests use FAKE crontabs and
never touch the real one."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from skillopt_dsl.sleep.errors import SleepError
from skillopt_dsl.sleep.schedule import block_markers, schedule, systemd_units, unschedule

PROJECT = Path("/work/shop")
OTHER_LINES = "MAILTO=me@example.com\n# my backup\n0 2 * * * /usr/local/bin/backup --all\n"


class FakeCrontab:
    """A FAKE crontab held in memory."""

    def __init__(self, text: str = "") -> None:
        self.text, self.writes = text, 0

    def read(self) -> str:
        return self.text

    def write(self, text: str) -> None:
        self.text, self.writes = text, self.writes + 1


def test_schedule_then_unschedule_leaves_other_lines_byte_for_byte() -> None:
    """Kills: rewriting the user's other crontab lines, installing the block twice on a second
    `schedule`, or `unschedule` removing more (or less) than the block."""
    tab = FakeCrontab(OTHER_LINES)
    line = schedule(
        tab,
        PROJECT,
        hour=3,
        minute=30,
        executable=["/venv/bin/python", "-m", "skillopt_dsl.cli"],
        extra=["--max-calls", "500"],
    )
    assert line.startswith(
        "30 3 * * * cd /work/shop && /venv/bin/python -m skillopt_dsl.cli sleep run --project /work/shop --max-calls 500"
    )
    assert tab.text.startswith(OTHER_LINES)
    schedule(tab, PROJECT, hour=4, minute=0, executable=["skillopt-dsl"])
    start, _end = block_markers(PROJECT)
    assert tab.text.count(start) == 1 and "0 4 * * *" in tab.text and "30 3" not in tab.text
    other = FakeCrontab(tab.text)
    schedule(other, Path("/work/blog"), hour=1, minute=0, executable=["skillopt-dsl"])
    assert unschedule(other, PROJECT)
    assert start not in other.text and "/work/blog" in other.text
    assert unschedule(tab, PROJECT) and tab.text == OTHER_LINES
    assert not unschedule(tab, PROJECT)


def test_a_block_without_its_end_line_is_refused() -> None:
    """Kills: guessing where a damaged block ends (it could delete the user's own jobs)."""
    start, _ = block_markers(PROJECT)
    tab = FakeCrontab(f"{start}\n30 3 * * * sleep run\n{OTHER_LINES}")
    with pytest.raises(SleepError, match="no end line"):
        unschedule(tab, PROJECT)
    assert tab.writes == 0


def test_systemd_units_and_time_checks() -> None:
    """Kills: a timer without `Persistent=` (missed nights never run) or accepting 25:00."""
    units = systemd_units(PROJECT, hour=2, minute=5, executable=["skillopt-dsl"])
    timer = units["skillopt-sleep-shop.timer"]
    assert "OnCalendar=*-*-* 02:05:00" in timer and "Persistent=true" in timer
    assert (
        "ExecStart=skillopt-dsl sleep run --project /work/shop"
        in units["skillopt-sleep-shop.service"]
    )
    with pytest.raises(SleepError, match="HH:MM"):
        systemd_units(PROJECT, hour=25, minute=0, executable=["x"])


def test_the_cli_uses_the_crontab_command_it_is_given(tmp_path: Path) -> None:
    """Kills: a `schedule` command hard-wired to the real `crontab` (tests pass a FAKE script
    that keeps the crontab in a file)."""
    from typer.testing import CliRunner

    from skillopt_dsl.sleep.cli import sleep_app

    store = tmp_path / "crontab.txt"
    store.write_text(OTHER_LINES)
    fake = tmp_path / "fake-crontab"
    fake.write_text(
        f"#!{sys.executable}\nimport sys\nstore = {str(store)!r}\n"
        "if sys.argv[1] == '-l':\n    sys.stdout.write(open(store).read())\n"
        "else:\n    open(store, 'w').write(sys.stdin.read())\n"
    )
    fake.chmod(0o755)
    project = tmp_path / "shop"
    project.mkdir()
    runner = CliRunner()
    done = runner.invoke(
        sleep_app,
        ["schedule", "--project", str(project), "--at", "01:15", "--crontab-command", str(fake)],
    )
    assert done.exit_code == 0, done.output
    assert "15 1 * * *" in store.read_text() and store.read_text().startswith(OTHER_LINES)
    done = runner.invoke(
        sleep_app, ["unschedule", "--project", str(project), "--crontab-command", str(fake)]
    )
    assert done.exit_code == 0 and store.read_text() == OTHER_LINES
