"""Adopt a staged skill-folder change into the live folder, and roll it back: the only code that
writes a user's skill folder, and only on an explicit call.

`adopt_folder(run_dir)` refuses when a file the run read changed since compile time (its sha256
differs from the manifest's) or a staged file was modified, backs every file it replaces up
under `<run_dir>/skill_folder/backups/<sha256>.bak`, and swaps the files in as one transaction
(`skillopt_dsl.file_transaction`: temporary files, a write-ahead journal, `os.replace`). The
journal sits in the live folder (`.skillopt-adopt-journal.json`, a hidden file no reader
trains) while the swap runs, so whatever command next touches the folder — `adopt_folder`,
`rollback_folder`, `compile --skill-folder` — runs `recover_folder` first and puts every file
back to its old bytes after an adopt that was killed halfway. `rollback_folder(run_dir)`
restores the backups the same way and refuses when a file changed since it was adopted.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from skillopt_dsl.errors import UserInputError
from skillopt_dsl.file_transaction import (
    AfterReplace,
    FileChange,
    FilePlace,
    recover,
)
from skillopt_dsl.skill_folder.stage import read_folder_manifest, stage_dir
from skillopt_dsl.staged_change import (
    Refusal,
    adopted_files,
    check_adopted,
    rollback_plan,
    swap_with_receipt,
    verified_proposals,
)

__all__ = [
    "JOURNAL_NAME",
    "FolderChanged",
    "FolderReceipt",
    "adopt_folder",
    "folder_receipts",
    "recover_folder",
    "rollback_folder",
]

logger = logging.getLogger(__name__)

JOURNAL_NAME = ".skillopt-adopt-journal.json"
"""The write-ahead journal's name in the live folder while an adopt or rollback runs."""


class FolderChanged(UserInputError):
    """A live or staged file is not what it was when staged (or adopted); nothing was written."""


class FolderReceipt(BaseModel):
    """The record of one adopt or rollback (also the journal's body while it runs): the live
    folder, the run it came from, where the backups are, and each file's old and new sha256."""

    model_config = ConfigDict(extra="forbid")

    action: Literal["adopt", "rollback"]
    number: int
    folder: str
    run_dir: str
    backups: str
    when: str
    files: list[FileChange]

    @property
    def name(self) -> str:
        """The receipt's file name (numbered, so receipts sort in the order they happened)."""
        return f"{self.number:04d}-{self.action}.json"


def _place(folder: Path, backups: Path) -> FilePlace:
    return FilePlace(root=folder, backups=backups, journal=folder / JOURNAL_NAME)


def recover_folder(folder: str | Path) -> str | None:
    """Undo an adopt or rollback of `folder` that was interrupted (every file back to its old
    bytes). Returns what was undone, or None when nothing was pending."""
    journal = Path(folder) / JOURNAL_NAME
    if not journal.exists():
        return None
    pending = FolderReceipt.model_validate_json(journal.read_text(encoding="utf-8"))
    recover(_place(Path(folder), Path(pending.backups)))
    message = (
        f"an interrupted {pending.action} of {folder} (run {pending.run_dir}) was undone: every "
        f"file is back to its old bytes; run `skillopt-dsl skill-folder {pending.action} "
        f"{pending.run_dir}` again"
    )
    logger.warning(message)
    return message


def folder_receipts(run_dir: str | Path) -> list[FolderReceipt]:
    """Every adopt and rollback of `run_dir`'s staged change, oldest first."""
    found = sorted((stage_dir(run_dir) / "receipts").glob("*.json"))
    return [FolderReceipt.model_validate_json(p.read_text(encoding="utf-8")) for p in found]


def _adopted(receipts: list[FolderReceipt]) -> FolderReceipt | None:
    """The adoption in force (the last receipt, when it is an adopt)."""
    return receipts[-1] if receipts and receipts[-1].action == "adopt" else None


def adopt_folder(
    run_dir: str | Path, *, after_replace: AfterReplace | None = None
) -> FolderReceipt:
    """Write `run_dir`'s staged change into the live folder (see the module docstring).

    `after_replace` is called after each file is swapped in (a fault-injection hook for tests).
    Raises `FolderChanged` when a file changed since staging, `UserInputError` when nothing was
    staged or the change is already adopted.
    """
    manifest = read_folder_manifest(run_dir)
    folder = Path(manifest.folder)
    recover_folder(folder)
    if not manifest.accepted:
        raise UserInputError(f"nothing to adopt from {run_dir}: {manifest.note}")
    receipts = folder_receipts(run_dir)
    if _adopted(receipts) is not None:
        raise UserInputError(
            f"{run_dir} is already adopted into {folder}; "
            f"`skillopt-dsl skill-folder rollback {run_dir}` undoes it"
        )
    new_bytes = verified_proposals(
        folder, stage_dir(run_dir), (manifest.live, manifest.proposed), _refusal(run_dir)
    )
    place = _place(folder, stage_dir(run_dir) / "backups")
    files = adopted_files(place, new_bytes)
    receipt = _receipt("adopt", len(receipts) + 1, run_dir, place, files)
    _transact(run_dir, place, receipt, dict(new_bytes), after_replace)
    logger.info("adopted %s into %s: %s", run_dir, folder, ", ".join(sorted(new_bytes)))
    return receipt


def _refusal(run_dir: str | Path) -> Refusal:
    return Refusal(
        error=FolderChanged,
        since=f"run {run_dir} read it",
        changed_advice="Compile again against the current folder, or restore the file and "
        "run adopt again.",
        staged_advice="Compile again to stage a new change.",
        adopted_advice="Copy them elsewhere, or restore the file's old bytes by hand from "
        f"{stage_dir(run_dir) / 'backups'}.",
    )


def rollback_folder(run_dir: str | Path) -> FolderReceipt:
    """Put back the files `run_dir`'s adoption replaced, byte for byte, from the backups.

    Raises `FolderChanged` when a file changed since it was adopted (the edits would be lost),
    `UserInputError` when the change is not adopted.
    """
    manifest = read_folder_manifest(run_dir)
    folder = Path(manifest.folder)
    recover_folder(folder)
    receipts = folder_receipts(run_dir)
    adopted = _adopted(receipts)
    if adopted is None:
        raise UserInputError(f"nothing to roll back: {run_dir}'s change is not adopted")
    place = _place(folder, Path(adopted.backups))
    check_adopted(folder, adopted.files, _refusal(run_dir))
    files, old_bytes = rollback_plan(place, adopted.files)
    receipt = _receipt("rollback", len(receipts) + 1, run_dir, place, files)
    _transact(run_dir, place, receipt, old_bytes, None)
    logger.info("rolled back %s in %s", run_dir, folder)
    return receipt


def _receipt(
    action: Literal["adopt", "rollback"],
    number: int,
    run_dir: str | Path,
    place: FilePlace,
    files: list[FileChange],
) -> FolderReceipt:
    return FolderReceipt(
        action=action,
        number=number,
        folder=str(place.root),
        run_dir=str(Path(run_dir).resolve()),
        backups=str(place.backups.resolve()),
        when=datetime.now(UTC).isoformat(),
        files=files,
    )


def _transact(
    run_dir: str | Path,
    place: FilePlace,
    receipt: FolderReceipt,
    new_bytes: dict[str, bytes | None],
    after_replace: AfterReplace | None,
) -> None:
    record = receipt.model_dump_json(indent=2)
    target = stage_dir(run_dir) / "receipts" / receipt.name
    swap_with_receipt(place, target, record, receipt.files, new_bytes, after_replace)
