"""Distributed sweeps: worker processes sharing one Optuna study, and the sweep plots.

Start as many workers as you like, on one machine or many, all pointed at the same storage
(SQLite for one machine, a JournalFile on a shared disk, or PostgreSQL) and study name; each
runs its share of trials of the one study::

    run_sweep_worker(Sports(), splits, storage="sqlite:///sweep.db", study_name="sports",
                     n_trials=10, run_dir="runs/worker-1")

The CLI equivalent is `skillopt-dsl sweep RECIPE --storage URL --study NAME --n-trials N`.
Give every worker its own `run_dir` (the trials' run directories are kept inside it).
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from skillopt_dsl.compile import ModelSpec, compile
from skillopt_dsl.data import Splits
from skillopt_dsl.errors import UserInputError
from skillopt_dsl.lm import Budget
from skillopt_dsl.module import SkillModule
from skillopt_dsl.optimizers.base import Optimizer
from skillopt_dsl.optimizers.gradient_text import GradientText
from skillopt_dsl.optimizers.optuna_lr import OptunaLR, SearchSpace, SweepResult, open_storage

if TYPE_CHECKING:
    import optuna

__all__ = ["load_sweep", "run_sweep_worker", "write_sweep_plots"]

logger = logging.getLogger(__name__)


def run_sweep_worker(
    module: SkillModule,
    splits: Splits,
    *,
    storage: str,
    study_name: str,
    n_trials: int,
    total_trials: int | None = None,
    inner: Optimizer | None = None,
    search_space: SearchSpace | None = None,
    lm: ModelSpec = None,
    optimizer_lm: ModelSpec = None,
    budget: Budget | None = None,
    run_dir: str | Path | None = None,
    seed: int = 0,
    sampler_seed: int | None = None,
    plots: bool = False,
) -> SweepResult:
    """Run `n_trials` trials of the shared study `study_name` in `storage`, then summarise it.

    Args:
        module, splits: the task (trials train on `splits.train`, are gated on `splits.val`).
        storage: "sqlite:///...", "postgresql://...", or a JournalFile path (.log/.journal).
        study_name: the study every worker shares (created by the first one).
        n_trials: trials this worker runs.
        total_trials: stop early once the study holds this many complete or pruned trials.
        inner: the optimizer each trial runs (default `GradientText()`).
        search_space: default `{"lr": (0.02, 0.5, "log")}`.
        lm, optimizer_lm, budget, seed: as for `compile` (the seed is the trials' rollout seed).
        run_dir: this worker's own run directory (trials go under `<run_dir>/trials/`).
        sampler_seed: the TPE sampler's seed; None draws a fresh one, so that workers do not
            sample the same settings.
        plots: write the sweep plots next to the study when this worker ends.
    """
    if not storage or not study_name:
        raise UserInputError("a sweep worker needs a storage URL and a study name to share")
    optimizer = OptunaLR(
        inner=inner if inner is not None else GradientText(),
        search_space=search_space if search_space is not None else {"lr": (0.02, 0.5, "log")},
        n_trials=n_trials,
        total_trials=total_trials,
        storage=storage,
        study_name=study_name,
        sampler=_sampler(sampler_seed),
        plots=plots,
    )
    compiled = compile(
        module,
        splits.train,
        splits.val,
        optimizer=optimizer,
        lm=lm,
        optimizer_lm=optimizer_lm,
        budget=budget,
        run_dir=run_dir,
        seed=seed,
    )
    logger.info(
        "worker done: best val %.4f (seed %.4f)", compiled.val_score, compiled.seed_val_score
    )
    return load_sweep(storage, study_name)


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


def write_sweep_plots(study: optuna.study.Study, folder: str | Path) -> list[Path]:
    """Write score-vs-lr, optimisation history and parameter importances as PNG files.

    Plots that cannot be drawn yet are skipped with a logged reason (no completed trial, no
    `lr` parameter, fewer than two completed trials for importances).
    """
    try:
        import matplotlib.pyplot as plt
        from optuna.visualization import matplotlib as optuna_plots
    except ImportError as exc:
        raise UserInputError("sweep plots need matplotlib: pip install matplotlib") from exc
    complete = [t for t in study.get_trials(deepcopy=False) if t.state.name == "COMPLETE"]
    if not complete:
        logger.info("no sweep plots for %r: no trial completed yet", study.study_name)
        return []
    target = Path(folder)
    target.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for name, draw in _plots(study, complete, optuna_plots).items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # optuna marks its matplotlib plots experimental
            axes = draw()
        figure = getattr(axes, "figure", None) or axes.flat[0].figure
        path = target / f"{name}.png"
        figure.savefig(path, dpi=100, bbox_inches="tight")
        plt.close(figure)
        written.append(path)
    return written


def _plots(study: optuna.study.Study, complete: list[Any], optuna_plots: Any) -> Mapping[str, Any]:
    """The drawable plots by file name (each a zero-argument callable)."""
    plots: dict[str, Any] = {"history": lambda: optuna_plots.plot_optimization_history(study)}
    if any("lr" in t.params for t in complete):
        plots["score_vs_lr"] = lambda: optuna_plots.plot_slice(study, params=["lr"])
    else:
        logger.info("no score-vs-lr plot: the study does not sample 'lr'")
    varied = {
        k for t in complete for k in t.params if len({str(u.params.get(k)) for u in complete}) > 1
    }
    if len(complete) >= 2 and varied:
        plots["importances"] = lambda: optuna_plots.plot_param_importances(study)
    else:
        logger.info(
            "no parameter-importance plot yet: it needs two completed trials with different "
            "settings (%d completed)",
            len(complete),
        )
    return plots
