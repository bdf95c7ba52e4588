"""A night's description stage (issue 40, `sleep run --describe PATH`): after the night's own
work is staged, train each listed skill folder's description on the trigger rows of the
project's sessions and stage the change under the night's folder.

For each folder: the rows for its skill (its front matter `name`) are read from every session
of the project the night's sources hold (read only, redacted; `trigger_rows`); rows that hold
one label or are too few to split are refused exactly as `sleep describe` refuses them, and the
refusal is recorded as the folder being skipped, with its reason: the night goes on. Otherwise
`train_description` (the path `compile --skill-folder` and `sleep describe` run: the same
`TriggerModule`, distractors beside the folder, words proposer, gate and staging) runs in
`<night>/describe/<name>/` with the folder's share of the night's budget (`Budget.split`), and
`skillopt-dsl skill-folder adopt <night>/describe/<name>` adopts what it staged. No live file
is written, and `auto_adopt` never adopts a folder: folders are adopted only by that command.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from skillopt_dsl.errors import UserInputError
from skillopt_dsl.file_transaction import atomic_write
from skillopt_dsl.json_types import JSONObject
from skillopt_dsl.lm import Budget
from skillopt_dsl.settings import CompileSettings, EventListener, ModelSpec
from skillopt_dsl.skill_folder import SkillFolder
from skillopt_dsl.skill_folder.describe import (
    DescriptionOutcome,
    DescriptionTask,
    train_description,
    words_optimizer,
)
from skillopt_dsl.sleep.harvest import ProjectMatcher
from skillopt_dsl.sleep.sources import make_sources
from skillopt_dsl.sleep.trigger_rows import (
    TriggerRows,
    trigger_rows,
    trigger_splits,
    write_trigger_rows,
)

__all__ = [
    "DESCRIBE_DIR",
    "NIGHT_ADVICE",
    "ROWS_FILE",
    "DescribePlan",
    "FolderDescribed",
    "describe_folders",
]

logger = logging.getLogger(__name__)

DESCRIBE_DIR = "describe"
"""The folder of a night that holds one run directory per described skill folder."""

ROWS_FILE = "trigger_rows.jsonl"
"""The file in a description run's directory that holds the rows it was trained on."""

NIGHT_ADVICE = (
    "the next night reads the project's sessions again, so the rows grow as the skill (and its "
    "neighbours) are used; to train now on rows written by hand, run skillopt-dsl compile "
    "--skill-folder PATH --trigger-data FILE"
)
"""What a night says of a folder it skipped for too few rows (`trigger_splits`' advice): a
night has no --project or --home to drop, it reads again the next time."""


@dataclass(frozen=True, kw_only=True)
class DescribePlan:
    """What the description stage of one night needs: the folders, the sources (`--source`),
    home and project its rows come from, the router (`lm`, None: the embedded model) and optimizer models, each
    folder's share of the night's budget (None: no limit), the seed and the threads."""

    folders: tuple[Path, ...]
    source: str
    home: Path
    project: ProjectMatcher
    lm: ModelSpec = None
    optimizer_lm: ModelSpec = None
    share: Budget | None = None
    seed: int = 0
    threads: int = 4


@dataclass(frozen=True)
class FolderDescribed:
    """One listed folder after the stage: trained and staged (`outcome`), or skipped with the
    reason (`skipped`: the refusal's message). `run_dir` is None when nothing was run."""

    folder: Path
    run_dir: Path | None
    rows: TriggerRows | None = None
    outcome: DescriptionOutcome | None = None
    skipped: str | None = None

    @property
    def status(self) -> str:
        """`skipped`, `staged` (the gate accepted a description) or `nothing accepted`."""
        if self.outcome is None:
            return "skipped"
        return "staged" if self.outcome.staged.accepted else "nothing accepted"

    def to_dict(self) -> JSONObject:
        """The folder's record in the night's result (`sleep run --json`'s `describe`)."""
        record: JSONObject = {
            "folder": str(self.folder),
            "status": self.status,
            "skipped": self.skipped,
            "run_dir": None if self.run_dir is None else str(self.run_dir),
        }
        if self.rows is not None:
            record["rows"] = cast(JSONObject, self.rows.to_dict())  # a TypedDict of JSON values
        if self.outcome is not None:
            record.update(self.outcome.to_dict())
        return record

    def line(self) -> str:
        """One line of the night's summary."""
        if self.outcome is None:
            return f"describe {self.folder}: skipped: {self.skipped}"
        r = self.outcome.result
        scores = f"val {_fmt(r.seed_val_score)} -> {_fmt(r.val_score)}"
        if not self.outcome.staged.accepted:
            return f"describe {self.folder}: nothing accepted ({scores}); the folder is unchanged"
        return f"describe {self.folder}: staged ({scores}); {self.outcome.staged.adopt_command}"


def _fmt(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"


def describe_folders(
    plan: DescribePlan, night_dir: Path, on_event: EventListener | None = None
) -> tuple[FolderDescribed, ...]:
    """Run the stage for every folder of `plan` into `night_dir/describe/` and record the
    results there (`describe.json`); see the module docstring."""
    done: list[FolderDescribed] = []
    used: set[str] = set()
    for folder in plan.folders:
        described = _describe_one(plan, folder, night_dir / DESCRIBE_DIR, used)
        logger.info("%s", described.line())
        if on_event is not None:
            on_event("describe", {"folder": str(folder), "status": described.status})
        done.append(described)
    records = [d.to_dict() for d in done]
    text = json.dumps(records, indent=2, ensure_ascii=False) + "\n"
    atomic_write(night_dir / DESCRIBE_DIR / "describe.json", text.encode("utf-8"))
    return tuple(done)


def _describe_one(plan: DescribePlan, folder: Path, root: Path, used: set[str]) -> FolderDescribed:
    """One folder: its rows, then the trained and staged description; a refusal (too few rows,
    one label, no skill folder, no other skills) is a skip with its reason."""
    try:
        name = SkillFolder.read(folder).name
        sources = make_sources(plan.source, plan.home)
        found = trigger_rows(sources, name, project=plan.project)
        trigger_splits(found, seed=plan.seed, advice=NIGHT_ADVICE)
    except UserInputError as refusal:
        return FolderDescribed(folder, None, skipped=str(refusal))
    run_dir = root / _unique(name, used)
    write_trigger_rows(found.rows, run_dir / ROWS_FILE)
    task = DescriptionTask(skill_folder=folder, trigger_data=run_dir / ROWS_FILE)
    settings = CompileSettings(
        lm=plan.lm,
        optimizer_lm=plan.optimizer_lm,
        budget=plan.share,
        run_dir=run_dir,
        seed=plan.seed,
        threads=plan.threads,
    )
    try:
        outcome = train_description(task, settings, words_optimizer())
    except UserInputError as refusal:
        return FolderDescribed(folder, run_dir, found, skipped=str(refusal))
    return FolderDescribed(folder, run_dir, found, outcome)


def _unique(name: str, used: set[str]) -> str:
    """`name`, or `name-2`, `name-3`... when an earlier folder of the night took it."""
    chosen, n = name, 1
    while chosen in used:
        n += 1
        chosen = f"{name}-{n}"
    used.add(chosen)
    return chosen
