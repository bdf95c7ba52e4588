"""Fakes for the trigger task (`skillopt_dsl.skill_folder.TriggerModule`): read what a trigger
call shows and answer as an agent would, so a scripted router needs no knowledge of the
prompt's layout.

    def router(messages):  # loads pdf for invoice requests when pdf's card says invoice
        card = listed_description(messages, "pdf") or ""
        wanted = "invoice" in card and "invoice" in trigger_request(messages)
        return skill_call("pdf") if wanted else "No tool is needed."
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

__all__ = ["listed_description", "listed_names", "skill_call", "tool_call", "trigger_request"]


def _content(message: Mapping[str, object]) -> str:
    return str(message.get("content", ""))


def trigger_request(messages: Sequence[Mapping[str, object]]) -> str:
    """The request a trigger call asks about (its last user message)."""
    return next(_content(m) for m in reversed(messages) if m.get("role") == "user")


def _listing(messages: Sequence[Mapping[str, object]]) -> list[str]:
    system = next((_content(m) for m in messages if m.get("role") == "system"), "")
    inside = system.split("<available_skills>", 1)[-1].split("</available_skills>", 1)[0]
    return [line.strip() for line in inside.splitlines() if line.strip().startswith("- ")]


def listed_names(messages: Sequence[Mapping[str, object]]) -> list[str]:
    """The skill names the `Skill` tool lists, in the order shown."""
    return [line[2:].split(":", 1)[0] for line in _listing(messages)]


def listed_description(messages: Sequence[Mapping[str, object]], name: str) -> str | None:
    """The description the listing shows for skill `name` (None: not listed)."""
    for line in _listing(messages):
        if line.startswith(f"- {name}:"):
            return line.split(":", 1)[1].strip()
    return None


def tool_call(tool: str, **arguments: object) -> str:
    """A reply calling `tool` with `arguments` in the text tool protocol."""
    return "```json\n" + json.dumps({"tool": tool, "arguments": arguments}) + "\n```"


def skill_call(name: str) -> str:
    """A reply that loads skill `name` through the `Skill` tool."""
    return tool_call("Skill", skill=name)
