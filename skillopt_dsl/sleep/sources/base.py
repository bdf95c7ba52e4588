"""`Source`: the contract of one agent's transcript format (a small base, three methods).

A new format is one file in this folder: a `Source` subclass with a `name`, the `folders` it
reads under the home directory, `files` and `read`, decorated with `register_source`
(`skillopt_dsl.sleep.sources.registry`). Registering it once puts it in `SOURCES`, in
`--source`'s choices and in every message that lists sources; the shipped contract suite
`skillopt_dsl.testing.SourceContract` checks it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import ClassVar

from skillopt_dsl.sleep.transcript import AgentName, HarvestStats, ReadCounts, Session

__all__ = ["Source"]


class Source(ABC):
    """One agent's transcript format. Contract: `files(stats)` lists transcript files under
    `home` (sorted, read only; files it skips, such as sub-agent transcripts, are counted in
    `stats.home_skipped`); `read(path, counts)` parses one file into sessions, redacting every
    text it keeps, giving each session the counts of what its records held, and counting in
    `counts` what belongs to no session. A bad line is counted, never raised.

    Class attributes: `name`, the `--source` name and every `Session.agent` it reads;
    `folders`, the folders under `home` it looks in (relative, for messages such as
    "no transcripts under ...: looked for ...").
    """

    name: ClassVar[AgentName]
    folders: ClassVar[tuple[str, ...]]

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
