"""Write and read `best_skill.md`: YAML front matter, then the body exactly as the model saw it.

The body after the front matter is byte-for-byte the system message the target model received,
so `load_skill(export_skill(skill, ...))` returns `skill` unchanged. `export_agent_skill` writes
the folder layout each agent reads (`<name>/SKILL.md` for Claude Code and Codex skills,
`AGENTS.md`), with the front matter that agent expects; `install_skill` puts a skill where an
agent CLI started in a workspace reads it.
"""

from __future__ import annotations

import datetime as _dt
import re
from collections.abc import Mapping
from pathlib import Path

import yaml

from skillopt_dsl.agent_kinds import AgentName, agent_kind
from skillopt_dsl.errors import UserInputError
from skillopt_dsl.file_transaction import atomic_write_text
from skillopt_dsl.json_types import JSONValue
from skillopt_dsl.skill import Skill

__all__ = [
    "AgentKind",
    "SkillLayout",
    "atomic_write_text",
    "export_agent_skill",
    "export_skill",
    "install_skill",
    "load_skill",
    "safe_skill_name",
]

_FRONT = "---\n"
_SEPARATOR = "\n---\n"


def _front_matter(skill: Skill, metadata: Mapping[str, object]) -> str:
    fields: dict[str, object] = {"name": "skill", "description": ""}
    fields.update({k: v for k, v in metadata.items() if v is not None})
    fields.setdefault("date", _dt.datetime.now(_dt.UTC).replace(microsecond=0).isoformat())
    fields["skill_hash"] = skill.hash
    dumped = yaml.safe_dump(fields, sort_keys=False, allow_unicode=True, default_flow_style=False)
    return _FRONT + dumped + "---\n"


def export_skill(
    skill: Skill, path: str | Path, metadata: Mapping[str, object] | None = None
) -> Path:
    """Write `skill` to `path` with YAML front matter; returns the path written.

    `metadata` may hold name, description, scores, models, run id; values must be YAML-safe.
    """
    target = Path(path)
    atomic_write_text(target, _front_matter(skill, metadata or {}) + skill.text)
    return target


def load_skill(path: str | Path) -> Skill:
    """Read a skill file; with front matter, return the body exactly as exported."""
    target = Path(path)
    if not target.is_file():
        raise UserInputError(f"skill file {str(target)!r} does not exist")
    with target.open(encoding="utf-8", newline="") as handle:
        text = handle.read()
    return Skill(split_front_matter(text)[1])


def split_front_matter(text: str, source: str = "the skill file") -> tuple[dict[str, object], str]:
    """Split `---` YAML front matter from the body; a file without it is all body.

    Front matter that is not a YAML mapping is a `UserInputError` naming `source` (the file)
    and the file's line where the YAML breaks."""
    if not text.startswith(_FRONT):
        return {}, text
    end = text.find(_SEPARATOR, len(_FRONT) - 1)
    if end < 0:
        raise UserInputError(f"{source} opens a '---' front matter block that is never closed")
    try:
        meta = yaml.safe_load(text[len(_FRONT) : end + 1]) or {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = "" if mark is None else f" at line {mark.line + 2}"  # after the opening ---
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise UserInputError(
            f"{source}: the front matter is not valid YAML{where} ({problem}); fix that line"
        ) from None
    if not isinstance(meta, dict):
        raise UserInputError(f"{source}: the front matter is not a YAML mapping")
    return meta, text[end + len(_SEPARATOR) :]


_SAFE_NAME = re.compile(r"[^a-z0-9-]+")


def safe_skill_name(name: str) -> str:
    """A folder-safe skill name: lowercase letters, digits and hyphens, at most 64 characters."""
    cleaned = _SAFE_NAME.sub("-", name.casefold()).strip("-")[:64].strip("-")
    if not cleaned:
        raise UserInputError(
            f"skill name {name!r} has no usable characters; use letters, digits or hyphens"
        )
    return cleaned


AgentKind = AgentName
"""Which agent an exported skill is for: a name of `skillopt_dsl.agent_kinds.AGENT_KINDS`
(see `export_agent_skill`)."""


def export_agent_skill(
    skill: Skill,
    folder: str | Path,
    *,
    name: str,
    description: str,
    metadata: Mapping[str, JSONValue] | None = None,
    agent: AgentKind = "claude",
) -> Path:
    """Write the skill where `agent` reads it, with the front matter that agent expects.

    - `"claude"` (Claude Code / Agent Skills): `<folder>/<name>/SKILL.md`, front matter `name`,
      `description` (at most 1024 characters) and `metadata` (scores, hashes) when given.
    - `"codex"` (Codex skills): `<folder>/<name>/SKILL.md`, front matter `name` and `description`
      only (at most 500 characters); `metadata` is not written.
    - `"agents-md"` (Codex and other agents reading `AGENTS.md`): `<folder>/AGENTS.md`, the skill
      text with no front matter (the file is plain markdown).

    The name is sanitised, never a path; nothing is written outside `folder`. What each agent
    reads is its `skillopt_dsl.agent_kinds.AgentKind` (an unknown name is refused).
    """
    kind = agent_kind(agent)
    root = Path(folder).resolve()
    if kind.description_limit is None:
        target = root / "AGENTS.md"
        atomic_write_text(target, skill.text)
        return target
    safe = safe_skill_name(name)
    target = (root / safe / "SKILL.md").resolve()
    if root not in target.parents:
        raise UserInputError(f"refusing to write outside {root}: {target}")
    one_line = " ".join(description.split())
    if not one_line:
        raise UserInputError("an agent skill needs a one-line description of when to use it")
    limit = kind.description_limit
    if len(one_line) > limit:
        raise UserInputError(
            f"{agent} reads skill descriptions of at most {limit} characters; this one has "
            f"{len(one_line)}: shorten the module's docstring or pass a shorter description"
        )
    extra = {"metadata": dict(metadata)} if metadata and kind.reads_metadata else {}
    fields = {"name": safe, "description": one_line, **extra}
    dumped = yaml.safe_dump(fields, sort_keys=False, allow_unicode=True)
    atomic_write_text(target, _FRONT + dumped + "---\n" + skill.text)
    return target


SkillLayout = AgentName
"""Which agent's place an agent CLI reads its skill from inside a workspace: a registered agent
kind with `workspace_skills` (`claude`, `agents-md`; see `install_skill`)."""


def install_skill(
    skill: Skill, workspace: str | Path, *, layout: SkillLayout, name: str, description: str
) -> Path:
    """Put `skill` where an agent CLI started in `workspace` reads it; returns the file.

    `"claude"`: `<workspace>/.claude/skills/<name>/SKILL.md` (Claude Code's project skills);
    `"agents-md"`: `<workspace>/AGENTS.md` (Codex and other agents).
    """
    kind = agent_kind(layout, what="skill layout", installable=True)
    folder = Path(workspace) / (kind.workspace_skills or ".")
    return export_agent_skill(skill, folder, name=name, description=description, agent=kind.name)
