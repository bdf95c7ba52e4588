"""The transcript sources: Claude Code, Codex CLI and a documented generic JSONL.

Claude Code (`<home>/.claude/projects/<slug>/<session>.jsonl`): one JSON record a line with
`type` (`user`, `assistant`, `summary`, `file-history-snapshot`, `system`, ...), `sessionId`,
`timestamp`, `cwd`, `gitBranch`, `isSidechain`, `isMeta` and `message {role, content}`, where
content is a string or blocks (`text`, `tool_use {name, input}`, `tool_result`, `thinking`).
Sub-agent transcripts (`subagents/` folders, `agent-*.jsonl`) and sidechain records are skipped,
as are tool results and meta prompts (`<command-name>...`, `Caveat: ...`, `isMeta`).

Codex CLI (`<home>/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl` and `<home>/.codex/
archived_sessions/`): records `{timestamp, type, payload}`: `session_meta {id, cwd, git}`,
`turn_context`, `response_item` (`message` with `input_text`/`output_text` parts,
`function_call`, `function_call_output`, `reasoning`, ...) and `event_msg` (`user_message`,
`agent_message`, `token_count`, ...). Rollouts mirror each turn in `response_item` *and*
`event_msg`: when a file has `event_msg` turns they are the turns and the mirrored messages are
counted once, as mirrored. Injected blocks (`<environment_context>`, `<user_instructions>`,
AGENTS.md preambles) and developer messages are dropped.

Generic JSONL (`<home>/.skillopt/sessions/**/*.jsonl`): one turn a line,
`{"session_id": str, "project": "/abs/path", "timestamp": ISO-8601 with zone,
"role": "user" | "assistant", "text": str}`; lines of one session may span files.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from skillopt_dsl.sleep.harvest import (
    AgentName,
    HarvestStats,
    Session,
    Source,
    Turn,
    merge_turns,
    parse_timestamp,
)

Role = Literal["user", "assistant"]

__all__ = ["SOURCES", "ClaudeCodeSource", "CodexSource", "GenericJsonlSource", "make_sources"]


def _lines(path: Path, stats: HarvestStats) -> Iterator[tuple[int, dict[str, Any]]]:
    """The JSON objects of a JSONL file, opened read only; bad lines are counted."""
    with path.open("rb") as handle:
        for line_no, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            try:
                record = json.loads(raw)
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                stats.malformed(path, line_no, f"not JSON ({exc.__class__.__name__})")
                continue
            if not isinstance(record, dict):
                stats.malformed(path, line_no, "not a JSON object")
                continue
            yield line_no, record


def _when(record: dict[str, Any], path: Path, line_no: int, stats: HarvestStats) -> datetime | None:
    try:
        return parse_timestamp(record.get("timestamp"))
    except ValueError as exc:
        stats.malformed(path, line_no, str(exc))
        return None


# -- Claude Code ------------------------------------------------------------------------------

_CLAUDE_META_PREFIXES = (
    "<command-name>",
    "<command-message>",
    "<command-args>",
    "<local-command-stdout>",
    "<local-command-stderr>",
    "<system-reminder>",
    "<bash-input>",
    "<bash-stdout>",
    "<bash-stderr>",
    "Caveat:",
    "[Request interrupted",
)
_CLAUDE_KNOWN = frozenset({"user", "assistant", "summary", "file-history-snapshot", "system"})


@dataclass
class _ClaudeSession:
    id: str
    cwd: str = ""
    branch: str | None = None
    turns: list[Turn] = field(default_factory=list)
    sidechain_records: int = 0


class ClaudeCodeSource(Source):
    """Claude Code transcripts under `<home>/.claude/projects/` (see the module docstring)."""

    name: AgentName = "claude"

    @property
    def root(self) -> Path:
        """`<home>/.claude/projects`."""
        return self.home / ".claude" / "projects"

    def files(self, stats: HarvestStats) -> list[Path]:
        if not self.root.is_dir():
            return []
        found: list[Path] = []
        for path in sorted(self.root.glob("*/**/*.jsonl")):
            relative = path.relative_to(self.root).parts
            if "subagents" in relative or path.name.startswith("agent-") or len(relative) != 2:
                stats.skipped["sidechain"] += 1
                continue
            found.append(path)
        return found

    def read(self, path: Path, stats: HarvestStats) -> list[Session]:
        session = _ClaudeSession(id=path.stem)
        for line_no, record in _lines(path, stats):
            self._record(session, record, path, line_no, stats)
        if session.sidechain_records and not session.turns:
            stats.skipped["sidechain"] += 1
            return []
        if not session.turns:
            return []
        turns = merge_turns(sorted(session.turns, key=lambda t: t.timestamp))
        return [Session(session.id, "claude", session.cwd, path, turns, session.branch)]

    def _record(
        self,
        session: _ClaudeSession,
        record: dict[str, Any],
        path: Path,
        line_no: int,
        stats: HarvestStats,
    ) -> None:
        kind = record.get("type")
        if kind not in _CLAUDE_KNOWN:
            stats.unknown_records += 1
            return
        if kind not in ("user", "assistant"):
            return
        if record.get("isSidechain") is True:
            session.sidechain_records += 1
            return
        when = _when(record, path, line_no, stats)
        message = record.get("message")
        if when is None:
            return
        if not isinstance(message, dict):
            stats.malformed(path, line_no, "a user/assistant record without a message")
            return
        session.id = str(record.get("sessionId") or session.id)
        session.cwd = session.cwd or str(record.get("cwd") or "")
        session.branch = session.branch or (record.get("gitBranch") or None)
        turn = self._turn(kind, record, message, when, stats)
        if turn is not None:
            session.turns.append(turn)

    @staticmethod
    def _turn(
        kind: str,
        record: dict[str, Any],
        message: dict[str, Any],
        when: datetime,
        stats: HarvestStats,
    ) -> Turn | None:
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if not isinstance(blocks, list):
            return None
        texts: list[str] = []
        tools: list[str] = []
        for block in blocks:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text" and isinstance(block.get("text"), str):
                texts.append(block["text"])
            elif block.get("type") == "tool_use":
                tools.append(str(block.get("name") or "tool"))
            elif block.get("type") == "tool_result":
                stats.tool_results += 1
        text = "\n".join(t for t in texts if t.strip()).strip()
        if kind == "user":
            if record.get("isMeta") is True or text.startswith(_CLAUDE_META_PREFIXES):
                stats.meta_prompts += 1
                return None
            if not text:
                return None
            return Turn("user", stats.redactor.redact(text), when)
        if not text and not tools:
            return None
        return Turn("assistant", stats.redactor.redact(text), when, tuple(tools))


# -- Codex CLI --------------------------------------------------------------------------------

_CODEX_INJECTED = (
    "<environment_context>",
    "<user_instructions>",
    "<INSTRUCTIONS>",
    "# AGENTS.md instructions",
    "<turn_aborted>",
)
_CODEX_KNOWN = frozenset(
    {"session_meta", "turn_context", "response_item", "event_msg", "compacted"}
)


@dataclass
class _CodexRollout:
    id: str
    cwd: str = ""
    branch: str | None = None
    events: list[Turn] = field(default_factory=list)
    items: list[Turn] = field(default_factory=list)
    tools: list[tuple[datetime, str]] = field(default_factory=list)


class CodexSource(Source):
    """Codex CLI rollouts under `<home>/.codex/` (see the module docstring)."""

    name: AgentName = "codex"

    def files(self, stats: HarvestStats) -> list[Path]:
        found: list[Path] = []
        for folder in ("sessions", "archived_sessions"):
            root = self.home / ".codex" / folder
            if root.is_dir():
                found += sorted(root.rglob("rollout-*.jsonl"))
        return found

    def read(self, path: Path, stats: HarvestStats) -> list[Session]:
        rollout = _CodexRollout(id=path.stem.removeprefix("rollout-"))
        for line_no, record in _lines(path, stats):
            self._record(rollout, record, path, line_no, stats)
        turns = self._turns(rollout, stats)
        if not turns:
            return []
        return [Session(rollout.id, "codex", rollout.cwd, path, turns, rollout.branch)]

    @staticmethod
    def _turns(rollout: _CodexRollout, stats: HarvestStats) -> tuple[Turn, ...]:
        if rollout.events:
            stats.mirrored_records += len(rollout.items)
            chosen = rollout.events
        else:
            chosen = rollout.items
        with_tools = list(chosen)
        for when, name in rollout.tools:
            with_tools.append(Turn("assistant", "", when, (name,)))
        ordered = sorted(with_tools, key=lambda t: t.timestamp)
        merged = merge_turns(ordered)
        return tuple(t for t in merged if t.text or t.tools)

    def _record(
        self,
        rollout: _CodexRollout,
        record: dict[str, Any],
        path: Path,
        line_no: int,
        stats: HarvestStats,
    ) -> None:
        kind, payload = record.get("type"), record.get("payload")
        if kind not in _CODEX_KNOWN:
            stats.unknown_records += 1
            return
        if not isinstance(payload, dict):
            stats.malformed(path, line_no, f"a {kind} record without a payload object")
            return
        if kind == "session_meta":
            rollout.id = str(payload.get("id") or rollout.id)
            rollout.cwd = str(payload.get("cwd") or rollout.cwd)
            git = payload.get("git")
            if isinstance(git, dict) and git.get("branch"):
                rollout.branch = str(git["branch"])
            return
        if kind == "turn_context":
            rollout.cwd = rollout.cwd or str(payload.get("cwd") or "")
            return
        if kind not in ("response_item", "event_msg"):
            return
        when = _when(record, path, line_no, stats)
        if when is None:
            return
        if kind == "event_msg":
            self._event(rollout, payload, when, stats)
        else:
            self._item(rollout, payload, when, stats)

    @staticmethod
    def _event(
        rollout: _CodexRollout, payload: dict[str, Any], when: datetime, stats: HarvestStats
    ) -> None:
        sub = payload.get("type")
        if sub not in ("user_message", "agent_message"):
            return
        text = str(payload.get("message") or "").strip()
        if not text:
            return
        if text.startswith(_CODEX_INJECTED):
            stats.injected_blocks += 1
            return
        role: Role = "user" if sub == "user_message" else "assistant"
        rollout.events.append(Turn(role, stats.redactor.redact(text), when))

    @staticmethod
    def _item(
        rollout: _CodexRollout, payload: dict[str, Any], when: datetime, stats: HarvestStats
    ) -> None:
        sub = payload.get("type")
        if sub in ("function_call", "custom_tool_call", "local_shell_call"):
            rollout.tools.append((when, str(payload.get("name") or sub)))
            return
        if sub in ("function_call_output", "custom_tool_call_output"):
            stats.tool_results += 1
            return
        if sub != "message" or payload.get("role") not in ("user", "assistant"):
            return
        parts = payload.get("content")
        if not isinstance(parts, list):
            return
        text = "\n".join(
            str(p.get("text") or "")
            for p in parts
            if isinstance(p, dict) and p.get("type") in ("input_text", "output_text", "text")
        ).strip()
        if not text:
            return
        if text.startswith(_CODEX_INJECTED):
            stats.injected_blocks += 1
            return
        role: Role = "user" if payload["role"] == "user" else "assistant"
        rollout.items.append(Turn(role, stats.redactor.redact(text), when))


# -- generic JSONL ----------------------------------------------------------------------------


class GenericJsonlSource(Source):
    """`{session_id, project, timestamp, role, text}` lines under `<home>/.skillopt/sessions/`."""

    name: AgentName = "jsonl"

    @property
    def root(self) -> Path:
        """`<home>/.skillopt/sessions`."""
        return self.home / ".skillopt" / "sessions"

    def files(self, stats: HarvestStats) -> list[Path]:
        return sorted(self.root.rglob("*.jsonl")) if self.root.is_dir() else []

    def read(self, path: Path, stats: HarvestStats) -> list[Session]:
        grouped: dict[str, tuple[str, list[Turn]]] = {}
        for line_no, record in _lines(path, stats):
            parsed = self._turn(record, path, line_no, stats)
            if parsed is None:
                continue
            session_id, project, turn = parsed
            grouped.setdefault(session_id, (project, []))[1].append(turn)
        return [
            Session(
                sid, "jsonl", project, path, merge_turns(sorted(turns, key=lambda t: t.timestamp))
            )
            for sid, (project, turns) in sorted(grouped.items())
        ]

    @staticmethod
    def _turn(
        record: dict[str, Any], path: Path, line_no: int, stats: HarvestStats
    ) -> tuple[str, str, Turn] | None:
        missing = [k for k in ("session_id", "project", "role", "text") if k not in record]
        if missing:
            stats.malformed(path, line_no, f"missing field(s) {missing}")
            return None
        if record["role"] not in ("user", "assistant"):
            stats.unknown_records += 1
            return None
        when = _when(record, path, line_no, stats)
        if when is None:
            return None
        text = stats.redactor.redact(str(record["text"]).strip())
        role: Role = "user" if record["role"] == "user" else "assistant"
        return str(record["session_id"]), str(record["project"]), Turn(role, text, when)


SOURCES: dict[str, type[Source]] = {
    "claude": ClaudeCodeSource,
    "codex": CodexSource,
    "jsonl": GenericJsonlSource,
}
"""The sources `--source` can name (plus `auto`: every source whose folder exists)."""


def make_sources(choice: str, home: Path) -> list[Source]:
    """The sources for `--source claude|codex|jsonl|auto` under `home`."""
    from skillopt_dsl.sleep.errors import SleepError

    if choice == "auto":
        chosen = [cls(home) for cls in SOURCES.values()]
        found = [s for s in chosen if s.available()]
        if not found:
            raise SleepError(
                f"no transcripts under {home}: looked for .claude/projects, .codex/sessions, "
                ".codex/archived_sessions and .skillopt/sessions; pass --home or --source"
            )
        return found
    if choice not in SOURCES:
        raise SleepError(f"unknown source {choice!r}; choose one of claude, codex, jsonl, auto")
    return [SOURCES[choice](home)]
