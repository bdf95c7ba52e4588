"""An SQLite study's storage: Optuna's `RDBStorage`, with the claim of a queued trial made
atomic between the worker processes that share the database.

A worker starts a queued (WAITING) trial by reading its state and writing RUNNING
(`RDBStorage.set_trial_state_values`). PostgreSQL and MySQL lock the row between the two
(`SELECT ... FOR UPDATE`); SQLite has no row lock, and Python's driver reads outside a
transaction, so two workers could both read WAITING and both claim the trial: both ran it, and
the second to finish failed with "Cannot tell a COMPLETE trial". Here a claim holds a lock
file beside the database (`<db>.claim.lock`, POSIX `flock`), so one worker claims the trial
and the others see it RUNNING and take the next one.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from optuna.storages import RDBStorage
from optuna.trial import TrialState

__all__ = ["SqliteStorage", "claim_lock_path"]


def claim_lock_path(db: Path) -> Path:
    """The lock file a claim holds for the database `db`."""
    return db.with_name(db.name + ".claim.lock")


class SqliteStorage(RDBStorage):
    """`RDBStorage` on an SQLite file whose claims of queued trials hold `claim_lock_path(db)`
    (`db`: the database file; None for an in-memory database, which one process owns)."""

    def __init__(self, url: str, *, db: Path | None, **kwargs: Any) -> None:
        super().__init__(url, **kwargs)
        self._claim_lock = None if db is None else claim_lock_path(db)

    def set_trial_state_values(
        self, trial_id: int, state: TrialState, values: Sequence[float] | None = None
    ) -> bool:
        """As `RDBStorage`'s; a claim (`state` RUNNING) reads and writes under the lock file,
        so it returns True in one process only."""
        if state != TrialState.RUNNING or self._claim_lock is None:
            return super().set_trial_state_values(trial_id, state, values)
        with _locked(self._claim_lock):
            return super().set_trial_state_values(trial_id, state, values)


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Hold an exclusive `flock` on `path` (nothing where `fcntl` is missing: not POSIX)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - SQLite sweeps run on one POSIX machine
        yield
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
