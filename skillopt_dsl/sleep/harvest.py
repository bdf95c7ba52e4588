"""Harvest: read an agent's session transcripts (read only), redacted, for one project.

A *source* knows one agent's transcript format (`skillopt_dsl.sleep.sources`). `harvest`
runs the chosen sources, keeps the sessions that belong to the project, drops those at or before
the watermark and those started by Sleep's own replays, and counts everything it skipped.

Read-only contract: sources open transcript files for reading only and never create, move or
touch anything under the home directory. Every text is redacted (`Redactor`) the moment it is
read, so no secret reaches a `Session`, the disk or a model.

Watermark: the time of the newest record harvested, stored timezone-aware (UTC) and compared as
a `datetime`, never as a string. A session whose last record is at or before the watermark is
skipped; a session that straddles it (started before, continued after) is read once, whole.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from skillopt_dsl.sleep.errors import SleepError
from skillopt_dsl.sleep.redact import Redactor

__all__ = [
    "REPLAY_MARKER",
    "HarvestResult",
    "HarvestStats",
    "ProjectMatcher",
    "Session",
    "Source",
    "Turn",
    "harvest",
    "parse_timestamp",
]

logger = logging.getLogger(__name__)

REPLAY_MARKER = "[skillopt-sleep replay]"
"""First line of every prompt Sleep's replays send: a session that starts with it is Sleep's own."""

AgentName = Literal["claude", "codex", "jsonl"]


@dataclass(frozen=True)
class Turn:
    """One user prompt or one assistant reply (tool names the reply used, not their output)."""

    role: Literal["user", "assistant"]
    text: str
    timestamp: datetime
    tools: tuple[str, ...] = ()


@dataclass(frozen=True)
class Session:
    """One harvested, redacted session of one agent in one working directory."""

    id: str
    agent: AgentName
    cwd: str
    path: Path
    turns: tuple[Turn, ...]
    branch: str | None = None

    @property
    def started(self) -> datetime:
        """Time of the first turn."""
        return self.turns[0].timestamp

    @property
    def ended(self) -> datetime:
        """Time of the last turn."""
        return self.turns[-1].timestamp

    @property
    def prompts(self) -> list[str]:
        """The user's prompts, in order."""
        return [t.text for t in self.turns if t.role == "user"]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready summary (ids and times, no text)."""
        return {
            "id": self.id,
            "agent": self.agent,
            "cwd": self.cwd,
            "path": str(self.path),
            "branch": self.branch,
            "started": self.started.isoformat(),
            "ended": self.ended.isoformat(),
            "turns": len(self.turns),
        }


@dataclass
class HarvestStats:
    """What a harvest read and skipped (all counts; nothing here is fatal)."""

    files_read: int = 0
    sessions: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    malformed_lines: int = 0
    unknown_records: int = 0
    mirrored_records: int = 0
    meta_prompts: int = 0
    tool_results: int = 0
    injected_blocks: int = 0
    redactor: Redactor = field(default_factory=Redactor)
    malformed_examples: list[str] = field(default_factory=list)

    def malformed(self, path: Path, line_no: int, why: str) -> None:
        """Count a malformed line (the first few are kept for the report)."""
        self.malformed_lines += 1
        if len(self.malformed_examples) < 5:
            self.malformed_examples.append(f"{path.name}:{line_no}: {why}")
        logger.warning("skipping malformed line %s:%d (%s)", path, line_no, why)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready counts, redactions by kind included."""
        return {
            "files_read": self.files_read,
            "sessions": self.sessions,
            "skipped": dict(sorted(self.skipped.items())),
            "malformed_lines": self.malformed_lines,
            "malformed_examples": list(self.malformed_examples),
            "unknown_records": self.unknown_records,
            "mirrored_records": self.mirrored_records,
            "meta_prompts": self.meta_prompts,
            "tool_results": self.tool_results,
            "injected_blocks": self.injected_blocks,
            "redactions": dict(sorted(self.redactor.counts.items())),
            "redactions_total": self.redactor.total,
        }


def parse_timestamp(value: object) -> datetime:
    """An ISO-8601 time with a zone (`Z` or an offset) as an aware datetime; else ValueError."""
    if not isinstance(value, str) or not value:
        raise ValueError(f"no timestamp ({value!r})")
    parsed = datetime.fromisoformat(value)
    if parsed.tzinfo is None:
        raise ValueError(f"timestamp {value!r} has no time zone")
    return parsed


class Source(ABC):
    """One agent's transcript format. Contract: `files()` lists transcript files under `home`
    (sorted, read only); `read(path, stats)` parses one file into sessions, counting what it
    skipped in `stats` and redacting every text with `stats.redactor`; a bad line is counted,
    never raised."""

    name: AgentName

    def __init__(self, home: Path) -> None:
        self.home = home

    @abstractmethod
    def files(self, stats: HarvestStats) -> list[Path]:
        """The transcript files this source would read (sub-agent files counted as skipped)."""

    @abstractmethod
    def read(self, path: Path, stats: HarvestStats) -> list[Session]:
        """The sessions in one file (usually one)."""

    def available(self) -> bool:
        """True when this source's folder exists under `home`."""
        return any(True for _ in self.files(HarvestStats()))


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
            for session in source.read(path, stats):
                reason = _skip_reason(session, project, watermark, seen)
                if reason is not None:
                    stats.skipped[reason] += 1
                    continue
                seen.add((session.agent, session.id))
                kept.append(session)
    kept.sort(key=lambda s: (s.started, s.id))
    stats.sessions = len(kept)
    newest = max((s.ended for s in kept), default=None)
    return HarvestResult(kept, stats, newest)


def _skip_reason(
    session: Session,
    project: ProjectMatcher,
    watermark: datetime | None,
    seen: set[tuple[str, str]],
) -> str | None:
    if not session.turns or not session.prompts:
        return "empty"
    if not project.matches(session.cwd):
        return "other_project"
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


def merge_turns(turns: Iterable[Turn]) -> tuple[Turn, ...]:
    """Consecutive assistant turns (one record per content block) merged into one reply."""
    merged: list[Turn] = []
    for turn in turns:
        if merged and turn.role == "assistant" and merged[-1].role == "assistant":
            last = merged[-1]
            text = "\n".join(t for t in (last.text, turn.text) if t)
            merged[-1] = Turn("assistant", text, last.timestamp, last.tools + turn.tools)
        else:
            merged.append(turn)
    return tuple(merged)
