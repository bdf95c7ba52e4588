"""Stage: write one night's folder, `<project>/.skillopt/sleep/<night-id>/`.

Contents: `proposed/<file>` (only when something passed the gate), `diff.patch` (unified, against
the live files as read; both written by `skillopt_dsl.staged_change`, as a skill folder's are), `report.md` and `report.json` (`NightReport`), `evidence.jsonl` (each val
and test task's seed and candidate replies and scores), `sessions.jsonl` (each harvested session:
id, agent, cwd, start, redacted prompts, tool calls, reply characters), the mined tasks (`tasks/`, a Hugging Face
`Dataset`, and `tasks.jsonl`), the optimizer's run directory (`run/`) and `manifest.json`, which
pins the sha256 of every live file as read and of every proposal.

A night is written into `<night-id>.partial/` and renamed into place only when complete, so a
failed or killed run never leaves a half-written stage that looks finished; a run that stops on
an error writes `FAILED.json` (the error) into it, so the leftover folder is later described as
what it is (`describe_partial`).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypedDict

from pydantic import BaseModel, ConfigDict, Field

from skillopt_dsl.sleep.advice import cli_advice
from skillopt_dsl.sleep.judge import ScoreBook
from skillopt_dsl.sleep.project import SleepProject, atomic_write, sha256_of
from skillopt_dsl.sleep.tasks import Task, save_tasks
from skillopt_dsl.sleep.transcript import SessionRow
from skillopt_dsl.staged_change import pinned_hashes, stage_proposals
from skillopt_dsl.types import json_int

__all__ = [
    "EvidenceRow",
    "Manifest",
    "NightReport",
    "describe_partial",
    "mark_failed",
    "read_manifest",
    "remove_partials",
    "render_markdown",
    "write_stage",
]


class Manifest(BaseModel):
    """What a night staged: live-file hashes as read, proposal hashes (relative paths)."""

    model_config = ConfigDict(extra="forbid")

    night_id: str
    project: str
    created: str
    live: dict[str, str | None]
    proposed: dict[str, str]
    accepted: bool


class NightReport(BaseModel):
    """Every figure of one night (also rendered as report.md)."""

    model_config = ConfigDict(extra="forbid")

    night_id: str
    project: str
    created: str
    agent: str
    sources: list[str]
    home: str
    memory_file: str
    skill_file: str | None
    watermark_before: str | None
    watermark_after: str | None
    harvest: dict[str, Any]
    mining: dict[str, object]
    tasks: dict[str, int]
    blocked: str | None = None
    stop_reason: str | None = None
    seed_val: float | None = None
    candidate_val: float | None = None
    seed_test: float | None = None
    candidate_test: float | None = None
    gate_minimum_val: int | None = None
    gate_statement: str | None = None
    replay: str | None = None
    gate_decisions: list[dict[str, object]] = Field(default_factory=list)
    accepted: bool = False
    proposed_files: list[str] = Field(default_factory=list)
    no_regression: bool = False
    budget: dict[str, object] | None = None
    spend: dict[str, object] = Field(default_factory=dict)
    wall_s: float = 0.0
    auto_adopt: bool = False
    adopted: bool = False
    adopt_note: str | None = None

    @property
    def redactions(self) -> int:
        """Secrets redacted while harvesting."""
        return json_int(self.harvest.get("redactions_total", 0))


def _fmt(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"


def render_markdown(report: NightReport) -> str:
    """report.md: the night in a page."""
    h, t = report.harvest, report.tasks
    lines = [
        f"# Sleep night {report.night_id}",
        "",
        f"Project `{report.project}` · agent {report.agent} · memory file `{report.memory_file}`"
        + (f" · skill file `{report.skill_file}`" if report.skill_file else ""),
        "",
        "## Harvest (this project's sessions)",
        f"- sources: {', '.join(report.sources) or '—'} (home `{report.home}`)",
        f"- sessions kept: {h.get('sessions', 0)} (listed in `sessions.jsonl`); skipped: "
        f"{json.dumps(h.get('skipped', {}))}",
        f"- requests: {h.get('slash_commands', 0)} slash command(s) and "
        f"{h.get('queued_prompts', 0)} queued prompt(s) read; not requests: "
        f"{h.get('meta_prompts', 0)} meta, {h.get('compact_summaries', 0)} compaction "
        f"summaries, {h.get('notices', 0)} notices",
        f"- malformed lines: {h.get('malformed_lines', 0)}; unknown records: "
        f"{h.get('unknown_records', 0)} {json.dumps(h.get('unknown_types', {}))}; mirrored "
        f"Codex records counted once: {h.get('mirrored_records', 0)}",
        f"- secrets redacted: {report.redactions} {json.dumps(h.get('redactions', {}))}",
        f"- home-wide (every file read, other projects included): "
        f"{json.dumps(h.get('home_wide', {}))}",
        f"- watermark: {report.watermark_before or 'none'} → {report.watermark_after or 'none'}",
        "",
        "## Tasks",
        f"- mined: {t.get('total', 0)} (train {t.get('train', 0)}, val {t.get('val', 0)}, "
        f"test {t.get('test', 0)}); recurring clusters: {t.get('recurring', 0)}",
        f"- model-mined: {report.mining.get('model_tasks', 0)}; heuristic: "
        f"{report.mining.get('heuristic_tasks', 0)}; invalid model replies: "
        f"{report.mining.get('invalid_replies', 0)}"
        + (f"; {report.mining['model_dropped']}" if report.mining.get("model_dropped") else ""),
        f"- replays ran on: {report.replay or '—'}",
        "",
        "## Gate",
    ]
    lines += _gate_lines(report)
    lines += [
        "",
        "## Spend",
        f"- calls: {report.spend.get('calls', 0)}; tokens: {report.spend.get('tokens', 0)}; "
        f"USD: {report.spend.get('usd')}; budget: {json.dumps(report.budget)}",
        f"- wall time: {report.wall_s:.1f} s",
        "",
        "## Adoption",
        f"- auto-adopt: {'on' if report.auto_adopt else 'off'}; adopted: "
        f"{'yes' if report.adopted else 'no'}"
        + (f" ({report.adopt_note})" if report.adopt_note else ""),
    ]
    if report.accepted and not report.adopted:
        lines.append(
            f"- review `diff.patch`, then run `skillopt-dsl sleep adopt {report.night_id}`"
        )
    return "\n".join(lines) + "\n"


def _gate_lines(report: NightReport) -> list[str]:
    lines = [
        f"- val: seed {_fmt(report.seed_val)} → candidate {_fmt(report.candidate_val)}; "
        f"test: seed {_fmt(report.seed_test)} → candidate {_fmt(report.candidate_test)}",
        f"- gate decisions: {len(report.gate_decisions)}, accepted: "
        f"{sum(1 for d in report.gate_decisions if d.get('accepted'))}; the gate needs at least "
        f"{report.gate_minimum_val if report.gate_minimum_val is not None else '?'} val tasks"
        + ("; no-regression guard on" if report.no_regression else ""),
    ]
    if report.gate_statement:
        lines.append(f"- {cli_advice(report.gate_statement)}")
    for decision in report.gate_decisions[-5:]:
        lines.append(
            f"  - {'accepted' if decision.get('accepted') else 'rejected'}: {decision.get('reason')}"
        )
    if report.blocked:
        lines.append(f"- **nothing could be accepted**: {cli_advice(report.blocked)}")
    if report.stop_reason:
        lines.append(f"- optimizer stopped: {report.stop_reason}")
    verdict = (
        f"proposal staged: {', '.join(report.proposed_files)}"
        if report.accepted
        else "no proposal staged (nothing passed the gate)"
    )
    lines.append(f"- {verdict}")
    return lines


class EvidenceRow(TypedDict):
    """One line of a night's `evidence.jsonl`: a val/test task's seed and candidate scores,
    feedback and the candidate's reply (cut)."""

    task_id: str
    split: str
    intent: str
    weight: int
    seed_score: float | None
    candidate_score: float | None
    seed_feedback: str | None
    candidate_feedback: str | None
    candidate_reply: str | None


def evidence_rows(
    tasks: Sequence[Task], book: ScoreBook, seed_hash: str, best_hash: str
) -> list[EvidenceRow]:
    """One row per val/test task: seed and candidate scores, feedback and the candidate's reply."""
    rows: list[EvidenceRow] = []
    for task in tasks:
        if task.split == "train":
            continue
        seed, best = book.get(seed_hash, task.id), book.get(best_hash, task.id)
        rows.append(
            {
                "task_id": task.id,
                "split": task.split,
                "intent": task.intent[:300],
                "weight": task.weight,
                "seed_score": None if seed is None else seed.score,
                "candidate_score": None if best is None else best.score,
                "seed_feedback": None if seed is None else seed.feedback,
                "candidate_feedback": None if best is None else best.feedback,
                "candidate_reply": None if best is None else best.output[:1000],
            }
        )
    return rows


def write_stage(
    project: SleepProject,
    partial: Path,
    report: NightReport,
    *,
    live: Mapping[str, bytes | None],
    proposals: Mapping[str, bytes],
    tasks: Sequence[Task],
    evidence: Sequence[EvidenceRow],
    sessions: Sequence[SessionRow] = (),
) -> Path:
    """Fill `partial` with the night's files and rename it to the night's folder."""
    patch = stage_proposals(partial, proposals, live)
    atomic_write(partial / "diff.patch", patch.encode("utf-8"))
    save_tasks(tasks, partial)
    write_jsonl(partial / "evidence.jsonl", evidence)
    write_jsonl(partial / "sessions.jsonl", sessions)
    manifest = Manifest(
        night_id=report.night_id,
        project=report.project,
        created=report.created,
        live=pinned_hashes(live),
        proposed={rel: sha256_of(data) or "" for rel, data in sorted(proposals.items())},
        accepted=bool(proposals),
    )
    atomic_write(partial / "manifest.json", manifest.model_dump_json(indent=2).encode("utf-8"))
    write_report(partial, report)
    final = project.night_dir(report.night_id)
    os.replace(partial, final)
    return final


def write_jsonl(path: Path, rows: Sequence[Mapping[str, object]]) -> Path:
    """One JSON object a line (UTF-8, not ASCII-escaped)."""
    with path.open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    return path


def write_report(folder: Path, report: NightReport) -> None:
    """report.json and report.md, each written atomically."""
    atomic_write(folder / "report.json", report.model_dump_json(indent=2).encode("utf-8"))
    atomic_write(folder / "report.md", render_markdown(report).encode("utf-8"))


def read_manifest(night: Path) -> Manifest:
    """The manifest of a staged night."""
    return Manifest.model_validate_json((night / "manifest.json").read_text(encoding="utf-8"))


def read_report(night: Path) -> NightReport:
    """The report of a staged night."""
    return NightReport.model_validate_json((night / "report.json").read_text(encoding="utf-8"))


FAILED_NOTE = "FAILED.json"
"""Written into a night's `.partial` folder when the run stops on an error."""


def mark_failed(partial: Path, error: BaseException) -> None:
    """Record in `partial` why its run stopped (an error, or an interrupt), so the folder is
    later described as what it is, not as a killed run."""
    if not partial.is_dir():
        return
    why = "interrupted (Ctrl-C)" if isinstance(error, KeyboardInterrupt) else "failed"
    note = {"stopped": why, "error": f"{type(error).__name__}: {error}"[:500]}
    atomic_write(partial / FAILED_NOTE, json.dumps(note, indent=2).encode("utf-8"))


def describe_partial(partial: Path) -> str:
    """What a leftover `.partial` folder is: the stage of a run that failed (with its error),
    that was interrupted, or that was killed before it could say (no note)."""
    note_path = partial / FAILED_NOTE
    if note_path.exists():
        try:
            note = json.loads(note_path.read_text(encoding="utf-8"))
            return f"{partial.name}: the unfinished stage of a run that {note['stopped']}: {note['error']}"
        except (json.JSONDecodeError, KeyError, TypeError):
            pass
    return (
        f"{partial.name}: the unfinished stage of a run that was killed (or crashed) before "
        "it finished"
    )


def remove_partials(project: SleepProject) -> list[str]:
    """Delete the unfinished stages of runs that failed or were killed; returns what each
    was (`describe_partial`)."""
    removed = []
    for partial in project.partial_nights():
        removed.append(describe_partial(partial))
        shutil.rmtree(partial)
    return removed
