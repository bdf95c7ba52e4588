"""The Claude Code transcript source.

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

The timeline (`ClaudeCodeSource.timeline`) reads `tool_use` / `tool_result` blocks (`is_error`,
"Exit code N"), "[Request interrupted by user]", the refusal "The user doesn't want to proceed
with this tool use ... the user said:", "Stop hook feedback:" messages and `isCompactSummary`.
The memory file is `CLAUDE.md`; replays run `claude -p` (`ANTHROPIC_API_KEY`).

A skill load (`ClaudeCodeSource.skill_turns`) is the model's `Skill` tool call
(`{"name": "Skill", "input": {"skill": "pdf"}}`; `command` in older versions; a plugin's skill
is `plugin:name`) whose result came back without `is_error` (Claude Code answers
"Launching skill: pdf" and adds the skill's body as an `isMeta` record, which is not a request).
A skill the user invoked by typing `/pdf` is a slash command, not a load the model chose.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from skillopt_dsl.json_types import JSONObject
from skillopt_dsl.sleep.redact import Redactor
from skillopt_dsl.sleep.sources.base import ReplayCommand, SkillTurn, Source
from skillopt_dsl.sleep.sources.reading import (
    block_text,
    json_lines,
    record_time,
    tool_input,
    tool_output,
)
from skillopt_dsl.sleep.sources.registry import register_source
from skillopt_dsl.sleep.sources.steps import (
    EDIT_TOOLS,
    SHELL_TOOLS,
    StepReader,
    exit_code,
    json_object,
    numbered_records,
)
from skillopt_dsl.sleep.transcript import (
    HarvestStats,
    ReadCounts,
    Session,
    Timeline,
    ToolCall,
    ToolOutput,
    Turn,
    attach_outputs,
    merge_turns,
)

__all__ = ["ClaudeCodeSource", "skill_loaded", "slash_command"]

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

_SKILL_TOOL = "Skill"
_SKILL_NAME = re.compile(r'"(?:skill|command)"\s*:\s*"([^"]+)"')


def skill_loaded(call: ToolCall) -> str | None:
    """The skill a tool call loaded: the name in a `Skill` call's input when its result came
    back and is not an error, else None.

    >>> skill_loaded(ToolCall("Skill", '{"skill": "pdf"}', "Launching skill: pdf"))
    'pdf'
    >>> skill_loaded(ToolCall("Skill", '{"skill": "pdf"}', "Unknown skill", failed=True))
    """
    if call.name != _SKILL_TOOL or call.failed is True or not call.output:
        return None
    found = _SKILL_NAME.search(call.input)
    return found.group(1) if found else None


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


@register_source
class ClaudeCodeSource(Source):
    """Claude Code transcripts under `<home>/.claude/projects/` (see the module docstring)."""

    name = "claude"
    folders = (".claude/projects",)
    memory_file = "CLAUDE.md"
    records_skill_loads = True
    replay_command = ReplayCommand(
        ("claude", "-p", "{prompt}", "--output-format", "json", "--permission-mode", "acceptEdits"),
        "json",
        ("ANTHROPIC_API_KEY",),
    )

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

    @classmethod
    def timeline(cls, session: Session) -> Timeline:
        """The session's steps with their lines (see the module docstring)."""
        reader = StepReader(session)
        for line, record in numbered_records(session.path):
            _timeline_record(reader, line, record)
        return reader.timeline()

    @classmethod
    def skill_turns(cls, session: Session) -> tuple[SkillTurn, ...]:
        """Each request with the skills loaded (`skill_loaded`) before the next request."""
        turns: list[SkillTurn] = []
        for turn in session.turns:
            if turn.role == "user":
                turns.append(SkillTurn(turn.text))
                continue
            loaded = {name for call in turn.calls if (name := skill_loaded(call))}
            if turns and loaded:
                turns[-1] = SkillTurn(turns[-1].request, turns[-1].skills | loaded)
        return tuple(turns)

    def read(self, path: Path, counts: ReadCounts) -> list[Session]:
        session = _ClaudeSession(id=path.stem, counts=counts)
        for line_no, record in json_lines(path, counts):
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
        self, session: _ClaudeSession, record: JSONObject, path: Path, line_no: int
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
        when = record_time(record, path, line_no, counts)
        message = record.get("message")
        if when is None:
            return
        if not isinstance(message, dict):
            counts.malformed(path, line_no, "a user/assistant record without a message")
            return
        session.last_when = when
        session.id = str(record.get("sessionId") or session.id)
        session.cwd = session.cwd or str(record.get("cwd") or "")
        branch = record.get("gitBranch")
        session.branch = session.branch or (branch if isinstance(branch, str) and branch else None)
        turn = self._turn(kind, record, message, when, session)
        if turn is not None:
            session.turns.append(turn)

    @staticmethod
    def _attachment(session: _ClaudeSession, record: JSONObject, path: Path, line_no: int) -> None:
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
            when = record_time(record, path, line_no, session.counts)
        if when is None:
            return
        session.counts.queued_prompts += 1
        session.turns.append(Turn("user", session.redactor.redact(text), when))

    @staticmethod
    def _turn(
        kind: str,
        record: JSONObject,
        message: JSONObject,
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
            text = block.get("text")
            if block.get("type") == "text" and isinstance(text, str):
                texts.append(text)
            elif block.get("type") == "tool_use":
                name = str(block.get("name") or "tool")
                call_id = str(block.get("id") or "")
                calls.append(
                    ToolCall(name, tool_input(block.get("input"), redactor), call_id=call_id)
                )
            elif block.get("type") == "tool_result":
                counts.tool_results += 1
                failed = block.get("is_error")
                session.outputs[str(block.get("tool_use_id") or "")] = tool_output(
                    block_text(block.get("content")),
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


# -- the timeline ------------------------------------------------------------------------------

_INTERRUPT = "[Request interrupted by user"
_REFUSAL = "The user doesn't want to proceed with this tool use"
_USER_SAID = re.compile(r"the user said:\s*(.+)", re.DOTALL | re.IGNORECASE)
_NOT_FAILURES = ("requires approval", "permission", "was blocked", "doesn't want to proceed")
_HOOK_FEEDBACK = re.compile(r"^(?:Stop|SubagentStop) hook feedback:")


def _timeline_record(reader: StepReader, line: int, record: JSONObject) -> None:
    kind = record.get("type")
    if record.get("isSidechain") is True:
        return
    if kind == "attachment":
        _queued_step(reader, line, record)
        return
    message = record.get("message")
    if kind not in ("user", "assistant") or not isinstance(message, dict):
        return
    content = message.get("content")
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
    if not isinstance(blocks, list):
        return
    if kind == "assistant":
        _assistant_steps(reader, line, blocks)
    else:
        _user_steps(reader, line, record, blocks)


def _queued_step(reader: StepReader, line: int, record: JSONObject) -> None:
    attachment = record.get("attachment")
    if not isinstance(attachment, dict) or attachment.get("type") != "queued_command":
        return
    text = str(attachment.get("prompt") or "").strip()
    queued = attachment.get("commandMode") in (None, "prompt")
    if queued and text and not text.startswith(_CLAUDE_NOTICE_PREFIXES):
        reader.add("prompt", line, text)


def _assistant_steps(reader: StepReader, line: int, blocks: list[Any]) -> None:
    for block in blocks:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            if block["text"].strip():
                reader.add("reply", line, block["text"])
        elif block.get("type") == "tool_use":
            _tool_step(reader, line, block)


def _tool_step(reader: StepReader, line: int, block: JSONObject) -> None:
    name = str(block.get("name") or "").casefold()
    data = json_object(block.get("input"))
    call_id = str(block.get("id") or "")
    command = data.get("command")
    if name in SHELL_TOOLS and isinstance(command, str):
        reader.add("command", line, command, call_id=call_id)
    elif name in EDIT_TOOLS:
        path = data.get("file_path") or data.get("notebook_path") or data.get("path")
        if isinstance(path, str) and path:
            reader.add("edit", line, reader.relative(path))


def _user_steps(reader: StepReader, line: int, record: JSONObject, blocks: list[Any]) -> None:
    texts: list[str] = []
    for block in blocks:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "tool_result":
            _result_step(reader, line, block)
        elif block.get("type") == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
    text = "\n".join(t for t in texts if t.strip()).strip()
    if not text:
        return
    if record.get("isCompactSummary") is True:
        reader.add("compaction", line, text)
    elif text.startswith(_INTERRUPT):
        reader.add("interrupt", line, text)
    elif _HOOK_FEEDBACK.match(text):
        reader.add("hook", line, text)
    elif record.get("isMeta") is True or text.startswith(
        _CLAUDE_META_PREFIXES + _CLAUDE_NOTICE_PREFIXES
    ):
        return
    elif text.startswith(_CLAUDE_COMMAND_PREFIXES):
        request = slash_command(text)
        if request is not None:
            reader.add("prompt", line, request)
    else:
        reader.add("prompt", line, text)


def _result_text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(b.get("text") or "") for b in content if isinstance(b, dict) and "text" in b
        )
    return ""


def _result_step(reader: StepReader, line: int, block: JSONObject) -> None:
    text = _result_text(block.get("content"))
    call_id = str(block.get("tool_use_id") or "")
    if text.startswith(_REFUSAL):
        said = _USER_SAID.search(text)
        reader.add("rejection", line, said.group(1) if said else "", call_id=call_id)
        return
    if text.startswith(_INTERRUPT):
        reader.add("interrupt", line, text)
        return
    code = exit_code(text)
    refused = any(marker in text[:300].casefold() for marker in _NOT_FAILURES)
    failed = (block.get("is_error") is True and not refused) or bool(code)
    reader.add("result", line, text[:400], call_id=call_id, failed=failed, exit_code=code)
