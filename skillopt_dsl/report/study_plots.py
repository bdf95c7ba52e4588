"""Plots of an Optuna study (score vs learning rate, optimisation history, parameter
importances), drawn after a sweep for the optimizer that ran it: `compile` returns the
optimizer's request (`CompileResult.study_plots`) and draws nothing; `draw_study_plots(result)`
draws it (the CLI calls it after every compile)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from skillopt_dsl.runs import RunDirectory

if TYPE_CHECKING:
    import optuna

    from skillopt_dsl.compile import CompileResult

logger = logging.getLogger(__name__)


def draw_study_plots(result: CompileResult) -> list[Path]:
    """Draw the study plots a compile returned a request for (`result.study_plots`: an
    `OptunaLR` sweep with `plots=True`) into the request's folder, and record them as a
    `sweep_plots` event in the run's events.jsonl (when the run has a directory).

    Returns the PNG files written; [] when nothing was asked or no trial completed."""
    request = result.study_plots
    if request is None:
        return []
    written = write_sweep_plots(request.study, request.folder)
    if result.run_dir is not None:
        RunDirectory(result.run_dir, create=False).event(
            "sweep_plots", folder=str(request.folder), plots=[str(p) for p in written]
        )
    return written


def write_sweep_plots(study: optuna.study.Study, folder: str | Path) -> list[Path]:
    """Write score-vs-lr, optimisation history and parameter importances as PNG files.

    Plots that cannot be drawn yet are skipped with a logged reason (no completed trial, no
    `lr` parameter, fewer than two completed trials for importances).
    """
    import warnings

    import matplotlib.pyplot as plt
    from optuna.visualization import matplotlib as optuna_plots

    complete = [t for t in study.get_trials(deepcopy=False) if t.state.name == "COMPLETE"]
    if not complete:
        logger.info("no sweep plots for %r: no trial completed yet", study.study_name)
        return []
    target = Path(folder)
    target.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for name, draw in _study_plots(study, complete, optuna_plots).items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # optuna marks its matplotlib plots experimental
            axes = draw()
        figure = getattr(axes, "figure", None) or axes.flat[0].figure
        path = target / f"{name}.png"
        figure.savefig(path, dpi=100, bbox_inches="tight")
        plt.close(figure)
        written.append(path)
    return written


def _study_plots(
    study: optuna.study.Study, complete: list[Any], optuna_plots: Any
) -> Mapping[str, Callable[[], Any]]:
    """The drawable plots of a study by file name (each a zero-argument callable)."""
    plots: dict[str, Callable[[], Any]] = {
        "history": lambda: optuna_plots.plot_optimization_history(study)
    }
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
