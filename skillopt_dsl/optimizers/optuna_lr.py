"""OptunaLR: an Optuna sweep over an inner optimizer's hyperparameters (the learning rate first).

Each trial copies the inner optimizer with the sampled settings (`dataclasses.replace`) and
runs it from the seed skill in a trial run of its own (`RunView.trial_driver`): its own run
directory (`<run_dir>/trials/<number>` when the outer run has one), the same models, ledger,
response cache and evaluation cache, so the budget is global and no skill is scored twice.

Trials never see the gate's validation examples. A seeded selection split
(`selection_fraction` of the trainset, `RunView.selection_split`) is carved off the training
set: each trial learns on the rest, and its own gate decides on the selection split. The trial's
value is its gated selection score. Only the sweep's single best skill goes to the real gate, on
validation, against the seed, declaring the learning rates of the trial's accepted steps (the
door composes their budgets and measures the change itself). Intermediate values are reported
at the end of every epoch (the inner optimizer's `epoch`, a round for Beam) so a pruner can stop
bad settings early:

- `MedianPruner` (or any pruner): the mean selection score, at step = epoch;
- `WilcoxonPruner`: the per-example selection scores, at step = epoch * len(select) + index,
  as Optuna's documentation asks (one step per instance), checked after each report.

The first trial is the inner optimizer's own configuration (enqueued). Each trial's skill text,
run directory and cost are stored as JSON user attributes.

`storage` ("sqlite:///sweep.db", "postgresql://...", or a JournalFile path ending in .log or
.journal) makes the study resumable (`load_if_exists=True`) and shareable by several worker
processes (see `skillopt_dsl.sweeps.run_sweep_worker`). A sweep ends with `n_trials` finished
(COMPLETE or PRUNED) trials in the study, counting earlier runs and other workers: a resumed
sweep runs only the remainder. A trial left RUNNING by a killed worker is failed and re-run with
the same settings: RDB storages (SQLite, PostgreSQL, MySQL) record a heartbeat and fail trials
whose heartbeat stopped (`RetryFailedTrialCallback` re-enqueues them); on every storage a
resumed run also fails the trials its own run directory left RUNNING. Workers started at the
same moment create the storage's tables, the study and its first trial once, under a lock
(`creation_lock`: a PostgreSQL advisory lock, a lock file beside an SQLite database).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import shutil
import time
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from skillopt_dsl.driver import CompileContext, LearningRateBound, RunView, SelectionSplit
from skillopt_dsl.errors import BudgetExceeded, UserInputError
from skillopt_dsl.optimizers.base import Optimizer, StudyPlots
from skillopt_dsl.optimizers.gradient_text import GradientText
from skillopt_dsl.runs import RunDirectory
from skillopt_dsl.skill import Skill

if TYPE_CHECKING:
    import optuna

__all__ = [
    "OptunaLR",
    "SearchSpace",
    "SweepResult",
    "TrialRecord",
    "creation_lock",
    "open_storage",
    "open_study",
    "plot_folder",
]

logger = logging.getLogger(__name__)

HEARTBEAT_INTERVAL_S = 20
"""Seconds between a running trial's heartbeats in an RDB storage."""

GRACE_PERIOD_S = 120
"""A RUNNING trial whose last heartbeat is older than this is failed and re-run."""

FINISHED = ("COMPLETE", "PRUNED")
"""Trial states that count towards `n_trials`."""

FloatRange = tuple[float, float, Literal["log", "linear"]]
IntRange = tuple[int, int, Literal["int"]]
Choices = Sequence[str | int | float | bool | None]
SearchSpace = Mapping[str, FloatRange | IntRange | Choices]
"""`{"lr": (0.02, 0.5, "log"), "batch_size": (4, 16, "int"), "schedule": ["constant", "cosine"]}`."""


def _optuna() -> Any:
    try:
        import optuna
    except ImportError as exc:  # pragma: no cover - optuna is a declared dependency
        raise UserInputError("OptunaLR needs optuna: pip install 'optuna>=4'") from exc
    return optuna


@dataclass(frozen=True)
class TrialRecord:
    """One trial of a sweep: its settings, score, state and cost (JSON-ready via `to_dict`)."""

    number: int
    state: optuna.trial.TrialState
    params: dict[str, Any]
    value: float | None
    skill_hash: str | None
    run_dir: str | None
    calls: int
    cost_usd: float | None
    stop_reason: str | None

    @classmethod
    def from_trial(cls, trial: optuna.trial.FrozenTrial) -> TrialRecord:
        """Read a finished (or running) trial back from the study."""
        attrs = trial.user_attrs
        text = attrs.get("skill_text")
        return cls(
            number=trial.number,
            state=trial.state,
            params=dict(trial.params),
            value=trial.value if trial.values is not None else None,
            skill_hash=Skill(text).hash if isinstance(text, str) else None,
            run_dir=attrs.get("run_dir"),
            calls=int(attrs.get("calls", 0)),
            cost_usd=attrs.get("cost_usd"),
            stop_reason=attrs.get("stop_reason"),
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready copy (the state by name)."""
        return dataclasses.asdict(self) | {"state": self.state.name}


@dataclass(frozen=True)
class SweepResult:
    """Every trial of a study, the best one, and the plots written for it."""

    study_name: str
    storage: str | None
    trials: tuple[TrialRecord, ...]
    best_number: int | None
    plots: tuple[Path, ...] = ()

    @property
    def best(self) -> TrialRecord | None:
        """The best complete trial, or None when no trial completed."""
        return next((t for t in self.trials if t.number == self.best_number), None)

    @classmethod
    def from_study(
        cls, study: optuna.study.Study, storage: str | None, plots: Sequence[Path] = ()
    ) -> SweepResult:
        """Summarise a study (loaded from its storage, or in memory)."""
        trials = tuple(TrialRecord.from_trial(t) for t in study.get_trials(deepcopy=False))
        complete = [t for t in trials if t.state.name == "COMPLETE"]
        best = study.best_trial.number if complete else None
        return cls(study.study_name, storage, trials, best, tuple(plots))

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready copy."""
        return {
            "study_name": self.study_name,
            "storage": self.storage,
            "best_number": self.best_number,
            "trials": [t.to_dict() for t in self.trials],
            "plots": [str(p) for p in self.plots],
        }


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
    JournalFile storages have no heartbeat in Optuna (see `OptunaLR` for how their orphans
    are failed).
    """
    if storage is None:
        return None
    optuna = _optuna()
    if storage.endswith((".log", ".journal")) and "://" not in storage:
        from optuna.storages.journal import JournalFileBackend

        Path(storage).parent.mkdir(parents=True, exist_ok=True)
        return optuna.storages.JournalStorage(JournalFileBackend(storage))  # type: ignore[no-any-return]
    heartbeat = {
        "heartbeat_interval": heartbeat_interval,
        "grace_period": grace_period,
        _retry_kwarg(): _retry_callback(),
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


def _retry_callback() -> Any:
    """Optuna's callback that re-enqueues a failed trial's settings (renamed in Optuna 4.9;
    marked experimental there, a warning this library does not pass on to its users)."""
    optuna = _optuna()
    retry = getattr(optuna.storages, "RetryHeartbeatStaleTrialCallback", None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return (retry or optuna.storages.RetryFailedTrialCallback)()


def _retry_kwarg() -> str:
    import optuna.storages

    renamed = hasattr(optuna.storages, "RetryHeartbeatStaleTrialCallback")
    return "heartbeat_stale_trial_callback" if renamed else "failed_trial_callback"


def _sqlite_storage(
    url: str, heartbeat: Mapping[str, Any], attempts: int = 5
) -> optuna.storages.BaseStorage:
    """An SQLite RDBStorage. Workers starting together would race to create the schema, so
    creation holds a lock file next to the database (POSIX), and is retried on that race."""
    import sqlalchemy.exc

    optuna = _optuna()
    path = Path(url.removeprefix("sqlite:///")) if url.startswith("sqlite:///") else None
    for attempt in range(attempts):
        try:
            with _schema_lock(path):
                return optuna.storages.RDBStorage(  # type: ignore[no-any-return]
                    url, engine_kwargs={"connect_args": {"timeout": 60}}, **heartbeat
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
    first_trial: Mapping[str, Any] | None = None,
    heartbeat_interval: int = HEARTBEAT_INTERVAL_S,
    grace_period: int = GRACE_PERIOD_S,
) -> optuna.study.Study:
    """Create the study `study_name` in `storage` (maximising), or load it when it exists,
    with `first_trial`'s settings enqueued when it has no trial yet. Workers started at the
    same moment create the storage's tables, the study and its first trial once
    (`creation_lock`); the others load them."""
    optuna = _optuna()
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


@dataclass(kw_only=True)
class OptunaLR(Optimizer):
    """Sweep the inner optimizer's hyperparameters with Optuna (see the module docstring).

    Args:
        inner: the optimizer each trial runs (a dataclass: GradientText, Beam, ...).
        search_space: name -> (low, high, "log"|"linear"), (low, high, "int") or a list of choices;
            every name must be a field of `inner`.
        n_trials: finished (COMPLETE or PRUNED) trials the study ends with, counting earlier
            runs and other workers: a resumed sweep runs only the remainder.
        storage: None (in memory), "sqlite:///...", "postgresql://...", or a .log/.journal path.
        study_name: default "skillopt-<module name>".
        sampler: default `TPESampler(seed=seed)`.
        pruner: default none (every trial runs to the end); `MedianPruner()`, `WilcoxonPruner()`.
        seed: the default sampler's seed.
        plots: ask the caller for sweep plots next to the study: `compile` draws them after the
            sweep (`skillopt_dsl.report.write_sweep_plots`) in `plot_folder`; the optimizer
            itself plots nothing.
        selection_fraction: share of the trainset carved off (seeded by the run's seed) for the
            trials' gates; trials learn on the rest. The validation set is for the final gate.
        heartbeat_interval, grace_period: seconds between a running trial's heartbeats, and the
            silence after which any worker fails the trial and re-runs its settings (RDB storages).
    """

    inner: Optimizer = field(default_factory=GradientText)
    search_space: SearchSpace = field(default_factory=lambda: {"lr": (0.02, 0.5, "log")})
    n_trials: int = 20
    storage: str | None = None
    study_name: str | None = None
    sampler: optuna.samplers.BaseSampler | None = None
    pruner: optuna.pruners.BasePruner | None = None
    seed: int = 0
    plots: bool = True
    selection_fraction: float = 0.3
    heartbeat_interval: int = HEARTBEAT_INTERVAL_S
    grace_period: int = GRACE_PERIOD_S
    name: str = "optuna-lr"
    last_study: optuna.study.Study | None = field(
        default=None, init=False, repr=False, compare=False
    )
    """The study of the last `optimize` call (None before one), for the caller's plots."""

    def __post_init__(self) -> None:
        if not dataclasses.is_dataclass(self.inner):
            raise UserInputError(
                "OptunaLR's inner optimizer must be a dataclass (GradientText, Beam)"
            )
        if self.n_trials < 1:
            raise UserInputError(f"n_trials must be >= 1, got {self.n_trials}")
        if not 0 < self.selection_fraction < 1:
            raise UserInputError(
                f"selection_fraction must be in (0, 1), got {self.selection_fraction}"
            )
        names = {f.name for f in dataclasses.fields(self.inner)}
        unknown = sorted(set(self.search_space) - names)
        if unknown:
            raise UserInputError(
                f"search_space names {unknown} are not settings of {type(self.inner).__name__}; "
                f"choose from {sorted(names - {'name', 'proposers'})}"
            )
        for name, spec in self.search_space.items():
            _distribution(name, spec)

    def study_plots(self, context: CompileContext) -> StudyPlots | None:
        """The sweep's study and the folder next to it, for the caller to plot (`plots=True`)."""
        study = self.last_study
        if not self.plots or study is None:  # None: a resumed run whose sweep had already ended
            return None
        folder = plot_folder(self.storage, study.study_name, context.run.path)
        return None if folder is None else StudyPlots(study, folder)

    def planned_decisions(
        self, n_train: int, *, max_calls: int | None = None, validation_size: int | None = None
    ) -> int | None:
        """Only the sweep's best reaches the run's gate (trials gate on a selection split)."""
        return 1

    def config(self) -> dict[str, Any]:
        return {
            "optimizer": self.name,
            "inner": self.inner.config(),
            "search_space": {k: list(v) for k, v in self.search_space.items()},
            "n_trials": self.n_trials,
            "selection_fraction": self.selection_fraction,
            "storage": self.storage,
            "study_name": self.study_name,
            "sampler": type(self.sampler).__name__ if self.sampler else "TPESampler",
            "pruner": type(self.pruner).__name__ if self.pruner else None,
            "seed": self.seed,
        }

    def lr_bound(self) -> LearningRateBound:
        """The door's bound for the sweep's result: the largest `lr` and floor any trial may use
        (a trial's steps each declare their own rate; the door composes them)."""
        inner = self.inner.lr_bound()
        return LearningRateBound(
            max_lr=max(inner.max_lr, _top_of(self.search_space.get("lr"), 0.0)),
            floor_tokens=max(
                inner.floor_tokens, int(_top_of(self.search_space.get("lr_floor_tokens"), 0))
            ),
        )

    # -- the sweep -------------------------------------------------------------------------
    def create_study(self, view: RunView) -> optuna.study.Study:
        """Create (or load, when it exists in `storage`) this sweep's study."""
        optuna = _optuna()
        return open_study(
            self.storage,
            self.study_name or f"skillopt-{view.module.name}",
            sampler=self.sampler or optuna.samplers.TPESampler(seed=self.seed),
            pruner=self.pruner or optuna.pruners.NopPruner(),
            first_trial=self._seed_params(),
            heartbeat_interval=self.heartbeat_interval,
            grace_period=self.grace_period,
        )

    def optimize(self, view: RunView) -> None:
        self.last_study = None
        if view.optimizer_state.get("submitted"):
            return
        study = self.last_study = self.create_study(view)
        owner = _owner(view)
        fail_orphaned_trials(study, owner)
        sweep = _Sweep(self, view, view.selection_split(self.selection_fraction), owner)
        while not sweep.budget_hit and (finished := finished_trials(study)) < self.n_trials:
            if _all_claimed(study, finished, self.n_trials):
                # Every remaining trial is running in another worker: wait for them (a killed
                # worker's trial is failed by its heartbeat and re-queued, then run here).
                fail_orphaned_trials(study, None)
                time.sleep(CLAIM_POLL_S)
                continue
            study.optimize(sweep.objective, n_trials=1, catch=(SurplusTrial,))
        result = self._record(view, study)
        self._submit(view, study, result)
        if sweep.budget_hit:
            raise BudgetExceeded("the budget ran out during the sweep; the best trial was kept")

    def _seed_params(self) -> dict[str, Any]:
        """The inner optimizer's own settings, where the search space can represent them."""
        params: dict[str, Any] = {}
        for name, spec in self.search_space.items():
            value = getattr(self.inner, name)
            if _contains(spec, value):
                params[name] = value
            else:
                logger.warning(
                    "the inner optimizer's %s=%r is outside the search space", name, value
                )
        return params

    def _record(self, view: RunView, study: optuna.study.Study) -> SweepResult:
        result = SweepResult.from_study(study, self.storage)
        view.emit("sweep", **result.to_dict())
        return result

    def _submit(self, view: RunView, study: optuna.study.Study, result: SweepResult) -> None:
        best = result.best
        if best is None:
            logger.warning("no trial of study %r completed; keeping the seed", study.study_name)
            return
        attrs = _attrs(study, best.number)
        candidate = Skill(attrs["skill_text"])
        state = {"submitted": True, "sweep": result.to_dict()}
        lrs = [float(x) for x in attrs.get("step_lrs", [])]
        if candidate.hash == view.incumbent.hash or not lrs:
            view.record_empty_step(
                step=0,
                epoch=0,
                kind="sweep",
                lr=view.bound.max_lr,
                note=f"the best trial ({best.number}) did not change the skill",
            )
            return
        view.submit(candidate, lr=lrs, step=0, epoch=0, kind="sweep", state_after=lambda _v: state)


CLAIM_POLL_S = 0.5
"""Seconds a worker waits between looks at a study whose remaining trials all run elsewhere."""

_CLAIMING = ("COMPLETE", "PRUNED", "RUNNING", "WAITING")


class SurplusTrial(Exception):
    """A trial created after `n_trials` earlier trials were already claimed; it is failed
    unrun, so a study shared by racing workers ends with exactly `n_trials` finished trials."""


def _heartbeat(study: optuna.study.Study) -> bool:
    """Whether the study's storage fails trials whose worker died (RDB storages)."""
    interval = getattr(study._storage, "get_heartbeat_interval", lambda: None)()
    return interval is not None


def _all_claimed(study: optuna.study.Study, finished: int, n_trials: int) -> bool:
    """True when running trials fill every remaining slot and none is queued; only on storages
    with a heartbeat, where a dead worker's trial cannot stay RUNNING forever."""
    if not _heartbeat(study):
        return False
    states = [t.state.name for t in study.get_trials(deepcopy=False)]
    return "WAITING" not in states and finished + states.count("RUNNING") >= n_trials


def _is_surplus(trial: optuna.trial.Trial, n_trials: int) -> bool:
    """True when `n_trials` lower-numbered trials are finished, running or queued (trial
    numbers are assigned atomically by the storage, so racing workers agree on the order)."""
    if not _heartbeat(trial.study):
        return False
    earlier = [
        t
        for t in trial.study.get_trials(deepcopy=False)
        if t.number < trial.number and t.state.name in _CLAIMING
    ]
    return len(earlier) >= n_trials


def finished_trials(study: optuna.study.Study) -> int:
    """How many trials of `study` count towards `n_trials` (COMPLETE or PRUNED)."""
    return sum(1 for t in study.get_trials(deepcopy=False) if t.state.name in FINISHED)


def fail_orphaned_trials(study: optuna.study.Study, owner: str | None) -> list[int]:
    """Fail the RUNNING trials no live process will finish, and re-enqueue their settings.

    Those whose heartbeat stopped (RDB storages, after the grace period), and those `owner`
    (this run directory) left RUNNING when it was killed: a run directory belongs to one
    worker, so its RUNNING trials are orphans as soon as it starts again. Returns their numbers.
    """
    optuna = _optuna()
    from optuna.storages import fail_stale_trials

    before = {t.number for t in study.get_trials(deepcopy=False) if t.state.name == "FAIL"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        fail_stale_trials(study)  # a no-op on storages without a heartbeat
    failed = [
        t.number
        for t in study.get_trials(deepcopy=False)
        if t.state.name == "FAIL" and t.number not in before
    ]
    running = optuna.trial.TrialState.RUNNING
    for trial in study.get_trials(deepcopy=False, states=(running,)):
        if owner is None or trial.user_attrs.get("owner") != owner:
            continue
        # Optuna's storages address trials by their internal id (as fail_stale_trials does).
        storage = study._storage
        storage.set_trial_state_values(trial._trial_id, optuna.trial.TrialState.FAIL)
        _retry_callback()(study, storage.get_trial(trial._trial_id))
        failed.append(trial.number)
    if failed:
        logger.info("failed orphaned trials %s; their settings run again", failed)
    return failed


def _owner(view: RunView) -> str | None:
    """This run's identity in a shared study: its run directory (None without one)."""
    return None if view.run_path is None else str(view.run_path.resolve())


def _top_of(spec: Any, default: float) -> float:
    """The largest value a search-space entry can take (`default` when absent)."""
    if spec is None:
        return default
    if isinstance(spec, tuple) and len(spec) == 3 and spec[2] in ("log", "linear", "int"):
        return float(spec[1])
    return max(float(v) for v in spec if isinstance(v, int | float))


def _attrs(study: optuna.study.Study, number: int) -> dict[str, Any]:
    trial = next(t for t in study.get_trials(deepcopy=False) if t.number == number)
    return dict(trial.user_attrs)


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


class _Sweep:
    """One process's share of a sweep: runs trials as separate trial runs of the outer view."""

    def __init__(
        self, owner: OptunaLR, view: RunView, split: SelectionSplit, run_owner: str | None
    ) -> None:
        self.owner, self.view, self.split, self.run_owner = owner, view, split, run_owner
        self.budget_hit = False

    def objective(self, trial: optuna.trial.Trial) -> float:
        """Run the inner optimizer with the trial's settings; the value is its gated score on
        the selection split. A trial started after `n_trials` others were already claimed (two
        workers starting at once) is failed as surplus before it runs anything."""
        if _is_surplus(trial, self.owner.n_trials):
            raise SurplusTrial(f"trial {trial.number}: {self.owner.n_trials} trials are claimed")
        if self.run_owner is not None:
            trial.set_user_attr("owner", self.run_owner)
        params = {n: _suggest(trial, n, s) for n, s in self.owner.search_space.items()}
        if "until_budget" in {f.name for f in dataclasses.fields(self.owner.inner)}:  # type: ignore[arg-type]
            params["until_budget"] = False  # a trial runs its epochs, not the whole sweep's budget
        inner = dataclasses.replace(self.owner.inner, **params)  # type: ignore[type-var]
        reporter = _Reporter(trial, self.owner.pruner, [e.id for e in self.split.select])
        child = self.view.trial_driver(
            self.split, self._trial_run(trial.number), on_event=reporter.on_event
        )
        reporter.context = child
        _start(child)
        before = self.view.usage()
        stop_reason = "pruned"
        try:
            stop_reason = inner.compile(child.module, child.trainset, child.valset, context=child)
            reporter.finish()
        finally:
            _store(trial, child, before, stop_reason)
        if stop_reason == "budget":
            self.budget_hit = True
            trial.study.stop()
        return child.incumbent_report.mean

    def _trial_run(self, number: int) -> RunDirectory:
        root = self.view.run_path
        if root is None:
            return RunDirectory(None)
        folder = root / "trials" / f"{number:04d}"
        if folder.exists():
            logger.info("replacing %s, left by an interrupted run of the same sweep", folder)
            shutil.rmtree(folder)
        return RunDirectory(folder)


def _start(child: CompileContext) -> None:
    """What compile() does before an optimizer runs: score the seed, save version 1."""
    seed = child.module.seed_skill
    child.seed_report = child.evaluate(seed, child.valset, label="selection")
    child.run.save_version(1, seed)
    child.emit("seed", skill_hash=seed.hash, val_score=child.seed_report.mean)


def _store(trial: optuna.trial.Trial, child: CompileContext, before: Any, stop_reason: str) -> None:
    after = child.ledger.snapshot()
    accepted = [h for h in child.history if h.accepted]
    cost = (
        None
        if after.cost_usd is None or before.cost_usd is None
        else after.cost_usd - before.cost_usd
    )
    attrs: dict[str, Any] = {
        "skill_text": child.incumbent.text,
        "run_dir": None if child.run.path is None else str(child.run.path),
        "calls": after.calls - before.calls,
        "cost_usd": cost,
        "stop_reason": stop_reason,
        "step_lrs": [h.lr_budget for h in accepted],
        "accepted_steps": len(accepted),
    }
    for key, value in attrs.items():
        trial.set_user_attr(key, value)
    if child.run.path is not None:
        child.run.save_best(child.incumbent, child.export_metadata())


class _Reporter:
    """Reports a trial's validation score at each epoch end and raises TrialPruned when told."""

    def __init__(self, trial: optuna.trial.Trial, pruner: Any, val_ids: Sequence[str]) -> None:
        self.trial, self.val_ids = trial, list(val_ids)
        self.per_example = type(pruner).__name__ == "WilcoxonPruner"
        self.context: CompileContext | None = None
        self.epoch = 0
        self.scores: dict[str, float] = {}

    def on_event(self, event: str, payload: Mapping[str, Any]) -> None:
        """Listener for the child's events: an epoch ends when a later epoch's step appears."""
        if event != "step" or self.context is None:
            return
        epoch = int(payload["epoch"])
        if epoch > self.epoch:
            self._report(self.epoch, check=True)
            self.epoch = epoch
        self.scores = self.context.incumbent_report.scores

    def finish(self) -> None:
        """Report the last epoch (no pruning: the trial is already complete)."""
        if self.context is not None:
            self.scores = self.context.incumbent_report.scores
        self._report(self.epoch, check=False)

    def _report(self, epoch: int, *, check: bool) -> None:
        if not self.scores:
            return
        if not self.per_example:
            self.trial.report(sum(self.scores.values()) / len(self.scores), epoch)
            self._maybe_prune(check)
            return
        base = epoch * len(self.val_ids)
        for index, example_id in enumerate(self.val_ids):
            self.trial.report(self.scores[example_id], base + index)
            self._maybe_prune(check)

    def _maybe_prune(self, check: bool) -> None:
        if check and self.trial.should_prune():
            raise _optuna().TrialPruned(f"pruned after epoch {self.epoch}")


def _distribution(name: str, spec: Any) -> None:
    """Validate one search-space entry (raises UserInputError naming the entry)."""
    if isinstance(spec, tuple) and len(spec) == 3 and spec[2] in ("log", "linear", "int"):
        low, high, kind = spec
        if not low < high or (kind == "log" and low <= 0):
            raise UserInputError(
                f"search_space[{name!r}]: need 0 < low < high for log, low < high otherwise"
            )
        if kind == "int" and not (isinstance(low, int) and isinstance(high, int)):
            raise UserInputError(f"search_space[{name!r}]: int ranges need int bounds, got {spec}")
        return
    if isinstance(spec, (list, tuple)) and spec:
        return
    raise UserInputError(
        f"search_space[{name!r}] = {spec!r}: use (low, high, 'log'|'linear'), (low, high, 'int') "
        "or a non-empty list of choices"
    )


def _contains(spec: Any, value: Any) -> bool:
    if isinstance(spec, tuple) and len(spec) == 3 and spec[2] in ("log", "linear", "int"):
        return isinstance(value, (int, float)) and spec[0] <= value <= spec[1]
    return value in list(spec)


def _suggest(trial: optuna.trial.Trial, name: str, spec: Any) -> Any:
    if isinstance(spec, tuple) and len(spec) == 3 and spec[2] in ("log", "linear", "int"):
        low, high, kind = spec
        if kind == "int":
            return trial.suggest_int(name, low, high)
        return trial.suggest_float(name, low, high, log=kind == "log")
    return trial.suggest_categorical(name, list(spec))
