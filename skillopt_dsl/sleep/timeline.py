"""A session's timeline with line numbers: what the user asked, what the agent did, what failed.

`read_timeline(session)` re-reads the session's transcript file (read only) and returns its
`Step`s in file order, each with the 1-based line it came from, so that evidence mined from it
can cite its source (`Timeline.cite(line)` is `path:line`). Every kept text is redacted
(`Redactor`) the moment it is read, like the harvest's.

Steps: `prompt` (a request the user typed, as the harvest reads it), `reply` (assistant text),
`command` (a shell command the agent ran; `call_id` links its result), `edit` (a file the agent
wrote or patched; the text is the path relative to the session's folder), `result` (a shell
command's outcome: `failed` and `exit_code` when known), `interrupt` (the user stopped the
agent), `rejection` (the user refused a tool call; the text is what they said instead), `hook`
(a hook of the user's that blocked the agent from stopping and said why: Claude Code's
"Stop hook feedback:" messages) and `compaction` (a compaction summary's text).

Formats read: Claude Code (`tool_use` / `tool_result` blocks, `is_error`, "Exit code N",
"[Request interrupted by user]", the refusal "The user doesn't want to proceed with this tool
use ... the user said:", `isCompactSummary`), Codex CLI (`function_call` / `local_shell_call` /
`custom_tool_call` and their outputs, `exec_command_end`, `turn_aborted`, `compacted`, patches
as `*** Update File: path`; the mid-2025 bare-item format too) and the generic JSONL (prompts
and replies only).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from skillopt_dsl.sleep.harvest import Session
from skillopt_dsl.sleep.redact import Redactor
from skillopt_dsl.sleep.sources.claude_code import (
    _CLAUDE_COMMAND_PREFIXES,
    _CLAUDE_META_PREFIXES,
    _CLAUDE_NOTICE_PREFIXES,
    slash_command,
)
from skillopt_dsl.sleep.sources.codex import _CODEX_INJECTED

__all__ = ["Step", "StepKind", "Timeline", "read_timeline"]

StepKind = Literal[
    "prompt", "reply", "command", "edit", "result", "interrupt", "rejection", "hook", "compaction"
]

TEXT_CHARS = 2000
"""How much of one step's text is kept (after redaction)."""

SHELL_TOOLS = frozenset({"bash", "shell", "shell_command", "exec_command", "local_shell"})
EDIT_TOOLS = frozenset({"edit", "write", "multiedit", "notebookedit", "str_replace_editor"})
_INTERRUPT = "[Request interrupted by user"
_REFUSAL = "The user doesn't want to proceed with this tool use"
_USER_SAID = re.compile(r"the user said:\s*(.+)", re.DOTALL | re.IGNORECASE)
_EXIT = re.compile(r"(?:^|\n)\s*(?:Exit code:?|Process exited with code)\s*(-?\d+)")
_PATCH_FILE = re.compile(r"^\*\*\* (?:Add|Update|Delete) File: (.+)$", re.MULTILINE)
_NOT_FAILURES = ("requires approval", "permission", "was blocked", "doesn't want to proceed")
_HOOK_FEEDBACK = re.compile(r"^(?:Stop|SubagentStop) hook feedback:")


@dataclass(frozen=True)
class Step:
    """One event of a session, with the transcript line it came from (see the module doc)."""

    kind: StepKind
    line: int
    text: str = ""
    call_id: str = ""
    failed: bool = False
    exit_code: int | None = None


@dataclass(frozen=True)
class Timeline:
    """A session's steps in file order; `cwd` is the session's working directory."""

    path: Path
    cwd: str
    steps: tuple[Step, ...]

    def cite(self, line: int) -> str:
        """`path:line` of a transcript line (how evidence names its source)."""
        return f"{self.path}:{line}"

    def results(self) -> dict[str, Step]:
        """Each command's result by call id (the first that says whether it failed)."""
        found: dict[str, Step] = {}
        for step in self.steps:
            if step.kind == "result" and step.call_id and step.call_id not in found:
                found[step.call_id] = step
        return found


@dataclass
class _Reader:
    session: Session
    redactor: Redactor = field(default_factory=Redactor)
    steps: list[Step] = field(default_factory=list)

    def add(self, kind: StepKind, line: int, text: str = "", **extra: Any) -> None:
        clean = self.redactor.redact(text.strip())[:TEXT_CHARS]
        self.steps.append(Step(kind, line, clean, **extra))

    def relative(self, path: str) -> str:
        root = self.session.cwd.rstrip("/")
        if root and path.startswith(root + "/"):
            return path[len(root) + 1 :]
        return path


def read_timeline(session: Session) -> Timeline:
    """The steps of `session`'s transcript (see the module docstring)."""
    reader = _Reader(session)
    if session.agent == "claude":
        _read_claude(reader)
    elif session.agent == "codex":
        _read_codex(reader)
    else:
        _read_generic(reader)
    return Timeline(session.path, session.cwd, tuple(reader.steps))


def _records(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """The JSON objects of a JSONL file with their line numbers (bad lines skipped: the
    harvest already counted them)."""
    with path.open("rb") as handle:
        for line_no, raw in enumerate(handle, start=1):
            try:
                record = json.loads(raw)
            except (json.JSONDecodeError, UnicodeDecodeError):
                continue
            if isinstance(record, dict):
                yield line_no, record


# -- Claude Code ------------------------------------------------------------------------------


def _read_claude(reader: _Reader) -> None:
    for line, record in _records(reader.session.path):
        kind = record.get("type")
        if record.get("isSidechain") is True:
            continue
        if kind == "attachment":
            _claude_queued(reader, line, record)
            continue
        message = record.get("message")
        if kind not in ("user", "assistant") or not isinstance(message, dict):
            continue
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if not isinstance(blocks, list):
            continue
        if kind == "assistant":
            _claude_assistant(reader, line, blocks)
        else:
            _claude_user(reader, line, record, blocks)


def _claude_queued(reader: _Reader, line: int, record: dict[str, Any]) -> None:
    attachment = record.get("attachment")
    if not isinstance(attachment, dict) or attachment.get("type") != "queued_command":
        return
    text = str(attachment.get("prompt") or "").strip()
    queued = attachment.get("commandMode") in (None, "prompt")
    if queued and text and not text.startswith(_CLAUDE_NOTICE_PREFIXES):
        reader.add("prompt", line, text)


def _claude_assistant(reader: _Reader, line: int, blocks: list[Any]) -> None:
    for block in blocks:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            if block["text"].strip():
                reader.add("reply", line, block["text"])
        elif block.get("type") == "tool_use":
            _claude_tool(reader, line, block)


def _claude_tool(reader: _Reader, line: int, block: dict[str, Any]) -> None:
    name = str(block.get("name") or "").casefold()
    data = _json_object(block.get("input"))
    call_id = str(block.get("id") or "")
    if name in SHELL_TOOLS and isinstance(data.get("command"), str):
        reader.add("command", line, data["command"], call_id=call_id)
    elif name in EDIT_TOOLS:
        path = data.get("file_path") or data.get("notebook_path") or data.get("path")
        if isinstance(path, str) and path:
            reader.add("edit", line, reader.relative(path))


def _claude_user(reader: _Reader, line: int, record: dict[str, Any], blocks: list[Any]) -> None:
    texts: list[str] = []
    for block in blocks:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "tool_result":
            _claude_result(reader, line, block)
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


def _claude_result(reader: _Reader, line: int, block: dict[str, Any]) -> None:
    text = _result_text(block.get("content"))
    call_id = str(block.get("tool_use_id") or "")
    if text.startswith(_REFUSAL):
        said = _USER_SAID.search(text)
        reader.add("rejection", line, said.group(1) if said else "", call_id=call_id)
        return
    if text.startswith(_INTERRUPT):
        reader.add("interrupt", line, text)
        return
    code = _exit_code(text)
    refused = any(marker in text[:300].casefold() for marker in _NOT_FAILURES)
    failed = (block.get("is_error") is True and not refused) or bool(code)
    reader.add("result", line, text[:400], call_id=call_id, failed=failed, exit_code=code)


def _exit_code(text: str) -> int | None:
    found = _EXIT.search(text[:400])
    return int(found.group(1)) if found else None


# -- Codex CLI --------------------------------------------------------------------------------


def _read_codex(reader: _Reader) -> None:
    messages: list[Step] = []
    events: list[Step] = []
    for line, record in _records(reader.session.path):
        payload = record.get("payload") if "payload" in record else record
        if not isinstance(payload, dict):
            continue
        kind = record.get("type") if "payload" in record else "response_item"
        if kind == "compacted":
            reader.add("compaction", line, str(payload.get("message") or ""))
        elif kind == "event_msg":
            _codex_event(reader, line, payload, events)
        elif kind == "response_item":
            _codex_item(reader, line, payload, messages)
    chosen = events if any(s.kind == "prompt" for s in events) else messages
    reader.steps = sorted(reader.steps + chosen, key=lambda s: s.line)


def _codex_event(reader: _Reader, line: int, payload: dict[str, Any], into: list[Step]) -> None:
    sub = payload.get("type")
    if sub == "turn_aborted":
        reader.add("interrupt", line, str(payload.get("reason") or "turn aborted"))
    elif sub == "exec_command_end":
        code = payload.get("exit_code")
        code = code if isinstance(code, int) else None
        reader.add(
            "result",
            line,
            str(payload.get("aggregated_output") or payload.get("stderr") or "")[:400],
            call_id=str(payload.get("call_id") or ""),
            failed=bool(code),
            exit_code=code,
        )
    elif sub in ("user_message", "agent_message"):
        text = str(payload.get("message") or "").strip()
        if text and not text.startswith(_CODEX_INJECTED):
            kind: StepKind = "prompt" if sub == "user_message" else "reply"
            into.append(Step(kind, line, reader.redactor.redact(text)[:TEXT_CHARS]))


def _codex_item(reader: _Reader, line: int, payload: dict[str, Any], into: list[Step]) -> None:
    sub = payload.get("type")
    call_id = str(payload.get("call_id") or payload.get("id") or "")
    if sub in ("function_call", "custom_tool_call", "local_shell_call"):
        _codex_call(reader, line, payload, call_id)
    elif sub in ("function_call_output", "custom_tool_call_output"):
        _codex_output(reader, line, payload.get("output"), call_id)
    elif sub == "message" and payload.get("role") in ("user", "assistant"):
        parts = payload.get("content")
        text = "\n".join(
            str(p.get("text") or "")
            for p in (parts if isinstance(parts, list) else [])
            if isinstance(p, dict)
        ).strip()
        if text.startswith("<turn_aborted>"):
            reader.add("interrupt", line, text)
        elif text and not text.startswith(_CODEX_INJECTED):
            kind: StepKind = "prompt" if payload["role"] == "user" else "reply"
            into.append(Step(kind, line, reader.redactor.redact(text)[:TEXT_CHARS]))


def _codex_call(reader: _Reader, line: int, payload: dict[str, Any], call_id: str) -> None:
    name = str(payload.get("name") or payload.get("type") or "").casefold()
    raw = payload.get("arguments") if "arguments" in payload else payload.get("input")
    if payload.get("type") == "local_shell_call":
        action = payload.get("action")
        raw = {"command": action.get("command")} if isinstance(action, dict) else None
    if name == "apply_patch" and isinstance(raw, str):
        _patched(reader, line, raw)
        return
    args = _json_object(raw)
    command = args.get("command", args.get("cmd"))
    if isinstance(command, list):
        command = _unwrap_shell([str(c) for c in command])
    if name in SHELL_TOOLS or payload.get("type") == "local_shell_call":
        if isinstance(command, str) and command.startswith("apply_patch"):
            _patched(reader, line, command)
        elif isinstance(command, str) and command.strip():
            reader.add("command", line, command, call_id=call_id)


def _patched(reader: _Reader, line: int, patch: str) -> None:
    for path in _PATCH_FILE.findall(patch):
        reader.add("edit", line, reader.relative(path.strip()))


def _unwrap_shell(argv: list[str]) -> str:
    """`["bash", "-lc", "pytest -q"]` -> `pytest -q`; other argv joined with spaces."""
    if len(argv) >= 3 and Path(argv[0]).name in ("bash", "sh", "zsh") and argv[1] in ("-lc", "-c"):
        return argv[-1]
    return " ".join(argv)


def _json_object(raw: object) -> dict[str, Any]:
    if isinstance(raw, dict):
        return raw
    if isinstance(raw, str):
        try:
            parsed = json.loads(raw)
        except json.JSONDecodeError:
            return {}
        return parsed if isinstance(parsed, dict) else {}
    return {}


def _codex_output(reader: _Reader, line: int, output: object, call_id: str) -> None:
    data = _json_object(output)
    text = str(data.get("output") if data else output or "")
    meta = _json_object(data.get("metadata"))
    code = meta.get("exit_code") if isinstance(meta.get("exit_code"), int) else _exit_code(text)
    reader.add("result", line, text[:400], call_id=call_id, failed=bool(code), exit_code=code)


# -- generic JSONL ----------------------------------------------------------------------------


def _read_generic(reader: _Reader) -> None:
    for line, record in _records(reader.session.path):
        if str(record.get("session_id")) != reader.session.id:
            continue
        role, text = record.get("role"), str(record.get("text") or "")
        if role in ("user", "assistant") and text.strip():
            reader.add("prompt" if role == "user" else "reply", line, text)
