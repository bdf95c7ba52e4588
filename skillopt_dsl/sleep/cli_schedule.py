"""`skillopt-dsl sleep schedule` and `unschedule`: run `sleep run` nightly from the crontab."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Annotated

import typer

from skillopt_dsl.sleep.cli_options import DebugOpt, ProjectOpt, sleep_errors
from skillopt_dsl.sleep.errors import SleepError
from skillopt_dsl.sleep.project import SleepProject
from skillopt_dsl.sleep.schedule import SystemCrontab, schedule, systemd_units, unschedule


def _executable() -> list[str]:
    return [sys.executable, "-m", "skillopt_dsl.cli"]


def _at(value: str) -> tuple[int, int]:
    try:
        hour, minute = (int(part) for part in value.split(":"))
    except ValueError:
        raise SleepError(f"--at takes HH:MM, got {value!r}") from None
    return hour, minute


def schedule_command(
    project: ProjectOpt = Path("."),
    at: Annotated[str, typer.Option("--at", help="Time of day, HH:MM.")] = "03:30",
    run_args: Annotated[
        str, typer.Option("--run-args", help="Extra `sleep run` flags, e.g. '--max-calls 500'.")
    ] = "",
    systemd: Annotated[
        bool, typer.Option("--systemd", help="Print a systemd user timer instead.")
    ] = False,
    crontab_command: Annotated[str, typer.Option("--crontab-command", hidden=True)] = "crontab",
    debug: DebugOpt = False,
) -> None:
    """Run `sleep run` nightly: a managed crontab block (or print a systemd user timer)."""
    with sleep_errors(debug):
        opened = SleepProject.open(project)
        hour, minute = _at(at)
        extra = shlex.split(run_args)
        if systemd:
            units = systemd_units(
                opened.path, hour=hour, minute=minute, executable=_executable(), extra=extra
            )
            for name, text in units.items():
                typer.echo(f"# ~/.config/systemd/user/{name}\n{text}")
            typer.echo(
                f"# then: systemctl --user enable --now {next(iter(units)).replace('.service', '.timer')}"
            )
            return
        line = schedule(
            SystemCrontab(crontab_command),
            opened.path,
            hour=hour,
            minute=minute,
            executable=_executable(),
            extra=extra,
        )
        typer.echo(f"scheduled: {line}")


def unschedule_command(
    project: ProjectOpt = Path("."),
    crontab_command: Annotated[str, typer.Option("--crontab-command", hidden=True)] = "crontab",
    debug: DebugOpt = False,
) -> None:
    """Remove exactly this project's crontab block."""
    with sleep_errors(debug):
        opened = SleepProject.open(project)
        removed = unschedule(SystemCrontab(crontab_command), opened.path)
        typer.echo("unscheduled" if removed else f"no Sleep block for {opened.path} in the crontab")
