"""Stage a compile's result on a skill folder in the run directory; the user's folder is untouched.

`stage_folder(result, folder)` writes `<run_dir>/skill_folder/`:

- `proposed/<path>`: the new text of each file the accepted document rewrites (only those);
- `folder.diff`: a unified diff of the folder (`a/<path>` -> `b/<path>`, `patch -p1` applies it);
- `manifest.json` (`FolderManifest`): the live folder, the sha256 of every file the run read as
  it was at compile time, of every proposed file, and the gate's evidence (seed vs best
  validation score, test scores when a test set was scored, the constant answer, the run id).

When the gate accepted nothing, nothing is proposed and no diff is written; the manifest says so
(`accepted: false` and why), and `adopt_folder` repeats it. Adopting is a separate, explicit step
(`skillopt_dsl.skill_folder.adopt`).
"""

from __future__ import annotations

import logging
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from skillopt_dsl.errors import UserInputError
from skillopt_dsl.file_transaction import atomic_write, sha256_of
from skillopt_dsl.skill_folder.document import BODY, DESCRIPTION, WHEN_TO_USE, FolderDocument
from skillopt_dsl.skill_folder.folder import SKILL_FILE, FolderChange, SkillFolder
from skillopt_dsl.staged_change import stage_proposals

if TYPE_CHECKING:
    from skillopt_dsl.compile import CompileResult

__all__ = [
    "STAGE_DIR",
    "FolderEvidence",
    "FolderManifest",
    "StagedFolder",
    "read_folder_manifest",
    "stage_dir",
    "stage_folder",
]

logger = logging.getLogger(__name__)

STAGE_DIR = "skill_folder"
"""The folder of a run directory that holds a staged skill-folder change."""


class FolderEvidence(BaseModel):
    """What the gate saw: seed vs best validation score (on the same `val_examples`), the test
    scores when a test set was scored, the best constant answer where the output is a label,
    the accepted decisions, why the run stopped, and the run's id (its directory's name)."""

    model_config = ConfigDict(extra="forbid")

    run_id: str
    seed_val: float
    best_val: float
    val_examples: int
    seed_test: float | None = None
    best_test: float | None = None
    constant_label: str | None = None
    constant_val: float | None = None
    constant_test: float | None = None
    accepted_decisions: int
    stop_reason: str


class FolderManifest(BaseModel):
    """`<run_dir>/skill_folder/manifest.json`: what was staged and against which bytes.

    `live` maps each file the run read (folder-relative) to its sha256 at compile time; adopt
    refuses when any of them differs on disk. `proposed` maps each rewritten file to the sha256
    of its staged new text. `accepted` is False when the gate accepted nothing (`note` says so).
    """

    model_config = ConfigDict(extra="forbid")

    folder: str
    created: str
    parts: list[str]
    live: dict[str, str]
    proposed: dict[str, str]
    accepted: bool
    note: str
    evidence: FolderEvidence
    flags: list[str] = Field(default_factory=list)
    """Warnings about the staged change a reviewer should read (words copied from training
    requests that no validation request holds); empty for manifests written before them."""


@dataclass(frozen=True)
class StagedFolder:
    """What `stage_folder` wrote: the run directory, the manifest, the diff (None when nothing
    was accepted) and the files the change rewrites (empty when nothing was accepted)."""

    run_dir: Path
    manifest: FolderManifest
    diff_path: Path | None
    changes: tuple[FolderChange, ...]

    @property
    def accepted(self) -> bool:
        """True when a change was staged (something passed the gate)."""
        return self.manifest.accepted

    @property
    def adopt_command(self) -> str:
        """The command that adopts this change into the live folder."""
        return shlex.join(["skillopt-dsl", "skill-folder", "adopt", str(self.run_dir)])


def stage_dir(run_dir: str | Path) -> Path:
    """The folder of `run_dir` that holds its staged skill-folder change."""
    return Path(run_dir) / STAGE_DIR


def read_folder_manifest(run_dir: str | Path) -> FolderManifest:
    """The manifest staged in `run_dir`; an error says how to stage one when there is none."""
    path = stage_dir(run_dir) / "manifest.json"
    if not path.is_file():
        raise UserInputError(
            f"{run_dir} holds no staged skill-folder change (no {STAGE_DIR}/manifest.json); "
            "`skillopt-dsl compile --skill-folder PATH ...` (or `stage_folder` in Python) stages one"
        )
    return FolderManifest.model_validate_json(path.read_text(encoding="utf-8"))


def stage_folder(
    result: CompileResult,
    folder: SkillFolder,
    run_dir: str | Path | None = None,
    *,
    flags: Sequence[str] = (),
) -> StagedFolder:
    """Stage `result` (a compile whose skill is `folder`'s document) in `run_dir` (default: the
    result's run directory); nothing under `folder.root` is written. See the module docstring.

    `flags` are warnings for the reviewer, kept in the manifest (`skill-folder diff` prints
    them). Raises `UserInputError` when the result was not compiled from this folder, when
    there is no run directory, or when the run directory already holds a staged change.
    """
    directory = Path(run_dir) if run_dir is not None else result.run_dir
    if directory is None:
        raise UserInputError(
            "stage_folder needs a run directory: compile with run_dir=... or pass run_dir"
        )
    target = stage_dir(directory)
    if (target / "manifest.json").exists():
        raise UserInputError(
            f"{directory} already holds a staged skill-folder change; stage into a new run dir"
        )
    names = _compiled_parts(result, folder)
    changes = folder.changes(result.best_skill) if result.improved else ()
    manifest = FolderManifest(
        folder=str(folder.root.resolve()),
        created=datetime.now(UTC).isoformat(),
        parts=list(names),
        live=_live_hashes(folder, names),
        proposed={change.path: change.new_sha for change in changes},
        accepted=bool(changes),
        note=_note(result, changes),
        evidence=_evidence(result, directory),
        flags=list(flags) if changes else [],
    )
    diff_path = _write_stage(target, manifest, changes)
    logger.info("staged skill folder %s in %s: %s", folder.root, target, manifest.note)
    return StagedFolder(directory, manifest, diff_path, changes)


def _compiled_parts(result: CompileResult, folder: SkillFolder) -> tuple[str, ...]:
    """The parts the run trained; the folder must be the one the run's seed was read from."""
    names = FolderDocument.from_skill(result.seed_skill).names
    if folder.seed_skill(names) != result.seed_skill:
        raise UserInputError(
            f"this result was not compiled from {folder.root} as it is now (the run's seed "
            "document differs from the folder's parts); stage with the SkillFolder the run read"
        )
    return names


def _live_hashes(folder: SkillFolder, names: tuple[str, ...]) -> dict[str, str]:
    """sha256 of every file the run read, as read (compile time, not now)."""
    read: dict[str, str] = {}
    if DESCRIPTION in names or BODY in names or WHEN_TO_USE in names:
        read[SKILL_FILE] = folder.skill_file_text
    for name in names:
        if name in folder.reference_paths:
            read[name] = folder.reference_text(name)
    return {path: str(sha256_of(text.encode("utf-8"))) for path, text in read.items()}


def _note(result: CompileResult, changes: tuple[FolderChange, ...]) -> str:
    scores = f"validation {result.seed_val_score:.4f} (seed) -> {result.val_score:.4f} (best)"
    if changes:
        return f"{len(changes)} file(s) rewritten: {', '.join(c.path for c in changes)}; {scores}"
    if result.improved:
        return f"the accepted document rewrites no file; nothing staged; {scores}"
    return f"the gate accepted no candidate; nothing staged (the folder stays as it is); {scores}"


def _evidence(result: CompileResult, run_dir: Path) -> FolderEvidence:
    baseline = result.baseline
    return FolderEvidence(
        run_id=run_dir.name,
        seed_val=result.seed_val_score,
        best_val=result.val_score,
        val_examples=result.val_examples,
        seed_test=result.seed_test_score,
        best_test=result.test_score,
        constant_label=None if baseline is None else str(baseline.label),
        constant_val=None if baseline is None else baseline.val_score,
        constant_test=None if baseline is None else baseline.test_score,
        accepted_decisions=sum(1 for decision in result.gate_log if decision.accepted),
        stop_reason=result.stop_reason,
    )


def _write_stage(
    target: Path, manifest: FolderManifest, changes: tuple[FolderChange, ...]
) -> Path | None:
    diff_path = None
    if changes:
        patch = stage_proposals(
            target,
            {change.path: change.new_text.encode("utf-8") for change in changes},
            {change.path: change.old_text.encode("utf-8") for change in changes},
        )
        diff_path = target / "folder.diff"
        atomic_write(diff_path, patch.encode("utf-8"))
    atomic_write(target / "manifest.json", manifest.model_dump_json(indent=2).encode("utf-8"))
    return diff_path
