"""A skill folder's trainable parts as one skill document, and back.

The optimizer trains one text (`Skill`) under one learning rate and one gate. A folder's parts —
its description, its body, each reference file — become one document in which every part opens
with a protected marker line:

    <!-- protected --><!-- skill-folder part: description --><!-- /protected -->
    Use when the user asks to ...
    <!-- protected --><!-- skill-folder part: body --><!-- /protected -->
    # Release notes
    ...

The markers are protected regions, so no edit can move, merge or delete a part; an edit changes
text inside one part. The reflector sees the labelled parts; the target model never sees this
document (a module renders each part where the agent would read it: the description in a list of
skills, the body as the instructions, a reference file only when it is opened).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from skillopt_dsl.agent_kinds import AGENT_KINDS, AgentName, description_limit
from skillopt_dsl.errors import UserInputError
from skillopt_dsl.skill import Skill

__all__ = [
    "BODY",
    "DESCRIPTION",
    "DESCRIPTION_LIMITS",
    "WHEN_TO_USE",
    "DescriptionAgent",
    "FolderDocument",
    "description_problem",
    "part_marker",
]

DESCRIPTION: Final[str] = "description"
"""The part name of the folder's description (the front matter's `description`)."""
BODY: Final[str] = "body"
"""The part name of `SKILL.md`'s body (everything after its front matter)."""
WHEN_TO_USE: Final[str] = "when_to_use"
"""The part name of the folder's `when_to_use` (shown beside the description in the listing)."""

DescriptionAgent = AgentName
"""Whose limits a description must meet: a registered agent kind that reads a skill description
(`claude`, `codex`; see `skillopt_dsl.agent_kinds`)."""

DESCRIPTION_LIMITS: Final[Mapping[str, int]] = {
    name: kind.description_limit
    for name, kind in AGENT_KINDS.items()
    if kind.description_limit is not None
}
"""The longest description each agent reads, in characters (one line), as registered when this
module was imported (`skillopt_dsl.agent_kinds.description_limit` reads the live registry)."""

_MARKER = re.compile(
    r"^<!-- protected --><!-- skill-folder part: (?P<name>[^\n]+?) --><!-- /protected -->\n",
    re.MULTILINE,
)


def part_marker(name: str) -> str:
    """The protected line that opens part `name` in a folder document."""
    return f"<!-- protected --><!-- skill-folder part: {name} --><!-- /protected -->\n"


def description_problem(text: str, agent: DescriptionAgent = "claude") -> str | None:
    """Why `text` is not a description `agent` reads (None: it is): empty, more than one line,
    or longer than the agent's limit. Never truncates."""
    if not text.strip():
        return "the description is empty; an agent never loads a skill it cannot match"
    if "\n" in text.strip("\n") or "\r" in text:
        return "the description must be one line (agents read it as a single line)"
    limit = description_limit(agent)
    if len(text.strip()) > limit:
        return f"{agent} reads descriptions of at most {limit} characters; this one has {len(text.strip())}"
    return None


@dataclass(frozen=True)
class FolderDocument:
    """The parts of a skill folder that one run trains, in document order.

    `parts` maps a part name (`DESCRIPTION`, `BODY`, or a reference file's folder-relative path
    such as `references/style.md`) to its text.
    """

    parts: tuple[tuple[str, str], ...]

    def __post_init__(self) -> None:
        names = [name for name, _ in self.parts]
        if not names:
            raise UserInputError("a skill folder document needs at least one part to train")
        if len(set(names)) != len(names):
            raise UserInputError(f"a skill folder document names a part twice: {names}")
        for name in names:
            if not name or "\n" in name or "-->" in name:
                raise UserInputError(f"{name!r} cannot name a skill folder part")

    @property
    def names(self) -> tuple[str, ...]:
        """The part names, in document order."""
        return tuple(name for name, _ in self.parts)

    def text_of(self, name: str) -> str:
        """The text of part `name`; a `KeyError` names the parts there are."""
        for part, text in self.parts:
            if part == name:
                return text
        raise KeyError(f"no part {name!r} in this document; it has {list(self.names)}")

    def to_skill(self) -> Skill:
        """The one skill document the optimizer trains (see the module docstring)."""
        return Skill("".join(part_marker(name) + text + "\n" for name, text in self.parts))

    @classmethod
    def from_skill(cls, skill: Skill | str) -> FolderDocument:
        """Read the parts back from a (possibly edited) folder document; the exact inverse of
        `to_skill` for every text `to_skill` wrote."""
        text = skill.text if isinstance(skill, Skill) else skill
        markers = list(_MARKER.finditer(text))
        if not markers or markers[0].start() != 0:
            raise UserInputError(
                "this skill is not a skill folder document: it must open with a part marker "
                f"({part_marker(DESCRIPTION).strip()!r})"
            )
        parts = []
        for index, marker in enumerate(markers):
            end = markers[index + 1].start() if index + 1 < len(markers) else len(text)
            body = text[marker.end() : end]
            parts.append((marker.group("name"), body.removesuffix("\n")))
        return cls(tuple(parts))
