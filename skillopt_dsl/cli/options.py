"""The command line's flags and choices, declared once and shared by its commands."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

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
    typer.Option("--optimizer-model", help="Model that proposes edits; overrides the recipe."),
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
    int | None, typer.Option("--max-calls", min=0, help="Hard limit on model calls.")
]


MaxUsdOpt = Annotated[
    float | None, typer.Option("--max-usd", min=0.0, help="Hard limit on spend in USD.")
]


SeedOpt = Annotated[int, typer.Option("--seed", help="The one seed for every random choice.")]


ThreadsOpt = Annotated[int, typer.Option("--threads", min=1, help="Parallel model calls.")]


MaxErrorsOpt = Annotated[
    int,
    typer.Option(
        "--max-errors", min=0, help="Failed model calls tolerated per evaluation before stopping."
    ),
]


DebugOpt = Annotated[bool, typer.Option("--debug", help="Show tracebacks and debug logs.")]


@dataclass(frozen=True)
class CompileFlags:
    """The flags a resumed run must repeat (they are part of the run's config)."""

    optimizer: OptimizerChoice | None
    lr: float | None
    epochs: int | None
    batch_size: int | None
    model: str | None
    optimizer_model: str | None
    max_calls: int | None
    max_usd: float | None
    seed: int
    threads: int
    max_errors: int
    api_base: str | None = None
    optimizer_api_base: str | None = None

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
