"""What the timeline readers share: a step writer that redacts, the tools that run shell
commands or edit files, exit codes, and the timeline a source gets from its turns by default.

A source's `timeline(session)` re-reads the session's transcript (read only) into `Step`s with
the lines they came from (`skillopt_dsl.sleep.transcript.Timeline`); every kept text is redacted
(`Redactor`) the moment it is read, like the harvest's.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from skillopt_dsl.json_types import JSONObject
from skillopt_dsl.sleep.redact import Redactor
from skillopt_dsl.sleep.transcript import Session, Step, StepKind, Timeline, ToolCall

__all__ = [
    "EDIT_TOOLS",
    "SHELL_TOOLS",
    "TEXT_CHARS",
    "StepReader",
    "exit_code",
    "json_object",
    "numbered_records",
    "timeline_from_turns",
]

TEXT_CHARS = 2000
"""How much of one step's text is kept (after redaction)."""

SHELL_TOOLS = frozenset({"bash", "shell", "shell_command", "exec_command", "local_shell"})
"""Tool names (case-folded) whose calls run a shell command."""

EDIT_TOOLS = frozenset({"edit", "write", "multiedit", "notebookedit", "str_replace_editor"})
"""Tool names (case-folded) whose calls write or patch a file."""

_EXIT = re.compile(r"(?:^|\n)\s*(?:Exit code:?|Process exited with code)\s*(-?\d+)")


@dataclass
class StepReader:
    """The steps of one session as a source's timeline reader finds them."""

    session: Session
    redactor: Redactor = field(default_factory=Redactor)
    steps: list[Step] = field(default_factory=list)

    def step(
        self,
        kind: StepKind,
        line: int,
        text: str = "",
        *,
        call_id: str = "",
        failed: bool = False,
        exit_code: int | None = None,
    ) -> Step:
        """A step whose text is redacted, then cut to `TEXT_CHARS` (not yet added)."""
        clean = self.redactor.redact(text.strip())[:TEXT_CHARS]
        return Step(kind, line, clean, call_id, failed, exit_code)

    def add(
        self,
        kind: StepKind,
        line: int,
        text: str = "",
        *,
        call_id: str = "",
        failed: bool = False,
        exit_code: int | None = None,
    ) -> None:
        """Add a step (see `step`)."""
        self.steps.append(
            self.step(kind, line, text, call_id=call_id, failed=failed, exit_code=exit_code)
        )

    def relative(self, path: str) -> str:
        """`path` relative to the session's folder when it lies inside it."""
        root = self.session.cwd.rstrip("/")
        if root and path.startswith(root + "/"):
            return path[len(root) + 1 :]
        return path

    def timeline(self) -> Timeline:
        """The steps read so far as the session's timeline."""
        return Timeline(self.session.path, self.session.cwd, tuple(self.steps))


def numbered_records(path: Path) -> Iterator[tuple[int, JSONObject]]:
    """The JSON objects of a JSONL file with their 1-based line numbers, opened read only
    (bad lines skipped: the harvest already counted them)."""
    with path.open("rb") as handle:
        for line_no, raw in enumerate(handle, start=1):
            try:
                record = json.loads(raw)
            except (json.JSONDecodeError, UnicodeDecodeError):
                continue
            if isinstance(record, dict):
                yield line_no, record


def json_object(raw: object) -> JSONObject:
    """`raw` as a JSON object: itself when it is one, decoded when it is a string holding one,
    else empty."""
    if isinstance(raw, dict):
        return raw
    if isinstance(raw, str):
        try:
            parsed = json.loads(raw)
        except json.JSONDecodeError:
            return {}
        return parsed if isinstance(parsed, dict) else {}
    return {}


def exit_code(text: str) -> int | None:
    """The exit code an output states near its start (`Exit code 1`, `Process exited with
    code 2`), else None."""
    found = _EXIT.search(text[:400])
    return int(found.group(1)) if found else None


def timeline_from_turns(session: Session) -> Timeline:
    """The timeline of a session read from its harvested turns, numbered by turn: prompts,
    replies, shell commands and file edits from the tool calls (by `SHELL_TOOLS` and
    `EDIT_TOOLS` name), and their results when the transcript held them. The default of
    `Source.timeline`: a source without a line-numbered reader still gets command and edit
    evidence."""
    reader = StepReader(session)
    for number, turn in enumerate(session.turns, start=1):
        if turn.text.strip():
            reader.add("prompt" if turn.role == "user" else "reply", number, turn.text)
        for index, call in enumerate(turn.calls):
            _call_steps(reader, number, call, call.call_id or f"turn-{number}-{index}")
    return Timeline(session.path, session.cwd, tuple(reader.steps), numbered="turn")


def _call_steps(reader: StepReader, number: int, call: ToolCall, call_id: str) -> None:
    """The command or edit step of one tool call, and its result when it has one."""
    name = call.name.casefold()
    data = json_object(call.input)
    if name in EDIT_TOOLS:
        path = data.get("file_path") or data.get("notebook_path") or data.get("path")
        if isinstance(path, str) and path:
            reader.add("edit", number, reader.relative(path))
        return
    if name not in SHELL_TOOLS:
        return
    command = data.get("command", data.get("cmd")) if data else call.input
    if isinstance(command, list):
        command = " ".join(str(c) for c in command)
    if not isinstance(command, str) or not command.strip():
        return
    reader.add("command", number, command, call_id=call_id)
    if call.output or call.failed is not None or call.exit_code is not None:
        code = call.exit_code if call.exit_code is not None else exit_code(call.output)
        failed = bool(call.failed) or bool(code)
        reader.add(
            "result", number, call.output[:400], call_id=call_id, failed=failed, exit_code=code
        )
