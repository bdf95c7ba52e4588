"""The options every `skillopt-dsl sleep` command shares, its error harness and its JSON output."""

from __future__ import annotations

import json
from collections.abc import Mapping
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Annotated, Any

import typer

from skillopt_dsl.cli_harness import handled
from skillopt_dsl.lm.endpoint import OPTIMIZER_API_BASE_ENV

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
