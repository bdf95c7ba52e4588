"""The options of `skillopt-dsl sleep` commands that read Sleep's source registry, its error
harness and its JSON output; the flags every command shares (`--debug`, `--json`, `--home`, the
limits, the optimizer model) are declared once in `skillopt_dsl.flags` and re-exported here.

The agent choices (`--source`, `--agent`, `--replay-agent`) are read from the source registry
(`skillopt_dsl.sleep.sources`) whenever help is shown, so a source registered later is listed
too; an unknown name is refused by the registry, whose message lists the choices.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Annotated, Any

import typer

from skillopt_dsl.cli_harness import handled
from skillopt_dsl.flags import (
    DebugOpt,
    HomeOpt,
    JsonOpt,
    MaxCallsOpt,
    MaxTokensOpt,
    MaxUsdOpt,
    OptimizerApiBaseOpt,
    OptimizerModelOpt,
    RegistryOption,
)
from skillopt_dsl.sleep.sources.registry import (
    memory_files,
    replay_choices,
    replay_command,
    source_choices,
)

__all__ = [
    "AgentOpt",
    "AllOpt",
    "DebugOpt",
    "HeuristicOpt",
    "HomeOpt",
    "JsonOpt",
    "MaxCallsOpt",
    "MaxTokensOpt",
    "MaxUsdOpt",
    "OptimizerApiBaseOpt",
    "OptimizerModelOpt",
    "ProjectOpt",
    "RegistryOption",
    "ReplayAgentOpt",
    "SinceOpt",
    "SourceOpt",
    "emit_json",
    "sleep_errors",
]


def _or(names: list[str]) -> str:
    return ", ".join(names[:-1]) + " or " + names[-1] if len(names) > 1 else "".join(names)


def _memory_labels() -> list[str]:
    """`claude (CLAUDE.md)`: each agent with the memory file it trains."""
    return [f"{agent} ({memory})" for agent, memory in memory_files().items()]


def _replay_labels() -> list[str]:
    """`claude (claude -p)`: each agent with the start of the command its replays run."""
    labels = []
    for agent in replay_choices():
        argv = [a for a in replay_command(agent).argv if a != "{prompt}"]
        labels.append(f"{agent} ({' '.join(argv[:2])})")
    return labels


ProjectOpt = Annotated[
    Path, typer.Option("--project", help="The project folder (its sessions, its memory file).")
]


SourceOpt = Annotated[
    str,
    RegistryOption(
        typer.Option("--source"),
        lambda: f"{_or(source_choices())} (auto: every source found under --home).",
    ),
]


AgentOpt = Annotated[
    str | None,
    RegistryOption(
        typer.Option("--agent"),
        lambda: f"The agent whose memory file to train: {_or(_memory_labels())}.",
    ),
]


ReplayAgentOpt = Annotated[
    str | None,
    RegistryOption(
        typer.Option("--replay-agent"),
        lambda: (
            "Replay through your own agent CLI in a copy of the project: "
            f"{_or(_replay_labels())}. Needs the agent's API key in the environment."
        ),
    ),
]


HeuristicOpt = Annotated[
    bool,
    typer.Option(
        "--heuristic-only",
        help="Mine tasks without a model: each session's first request, the corrections you "
        'gave ("use X, not Y") and your feedback. No mining calls. Without it, the optimizer '
        "model proposes tasks and is dropped at once if its first reply is invalid.",
    ),
]


def sleep_errors(debug: bool) -> AbstractContextManager[None]:
    """The command-line error harness (`skillopt_dsl.cli_harness`), with Sleep's progress
    logger and its Ctrl-C line."""
    return handled(
        debug,
        progress_logger="skillopt_dsl.sleep.progress",
        interrupted="Interrupted; the next Sleep command cleans up.",
    )


def emit_json(data: Mapping[str, Any]) -> None:
    """Print `data` as one indented JSON object (`--json`)."""
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
