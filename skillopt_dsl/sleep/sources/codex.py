"""The Codex CLI transcript source.

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

The timeline (`CodexSource.timeline`) reads `function_call` / `local_shell_call` /
`custom_tool_call` and their outputs, `exec_command_end`, `turn_aborted`, `compacted` and
patches as `*** Update File: path` (the mid-2025 bare-item format too). The memory file is
`AGENTS.md`; replays run `codex exec` (`OPENAI_API_KEY` or `CODEX_API_KEY`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from skillopt_dsl.json_types import JSONObject
from skillopt_dsl.sleep.redact import Redactor
from skillopt_dsl.sleep.sources.base import ReplayCommand, Source
from skillopt_dsl.sleep.sources.reading import (
    Role,
    block_text,
    json_lines,
    record_time,
    tool_input,
    tool_output,
)
from skillopt_dsl.sleep.sources.registry import register_source
from skillopt_dsl.sleep.sources.steps import (
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
    Step,
    Timeline,
    ToolCall,
    ToolOutput,
    Turn,
    attach_outputs,
    merge_turns,
)

__all__ = ["CodexSource"]

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


@register_source
class CodexSource(Source):
    """Codex CLI rollouts under `<home>/.codex/` (see the module docstring)."""

    name = "codex"
    folders = (".codex/sessions", ".codex/archived_sessions")
    memory_file = "AGENTS.md"
    replay_command = ReplayCommand(
        (
            "codex",
            "exec",
            "--json",
            "--skip-git-repo-check",
            "--sandbox",
            "workspace-write",
            "{prompt}",
        ),
        "jsonl",
        ("OPENAI_API_KEY", "CODEX_API_KEY"),
    )

    @classmethod
    def timeline(cls, session: Session) -> Timeline:
        """The session's steps with their lines (see the module docstring): when the file
        mirrors its turns as events, the events' prompts and replies are kept."""
        reader = StepReader(session)
        messages: list[Step] = []
        events: list[Step] = []
        for line, record in numbered_records(session.path):
            _timeline_record(reader, line, record, (messages, events))
        chosen = events if any(s.kind == "prompt" for s in events) else messages
        reader.steps = sorted(reader.steps + chosen, key=lambda s: s.line)
        return reader.timeline()

    def files(self, stats: HarvestStats) -> list[Path]:
        found: list[Path] = []
        for folder in ("sessions", "archived_sessions"):
            root = self.home / ".codex" / folder
            if root.is_dir():
                found += sorted(root.rglob("rollout-*.jsonl"))
        return found

    def read(self, path: Path, counts: ReadCounts) -> list[Session]:
        rollout = _CodexRollout(id=path.stem.removeprefix("rollout-"), counts=counts)
        for line_no, record in json_lines(path, counts):
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

    def _record(self, rollout: _CodexRollout, record: JSONObject, path: Path, line_no: int) -> None:
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
        when = record_time(record, path, line_no, counts)
        if when is None:
            return
        if kind == "event_msg":
            self._event(rollout, payload, when)
        else:
            self._item(rollout, payload, when)

    @staticmethod
    def _meta(rollout: _CodexRollout, payload: JSONObject) -> None:
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

    def _legacy(self, rollout: _CodexRollout, record: JSONObject, path: Path, line_no: int) -> None:
        """The mid-2025 format: a bare header, `record_type` state lines, bare items."""
        counts = rollout.counts
        if "record_type" in record and "type" not in record:
            counts.records[f"record_type:{record.get('record_type')}"] += 1
            return
        if "type" not in record and "id" in record and "timestamp" in record:
            counts.records["legacy_header"] += 1
            when = record_time(record, path, line_no, counts)
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
            when = record_time(record, path, line_no, counts)
        if when is None:
            counts.malformed(path, line_no, "a bare response item before any header time")
            return
        self._item(rollout, record, when)

    @staticmethod
    def _event(rollout: _CodexRollout, payload: JSONObject, when: datetime) -> None:
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
    def _item(rollout: _CodexRollout, payload: JSONObject, when: datetime) -> None:
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


def _codex_input(payload: JSONObject, redactor: Redactor) -> str:
    """The input of a Codex tool call: arguments, input, a shell command or a search query."""
    kind = payload.get("type")
    if kind == "function_call":
        return tool_input(payload.get("arguments"), redactor)
    if kind == "custom_tool_call":
        return tool_input(payload.get("input"), redactor)
    action = payload.get("action")
    if kind == "local_shell_call" and isinstance(action, dict):
        command = action.get("command")
        if isinstance(command, list):
            return tool_input(" ".join(str(c) for c in command), redactor)
    if kind == "web_search_call" and isinstance(action, dict) and action.get("query"):
        return tool_input(action.get("query"), redactor)
    return tool_input(action, redactor)


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
        return tool_output(block_text(data["output"]), redactor, exit_code=exit_code)
    return tool_output(block_text(data), redactor)


# -- the timeline ------------------------------------------------------------------------------

_PATCH_FILE = re.compile(r"^\*\*\* (?:Add|Update|Delete) File: (.+)$", re.MULTILINE)


def _timeline_record(
    reader: StepReader,
    line: int,
    record: JSONObject,
    into: tuple[list[Step], list[Step]],
) -> None:
    """One line's steps; prompts and replies go to `into` (item messages, event messages)."""
    payload = record.get("payload") if "payload" in record else record
    if not isinstance(payload, dict):
        return
    kind = record.get("type") if "payload" in record else "response_item"
    if kind == "compacted":
        reader.add("compaction", line, str(payload.get("message") or ""))
    elif kind == "event_msg":
        _event_step(reader, line, payload, into[1])
    elif kind == "response_item":
        _item_step(reader, line, payload, into[0])


def _event_step(reader: StepReader, line: int, payload: JSONObject, into: list[Step]) -> None:
    sub = payload.get("type")
    if sub == "turn_aborted":
        reader.add("interrupt", line, str(payload.get("reason") or "turn aborted"))
    elif sub == "exec_command_end":
        found = payload.get("exit_code")
        code = found if isinstance(found, int) else None
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
            into.append(reader.step("prompt" if sub == "user_message" else "reply", line, text))


def _item_step(reader: StepReader, line: int, payload: JSONObject, into: list[Step]) -> None:
    sub = payload.get("type")
    call_id = str(payload.get("call_id") or payload.get("id") or "")
    if sub in ("function_call", "custom_tool_call", "local_shell_call"):
        _call_step(reader, line, payload, call_id)
    elif sub in ("function_call_output", "custom_tool_call_output"):
        _output_step(reader, line, payload.get("output"), call_id)
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
            into.append(reader.step("prompt" if payload["role"] == "user" else "reply", line, text))


def _call_step(reader: StepReader, line: int, payload: JSONObject, call_id: str) -> None:
    name = str(payload.get("name") or payload.get("type") or "").casefold()
    raw = payload.get("arguments") if "arguments" in payload else payload.get("input")
    if payload.get("type") == "local_shell_call":
        action = payload.get("action")
        raw = {"command": action.get("command")} if isinstance(action, dict) else None
    if name == "apply_patch" and isinstance(raw, str):
        _patched(reader, line, raw)
        return
    args = json_object(raw)
    command = args.get("command", args.get("cmd"))
    if isinstance(command, list):
        command = _unwrap_shell([str(c) for c in command])
    if name in SHELL_TOOLS or payload.get("type") == "local_shell_call":
        if isinstance(command, str) and command.startswith("apply_patch"):
            _patched(reader, line, command)
        elif isinstance(command, str) and command.strip():
            reader.add("command", line, command, call_id=call_id)


def _patched(reader: StepReader, line: int, patch: str) -> None:
    for path in _PATCH_FILE.findall(patch):
        reader.add("edit", line, reader.relative(path.strip()))


def _unwrap_shell(argv: list[str]) -> str:
    """`["bash", "-lc", "pytest -q"]` -> `pytest -q`; other argv joined with spaces."""
    if len(argv) >= 3 and Path(argv[0]).name in ("bash", "sh", "zsh") and argv[1] in ("-lc", "-c"):
        return argv[-1]
    return " ".join(argv)


def _output_step(reader: StepReader, line: int, output: object, call_id: str) -> None:
    data = json_object(output)
    text = str(data.get("output") if data else output or "")
    meta = json_object(data.get("metadata"))
    found = meta.get("exit_code")
    code = found if isinstance(found, int) else exit_code(text)
    reader.add("result", line, text[:400], call_id=call_id, failed=bool(code), exit_code=code)
