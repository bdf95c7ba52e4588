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
"""

from __future__ import annotations

import base64
import dataclasses
import difflib
import html
import itertools
import json
import logging
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from matplotlib.axes import Axes
from matplotlib.figure import Figure

from skillopt_dsl.baselines import Baseline, baseline_warning
from skillopt_dsl.driver import StepRecord
from skillopt_dsl.errors import RunDirError, UserInputError
from skillopt_dsl.export import load_skill
from skillopt_dsl.gate import GateDecision

__all__ = [
    "GateEntry",
    "RunRecord",
    "ScoreRow",
    "SweepTrial",
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
]

logger = logging.getLogger(__name__)

SCORES_PNG = "plot_scores.png"
LR_PNG = "plot_learning_rate.png"
COST_PNG = "plot_cost.png"
SWEEP_PNG = "plot_sweep_lr.png"
REPORT_HTML = "report.html"
REPORT_MD = "report.md"
_LR_KEYS = ("lr", "learning_rate")
_RUN_FILES = ("events.jsonl", "skills/v0001.md", "best_skill.md")
"""What a run directory must hold. config.json is optional: a sweep trial's run has none."""


# -- reading a run ---------------------------------------------------------------------------


@dataclass(frozen=True)
class GateEntry:
    """One gate decision as logged, with the step and epoch it belonged to."""

    step: int | None
    epoch: int | None
    decision: GateDecision


@dataclass(frozen=True)
class RunRecord:
    """Everything the report shows about one run, read from its directory."""

    path: Path
    config: dict[str, Any]
    summary: dict[str, Any] | None
    steps: list[StepRecord]
    gates: list[GateEntry]
    seed_val_score: float | None
    seed_text: str
    best_text: str
    sweep_trials: list[Any] | None = None
    baseline: Baseline | None = None
    screens: ScreenSummary | None = None

    @property
    def finished(self) -> bool:
        """True when the run wrote summary.json (it ended, by finishing or by its budget)."""
        return self.summary is not None


def load_run(run_dir: str | Path) -> RunRecord:
    """Read a run directory; a missing or unreadable file is a `RunDirError` naming it."""
    path = _existing_dir(run_dir)
    for name in _RUN_FILES:
        if not (path / name).is_file():
            raise RunDirError(
                f"{path} is not a complete run directory: {name} is missing. "
                "Point the report at the folder given as run_dir to compile()."
            )
    events = read_events(path / "events.jsonl")
    steps, gates = _steps_and_gates(events)
    summary_path, config = path / "summary.json", path / "config.json"
    return RunRecord(
        path=path,
        config=_read_json_object(config) if config.is_file() else {},
        summary=_read_json_object(summary_path) if summary_path.is_file() else None,
        steps=steps,
        gates=gates,
        seed_val_score=_seed_score(events),
        seed_text=(path / "skills" / "v0001.md").read_text(encoding="utf-8"),
        best_text=load_skill(path / "best_skill.md").text,
        sweep_trials=_last_sweep(events),
        baseline=_baseline(events),
        screens=ScreenSummary.of(events),
    )


@dataclass(frozen=True)
class ScreenSummary:
    """What screening on training data did in a run: proposals tried on their own mini-batch
    and passed, confirmations tried and passed, the calls it spent, and the calls left when
    the search stopped."""

    tried: int
    passed: int
    confirmations: int
    confirmed: int
    calls: int
    calls_left: int | None

    @classmethod
    def of(cls, events: Sequence[Mapping[str, Any]]) -> ScreenSummary | None:
        """Read the `screen` and `stop` events (None: the run screened nothing)."""
        screens = [e for e in events if e.get("event") == "screen"]
        if not screens:
            return None
        batch = [e for e in screens if e.get("stage") == "batch"]
        confirm = [e for e in screens if e.get("stage") == "confirm"]
        stops = [e for e in events if e.get("event") == "stop"]
        return cls(
            tried=len(batch),
            passed=sum(bool(e.get("passed")) for e in batch),
            confirmations=len(confirm),
            confirmed=sum(bool(e.get("passed")) for e in confirm),
            calls=sum(int(e.get("calls", 0)) for e in screens),
            calls_left=stops[-1].get("calls_left") if stops else None,
        )

    def line(self) -> str:
        """One line for the report's summary."""
        left = "" if self.calls_left is None else f"; {self.calls_left} calls left at the stop"
        return (
            f"{self.passed} of {self.tried} proposals passed their mini-batch, "
            f"{self.confirmed} of {self.confirmations} confirmations passed; "
            f"{self.calls} calls, no validation example, no significance{left}"
        )


def _optimizer_settings(config: Mapping[str, Any]) -> dict[str, Any]:
    """The optimizer's settings from config.json (empty when it recorded none)."""
    settings = config.get("optimizer")
    return dict(settings) if isinstance(settings, dict) else {}


def _existing_dir(run_dir: str | Path) -> Path:
    path = Path(run_dir)
    if not path.exists():
        raise UserInputError(f"run directory {str(path)!r} does not exist")
    if not path.is_dir():
        raise UserInputError(f"{str(path)!r} is a file; the report needs a run directory")
    return path


def _read_json_object(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise RunDirError(f"{path} is not valid JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise RunDirError(f"{path} must hold a JSON object, found {type(data).__name__}")
    return data


def read_events(path: Path) -> list[dict[str, Any]]:
    """Parse events.jsonl without modifying it; a torn last line (a killed run) is skipped."""
    raw = path.read_text(encoding="utf-8")
    lines = raw.split("\n")
    if lines and lines[-1].strip():
        logger.warning("%s: ignoring a torn last line (the run was killed mid-write)", path)
    events: list[dict[str, Any]] = []
    for number, line in enumerate(lines[:-1], start=1):
        if not line.strip():
            continue
        try:
            event = json.loads(line)
        except json.JSONDecodeError as exc:
            raise RunDirError(f"{path} line {number} is corrupt ({exc})") from exc
        if not isinstance(event, dict) or "event" not in event:
            raise RunDirError(f"{path} line {number} is not an event object")
        events.append(event)
    return events


_STEP_FIELDS = {f.name for f in dataclasses.fields(StepRecord)}
_GATE_FIELDS = {f.name for f in dataclasses.fields(GateDecision)}


def _steps_and_gates(
    events: Sequence[Mapping[str, Any]],
) -> tuple[list[StepRecord], list[GateEntry]]:
    """Step records and gate decisions in order; work redone after a resume is counted once.

    A `resume` event says how many steps the checkpoint held: later records replace whatever
    the killed process logged past that point. A gate decision is always logged just before its
    step record, so it belongs to the step whose index equals the steps seen before it.
    """
    steps: list[StepRecord] = []
    gates: list[tuple[int, GateEntry]] = []
    for event in events:
        kind = event["event"]
        if kind == "resume":
            kept = int(event.get("steps", len(steps)))
            del steps[kept:]
            gates = [(index, gate) for index, gate in gates if index < kept]
        elif kind == "step":
            steps.append(StepRecord(**{k: v for k, v in event.items() if k in _STEP_FIELDS}))
        elif kind == "gate":
            decision = GateDecision.from_dict({k: v for k, v in event.items() if k in _GATE_FIELDS})
            gates.append((len(steps), GateEntry(event.get("step"), event.get("epoch"), decision)))
    return steps, [gate for _, gate in gates]


def _baseline(events: Sequence[Mapping[str, Any]]) -> Baseline | None:
    """The constant baseline the run logged (a `baseline` event), if its output is a label."""
    for event in events:
        if event["event"] == "baseline":
            test = event.get("test_score")
            return Baseline(
                label=str(event["label"]),
                val_score=float(event["val_score"]),
                test_score=None if test is None else float(test),
            )
    return None


def _seed_score(events: Sequence[Mapping[str, Any]]) -> float | None:
    for event in events:
        if event["event"] == "seed" and event.get("val_score") is not None:
            return float(event["val_score"])
    return None


# -- plots -----------------------------------------------------------------------------------


def _save(figure: Figure, path: Path) -> Path:
    figure.tight_layout()
    figure.savefig(path, format="png", dpi=110)
    return path


def _floats(values: Iterable[float | None]) -> list[float]:
    """Plot-ready values; a missing value becomes NaN, which matplotlib leaves out."""
    return [math.nan if v is None else float(v) for v in values]


def _empty(axes: Axes, message: str) -> None:
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
        _floats(s.val_score for s in rejected),
        marker="x",
        color="tab:red",
        label="rejected candidate",
    )
    axes.scatter(
        [s.step for s in accepted],
        _floats(s.val_score for s in accepted),
        marker="o",
        color="tab:green",
        s=50,
        label="accepted candidate",
        zorder=3,
    )
    if record.steps:
        xs: list[float] = [s.step for s in record.steps]
        ys = _floats(s.incumbent_score for s in record.steps)
        if record.seed_val_score is not None:  # start the line at the seed, just before step 0
            xs, ys = [xs[0] - 0.5, *xs], [record.seed_val_score, *ys]
        axes.plot(xs, ys, drawstyle="steps-post", color="tab:blue", label="best so far")
        _epoch_lines(axes, record.steps)
    else:
        _empty(axes, "no steps recorded")
    if record.seed_val_score is not None:
        axes.axhline(record.seed_val_score, color="0.5", linestyle=":", label="seed")
    axes.set(xlabel="step", ylabel="validation score", title="Validation score per step")
    axes.legend(loc="best", fontsize="small")
    return _save(figure, path)


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
        _empty(axes, "no steps recorded")
    axes.set(
        xlabel="step", ylabel="token edit distance", title="Learning-rate budget vs measured change"
    )
    axes.legend(loc="best", fontsize="small")
    return _save(figure, path)


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
            _floats(s.cost_usd for s in priced),
            color="tab:orange",
            marker=".",
            label="cost (USD)",
        )
        dollars.set_ylabel("cost in USD (cumulative)")
        dollars.set_ylim(bottom=0)
        dollars.legend(loc="lower right", fontsize="small")
    if not record.steps:
        _empty(axes, "no steps recorded")
    axes.legend(loc="upper left", fontsize="small")
    return _save(figure, path)


# -- sweeps ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class SweepTrial:
    """One trial of a sweep: its parameters, its value (validation score) and its state."""

    number: int
    params: dict[str, Any]
    value: float | None
    state: str
    run_dir: Path | None = None

    @property
    def lr(self) -> float | None:
        """The trial's learning rate, when its parameters name one (`lr` or `learning_rate`)."""
        for key in _LR_KEYS:
            if isinstance(self.params.get(key), int | float):
                return float(self.params[key])
        return None


def load_sweep_trials(sweep_dir: str | Path) -> list[SweepTrial]:
    """The trials of a sweep: from `sweep.json`, else the run's last `sweep` event (OptunaLR),
    else the runs under `trials/`."""
    path = _existing_dir(sweep_dir)
    events = read_events(path / "events.jsonl") if (path / "events.jsonl").is_file() else []
    trials = _sweep_trials(path, _last_sweep(events))
    if trials is None:
        raise RunDirError(
            f"{path} is not a sweep: it has no sweep.json, no sweep event and no trials/ folder"
        )
    return trials


def _last_sweep(events: Sequence[Mapping[str, Any]]) -> list[Any] | None:
    """The trial list of the last `sweep` event (written by OptunaLR), if any."""
    found = [e.get("trials") for e in events if e["event"] == "sweep"]
    return list(found[-1]) if found and isinstance(found[-1], list) else None


def _sweep_trials(path: Path, logged: list[Any] | None) -> list[SweepTrial] | None:
    if (path / "sweep.json").is_file():
        data = json.loads((path / "sweep.json").read_text(encoding="utf-8"))
        raw = data.get("trials") if isinstance(data, dict) else data
        return _trials_from_list(raw, path, path / "sweep.json")
    if logged is not None:
        return _trials_from_list(logged, path, path / "events.jsonl")
    if (path / "trials").is_dir():
        return _trials_from_runs(path / "trials")
    return None


def _trials_from_list(raw: Any, sweep: Path, source: Path) -> list[SweepTrial]:
    if not isinstance(raw, list):
        raise RunDirError(f"{source} must hold a list of trials (or {{'trials': [...]}})")
    trials = []
    for index, item in enumerate(raw):
        if not isinstance(item, dict) or not isinstance(item.get("params", {}), dict):
            raise RunDirError(f"{source}: trial {index} is not {{params, value, state}}")
        number = int(item.get("number", index))
        trials.append(
            SweepTrial(
                number=number,
                params=dict(item.get("params", {})),
                value=None if item.get("value") is None else float(item["value"]),
                state=str(item.get("state", "UNKNOWN")),
                run_dir=_trial_dir(sweep, item.get("run_dir"), number),
            )
        )
    return trials


def _is_complete_run(path: Path) -> bool:
    return all((path / name).is_file() for name in _RUN_FILES)


def _trial_dir(sweep: Path, run: object, number: int) -> Path | None:
    """The trial's run directory when it is a complete run (a report can be written for it)."""
    named = [Path(run), sweep / str(run)] if isinstance(run, str) and run else []
    numbered = [sweep / "trials" / n for n in (f"{number:04d}", str(number), f"trial_{number}")]
    return next((p for p in named + numbered if _is_complete_run(p)), None)


def _trials_from_runs(trials_dir: Path) -> list[SweepTrial]:
    trials = []
    runs = sorted(p for p in trials_dir.iterdir() if (p / "config.json").is_file())
    for number, run in enumerate(runs):
        config = _read_json_object(run / "config.json")
        summary = (
            _read_json_object(run / "summary.json") if (run / "summary.json").is_file() else None
        )
        optimizer = _optimizer_settings(config)
        params = {k: optimizer[k] for k in (*_LR_KEYS, "schedule") if k in optimizer}
        value = None if summary is None else summary.get("val_score")
        state = "COMPLETE" if summary is not None else "RUNNING_OR_KILLED"
        trials.append(
            SweepTrial(number, params, value, state, run if _is_complete_run(run) else None)
        )
    return trials


def plot_sweep(trials: Sequence[SweepTrial], path: Path) -> Path:
    """Validation score against learning rate (log scale) for the completed trials."""
    figure = Figure(figsize=(8, 4.5))
    axes = figure.add_subplot()
    done = [t for t in trials if t.value is not None and t.lr is not None and t.lr > 0]
    axes.scatter(_floats(t.lr for t in done), _floats(t.value for t in done), color="tab:blue")
    if done:
        axes.set_xscale("log")
        best = max(done, key=lambda t: t.value or -math.inf)
        axes.scatter(
            _floats([best.lr]),
            _floats([best.value]),
            s=120,
            facecolors="none",
            edgecolors="tab:green",
            label=f"best: lr={best.lr:.3g}",
        )
        axes.legend(loc="best", fontsize="small")
    else:
        _empty(axes, "no completed trial with a learning rate")
    axes.set(
        xlabel="learning rate",
        ylabel="validation score",
        title=f"Score vs learning rate ({len(done)} of {len(trials)} trials)",
    )
    return _save(figure, path)


# -- scores: seed, constant answer, best ------------------------------------------------------


@dataclass(frozen=True)
class ScoreRow:
    """One split's scores: the seed skill, the best constant answer (None without a label set
    or without that split) and the best skill."""

    split: str
    seed: float | None
    constant: float | None
    best: float | None


def score_rows(record: RunRecord) -> list[ScoreRow]:
    """Validation and test scores of the seed, the constant answer and the best skill."""
    summary, baseline = record.summary or {}, record.baseline
    last = record.steps[-1] if record.steps else None
    return [
        ScoreRow(
            "validation",
            summary.get("seed_val_score", record.seed_val_score),
            None if baseline is None else baseline.val_score,
            summary.get("val_score", last.incumbent_score if last else record.seed_val_score),
        ),
        ScoreRow(
            "test",
            summary.get("seed_test_score"),
            None if baseline is None else baseline.test_score,
            summary.get("test_score"),
        ),
    ]


def _warning(record: RunRecord) -> str | None:
    validation, test = score_rows(record)
    if validation.best is None:
        return None
    return baseline_warning(record.baseline, validation.best, test.best)


def _score_header(record: RunRecord) -> list[str]:
    constant = [] if record.baseline is None else [f"constant {record.baseline.label!r}"]
    return ["split", "seed", *constant, "best"]


def _score_cells(record: RunRecord, row: ScoreRow) -> list[float | None]:
    constant = [] if record.baseline is None else [row.constant]
    return [row.seed, *constant, row.best]


def _baseline_note(record: RunRecord) -> str:
    if record.baseline is None:
        return "No constant baseline: the output has no fixed label set (compare with the seed)."
    return (
        f"Constant answer: {record.baseline.label!r} for every example, the best on validation "
        "(scored without any model call)."
    )


def scores_markdown(record: RunRecord) -> str:
    """The scores table, the baseline note and the warning (if any), as markdown."""
    header = _score_header(record)
    lines = [f"# {record.config.get('module') or record.path.name}: seed vs best", ""]
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in score_rows(record):
        cells = ["-" if v is None else f"{v:.4f}" for v in _score_cells(record, row)]
        lines.append(f"| {row.split} | " + " | ".join(cells) + " |")
    lines += ["", _baseline_note(record)]
    warning = _warning(record)
    if warning is not None:
        lines += ["", f"**Warning:** {warning}"]
    small = _preflight_warning(record.summary or {})
    if small is not None:
        lines += ["", f"**Warning (pre-flight):** {small}"]
    if record.screens is not None:
        lines += ["", f"Screened on training data: {record.screens.line()}."]
    test_usage = (record.summary or {}).get("test_usage")
    if test_usage:
        lines += [
            "",
            f"Test scoring: {test_usage.get('calls')} calls, not charged to the search budget.",
        ]
    return "\n".join(lines) + "\n"


def _scores_html(record: RunRecord) -> list[str]:
    rows = [(row.split, *_score_cells(record, row)) for row in score_rows(record)]
    body = ["<h2>Scores</h2>", _table(_score_header(record), rows)]
    body.append(f"<p>{html.escape(_baseline_note(record))}</p>")
    warning = _warning(record)
    if warning is not None:
        body.append(f'<p class="no"><strong>Warning:</strong> {html.escape(warning)}</p>')
    return body


# -- HTML ------------------------------------------------------------------------------------

_STYLE = """
body{font-family:system-ui,sans-serif;max-width:1000px;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:.25em .6em;
text-align:left;font-size:.9em}th{background:#f3f3f3}img{max-width:100%}figure{margin:1.5em 0}
pre.diff{background:#f8f8f8;padding:1em;overflow-x:auto;font-size:.85em}
.add{color:#1a7f37}.del{color:#cf222e}.hunk{color:#8250df}.ok{color:#1a7f37}.no{color:#cf222e}
"""


def _page(title: str, body: Sequence[str]) -> str:
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head>\n<body>\n"
        f"<h1>{html.escape(title)}</h1>\n" + "\n".join(body) + "\n</body></html>\n"
    )


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join(
        "<tr>" + "".join(f"<td>{_cell(v)}</td>" for v in row) + "</tr>\n" for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>\n{body}</tbody></table>"


class _Html(str):
    """Markup that a table cell inserts as is (built from escaped parts)."""


def _link(href: str | None) -> _Html | None:
    return None if href is None else _Html(f'<a href="{html.escape(href)}">{html.escape(href)}</a>')


def _cell(value: Any) -> str:
    if isinstance(value, _Html):
        return str(value)
    if value is None:
        return "—"
    if isinstance(value, bool):
        return '<span class="ok">yes</span>' if value else '<span class="no">no</span>'
    if isinstance(value, float):
        return f"{value:.4g}"
    return html.escape(str(value))


def _figure(path: Path, caption: str) -> str:
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    name = html.escape(path.name)
    return (
        f'<figure><img src="data:image/png;base64,{data}" alt="{name}">'
        f'<figcaption>{html.escape(caption)} (<a href="{name}">{name}</a>)</figcaption></figure>'
    )


def _summary_rows(record: RunRecord) -> list[tuple[str, Any]]:
    config, summary = record.config, record.summary or {}
    optimizer = _optimizer_settings(config)
    usage = summary.get("usage") or {}
    last = record.steps[-1] if record.steps else None
    settings = ", ".join(
        f"{k}={optimizer[k]}" for k in ("lr", "schedule", "epochs", "batch_size") if k in optimizer
    )
    return [
        ("config", "config.json" if config else "none (a sweep trial's run records none)"),
        ("module", config.get("module")),
        ("target model", _model_name(config.get("lm"))),
        ("optimizer model", _model_name(config.get("optimizer_lm"))),
        (
            "optimizer",
            f"{optimizer.get('optimizer', '?')} ({settings})"
            if settings
            else optimizer.get("optimizer"),
        ),
        (
            "stop reason",
            summary.get("stop_reason", "unfinished: no summary.json (killed or still running)"),
        ),
        ("seed validation score", summary.get("seed_val_score", record.seed_val_score)),
        ("best validation score", summary.get("val_score", last.incumbent_score if last else None)),
        ("seed test score", summary.get("seed_test_score")),
        ("best test score", summary.get("test_score")),
        (
            "constant answer (val / test)",
            None
            if record.baseline is None
            else f"{record.baseline.label!r}: {_cell(record.baseline.val_score)} / "
            f"{_cell(record.baseline.test_score)}",
        ),
        (
            "screened on training data",
            record.screens.line() if record.screens else "nothing (this optimizer does not screen)",
        ),
        (
            "accepted / gate decisions",
            f"{sum(g.decision.accepted for g in record.gates)} / {len(record.gates)}",
        ),
        ("what the gate could certify (pre-flight)", _preflight_text(summary)),
        (
            "significance spent / stopped early (validation calls saved)",
            f"{sum(g.decision.charged or 0.0 for g in record.gates):.4g} / "
            f"{sum(g.decision.stopped_early for g in record.gates)} "
            f"({sum(g.decision.calls_saved for g in record.gates)})",
        ),
        ("steps", len(record.steps)),
        ("model calls", usage.get("calls", last.calls if last else None)),
        ("tokens", usage.get("total_tokens")),
        ("cost (USD)", usage.get("cost_usd", last.cost_usd if last else None)),
        ("test scoring calls (own ledger)", (summary.get("test_usage") or {}).get("calls")),
    ]


def _preflight_text(summary: dict[str, Any]) -> str | None:
    from skillopt_dsl.evidence import Preflight

    data = summary.get("preflight")
    if not data:
        return None
    return Preflight.from_dict(data).statement()


def _preflight_warning(summary: dict[str, Any]) -> str | None:
    """The pre-flight's warning (a validation set too small to certify a useful gain, or a
    gate that tests nothing), or None."""
    from skillopt_dsl.evidence import Preflight

    data = summary.get("preflight")
    return Preflight.from_dict(data).warning if data else None


def _gate_rows(record: RunRecord) -> list[tuple[Any, ...]]:
    return [
        (
            g.step,
            g.epoch,
            g.decision.candidate_hash[:12],
            g.decision.candidate_score,
            g.decision.incumbent_score,
            g.decision.delta,
            f"{g.decision.examples_scored}/{g.decision.n_examples}",
            g.decision.alpha,
            g.decision.critical,
            g.decision.statistic,
            g.decision.p_value,
            g.decision.charged,
            g.decision.accepted,
            g.decision.reason,
        )
        for g in record.gates
    ]


def skill_diff(seed: str, best: str) -> str:
    """The line diff from the seed skill to the best skill (empty when no line differs).

    A change in the final newline alone is not shown; the two texts are compared line by line.
    """
    lines = difflib.unified_diff(
        seed.splitlines(),
        best.splitlines(),
        fromfile="skills/v0001.md (seed)",
        tofile="best_skill.md (best)",
        lineterm="",
    )
    return "".join(line + "\n" for line in lines)


def _diff_html(diff: str) -> str:
    if not diff:
        return "<p>The best skill has the same lines as the seed (see the gate log for why).</p>"
    classes = {"+": "add", "-": "del", "@": "hunk"}
    out = []
    for line in diff.splitlines():
        css = "" if line.startswith(("+++", "---")) else classes.get(line[:1], "")
        text = html.escape(line)
        out.append(f'<span class="{css}">{text}</span>' if css else text)
    return '<pre class="diff">' + "\n".join(out) + "</pre>"


def _run_sections(record: RunRecord, plots: Sequence[tuple[Path, str]]) -> list[str]:
    body = _scores_html(record)
    body += ["<h2>Summary</h2>", _table(("", "value"), _summary_rows(record)), "<h2>Plots</h2>"]
    body += [_figure(path, caption) for path, caption in plots]
    body += ["<h2>Gate log</h2>"]
    body += [
        _table(
            (
                "step",
                "epoch",
                "candidate",
                "candidate score",
                "incumbent score",
                "delta",
                "examples scored",
                "alpha",
                "needed",
                "statistic",
                "p-value",
                "alpha spent",
                "accepted",
                "reason",
            ),
            _gate_rows(record),
        )
        if record.gates
        else "<p>No candidate reached the gate.</p>"
    ]
    body += [
        "<h2>Seed → best skill</h2>",
        _diff_html(skill_diff(record.seed_text, record.best_text)),
    ]
    return body


# -- entry point -----------------------------------------------------------------------------


def write_report(run_dir: str | Path, *, out_dir: str | Path | None = None) -> list[Path]:
    """Write the PNG plots and `report.html` for a run or a sweep; returns the files written.

    Args:
        run_dir: a run directory; an OptunaLR run or a sweep folder (`sweep.json` and/or
            `trials/`) also gets the score-vs-learning-rate plot and a report per trial run.
        out_dir: where to write; default `run_dir` itself. The run's files are only read.

    Raises:
        UserInputError: `run_dir` does not exist or is a file.
        RunDirError: a file the report needs is missing or unreadable (the message names it).
    """
    path = _existing_dir(run_dir)
    target = Path(out_dir) if out_dir is not None else path
    is_run = (path / "events.jsonl").is_file() or not _looks_like_sweep(path)
    record = load_run(path) if is_run else None
    target.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    body: list[str] = []
    if record is not None:
        plots = _run_plots(record, target)
        written += [p for p, _ in plots]
        body += _run_sections(record, plots)
        written.append(_write_text(target / REPORT_MD, scores_markdown(record)))
    trials = _sweep_trials(path, record.sweep_trials if record else None)
    if trials is not None:
        files, sections = _sweep_part(trials, target)
        written += files
        body += sections
    kind = "run" if trials is None else "sweep"
    report = target / REPORT_HTML
    report.write_text(_page(f"skillopt-dsl {kind} report: {path.name}", body), encoding="utf-8")
    logger.info("wrote %s", report)
    return [*written, report]


def _write_text(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def _looks_like_sweep(path: Path) -> bool:
    return (path / "sweep.json").is_file() or (path / "trials").is_dir()


def _run_plots(record: RunRecord, target: Path) -> list[tuple[Path, str]]:
    return [
        (plot_scores(record, target / SCORES_PNG), "Validation score per step"),
        (plot_learning_rate(record, target / LR_PNG), "Learning-rate budget vs measured change"),
        (plot_cost(record, target / COST_PNG), "Calls and cost over time"),
    ]


def _sweep_part(trials: Sequence[SweepTrial], target: Path) -> tuple[list[Path], list[str]]:
    """The sweep plot, a report for every trial that is a complete run, and the trials table."""
    written = [plot_sweep(trials, target / SWEEP_PNG)]
    links: dict[int, str] = {}
    for trial in trials:
        if trial.run_dir is not None:
            files = write_report(trial.run_dir, out_dir=target / "trials" / trial.run_dir.name)
            written += files
            links[trial.number] = files[-1].relative_to(target).as_posix()
    rows = [
        (
            t.number,
            t.lr,
            json.dumps(t.params, sort_keys=True),
            t.value,
            t.state,
            _link(links.get(t.number)),
        )
        for t in trials
    ]
    sections = [
        "<h2>Sweep</h2>",
        _figure(written[0], "Validation score vs learning rate"),
        _table(("trial", "lr", "params", "value", "state", "report"), rows),
    ]
    return written, sections


# -- sweep plots of an Optuna study (used by OptunaLR; moved here from sweeps.py) -------------

from typing import TYPE_CHECKING  # noqa: E402  (kept with the sweep plots it serves)

if TYPE_CHECKING:
    import optuna

__all__ += ["write_sweep_plots"]


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
) -> Mapping[str, Any]:
    """The drawable plots of a study by file name (each a zero-argument callable)."""
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


def _model_name(identity: Any) -> Any:
    """The model string of a recorded `LM.identity()` (with its endpoint when one was set);
    older runs recorded the bare string."""
    if not isinstance(identity, dict):
        return identity
    base = identity.get("api_base")
    return f"{identity.get('model')} @ {base}" if base else identity.get("model")
