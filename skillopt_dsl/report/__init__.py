"""Plots and an HTML report of a finished (or interrupted) run, or of a sweep.

`write_report(run_dir)` reads a run directory (see `skillopt_dsl.runs`) without changing it and
writes, next to it:

- `plot_scores.png`: validation score of every candidate that reached the gate (accepted and
  rejected marked apart) and the best-so-far line;
- `plot_learning_rate.png`: the learning-rate budget of each step against the change the
  candidate really made (tokens of edit distance);
- `plot_cost.png`: cumulative model calls and dollars after each step;
- `report.html`: one self-contained page (the plots embedded) with the scores (seed, best
  constant answer and best skill, on validation and test, side by side, and a warning when the
  skill does not beat the constant answer), a summary table, the gate log and the unified diff
  between the seed skill and the best skill;
- `report.md`: the scores table and the warnings (the constant answer not beaten; the
  pre-flight's, when the validation set was too small to certify a useful gain), in markdown
  (for a pull request or a log).

A sweep also gets `plot_sweep_lr.png` (validation score against learning rate), a trials table
and a report for every trial run. The trials come from `sweep.json` (a list of `{params, value,
state}`, or `{"trials": [...]}`), else from the run's last `sweep` event (written by `OptunaLR`,
whose trials run under `trials/NNNN/`), else from the runs under a `trials/` folder.

The rooms: `record` reads a run (through `skillopt_dsl.runs`), `plots` draws its PNGs, `sweep`
finds a sweep's trials, `scores` builds the scores table, `page` writes the HTML and markdown,
`study_plots` draws an Optuna study's plots (asked for by the optimizer that ran the sweep and
returned by `compile` as `CompileResult.study_plots`: `draw_study_plots(result)`).
"""

from __future__ import annotations

from skillopt_dsl.report.page import REPORT_HTML, REPORT_MD, skill_diff, write_report
from skillopt_dsl.report.plots import (
    COST_PNG,
    LR_PNG,
    SCORES_PNG,
    SWEEP_PNG,
    plot_cost,
    plot_learning_rate,
    plot_scores,
    plot_sweep,
)
from skillopt_dsl.report.record import GateEntry, RunRecord, load_run, read_events
from skillopt_dsl.report.scores import ScoreRow, score_rows, scores_markdown
from skillopt_dsl.report.study_plots import draw_study_plots, write_sweep_plots
from skillopt_dsl.report.sweep import SweepTrial, load_sweep_trials

__all__ = [
    "COST_PNG",
    "LR_PNG",
    "REPORT_HTML",
    "REPORT_MD",
    "SCORES_PNG",
    "SWEEP_PNG",
    "GateEntry",
    "RunRecord",
    "ScoreRow",
    "SweepTrial",
    "draw_study_plots",
    "load_run",
    "load_sweep_trials",
    "plot_cost",
    "plot_learning_rate",
    "plot_scores",
    "plot_sweep",
    "read_events",
    "score_rows",
    "scores_markdown",
    "skill_diff",
    "write_report",
    "write_sweep_plots",
]
