"""`skillopt-dsl sleep trigger-rows`: trigger data for one skill from the agent's own history."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from skillopt_dsl.sleep.cli_options import (
    DebugOpt,
    HomeOpt,
    JsonOpt,
    SourceOpt,
    emit_json,
    sleep_errors,
)
from skillopt_dsl.sleep.harvest import ProjectMatcher
from skillopt_dsl.sleep.sources import make_sources
from skillopt_dsl.sleep.trigger_rows import TriggerRows, trigger_rows, write_trigger_rows

__all__ = ["RowsProjectOpt", "SkillNameOpt", "rows_summary", "trigger_rows_command"]

SkillNameOpt = Annotated[
    str, typer.Option("--skill", help="The skill's name (its SKILL.md front matter `name`).")
]
RowsProjectOpt = Annotated[
    Path | None,
    typer.Option("--project", help="Only this project's sessions (default: every project)."),
]


def trigger_rows_command(
    skill: SkillNameOpt,
    out: Annotated[Path, typer.Option("--out", help="The trigger JSONL file to write.")],
    source: SourceOpt = "auto",
    home: HomeOpt = None,
    project: RowsProjectOpt = None,
    as_json: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Write trigger rows for one skill from your sessions (read only, redacted): a request
    where the agent loaded the skill is `should_trigger: true`, one where it loaded another
    skill is `false`; a request with no skill load gets no row. Train the description on them
    with `skillopt-dsl compile --skill-folder PATH --trigger-data OUT`."""
    with sleep_errors(debug):
        matcher = None if project is None else ProjectMatcher((str(project.resolve()),))
        found = trigger_rows(make_sources(source, home or Path.home()), skill, project=matcher)
        write_trigger_rows(found.rows, out)
        if as_json:
            emit_json({"out": str(out), **found.to_dict()})
        else:
            typer.echo("\n".join(rows_summary(found, out)))
            typer.echo(f"next: skillopt-dsl compile --skill-folder PATH --trigger-data {out}")


def rows_summary(found: TriggerRows, out: Path) -> list[str]:
    """What was read and labelled, as printed lines (the rows were written to `out`)."""
    d = found.to_dict()
    lines = [
        f"{d['rows']} row(s) for skill {d['skill']!r}: {d['should_trigger']} should trigger "
        f"(loaded it), {d['should_not_trigger']} should not (another skill loaded) -> {out}",
        f"read {d['sessions']} session(s) of {', '.join(d['sources_read'])}: {d['requests']} "
        f"request(s), {d['unlabelled']} with no skill load (no row), {d['duplicates']} "
        f"duplicate(s), {d['conflicts']} with both labels (dropped), {d['redactions']} "
        "redaction(s)",
    ]
    if d["sources_without_loads"]:
        lines.append(
            f"not read: {', '.join(d['sources_without_loads'])} (its transcripts do not record "
            "skill loads)"
        )
    if not d["should_trigger"] or not d["should_not_trigger"]:
        lines.append("only one label found: a trigger dataset needs both to measure anything")
    return lines
