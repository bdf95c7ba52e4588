"""The report's pages: `report.html` (plots embedded, scores, summary, gate log, the seed ->
best diff) and `report.md`, for a run or a sweep."""

from __future__ import annotations

import base64
import difflib
import html
import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

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
from skillopt_dsl.report.record import (
    RunRecord,
    existing_dir,
    load_run,
    model_name,
    optimizer_settings,
)
from skillopt_dsl.report.scores import (
    baseline_note,
    preflight_text,
    score_cells,
    score_header,
    score_rows,
    score_warning,
    scores_markdown,
)
from skillopt_dsl.report.sweep import SweepTrial, sweep_trials

logger = logging.getLogger(__name__)

REPORT_HTML = "report.html"


REPORT_MD = "report.md"


def _scores_html(record: RunRecord) -> list[str]:
    rows = [(row.split, *score_cells(record, row)) for row in score_rows(record)]
    body = ["<h2>Scores</h2>", html_table(score_header(record), rows)]
    body.append(f"<p>{html.escape(baseline_note(record))}</p>")
    warning = score_warning(record)
    if warning is not None:
        body.append(f'<p class="no"><strong>Warning:</strong> {html.escape(warning)}</p>')
    return body


_STYLE = """
body{font-family:system-ui,sans-serif;max-width:1000px;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:.25em .6em;
text-align:left;font-size:.9em}th{background:#f3f3f3}img{max-width:100%}figure{margin:1.5em 0}
pre.diff{background:#f8f8f8;padding:1em;overflow-x:auto;font-size:.85em}
.add{color:#1a7f37}.del{color:#cf222e}.hunk{color:#8250df}.ok{color:#1a7f37}.no{color:#cf222e}
"""


def html_page(title: str, body: Sequence[str]) -> str:
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head>\n<body>\n"
        f"<h1>{html.escape(title)}</h1>\n" + "\n".join(body) + "\n</body></html>\n"
    )


def html_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
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


def _stop_reason(summary: dict[str, Any]) -> str:
    """The summary's stop reason, with its detail where it has one (an older run has none)."""
    reason = summary.get("stop_reason", "unfinished: no summary.json (killed or still running)")
    detail = summary.get("stop_detail")
    return str(reason) if detail is None else f"{reason} ({detail})"


def _summary_rows(record: RunRecord) -> list[tuple[str, Any]]:
    config, summary = record.config, record.summary or {}
    optimizer = optimizer_settings(config)
    usage = summary.get("usage") or {}
    last = record.steps[-1] if record.steps else None
    settings = ", ".join(
        f"{k}={optimizer[k]}" for k in ("lr", "schedule", "epochs", "batch_size") if k in optimizer
    )
    return [
        ("config", "config.json" if config else "none (a sweep trial's run records none)"),
        ("module", config.get("module")),
        ("target model", model_name(config.get("lm"))),
        ("optimizer model", model_name(config.get("optimizer_lm"))),
        (
            "optimizer",
            f"{optimizer.get('optimizer', '?')} ({settings})"
            if settings
            else optimizer.get("optimizer"),
        ),
        (
            "stop reason",
            _stop_reason(summary),
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
        ("what the gate could certify (pre-flight)", preflight_text(summary)),
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
    body += ["<h2>Summary</h2>", html_table(("", "value"), _summary_rows(record)), "<h2>Plots</h2>"]
    body += [_figure(path, caption) for path, caption in plots]
    body += ["<h2>Gate log</h2>"]
    body += [
        html_table(
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
    path = existing_dir(run_dir)
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
    trials = sweep_trials(path, record.sweep_trials if record else None)
    if trials is not None:
        files, sections = _sweep_part(trials, target)
        written += files
        body += sections
    kind = "run" if trials is None else "sweep"
    report = target / REPORT_HTML
    report.write_text(html_page(f"skillopt-dsl {kind} report: {path.name}", body), encoding="utf-8")
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
        html_table(("trial", "lr", "params", "value", "state", "report"), rows),
    ]
    return written, sections
