"""Replace a set of live files as one transaction: all new bytes or all old ones, never a mix.

`transact` writes every new file's bytes to a temporary file beside its live file, then a
write-ahead journal recording each file's old and new sha256 and its backup's name, then swaps
each temporary file in with `os.replace`, calls the caller's `finish` (which writes its receipt)
and removes the journal last. If anything fails before that, or the process is killed,
`recover` — which every command that reads or writes the files runs first — puts each file back
to its old bytes from the backups (`backup` keeps them, one file per sha256, before anything is
written).

Every file is written where a link points (a symlinked file keeps its link; its target changes)
and keeps its permission bits (each `FileChange` records the bits before, so a rollback or a
recovery puts them back too). `atomic_write` is the package's one atomic writer; the staging and
adopting built on `transact` is `skillopt_dsl.staged_change`, which both adopts use: Sleep's
(`skillopt_dsl.sleep.adopt`) and a skill folder's (`skillopt_dsl.skill_folder.adopt`).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import stat
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from skillopt_dsl.errors import UserInputError

__all__ = [
    "AfterReplace",
    "BackupModified",
    "FileChange",
    "FilePlace",
    "atomic_write",
    "atomic_write_text",
    "backup",
    "backup_bytes",
    "file_mode",
    "recover",
    "sha256_of",
    "transact",
    "write_fresh",
    "written_path",
]

TMP_SUFFIX = ".skillopt-new"
"""The suffix of a new file's temporary copy beside its live file while a transaction runs."""

AfterReplace = Callable[[str], None]
"""Called with a file's relative path after it is swapped in (a fault-injection hook for tests)."""


class BackupModified(UserInputError):
    """A backup no longer matches the sha256 it was stored under; nothing is restored from it."""


def sha256_of(data: bytes | None) -> str | None:
    """The hex sha256 of `data`; None for an absent file."""
    return None if data is None else hashlib.sha256(data).hexdigest()


def written_path(path: Path) -> Path:
    """The file that writing `path` changes: a symlink's target (links followed to the end),
    else `path` itself."""
    return Path(os.path.realpath(path))


def file_mode(path: Path) -> int | None:
    """The permission bits of the file at `path` (a link is followed); None when absent."""
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        return None


def write_fresh(path: Path, data: bytes, mode: int | None) -> None:
    """Write `data` to a new file `path` (replacing any leftover), fsynced, with permission
    bits `mode` (None: the process umask's, as `open` gives a new file)."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    if mode is not None:
        os.chmod(path, mode)


def atomic_write(path: Path, data: bytes) -> Path:
    """Write `data` to `path` all or nothing (a fsynced temporary file beside it, then
    `os.replace`); the one atomic writer of the package. Returns the file written.

    A symlink keeps its link: the bytes go to the file it points to, written beside that file.
    An existing file keeps its permission bits; a new one gets the umask's (as `open` would).
    """
    target = written_path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    mode = file_mode(target)
    tmp = target.with_name(f".{target.name}.{secrets.token_hex(6)}.tmp")
    try:
        write_fresh(tmp, data, mode)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return target


def atomic_write_text(path: Path, text: str) -> Path:
    """`atomic_write` of `text` as UTF-8, newlines exactly as given."""
    return atomic_write(path, text.encode("utf-8"))


@dataclass(frozen=True)
class FilePlace:
    """Where one transaction's files live: `root` (the live files' paths are relative to it),
    `backups` (old bytes, one file per sha256) and `journal` (the write-ahead journal)."""

    root: Path
    backups: Path
    journal: Path


class FileChange(BaseModel):
    """One live file in a transaction: its hash before and after, its backup's name, and its
    permission bits before (`old_mode`) and after (`new_mode`; None: kept as they are). Records
    written before modes were kept load with both None."""

    model_config = ConfigDict(extra="forbid")

    path: str
    old_sha: str | None
    new_sha: str | None
    backup: str | None
    old_mode: int | None = None
    new_mode: int | None = None


class _Journal(BaseModel):
    """What `recover` reads of a journal; the caller's own record may carry more."""

    model_config = ConfigDict(extra="ignore")

    files: list[FileChange]


def backup(place: FilePlace, rel: str) -> FileChange:
    """Keep live file `rel`'s bytes under its sha256 in `place.backups` (before anything is
    written); an absent file is recorded as absent."""
    live = place.root / rel
    if not live.exists():
        return FileChange(path=rel, old_sha=None, new_sha=None, backup=None)
    data = live.read_bytes()
    sha = hashlib.sha256(data).hexdigest()
    name = f"{sha}.bak"
    target = place.backups / name
    if not target.exists() or sha256_of(target.read_bytes()) != sha:
        atomic_write(target, data)
    return FileChange(path=rel, old_sha=sha, new_sha=None, backup=name, old_mode=file_mode(live))


def backup_bytes(place: FilePlace, change: FileChange) -> bytes:
    """The backed-up old bytes of `change`, checked against their sha256."""
    if change.backup is None:
        raise BackupModified(f"{change.path} has no backup (it did not exist before)")
    data = (place.backups / change.backup).read_bytes()
    if sha256_of(data) != change.old_sha:
        raise BackupModified(
            f"backup {place.backups / change.backup} does not match its hash; it was "
            f"modified. Restore {change.path} by hand from version control."
        )
    return data


def recover(place: FilePlace) -> str | None:
    """Undo an interrupted transaction: every file in the journal gets its old bytes back (an
    absent file is removed again), leftover temporary files are removed, and so is the journal.

    Returns the journal's text (the caller's record, for its message), or None when nothing was
    pending.
    """
    if not place.journal.exists():
        return None
    text = place.journal.read_text(encoding="utf-8")
    for change in _Journal.model_validate_json(text).files:
        _restore_old(place, change)
    os.unlink(place.journal)
    return text


def _restore_old(place: FilePlace, change: FileChange) -> None:
    live = place.root / change.path
    target = written_path(live)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(target.with_name(target.name + TMP_SUFFIX))
    if change.old_sha is None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(live)
        return
    current = sha256_of(live.read_bytes()) if live.exists() else None
    if current != change.old_sha:
        atomic_write(live, backup_bytes(place, change))
    if change.old_mode is not None and file_mode(target) != change.old_mode:
        os.chmod(target, change.old_mode)


def transact(
    place: FilePlace,
    journal: str,
    files: Sequence[FileChange],
    new_bytes: Mapping[str, bytes | None],
    finish: Callable[[], None],
    after_replace: AfterReplace | None = None,
) -> None:
    """Swap in `new_bytes` (relative path -> bytes, None: remove the file) for `files` (each
    already backed up by `backup`) as one transaction; `journal` is the caller's record (JSON
    with a `files` list), written ahead of the first swap; `finish` runs after the last swap,
    before the journal is removed. On any failure the old bytes are put back and it re-raises.
    """
    for change in files:
        data = new_bytes[change.path]
        if data is not None:
            target = written_path(place.root / change.path)
            mode = change.new_mode if change.new_mode is not None else file_mode(target)
            write_fresh(target.with_name(target.name + TMP_SUFFIX), data, mode)
    atomic_write(place.journal, journal.encode("utf-8"))
    try:
        for change in files:
            live = place.root / change.path
            if new_bytes[change.path] is None:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(live)
            else:
                target = written_path(live)
                os.replace(target.with_name(target.name + TMP_SUFFIX), target)
            if after_replace is not None:
                after_replace(change.path)
        finish()
    except BaseException:
        recover(place)
        raise
    os.unlink(place.journal)
