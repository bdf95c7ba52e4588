"""`skillopt-dsl compile --skill-folder PATH --trigger-data FILE.jsonl` and the `skill-folder`
commands that adopt or roll back what it staged.

`compile --skill-folder` trains the folder's description with `TriggerModule` (a router picks
one skill for each request among the folder's skill and the distractors), prints seed vs
compiled beside the constant answers "always trigger" and "never trigger", then stages the
change in the run directory (`stage_folder`): the folder itself is never written. `--proposer`
chooses where description edits come from (`words`, the default: the missed requests' words,
no model call; `reflect`: the optimizer model's reflection; `both`), and the CLI prints which
proposers run. The held-out table is replayed from the run's response cache (the compile
already scored the test split), so it costs no new call. `skill-folder
adopt RUN_DIR` writes it in (refusing changed files, with backups, as one transaction);
`skill-folder rollback RUN_DIR` puts the old bytes back; `skill-folder diff RUN_DIR` prints it.
"""

from __future__ import annotations

import datetime as _dt
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer
from rich.console import Console

from skillopt_dsl.agent_kinds import agent_kind, agent_names, description_limit
from skillopt_dsl.cli.loading import load_in_process
from skillopt_dsl.cli.options import CompileFlags, DebugOpt
from skillopt_dsl.cli.overrides import optimizer_from_flags
from skillopt_dsl.cli.tables import print_compile
from skillopt_dsl.cli_harness import EXIT_INTERRUPTED, handled
from skillopt_dsl.compile import default_optimizer_on
from skillopt_dsl.errors import UserInputError
from skillopt_dsl.flags import FlagRecord
from skillopt_dsl.lm import LM, Budget
from skillopt_dsl.lm.endpoint import OPTIMIZER_API_BASE_ENV, at_api_base
from skillopt_dsl.optimizers import ConsolidationProposer, ReflectiveProposer
from skillopt_dsl.optimizers.base import Optimizer
from skillopt_dsl.optimizers.proposers import Proposer
from skillopt_dsl.progress import CompileProgress
from skillopt_dsl.runs import RunFiles
from skillopt_dsl.settings import CompileSettings
from skillopt_dsl.skill_folder.adopt import adopt_folder, recover_folder, rollback_folder
from skillopt_dsl.skill_folder.describe import (
    DEFAULT_REPLY_TOKENS,
    DescriptionOutcome,
    DescriptionTask,
    plan_description,
    train_description,
    words_optimizer,
)
from skillopt_dsl.skill_folder.document import DescriptionAgent
from skillopt_dsl.skill_folder.folder import SkillFolder
from skillopt_dsl.skill_folder.stage import StagedFolder, read_folder_manifest, stage_dir
from skillopt_dsl.skill_folder.trigger import (
    DEFAULT_SAMPLES,
    DEFAULT_TEMPERATURE,
    TriggerSampling,
)

if TYPE_CHECKING:  # the trigger task loads only when --skill-folder is used
    from skillopt_dsl.skill_folder.trigger_data import TriggerSummary

__all__ = [
    "DEFAULT_REPLY_TOKENS",
    "FolderFlags",
    "FolderTask",
    "ProposerChoice",
    "compile_folder",
    "compile_target",
    "folder_models",
    "folder_run_dir",
    "folder_task",
    "print_outcome",
    "proposers_line",
    "skill_folder_app",
    "trigger_optimizer",
]

Model = LM | str | None


def described_agent(value: str) -> DescriptionAgent:
    """`--agent`'s value when it names a registered agent kind that reads a skill description
    (`skillopt_dsl.agent_kinds`); a usage error listing those kinds otherwise."""
    try:
        return agent_kind(value, described=True).name
    except UserInputError as error:
        raise typer.BadParameter(str(error)) from None


class ProposerChoice(StrEnum):
    """Where `compile --skill-folder`'s description edits come from (`--proposer`)."""

    words = "words"
    reflect = "reflect"
    both = "both"


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
    DescriptionAgent,
    typer.Option(
        "--agent",
        parser=described_agent,
        help="With --skill-folder: whose description limits the search must meet ("
        + ", ".join(f"{n}: {description_limit(n)} characters" for n in agent_names(described=True))
        + "; one line).",
    ),
]
ProposerOpt = Annotated[
    ProposerChoice | None,
    typer.Option(
        "--proposer",
        help="With --skill-folder: where description edits come from. words (the default): "
        "the missed requests' words, no model call; reflect: the optimizer model reflects "
        "on the failures (slow and noise on the embedded 135M model; give a capable "
        "--optimizer-model); both.",
    ),
]
ShownOthersOpt = Annotated[
    int | None,
    typer.Option(
        "--shown-others",
        min=1,
        help="With --skill-folder: how many of the other skills each request's list shows (a "
        "sample seeded per request; default: all). Fewer makes each routing call shorter.",
    ),
]
ReplyTokensOpt = Annotated[
    int | None,
    typer.Option(
        "--reply-tokens",
        min=1,
        help=f"With --skill-folder: the most tokens a router reply may use (default "
        f"{DEFAULT_REPLY_TOKENS}; a skill name needs few, raise it for a reasoning model).",
    ),
]

TriggerSamplesOpt = Annotated[
    int | None,
    typer.Option(
        "--trigger-samples",
        min=1,
        help=f"With --skill-folder: how many times each request is routed (default "
        f"{DEFAULT_SAMPLES}); its score is its trigger rate over them. More samples make each "
        "request's score less noisy, so fewer requests certify a gain, at that many calls a "
        "request.",
    ),
]
TriggerTemperatureOpt = Annotated[
    float | None,
    typer.Option(
        "--trigger-temperature",
        min=0.0,
        help=f"With --skill-folder: the temperature of those samples (default "
        f"{DEFAULT_TEMPERATURE}; above 0 when there are several, or they would all agree). "
        "With --trigger-samples 1 the model's own temperature is used: giving both is refused.",
    ),
]


@dataclass(frozen=True)
class FolderFlags(FlagRecord):
    """The `compile` flags only a skill-folder task takes; None where not given (a command
    taking `folder: FolderFlags` shows each field as its own flag: `takes_flag_records`)."""

    trigger_data: TriggerDataOpt = None
    distractors: DistractorsOpt = None
    agent: AgentOpt = "claude"
    proposer: ProposerOpt = None
    shown_others: ShownOthersOpt = None
    reply_tokens: ReplyTokensOpt = None
    trigger_samples: TriggerSamplesOpt = None
    trigger_temperature: TriggerTemperatureOpt = None

    def given(self) -> list[str]:
        """The folder-only flags given on the command line (the agent has a default)."""
        named = (
            ("--trigger-data", self.trigger_data),
            ("--distractors", self.distractors),
            ("--proposer", self.proposer),
            ("--shown-others", self.shown_others),
            ("--reply-tokens", self.reply_tokens),
            ("--trigger-samples", self.trigger_samples),
            ("--trigger-temperature", self.trigger_temperature),
        )
        return [flag for flag, value in named if value is not None]


@dataclass(frozen=True)
class FolderTask:
    """What `compile --skill-folder` trains: the folder, its trigger data, the other skills
    the router sees (None: the folders beside it), whose description limits apply, where edits
    come from, how many other skills a request's list shows (None: all), the router's reply
    cap in tokens, and how each request is sampled (its trigger rate over `samples` runs at
    `temperature`)."""

    skill_folder: Path
    trigger_data: Path
    distractors: Path | None
    agent: DescriptionAgent
    proposer: ProposerChoice = ProposerChoice.words
    shown_others: int | None = None
    reply_tokens: int = DEFAULT_REPLY_TOKENS
    samples: int = DEFAULT_SAMPLES
    temperature: float = DEFAULT_TEMPERATURE

    def words(self) -> list[str]:
        """The flags that name this task on the command line."""
        words = ["--skill-folder", str(self.skill_folder), "--trigger-data", str(self.trigger_data)]
        if self.distractors is not None:
            words += ["--distractors", str(self.distractors)]
        words += ["--agent", self.agent, "--proposer", self.proposer.value]
        if self.shown_others is not None:
            words += ["--shown-others", str(self.shown_others)]
        words += ["--reply-tokens", str(self.reply_tokens), "--trigger-samples", str(self.samples)]
        return [*words, "--trigger-temperature", str(self.temperature)]

    @property
    def description_task(self) -> DescriptionTask:
        """This task as `train_description` takes it."""
        return DescriptionTask(
            skill_folder=self.skill_folder,
            trigger_data=self.trigger_data,
            distractors=self.distractors,
            agent=self.agent,
            shown_others=self.shown_others,
            reply_tokens=self.reply_tokens,
            samples=self.samples,
            temperature=self.temperature,
        )


def compile_target(
    recipe: Path | None, skill_folder: Path | None, flags: FolderFlags
) -> Path | FolderTask:
    """What `compile` trains: the recipe, or the skill folder's task; an error for neither,
    both, or a half-given folder task."""
    if skill_folder is None:
        if given := flags.given():
            verb = "goes" if len(given) == 1 else "go"
            raise UserInputError(f"{' and '.join(given)} {verb} with --skill-folder PATH")
        if recipe is None:
            raise UserInputError(
                "compile needs a recipe (skillopt-dsl compile recipes/<task>.py) or a skill "
                "folder (skillopt-dsl compile --skill-folder PATH --trigger-data FILE.jsonl)"
            )
        return recipe
    if recipe is not None:
        raise UserInputError("give a recipe or --skill-folder, not both")
    return folder_task(skill_folder, flags)


def folder_task(skill_folder: Path, flags: FolderFlags) -> FolderTask:
    """The skill folder's task from its flags (the defaults where not given); an error when
    `flags` has no trigger data or a sampling no run could use."""
    if flags.trigger_data is None:
        raise UserInputError(
            "--skill-folder needs --trigger-data FILE.jsonl: rows "
            '{"request": "...", "should_trigger": true|false}'
        )
    sampling = trigger_sampling(flags)
    return FolderTask(
        skill_folder,
        flags.trigger_data,
        flags.distractors,
        flags.agent,
        proposer=flags.proposer or ProposerChoice.words,
        shown_others=flags.shown_others,
        reply_tokens=flags.reply_tokens or DEFAULT_REPLY_TOKENS,
        samples=sampling.samples,
        temperature=sampling.temperature,
    )


def trigger_sampling(flags: FolderFlags) -> TriggerSampling:
    """`--trigger-samples` and `--trigger-temperature` (the defaults where not given), refused
    before any call when no run could honour them: several samples at temperature 0 (they would
    all agree), or a temperature for one sample (which runs at the model's own temperature)."""
    samples = DEFAULT_SAMPLES if flags.trigger_samples is None else flags.trigger_samples
    if samples == 1 and flags.trigger_temperature is not None:
        raise UserInputError(
            "--trigger-temperature goes with --trigger-samples above 1: one sample runs at the "
            "model's own temperature (set it on the model, or give several samples)"
        )
    if flags.trigger_temperature is None:
        return TriggerSampling(samples)
    return TriggerSampling(samples, flags.trigger_temperature)


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


def trigger_optimizer(proposer: ProposerChoice = ProposerChoice.both) -> Optimizer:
    """The search for a description, compile's default (`compile.default_optimizer_on`: its
    `HandOff`) on the chosen proposers:
    `words`, the missed requests' words (one-line edits, no model call, for routers too small
    to reflect; the end-of-epoch consolidation then calls no model either); `reflect`,
    reflection by the optimizer model; `both` (the default here; the CLI's default is
    `words`)."""
    from skillopt_dsl.skill_folder.trigger_proposer import TriggerWordsProposer

    if proposer is ProposerChoice.words:
        return words_optimizer()
    if proposer is ProposerChoice.reflect:
        return default_optimizer_on([ReflectiveProposer()])
    return default_optimizer_on([TriggerWordsProposer(), ReflectiveProposer()])


def proposers_line(optimizer: Optimizer | None, reflector: Model) -> str:
    """Which proposers the search runs, and which of them call the optimizer model."""
    from skillopt_dsl.skill_folder.trigger_proposer import TriggerWordsProposer

    found = _proposers(optimizer)
    if not found:
        return f"proposers: {type(optimizer).__name__}'s own"
    calling = [p.name for p in found if not isinstance(p, TriggerWordsProposer)]
    names = ", ".join(p.name for p in found)
    if not calling:
        return f"proposers: {names} (no optimizer-model call; --proposer both adds reflection)"
    model = reflector if isinstance(reflector, str) else getattr(reflector, "model", None)
    by = model or "the embedded model (--optimizer-model to change it)"
    return f"proposers: {names} ({', '.join(calling)} by {by})"


def _proposers(optimizer: Optimizer | None) -> list[Proposer]:
    """The optimizer's proposers (or its `inner` optimizer's, or a `HandOff`'s first search's:
    both its searches run the same ones), plus a model-calling consolidation; empty when it has
    none."""
    parts = (optimizer, getattr(optimizer, "inner", None), getattr(optimizer, "first", None))
    for candidate in parts:
        proposers = getattr(candidate, "proposers", None)
        if proposers is None:
            continue
        found = list(proposers)
        consolidation = getattr(candidate, "consolidation", None)
        if isinstance(consolidation, ConsolidationProposer) and consolidation.use_model:
            found.append(consolidation)
        return found
    return []


def folder_run_dir(folder: SkillFolder, run_dir: Path | None, resume: bool) -> Path:
    """`run_dir`, or `runs/<folder name>-<UTC time>` when none is given; an error when
    `resume` names no run to continue."""
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
    task: FolderTask, flags: CompileFlags, run_dir: Path | None, resume: bool, *, echo: bool = True
) -> DescriptionOutcome:
    """Train the folder's description, print the scores (unless `echo` is False: `--json`)
    and stage the change (see the module docstring); an interrupted adopt of the folder is
    undone first. Returns what was measured and staged."""
    recover_folder(task.skill_folder)
    folder = SkillFolder.read(task.skill_folder)
    target, reflector = folder_models(flags)
    directory = folder_run_dir(folder, run_dir, resume)
    optimizer = optimizer_from_flags(
        trigger_optimizer(task.proposer), flags.optimizer, flags.overrides()
    )
    if echo:
        typer.echo(proposers_line(optimizer, reflector))
    load_in_process(target)
    with CompileProgress(Console(stderr=True)) as progress:
        settings = CompileSettings(
            lm=target,
            optimizer_lm=reflector,
            budget=_budget(flags),
            run_dir=directory,
            resume=resume,
            seed=flags.seed,
            threads=flags.threads,
            max_errors=flags.max_errors,
            on_event=progress,
        )
        plan = plan_description(task.description_task, settings)
        if echo:
            typer.echo(plan.preflight.line())
        try:
            outcome = train_description(task.description_task, settings, optimizer, plan)
        except KeyboardInterrupt:
            _interrupted(["skillopt-dsl", "compile", *task.words(), *flags.resume_words(directory)])
    if echo:
        print_outcome(outcome)
    return outcome


def print_outcome(outcome: DescriptionOutcome) -> None:
    """What `compile --skill-folder` prints after the run: the scores, the trigger table and
    what was staged."""
    print_compile(outcome.result, outcome.compile_wall_s)
    print_trigger(outcome.trigger, outcome.held_out)
    print_staged(outcome.staged)


def _interrupted(words: list[str]) -> NoReturn:
    typer.echo(f"\nInterrupted; nothing was staged. Resume with:\n  {shlex.join(words)}", err=True)
    raise typer.Exit(EXIT_INTERRUPTED)


def print_trigger(rows: Sequence[tuple[str, TriggerSummary]], n: int) -> None:
    """The trigger table: one `TriggerSummary` line per row."""
    typer.echo(f"trigger on {n} held-out requests (test split; validation when there is none):")
    for label, summary in rows:
        typer.echo("  " + summary.line(label))


def print_staged(staged: StagedFolder) -> None:
    """Where the staged change is and the command that adopts it, or why nothing was staged."""
    if not staged.accepted:
        typer.echo(staged.manifest.note)
        return
    typer.echo(f"staged: {', '.join(c.path for c in staged.changes)} (the folder is unchanged)")
    typer.echo(f"diff:   {staged.diff_path}")
    typer.echo(f"adopt:  {staged.adopt_command}")
    for flag in staged.manifest.flags:
        typer.echo(f"review: {flag}")


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
        for flag in read_folder_manifest(run_dir).flags:
            typer.echo(f"review: {flag}", err=True)


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
