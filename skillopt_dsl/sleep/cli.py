"""`skillopt-dsl sleep ...`: harvest, review, run, status, diff, adopt, rollback, schedule,
unschedule, trigger-rows.

Every command prints a short summary (or, with `--json`, one JSON object for scripts); errors
print one line and exit 1 (`--debug` shows the traceback); progress goes to stderr as log lines.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, TypedDict

import typer

from skillopt_dsl.flags import takes_flag_records
from skillopt_dsl.lm import UsageLedger
from skillopt_dsl.sleep import advice
from skillopt_dsl.sleep.advice import cli_advice
from skillopt_dsl.sleep.cli_nights import (
    adopt_command,
    diff_command,
    rollback_command,
    status_command,
)
from skillopt_dsl.sleep.cli_options import (
    AllOpt,
    DebugOpt,
    HeuristicOpt,
    HomeOpt,
    JsonOpt,
    MaxCallsOpt,
    OptimizerApiBaseOpt,
    OptimizerModelOpt,
    ProjectOpt,
    SinceOpt,
    SourceOpt,
    emit_json,
    sleep_errors,
)
from skillopt_dsl.sleep.cli_review import review_command
from skillopt_dsl.sleep.cli_run_flags import (
    NightLimits,
    NightReads,
    NightReplay,
    NightSearch,
    night_budget,
    night_config,
    optimizer_lm,
)
from skillopt_dsl.sleep.cli_schedule import schedule_command, unschedule_command
from skillopt_dsl.sleep.cli_trigger import trigger_rows_command
from skillopt_dsl.sleep.errors import SleepError
from skillopt_dsl.sleep.mine import MineRecord
from skillopt_dsl.sleep.night import NightResult, SleepConfig, harvest_tasks, run_night
from skillopt_dsl.sleep.progress import NightProgress
from skillopt_dsl.sleep.project import SleepProject
from skillopt_dsl.sleep.review import ReviewFolder, validate_task_rows
from skillopt_dsl.sleep.stage import NightReport
from skillopt_dsl.sleep.transcript import HarvestRecord

__all__ = ["night_summary", "sleep_app"]

logger = logging.getLogger("skillopt_dsl.sleep.progress")

sleep_app = typer.Typer(
    help="Improve an agent's skill and memory files from its own session history, behind the gate.",
    no_args_is_help=True,
)


def night_summary(result: NightResult) -> str:
    """What `sleep run` prints after a night (without `--json`)."""
    r: NightReport = result.report

    def f(v: float | None) -> str:
        return "—" if v is None else f"{v:.3f}"

    lines = [
        f"Night {r.night_id} staged in {result.path}",
        f"  this project: {r.harvest.get('sessions', 0)} session(s)   tasks: "
        f"{r.tasks.get('total', 0)} (train {r.tasks.get('train', 0)}, val {r.tasks.get('val', 0)}, "
        f"test {r.tasks.get('test', 0)})   redactions: {r.redactions}",
        f"  replays: {r.replay or '—'}",
        f"  val: seed {f(r.seed_val)} -> candidate {f(r.candidate_val)}   "
        f"test: seed {f(r.seed_test)} -> candidate {f(r.candidate_test)}",
        f"  calls: {r.spend.get('calls', 0)}   tokens: {r.spend.get('tokens', 0)}   "
        f"wall: {r.wall_s:.1f} s",
    ]
    if r.mining.get("model_dropped"):
        lines.append(f"  mining: {r.mining['model_dropped']}")
    if r.gate_statement:
        lines.append(f"  {cli_advice(r.gate_statement)}")
    if r.blocked:
        lines.append(f"  nothing accepted: {cli_advice(r.blocked)}")
    lines += _run_advice(r)
    if r.accepted:
        follow = "adopted" if r.adopted else f"review: skillopt-dsl sleep diff {r.night_id}"
        lines.append(f"  proposal: {', '.join(r.proposed_files)} ({follow})")
    lines += [f"  {described.line()}" for described in result.described]
    return "\n".join(lines)


def _run_advice(report: NightReport) -> list[str]:
    """What to do after a night: sessions skipped as older than the watermark."""
    skipped = int(report.harvest.get("skipped", {}).get("before_watermark", 0))
    if not skipped:
        return []
    return [f"  {advice.reread(skipped, report.watermark_before)}"]


@sleep_app.command("run")
@takes_flag_records
def run_command(
    *,
    reads: NightReads,
    replay: NightReplay,
    limits: NightLimits,
    search: NightSearch,
    auto_adopt: Annotated[
        bool, typer.Option("--auto-adopt", help="Adopt right after the gate accepts.")
    ] = False,
    describe: Annotated[
        list[Path] | None,
        typer.Option(
            "--describe",
            help="After the night's own work, train this skill folder's description on the "
            "trigger rows of the project's sessions (repeatable; each folder gets an equal "
            "share of the budget). Staged under the night; only `skillopt-dsl skill-folder "
            "adopt` writes it, never --auto-adopt.",
        ),
    ] = None,
    as_json: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Harvest, mine, replay, consolidate and stage one night (live files are not touched)."""
    with sleep_errors(debug):
        from rich.console import Console

        config = night_config(
            reads, replay, limits, search, auto_adopt=auto_adopt, describe=tuple(describe or ())
        )
        if reads.tasks is not None:
            validate_task_rows(reads.tasks)
        with NightProgress(Console(stderr=True), max_calls=limits.max_calls) as progress:
            result = run_night(config, on_event=progress)
        if as_json:
            described = {"describe": [d.to_dict() for d in result.described]}
            emit_json(
                {"path": str(result.path), **result.report.model_dump()}
                | (described if result.described else {})
            )
        else:
            typer.echo(night_summary(result))


@sleep_app.command("harvest")
def harvest_command(
    project: ProjectOpt = Path("."),
    source: SourceOpt = "auto",
    home: HomeOpt = None,
    out: Annotated[
        Path | None,
        typer.Option("--out", help="The review folder (default .skillopt/sleep/review)."),
    ] = None,
    since: SinceOpt = None,
    read_all: AllOpt = False,
    optimizer_model: OptimizerModelOpt = None,
    optimizer_api_base: OptimizerApiBaseOpt = None,
    heuristic_only: HeuristicOpt = False,
    max_calls: MaxCallsOpt = None,
    as_json: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Harvest and mine tasks for review, merged into the review folder: rows already there
    (reviewed, edited or not) are kept, new tasks added, dropped ones not re-added. Review them
    with `sleep review`, then `sleep run --tasks <out>/tasks.jsonl --reviewed-only`. Sessions a
    night already read (older than the watermark) are skipped unless `--since` or `--all`; the
    watermark does not move."""
    with sleep_errors(debug):
        opened = SleepProject.open(project)
        config = SleepConfig(
            project=opened.path,
            source=source,
            home=home or Path.home(),
            optimizer_lm=optimizer_lm(optimizer_model, optimizer_api_base),
            mine_with_model=not heuristic_only,
        )
        after = _since(since, read_all)
        with opened.lock("sleep harvest"):
            harvested, found, stats = harvest_tasks(
                opened,
                config,
                UsageLedger(night_budget(max_calls, None, None)),
                since=after,
                read_all=read_all,
            )
            review = ReviewFolder(out or opened.sleep_dir / "review")
            rows = [s.review_row() for s in harvested.sessions]
            merged = review.merge(found, rows, fractions=config.fractions)
        watermark = opened.watermark()
        data: HarvestSummary = {
            "sessions_path": str(review.sessions_path),
            "tasks_path": str(review.tasks_path),
            "dataset_path": str(review.folder / "tasks"),
            "read_after": "everything" if read_all else (after or watermark),
            "watermark": watermark.isoformat() if watermark else None,
            "review": merged.to_dict(),
            "harvest": harvested.stats.to_dict(),
            "mining": stats.to_dict(),
        }
        if as_json:
            emit_json(data)
        else:
            typer.echo(_harvest_summary(data, review.folder, str(config.home)))


def _since(value: str | None, read_all: bool) -> datetime | None:
    """`--since` as an aware time (a date or a zone-less time is UTC); refuses `--all` too."""
    if value is None:
        return None
    if read_all:
        raise SleepError("pass --since or --all, not both")
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise SleepError(
            f"--since takes an ISO-8601 date or time (2026-01-20, 2026-01-20T08:00:00+01:00), "
            f"got {value!r}"
        ) from None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


class HarvestSummary(TypedDict):
    """What `sleep harvest` prints (`--json` prints it as it is)."""

    sessions_path: str
    tasks_path: str
    dataset_path: str
    read_after: str | datetime | None
    watermark: str | None
    review: dict[str, int]
    harvest: HarvestRecord
    mining: MineRecord


def _harvest_summary(data: HarvestSummary, folder: Path, home_dir: str) -> str:
    h, m, home = data["harvest"], data["mining"], data["harvest"]["home_wide"]
    r = data["review"]
    lines = [
        f"this project: {h['sessions']} session(s), {m['tasks']} task(s) "
        f"({m['model_tasks']} model-mined, {m['heuristic_tasks']} heuristic), "
        f"{h['redactions_total']} redaction(s), {h['malformed_lines']} malformed line(s), "
        f"{h['unknown_records']} unknown record(s)"
        + (f" {json.dumps(h['unknown_types'])}" if h["unknown_types"] else ""),
        f"  requests: {h['slash_commands']} slash command(s), {h['queued_prompts']} queued "
        f"prompt(s); not requests: {h['meta_prompts']} meta, {h['compact_summaries']} "
        f"compaction summaries, {h['notices']} notices",
        f"home-wide (every file under the home): {home['files_read']} file(s), "
        f"{home['sessions_read']} session(s), {home['skipped'].get('other_project', 0)} of other "
        f"projects, {home['unknown_records']} unknown record(s)",
    ]
    if m.get("model_dropped"):
        lines.append(f"mining: {m['model_dropped']}")
    lines += _harvest_advice(data, home_dir)
    lines += [
        f"review folder: {r['kept']} task(s) kept as they were ({r['reviewed']} reviewed), "
        f"{r['added']} added"
        + (f", {r['skipped_dropped']} you dropped not re-added" if r["skipped_dropped"] else ""),
        f"sessions read: {data['sessions_path']}",
        f"tasks: {folder / 'tasks.jsonl'}; {advice.train_on_review(str(folder / 'tasks.jsonl'))}",
    ]
    return "\n".join(lines)


def _harvest_advice(data: HarvestSummary, home_dir: str) -> list[str]:
    """Why a harvest read fewer sessions than there are, and how to read them."""
    h = data["harvest"]
    skipped = int(h["skipped"].get("before_watermark", 0))
    if skipped:
        return [advice.reread(skipped, data["watermark"])]
    if h["sessions"] == 0:
        return [advice.no_sessions(home_dir)]
    return []


# The commands of their own rooms, registered in the order `--help` lists them.
sleep_app.command("review")(review_command)
sleep_app.command("status")(status_command)
sleep_app.command("diff")(diff_command)
sleep_app.command("adopt")(adopt_command)
sleep_app.command("rollback")(rollback_command)
sleep_app.command("schedule")(schedule_command)
sleep_app.command("unschedule")(unschedule_command)
sleep_app.command("trigger-rows")(trigger_rows_command)
