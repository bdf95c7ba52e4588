"""`skillopt-dsl compile --skill-folder PATH --trigger-data FILE.jsonl` and the `skill-folder`
commands that adopt or roll back what it staged.

`compile --skill-folder` trains the folder's description with `TriggerModule` (a router picks
one skill for each request among the folder's skill and the distractors), prints seed vs
compiled beside the constant answers "always trigger" and "never trigger", then stages the
change in the run directory (`stage_folder`): the folder itself is never written. `skill-folder
adopt RUN_DIR` writes it in (refusing changed files, with backups, as one transaction);
`skill-folder rollback RUN_DIR` puts the old bytes back; `skill-folder diff RUN_DIR` prints it.
"""

from __future__ import annotations

import datetime as _dt
import shlex
import time
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer
from rich.console import Console

from skillopt_dsl.cli.options import CompileFlags, DebugOpt
from skillopt_dsl.cli.overrides import optimizer_from_flags
from skillopt_dsl.cli.tables import print_compile
from skillopt_dsl.cli_harness import EXIT_INTERRUPTED, handled
from skillopt_dsl.compile import CompileResult
from skillopt_dsl.compile import compile as compile_skill
from skillopt_dsl.errors import UserInputError
from skillopt_dsl.lm import LM, Budget
from skillopt_dsl.lm.endpoint import OPTIMIZER_API_BASE_ENV, at_api_base
from skillopt_dsl.optimizers import GradientText, ReflectiveProposer
from skillopt_dsl.progress import CompileProgress
from skillopt_dsl.runs import RunFiles
from skillopt_dsl.skill_folder.adopt import adopt_folder, recover_folder, rollback_folder
from skillopt_dsl.skill_folder.document import DescriptionAgent
from skillopt_dsl.skill_folder.folder import SkillFolder
from skillopt_dsl.skill_folder.stage import StagedFolder, stage_dir, stage_folder
from skillopt_dsl.types import Example

if TYPE_CHECKING:  # the trigger task loads only when --skill-folder is used
    from skillopt_dsl.skill_folder.cards import SkillCard
    from skillopt_dsl.skill_folder.trigger import TriggerModule
    from skillopt_dsl.skill_folder.trigger_data import TriggerSummary

__all__ = [
    "AgentChoice",
    "FolderTask",
    "compile_folder",
    "compile_target",
    "folder_models",
    "skill_folder_app",
    "trigger_optimizer",
]

Model = LM | str | None


class AgentChoice(StrEnum):
    """Whose description limits `--agent` applies."""

    claude = "claude"
    codex = "codex"


SkillFolderOpt = Annotated[
    Path | None,
    typer.Option(
        "--skill-folder",
        help="Instead of a recipe: train this skill folder's description (SKILL.md's front "
        "matter) on --trigger-data. The change is staged in the run dir, never written to "
        "the folder; `skillopt-dsl skill-folder adopt RUN_DIR` adopts it.",
    ),
]
TriggerDataOpt = Annotated[
    Path | None,
    typer.Option(
        "--trigger-data",
        help='With --skill-folder: JSONL rows {"request": "...", "should_trigger": true|false}, '
        "split into train/val/test by --seed.",
    ),
]
DistractorsOpt = Annotated[
    Path | None,
    typer.Option(
        "--distractors",
        help="With --skill-folder: the other skills the router chooses among, a JSONL file of "
        '{"name", "description"} cards or a folder of skill folders (default: the skill '
        "folders beside --skill-folder).",
    ),
]
AgentOpt = Annotated[
    AgentChoice,
    typer.Option(
        "--agent",
        help="With --skill-folder: whose description limits the search must meet (claude: "
        "1024 characters, codex: 500; one line).",
    ),
]


@dataclass(frozen=True)
class FolderTask:
    """What `compile --skill-folder` trains: the folder, its trigger data, the other skills
    the router sees (None: the folders beside it) and whose description limits apply."""

    skill_folder: Path
    trigger_data: Path
    distractors: Path | None
    agent: AgentChoice

    def words(self) -> list[str]:
        """The flags that name this task on the command line."""
        words = ["--skill-folder", str(self.skill_folder), "--trigger-data", str(self.trigger_data)]
        if self.distractors is not None:
            words += ["--distractors", str(self.distractors)]
        return [*words, "--agent", self.agent.value]

    @property
    def description_agent(self) -> DescriptionAgent:
        """`agent` as the skill folder's `DescriptionAgent`."""
        return "codex" if self.agent is AgentChoice.codex else "claude"


def compile_target(
    recipe: Path | None,
    skill_folder: Path | None,
    trigger_data: Path | None,
    distractors: Path | None,
    agent: AgentChoice,
) -> Path | FolderTask:
    """What `compile` trains: the recipe, or the skill folder's task; an error for neither,
    both, or a half-given folder task."""
    if skill_folder is None:
        if trigger_data is not None or distractors is not None:
            raise UserInputError("--trigger-data and --distractors go with --skill-folder PATH")
        if recipe is None:
            raise UserInputError(
                "compile needs a recipe (skillopt-dsl compile recipes/<task>.py) or a skill "
                "folder (skillopt-dsl compile --skill-folder PATH --trigger-data FILE.jsonl)"
            )
        return recipe
    if recipe is not None:
        raise UserInputError("give a recipe or --skill-folder, not both")
    if trigger_data is None:
        raise UserInputError(
            "--skill-folder needs --trigger-data FILE.jsonl: rows "
            '{"request": "...", "should_trigger": true|false}'
        )
    return FolderTask(skill_folder, trigger_data, distractors, agent)


def folder_models(flags: CompileFlags) -> tuple[Model, Model]:
    """The router (`--model`, default the embedded model) and the optimizer model
    (`--optimizer-model`), each at its API base when one is given."""
    target = at_api_base(flags.model, flags.api_base)
    reflector = at_api_base(
        flags.optimizer_model,
        flags.optimizer_api_base,
        flag="--optimizer-api-base",
        model_flag="--optimizer-model",
        env=OPTIMIZER_API_BASE_ENV,
    )
    return _model(target), _model(reflector)


def _model(spec: object) -> Model:
    if spec is None or isinstance(spec, LM | str):
        return spec
    raise UserInputError(f"a command-line model must be a model string, got {spec!r}")


def trigger_optimizer() -> GradientText:
    """The default search for a description: the missed requests' words (one-line edits, no
    model call, for routers too small to reflect) and reflection by the optimizer model."""
    from skillopt_dsl.skill_folder.trigger_proposer import TriggerWordsProposer

    return GradientText(proposers=[TriggerWordsProposer(), ReflectiveProposer()])


def _distractors(task: FolderTask, folder: SkillFolder) -> tuple[SkillCard, ...]:
    from skillopt_dsl.skill_folder.cards import load_skill_cards, read_skill_cards

    where = task.distractors if task.distractors is not None else folder.root.resolve().parent
    if where.is_file():
        return load_skill_cards(where)
    cards = read_skill_cards(where, exclude=(folder.name,))
    if not cards:
        raise UserInputError(
            f"no other skills to choose among in {where}: pass --distractors FILE.jsonl (one "
            '{"name": ..., "description": ...} a line) or a folder of skill folders'
        )
    return cards


def _run_dir(folder: SkillFolder, run_dir: Path | None, resume: bool) -> Path:
    if resume and (run_dir is None or not RunFiles(run_dir).config.is_file()):
        raise UserInputError("--resume needs --run-dir naming a run that has a config.json")
    if run_dir is not None:
        return run_dir
    stamp = _dt.datetime.now(_dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    return Path("runs") / f"{folder.name}-{stamp}"


def _budget(flags: CompileFlags) -> Budget | None:
    if flags.max_calls is None and flags.max_usd is None:
        return None
    return Budget(max_calls=flags.max_calls, max_usd=flags.max_usd)


def compile_folder(
    task: FolderTask, flags: CompileFlags, run_dir: Path | None, resume: bool
) -> None:
    """Train the folder's description, print the scores and stage the change (see the module
    docstring); an interrupted adopt of the folder is undone first."""
    from skillopt_dsl.skill_folder.trigger import TriggerModule
    from skillopt_dsl.skill_folder.trigger_data import load_trigger_splits

    recover_folder(task.skill_folder)
    folder = SkillFolder.read(task.skill_folder)
    module = TriggerModule(
        folder, _distractors(task, folder), agent=task.description_agent, order_seed=flags.seed
    )
    splits = load_trigger_splits(task.trigger_data, seed=flags.seed)
    target, reflector = folder_models(flags)
    directory = _run_dir(folder, run_dir, resume)
    started = time.perf_counter()
    with CompileProgress(Console(stderr=True)) as progress:
        try:
            result = compile_skill(
                module,
                splits.train,
                splits.val,
                optimizer=optimizer_from_flags(
                    trigger_optimizer(), flags.optimizer, flags.overrides()
                ),
                lm=target,
                optimizer_lm=reflector,
                budget=_budget(flags),
                run_dir=directory,
                resume=resume,
                testset=splits.test or None,
                seed=flags.seed,
                threads=flags.threads,
                max_errors=flags.max_errors,
                on_event=progress,
            )
        except KeyboardInterrupt:
            _interrupted(["skillopt-dsl", "compile", *task.words(), *flags.resume_words(directory)])
    print_compile(result, time.perf_counter() - started)
    held_out = splits.test or splits.val
    print_trigger(_trigger_rows(module, held_out, result, target, flags.threads), len(held_out))
    print_staged(stage_folder(result, folder, directory))


def _interrupted(words: list[str]) -> NoReturn:
    typer.echo(f"\nInterrupted; nothing was staged. Resume with:\n  {shlex.join(words)}", err=True)
    raise typer.Exit(EXIT_INTERRUPTED)


def _trigger_rows(
    module: TriggerModule,
    examples: Sequence[Example],
    result: CompileResult,
    target: Model,
    threads: int,
) -> list[tuple[str, TriggerSummary]]:
    """Precision and recall on the held-out requests: seed and compiled (one routing call per
    request each), and the constant answers (no call)."""
    from skillopt_dsl.skill_folder.trigger_data import constant_trigger_summary, measure_trigger

    seed = measure_trigger(module, examples, skill=result.seed_skill, lm=target, threads=threads)
    best = (
        seed
        if result.best_skill == result.seed_skill
        else measure_trigger(module, examples, skill=result.best_skill, lm=target, threads=threads)
    )
    return [
        ("seed", seed),
        ("compiled", best),
        ("always trigger", constant_trigger_summary(examples, True)),
        ("never trigger", constant_trigger_summary(examples, False)),
    ]


def print_trigger(rows: Sequence[tuple[str, TriggerSummary]], n: int) -> None:
    """The trigger table: one `TriggerSummary` line per row."""
    typer.echo(f"trigger on {n} held-out requests (test split; validation when there is none):")
    for label, summary in rows:
        typer.echo("  " + summary.line(label))


def print_staged(staged: StagedFolder) -> None:
    """Where the staged change is and the command that adopts it, or why nothing was staged."""
    if not staged.accepted:
        typer.echo(f"nothing staged: {staged.manifest.note}")
        return
    typer.echo(f"staged: {', '.join(c.path for c in staged.changes)} (the folder is unchanged)")
    typer.echo(f"diff:   {staged.diff_path}")
    typer.echo(f"adopt:  {staged.adopt_command}")


# -- skillopt-dsl skill-folder ... -------------------------------------------------------------

skill_folder_app = typer.Typer(
    name="skill-folder",
    help="Review, adopt or roll back the skill-folder change `compile --skill-folder` staged "
    "in a run directory. Only `adopt` writes the folder.",
    no_args_is_help=True,
)
RunDirArg = Annotated[
    Path, typer.Argument(help="The run directory `compile --skill-folder` staged the change in.")
]


@skill_folder_app.command("diff")
def diff_command(run_dir: RunDirArg, debug: DebugOpt = False) -> None:
    """Print RUN_DIR's staged change as a unified diff of the folder."""
    with handled(debug):
        patch = stage_dir(run_dir) / "folder.diff"
        if not patch.is_file():
            raise UserInputError(f"{run_dir} staged no change to a skill folder (no {patch})")
        typer.echo(patch.read_text(encoding="utf-8"), nl=False)


@skill_folder_app.command("adopt")
def adopt_command(run_dir: RunDirArg, debug: DebugOpt = False) -> None:
    """Write RUN_DIR's staged change into the live skill folder.

    Refuses when a file changed since the compile read it; backs every replaced file up under
    RUN_DIR/skill_folder/backups; swaps the files as one transaction (an interrupted adopt is
    undone by the next command)."""
    with handled(debug):
        receipt = adopt_folder(run_dir)
        files = ", ".join(change.path for change in receipt.files)
        typer.echo(f"adopted into {receipt.folder}: {files}")
        typer.echo(f"undo:  skillopt-dsl skill-folder rollback {shlex.quote(str(run_dir))}")


@skill_folder_app.command("rollback")
def rollback_command(run_dir: RunDirArg, debug: DebugOpt = False) -> None:
    """Put back, byte for byte, the files RUN_DIR's adopt replaced.

    Refuses when a file changed since the adopt (those edits would be lost)."""
    with handled(debug):
        receipt = rollback_folder(run_dir)
        files = ", ".join(change.path for change in receipt.files)
        typer.echo(f"rolled back in {receipt.folder}: {files}")
