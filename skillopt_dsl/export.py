"""Write and read `best_skill.md`: YAML front matter, then the body exactly as the model saw it.

The body after the front matter is byte-for-byte the system message the target model received,
so `load_skill(export_skill(skill, ...))` returns `skill` unchanged. `export_agent_skill` writes
the `<name>/SKILL.md` folder layout that Claude Code and Codex read.
"""

from __future__ import annotations

import datetime as _dt
import os
import re
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from skillopt_dsl.errors import UserInputError
from skillopt_dsl.skill import Skill

__all__ = [
    "atomic_write_text",
    "export_agent_skill",
    "export_skill",
    "load_skill",
    "safe_skill_name",
]

_FRONT = "---\n"
_SEPARATOR = "\n---\n"


def atomic_write_text(path: Path, text: str) -> None:
    """Write `text` to `path` atomically (temp file in the same folder, fsync, rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _front_matter(skill: Skill, metadata: Mapping[str, Any]) -> str:
    fields: dict[str, Any] = {"name": "skill", "description": ""}
    fields.update({k: v for k, v in metadata.items() if v is not None})
    fields.setdefault("date", _dt.datetime.now(_dt.UTC).replace(microsecond=0).isoformat())
    fields["skill_hash"] = skill.hash
    dumped = yaml.safe_dump(fields, sort_keys=False, allow_unicode=True, default_flow_style=False)
    return _FRONT + dumped + "---\n"


def export_skill(skill: Skill, path: str | Path, metadata: Mapping[str, Any] | None = None) -> Path:
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


def split_front_matter(text: str) -> tuple[dict[str, Any], str]:
    """Split `---` YAML front matter from the body; a file without it is all body."""
    if not text.startswith(_FRONT):
        return {}, text
    end = text.find(_SEPARATOR, len(_FRONT) - 1)
    if end < 0:
        raise UserInputError("the skill file opens a '---' front matter block that is never closed")
    meta = yaml.safe_load(text[len(_FRONT) : end + 1]) or {}
    if not isinstance(meta, dict):
        raise UserInputError("the skill file's front matter is not a YAML mapping")
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


def export_agent_skill(
    skill: Skill,
    folder: str | Path,
    *,
    name: str,
    description: str,
    metadata: Mapping[str, Any] | None = None,
) -> Path:
    """Write `<folder>/<name>/SKILL.md` (agent-skill layout); the name is sanitised, never a path."""
    safe = safe_skill_name(name)
    root = Path(folder).resolve()
    target = (root / safe / "SKILL.md").resolve()
    if root not in target.parents:
        raise UserInputError(f"refusing to write outside {root}: {target}")
    if not description.strip():
        raise UserInputError("an agent skill needs a one-line description of when to use it")
    extra = {"metadata": dict(metadata)} if metadata else {}
    fields = {"name": safe, "description": " ".join(description.split()), **extra}
    dumped = yaml.safe_dump(fields, sort_keys=False, allow_unicode=True)
    atomic_write_text(target, _FRONT + dumped + "---\n" + skill.text)
    return target
