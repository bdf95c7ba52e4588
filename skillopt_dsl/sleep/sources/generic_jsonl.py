"""The generic JSONL transcript source: the documented format any agent can write.

**Generic JSONL** (`<home>/.skillopt/sessions/**/*.jsonl`): one turn a line,
`{"session_id": str, "project": "/abs/path", "timestamp": ISO-8601 with zone,
"role": "user" | "assistant", "text": str}`; lines of one session may span files. Its
timeline holds the session's prompts and replies with their lines (the format has no tool
calls). No memory file and no replay command: it is not an agent Sleep can train or run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from skillopt_dsl.json_types import JSONObject
from skillopt_dsl.sleep.redact import Redactor
from skillopt_dsl.sleep.sources.base import Source
from skillopt_dsl.sleep.sources.reading import Role, json_lines, record_time
from skillopt_dsl.sleep.sources.registry import register_source
from skillopt_dsl.sleep.sources.steps import StepReader, numbered_records
from skillopt_dsl.sleep.transcript import (
    HarvestStats,
    ReadCounts,
    Session,
    Timeline,
    Turn,
    merge_turns,
)

__all__ = ["GenericJsonlSource"]


@dataclass
class _GenericSession:
    project: str
    counts: ReadCounts = field(default_factory=ReadCounts)
    redactor: Redactor = field(default_factory=Redactor)
    turns: list[Turn] = field(default_factory=list)


@register_source
class GenericJsonlSource(Source):
    """`{session_id, project, timestamp, role, text}` lines under `<home>/.skillopt/sessions/`."""

    name = "jsonl"
    folders = (".skillopt/sessions",)

    @property
    def root(self) -> Path:
        """`<home>/.skillopt/sessions`."""
        return self.home / ".skillopt" / "sessions"

    def files(self, stats: HarvestStats) -> list[Path]:
        return sorted(self.root.rglob("*.jsonl")) if self.root.is_dir() else []

    def read(self, path: Path, counts: ReadCounts) -> list[Session]:
        grouped: dict[str, _GenericSession] = {}
        for line_no, record in json_lines(path, counts):
            self._line(grouped, record, path, line_no, counts)
        sessions = []
        for sid, group in sorted(grouped.items()):
            group.counts.redactions.update(group.redactor.counts)
            turns = merge_turns(sorted(group.turns, key=lambda t: t.timestamp))
            sessions.append(Session(sid, "jsonl", group.project, path, turns, None, group.counts))
        return sessions

    @classmethod
    def timeline(cls, session: Session) -> Timeline:
        """The session's prompts and replies with their lines."""
        reader = StepReader(session)
        for line, record in numbered_records(session.path):
            if str(record.get("session_id")) != session.id:
                continue
            role, text = record.get("role"), str(record.get("text") or "")
            if role in ("user", "assistant") and text.strip():
                reader.add("prompt" if role == "user" else "reply", line, text)
        return reader.timeline()

    @staticmethod
    def _line(
        grouped: dict[str, _GenericSession],
        record: JSONObject,
        path: Path,
        line_no: int,
        counts: ReadCounts,
    ) -> None:
        missing = [k for k in ("session_id", "project", "role", "text") if k not in record]
        if missing:
            counts.malformed(path, line_no, f"missing field(s) {missing}")
            return
        group = grouped.setdefault(
            str(record["session_id"]), _GenericSession(str(record["project"]))
        )
        if record["role"] not in ("user", "assistant"):
            group.counts.unknown[f"role:{record['role']}"] += 1
            return
        when = record_time(record, path, line_no, group.counts)
        if when is None:
            return
        group.counts.records["turn"] += 1
        text = group.redactor.redact(str(record["text"]).strip())
        role: Role = "user" if record["role"] == "user" else "assistant"
        group.turns.append(Turn(role, text, when))
