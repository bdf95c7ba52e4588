"""Sleep: improve an agent's own skill and memory files from its session history.

harvest (read only, secrets redacted; tasks merged into a review folder that survives) → mine (checkable tasks, recurring ones clustered, stable
hashed splits) → replay and judge (a `SkillModule` and metric functions) → consolidate (an
existing optimizer through `skillopt_dsl.compile`, the same `Gate`, the night's `Budget`) → stage
(proposal, diff, report, evidence, a manifest pinning live-file hashes) → adopt (explicit,
refuses changed live files, backed up, atomic, undoable with `rollback`).

Nothing but `adopt` and `rollback` writes a live file. The CLI is `skillopt-dsl sleep ...`.
"""

from __future__ import annotations

from skillopt_dsl.sleep.adopt import Receipt, adopt, recover, rollback
from skillopt_dsl.sleep.errors import MemoryFileError, SleepError, SleepLocked, StageMismatch
from skillopt_dsl.sleep.harvest import HarvestResult, HarvestStats, Session, Turn, harvest
from skillopt_dsl.sleep.memory import LEARNED_END, LEARNED_START, MemoryFile
from skillopt_dsl.sleep.night import NightResult, SleepConfig, run_night
from skillopt_dsl.sleep.project import ProjectConfig, SleepProject
from skillopt_dsl.sleep.redact import Redactor
from skillopt_dsl.sleep.review import ReviewFolder
from skillopt_dsl.sleep.sources import ClaudeCodeSource, CodexSource, GenericJsonlSource, Source
from skillopt_dsl.sleep.stage import Manifest, NightReport
from skillopt_dsl.sleep.tasks import Check, Task
from skillopt_dsl.sleep.trigger_rows import (
    TriggerRows,
    trigger_rows,
    trigger_splits,
    write_trigger_rows,
)

__all__ = [
    "LEARNED_END",
    "LEARNED_START",
    "Check",
    "ClaudeCodeSource",
    "CodexSource",
    "GenericJsonlSource",
    "HarvestResult",
    "HarvestStats",
    "Manifest",
    "MemoryFile",
    "MemoryFileError",
    "NightReport",
    "NightResult",
    "ProjectConfig",
    "Receipt",
    "Redactor",
    "ReviewFolder",
    "Session",
    "SleepConfig",
    "SleepError",
    "SleepLocked",
    "SleepProject",
    "Source",
    "StageMismatch",
    "Task",
    "TriggerRows",
    "Turn",
    "adopt",
    "harvest",
    "recover",
    "rollback",
    "run_night",
    "trigger_rows",
    "trigger_splits",
    "write_trigger_rows",
]
