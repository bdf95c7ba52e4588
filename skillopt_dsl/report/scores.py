"""The scores table of a run: the seed, the best constant answer and the best skill, on
validation and test, side by side (markdown)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from skillopt_dsl.baselines import baseline_warning
from skillopt_dsl.report.record import RunRecord


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


def score_warning(record: RunRecord) -> str | None:
    validation, test = score_rows(record)
    if validation.best is None:
        return None
    return baseline_warning(record.baseline, validation.best, test.best)


def score_header(record: RunRecord) -> list[str]:
    constant = [] if record.baseline is None else [f"constant {record.baseline.label!r}"]
    return ["split", "seed", *constant, "best"]


def score_cells(record: RunRecord, row: ScoreRow) -> list[float | None]:
    constant = [] if record.baseline is None else [row.constant]
    return [row.seed, *constant, row.best]


def baseline_note(record: RunRecord) -> str:
    if record.baseline is None:
        return "No constant baseline: the output has no fixed label set (compare with the seed)."
    return (
        f"Constant answer: {record.baseline.label!r} for every example, the best on validation "
        "(scored without any model call)."
    )


def scores_markdown(record: RunRecord) -> str:
    """The scores table, the baseline note and the warning (if any), as markdown."""
    header = score_header(record)
    lines = [f"# {record.config.get('module') or record.path.name}: seed vs best", ""]
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in score_rows(record):
        cells = ["-" if v is None else f"{v:.4f}" for v in score_cells(record, row)]
        lines.append(f"| {row.split} | " + " | ".join(cells) + " |")
    lines += ["", baseline_note(record)]
    warning = score_warning(record)
    if warning is not None:
        lines += ["", f"**Warning:** {warning}"]
    small = preflight_warning(record.summary or {})
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


def preflight_text(summary: dict[str, Any]) -> str | None:
    from skillopt_dsl.evidence import Preflight

    data = summary.get("preflight")
    if not data:
        return None
    return Preflight.from_dict(data).statement()


def preflight_warning(summary: dict[str, Any]) -> str | None:
    """The pre-flight's warning (a validation set too small to certify a useful gain, or a
    gate that tests nothing), or None."""
    from skillopt_dsl.evidence import Preflight

    data = summary.get("preflight")
    return Preflight.from_dict(data).warning if data else None
