"""Skill folders as agents load them — `<name>/SKILL.md` (front matter `name` and a one-line
`description`, then the body) and the reference files the body points to — as one trainable
document under one learning rate and one gate.

`SkillFolder.read(path)` reads a folder; `folder.seed_skill(parts)` is the document a run trains
(`FolderDocument` has its format); `folder.changes(trained)` lists the files a trained document
rewrites (a part the gate never changed stays byte-identical).
"""

from __future__ import annotations

from skillopt_dsl.skill_folder.document import (
    BODY,
    DESCRIPTION,
    DESCRIPTION_LIMITS,
    DescriptionAgent,
    FolderDocument,
    description_problem,
    part_marker,
)
from skillopt_dsl.skill_folder.folder import SKILL_FILE, FolderChange, SkillFolder

__all__ = [
    "BODY",
    "DESCRIPTION",
    "DESCRIPTION_LIMITS",
    "SKILL_FILE",
    "DescriptionAgent",
    "FolderChange",
    "FolderDocument",
    "SkillFolder",
    "description_problem",
    "part_marker",
]
