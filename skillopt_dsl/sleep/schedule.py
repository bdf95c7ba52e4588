"""Schedule: a managed crontab block (or a systemd user timer) that runs `sleep run` nightly.

The block is delimited by marker comments naming the project, so `unschedule` removes exactly that
block and leaves every other line of the user's crontab byte for byte. The crontab is read and
written through a `Crontab` object; `SystemCrontab` runs the `crontab` command (`crontab -l`,
`crontab -`), and tests pass a fake so they never touch a real crontab.
"""

from __future__ import annotations

import shlex
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from skillopt_dsl.sleep.errors import SleepError

__all__ = [
    "Crontab",
    "SystemCrontab",
    "block_markers",
    "install_block",
    "remove_block",
    "schedule",
    "systemd_units",
    "unschedule",
]


class Crontab(Protocol):
    """Where the user's crontab is read from and written to."""

    def read(self) -> str:
        """The whole crontab ('' when the user has none)."""
        ...

    def write(self, text: str) -> None:
        """Replace the whole crontab."""
        ...


@dataclass(frozen=True)
class SystemCrontab:
    """The real crontab, through the `crontab` command (`command` may name another binary)."""

    command: str = "crontab"

    def read(self) -> str:
        try:
            done = subprocess.run(
                [self.command, "-l"], capture_output=True, text=True, check=False, timeout=30
            )
        except FileNotFoundError:
            raise SleepError(
                f"`{self.command}` is not installed; use `sleep schedule --systemd` instead"
            ) from None
        if done.returncode != 0:
            if "no crontab" in done.stderr.casefold():
                return ""
            raise SleepError(f"`{self.command} -l` failed: {done.stderr.strip()}")
        return done.stdout

    def write(self, text: str) -> None:
        done = subprocess.run(
            [self.command, "-"], input=text, capture_output=True, text=True, check=False, timeout=30
        )
        if done.returncode != 0:
            raise SleepError(f"`{self.command} -` refused the new crontab: {done.stderr.strip()}")


def block_markers(project: Path) -> tuple[str, str]:
    """The first and last line of the managed block for `project`."""
    return (
        f"# >>> skillopt-dsl sleep {project} >>>",
        f"# <<< skillopt-dsl sleep {project} <<<",
    )


def _check_time(hour: int, minute: int) -> None:
    if not (0 <= hour <= 23 and 0 <= minute <= 59):
        raise SleepError(f"--at must be a time of day HH:MM, got {hour:02d}:{minute:02d}")


def _command(executable: Sequence[str], project: Path, extra: Sequence[str]) -> str:
    log = project / ".skillopt" / "sleep" / "cron.log"
    args = [*executable, "sleep", "run", "--project", str(project), *extra]
    return f"cd {shlex.quote(str(project))} && {shlex.join(args)} >> {shlex.quote(str(log))} 2>&1"


def install_block(
    crontab_text: str,
    project: Path,
    *,
    hour: int,
    minute: int,
    executable: Sequence[str],
    extra: Sequence[str] = (),
) -> str:
    """`crontab_text` with the project's block added or replaced (other lines untouched)."""
    _check_time(hour, minute)
    start, end = block_markers(project)
    kept = remove_block(crontab_text, project)
    line = f"{minute} {hour} * * * {_command(executable, project, extra)}"
    prefix = kept if not kept or kept.endswith("\n") else kept + "\n"
    return f"{prefix}{start}\n{line}\n{end}\n"


def remove_block(crontab_text: str, project: Path) -> str:
    """`crontab_text` without the project's block; a block missing its end line is refused."""
    start, end = block_markers(project)
    lines = crontab_text.splitlines(keepends=True)
    stripped = [line.rstrip("\n") for line in lines]
    if start not in stripped:
        if end in stripped:
            raise SleepError(
                f"the crontab has an end marker for {project} but no start; fix it with `crontab -e`"
            )
        return crontab_text
    first = stripped.index(start)
    if end not in stripped[first:]:
        raise SleepError(
            f"the crontab's Sleep block for {project} has no end line ({end!r}); "
            "fix it with `crontab -e` (Sleep never guesses where a block ends)"
        )
    last = first + stripped[first:].index(end)
    return "".join(lines[:first] + lines[last + 1 :])


def schedule(
    crontab: Crontab,
    project: Path,
    *,
    hour: int = 3,
    minute: int = 30,
    executable: Sequence[str],
    extra: Sequence[str] = (),
) -> str:
    """Install (or replace) the project's nightly block; returns the installed line."""
    new = install_block(
        crontab.read(), project, hour=hour, minute=minute, executable=executable, extra=extra
    )
    crontab.write(new)
    start, _ = block_markers(project)
    lines = new.splitlines()
    return lines[lines.index(start) + 1]


def unschedule(crontab: Crontab, project: Path) -> bool:
    """Remove exactly the project's block; False when there was none."""
    current = crontab.read()
    new = remove_block(current, project)
    if new == current:
        return False
    crontab.write(new)
    return True


def systemd_units(
    project: Path, *, hour: int, minute: int, executable: Sequence[str], extra: Sequence[str] = ()
) -> dict[str, str]:
    """A systemd user service and timer (file name → text) that run `sleep run` nightly."""
    _check_time(hour, minute)
    args = shlex.join([*executable, "sleep", "run", "--project", str(project), *extra])
    name = "skillopt-sleep-" + "".join(c if c.isalnum() else "-" for c in project.name).strip("-")
    service = (
        "[Unit]\nDescription=skillopt-dsl Sleep for " + str(project) + "\n\n"
        "[Service]\nType=oneshot\nWorkingDirectory=" + str(project) + "\nExecStart=" + args + "\n"
    )
    timer = (
        "[Unit]\nDescription=Nightly skillopt-dsl Sleep for " + str(project) + "\n\n"
        f"[Timer]\nOnCalendar=*-*-* {hour:02d}:{minute:02d}:00\nPersistent=true\n\n"
        "[Install]\nWantedBy=timers.target\n"
    )
    return {f"{name}.service": service, f"{name}.timer": timer}
