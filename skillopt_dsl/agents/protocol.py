"""The text tool protocol: how a model without native tool calling asks for a tool.

A tool call is a JSON object naming the tool and its arguments, best inside a fenced block::

    ```json
    {"tool": "lookup", "arguments": {"city": "Varnholm"}}
    ```

A reply with no tool call is the final answer. The parser is tolerant, because small models are
sloppy; in order of preference it reads:

1. fenced blocks (any language tag, or none) holding such an object;
2. bare JSON objects in the text holding such an object;
3. a call written like Python, `lookup(city="Varnholm")` or `lookup("Varnholm")`, for a tool name
   that exists.

In a JSON call the tool's name may be under `tool`, `name` or `function`, and the arguments under
`arguments`, `args`, `parameters` or `input` (an object, or a JSON string of one); an object with
a known tool name and no arguments key takes its other keys as the arguments. Single quotes and
trailing commas are forgiven. Anything else is not a call, and the reply is the final answer.

Native tool calls (`skillopt_dsl.agents.native`) are written back into this same form, so one
parser serves both.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from skillopt_dsl.agents.tools import Tool

__all__ = ["ToolRequest", "parse_tool_calls", "render_call", "render_tool_guide"]

_FENCE = re.compile(r"```[ \t]*([\w-]*)[ \t]*\n?(.*?)```", re.DOTALL)
_NAME_KEYS = ("tool", "name", "function", "tool_name")
_ARG_KEYS = ("arguments", "args", "parameters", "input", "params")
_TRAILING_COMMA = re.compile(r",\s*([}\]])")


@dataclass(frozen=True)
class ToolRequest:
    """One tool call the model asked for (before it runs)."""

    name: str
    arguments: Mapping[str, object] = field(default_factory=dict)
    call_id: str = ""
    problem: str | None = None
    """Why the call cannot run as written (arguments that are not an object), or None."""


def parse_tool_calls(text: str, tool_names: Collection[str]) -> list[ToolRequest]:
    """Every tool call in `text` (see the module docstring); `[]` means a final answer.

    A JSON call to a name that is not a tool is still returned, so the agent can tell the model
    that the tool does not exist; a Python-style call is only recognised for a known name.
    """
    found = _calls_in_fences(text, tool_names)
    if found:
        return found
    found = [
        c for obj in _bare_objects(text) if (c := _call_from_object(obj, tool_names)) is not None
    ]
    if found:
        return found
    return _python_style_calls(text, tool_names)


def render_call(request: ToolRequest) -> str:
    """The canonical text form of a call (a fenced JSON block), as native calls are recorded."""
    payload: dict[str, object] = {"tool": request.name, "arguments": dict(request.arguments)}
    if request.call_id:
        payload["id"] = request.call_id
    return "```json\n" + json.dumps(payload, ensure_ascii=False) + "\n```"


def render_tool_guide(tools: Mapping[str, Tool]) -> str:
    """The tool list and the protocol, appended to the user message in text mode.

    The call shown as the pattern names the first tool and its parameters, so a small model
    that copies it literally still writes a real tool name.
    """
    lines = ["You can call these tools:"]
    for item in tools.values():
        lines.append(f"- {item.signature()}: {item.description}".rstrip(": "))
    first = next(iter(tools.values()), None)
    pattern = {
        "tool": first.name if first else "<tool name>",
        "arguments": {p: "..." for p in (first.arguments.model_fields if first else ["<name>"])},
    }
    lines += [
        "",
        "To call a tool, reply with only a JSON block like this:",
        "```json",
        json.dumps(pattern, ensure_ascii=False),
        "```",
        "You will then get the tool's result. When you know the answer, reply with the answer only.",
    ]
    return "\n".join(lines)


def _calls_in_fences(text: str, tool_names: Collection[str]) -> list[ToolRequest]:
    calls: list[ToolRequest] = []
    for match in _FENCE.finditer(text):
        body = match.group(2).strip()
        for obj in _bare_objects(body):
            call = _call_from_object(obj, tool_names)
            if call is not None:
                calls.append(call)
        if not calls and match.group(1).casefold() not in ("json", "tool", "tool_call", ""):
            calls += _python_style_calls(body, tool_names)
    return calls


def _bare_objects(text: str) -> Iterator[dict[str, object]]:
    """Top-level `{...}` spans of `text` that parse (tolerantly) as JSON objects."""
    index = 0
    while (start := text.find("{", index)) >= 0:
        end = _matching_brace(text, start)
        if end < 0:
            return
        parsed = _loads_tolerant(text[start : end + 1])
        if isinstance(parsed, dict):
            yield parsed
            index = end + 1
        else:
            index = start + 1


def _matching_brace(text: str, start: int) -> int:
    depth, quote, escaped = 0, "", False
    for index in range(start, len(text)):
        char = text[index]
        if quote:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == quote:
                quote = ""
            continue
        if char in "\"'":
            quote = char
        elif char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return index
    return -1


def _loads_tolerant(raw: str) -> Any:
    cleaned = _TRAILING_COMMA.sub(r"\1", raw)
    try:
        return json.loads(cleaned)
    except ValueError:
        pass
    try:
        return ast.literal_eval(cleaned)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None


def _call_from_object(obj: Mapping[str, object], tool_names: Collection[str]) -> ToolRequest | None:
    name_key = next((k for k in _NAME_KEYS if isinstance(obj.get(k), str)), None)
    if name_key is None:
        return None
    name = str(obj[name_key]).strip()
    arg_key = next((k for k in _ARG_KEYS if k in obj), None)
    call_id = str(obj.get("id", "") or "")
    if arg_key is None:
        if name not in tool_names and len(obj) > 1:
            return None
        rest = {k: v for k, v in obj.items() if k not in (name_key, "id")}
        return ToolRequest(name, rest, call_id)
    arguments = obj[arg_key]
    if isinstance(arguments, str):
        arguments = _loads_tolerant(arguments) if arguments.strip() else {}
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        problem = f"the arguments must be a JSON object, got {type(arguments).__name__}"
        return ToolRequest(name, {}, call_id, problem)
    return ToolRequest(name, arguments, call_id)


def _python_style_calls(text: str, tool_names: Collection[str]) -> list[ToolRequest]:
    if not tool_names:
        return []
    names = "|".join(re.escape(n) for n in sorted(tool_names, key=len, reverse=True))
    pattern = re.compile(rf"(?<![\w.])({names})\s*\(([^()]*)\)")
    calls: list[ToolRequest] = []
    for match in pattern.finditer(text):
        arguments = _python_arguments(match.group(2))
        if arguments is not None:
            calls.append(ToolRequest(match.group(1), arguments))
    return calls


def _python_arguments(inner: str) -> dict[str, object] | None:
    """`city="X", n=2` -> {"city": "X", "n": 2}; one positional value -> {"_positional": [v]}."""
    try:
        call = ast.parse(f"f({inner})", mode="eval").body
    except SyntaxError:
        return None
    if not isinstance(call, ast.Call):
        return None
    try:
        keywords = {kw.arg: ast.literal_eval(kw.value) for kw in call.keywords if kw.arg}
        positional = [ast.literal_eval(arg) for arg in call.args]
    except ValueError:
        return None
    if positional:
        keywords[POSITIONAL] = positional
    return keywords


POSITIONAL = "_positional"
"""Key under which a Python-style call's positional values travel until the agent binds them."""


def bind_positional(tool: Tool, arguments: Mapping[str, object]) -> dict[str, object]:
    """Give a Python-style call's positional values to the tool's parameters, in order.

    Extra positional values are left under `_positional`, so validation rejects them by name.
    """
    bound = {k: v for k, v in arguments.items() if k != POSITIONAL}
    positional = arguments.get(POSITIONAL, [])
    values = list(positional) if isinstance(positional, list | tuple) else [positional]
    free = [name for name in tool.arguments.model_fields if name not in bound]
    for name, value in zip(free, values, strict=False):
        bound[name] = value
    if len(values) > len(free):
        bound[POSITIONAL] = values[len(free) :]
    return bound
