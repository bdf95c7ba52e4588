"""`skillopt-dsl sleep describe`: train a skill folder's description on the trigger rows the
agent's own sessions hold, in one command (issue 40).

It is `sleep trigger-rows` followed by `compile --skill-folder`. The sessions are only read
(`skillopt_dsl.sleep.trigger_rows`); rows that hold one label, or are too few to split, are
refused before any model call (`trigger_splits`, which names the counts); the rows go into the
run directory (`trigger_rows.jsonl`, the data the run trained on); then `compile_folder` does
the rest with the same `TriggerModule`, distractor cards, gate, budget, printed baselines and
staging. The folder is never written: `skillopt-dsl skill-folder adopt RUN_DIR` adopts.

The command lives with the CLI, not in `skillopt_dsl/sleep/`, because it reuses
`compile --skill-folder` (a layer above Sleep); `skillopt_dsl/cli/__init__.py` registers it on
the `sleep` app.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

from skillopt_dsl.cli.options import (
    ApiBaseOpt,
    CompileFlags,
    MaxCallsOpt,
    MaxErrorsOpt,
    MaxUsdOpt,
    ModelOpt,
    OptimizerApiBaseOpt,
    OptimizerModelOpt,
    SeedOpt,
    ThreadsOpt,
)
from skillopt_dsl.cli.skill_folder import (
    AgentOpt,
    DistractorsOpt,
    FolderFlags,
    ProposerOpt,
    ReplyTokensOpt,
    ShownOthersOpt,
    TriggerSamplesOpt,
    TriggerTemperatureOpt,
    compile_folder,
    folder_run_dir,
    folder_task,
)
from skillopt_dsl.errors import UserInputError
from skillopt_dsl.evaluate import DEFAULT_THREADS
from skillopt_dsl.flags import FlagRecord, takes_flag_records
from skillopt_dsl.runs import RunFiles
from skillopt_dsl.skill_folder import SkillFolder
from skillopt_dsl.sleep.cli_options import (
    DebugOpt,
    HomeOpt,
    JsonOpt,
    SourceOpt,
    emit_json,
    sleep_errors,
)
from skillopt_dsl.sleep.cli_trigger import RowsProjectOpt, rows_summary
from skillopt_dsl.sleep.harvest import ProjectMatcher
from skillopt_dsl.sleep.sources import make_sources
from skillopt_dsl.sleep.trigger_rows import (
    TriggerRows,
    trigger_rows,
    trigger_splits,
    write_trigger_rows,
)

__all__ = ["ROWS_FILE", "RowsQuery", "describe_command", "harvest_rows"]

ROWS_FILE = "trigger_rows.jsonl"
"""The file in the run directory that holds the rows the description was trained on."""

DescribedFolderOpt = Annotated[
    Path,
    typer.Option(
        "--skill-folder",
        help="The skill folder whose description to train. It is only read: the change is "
        "staged in the run dir; `skillopt-dsl skill-folder adopt RUN_DIR` adopts it.",
    ),
]
DescribedSkillOpt = Annotated[
    str | None,
    typer.Option(
        "--skill",
        help="The skill's name in your sessions' loads (default: the folder's front matter "
        "`name`).",
    ),
]
DescribeRunDirOpt = Annotated[
    Path | None,
    typer.Option("--run-dir", help="Where the run is recorded (default runs/<skill>-<time>)."),
]


@dataclass(frozen=True)
class RowsQuery(FlagRecord):
    """Which sessions to read: the sources (`--source`), the home holding them (None: `~`) and
    the project they must belong to (None: every project)."""

    source: SourceOpt = "auto"
    home: HomeOpt = None
    project: RowsProjectOpt = None


@dataclass(frozen=True)
class DescribeFlags(FlagRecord):
    """`sleep describe`'s skill-folder flags (`compile --skill-folder`'s, less the trigger data,
    which the sessions give)."""

    distractors: DistractorsOpt = None
    agent: AgentOpt = "claude"
    proposer: ProposerOpt = None
    shown_others: ShownOthersOpt = None
    reply_tokens: ReplyTokensOpt = None
    trigger_samples: TriggerSamplesOpt = None
    trigger_temperature: TriggerTemperatureOpt = None

    def folder_flags(self, data: Path) -> FolderFlags:
        """These flags with the trigger rows at `data`."""
        return FolderFlags(
            data, self.distractors, self.agent, self.proposer, self.shown_others,
            self.reply_tokens, self.trigger_samples, self.trigger_temperature,
        )  # fmt: skip


@dataclass(frozen=True)
class DescribeRunFlags(FlagRecord):
    """`sleep describe`'s models, limits and run settings (`compile`'s, less the optimizer
    and its settings, which the skill folder's search fixes)."""

    model: ModelOpt = None
    optimizer_model: OptimizerModelOpt = None
    api_base: ApiBaseOpt = None
    optimizer_api_base: OptimizerApiBaseOpt = None
    max_calls: MaxCallsOpt = None
    max_usd: MaxUsdOpt = None
    seed: SeedOpt = 0
    threads: ThreadsOpt = DEFAULT_THREADS
    max_errors: MaxErrorsOpt = 10

    def compile_flags(self) -> CompileFlags:
        """These settings as `compile`'s flags (no optimizer override)."""
        return CompileFlags(
            model=self.model,
            optimizer_model=self.optimizer_model,
            max_calls=self.max_calls,
            max_usd=self.max_usd,
            seed=self.seed,
            threads=self.threads,
            max_errors=self.max_errors,
            api_base=self.api_base,
            optimizer_api_base=self.optimizer_api_base,
        )


def harvest_rows(skill: str, query: RowsQuery, seed: int) -> TriggerRows:
    """The trigger rows for `skill` from the sessions `query` names (read only); a
    `UserInputError` with the counts when they hold one label or are too few to split."""
    project = query.project
    matcher = None if project is None else ProjectMatcher((str(project.resolve()),))
    sources = make_sources(query.source, query.home or Path.home())
    found = trigger_rows(sources, skill, project=matcher)
    trigger_splits(found, seed=seed)
    return found


def _fresh_run_dir(folder: SkillFolder, run_dir: Path | None) -> Path:
    """The run directory to record in; an error when it already holds a run or rows."""
    directory = folder_run_dir(folder, run_dir, resume=False)
    if RunFiles(directory).config.is_file() or (directory / ROWS_FILE).exists():
        raise UserInputError(f"{directory} already holds a run; choose a new --run-dir")
    return directory


@takes_flag_records
def describe_command(
    skill_folder: DescribedFolderOpt,
    skill: DescribedSkillOpt = None,
    *,
    query: RowsQuery,
    described: DescribeFlags,
    run: DescribeRunFlags,
    run_dir: DescribeRunDirOpt = None,
    as_json: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Train a skill folder's description on your own sessions' skill loads and stage it.

    Reads the sessions (read only) for requests where the agent loaded the skill (should
    trigger) or another skill (should not), refuses rows that hold one label or are too few to
    split, then runs `compile --skill-folder` on them: seed vs compiled beside "always" and
    "never trigger", the change staged in the run dir (the folder is untouched until
    `skillopt-dsl skill-folder adopt RUN_DIR`). With `--json`, one JSON object instead: the
    rows read, the scores, the trigger table, the gate and what was staged."""
    flags = run.compile_flags()
    with sleep_errors(debug):
        folder = SkillFolder.read(skill_folder)
        found = harvest_rows(skill or folder.name, query, flags.seed)
        directory = _fresh_run_dir(folder, run_dir)
        data = directory / ROWS_FILE
        write_trigger_rows(found.rows, data)
        if not as_json:
            typer.echo("\n".join(rows_summary(found, data)))
        task = folder_task(skill_folder, described.folder_flags(data))
        outcome = compile_folder(task, flags, directory, resume=False, echo=not as_json)
        if as_json:
            emit_json({"rows": {"out": str(data), **found.to_dict()}, **outcome.to_dict()})
