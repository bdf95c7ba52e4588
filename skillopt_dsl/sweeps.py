"""Distributed sweeps: worker processes sharing one Optuna study (plots: `skillopt_dsl.report`,
drawn by the caller: the worker draws and prints nothing).

Start as many workers as you like, on one machine or many, all pointed at the same storage
(SQLite for one machine, a JournalFile on a shared disk, or PostgreSQL) and study name; each
runs its share of trials of the one study::

    run_sweep_worker(Sports(), splits, storage="sqlite:///sweep.db", study_name="sports",
                     n_trials=10, run_dir="runs/worker-1")

The CLI equivalent is `skillopt-dsl sweep RECIPE --storage URL --study NAME --n-trials N`.
Give every worker its own `run_dir` (the trials' run directories are kept inside it).
The study they share (storages, the creation lock, trial claims, orphans) is
`skillopt_dsl.studies`; each worker runs `OptunaLR`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict, Unpack

from skillopt_dsl.compile import CompileResult, compile_with
from skillopt_dsl.data import Splits
from skillopt_dsl.errors import UserInputError
from skillopt_dsl.lm import Budget
from skillopt_dsl.module import SkillModule
from skillopt_dsl.optimizers.base import Optimizer
from skillopt_dsl.optimizers.gradient_text import GradientText
from skillopt_dsl.optimizers.optuna_lr import OptunaLR, SearchSpace
from skillopt_dsl.options import settings_from, takes_options
from skillopt_dsl.settings import CompileSettings, ModelSpec
from skillopt_dsl.studies.records import SweepResult
from skillopt_dsl.studies.storage import GRACE_PERIOD_S, HEARTBEAT_INTERVAL_S, open_storage

if TYPE_CHECKING:
    import optuna

__all__ = [
    "SweepWorkerOptions",
    "SweepWorkerResult",
    "SweepWorkerSettings",
    "load_sweep",
    "run_sweep_worker",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class SweepWorkerSettings:
    """The optional keywords of `run_sweep_worker(...)` with their defaults (see it)."""

    inner: Optimizer | None = None
    search_space: SearchSpace | None = None
    lm: ModelSpec = None
    optimizer_lm: ModelSpec = None
    budget: Budget | None = None
    run_dir: str | Path | None = None
    seed: int = 0
    sampler_seed: int | None = None
    plots: bool = False
    selection_fraction: float = 0.3
    heartbeat_interval: int = HEARTBEAT_INTERVAL_S
    grace_period: int = GRACE_PERIOD_S


class SweepWorkerOptions(TypedDict, total=False):
    """`SweepWorkerSettings` as keywords: what `run_sweep_worker(..., **options)` accepts."""

    inner: Optimizer | None
    search_space: SearchSpace | None
    lm: ModelSpec
    optimizer_lm: ModelSpec
    budget: Budget | None
    run_dir: str | Path | None
    seed: int
    sampler_seed: int | None
    plots: bool
    selection_fraction: float
    heartbeat_interval: int
    grace_period: int


@dataclass(frozen=True)
class SweepWorkerResult(SweepResult):
    """The shared study after this worker (a `SweepResult`), with this worker's compile:
    `compiled.study_plots` is the plots request (`plots=True`) that
    `skillopt_dsl.report.draw_study_plots(result.compiled)` draws; the worker draws nothing."""

    compiled: CompileResult | None = field(default=None, compare=False)


@takes_options(SweepWorkerSettings)
def run_sweep_worker(
    module: SkillModule,
    splits: Splits,
    *,
    storage: str,
    study_name: str,
    n_trials: int,
    **options: Unpack[SweepWorkerOptions],
) -> SweepWorkerResult:
    """Run trials of the shared study `study_name` in `storage` until it holds `n_trials`
    finished ones, then summarise it.

    Args:
        module, splits: the task (trials learn on `splits.train` minus a selection split their
            gates decide on; the best trial's skill is gated on `splits.val`).
        storage: "sqlite:///...", "postgresql://...", or a JournalFile path (.log/.journal).
        study_name: the study every worker shares (created by the first one).
        n_trials: finished (COMPLETE or PRUNED) trials the shared study ends with, counting
            every worker and earlier runs; this worker runs trials until the study has them
            (concurrent workers may each finish one trial in flight past it).
        inner: the optimizer each trial runs (default `GradientText()`).
        search_space: default `{"lr": (0.02, 0.5, "log")}`.
        lm, optimizer_lm, budget, seed: as for `compile` (the seed is the trials' rollout seed).
        run_dir: this worker's own run directory (trials go under `<run_dir>/trials/`).
        sampler_seed: the TPE sampler's seed; None draws a fresh one, so that workers do not
            sample the same settings.
        plots: ask for the sweep plots next to the study when this worker ends: the result's
            `compiled.study_plots`, which `skillopt_dsl.report.draw_study_plots` draws (the
            CLI does).
        selection_fraction: share of `splits.train` the trials' gates decide on (see OptunaLR;
            default 0.3).
        heartbeat_interval, grace_period: a killed worker's trial is failed and re-run once
            silent for `grace_period` seconds (RDB storages; see OptunaLR).

    The keywords after `n_trials` are `SweepWorkerSettings`' fields (`SweepWorkerOptions`
    types them); an unknown one is a `TypeError`.
    """
    settings = settings_from("run_sweep_worker", SweepWorkerSettings, options)
    if not storage or not study_name:
        raise UserInputError("a sweep worker needs a storage URL and a study name to share")
    optimizer = _sweep_optimizer(settings, storage, study_name, n_trials)
    compile_settings = CompileSettings(
        lm=settings.lm,
        optimizer_lm=settings.optimizer_lm,
        budget=settings.budget,
        run_dir=settings.run_dir,
        seed=settings.seed,
    )
    compiled = compile_with(module, splits.train, splits.val, compile_settings, optimizer)
    logger.info(
        "worker done: best val %.4f (seed %.4f)", compiled.val_score, compiled.seed_val_score
    )
    shared = load_sweep(storage, study_name)
    return SweepWorkerResult(
        shared.study_name, shared.storage, shared.trials, shared.best_number, compiled=compiled
    )


def _sweep_optimizer(
    settings: SweepWorkerSettings, storage: str, study_name: str, n_trials: int
) -> OptunaLR:
    """The worker's `OptunaLR` on the shared study."""
    return OptunaLR(
        inner=settings.inner if settings.inner is not None else GradientText(),
        search_space=_search_space(settings.search_space),
        n_trials=n_trials,
        storage=storage,
        study_name=study_name,
        sampler=_sampler(settings.sampler_seed),
        plots=settings.plots,
        selection_fraction=settings.selection_fraction,
        heartbeat_interval=settings.heartbeat_interval,
        grace_period=settings.grace_period,
    )


def _search_space(given: SearchSpace | None) -> SearchSpace:
    """`given`, or the default search space `{"lr": (0.02, 0.5, "log")}`."""
    return given if given is not None else {"lr": (0.02, 0.5, "log")}


def _sampler(seed: int | None) -> optuna.samplers.BaseSampler:
    import optuna

    return optuna.samplers.TPESampler(seed=seed)


def load_sweep(storage: str, study_name: str) -> SweepResult:
    """Reload a stored study (for instance after its workers exited) as a `SweepResult`."""
    import optuna

    opened = open_storage(storage)
    if opened is None:
        raise UserInputError("load_sweep needs the storage URL or journal path of a stored study")
    study = optuna.load_study(study_name=study_name, storage=opened)
    return SweepResult.from_study(study, storage)
