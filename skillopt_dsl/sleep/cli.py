"""`skillopt-dsl sleep ...`: harvest, review, run, status, diff, adopt, rollback, schedule,
unschedule.

Every command prints a short summary (or, with `--json`, one JSON object for scripts); errors
print one line and exit 1 (`--debug` shows the traceback); progress goes to stderr as log lines.
"""

from __future__ import annotations

import json
import logging
import shlex
import sys
from collections.abc import Mapping
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Literal

import typer

from skillopt_dsl.cli_harness import handled
from skillopt_dsl.gate import Gate
from skillopt_dsl.lm import Budget, UsageLedger
from skillopt_dsl.lm.endpoint import API_BASE_ENV, OPTIMIZER_API_BASE_ENV, at_api_base
from skillopt_dsl.sleep import advice
from skillopt_dsl.sleep.adopt import adopt, journal_pending, night_status, recover, rollback
from skillopt_dsl.sleep.advice import cli_advice
from skillopt_dsl.sleep.agent_replay import settings_from
from skillopt_dsl.sleep.errors import SleepError
from skillopt_dsl.sleep.night import NightResult, SleepConfig, harvest_tasks, run_night
from skillopt_dsl.sleep.progress import NightProgress
from skillopt_dsl.sleep.project import SleepProject
from skillopt_dsl.sleep.review import ReviewFolder, parse_checks, validate_task_rows
from skillopt_dsl.sleep.schedule import SystemCrontab, schedule, systemd_units, unschedule
from skillopt_dsl.sleep.stage import NightReport, describe_partial
from skillopt_dsl.sleep.tasks import Check, Task, load_tasks

__all__ = ["sleep_app"]

logger = logging.getLogger("skillopt_dsl.sleep.progress")

sleep_app = typer.Typer(
    help="Improve an agent's skill and memory files from its own session history, behind the gate.",
    no_args_is_help=True,
)

ProjectOpt = Annotated[
    Path, typer.Option("--project", help="The project folder (its sessions, its memory file).")
]
SourceOpt = Annotated[
    str, typer.Option("--source", help="claude, codex, jsonl or auto (every source found).")
]
HomeOpt = Annotated[
    Path | None, typer.Option("--home", help="Where the agents keep transcripts (default: ~).")
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object (for scripts).")]
DebugOpt = Annotated[bool, typer.Option("--debug", help="Show tracebacks and debug logs.")]
OptimizerModelOpt = Annotated[
    str | None,
    typer.Option(
        "--optimizer-model", help="Model that mines tasks, proposes edits, judges rubrics."
    ),
]
OptimizerApiBaseOpt = Annotated[
    str | None,
    typer.Option(
        "--optimizer-api-base",
        envvar=OPTIMIZER_API_BASE_ENV,
        help="URL of the server the optimizer model runs on (with --optimizer-model).",
    ),
]
MaxCallsOpt = Annotated[int | None, typer.Option("--max-calls", min=0, help="Night's call limit.")]
MaxTokensOpt = Annotated[
    int | None, typer.Option("--max-tokens", min=0, help="Night's token limit.")
]
MaxUsdOpt = Annotated[float | None, typer.Option("--max-usd", min=0.0, help="Night's USD limit.")]
HeuristicOpt = Annotated[
    bool,
    typer.Option(
        "--heuristic-only",
        help="Mine tasks without a model: each session's first request, the corrections you "
        'gave ("use X, not Y") and your feedback. No mining calls. Without it, the optimizer '
        "model proposes tasks and is dropped at once if its first reply holds no valid task.",
    ),
]


def _handled(debug: bool) -> AbstractContextManager[None]:
    """The command-line error harness (`skillopt_dsl.cli_harness`), with Sleep's progress
    logger and its Ctrl-C line."""
    return handled(
        debug,
        progress_logger="skillopt_dsl.sleep.progress",
        interrupted="Interrupted; the next Sleep command cleans up.",
    )


def _emit(data: Mapping[str, Any]) -> None:
    typer.echo(json.dumps(data, indent=2, default=str))


def _budget(calls: int | None, tokens: int | None, usd: float | None) -> Budget | None:
    if calls is None and tokens is None and usd is None:
        return None
    return Budget(max_calls=calls, max_tokens=tokens, max_usd=usd)


def _summary(result: NightResult) -> str:
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
    return "\n".join(lines)


def _run_advice(report: NightReport) -> list[str]:
    """What to do after a night: sessions skipped as older than the watermark."""
    skipped = int(report.harvest.get("skipped", {}).get("before_watermark", 0))
    if not skipped:
        return []
    return [f"  {advice.reread(skipped, report.watermark_before)}"]


@sleep_app.command("run")
def run_command(
    project: ProjectOpt = Path("."),
    source: SourceOpt = "auto",
    home: HomeOpt = None,
    agent: Annotated[
        str | None, typer.Option("--agent", help="claude (CLAUDE.md) or codex (AGENTS.md).")
    ] = None,
    skill_file: Annotated[
        str | None, typer.Option("--skill-file", help="A skill document to train too.")
    ] = None,
    model: Annotated[
        str | None,
        typer.Option(
            "--model",
            help="Replay on this model (default: sleep.json's replay, else local/smollm2-135m).",
        ),
    ] = None,
    replay_agent: Annotated[
        str | None,
        typer.Option(
            "--replay-agent",
            help="Replay through your own agent CLI in a copy of the project: claude "
            "(claude -p) or codex (codex exec). Needs the agent's API key in the environment.",
        ),
    ] = None,
    agent_timeout: Annotated[
        float, typer.Option("--agent-timeout", min=1.0, help="Seconds per agent replay.")
    ] = 600.0,
    agent_usd_per_run: Annotated[
        float | None,
        typer.Option(
            "--agent-usd-per-run",
            min=0.0,
            help="Declared worst-case USD of one agent replay (needed with --max-usd).",
        ),
    ] = None,
    optimizer_model: OptimizerModelOpt = None,
    api_base: Annotated[
        str | None,
        typer.Option(
            "--api-base",
            envvar=API_BASE_ENV,
            help="URL of the server the replay model runs on (with --model openai/<name>).",
        ),
    ] = None,
    optimizer_api_base: OptimizerApiBaseOpt = None,
    max_calls: MaxCallsOpt = None,
    max_tokens: MaxTokensOpt = None,
    max_usd: MaxUsdOpt = None,
    no_regression: Annotated[
        bool, typer.Option("--no-regression", help="Reject a candidate worse on any val task.")
    ] = False,
    auto_adopt: Annotated[
        bool, typer.Option("--auto-adopt", help="Adopt right after the gate accepts.")
    ] = False,
    judge: Annotated[str, typer.Option("--judge", help="soft (share of checks) or hard.")] = "soft",
    no_rubric: Annotated[bool, typer.Option("--no-rubric", help="Do not judge rubrics.")] = False,
    heuristic_only: HeuristicOpt = False,
    tasks: Annotated[
        Path | None, typer.Option("--tasks", help="Use these (reviewed) tasks instead.")
    ] = None,
    reviewed_only: Annotated[
        bool, typer.Option("--reviewed-only", help="Only tasks marked reviewed: true.")
    ] = False,
    epochs: Annotated[int, typer.Option("--epochs", min=1, help="Optimizer epochs.")] = 1,
    batch_size: Annotated[
        int,
        typer.Option(
            "--batch-size",
            min=1,
            help="Training tasks per optimizer step; larger means fewer gate decisions, each "
            "tested with more of the night's significance.",
        ),
    ] = 8,
    gate_kind: Annotated[
        str,
        typer.Option(
            "--gate",
            help="paired (default: a paired significance test, noise-safe) or mean-only "
            "(any strict mean gain passes: on few val tasks a useless edit passes often).",
        ),
    ] = "paired",
    seed: Annotated[int, typer.Option("--seed")] = 0,
    threads: Annotated[int, typer.Option("--threads", min=1)] = 4,
    # -- dreams and cross-night memory (issue 26; skillopt_dsl.sleep.dreams / .rejections) --
    dream_variants: Annotated[
        int,
        typer.Option(
            "--dream-variants",
            min=0,
            help="Reworded copies of each training task (training only; 0 = off).",
        ),
    ] = 0,
    contrastive: Annotated[
        bool,
        typer.Option("--contrastive", help="Show the optimizer GOOD/BAD reply pairs per task."),
    ] = False,
    remember_rejected: Annotated[
        bool,
        typer.Option(
            "--remember-rejected",
            help="Never propose again an edit an earlier night's gate rejected.",
        ),
    ] = False,
    as_json: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Harvest, mine, replay, consolidate and stage one night (live files are not touched)."""
    with _handled(debug):
        from rich.console import Console

        from skillopt_dsl.optimizers import GradientText

        config = SleepConfig(
            project=project,
            source=source,
            home=home or Path.home(),
            agent=_agent(agent),
            skill_file=skill_file,
            lm=at_api_base(model, api_base),
            replay_agent=None
            if replay_agent is None
            else settings_from(
                _replay_agent(replay_agent),
                timeout_s=agent_timeout,
                max_usd_per_run=agent_usd_per_run,
            ),
            optimizer_lm=_optimizer_lm(optimizer_model, optimizer_api_base),
            budget=_budget(max_calls, max_tokens, max_usd),
            optimizer=GradientText(epochs=epochs, batch_size=batch_size),
            gate=_gate(gate_kind),
            no_regression=no_regression,
            auto_adopt=auto_adopt,
            judge_mode=_judge(judge),
            rubric_judge=not no_rubric,
            mine_with_model=not heuristic_only,
            tasks=tasks,
            reviewed_only=reviewed_only,
            seed=seed,
            threads=threads,
            dream_variants=dream_variants,
            contrastive=contrastive,
            remember_rejected=remember_rejected,
        )
        if tasks is not None:
            validate_task_rows(tasks)
        with NightProgress(Console(stderr=True), max_calls=max_calls) as progress:
            result = run_night(config, on_event=progress)
        if as_json:
            _emit({"path": str(result.path), **result.report.model_dump()})
        else:
            typer.echo(_summary(result))


def _optimizer_lm(model: str | None, api_base: str | None) -> Any:
    """`--optimizer-model` served at `--optimizer-api-base` (when given)."""
    return at_api_base(
        model,
        api_base,
        flag="--optimizer-api-base",
        model_flag="--optimizer-model",
        env=OPTIMIZER_API_BASE_ENV,
    )


def _agent(value: str | None) -> Literal["claude", "codex"] | None:
    if value is None or value in ("claude", "codex"):
        return value  # type: ignore[return-value]
    raise SleepError(f"--agent must be claude or codex, got {value!r}")


def _replay_agent(value: str) -> Literal["claude", "codex"]:
    if value in ("claude", "codex"):
        return value  # type: ignore[return-value]
    raise SleepError(f"--replay-agent must be claude or codex, got {value!r}")


def _gate(value: str) -> Gate | None:
    """`--gate`: None for the default gate (paired test), `Gate.mean_only()` for mean-only."""
    if value == "paired":
        return None
    if value == "mean-only":
        return Gate.mean_only()
    raise SleepError(f"--gate must be paired or mean-only, got {value!r}")


def _judge(value: str) -> Literal["soft", "hard"]:
    if value in ("soft", "hard"):
        return value  # type: ignore[return-value]
    raise SleepError(f"--judge must be soft or hard, got {value!r}")


SinceOpt = Annotated[
    str | None,
    typer.Option(
        "--since",
        help="Read sessions that ended after this time (ISO-8601, e.g. 2026-01-20 or "
        "2026-01-20T08:00:00+01:00; a date or a time without a zone is UTC) instead of "
        "after the watermark.",
    ),
]
AllOpt = Annotated[
    bool,
    typer.Option("--all", help="Read every session, ignoring the watermark."),
]


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
    with _handled(debug):
        opened = SleepProject.open(project)
        config = SleepConfig(
            project=opened.path,
            source=source,
            home=home or Path.home(),
            optimizer_lm=_optimizer_lm(optimizer_model, optimizer_api_base),
            mine_with_model=not heuristic_only,
        )
        after = _since(since, read_all)
        with opened.lock("sleep harvest"):
            harvested, found, stats = harvest_tasks(
                opened,
                config,
                UsageLedger(_budget(max_calls, None, None)),
                since=after,
                read_all=read_all,
            )
            review = ReviewFolder(out or opened.sleep_dir / "review")
            merged = review.merge(found, [s.review_row() for s in harvested.sessions])
        watermark = opened.watermark()
        data: dict[str, Any] = {
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
            _emit(data)
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


def _harvest_summary(data: Mapping[str, Any], folder: Path, home_dir: str) -> str:
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


def _harvest_advice(data: Mapping[str, Any], home_dir: str) -> list[str]:
    """Why a harvest read fewer sessions than there are, and how to read them."""
    h = data["harvest"]
    skipped = int(h["skipped"].get("before_watermark", 0))
    if skipped:
        return [advice.reread(skipped, data["watermark"])]
    if h["sessions"] == 0:
        return [advice.no_sessions(home_dir)]
    return []


@sleep_app.command("review")
def review_command(
    project: ProjectOpt = Path("."),
    tasks_file: Annotated[
        Path | None,
        typer.Option(
            "--tasks", help="The tasks file (default .skillopt/sleep/review/tasks.jsonl)."
        ),
    ] = None,
    accept: Annotated[
        str | None, typer.Option("--accept", help="Mark this task (id or id prefix) reviewed.")
    ] = None,
    drop: Annotated[
        str | None,
        typer.Option("--drop", help="Remove this task; later harvests do not add it again."),
    ] = None,
    edit: Annotated[
        str | None,
        typer.Option(
            "--edit",
            help="Change this task (with --intent, --rubric, --checks, "
            "--add-check); an edited task is marked reviewed.",
        ),
    ] = None,
    intent: Annotated[str | None, typer.Option("--intent", help="New request text.")] = None,
    rubric: Annotated[
        str | None, typer.Option("--rubric", help='New rubric ("" removes it).')
    ] = None,
    checks: Annotated[
        str | None,
        typer.Option(
            "--checks",
            help='Replace the checks: a JSON list, e.g. \'[{"kind": "max_chars", "limit": 400}]\'.',
        ),
    ] = None,
    add_check: Annotated[
        list[str] | None,
        typer.Option(
            "--add-check",
            help="Add one check (JSON object), e.g. "
            '\'{"kind": "contains", "value": "Decimal"}\'; repeatable.',
        ),
    ] = None,
    as_json: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """List the tasks to review with their checks, or accept, drop or edit one. Check kinds
    and their fields: contains/not_contains (value, case_sensitive), regex (pattern),
    max_chars (limit), section_present (heading), no_refusal; see docs/sleep.md."""
    with _handled(debug):
        opened = SleepProject.open(project)
        review = ReviewFolder(
            tasks_file.parent if tasks_file is not None else opened.sleep_dir / "review"
        )
        if tasks_file is not None and tasks_file.name != "tasks.jsonl":
            raise SleepError(f"--tasks must name a tasks.jsonl file, got {tasks_file}")
        actions = [a for a in (accept, drop, edit) if a is not None]
        if len(actions) > 1:
            raise SleepError("pass one of --accept, --drop or --edit at a time")
        if edit is None and any(v is not None for v in (intent, rubric, checks, add_check)):
            raise SleepError("--intent, --rubric, --checks and --add-check need --edit ID")
        with opened.lock("sleep review"):
            changed = _review_action(review, accept, drop, edit, intent, rubric, checks, add_check)
            tasks = review.tasks()
        if as_json:
            _emit(
                {
                    "tasks_path": str(review.tasks_path),
                    "changed": None if changed is None else changed[1].model_dump(mode="json"),
                    "action": None if changed is None else changed[0],
                    "tasks": [t.model_dump(mode="json") for t in tasks],
                }
            )
            return
        if changed is not None:
            typer.echo(f"{changed[0]} {changed[1].id}: {_short(changed[1].intent)}")
        typer.echo(_review_listing(review, tasks))


def _review_action(
    review: ReviewFolder,
    accept: str | None,
    drop: str | None,
    edit: str | None,
    intent: str | None,
    rubric: str | None,
    checks: str | None,
    add_check: list[str] | None,
) -> tuple[str, Task] | None:
    """Apply the one action asked for; None when only listing."""
    if accept is not None:
        return "accepted", review.accept(accept)
    if drop is not None:
        return "dropped", review.drop(drop)
    if edit is None:
        return None
    added = [c for text in add_check or [] for c in parse_checks(text)]
    replaced = parse_checks(checks) if checks is not None else None
    if replaced is None and not added and intent is None and rubric is None:
        raise SleepError("--edit needs at least one of --intent, --rubric, --checks, --add-check")
    return "edited", review.edit(
        edit, intent=intent, rubric=rubric, checks=replaced, add_checks=added
    )


def _short(text: str, limit: int = 90) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def _check_line(check: Check) -> str:
    """A check as the listing shows it: what it tests, and where it was mined from."""
    source = getattr(check, "source", None)
    return check.describe() + (f" [{Path(source).name}]" if source else "")


def _review_listing(review: ReviewFolder, tasks: list[Task]) -> str:
    """Each task with its split, origin and checks; then what to do next."""
    if not tasks:
        return (
            f"no tasks in {review.tasks_path}; mine some with `skillopt-dsl sleep harvest` "
            "(`--all` re-reads sessions a night already read)"
        )
    reviewed = sum(1 for t in tasks if t.reviewed)
    lines = [f"{len(tasks)} task(s) in {review.tasks_path}, {reviewed} reviewed"]
    for task in tasks:
        mark = "x" if task.reviewed else " "
        lines.append(f"[{mark}] {task.id}  {task.split:<5} {task.origin:<9} {_short(task.intent)}")
        described = "; ".join(_check_line(c) for c in task.checks) or "none"
        lines.append(f"      checks: {described}")
        if task.rubric:
            lines.append(f"      rubric: {_short(task.rubric)}")
    if all(not t.rubric and all(c.kind == "no_refusal" for c in t.checks) for t in tasks):
        lines.append(f"next: {advice.only_no_refusal('this review', len(tasks))}")
    else:
        lines.append(f"next: {advice.train_on_review(str(review.tasks_path))}")
    return "\n".join(lines)


@sleep_app.command("status")
def status_command(
    project: ProjectOpt = Path("."), as_json: JsonOpt = False, debug: DebugOpt = False
) -> None:
    """Staged nights, the watermark, the lock holder and any interrupted adoption."""
    with _handled(debug):
        opened = SleepProject.open(project)
        watermark = opened.watermark()
        data: dict[str, Any] = {
            "project": str(opened.path),
            "watermark": watermark.isoformat() if watermark else None,
            "locked_by": json.loads(opened.lock_path.read_text())
            if opened.lock_path.exists()
            else None,
            "interrupted_adopt": journal_pending(opened),
            "nights": night_status(opened),
        }
        if as_json:
            _emit(data)
            return
        typer.echo(f"{opened.path}: watermark {data['watermark'] or 'none'}")
        if data["locked_by"]:
            typer.echo(f"  locked by {data['locked_by']}")
        if data["interrupted_adopt"]:
            typer.echo("  an adoption was interrupted; the next sleep command undoes it")
        if not data["nights"]:
            typer.echo("  no staged night yet; run `skillopt-dsl sleep run`")
        for row in data["nights"]:
            typer.echo(_status_row(row))
        for line in _status_advice(opened, bool(data["locked_by"])):
            typer.echo(f"  {line}")


def _status_advice(opened: SleepProject, locked: bool) -> list[str]:
    """Leftover unfinished stages (what each is) and tasks that cannot teach anything."""
    lines = []
    for partial in opened.partial_nights():
        what = describe_partial(partial)
        lines.append(
            f"{what} (the night running now)"
            if locked
            else f"leftover {what}; the next `skillopt-dsl sleep run` removes it"
        )
    nights = opened.nights()
    if nights and (nights[-1] / "tasks.jsonl").exists():
        tasks = load_tasks(nights[-1] / "tasks.jsonl")
        if tasks and all(
            not t.rubric and t.checks and all(c.kind == "no_refusal" for c in t.checks)
            for t in tasks
        ):
            lines.append(advice.only_no_refusal(f"night {nights[-1].name}", len(tasks)))
    return lines


def _status_row(row: Mapping[str, Any]) -> str:
    """One night in `sleep status`: its figures, or why it has none."""
    head = f"  {row['night']}: {row['sessions']} session(s), {row['tasks']} task(s)"
    seed, candidate = row["seed_val"], row["candidate_val"]
    if seed is not None:
        scores = (
            f"val {seed:.3f} -> {candidate:.3f}" if candidate is not None else f"val {seed:.3f}"
        )
    elif row.get("blocked"):
        scores = f"no val scores: {row['blocked']}"
    else:
        scores = "no val scores (nothing was replayed)"
    verdict = "proposal staged" if row["proposal"] else "no proposal"
    if row["adopted"]:
        verdict += " (adopted)"
    return f"{head}, {scores}; {verdict}"


@sleep_app.command("diff")
def diff_command(
    night: Annotated[str | None, typer.Argument(help="Night id (default: newest).")] = None,
    project: ProjectOpt = Path("."),
    debug: DebugOpt = False,
) -> None:
    """Print a night's unified diff against the live files as staged."""
    with _handled(debug):
        opened = SleepProject.open(project)
        nights = opened.nights()
        if not nights:
            raise SleepError(f"no staged night in {opened.sleep_dir}; run `sleep run` first")
        folder = opened.night_dir(night) if night else nights[-1]
        patch = folder / "diff.patch"
        if not patch.exists():
            raise SleepError(f"no staged night {folder.name!r}; see `sleep status`")
        text = patch.read_text(encoding="utf-8")
        typer.echo(text if text else f"night {folder.name} staged no proposal", nl=not text)


@sleep_app.command("adopt")
def adopt_command(
    night: Annotated[
        str | None, typer.Argument(help="Night id (default: newest proposal).")
    ] = None,
    project: ProjectOpt = Path("."),
    as_json: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Replace the live files with a night's proposal (refuses changed live files)."""
    with _handled(debug):
        opened = SleepProject.open(project)
        with opened.lock("sleep adopt"):
            receipt = adopt(opened, night)
        if as_json:
            _emit(receipt.model_dump())
        else:
            files = ", ".join(c.path for c in receipt.files)
            typer.echo(
                f"adopted night {receipt.night_id}: {files} (undo: skillopt-dsl sleep rollback)"
            )


@sleep_app.command("rollback")
def rollback_command(
    project: ProjectOpt = Path("."),
    force: Annotated[
        bool, typer.Option("--force", help="Roll back even over edits made since adopting.")
    ] = False,
    as_json: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Restore the files the last adoption replaced, byte for byte."""
    with _handled(debug):
        opened = SleepProject.open(project)
        with opened.lock("sleep rollback"):
            recover(opened)
            receipt = rollback(opened, force=force)
        if as_json:
            _emit(receipt.model_dump())
        else:
            typer.echo(
                f"rolled back night {receipt.night_id}: {', '.join(c.path for c in receipt.files)}"
            )


def _executable() -> list[str]:
    return [sys.executable, "-m", "skillopt_dsl.cli"]


def _at(value: str) -> tuple[int, int]:
    try:
        hour, minute = (int(part) for part in value.split(":"))
    except ValueError:
        raise SleepError(f"--at takes HH:MM, got {value!r}") from None
    return hour, minute


@sleep_app.command("schedule")
def schedule_command(
    project: ProjectOpt = Path("."),
    at: Annotated[str, typer.Option("--at", help="Time of day, HH:MM.")] = "03:30",
    run_args: Annotated[
        str, typer.Option("--run-args", help="Extra `sleep run` flags, e.g. '--max-calls 500'.")
    ] = "",
    systemd: Annotated[
        bool, typer.Option("--systemd", help="Print a systemd user timer instead.")
    ] = False,
    crontab_command: Annotated[str, typer.Option("--crontab-command", hidden=True)] = "crontab",
    debug: DebugOpt = False,
) -> None:
    """Run `sleep run` nightly: a managed crontab block (or print a systemd user timer)."""
    with _handled(debug):
        opened = SleepProject.open(project)
        hour, minute = _at(at)
        extra = shlex.split(run_args)
        if systemd:
            units = systemd_units(
                opened.path, hour=hour, minute=minute, executable=_executable(), extra=extra
            )
            for name, text in units.items():
                typer.echo(f"# ~/.config/systemd/user/{name}\n{text}")
            typer.echo(
                f"# then: systemctl --user enable --now {next(iter(units)).replace('.service', '.timer')}"
            )
            return
        line = schedule(
            SystemCrontab(crontab_command),
            opened.path,
            hour=hour,
            minute=minute,
            executable=_executable(),
            extra=extra,
        )
        typer.echo(f"scheduled: {line}")


@sleep_app.command("unschedule")
def unschedule_command(
    project: ProjectOpt = Path("."),
    crontab_command: Annotated[str, typer.Option("--crontab-command", hidden=True)] = "crontab",
    debug: DebugOpt = False,
) -> None:
    """Remove exactly this project's crontab block."""
    with _handled(debug):
        opened = SleepProject.open(project)
        removed = unschedule(SystemCrontab(crontab_command), opened.path)
        typer.echo("unscheduled" if removed else f"no Sleep block for {opened.path} in the crontab")
