"""The one registry of agent kinds: which agents a skill is written for, and what each reads.

"Which agent is this?" is answered here and nowhere else: the export's `agent=`, a skill
folder's description limits, the CLI's `--agent` choices, a command agent's `layout=` and the
agents Sleep reads transcripts of all look their agent up by name in `AGENT_KINDS`. A new agent
is one `register_agent_kind(AgentKind(...))` call; an unknown name is refused with the list of
registered ones, never mapped to a default.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from skillopt_dsl.errors import UserInputError

__all__ = [
    "AGENT_KINDS",
    "AgentKind",
    "AgentName",
    "SkillFile",
    "agent_kind",
    "agent_names",
    "description_limit",
    "register_agent_kind",
]

AgentName = str
"""The name of an agent: a key of `AGENT_KINDS` (`claude`, `codex`, `agents-md`, or one
registered since). A Sleep session's `agent` is the transcript source that read it, named after
its agent (`claude`, `codex`; `jsonl` for the generic reader, which writes no skill)."""

SkillFile = Literal["skill-folder", "agents-md"]
"""How an agent reads a skill: `skill-folder` is `<name>/SKILL.md` with a front matter naming
and describing the skill; `agents-md` is one plain `AGENTS.md`, no front matter."""


@dataclass(frozen=True, kw_only=True)
class AgentKind:
    """One agent a skill can be written for.

    `name`: the word the CLI and the API use. `skill_file`: how it reads a skill (see
    `SkillFile`). `description_limit`: the longest one-line description it reads in a skill's
    front matter, in characters (None for `agents-md`, which has no front matter).
    `reads_metadata`: whether the front matter may carry a `metadata` block (scores, hashes).
    `workspace_skills`: where an agent CLI started in a workspace reads its skill, relative to the
    workspace (`.claude/skills` for Claude Code's project skills, `.` for `AGENTS.md`); None when
    the skill cannot be installed into a workspace for it."""

    name: AgentName
    skill_file: SkillFile
    description_limit: int | None = None
    reads_metadata: bool = False
    workspace_skills: str | None = None

    def __post_init__(self) -> None:
        if not self.name or self.name != self.name.strip():
            raise TypeError(f"an agent kind needs a plain name, not {self.name!r}")
        if (self.skill_file == "skill-folder") != (self.description_limit is not None):
            raise TypeError(
                f"agent kind {self.name!r}: a skill folder has a description limit, "
                "AGENTS.md has none"
            )


AGENT_KINDS: dict[AgentName, AgentKind] = {}
"""The registered agent kinds by name, in registration order."""


def register_agent_kind(kind: AgentKind) -> AgentKind:
    """Register `kind` under its name (a name taken by a different kind is refused)."""
    taken = AGENT_KINDS.get(kind.name)
    if taken is not None and taken != kind:
        raise TypeError(f"agent kind {kind.name!r} is already registered as {taken}")
    AGENT_KINDS[kind.name] = kind
    return kind


def agent_names(*, described: bool = False, installable: bool = False) -> list[AgentName]:
    """The registered names, in order; `described`: only those reading a skill description
    (`SKILL.md` front matter); `installable`: only those with a workspace skill place."""
    return [
        name
        for name, kind in AGENT_KINDS.items()
        if (not described or kind.description_limit is not None)
        and (not installable or kind.workspace_skills is not None)
    ]


def agent_kind(
    name: str, *, what: str = "agent", described: bool = False, installable: bool = False
) -> AgentKind:
    """The registered kind `name`; `UserInputError` listing the choices when it is not one
    (of those reading a description / installable into a workspace, when asked)."""
    choices = agent_names(described=described, installable=installable)
    if name not in choices:
        raise UserInputError(f"unknown {what} {name!r}; choose one of {', '.join(choices)}")
    return AGENT_KINDS[name]


def description_limit(name: str) -> int:
    """The longest one-line skill description agent `name` reads, in characters."""
    limit = agent_kind(name, described=True).description_limit
    assert limit is not None  # `described=True` admits only kinds with a limit
    return limit


register_agent_kind(
    AgentKind(
        name="claude",
        skill_file="skill-folder",
        description_limit=1024,
        reads_metadata=True,
        workspace_skills=".claude/skills",
    )
)
register_agent_kind(AgentKind(name="codex", skill_file="skill-folder", description_limit=500))
register_agent_kind(AgentKind(name="agents-md", skill_file="agents-md", workspace_skills="."))
