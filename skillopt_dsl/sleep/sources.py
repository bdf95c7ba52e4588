"""The transcript sources: Claude Code, Codex CLI and a documented generic JSONL.

**Claude Code** (`<home>/.claude/projects/<slug>/<session>.jsonl`): one JSON record a line.
Conversation records are `user` and `assistant` (`sessionId`, `timestamp`, `cwd`, `gitBranch`,
`isSidechain`, `isMeta`, `message {role, content}`, content a string or blocks: `text`,
`tool_use {name, input}`, `tool_result`, `thinking`, `image`). How each is read:

- a user's request: a `user` record's text; a slash command's `<command-name>` and
  `<command-args>` (`/fix-issue the login page crashes`; settings commands such as `/model`
  or `/clear` are not requests); a prompt typed while the agent worked (an `attachment` record
  `{"type": "queued_command", "commandMode": "prompt", "prompt": ...}`);
- not a request: `isCompactSummary` ("This session is being continued..."), `isMeta`,
  `<task-notification>` notices, local-command output, caveats, interrupts, tool results;
- a reply: `assistant` text and every `tool_use` (name and input);
- known and not read: `system` (every subtype), `summary`, `file-history-snapshot`,
  `queue-operation`, `progress`, `custom-title`, `ai-title`, `last-prompt`, `permission-mode`,
  `mode` and the other `attachment` kinds. Any other type is counted as unknown, by name.

Sub-agent transcripts (`subagents/` folders, `agent-*.jsonl`) and sidechain records are skipped.

**Codex CLI** (`<home>/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl` and `<home>/.codex/
archived_sessions/`), two formats:

- `{timestamp, type, payload}` lines (the `RolloutItem` enum): `session_meta` (id, cwd, git,
  `source`: `cli`, `vscode`, `exec`, `mcp`, or `{"subagent": ...}` for sessions a sub-agent ran,
  which are skipped), `turn_context`, `response_item` (`message`, `reasoning`, tool calls:
  `function_call`, `custom_tool_call`, `local_shell_call`, `web_search_call`,
  `image_generation_call`, `tool_search_call`, and their outputs), `event_msg` (`user_message`,
  `agent_message`, ...), `compacted`, and the newer `world_state`, `inter_agent_communication`.
  Each turn is mirrored in `response_item` *and* `event_msg`; when a file has `event_msg` turns
  they are the turns and the mirrored messages are counted once, as mirrored. Both copies are
  redacted; only the chosen copy's redactions are counted.
- the older format of mid-2025 CLIs: a bare header line `{id, timestamp, instructions, git}`,
  `{"record_type": "state"}` lines, then bare response items without timestamps (they take the
  header's). The working directory comes from the first `<environment_context>` block's `<cwd>`.

Injected blocks (`<environment_context>`, `<user_instructions>`, AGENTS.md preambles) and
developer messages are dropped.

**Generic JSONL** (`<home>/.skillopt/sessions/**/*.jsonl`): one turn a line,
`{"session_id": str, "project": "/abs/path", "timestamp": ISO-8601 with zone,
"role": "user" | "assistant", "text": str}`; lines of one session may span files.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from skillopt_dsl.sleep.harvest import (
    TOOL_INPUT_CHARS,
    TOOL_OUTPUT_CHARS,
    AgentName,
    HarvestStats,
    ReadCounts,
    Session,
    Source,
    ToolCall,
    ToolOutput,
    Turn,
    attach_outputs,
    cut,
    merge_turns,
    parse_timestamp,
)
from skillopt_dsl.sleep.redact import Redactor

Role = Literal["user", "assistant"]

__all__ = ["SOURCES", "ClaudeCodeSource", "CodexSource", "GenericJsonlSource", "make_sources"]


def _lines(path: Path, counts: ReadCounts) -> Iterator[tuple[int, dict[str, Any]]]:
    """The JSON objects of a JSONL file, opened read only; bad lines are counted."""
    with path.open("rb") as handle:
        for line_no, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            try:
                record = json.loads(raw)
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                counts.malformed(path, line_no, f"not JSON ({exc.__class__.__name__})")
                continue
            if not isinstance(record, dict):
                counts.malformed(path, line_no, "not a JSON object")
                continue
            yield line_no, record


def _when(
    record: Mapping[str, Any], path: Path, line_no: int, counts: ReadCounts
) -> datetime | None:
    try:
        return parse_timestamp(record.get("timestamp"))
    except ValueError as exc:
        counts.malformed(path, line_no, str(exc))
        return None


def _tool_input(value: object, redactor: Redactor) -> str:
    """A tool call's input as one line of at most `TOOL_INPUT_CHARS` characters: redacted
    whole first, then cut (cut first, a key at the cut would keep its prefix).

    Structured input (an object, or a string holding JSON such as Codex `arguments`) is
    redacted value by value as decoded text (a quoted header or key inside a shell command
    is not hidden behind JSON escapes), then as a whole (a `"password": "..."` pair)."""
    if value is None:
        return ""
    decoded = _decoded_json(value) if isinstance(value, str) else value
    if isinstance(decoded, dict | list):
        text = json.dumps(_redact_strings(decoded, redactor), ensure_ascii=False, default=str)
    else:
        text = str(value)
    return cut(redactor.redact(text), TOOL_INPUT_CHARS)


def _decoded_json(text: str) -> object:
    """The JSON object or array `text` holds, else `text` itself."""
    if not text.lstrip().startswith(("{", "[")):
        return text
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _redact_strings(value: object, redactor: Redactor) -> object:
    """`value` with every string inside it redacted (keys left as they are)."""
    if isinstance(value, str):
        return redactor.redact(value)
    if isinstance(value, dict):
        return {k: _redact_strings(v, redactor) for k, v in value.items()}
    if isinstance(value, list):
        return [_redact_strings(v, redactor) for v in value]
    return value


_EXIT_CODE = re.compile(r"\A\s*(?:Error: )?Exit code:? (-?\d+)")


def _tool_output(
    text: str, redactor: Redactor, *, failed: bool | None = None, exit_code: int | None = None
) -> ToolOutput:
    """A tool's output, redacted whole then cut to its head and tail; the exit code read from
    a leading `Exit code: N` line when not given; `failed` from the exit code when not given."""
    if exit_code is None and (found := _EXIT_CODE.match(text)):
        exit_code = int(found.group(1))
    if failed is None and exit_code is not None:
        failed = exit_code != 0
    kept = cut(redactor.redact(text.strip()), TOOL_OUTPUT_CHARS, keep_tail=True)
    return ToolOutput(kept, failed, exit_code)


def _block_text(content: object) -> str:
    """The text of a string or of a list of content blocks (`{"type": "text", "text": ...}`)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(b.get("text") or "")
            for b in content
            if isinstance(b, dict) and b.get("type") in ("text", "input_text", "output_text")
        )
    return ""


# -- Claude Code ------------------------------------------------------------------------------

_CLAUDE_META_PREFIXES = (
    "<local-command-stdout>",
    "<local-command-stderr>",
    "<local-command-caveat>",
    "<system-reminder>",
    "<bash-input>",
    "<bash-stdout>",
    "<bash-stderr>",
    "Caveat:",
    "[Request interrupted",
)
_CLAUDE_NOTICE_PREFIXES = ("<task-notification>",)
_CLAUDE_COMMAND_PREFIXES = ("<command-name>", "<command-message>")
_CLAUDE_KNOWN = frozenset(
    {
        "user",
        "assistant",
        "system",
        "summary",
        "file-history-snapshot",
        "queue-operation",
        "progress",
        "attachment",
        "custom-title",
        "ai-title",
        "last-prompt",
        "permission-mode",
        "mode",
    }
)
_SETTINGS_COMMANDS = frozenset(
    {
        "/add-dir",
        "/agents",
        "/bashes",
        "/clear",
        "/compact",
        "/config",
        "/context",
        "/cost",
        "/doctor",
        "/exit",
        "/export",
        "/help",
        "/hooks",
        "/ide",
        "/login",
        "/logout",
        "/mcp",
        "/memory",
        "/model",
        "/output-style",
        "/permissions",
        "/plugin",
        "/privacy-settings",
        "/release-notes",
        "/resume",
        "/rewind",
        "/sandbox",
        "/status",
        "/statusline",
        "/terminal-setup",
        "/theme",
        "/todos",
        "/upgrade",
        "/usage",
        "/vim",
    }
)
"""Claude Code commands that change settings or the session, not requests for work."""

_TAG = re.compile(r"<(command-name|command-args)>(.*?)</\1>", re.DOTALL)


def slash_command(text: str) -> str | None:
    """The request a slash-command record holds (`/name args`), or None for a settings command.

    >>> slash_command("<command-message>fix-issue</command-message>\\n<command-name>/fix-issue"
    ...               "</command-name>\\n<command-args>the login page crashes</command-args>")
    '/fix-issue the login page crashes'
    >>> slash_command("<command-name>/model</command-name>\\n<command-args>opus</command-args>")
    """
    tags = {name: value.strip() for name, value in _TAG.findall(text)}
    name = tags.get("command-name", "")
    if not name or name.split()[0] in _SETTINGS_COMMANDS:
        return None
    return " ".join(p for p in (name, tags.get("command-args", "")) if p)


@dataclass
class _ClaudeSession:
    id: str
    counts: ReadCounts
    redactor: Redactor = field(default_factory=Redactor)
    cwd: str = ""
    branch: str | None = None
    turns: list[Turn] = field(default_factory=list)
    outputs: dict[str, ToolOutput] = field(default_factory=dict)
    summaries: list[str] = field(default_factory=list)
    last_when: datetime | None = None


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
                stats.home_skipped["sidechain_file"] += 1
                continue
            found.append(path)
        return found

    def read(self, path: Path, counts: ReadCounts) -> list[Session]:
        session = _ClaudeSession(id=path.stem, counts=counts)
        for line_no, record in _lines(path, counts):
            self._record(session, record, path, line_no)
        counts.redactions.update(session.redactor.counts)
        if not session.turns:
            return []
        ordered = sorted(session.turns, key=lambda t: t.timestamp)
        turns = merge_turns(attach_outputs(ordered, session.outputs))
        return [
            Session(
                session.id,
                "claude",
                session.cwd,
                path,
                turns,
                session.branch,
                counts,
                summaries=tuple(session.summaries),
            )
        ]

    def _record(
        self, session: _ClaudeSession, record: dict[str, Any], path: Path, line_no: int
    ) -> None:
        kind = record.get("type")
        counts = session.counts
        if kind not in _CLAUDE_KNOWN:
            counts.unknown[str(kind)] += 1
            return
        counts.records[str(kind)] += 1
        if kind not in ("user", "assistant", "attachment"):
            return
        if record.get("isSidechain") is True:
            counts.sidechain_records += 1
            return
        if kind == "attachment":
            self._attachment(session, record, path, line_no)
            return
        when = _when(record, path, line_no, counts)
        message = record.get("message")
        if when is None:
            return
        if not isinstance(message, dict):
            counts.malformed(path, line_no, "a user/assistant record without a message")
            return
        session.last_when = when
        session.id = str(record.get("sessionId") or session.id)
        session.cwd = session.cwd or str(record.get("cwd") or "")
        session.branch = session.branch or (record.get("gitBranch") or None)
        turn = self._turn(kind, record, message, when, session)
        if turn is not None:
            session.turns.append(turn)

    @staticmethod
    def _attachment(
        session: _ClaudeSession, record: dict[str, Any], path: Path, line_no: int
    ) -> None:
        """A prompt queued while the agent worked; every other attachment is context."""
        attachment = record.get("attachment")
        if not isinstance(attachment, dict) or attachment.get("type") != "queued_command":
            return
        text = str(attachment.get("prompt") or "").strip()
        mode = attachment.get("commandMode")
        if mode not in (None, "prompt") or text.startswith(_CLAUDE_NOTICE_PREFIXES):
            session.counts.notices += 1
            return
        if not text:
            return
        when = session.last_when
        if record.get("timestamp") is not None:
            when = _when(record, path, line_no, session.counts)
        if when is None:
            return
        session.counts.queued_prompts += 1
        session.turns.append(Turn("user", session.redactor.redact(text), when))

    @staticmethod
    def _turn(
        kind: str,
        record: dict[str, Any],
        message: dict[str, Any],
        when: datetime,
        session: _ClaudeSession,
    ) -> Turn | None:
        counts, redactor = session.counts, session.redactor
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if not isinstance(blocks, list):
            return None
        texts: list[str] = []
        calls: list[ToolCall] = []
        for block in blocks:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text" and isinstance(block.get("text"), str):
                texts.append(block["text"])
            elif block.get("type") == "tool_use":
                name = str(block.get("name") or "tool")
                call_id = str(block.get("id") or "")
                calls.append(
                    ToolCall(name, _tool_input(block.get("input"), redactor), call_id=call_id)
                )
            elif block.get("type") == "tool_result":
                counts.tool_results += 1
                failed = block.get("is_error")
                session.outputs[str(block.get("tool_use_id") or "")] = _tool_output(
                    _block_text(block.get("content")),
                    redactor,
                    failed=failed if isinstance(failed, bool) else None,
                )
        text = "\n".join(t for t in texts if t.strip()).strip()
        if kind == "assistant":
            if not text and not calls:
                return None
            return Turn("assistant", redactor.redact(text), when, tuple(calls))
        if not text:
            return None
        if record.get("isCompactSummary") is True:
            counts.compact_summaries += 1
            session.summaries.append(redactor.redact(text))
            return None
        if record.get("isMeta") is True or text.startswith(_CLAUDE_META_PREFIXES):
            counts.meta_prompts += 1
            return None
        if text.startswith(_CLAUDE_NOTICE_PREFIXES):
            counts.notices += 1
            return None
        if text.startswith(_CLAUDE_COMMAND_PREFIXES):
            request = slash_command(text)
            if request is None:
                counts.meta_prompts += 1
                return None
            counts.slash_commands += 1
            text = request
        return Turn("user", redactor.redact(text), when)


# -- Codex CLI --------------------------------------------------------------------------------

_CODEX_INJECTED = (
    "<environment_context>",
    "<user_instructions>",
    "<INSTRUCTIONS>",
    "# AGENTS.md instructions",
    "<turn_aborted>",
)
_CODEX_KNOWN = frozenset(
    {
        "session_meta",
        "turn_context",
        "response_item",
        "event_msg",
        "compacted",
        "world_state",
        "inter_agent_communication",
        "inter_agent_communication_metadata",
    }
)
_CODEX_ITEMS = frozenset(
    {
        "message",
        "reasoning",
        "local_shell_call",
        "function_call",
        "function_call_output",
        "custom_tool_call",
        "custom_tool_call_output",
        "web_search_call",
        "image_generation_call",
        "tool_search_call",
        "tool_search_output",
        "ghost_snapshot",
        "compaction",
        "other",
    }
)
_CODEX_CALLS = frozenset(
    {
        "function_call",
        "custom_tool_call",
        "local_shell_call",
        "web_search_call",
        "image_generation_call",
        "tool_search_call",
    }
)
_CODEX_OUTPUTS = frozenset(
    {"function_call_output", "custom_tool_call_output", "tool_search_output"}
)
_CWD = re.compile(r"<cwd>\s*(.*?)\s*</cwd>", re.DOTALL)


@dataclass
class _CodexRollout:
    id: str
    counts: ReadCounts
    cwd: str = ""
    branch: str | None = None
    subagent: str | None = None
    meta_seen: bool = False
    header_time: datetime | None = None
    events: list[Turn] = field(default_factory=list)
    items: list[Turn] = field(default_factory=list)
    calls: list[tuple[datetime, ToolCall]] = field(default_factory=list)
    outputs: dict[str, ToolOutput] = field(default_factory=dict)
    summaries: list[str] = field(default_factory=list)
    redactor: Redactor = field(default_factory=Redactor)
    event_redactor: Redactor = field(default_factory=Redactor)
    item_redactor: Redactor = field(default_factory=Redactor)


def _subagent(source: object) -> str | None:
    """The sub-agent kind of a `session_meta.source` (None for `cli`, `exec`, ...)."""
    if not isinstance(source, dict) or "subagent" not in source:
        return None
    kind = source["subagent"]
    if isinstance(kind, dict) and kind:
        return str(next(iter(kind)))
    return str(kind or "subagent")


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

    def read(self, path: Path, counts: ReadCounts) -> list[Session]:
        rollout = _CodexRollout(id=path.stem.removeprefix("rollout-"), counts=counts)
        for line_no, record in _lines(path, counts):
            self._record(rollout, record, path, line_no)
        turns = self._turns(rollout)
        counts.redactions.update(rollout.redactor.counts)
        if not turns:
            return []
        return [
            Session(
                rollout.id,
                "codex",
                rollout.cwd,
                path,
                turns,
                rollout.branch,
                counts,
                rollout.subagent,
                tuple(rollout.summaries),
            )
        ]

    @staticmethod
    def _turns(rollout: _CodexRollout) -> tuple[Turn, ...]:
        if rollout.events:
            rollout.counts.mirrored_records += len(rollout.items)
            chosen, redactor = rollout.events, rollout.event_redactor
        else:
            chosen, redactor = rollout.items, rollout.item_redactor
        rollout.redactor.counts.update(redactor.counts)
        with_calls = list(chosen)
        for when, call in rollout.calls:
            with_calls.append(Turn("assistant", "", when, (call,)))
        ordered = sorted(with_calls, key=lambda t: t.timestamp)
        merged = merge_turns(attach_outputs(ordered, rollout.outputs))
        return tuple(t for t in merged if t.text or t.calls)

    def _record(
        self, rollout: _CodexRollout, record: dict[str, Any], path: Path, line_no: int
    ) -> None:
        counts = rollout.counts
        if "payload" not in record:
            self._legacy(rollout, record, path, line_no)
            return
        kind, payload = record.get("type"), record.get("payload")
        if kind not in _CODEX_KNOWN:
            counts.unknown[str(kind)] += 1
            return
        counts.records[str(kind)] += 1
        if not isinstance(payload, dict):
            counts.malformed(path, line_no, f"a {kind} record without a payload object")
            return
        if kind == "session_meta":
            self._meta(rollout, payload)
            return
        if kind == "turn_context":
            rollout.cwd = rollout.cwd or str(payload.get("cwd") or "")
            return
        if kind == "compacted":
            counts.compact_summaries += 1
            message = str(payload.get("message") or "").strip()
            if message:
                rollout.summaries.append(rollout.redactor.redact(message))
            return
        if kind not in ("response_item", "event_msg"):
            return
        when = _when(record, path, line_no, counts)
        if when is None:
            return
        if kind == "event_msg":
            self._event(rollout, payload, when)
        else:
            self._item(rollout, payload, when)

    @staticmethod
    def _meta(rollout: _CodexRollout, payload: dict[str, Any]) -> None:
        """The first `session_meta` is this rollout's (a fork copies its parent's after it)."""
        if rollout.meta_seen:
            return
        rollout.meta_seen = True
        rollout.id = str(payload.get("id") or rollout.id)
        rollout.cwd = str(payload.get("cwd") or rollout.cwd)
        rollout.subagent = _subagent(payload.get("source"))
        git = payload.get("git")
        if isinstance(git, dict) and git.get("branch"):
            rollout.branch = str(git["branch"])

    def _legacy(
        self, rollout: _CodexRollout, record: dict[str, Any], path: Path, line_no: int
    ) -> None:
        """The mid-2025 format: a bare header, `record_type` state lines, bare items."""
        counts = rollout.counts
        if "record_type" in record and "type" not in record:
            counts.records[f"record_type:{record.get('record_type')}"] += 1
            return
        if "type" not in record and "id" in record and "timestamp" in record:
            counts.records["legacy_header"] += 1
            when = _when(record, path, line_no, counts)
            if not rollout.meta_seen:
                rollout.meta_seen = True
                rollout.id = str(record.get("id") or rollout.id)
                rollout.header_time = when
                git = record.get("git")
                if isinstance(git, dict) and git.get("branch"):
                    rollout.branch = str(git["branch"])
            return
        kind = record.get("type")
        if kind in _CODEX_KNOWN:
            counts.malformed(path, line_no, f"a {kind} record without a payload object")
            return
        if kind not in _CODEX_ITEMS:
            counts.unknown[str(kind)] += 1
            return
        counts.records[f"legacy_item:{kind}"] += 1
        when = rollout.header_time
        if record.get("timestamp") is not None:
            when = _when(record, path, line_no, counts)
        if when is None:
            counts.malformed(path, line_no, "a bare response item before any header time")
            return
        self._item(rollout, record, when)

    @staticmethod
    def _event(rollout: _CodexRollout, payload: dict[str, Any], when: datetime) -> None:
        sub = payload.get("type")
        if sub not in ("user_message", "agent_message"):
            return
        text = str(payload.get("message") or "").strip()
        if not text:
            return
        if text.startswith(_CODEX_INJECTED):
            return
        role: Role = "user" if sub == "user_message" else "assistant"
        rollout.events.append(Turn(role, rollout.event_redactor.redact(text), when))

    @staticmethod
    def _item(rollout: _CodexRollout, payload: dict[str, Any], when: datetime) -> None:
        sub = payload.get("type")
        counts = rollout.counts
        if sub in _CODEX_CALLS:
            name = str(payload.get("name") or str(sub).removesuffix("_call"))
            call_id = str(payload.get("call_id") or payload.get("id") or "")
            call = ToolCall(name, _codex_input(payload, rollout.redactor), call_id=call_id)
            rollout.calls.append((when, call))
            return
        if sub in _CODEX_OUTPUTS:
            counts.tool_results += 1
            output = _codex_output(payload.get("output"), rollout.redactor)
            rollout.outputs[str(payload.get("call_id") or "")] = output
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
            counts.injected_blocks += 1
            found = _CWD.search(text)
            if found and not rollout.cwd:
                rollout.cwd = found.group(1)
            return
        role: Role = "user" if payload["role"] == "user" else "assistant"
        rollout.items.append(Turn(role, rollout.item_redactor.redact(text), when))


def _codex_input(payload: dict[str, Any], redactor: Redactor) -> str:
    """The input of a Codex tool call: arguments, input, a shell command or a search query."""
    kind = payload.get("type")
    if kind == "function_call":
        return _tool_input(payload.get("arguments"), redactor)
    if kind == "custom_tool_call":
        return _tool_input(payload.get("input"), redactor)
    action = payload.get("action")
    if kind == "local_shell_call" and isinstance(action, dict):
        command = action.get("command")
        if isinstance(command, list):
            return _tool_input(" ".join(str(c) for c in command), redactor)
    if kind == "web_search_call" and isinstance(action, dict) and action.get("query"):
        return _tool_input(action.get("query"), redactor)
    return _tool_input(action, redactor)


def _codex_output(value: object, redactor: Redactor) -> ToolOutput:
    """A Codex tool output: `Exit code: N` text, a JSON string `{"output", "metadata":
    {"exit_code"}}` (older CLIs), or content items."""
    data: object = value
    if isinstance(value, str) and value.lstrip().startswith("{"):
        try:
            data = json.loads(value)
        except json.JSONDecodeError:
            data = value
    if isinstance(data, dict) and "output" in data:
        metadata = data.get("metadata")
        code = metadata.get("exit_code") if isinstance(metadata, dict) else None
        exit_code = code if isinstance(code, int) else None
        return _tool_output(_block_text(data["output"]), redactor, exit_code=exit_code)
    return _tool_output(_block_text(data), redactor)


# -- generic JSONL ----------------------------------------------------------------------------


@dataclass
class _GenericSession:
    project: str
    counts: ReadCounts = field(default_factory=ReadCounts)
    redactor: Redactor = field(default_factory=Redactor)
    turns: list[Turn] = field(default_factory=list)


class GenericJsonlSource(Source):
    """`{session_id, project, timestamp, role, text}` lines under `<home>/.skillopt/sessions/`."""

    name: AgentName = "jsonl"

    @property
    def root(self) -> Path:
        """`<home>/.skillopt/sessions`."""
        return self.home / ".skillopt" / "sessions"

    def files(self, stats: HarvestStats) -> list[Path]:
        return sorted(self.root.rglob("*.jsonl")) if self.root.is_dir() else []

    def read(self, path: Path, counts: ReadCounts) -> list[Session]:
        grouped: dict[str, _GenericSession] = {}
        for line_no, record in _lines(path, counts):
            self._line(grouped, record, path, line_no, counts)
        sessions = []
        for sid, group in sorted(grouped.items()):
            group.counts.redactions.update(group.redactor.counts)
            turns = merge_turns(sorted(group.turns, key=lambda t: t.timestamp))
            sessions.append(Session(sid, "jsonl", group.project, path, turns, None, group.counts))
        return sessions

    @staticmethod
    def _line(
        grouped: dict[str, _GenericSession],
        record: dict[str, Any],
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
        when = _when(record, path, line_no, group.counts)
        if when is None:
            return
        group.counts.records["turn"] += 1
        text = group.redactor.redact(str(record["text"]).strip())
        role: Role = "user" if record["role"] == "user" else "assistant"
        group.turns.append(Turn(role, text, when))


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
