"""Stage a change to live files, then adopt it or roll it back: the one implementation Sleep's
nights (`skillopt_dsl.sleep.stage`, `skillopt_dsl.sleep.adopt`) and skill folders
(`skillopt_dsl.skill_folder.stage`, `skillopt_dsl.skill_folder.adopt`) share.

Staging writes each proposed file's new bytes under `<stage>/proposed/<path>` and a unified diff
against the live bytes as read (`stage_proposals`); the caller's manifest pins the sha256 of
every live file the run read and of every proposal (`pinned_hashes`). Adopting refuses when a
live file or a staged proposal no longer matches its pin (`verified_proposals`), backs every
file it replaces up and swaps the files in as one transaction (`adopted_files`, then
`skillopt_dsl.file_transaction.transact`). Rolling back refuses when a file changed since it was
adopted (`check_adopted`) and puts the backed-up bytes back (`rollback_plan`). The callers keep
only their own records (receipts, manifests) and their own words in the refusals (`Refusal`).
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from skillopt_dsl.errors import UserInputError
from skillopt_dsl.file_transaction import (
    AfterReplace,
    FileChange,
    FilePlace,
    atomic_write,
    backup,
    backup_bytes,
    sha256_of,
    transact,
)

__all__ = [
    "PROPOSED_DIR",
    "Refusal",
    "adopted_files",
    "check_adopted",
    "pinned_hashes",
    "rollback_plan",
    "stage_proposals",
    "swap_with_receipt",
    "unified_diff",
    "verified_proposals",
]

PROPOSED_DIR = "proposed"
"""The folder of a stage that holds each proposed file's new bytes."""
_NO_NEWLINE = "\\ No newline at end of file\n"


@dataclass(frozen=True)
class Refusal:
    """How a caller words a refusal: the error raised (a `UserInputError`), what the live files
    were pinned by (`"night N was staged"`, `"run R read it"`) and what to do instead when a
    live file changed (`changed_advice`), a staged file was modified (`staged_advice`) or a file
    changed since it was adopted (`adopted_advice`)."""

    error: type[UserInputError]
    since: str
    changed_advice: str
    staged_advice: str
    adopted_advice: str


def pinned_hashes(live: Mapping[str, bytes | None]) -> dict[str, str | None]:
    """The sha256 of each live file as read (None: it did not exist), sorted by path."""
    return {rel: sha256_of(data) for rel, data in sorted(live.items())}


def unified_diff(rel: str, old: bytes | None, new: bytes) -> str:
    """One file's unified diff (`a/<rel>` -> `b/<rel>`), with git's marker for a last line that
    has no newline, so `patch -p1` / `git apply` reproduce the new bytes exactly."""
    before = (old or b"").decode("utf-8").splitlines(keepends=True)
    after = new.decode("utf-8").splitlines(keepends=True)
    lines = difflib.unified_diff(before, after, f"a/{rel}", f"b/{rel}")
    return "".join(line if line.endswith("\n") else line + "\n" + _NO_NEWLINE for line in lines)


def stage_proposals(
    stage: Path, proposals: Mapping[str, bytes], live: Mapping[str, bytes | None]
) -> str:
    """Write each proposal's bytes to `<stage>/proposed/<path>` (atomically) and return the
    unified diff of all of them against `live` (the bytes as read), in path order."""
    patches = []
    for rel, data in sorted(proposals.items()):
        atomic_write(stage / PROPOSED_DIR / rel, data)
        patches.append(unified_diff(rel, live.get(rel), data))
    return "".join(patches)


def verified_proposals(
    root: Path,
    stage: Path,
    pins: tuple[Mapping[str, str | None], Mapping[str, str]],
    refusal: Refusal,
) -> dict[str, bytes]:
    """The staged bytes (relative path -> bytes), after checking that every live file under
    `root` still has its pinned sha256 (`pins[0]`, None: absent) and every staged proposal its
    own (`pins[1]`); `refusal.error` names the first that does not, and nothing is written."""
    live, proposed = pins
    for rel, pinned in live.items():
        path = root / rel
        current = sha256_of(path.read_bytes()) if path.is_file() else None
        if current != pinned:
            raise refusal.error(
                f"{path} changed since {refusal.since} (sha256 {str(pinned)[:12]} then, "
                f"{str(current)[:12]} now); nothing was adopted. {refusal.changed_advice}"
            )
    found: dict[str, bytes] = {}
    for rel, pinned_new in proposed.items():
        staged = stage / PROPOSED_DIR / rel
        data = staged.read_bytes()
        if sha256_of(data) != pinned_new:
            raise refusal.error(
                f"the staged file {staged} was modified after staging (its sha256 no longer "
                f"matches the manifest); nothing was adopted. {refusal.staged_advice}"
            )
        found[rel] = data
    return found


def adopted_files(place: FilePlace, new_bytes: Mapping[str, bytes]) -> list[FileChange]:
    """Back up every live file `new_bytes` replaces (in path order) and pair each with its new
    hash: the `files` of an adopt's transaction."""
    return [
        backup(place, rel).model_copy(update={"new_sha": sha256_of(new_bytes[rel])})
        for rel in sorted(new_bytes)
    ]


def check_adopted(root: Path, files: Sequence[FileChange], refusal: Refusal) -> None:
    """Raise `refusal.error` when a file an adoption wrote no longer holds what it wrote (a
    rollback would lose those edits)."""
    for change in files:
        path = root / change.path
        current = sha256_of(path.read_bytes()) if path.is_file() else None
        if current != change.new_sha:
            raise refusal.error(
                f"{path} changed since it was adopted; a rollback would lose those edits. "
                f"{refusal.adopted_advice}"
            )


def rollback_plan(
    place: FilePlace, adopted: Sequence[FileChange]
) -> tuple[list[FileChange], dict[str, bytes | None]]:
    """What rolls `adopted` back: the transaction's `files` (each live file backed up again,
    its new hash and mode the old ones) and the bytes to write (None: remove a file the
    adoption created), read from the backups and checked against their hashes."""
    old_bytes: dict[str, bytes | None] = {
        c.path: None if c.old_sha is None else backup_bytes(place, c) for c in adopted
    }
    files = [
        backup(place, c.path).model_copy(update={"new_sha": c.old_sha, "new_mode": c.old_mode})
        for c in adopted
    ]
    return files, old_bytes


def swap_with_receipt(
    place: FilePlace,
    receipt: Path,
    record: str,
    files: Sequence[FileChange],
    new_bytes: Mapping[str, bytes | None],
    after_replace: AfterReplace | None,
) -> None:
    """Swap `new_bytes` in for `files` as one transaction (`file_transaction.transact`, with
    `record` as its journal) and write `record` to `receipt` once the last file is in: how an
    adoption and a rollback, Sleep's and a skill folder's alike, end."""

    def write_receipt() -> None:
        atomic_write(receipt, record.encode("utf-8"))

    transact(place, record, files, new_bytes, write_receipt, after_replace)
