"""Adopt and rollback: the only code in Sleep that writes a live file.

`adopt` refuses when a live file changed since the night was staged (or a staged proposal no
longer matches its pinned hash), backs every live file up under its own sha256, and replaces the
files as one transaction: new bytes go to temporary files first, a write-ahead journal records
every file's old and new hash, then the files are swapped with `os.replace`. If anything fails
(or the process is killed) before the receipt is written, `recover` — run at the start of every
Sleep command — puts every file back to its old bytes: the project ends with all old files or all
new ones, never a mix. `rollback` restores the last adopted night's backups the same way.
The checks, backups and transaction are `skillopt_dsl.staged_change`, shared with a skill
folder's adopt; this module keeps Sleep's receipts and its wording.
"""

from __future__ import annotations

import logging
from typing import Literal

from pydantic import BaseModel, ConfigDict

from skillopt_dsl.file_transaction import (
    AfterReplace,
    FileChange,
    FilePlace,
)
from skillopt_dsl.file_transaction import recover as recover_files
from skillopt_dsl.sleep.advice import nothing_to_adopt
from skillopt_dsl.sleep.errors import SleepError, StageMismatch
from skillopt_dsl.sleep.harvest import utc_now
from skillopt_dsl.sleep.project import SleepProject
from skillopt_dsl.sleep.stage import read_manifest, read_report
from skillopt_dsl.staged_change import (
    Refusal,
    adopted_files,
    check_adopted,
    rollback_plan,
    swap_with_receipt,
    verified_proposals,
)

__all__ = ["FileChange", "Receipt", "adopt", "adoptable_night", "recover", "rollback"]

logger = logging.getLogger(__name__)


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


def _place(project: SleepProject) -> FilePlace:
    """Where Sleep's transactions keep the live files, the backups and the journal."""
    return FilePlace(root=project.path, backups=project.backups, journal=project.journal_path)


# -- recovery ----------------------------------------------------------------------------------


def recover(project: SleepProject) -> str | None:
    """Finish an interrupted adopt or rollback by restoring every file's old bytes.

    Returns a message saying what was recovered, or None when nothing was pending.
    """
    text = recover_files(_place(project))
    if text is None:
        return None
    journal = Receipt.model_validate_json(text)
    message = (
        f"an interrupted {journal.action} of night {journal.night_id} was undone: every file "
        f"is back to its old bytes; run `skillopt-dsl sleep {journal.action}` again"
    )
    logger.warning(message)
    return message


# -- the transaction ---------------------------------------------------------------------------


def _transact(
    project: SleepProject,
    receipt: Receipt,
    new_bytes: dict[str, bytes | None],
    after_replace: AfterReplace | None,
) -> Receipt:
    project.receipts.mkdir(parents=True, exist_ok=True)
    record = receipt.model_dump_json(indent=2)
    target = project.receipts / receipt.name
    swap_with_receipt(_place(project), target, record, receipt.files, new_bytes, after_replace)
    return receipt


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
    new_bytes = verified_proposals(
        project.path, night, (manifest.live, manifest.proposed), _refusal(night.name)
    )
    changes = adopted_files(_place(project), new_bytes)
    receipt = Receipt(action="adopt", night_id=chosen, when=utc_now().isoformat(), files=changes)
    done = _transact(project, receipt, dict(new_bytes), after_replace)
    logger.info("adopted night %s: %s", chosen, ", ".join(new_bytes))
    return done


def _refusal(night_id: str) -> Refusal:
    return Refusal(
        error=StageMismatch,
        since=f"night {night_id} was staged",
        changed_advice="Run `skillopt-dsl sleep run` again to stage against the current file.",
        staged_advice="Run `skillopt-dsl sleep run` again to stage a new proposal.",
        adopted_advice="Commit or copy them, then run `sleep rollback --force`.",
    )


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
        check_adopted(project.path, last.files, _refusal(last.night_id))
    changes, old_bytes = rollback_plan(_place(project), last.files)
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
