"""The report's PNG plots: scores per step, learning-rate budget against measured change,
calls and cost, and a sweep's score against learning rate."""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Sequence
from pathlib import Path

from matplotlib.axes import Axes
from matplotlib.figure import Figure

from skillopt_dsl.driver import StepRecord
from skillopt_dsl.report.record import RunRecord
from skillopt_dsl.report.sweep import SweepTrial

SCORES_PNG = "plot_scores.png"


LR_PNG = "plot_learning_rate.png"


COST_PNG = "plot_cost.png"


SWEEP_PNG = "plot_sweep_lr.png"


def save_figure(figure: Figure, path: Path) -> Path:
    figure.tight_layout()
    figure.savefig(path, format="png", dpi=110)
    return path


def floats(values: Iterable[float | None]) -> list[float]:
    """Plot-ready values; a missing value becomes NaN, which matplotlib leaves out."""
    return [math.nan if v is None else float(v) for v in values]


def empty_axes(axes: Axes, message: str) -> None:
    axes.text(0.5, 0.5, message, ha="center", va="center", transform=axes.transAxes)


def _epoch_lines(axes: Axes, steps: Sequence[StepRecord]) -> None:
    for before, after in itertools.pairwise(steps):
        if after.epoch != before.epoch:
            axes.axvline(after.step - 0.5, color="0.85", linewidth=1, zorder=0)


def plot_scores(record: RunRecord, path: Path) -> Path:
    """Validation score per step: accepted and rejected candidates, best so far, the seed."""
    figure = Figure(figsize=(8, 4.5))
    axes = figure.add_subplot()
    scored = [s for s in record.steps if s.val_score is not None]
    accepted = [s for s in scored if s.accepted]
    rejected = [s for s in scored if not s.accepted]
    axes.scatter(
        [s.step for s in rejected],
        floats(s.val_score for s in rejected),
        marker="x",
        color="tab:red",
        label="rejected candidate",
    )
    axes.scatter(
        [s.step for s in accepted],
        floats(s.val_score for s in accepted),
        marker="o",
        color="tab:green",
        s=50,
        label="accepted candidate",
        zorder=3,
    )
    if record.steps:
        xs: list[float] = [s.step for s in record.steps]
        ys = floats(s.incumbent_score for s in record.steps)
        if record.seed_val_score is not None:  # start the line at the seed, just before step 0
            xs, ys = [xs[0] - 0.5, *xs], [record.seed_val_score, *ys]
        axes.plot(xs, ys, drawstyle="steps-post", color="tab:blue", label="best so far")
        _epoch_lines(axes, record.steps)
    else:
        empty_axes(axes, "no steps recorded")
    if record.seed_val_score is not None:
        axes.axhline(record.seed_val_score, color="0.5", linestyle=":", label="seed")
    axes.set(xlabel="step", ylabel="validation score", title="Validation score per step")
    axes.legend(loc="best", fontsize="small")
    return save_figure(figure, path)


def plot_learning_rate(record: RunRecord, path: Path) -> Path:
    """The learning-rate budget of each step against the change its candidate made."""
    figure = Figure(figsize=(8, 4.5))
    axes = figure.add_subplot()
    if record.steps:
        axes.bar(
            [s.step for s in record.steps],
            [s.budget_tokens for s in record.steps],
            width=0.8,
            fill=False,
            edgecolor="tab:blue",
            label="budget (tokens)",
        )
        proposed = [s for s in record.steps if s.candidate_hash is not None]
        for accepted, color, label in (
            (True, "tab:green", "accepted"),
            (False, "tab:red", "rejected"),
        ):
            chosen = [s for s in proposed if s.accepted is accepted]
            axes.bar(
                [s.step for s in chosen],
                [s.change_tokens for s in chosen],
                color=color,
                alpha=0.7,
                width=0.6,
                label=f"measured change, {label}",
            )
        _epoch_lines(axes, record.steps)
    else:
        empty_axes(axes, "no steps recorded")
    axes.set(
        xlabel="step", ylabel="token edit distance", title="Learning-rate budget vs measured change"
    )
    axes.legend(loc="best", fontsize="small")
    return save_figure(figure, path)


def plot_cost(record: RunRecord, path: Path) -> Path:
    """Cumulative model calls (left axis) and dollars (right axis) after each step."""
    figure = Figure(figsize=(8, 4.5))
    axes = figure.add_subplot()
    steps = [s.step for s in record.steps]
    axes.plot(steps, [s.calls for s in record.steps], color="tab:blue", marker=".", label="calls")
    axes.set(xlabel="step", ylabel="model calls (cumulative)", title="Calls and cost over the run")
    axes.set_ylim(bottom=0)
    priced = [s for s in record.steps if s.cost_usd is not None]
    if priced:
        dollars = axes.twinx()
        dollars.plot(
            [s.step for s in priced],
            floats(s.cost_usd for s in priced),
            color="tab:orange",
            marker=".",
            label="cost (USD)",
        )
        dollars.set_ylabel("cost in USD (cumulative)")
        dollars.set_ylim(bottom=0)
        dollars.legend(loc="lower right", fontsize="small")
    if not record.steps:
        empty_axes(axes, "no steps recorded")
    axes.legend(loc="upper left", fontsize="small")
    return save_figure(figure, path)


def plot_sweep(trials: Sequence[SweepTrial], path: Path) -> Path:
    """Validation score against learning rate (log scale) for the completed trials."""
    figure = Figure(figsize=(8, 4.5))
    axes = figure.add_subplot()
    done = [t for t in trials if t.value is not None and t.lr is not None and t.lr > 0]
    axes.scatter(floats(t.lr for t in done), floats(t.value for t in done), color="tab:blue")
    if done:
        axes.set_xscale("log")
        best = max(done, key=lambda t: t.value or -math.inf)
        axes.scatter(
            floats([best.lr]),
            floats([best.value]),
            s=120,
            facecolors="none",
            edgecolors="tab:green",
            label=f"best: lr={best.lr:.3g}",
        )
        axes.legend(loc="best", fontsize="small")
    else:
        empty_axes(axes, "no completed trial with a learning rate")
    axes.set(
        xlabel="learning rate",
        ylabel="validation score",
        title=f"Score vs learning rate ({len(done)} of {len(trials)} trials)",
    )
    return save_figure(figure, path)
