"""`skillopt-dsl sleep status`, `diff`, `adopt` and `rollback`: the staged nights and the live
files.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import typer

from skillopt_dsl.sleep import advice
from skillopt_dsl.sleep.adopt import adopt, journal_pending, night_status, recover, rollback
from skillopt_dsl.sleep.cli_options import DebugOpt, JsonOpt, ProjectOpt, emit_json, sleep_errors
from skillopt_dsl.sleep.errors import SleepError
from skillopt_dsl.sleep.project import SleepProject
from skillopt_dsl.sleep.stage import describe_partial
from skillopt_dsl.sleep.tasks import load_tasks


def status_command(
    project: ProjectOpt = Path("."), as_json: JsonOpt = False, debug: DebugOpt = False
) -> None:
    """Staged nights, the watermark, the lock holder and any interrupted adoption."""
    with sleep_errors(debug):
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
            emit_json(data)
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


def diff_command(
    night: Annotated[str | None, typer.Argument(help="Night id (default: newest).")] = None,
    project: ProjectOpt = Path("."),
    debug: DebugOpt = False,
) -> None:
    """Print a night's unified diff against the live files as staged."""
    with sleep_errors(debug):
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


def adopt_command(
    night: Annotated[
        str | None, typer.Argument(help="Night id (default: newest proposal).")
    ] = None,
    project: ProjectOpt = Path("."),
    as_json: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Replace the live files with a night's proposal (refuses changed live files)."""
    with sleep_errors(debug):
        opened = SleepProject.open(project)
        with opened.lock("sleep adopt"):
            receipt = adopt(opened, night)
        if as_json:
            emit_json(receipt.model_dump())
        else:
            files = ", ".join(c.path for c in receipt.files)
            typer.echo(
                f"adopted night {receipt.night_id}: {files} (undo: skillopt-dsl sleep rollback)"
            )


def rollback_command(
    project: ProjectOpt = Path("."),
    force: Annotated[
        bool, typer.Option("--force", help="Roll back even over edits made since adopting.")
    ] = False,
    as_json: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Restore the files the last adoption replaced, byte for byte."""
    with sleep_errors(debug):
        opened = SleepProject.open(project)
        with opened.lock("sleep rollback"):
            recover(opened)
            receipt = rollback(opened, force=force)
        if as_json:
            emit_json(receipt.model_dump())
        else:
            typer.echo(
                f"rolled back night {receipt.night_id}: {', '.join(c.path for c in receipt.files)}"
            )
