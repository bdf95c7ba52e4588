"""`skillopt-dsl sleep review`: list the mined tasks with their checks; accept, drop or edit one."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

from skillopt_dsl.flags import FlagRecord, takes_flag_records
from skillopt_dsl.sleep import advice
from skillopt_dsl.sleep.cli_options import DebugOpt, JsonOpt, ProjectOpt, emit_json, sleep_errors
from skillopt_dsl.sleep.errors import SleepError
from skillopt_dsl.sleep.project import SleepProject
from skillopt_dsl.sleep.review import ReviewFolder, parse_checks
from skillopt_dsl.sleep.tasks import Check, Task


@dataclass(frozen=True)
class ReviewAction(FlagRecord):
    """What `sleep review` does besides listing: accept, drop or edit one task (by id or id
    prefix), an edit's new intent, rubric and checks."""

    accept: Annotated[
        str | None, typer.Option("--accept", help="Mark this task (id or id prefix) reviewed.")
    ] = None
    drop: Annotated[
        str | None,
        typer.Option("--drop", help="Remove this task; later harvests do not add it again."),
    ] = None
    edit: Annotated[
        str | None,
        typer.Option(
            "--edit",
            help="Change this task (with --intent, --rubric, --checks, "
            "--add-check); an edited task is marked reviewed.",
        ),
    ] = None
    intent: Annotated[str | None, typer.Option("--intent", help="New request text.")] = None
    rubric: Annotated[str | None, typer.Option("--rubric", help='New rubric ("" removes it).')] = (
        None
    )
    checks: Annotated[
        str | None,
        typer.Option(
            "--checks",
            help='Replace the checks: a JSON list, e.g. \'[{"kind": "max_chars", "limit": 400}]\'.',
        ),
    ] = None
    add_check: Annotated[
        list[str] | None,
        typer.Option(
            "--add-check",
            help="Add one check (JSON object), e.g. "
            '\'{"kind": "contains", "value": "Decimal"}\'; repeatable.',
        ),
    ] = None

    def check(self) -> None:
        """Refuse two actions at once, and an edit's fields without `--edit`."""
        if sum(a is not None for a in (self.accept, self.drop, self.edit)) > 1:
            raise SleepError("pass one of --accept, --drop or --edit at a time")
        edits = (self.intent, self.rubric, self.checks, self.add_check)
        if self.edit is None and any(v is not None for v in edits):
            raise SleepError("--intent, --rubric, --checks and --add-check need --edit ID")

    def apply(self, review: ReviewFolder) -> tuple[str, Task] | None:
        """Apply the one action asked for; None when only listing."""
        if self.accept is not None:
            return "accepted", review.accept(self.accept)
        if self.drop is not None:
            return "dropped", review.drop(self.drop)
        if self.edit is None:
            return None
        added = [c for text in self.add_check or [] for c in parse_checks(text)]
        replaced = parse_checks(self.checks) if self.checks is not None else None
        if replaced is None and not added and self.intent is None and self.rubric is None:
            raise SleepError(
                "--edit needs at least one of --intent, --rubric, --checks, --add-check"
            )
        return "edited", review.edit(
            self.edit, intent=self.intent, rubric=self.rubric, checks=replaced, add_checks=added
        )


@takes_flag_records
def review_command(
    project: ProjectOpt = Path("."),
    tasks_file: Annotated[
        Path | None,
        typer.Option(
            "--tasks", help="The tasks file (default .skillopt/sleep/review/tasks.jsonl)."
        ),
    ] = None,
    *,
    action: ReviewAction,
    as_json: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """List the tasks to review with their checks, or accept, drop or edit one. Check kinds
    and their fields: contains/not_contains (value, case_sensitive), regex (pattern),
    max_chars (limit), section_present (heading), no_refusal; see docs/sleep.md."""
    with sleep_errors(debug):
        opened = SleepProject.open(project)
        review = ReviewFolder(
            tasks_file.parent if tasks_file is not None else opened.sleep_dir / "review"
        )
        if tasks_file is not None and tasks_file.name != "tasks.jsonl":
            raise SleepError(f"--tasks must name a tasks.jsonl file, got {tasks_file}")
        action.check()
        with opened.lock("sleep review"):
            changed = action.apply(review)
            tasks = review.tasks()
        _print_review(review, tasks, changed, as_json=as_json)


def _print_review(
    review: ReviewFolder, tasks: list[Task], changed: tuple[str, Task] | None, *, as_json: bool
) -> None:
    if as_json:
        emit_json(
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
