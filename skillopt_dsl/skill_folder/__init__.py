"""Skill folders as agents load them — `<name>/SKILL.md` (front matter `name` and a one-line
`description`, then the body) and the reference files the body points to — as one trainable
document under one learning rate and one gate.

`SkillFolder.read(path)` reads a folder; `folder.seed_skill(parts)` is the document a run trains
(`FolderDocument` has its format); `folder.changes(trained)` lists the files a trained document
rewrites (a part the gate never changed stays byte-identical).

After a compile, `stage_folder(result, folder)` stages the change in the run directory (the new
files, `folder.diff`, a manifest pinning the live files' sha256 and the gate's evidence) without
touching the folder; `adopt_folder(run_dir)` writes it in as one transaction with backups, and
`rollback_folder(run_dir)` puts the old bytes back.
"""

from __future__ import annotations

from skillopt_dsl.skill_folder.adopt import (
    FolderChanged,
    FolderReceipt,
    adopt_folder,
    recover_folder,
    rollback_folder,
)
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
from skillopt_dsl.skill_folder.stage import (
    FolderEvidence,
    FolderManifest,
    StagedFolder,
    read_folder_manifest,
    stage_folder,
)

__all__ = [
    "BODY",
    "DESCRIPTION",
    "DESCRIPTION_LIMITS",
    "SKILL_FILE",
    "DescriptionAgent",
    "FolderChange",
    "FolderChanged",
    "FolderDocument",
    "FolderEvidence",
    "FolderManifest",
    "FolderReceipt",
    "SkillFolder",
    "StagedFolder",
    "adopt_folder",
    "description_problem",
    "part_marker",
    "read_folder_manifest",
    "recover_folder",
    "rollback_folder",
    "stage_folder",
]
