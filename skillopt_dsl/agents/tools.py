"""Tools: typed Python functions an agent may call, with JSON schemas built by pydantic.

`Tool.from_function(fn)` reads the function's signature and docstring: every parameter needs a
type annotation (pydantic builds and validates the argument model from them), the docstring's
first paragraph is the tool's description, and a Google-style `Args:` section describes the
parameters. Nothing is written by hand, so the schema the model sees and the validation the call
goes through cannot drift apart.

`Tool.invoke(arguments)` never raises: arguments of the wrong type, a tool that raises and a tool
that runs past its `timeout_s` all come back as a `ToolResult` with `error` set, which the agent
loop sends to the model as the tool's result. A tool cut off by its timeout keeps running in a
daemon thread (Python cannot kill a thread); write tools that can be abandoned, or give them their
own timeouts.
"""

from __future__ import annotations

import inspect
import json
import re
import threading
import time
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pydantic

from skillopt_dsl.errors import UserInputError

__all__ = ["DEFAULT_TOOL_TIMEOUT_S", "Tool", "ToolResult", "as_tools", "tool"]

DEFAULT_TOOL_TIMEOUT_S = 10.0
"""How long one tool call may run before it is cut off and reported as an error."""

_ARGS_HEADER = re.compile(r"^\s*(Args|Arguments|Parameters)\s*:\s*$", re.IGNORECASE)
_ARG_LINE = re.compile(r"^\s+(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.+)$")
_TOOL_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$")


@dataclass(frozen=True)
class ToolResult:
    """What one tool call returned: its output as text, or the error the model is shown."""

    output: str
    error: str | None = None
    duration_s: float = 0.0

    @property
    def ok(self) -> bool:
        """True when the tool ran and returned."""
        return self.error is None

    @property
    def text(self) -> str:
        """What the model reads: the output, or `error: ...`."""
        return self.output if self.error is None else f"error: {self.error}"


@dataclass(frozen=True)
class Tool:
    """One callable tool: name, description, validated arguments, and a time limit.

    Build it with `Tool.from_function(fn)` or the `@tool` decorator rather than by hand.
    """

    name: str
    description: str
    function: Callable[..., Any]
    arguments: type[pydantic.BaseModel]
    timeout_s: float = DEFAULT_TOOL_TIMEOUT_S

    @classmethod
    def from_function(
        cls,
        function: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        timeout_s: float = DEFAULT_TOOL_TIMEOUT_S,
    ) -> Tool:
        """A tool from a typed function; its docstring describes it and its `Args:` the fields.

        Raises `UserInputError` for an unannotated parameter, `*args`/`**kwargs`, a bad name
        or a non-positive timeout.
        """
        tool_name = str(name or getattr(function, "__name__", ""))
        if not _TOOL_NAME.match(tool_name):
            raise UserInputError(
                f"tool name {tool_name!r} must start with a letter or '_' and use only letters, "
                "digits, '_' or '-' (at most 64 characters); pass name=..."
            )
        if timeout_s <= 0:
            raise UserInputError(f"tool {tool_name!r}: timeout_s must be > 0, got {timeout_s}")
        summary, arg_docs = _parse_docstring(inspect.getdoc(function) or "")
        model = _arguments_model(tool_name, function, arg_docs)
        return cls(tool_name, description or summary, function, model, timeout_s)

    def schema(self) -> dict[str, object]:
        """The JSON schema of the tool in the OpenAI function-calling form."""
        parameters = self.arguments.model_json_schema()
        parameters.pop("title", None)
        for field_schema in parameters.get("properties", {}).values():
            field_schema.pop("title", None)
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": parameters,
            },
        }

    def signature(self) -> str:
        """A one-line signature for text prompts: `lookup(city: string, field?: string)`."""
        schema = self.arguments.model_json_schema()
        required = set(schema.get("required", []))
        parts = []
        for field_name, field_schema in schema.get("properties", {}).items():
            kind = field_schema.get("type") or _any_of_types(field_schema) or "any"
            optional = "" if field_name in required else "?"
            parts.append(f"{field_name}{optional}: {kind}")
        return f"{self.name}({', '.join(parts)})"

    def invoke(self, arguments: Mapping[str, object]) -> ToolResult:
        """Validate `arguments`, run the tool with its time limit; never raises."""
        started = time.perf_counter()
        try:
            validated = self.arguments.model_validate(dict(arguments))
        except pydantic.ValidationError as exc:
            return ToolResult("", _validation_message(self.name, exc), 0.0)
        kwargs = {name: getattr(validated, name) for name in self.arguments.model_fields}
        output, error = _run_with_timeout(self.function, kwargs, self.timeout_s, self.name)
        return ToolResult(output, error, time.perf_counter() - started)


def tool(
    function: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    timeout_s: float = DEFAULT_TOOL_TIMEOUT_S,
) -> Any:
    """Decorator form of `Tool.from_function`: `@tool` or `@tool(timeout_s=2)`."""

    def wrap(fn: Callable[..., Any]) -> Tool:
        return Tool.from_function(fn, name=name, timeout_s=timeout_s)

    return wrap(function) if function is not None else wrap


def as_tools(items: typing.Iterable[Tool | Callable[..., Any]]) -> dict[str, Tool]:
    """Tools by name from tools or plain functions; a repeated name is an error."""
    tools: dict[str, Tool] = {}
    for item in items:
        built = item if isinstance(item, Tool) else Tool.from_function(item)
        if built.name in tools:
            raise UserInputError(f"two tools are named {built.name!r}; tool names must be unique")
        tools[built.name] = built
    return tools


def render_output(value: Any) -> str:
    """A tool's return value as the text the model reads (strings as-is, the rest as JSON)."""
    if isinstance(value, str):
        return value
    if isinstance(value, pydantic.BaseModel):
        return value.model_dump_json()
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)


def _run_with_timeout(
    function: Callable[..., Any], kwargs: dict[str, object], timeout_s: float, name: str
) -> tuple[str, str | None]:
    box: dict[str, object] = {}

    def target() -> None:
        try:
            box["value"] = function(**kwargs)
        except Exception as exc:
            box["error"] = f"{type(exc).__name__}: {exc}"

    worker = threading.Thread(target=target, name=f"tool-{name}", daemon=True)
    worker.start()
    worker.join(timeout_s)
    if worker.is_alive():
        return "", f"tool {name!r} timed out after {timeout_s:g} s and was cut off"
    if "error" in box:
        return "", f"tool {name!r} raised {box['error']}"
    return render_output(box.get("value")), None


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    summary = doc.split("\n\n", 1)[0].strip().replace("\n", " ")
    arg_docs: dict[str, str] = {}
    in_args = False
    for line in doc.splitlines():
        if _ARGS_HEADER.match(line):
            in_args = True
            continue
        if in_args:
            match = _ARG_LINE.match(line)
            if match:
                arg_docs[match.group(1).lstrip("*")] = match.group(2).strip()
            elif line.strip() and not line.startswith((" ", "\t")):
                in_args = False
    return summary, arg_docs


def _arguments_model(
    tool_name: str, function: Callable[..., Any], arg_docs: Mapping[str, str]
) -> type[pydantic.BaseModel]:
    try:
        hints = typing.get_type_hints(function)
    except (NameError, TypeError) as exc:
        raise UserInputError(f"tool {tool_name!r}: cannot read its type hints: {exc}") from None
    fields: dict[str, Any] = {}
    for param in inspect.signature(function).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise UserInputError(f"tool {tool_name!r}: *args and **kwargs cannot be described")
        if param.name not in hints:
            raise UserInputError(
                f"tool {tool_name!r}: parameter {param.name!r} has no type annotation; "
                "annotate every parameter so its JSON schema can be built"
            )
        default = ... if param.default is param.empty else param.default
        described = pydantic.Field(default, description=arg_docs.get(param.name))
        fields[param.name] = (hints[param.name], described)
    config = pydantic.ConfigDict(extra="forbid", strict=False)
    return pydantic.create_model(f"{tool_name}_arguments", __config__=config, **fields)


def _any_of_types(schema: Mapping[str, object]) -> str:
    options = schema.get("anyOf", [])
    if not isinstance(options, list):
        return ""
    kinds = [str(s.get("type")) for s in options if isinstance(s, dict) and s.get("type")]
    return " | ".join(kinds)


def _validation_message(name: str, exc: pydantic.ValidationError) -> str:
    problems = "; ".join(
        f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}" for e in exc.errors()[:4]
    )
    return f"bad arguments for tool {name!r}: {problems}"
