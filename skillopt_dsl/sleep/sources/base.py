"""`Source`: the contract of one agent's format (a small base: two methods, one optional).

A new format is one file in this folder: a `Source` subclass with a `name`, the `folders` it
reads under the home directory, `files` and `read`, decorated with `register_source`
(`skillopt_dsl.sleep.sources.registry`). Registering it once puts it in `SOURCES`, in
`--source`'s choices and in every message that lists sources; the shipped contract suite
`skillopt_dsl.testing.SourceContract` checks it. What else the agent has, it declares here too:
its line-numbered `timeline` reader (the evidence's), its `memory_file` (what `--agent` trains)
and its `replay_command` (what `--replay-agent` runs); each is in the CLI's choices and help
as soon as the source is registered. A format that records which skill the agent loaded
answers `skill_turns` and sets `records_skill_loads` (what `sleep trigger-rows` reads).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from skillopt_dsl.sleep.sources.steps import timeline_from_turns
from skillopt_dsl.sleep.transcript import (
    AgentName,
    HarvestStats,
    ReadCounts,
    Session,
    Timeline,
)

if TYPE_CHECKING:
    from skillopt_dsl.agents.command_settings import OutputFormat

__all__ = ["ReplayCommand", "SkillTurn", "Source"]


@dataclass(frozen=True)
class ReplayCommand:
    """How a replay runs through an agent's own CLI (`skillopt_dsl.sleep.agent_replay`).

    Attributes:
        argv: the command template; `{prompt}` is replaced by the task.
        output: how its standard output is read (`json`, `jsonl` or `text`; see
            `skillopt_dsl.agents.CommandAgent`).
        key_env: the environment variables that hold the agent's API key (passed through to
            the child, which gets no other variable of the user's unless allowed).
    """

    argv: tuple[str, ...]
    output: OutputFormat
    key_env: tuple[str, ...] = ()


@dataclass(frozen=True)
class SkillTurn:
    """One user request and the skills the agent loaded while answering it (until the next
    request), as the transcript records the loads.

    Attributes:
        request: the request's text, redacted as the harvest redacts it.
        skills: the names of the skills loaded (empty when none was).
    """

    request: str
    skills: frozenset[str] = frozenset()


class Source(ABC):
    """One agent's transcript format. Contract: `files(stats)` lists transcript files under
    `home` (sorted, read only; files it skips, such as sub-agent transcripts, are counted in
    `stats.home_skipped`); `read(path, counts)` parses one file into sessions, redacting every
    text it keeps, giving each session the counts of what its records held, and counting in
    `counts` what belongs to no session. A bad line is counted, never raised.

    Optional: `timeline(session)` re-reads one session's file (read only) into redacted `Step`s
    with the lines they came from; the default builds them from the session's turns, numbered
    by turn. `skill_turns(session)` pairs each request with the skills the agent loaded for
    it; the default is empty, for a format that records no skill load (`records_skill_loads`
    False).

    Class attributes: `name`, the `--source` name and every `Session.agent` it reads;
    `folders`, the folders under `home` it looks in (relative, for messages such as
    "no transcripts under ..."); `memory_file`, the project file the agent reads as its
    memory (`CLAUDE.md`), None when Sleep cannot train one; `replay_command`, the agent's own CLI
    as a `ReplayCommand`, None when replays cannot run through it.
    """

    name: ClassVar[AgentName]
    folders: ClassVar[tuple[str, ...]]
    memory_file: ClassVar[str | None] = None
    replay_command: ClassVar[ReplayCommand | None] = None
    records_skill_loads: ClassVar[bool] = False

    def __init__(self, home: Path) -> None:
        self.home = home

    @abstractmethod
    def files(self, stats: HarvestStats) -> list[Path]:
        """The transcript files this source would read (skipped files counted in `stats`)."""

    @abstractmethod
    def read(self, path: Path, counts: ReadCounts) -> list[Session]:
        """The sessions in one file (usually one; a session may share `counts` with its file)."""

    def available(self) -> bool:
        """True when this source's folder exists under `home`."""
        return any(True for _ in self.files(HarvestStats()))

    @classmethod
    def timeline(cls, session: Session) -> Timeline:
        """The steps of one session this source read (see the class docstring)."""
        return timeline_from_turns(session)

    @classmethod
    def skill_turns(cls, session: Session) -> tuple[SkillTurn, ...]:
        """Each request of `session` with the skills loaded for it; empty for a format that
        records no skill load (see the class docstring)."""
        return ()
