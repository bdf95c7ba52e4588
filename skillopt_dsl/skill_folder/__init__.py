"""Skill folders as agents load them — `<name>/SKILL.md` (front matter `name` and a one-line
`description`, then the body) and the reference files the body points to — as one trainable
document under one learning rate and one gate.

`SkillFolder.read(path)` reads a folder; `folder.seed_skill(parts)` is the document a run trains
(`FolderDocument` has its format); `folder.changes(trained)` lists the files a trained document
rewrites (a part the gate never changed stays byte-identical).

Triggering as a task: `TriggerModule` shows the target model an agent's system prompt (ordinary
tools beside a `Skill` tool listing the skill cards: `SkillCard`, `read_skill_cards`,
`load_skill_cards`) and the request, runs it k times and scores the trigger rate; trigger data
(JSONL, or skill-creator's eval sets) loads with `load_trigger_splits`, `trigger_preflight`
says how many requests a gain needs, and `measure_trigger` / `TriggerSummary` give precision,
recall, accuracy and the rate beside `constant_trigger_summary` ("always" / "never trigger").

Use as a task: `SkillUseModule` runs a request with the folder loaded (the body and a list of
the reference files as the system message, the tool `open_reference(path)`); each rollout's
`SkillUseTrajectory` records the `SkillCost` the skill paid, and `use_summary` gives
`SkillUseSummary` (mean skill tokens per request, how often each reference was opened).

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
from skillopt_dsl.skill_folder.cards import SkillCard, load_skill_cards, read_skill_cards
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
from skillopt_dsl.skill_folder.trigger import (
    ROUTER_INSTRUCTION,
    SKILL_TOOL,
    TriggerModule,
    TriggerSampling,
    pick_skill,
    skill_called,
)
from skillopt_dsl.skill_folder.trigger_data import (
    TRIGGER_SIZES,
    TriggerPreflight,
    TriggerSizes,
    TriggerSummary,
    constant_trigger_summary,
    load_trigger_splits,
    measure_trigger,
    read_trigger_rows,
    trigger_preflight,
)
from skillopt_dsl.skill_folder.use import REFERENCE_TOOL, SkillUseModule, SkillUseTrajectory
from skillopt_dsl.skill_folder.use_cost import SkillCost, SkillUseSummary

__all__ = [
    "BODY",
    "DESCRIPTION",
    "DESCRIPTION_LIMITS",
    "REFERENCE_TOOL",
    "ROUTER_INSTRUCTION",
    "SKILL_FILE",
    "SKILL_TOOL",
    "TRIGGER_SIZES",
    "DescriptionAgent",
    "FolderChange",
    "FolderChanged",
    "FolderDocument",
    "FolderEvidence",
    "FolderManifest",
    "FolderReceipt",
    "SkillCard",
    "SkillCost",
    "SkillFolder",
    "SkillUseModule",
    "SkillUseSummary",
    "SkillUseTrajectory",
    "StagedFolder",
    "TriggerModule",
    "TriggerPreflight",
    "TriggerSampling",
    "TriggerSizes",
    "TriggerSummary",
    "adopt_folder",
    "constant_trigger_summary",
    "description_problem",
    "load_skill_cards",
    "load_trigger_splits",
    "measure_trigger",
    "part_marker",
    "pick_skill",
    "read_folder_manifest",
    "read_skill_cards",
    "read_trigger_rows",
    "recover_folder",
    "rollback_folder",
    "skill_called",
    "stage_folder",
    "trigger_preflight",
]
