"""Harvest: read an agent's session transcripts (read only), redacted, for one project.

A *source* knows one agent's transcript format (`skillopt_dsl.sleep.sources`, one file each,
registered by name). The records they read (`Session`, `Turn`, `ReadCounts`, ...) live in
`skillopt_dsl.sleep.transcript` and are re-exported here. `harvest`
runs the chosen sources, keeps the sessions that belong to the project, drops those at or before
the watermark and those started by Sleep's own replays, and counts everything it skipped.

Read-only contract: sources open transcript files for reading only and never create, move or
touch anything under the home directory. Every kept text (prompts, replies, tool inputs) is
redacted (`Redactor`) the moment it is read, so no secret reaches a `Session`, the disk or a
model.

Counts: each session carries the counts of what its file held (`ReadCounts`); the harvest's
figures are the sums over the project's sessions, and the home-wide sums (every file read,
other projects included) are kept apart under `HarvestStats.home`.

Watermark: the time of the newest record harvested, stored timezone-aware (UTC) and compared as
a `datetime`, never as a string. A session whose last record is at or before the watermark is
skipped; a session that straddles it (started before, continued after) is read once, whole.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from skillopt_dsl.sleep.errors import SleepError
from skillopt_dsl.sleep.sources.base import Source
from skillopt_dsl.sleep.transcript import (
    TOOL_INPUT_CHARS,
    TOOL_OUTPUT_CHARS,
    AgentName,
    HarvestStats,
    ReadCounts,
    Session,
    ToolCall,
    ToolOutput,
    Turn,
    attach_outputs,
    cut,
    merge_turns,
    parse_timestamp,
)

__all__ = [
    "REPLAY_MARKER",
    "TOOL_INPUT_CHARS",
    "TOOL_OUTPUT_CHARS",
    "AgentName",
    "HarvestResult",
    "HarvestStats",
    "ProjectMatcher",
    "ReadCounts",
    "Session",
    "Source",
    "ToolCall",
    "ToolOutput",
    "Turn",
    "attach_outputs",
    "cut",
    "harvest",
    "merge_turns",
    "parse_timestamp",
]

logger = logging.getLogger(__name__)

REPLAY_MARKER = "[skillopt-sleep replay]"
"""First line of every prompt Sleep's replays send: a session that starts with it is Sleep's own."""


@dataclass(frozen=True)
class ProjectMatcher:
    """Which recorded working directories belong to the project: its path and any aliases."""

    roots: tuple[str, ...]

    def matches(self, cwd: str) -> bool:
        """True when `cwd` is one of the roots or lies under one."""
        norm = cwd.rstrip("/") or "/"
        return any(norm == r or norm.startswith(r.rstrip("/") + "/") for r in self.roots)


def is_own_replay(session: Session) -> bool:
    """Sessions Sleep's replays started: run inside a Sleep folder, or opened by the marker."""
    if "/.skillopt/sleep/" in session.cwd.replace("\\", "/") + "/":
        return True
    prompts = session.prompts
    return bool(prompts) and prompts[0].lstrip().startswith(REPLAY_MARKER)


@dataclass(frozen=True)
class HarvestResult:
    """The sessions kept (oldest first), the counts, and the newest record time seen."""

    sessions: list[Session]
    stats: HarvestStats
    newest: datetime | None


def harvest(
    sources: Sequence[Source],
    project: ProjectMatcher,
    *,
    watermark: datetime | None = None,
) -> HarvestResult:
    """Read every source, keep the project's sessions after `watermark`; see the module doc."""
    if watermark is not None and watermark.tzinfo is None:
        raise SleepError("the watermark must be timezone-aware; it is stored in UTC")
    stats = HarvestStats()
    kept: list[Session] = []
    seen: set[tuple[str, str]] = set()
    for source in sources:
        for path in source.files(stats):
            stats.files_read += 1
            counts = ReadCounts()
            sessions = source.read(path, counts)
            stats.home.add(counts)
            for session in sessions:
                stats.home_sessions += 1
                if session.counts is not counts:
                    stats.home.add(session.counts)
                if not project.matches(session.cwd):
                    stats.home_skipped["other_project"] += 1
                    continue
                reason = _skip_reason(session, watermark, seen)
                if reason is not None:
                    stats.skipped[reason] += 1
                    continue
                seen.add((session.agent, session.id))
                kept.append(session)
                stats.project.add(session.counts)
    kept.sort(key=lambda s: (s.started, s.id))
    stats.sessions = len(kept)
    newest = max((s.ended for s in kept), default=None)
    return HarvestResult(kept, stats, newest)


def _skip_reason(
    session: Session, watermark: datetime | None, seen: set[tuple[str, str]]
) -> str | None:
    if session.subagent is not None:
        return "subagent"
    if not session.turns or not session.prompts:
        return "empty"
    if is_own_replay(session):
        return "own_replay"
    if watermark is not None and session.ended <= watermark:
        return "before_watermark"
    if (session.agent, session.id) in seen:
        return "duplicate"
    return None


def utc_now() -> datetime:
    """The current time, timezone-aware, in UTC."""
    return datetime.now(UTC)
