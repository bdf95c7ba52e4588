"""What every JSONL transcript source shares: reading lines, times, tool inputs and outputs.

Each reader here redacts before it cuts (a secret cut first would leave its prefix behind).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from datetime import datetime
from pathlib import Path
from typing import Literal

from skillopt_dsl.json_types import JSONObject, JSONValue
from skillopt_dsl.sleep.redact import Redactor
from skillopt_dsl.sleep.transcript import (
    TOOL_INPUT_CHARS,
    TOOL_OUTPUT_CHARS,
    ReadCounts,
    ToolOutput,
    cut,
    parse_timestamp,
)

Role = Literal["user", "assistant"]
"""Who spoke a turn."""


def json_lines(path: Path, counts: ReadCounts) -> Iterator[tuple[int, JSONObject]]:
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


def record_time(
    record: Mapping[str, JSONValue], path: Path, line_no: int, counts: ReadCounts
) -> datetime | None:
    try:
        return parse_timestamp(record.get("timestamp"))
    except ValueError as exc:
        counts.malformed(path, line_no, str(exc))
        return None


def tool_input(value: object, redactor: Redactor) -> str:
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


def tool_output(
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


def block_text(content: object) -> str:
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
