"""Where a sweep's Optuna study lives: storages, the creation lock, plot folders.

`open_storage` is the one place sweep storages are built: None (in memory), an RDB URL
("sqlite:///sweep.db", "postgresql://...", "mysql://...") with a heartbeat and Optuna's retry
callback, or a JournalFile path ending in .log or .journal. Workers started at the same moment
create a storage's tables, a study and its first trial once, under `creation_lock` (a
PostgreSQL advisory lock, a lock file beside an SQLite database); on SQLite, a queued trial is
claimed by one worker only (`studies.sqlite`).
"""

from __future__ import annotations

import contextlib
import logging
import time
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from skillopt_dsl.errors import UserInputError

if TYPE_CHECKING:
    import optuna

__all__ = [
    "GRACE_PERIOD_S",
    "HEARTBEAT_INTERVAL_S",
    "POSTGRES_LOCK_KEY",
    "creation_lock",
    "open_storage",
    "open_study",
    "optuna_module",
    "plot_folder",
    "retry_callback",
]

logger = logging.getLogger(__name__)

HEARTBEAT_INTERVAL_S = 20
"""Seconds between a running trial's heartbeats in an RDB storage."""

GRACE_PERIOD_S = 120
"""A RUNNING trial whose last heartbeat is older than this is failed and re-run."""


def optuna_module() -> Any:
    """The `optuna` module, or a UserInputError saying how to install it."""
    try:
        import optuna
    except ImportError as exc:  # pragma: no cover - optuna is a declared dependency
        raise UserInputError("OptunaLR needs optuna: pip install 'optuna>=4'") from exc
    return optuna


def open_storage(
    storage: str | None,
    *,
    heartbeat_interval: int = HEARTBEAT_INTERVAL_S,
    grace_period: int = GRACE_PERIOD_S,
) -> optuna.storages.BaseStorage | None:
    """An Optuna storage for `storage`: None (in memory), an RDB URL, or a JournalFile path.

    The one place sweep storages are built. RDB storages record a heartbeat every
    `heartbeat_interval` seconds for each running trial; a trial silent for `grace_period`
    seconds is failed and re-enqueued with the same settings (`RetryFailedTrialCallback`).
    JournalFile storages have no heartbeat in Optuna (`claims.fail_orphaned_trials` fails
    their orphans).
    """
    if storage is None:
        return None
    optuna = optuna_module()
    if storage.endswith((".log", ".journal")) and "://" not in storage:
        from optuna.storages.journal import JournalFileBackend

        Path(storage).parent.mkdir(parents=True, exist_ok=True)
        return optuna.storages.JournalStorage(JournalFileBackend(storage))  # type: ignore[no-any-return]
    heartbeat = {
        "heartbeat_interval": heartbeat_interval,
        "grace_period": grace_period,
        _retry_kwarg(): retry_callback(),
    }
    with warnings.catch_warnings():  # Optuna marks the heartbeat arguments experimental
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        if storage.startswith("sqlite:"):
            return _sqlite_storage(storage, heartbeat)
        if storage.startswith(("postgresql", "mysql")):
            with creation_lock(storage):  # workers starting together race to create the tables
                return optuna.storages.RDBStorage(storage, **heartbeat)  # type: ignore[no-any-return]
    raise UserInputError(
        f"unknown storage {storage!r}; use 'sqlite:///sweep.db', 'postgresql://user@host/db', "
        "or a JournalFile path ending in .log or .journal"
    )


def retry_callback() -> Any:
    """Optuna's callback that re-enqueues a failed trial's settings (renamed in Optuna 4.9;
    marked experimental there, a warning this library does not pass on to its users)."""
    optuna = optuna_module()
    retry = getattr(optuna.storages, "RetryHeartbeatStaleTrialCallback", None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return (retry or optuna.storages.RetryFailedTrialCallback)()


def _retry_kwarg() -> str:
    import optuna.storages

    renamed = hasattr(optuna.storages, "RetryHeartbeatStaleTrialCallback")
    return "heartbeat_stale_trial_callback" if renamed else "failed_trial_callback"


def _sqlite_storage(
    url: str, heartbeat: Mapping[str, object], attempts: int = 5
) -> optuna.storages.BaseStorage:
    """An SQLite RDBStorage whose workers claim a queued trial one at a time
    (`studies.sqlite.SqliteStorage`). Workers starting together would race to create the
    schema, so creation holds a lock file next to the database (POSIX), and is retried on that
    race."""
    import sqlalchemy.exc

    from skillopt_dsl.studies.sqlite import SqliteStorage

    path = Path(url.removeprefix("sqlite:///")) if url.startswith("sqlite:///") else None
    for attempt in range(attempts):
        try:
            with _schema_lock(path):
                return SqliteStorage(
                    url, db=path, engine_kwargs={"connect_args": {"timeout": 60}}, **heartbeat
                )
        except (sqlalchemy.exc.OperationalError, sqlalchemy.exc.IntegrityError) as exc:
            racing = "already exists" in str(exc) or "UNIQUE constraint" in str(exc)
            if not racing or attempt == attempts - 1:
                raise
            logger.info("another worker is creating the tables of %s; retrying", url)
            time.sleep(0.2 * (attempt + 1))
    raise AssertionError("unreachable")


def open_study(
    storage: str | None,
    study_name: str,
    *,
    sampler: optuna.samplers.BaseSampler,
    pruner: optuna.pruners.BasePruner,
    first_trial: Mapping[str, object] | None = None,
    heartbeat_interval: int = HEARTBEAT_INTERVAL_S,
    grace_period: int = GRACE_PERIOD_S,
) -> optuna.study.Study:
    """Create the study `study_name` in `storage` (maximising), or load it when it exists,
    with `first_trial`'s settings enqueued when it has no trial yet. Workers started at the
    same moment create the storage's tables, the study and its first trial once
    (`creation_lock`); the others load them."""
    optuna = optuna_module()
    opened = open_storage(storage, heartbeat_interval=heartbeat_interval, grace_period=grace_period)
    with creation_lock(storage):
        study = optuna.create_study(
            storage=opened,
            sampler=sampler,
            pruner=pruner,
            study_name=study_name,
            direction="maximize",
            load_if_exists=True,
        )
        if first_trial and not study.get_trials(deepcopy=False):
            study.enqueue_trial(dict(first_trial), skip_if_exists=True)
    return study


POSTGRES_LOCK_KEY = 0x736B696C6C6F7074
"""The PostgreSQL advisory lock ("skillopt" in ASCII, a bigint) under which sweep workers
create a storage's tables and a study (`creation_lock`)."""


@contextlib.contextmanager
def creation_lock(storage: str | None) -> Iterator[None]:
    """Hold the lock under which the workers of one storage create its tables and studies, so
    that workers started at the same moment create them once: a PostgreSQL advisory lock (on
    a connection of its own, released when the block ends or the process dies), a lock file
    next to an SQLite database, nothing for other storages (MySQL, JournalFile, in memory)."""
    if storage is not None and storage.startswith("postgresql"):
        with _postgres_lock(storage):
            yield
    elif storage is not None and storage.startswith("sqlite:///"):
        with _schema_lock(Path(storage.removeprefix("sqlite:///"))):
            yield
    else:
        yield


@contextlib.contextmanager
def _postgres_lock(url: str) -> Iterator[None]:
    import sqlalchemy
    from sqlalchemy.pool import NullPool

    engine = sqlalchemy.create_engine(url, poolclass=NullPool, isolation_level="AUTOCOMMIT")
    key = {"key": POSTGRES_LOCK_KEY}
    try:
        with engine.connect() as connection:
            connection.execute(sqlalchemy.text("SELECT pg_advisory_lock(:key)"), key)
            try:
                yield
            finally:
                connection.execute(sqlalchemy.text("SELECT pg_advisory_unlock(:key)"), key)
    finally:
        engine.dispose()


@contextlib.contextmanager
def _schema_lock(db: Path | None) -> Iterator[None]:
    try:
        import fcntl
    except ImportError:  # not POSIX: the retry above handles the race
        yield
        return
    if db is None:
        yield
        return
    db.parent.mkdir(parents=True, exist_ok=True)
    with open(db.with_name(db.name + ".lock"), "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def plot_folder(storage: str | None, study_name: str, run_path: Path | None) -> Path | None:
    """Where a sweep's plots go, next to the study: `<study name>-plots/` beside the storage
    file, else `<run_path>/sweep-plots/` for an in-memory study; None without either."""
    if storage is not None and storage.startswith("sqlite:///"):
        return Path(storage.removeprefix("sqlite:///")).parent / f"{study_name}-plots"
    if storage is not None and "://" not in storage:
        return Path(storage).parent / f"{study_name}-plots"
    if run_path is not None:
        return run_path / "sweep-plots"
    return None
