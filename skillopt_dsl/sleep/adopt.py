"""Adopt and rollback: the only code in Sleep that writes a live file.

`adopt` refuses when a live file changed since the night was staged (or a staged proposal no
longer matches its pinned hash), backs every live file up under its own sha256, and replaces the
files as one transaction: new bytes go to temporary files first, a write-ahead journal records
every file's old and new hash, then the files are swapped with `os.replace`. If anything fails
(or the process is killed) before the receipt is written, `recover` — run at the start of every
Sleep command — puts every file back to its old bytes: the project ends with all old files or all
new ones, never a mix. `rollback` restores the last adopted night's backups the same way.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from skillopt_dsl.sleep.advice import nothing_to_adopt
from skillopt_dsl.sleep.errors import SleepError, StageMismatch
from skillopt_dsl.sleep.harvest import utc_now
from skillopt_dsl.sleep.project import SleepProject, atomic_write, sha256_of
from skillopt_dsl.sleep.stage import read_manifest, read_report

__all__ = ["FileChange", "Receipt", "adopt", "adoptable_night", "recover", "rollback"]

logger = logging.getLogger(__name__)

_TMP_SUFFIX = ".sleep-new"


class FileChange(BaseModel):
    """One live file in a transaction: its hash before and after, and its backup's name."""

    model_config = ConfigDict(extra="forbid")

    path: str
    old_sha: str | None
    new_sha: str | None
    backup: str | None


class Receipt(BaseModel):
    """The record of one adoption or rollback (also the journal's body while in progress)."""

    model_config = ConfigDict(extra="forbid")

    action: Literal["adopt", "rollback"]
    night_id: str
    when: str
    files: list[FileChange]
    undoes: str | None = None

    @property
    def name(self) -> str:
        """The receipt's file name."""
        stamp = self.when.replace(":", "").replace("-", "").split(".")[0]
        return f"{stamp}-{self.action}-{self.night_id}.json"


# -- recovery ----------------------------------------------------------------------------------


def recover(project: SleepProject) -> str | None:
    """Finish an interrupted adopt or rollback by restoring every file's old bytes.

    Returns a message saying what was recovered, or None when nothing was pending.
    """
    if not project.journal_path.exists():
        return None
    journal = Receipt.model_validate_json(project.journal_path.read_text(encoding="utf-8"))
    for change in journal.files:
        _restore_old(project, change)
    os.unlink(project.journal_path)
    message = (
        f"an interrupted {journal.action} of night {journal.night_id} was undone: every file "
        f"is back to its old bytes; run `skillopt-dsl sleep {journal.action}` again"
    )
    logger.warning(message)
    return message


def _restore_old(project: SleepProject, change: FileChange) -> None:
    live = project.path / change.path
    with contextlib.suppress(FileNotFoundError):
        os.unlink(live.with_name(live.name + _TMP_SUFFIX))
    if change.old_sha is None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(live)
        return
    current = sha256_of(live.read_bytes()) if live.exists() else None
    if current != change.old_sha:
        atomic_write(live, _backup_bytes(project, change))


def _backup_bytes(project: SleepProject, change: FileChange) -> bytes:
    assert change.backup is not None  # every existing old file is backed up first
    data = (project.backups / change.backup).read_bytes()
    if sha256_of(data) != change.old_sha:
        raise SleepError(
            f"backup {project.backups / change.backup} does not match its hash; it was "
            f"modified. Restore {change.path} by hand from version control."
        )
    return data


# -- the transaction ---------------------------------------------------------------------------

AfterReplace = Callable[[str], None]


def _transact(
    project: SleepProject,
    receipt: Receipt,
    new_bytes: dict[str, bytes | None],
    after_replace: AfterReplace | None,
) -> Receipt:
    project.receipts.mkdir(parents=True, exist_ok=True)
    for change in receipt.files:
        data = new_bytes[change.path]
        if data is not None:
            live = project.path / change.path
            atomic_write(live.with_name(live.name + _TMP_SUFFIX), data)
    atomic_write(project.journal_path, receipt.model_dump_json(indent=2).encode())
    try:
        for change in receipt.files:
            live = project.path / change.path
            if new_bytes[change.path] is None:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(live)
            else:
                os.replace(live.with_name(live.name + _TMP_SUFFIX), live)
            if after_replace is not None:
                after_replace(change.path)
        atomic_write(project.receipts / receipt.name, receipt.model_dump_json(indent=2).encode())
    except BaseException:
        recover(project)
        raise
    os.unlink(project.journal_path)
    return receipt


def _backup(project: SleepProject, rel: str) -> FileChange:
    live = project.path / rel
    if not live.exists():
        return FileChange(path=rel, old_sha=None, new_sha=None, backup=None)
    data = live.read_bytes()
    sha = sha256_of(data)
    assert sha is not None
    name = f"{sha}.bak"
    target = project.backups / name
    if not target.exists() or sha256_of(target.read_bytes()) != sha:
        atomic_write(target, data)
    return FileChange(path=rel, old_sha=sha, new_sha=None, backup=name)


# -- adopt -------------------------------------------------------------------------------------


def receipts(project: SleepProject) -> list[Receipt]:
    """Every receipt, oldest first."""
    if not project.receipts.is_dir():
        return []
    found = [
        Receipt.model_validate_json(p.read_text(encoding="utf-8"))
        for p in sorted(project.receipts.glob("*.json"))
    ]
    return sorted(found, key=lambda r: r.when)


def adoptable_night(project: SleepProject) -> str:
    """The newest staged night with a proposal."""
    for night in reversed(project.nights()):
        if read_manifest(night).accepted:
            return night.name
    raise SleepError(nothing_to_adopt(str(project.path)))


def adopt(
    project: SleepProject,
    night_id: str | None = None,
    *,
    after_replace: AfterReplace | None = None,
) -> Receipt:
    """Replace the live files with a night's proposal (see the module docstring).

    `after_replace` is called after each file is swapped in (a fault-injection hook for tests).
    The caller holds the project's lock.
    """
    recover(project)
    chosen = night_id or adoptable_night(project)
    night = project.night_dir(chosen)
    if not (night / "manifest.json").exists():
        raise SleepError(f"no staged night {chosen!r} in {project.sleep_dir}; see `sleep status`")
    manifest = read_manifest(night)
    if not manifest.accepted:
        raise SleepError(
            f"night {chosen} staged no proposal (nothing passed the gate); nothing to adopt"
        )
    new_bytes = _verified_proposals(project, night, manifest.live, manifest.proposed)
    changes = []
    for rel in sorted(new_bytes):
        backed = _backup(project, rel)
        changes.append(backed.model_copy(update={"new_sha": manifest.proposed[rel]}))
    receipt = Receipt(action="adopt", night_id=chosen, when=utc_now().isoformat(), files=changes)
    done = _transact(project, receipt, dict(new_bytes), after_replace)
    logger.info("adopted night %s: %s", chosen, ", ".join(new_bytes))
    return done


def _verified_proposals(
    project: SleepProject, night: Path, live: dict[str, str | None], proposed: dict[str, str]
) -> dict[str, bytes]:
    for rel, pinned in live.items():
        path = project.path / rel
        current = sha256_of(path.read_bytes()) if path.exists() else None
        if current != pinned:
            raise StageMismatch(
                f"{rel} changed since night {night.name} was staged (sha256 {str(pinned)[:12]} "
                f"when staged, {str(current)[:12]} now); nothing was adopted. Run "
                "`skillopt-dsl sleep run` again to stage against the current file."
            )
    found: dict[str, bytes] = {}
    for rel, pinned_new in proposed.items():
        data = (night / "proposed" / rel).read_bytes()
        if sha256_of(data) != pinned_new:
            raise StageMismatch(
                f"the staged proposal {night / 'proposed' / rel} was modified after staging "
                "(its sha256 no longer matches the manifest); nothing was adopted."
            )
        found[rel] = data
    return found


# -- rollback ----------------------------------------------------------------------------------


def last_adoption(project: SleepProject) -> Receipt | None:
    """The newest adoption not yet rolled back."""
    undone = {r.undoes for r in receipts(project) if r.action == "rollback"}
    adopted = [r for r in receipts(project) if r.action == "adopt" and r.name not in undone]
    return adopted[-1] if adopted else None


def rollback(project: SleepProject, *, force: bool = False) -> Receipt:
    """Restore the live files the last adoption replaced, byte for byte.

    Refuses when a file changed since that adoption (the edits would be lost) unless `force`.
    """
    recover(project)
    last = last_adoption(project)
    if last is None:
        raise SleepError(f"nothing to roll back: no adoption in {project.receipts}")
    if not force:
        _check_unchanged(project, last.files)
    old_bytes: dict[str, bytes | None] = {
        c.path: None if c.old_sha is None else _backup_bytes(project, c) for c in last.files
    }
    changes = [
        _backup(project, c.path).model_copy(update={"new_sha": c.old_sha}) for c in last.files
    ]
    receipt = Receipt(
        action="rollback",
        night_id=last.night_id,
        when=utc_now().isoformat(),
        files=changes,
        undoes=last.name,
    )
    done = _transact(project, receipt, old_bytes, None)
    logger.info("rolled back night %s", last.night_id)
    return done


def _check_unchanged(project: SleepProject, files: Sequence[FileChange]) -> None:
    for change in files:
        path = project.path / change.path
        current = sha256_of(path.read_bytes()) if path.exists() else None
        if current != change.new_sha:
            raise StageMismatch(
                f"{change.path} changed since it was adopted; a rollback would lose those "
                "edits. Commit or copy them, then run `sleep rollback --force`."
            )


def night_status(project: SleepProject) -> list[dict[str, object]]:
    """One line of figures per staged night (for `sleep status`)."""
    adopted = {r.night_id for r in receipts(project) if r.action == "adopt"}
    rows: list[dict[str, object]] = []
    for night in project.nights():
        report = read_report(night)
        rows.append(
            {
                "night": night.name,
                "sessions": report.harvest.get("sessions", 0),
                "tasks": report.tasks.get("total", 0),
                "seed_val": report.seed_val,
                "candidate_val": report.candidate_val,
                "proposal": report.accepted,
                "adopted": night.name in adopted,
                "blocked": report.blocked,
            }
        )
    return rows


def journal_pending(project: SleepProject) -> bool:
    """True when an adopt or rollback was interrupted (it is undone at the next command)."""
    return project.journal_path.exists()
