"""The command line's flags and choices, declared once for every command (the main CLI's and
Sleep's), and flag records: a command takes a frozen record of flags (`CompileFlags`) as one
parameter instead of one parameter per flag (`takes_flag_records`)."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, TypeVar, cast, get_type_hints

import typer
from typer.models import OptionInfo

from skillopt_dsl.evaluate import DEFAULT_THREADS
from skillopt_dsl.lm.endpoint import API_BASE_ENV, OPTIMIZER_API_BASE_ENV


class OptimizerChoice(StrEnum):
    """The optimizers `--optimizer` can name."""

    hand_off = "hand-off"
    gradient_text = "gradient-text"
    beam = "beam"
    bundle = "bundle"
    optuna = "optuna"


class SplitChoice(StrEnum):
    """The recipe split a command scores."""

    train = "train"
    val = "val"
    test = "test"


class ExportFormat(StrEnum):
    """What `export` writes."""

    md = "md"
    agent_skill = "agent-skill"


RecipeArg = Annotated[Path, typer.Argument(help="A recipe file, e.g. recipes/navigate_local.py.")]


RecipeOpt = Annotated[
    Path, typer.Option("--recipe", help="The recipe whose module and data to use.")
]


ModelOpt = Annotated[
    str | None,
    typer.Option(
        "--model",
        help="Target model (litellm string, e.g. openai/gpt-4o-mini); overrides the recipe.",
    ),
]


OptimizerModelOpt = Annotated[
    str | None,
    typer.Option(
        "--optimizer-model",
        help="Model that proposes edits (Sleep: also mines tasks and judges rubrics); "
        "overrides the recipe's.",
    ),
]


ApiBaseOpt = Annotated[
    str | None,
    typer.Option(
        "--api-base",
        envvar=API_BASE_ENV,
        help="URL of the server the target model runs on (e.g. http://localhost:8080/v1 for "
        "llama.cpp, vLLM or Ollama, with --model openai/<name>).",
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


MaxCallsOpt = Annotated[
    int | None,
    typer.Option("--max-calls", min=0, help="Hard limit on model calls (Sleep: the night's)."),
]


MaxUsdOpt = Annotated[
    float | None,
    typer.Option("--max-usd", min=0.0, help="Hard limit on spend in USD (Sleep: the night's)."),
]


MaxTokensOpt = Annotated[
    int | None, typer.Option("--max-tokens", min=0, help="Hard limit on tokens (the night's).")
]


HomeOpt = Annotated[
    Path | None, typer.Option("--home", help="Where the agents keep transcripts (default: ~).")
]


JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object (for scripts).")]


SeedOpt = Annotated[int, typer.Option("--seed", help="The one seed for every random choice.")]


ThreadsOpt = Annotated[int, typer.Option("--threads", min=1, help="Parallel model calls.")]


MaxErrorsOpt = Annotated[
    int,
    typer.Option(
        "--max-errors", min=0, help="Failed model calls tolerated per evaluation before stopping."
    ),
]


DebugOpt = Annotated[bool, typer.Option("--debug", help="Show tracebacks and debug logs.")]

OptimizerFlagOpt = Annotated[
    OptimizerChoice | None,
    typer.Option("--optimizer", help="Optimizer to use instead of the recipe's."),
]


LrOpt = Annotated[float | None, typer.Option("--lr", help="Textual learning rate in (0, 1].")]


EpochsOpt = Annotated[
    int | None, typer.Option("--epochs", min=1, help="Passes over the training set.")
]


BatchSizeOpt = Annotated[
    int | None, typer.Option("--batch-size", min=1, help="Training examples per step.")
]


class RegistryOption(OptionInfo):
    """A `typer.Option` whose help is written each time the command line is built (every run
    of the app), e.g. from a registry, so a name registered later is listed too."""

    def __init__(self, option: OptionInfo, describe: Callable[[], str]) -> None:
        # A copy of a built option (no `super().__init__`: `typer.Option` made it already).
        self.__dict__.update(vars(option))
        self.describe = describe

    @property  # type: ignore[override]
    def help(self) -> str:
        """The help, written now."""
        return self.describe()

    @help.setter
    def help(self, value: str | None) -> None:
        """Ignored: the help is always written by `describe`."""


# -- flag records ---------------------------------------------------------------------------


class FlagRecord:
    """Base of a frozen dataclass of flags: each field is annotated with its `typer.Option`
    (an `...Opt` alias) and has its default, so a command that takes the record as one
    parameter shows every field as its own flag (`takes_flag_records`)."""


C = TypeVar("C", bound=Callable[..., None])


def takes_flag_records(command: C) -> C:
    """Let a typer command take `FlagRecord`s: typer sees each record's fields as the
    command's flags (under the field names), and the command receives the record built from
    them. Every other parameter is passed through unchanged; apply under `@app.command`."""
    hints = get_type_hints(command, include_extras=True)
    parameters: list[inspect.Parameter] = []
    records: dict[str, tuple[type[FlagRecord], list[str]]] = {}
    for parameter in inspect.signature(command).parameters.values():
        annotation = hints.get(parameter.name, parameter.annotation)
        if isinstance(annotation, type) and issubclass(annotation, FlagRecord):
            fields = _record_parameters(annotation)
            records[parameter.name] = (annotation, [p.name for p in fields])
            parameters += fields
        else:
            kind = inspect.Parameter.KEYWORD_ONLY
            parameters.append(parameter.replace(annotation=annotation, kind=kind))
    taken = [p.name for p in parameters]
    if len(taken) != len(set(taken)):
        raise TypeError(f"{command.__name__}: a flag record repeats a parameter name: {taken}")

    @functools.wraps(command)
    def run(**given: Any) -> None:
        for name, (record, names) in records.items():
            given[name] = record(**{field: given.pop(field) for field in names})
        command(**given)

    run.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    run.__annotations__ = {p.name: p.annotation for p in parameters}
    return cast(C, run)


def _record_parameters(record: type[FlagRecord]) -> list[inspect.Parameter]:
    hints = get_type_hints(record, include_extras=True)
    found = []
    for field in dataclasses.fields(record):  # type: ignore[arg-type]
        if field.default is dataclasses.MISSING:
            raise TypeError(f"{record.__name__}.{field.name} needs a default to be a flag")
        found.append(
            inspect.Parameter(
                field.name,
                inspect.Parameter.KEYWORD_ONLY,
                default=field.default,
                annotation=hints[field.name],
            )
        )
    return found


@dataclass(frozen=True)
class CompileFlags(FlagRecord):
    """The flags a resumed run must repeat (they are part of the run's config); a command taking
    `flags: CompileFlags` shows each field as its own flag (`takes_flag_records`)."""

    optimizer: OptimizerFlagOpt = None
    lr: LrOpt = None
    epochs: EpochsOpt = None
    batch_size: BatchSizeOpt = None
    model: ModelOpt = None
    optimizer_model: OptimizerModelOpt = None
    max_calls: MaxCallsOpt = None
    max_usd: MaxUsdOpt = None
    seed: SeedOpt = 0
    threads: ThreadsOpt = DEFAULT_THREADS
    max_errors: MaxErrorsOpt = 10
    api_base: ApiBaseOpt = None
    optimizer_api_base: OptimizerApiBaseOpt = None

    def overrides(self) -> dict[str, Any]:
        """Optimizer settings given on the command line."""
        pairs = (("lr", self.lr), ("epochs", self.epochs), ("batch_size", self.batch_size))
        return {k: v for k, v in pairs if v is not None}

    def resume_command(self, recipe: Path, run_dir: Path) -> str:
        """The exact command that continues this run."""
        return shlex.join(["skillopt-dsl", "compile", str(recipe), *self.resume_words(run_dir)])

    def resume_words(self, run_dir: Path) -> list[str]:
        """The flags that continue this run in `run_dir` (after what names the task)."""
        words: list[str] = []
        for name in (
            "lr",
            "epochs",
            "batch_size",
            "model",
            "optimizer_model",
            "api_base",
            "optimizer_api_base",
            "max_calls",
            "max_usd",
        ):
            value = getattr(self, name)
            if value is not None:
                words += ["--" + name.replace("_", "-"), str(value)]
        if self.optimizer is not None:
            words += ["--optimizer", self.optimizer.value]
        words += ["--seed", str(self.seed), "--threads", str(self.threads)]
        words += ["--max-errors", str(self.max_errors), "--run-dir", str(run_dir), "--resume"]
        return words
