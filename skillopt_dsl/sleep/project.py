"""A project as Sleep sees it: its folders, its optional config, its lock and its watermark.

Everything Sleep writes lives under `<project>/.skillopt/sleep/`: one folder per night, the
backups and receipts of adoptions, the watermark (`state.json`) and the lock. The optional
`<project>/.skillopt/sleep.json` (a `ProjectConfig`) names the skill file, the agent and any
other working directories the project's sessions were recorded in.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import socket
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import pydantic
from pydantic import BaseModel, ConfigDict, Field

from skillopt_dsl.file_transaction import atomic_write, sha256_of
from skillopt_dsl.json_types import JSONObject
from skillopt_dsl.sleep.errors import SleepError, SleepLocked
from skillopt_dsl.sleep.harvest import ProjectMatcher, utc_now
from skillopt_dsl.sleep.sources.registry import check_agent, check_replay_agent
from skillopt_dsl.sleep.transcript import AgentName

__all__ = ["ProjectConfig", "ReplayConfig", "SleepProject", "atomic_write", "sha256_of"]

logger = logging.getLogger(__name__)

NIGHT_ID = re.compile(r"\d{8}T\d{6}Z(?:-\d+)?")


class ReplayConfig(BaseModel):
    """`sleep.json`'s `replay`: what the night's replays run on, an agent CLI *or* a model.

    Attributes:
        agent: run each replay through the user's own agent CLI, in a copy of the project (see
            `skillopt_dsl.sleep.agent_replay`): a source with a `replay_command` (`claude` runs
            `claude -p`, `codex` runs `codex exec`; `skillopt_dsl.sleep.sources.replay_choices`).
        model: or a model (a litellm string such as `openai/gpt-4o-mini`).
        argv: the agent's command template instead of the default (`{prompt}` is the task).
        timeout_s: each agent run's wall-clock limit.
        env: environment variables passed to the agent besides its API key variables.
        max_usd_per_run: the declared worst-case price of one agent run (USD); needed with a
            dollar budget (`--max-usd`).
    """

    model_config = ConfigDict(extra="forbid")

    agent: AgentName | None = None
    model: str | None = None
    argv: list[str] | None = None
    timeout_s: float = Field(default=600.0, gt=0)
    env: list[str] = Field(default_factory=list)
    max_usd_per_run: float | None = Field(default=None, ge=0)

    @pydantic.field_validator("agent")
    @classmethod
    def _registered_agent(cls, value: str | None) -> str | None:
        return None if value is None else _valid(check_replay_agent, value, "replay agent")

    @pydantic.model_validator(mode="after")
    def _one_target(self) -> ReplayConfig:
        if (self.agent is None) == (self.model is None):
            raise ValueError('replay needs exactly one of "agent" (an agent CLI) or "model"')
        return self


class ProjectConfig(BaseModel):
    """`<project>/.skillopt/sleep.json`: typed, unknown keys are an error.

    Attributes:
        agent: whose memory file Sleep trains: a source with a `memory_file` (`claude` →
            CLAUDE.md, `codex` → AGENTS.md; `skillopt_dsl.sleep.sources.memory_files`).
        skill_file: a skill document trained alongside the learned block (relative path).
        session_cwds: other working directories whose sessions belong to this project (the
            project's own path always does), e.g. where it was checked out on another machine.
        replay: what the replays run on (`--replay-agent` or `--model` override it); default
            the embedded local model.
        describe: skill folders (relative to the project, or absolute) whose descriptions
            every night trains after its own work (`sleep run --describe` overrides it).
    """

    model_config = ConfigDict(extra="forbid")

    agent: AgentName | None = None
    skill_file: str | None = None
    session_cwds: list[str] = Field(default_factory=list)
    replay: ReplayConfig | None = None
    describe: list[str] = Field(default_factory=list)

    @pydantic.field_validator("agent")
    @classmethod
    def _registered_agent(cls, value: str | None) -> str | None:
        return None if value is None else _valid(check_agent, value, "agent")


def _valid(check: Callable[[str, str], str], value: str, what: str) -> str:
    """`value` checked against the registry (its `SleepError` becomes a validation error)."""
    try:
        return check(value, what)
    except SleepError as exc:
        raise ValueError(str(exc)) from None


@dataclass(frozen=True)
class SleepProject:
    """One project folder and the paths Sleep uses inside it."""

    path: Path

    @classmethod
    def open(cls, path: str | Path) -> SleepProject:
        """The project at `path` (which must be an existing folder)."""
        resolved = Path(path).expanduser().resolve()
        if not resolved.is_dir():
            raise SleepError(f"project folder {resolved} does not exist; pass --project <folder>")
        return cls(resolved)

    # -- paths -----------------------------------------------------------------------------
    @property
    def sleep_dir(self) -> Path:
        """`<project>/.skillopt/sleep`."""
        return self.path / ".skillopt" / "sleep"

    @property
    def config_path(self) -> Path:
        """`<project>/.skillopt/sleep.json`."""
        return self.path / ".skillopt" / "sleep.json"

    @property
    def lock_path(self) -> Path:
        """The lock file."""
        return self.sleep_dir / "lock"

    @property
    def state_path(self) -> Path:
        """The watermark file."""
        return self.sleep_dir / "state.json"

    @property
    def backups(self) -> Path:
        """Hash-named backups of live files replaced by adoptions."""
        return self.sleep_dir / "backups"

    @property
    def receipts(self) -> Path:
        """One receipt per adoption or rollback."""
        return self.sleep_dir / "receipts"

    @property
    def journal_path(self) -> Path:
        """The write-ahead journal of an adoption in progress."""
        return self.sleep_dir / "adopt-journal.json"

    def night_dir(self, night_id: str) -> Path:
        """The folder of one staged night."""
        return self.sleep_dir / night_id

    def nights(self) -> list[Path]:
        """Staged nights, oldest first (half-written `.partial` folders excluded)."""
        if not self.sleep_dir.is_dir():
            return []
        return sorted(
            p for p in self.sleep_dir.iterdir() if p.is_dir() and NIGHT_ID.fullmatch(p.name)
        )

    def partial_nights(self) -> list[Path]:
        """Half-written stages left by a killed run."""
        if not self.sleep_dir.is_dir():
            return []
        return sorted(p for p in self.sleep_dir.glob("*.partial") if p.is_dir())

    def new_night_id(self) -> str:
        """A fresh night id: the UTC time, with a counter if that second is taken."""
        base = utc_now().strftime("%Y%m%dT%H%M%SZ")
        candidate, n = base, 1
        while self.night_dir(candidate).exists() or self.night_dir(candidate + ".partial").exists():
            n += 1
            candidate = f"{base}-{n}"
        return candidate

    # -- config, watermark -----------------------------------------------------------------
    def config(self) -> ProjectConfig:
        """The project's config (defaults when there is no file)."""
        if not self.config_path.exists():
            return ProjectConfig()
        try:
            return ProjectConfig.model_validate_json(self.config_path.read_text(encoding="utf-8"))
        except pydantic.ValidationError as exc:
            raise SleepError(f"{self.config_path} is invalid: {exc}") from None

    def matcher(self, config: ProjectConfig) -> ProjectMatcher:
        """Which recorded working directories are this project's."""
        roots = [str(self.path), *(c.rstrip("/") for c in config.session_cwds)]
        return ProjectMatcher(tuple(dict.fromkeys(roots)))

    def watermark(self) -> datetime | None:
        """The newest record time harvested by the last completed night (aware, UTC)."""
        if not self.state_path.exists():
            return None
        data = json.loads(self.state_path.read_text(encoding="utf-8"))
        value = data.get("watermark")
        if value is None:
            return None
        parsed = datetime.fromisoformat(value)
        if parsed.tzinfo is None:
            raise SleepError(
                f"{self.state_path} holds a watermark without a time zone ({value}); "
                "delete the file to harvest everything again"
            )
        return parsed

    def save_watermark(self, when: datetime) -> None:
        """Store the watermark (UTC, ISO-8601 with offset), atomically."""
        if when.tzinfo is None:
            raise SleepError("a watermark must be timezone-aware")
        payload = {"watermark": when.astimezone(utc_now().tzinfo).isoformat()}
        atomic_write(self.state_path, json.dumps(payload, indent=2).encode())

    # -- the lock --------------------------------------------------------------------------
    @contextlib.contextmanager
    def lock(self, command: str) -> Iterator[None]:
        """Hold the project's lock; a second holder gets `SleepLocked` naming the first."""
        self.sleep_dir.mkdir(parents=True, exist_ok=True)
        holder: JSONObject = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "command": command,
            "started": utc_now().isoformat(),
        }
        self._acquire(holder)
        try:
            yield
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.lock_path)

    def _acquire(self, holder: JSONObject) -> None:
        for _ in range(2):
            try:
                fd = os.open(self.lock_path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                current = self._holder()
                if current is not None and _alive(current):
                    raise SleepLocked(_locked_message(self.lock_path, current)) from None
                logger.warning("removing a stale Sleep lock left by %s", current)
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self.lock_path)
                continue
            with os.fdopen(fd, "w") as handle:
                json.dump(holder, handle)
            return
        raise SleepLocked(f"could not take the lock {self.lock_path}; try again")

    def _holder(self) -> JSONObject | None:
        try:
            data = json.loads(self.lock_path.read_text(encoding="utf-8"))
        except (FileNotFoundError, json.JSONDecodeError):
            return None
        return data if isinstance(data, dict) else None


def _alive(holder: JSONObject) -> bool:
    if holder.get("host") != socket.gethostname():
        return True  # another machine's process: assume it is alive
    pid = holder.get("pid")
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _locked_message(path: Path, holder: JSONObject) -> str:
    return (
        f"another Sleep command holds this project's lock: `{holder.get('command')}` "
        f"(pid {holder.get('pid')} on {holder.get('host')}, since {holder.get('started')}). "
        f"Wait for it to finish; if that process is gone, delete {path}."
    )


def python_executable() -> str:
    """The interpreter running Sleep (for scheduled commands)."""
    return sys.executable
