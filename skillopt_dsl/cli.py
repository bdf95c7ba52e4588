"""The `skillopt-dsl` command line: compile, sweep, eval, transfer, report, export, list.

Every command takes a recipe (a Python file declaring `module` and `splits`, see
`skillopt_dsl.recipes`) or a run directory; flags override the recipe. Errors print one line
and exit 1 (`--debug` shows the traceback instead); Ctrl-C exits 130 and, during `compile`,
prints the exact command that resumes the run.
"""

from __future__ import annotations

import ast
import datetime as _dt
import importlib
import json
import logging
import shlex
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, fields, is_dataclass, replace
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, NoReturn

import click
import typer
from rich import box
from rich.console import Console
from rich.logging import RichHandler
from rich.table import Table

from skillopt_dsl.baselines import Baseline, constant_baseline, not_better_warning
from skillopt_dsl.benchmarks import get_benchmark, list_benchmarks
from skillopt_dsl.compile import CompileResult
from skillopt_dsl.compile import compile as compile_skill
from skillopt_dsl.errors import ModelError, SkillOptError, UserInputError
from skillopt_dsl.evaluate import EvaluationReport, evaluate
from skillopt_dsl.export import export_agent_skill, export_skill, load_skill, split_front_matter
from skillopt_dsl.lm import LM, Budget, SamplingParams
from skillopt_dsl.lm.endpoint import API_BASE_ENV, OPTIMIZER_API_BASE_ENV, at_api_base
from skillopt_dsl.optimizers.base import Optimizer
from skillopt_dsl.progress import CompileProgress
from skillopt_dsl.recipes import Recipe, load_recipe
from skillopt_dsl.settings import DEFAULT_THREADS
from skillopt_dsl.types import Example

__all__ = ["app", "main"]

logger = logging.getLogger(__name__)

app = typer.Typer(
    name="skillopt-dsl",
    help="Train the markdown skill documents that frozen LLM agents read.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
benchmarks_app = typer.Typer(help="The built-in benchmarks.", no_args_is_help=True)
recipes_app = typer.Typer(help="The runnable recipes.", no_args_is_help=True)
app.add_typer(benchmarks_app, name="benchmarks")
app.add_typer(recipes_app, name="recipes")
from skillopt_dsl.sleep.cli import sleep_app  # noqa: E402  (the `sleep` sub-app)

app.add_typer(sleep_app, name="sleep")

EXIT_USER_ERROR = 1
EXIT_INTERRUPTED = 130
_USER_ERRORS = (
    SkillOptError,
    FileNotFoundError,
    IsADirectoryError,
    NotADirectoryError,
    PermissionError,
)


class OptimizerChoice(StrEnum):
    """The optimizers `--optimizer` can name."""

    gradient_text = "gradient-text"
    beam = "beam"
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


# -- shared options ----------------------------------------------------------------------------
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


# -- error handling and logging ----------------------------------------------------------------
@contextmanager
def _handled(debug: bool) -> Iterator[None]:
    """Turn errors into one line and an exit code (or a traceback with `--debug`)."""
    _setup_logging(debug)
    try:
        yield
    except (typer.Exit, typer.Abort, click.exceptions.Exit, click.ClickException):
        raise
    except KeyboardInterrupt:
        typer.echo("Interrupted.", err=True)
        raise typer.Exit(EXIT_INTERRUPTED) from None
    except _USER_ERRORS as exc:
        if debug:
            raise
        typer.echo(f"Error: {_describe(exc)}", err=True)
        raise typer.Exit(EXIT_USER_ERROR) from None
    except Exception as exc:
        if debug:
            raise
        typer.echo(
            f"Error: {type(exc).__name__}: {exc} (unexpected; rerun with --debug for the traceback "
            "and report it)",
            err=True,
        )
        raise typer.Exit(EXIT_USER_ERROR) from None


def _describe(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.filename is not None:
        return f"{exc.strerror or type(exc).__name__}: {exc.filename}"
    return str(exc)


_HANDLER_MARK = "_skillopt_cli_handler"


def _setup_logging(debug: bool) -> None:
    """Library warnings and progress lines to stderr; everything with `--debug`."""
    package = logging.getLogger("skillopt_dsl")
    for old in [h for h in package.handlers if getattr(h, _HANDLER_MARK, False)]:
        package.removeHandler(old)
    handler: logging.Handler
    if sys.stderr.isatty():
        # A rich console looks up stderr when it writes, so log lines land above a live panel.
        handler = RichHandler(console=Console(stderr=True), show_time=False, show_path=debug)
    else:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(
            logging.Formatter("%(levelname)s %(message)s" if debug else "%(message)s")
        )
    setattr(handler, _HANDLER_MARK, True)
    package.addHandler(handler)
    package.setLevel(logging.DEBUG if debug else logging.WARNING)
    logging.getLogger("skillopt_dsl.progress").setLevel(logging.INFO)


def _lazy(module: str, name: str, what: str) -> Any:
    """Import `module.name` on first use, with a clear error when it is not available."""
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise UserInputError(
            f"{what} is not available in this installation ({module}.{name}: {exc}); "
            "upgrade skillopt-dsl"
        ) from exc


# -- building the run from a recipe and flags --------------------------------------------------
def _lm_for(model: str, base: str | LM | None) -> LM:
    """An `LM` for `model`, keeping the recipe's sampling parameters when it declared an `LM`."""
    params = base.params if isinstance(base, LM) else SamplingParams()
    return LM(model, params=params)


def _target(recipe: Recipe, model: str | None, api_base: str | None) -> Any:
    """The recipe's target model, or `--model`, served at `--api-base` when one is given."""
    target = recipe.lm if model is None else _lm_for(model, recipe.lm)
    return at_api_base(target, api_base)


def _models(
    recipe: Recipe,
    model: str | None,
    optimizer_model: str | None,
    api_base: str | None = None,
    optimizer_api_base: str | None = None,
) -> tuple[Any, Any]:
    """Target and optimizer models: the recipe's, overridden by the flags."""
    chosen = (
        recipe.optimizer_lm
        if optimizer_model is None
        else _lm_for(optimizer_model, recipe.optimizer_lm)
    )
    reflector = at_api_base(
        chosen,
        optimizer_api_base,
        flag="--optimizer-api-base",
        model_flag="--optimizer-model",
        env=OPTIMIZER_API_BASE_ENV,
    )
    return _target(recipe, model, api_base), reflector


def _budget(base: Budget | None, max_calls: int | None, max_usd: float | None) -> Budget | None:
    if max_calls is None and max_usd is None:
        return base
    current = base or Budget()
    return Budget(
        max_calls=current.max_calls if max_calls is None else max_calls,
        max_tokens=current.max_tokens,
        max_usd=current.max_usd if max_usd is None else max_usd,
    )


def _optimizer(
    base: Optimizer | None, choice: OptimizerChoice | None, overrides: Mapping[str, Any]
) -> Optimizer | None:
    """The recipe's optimizer, or the one `--optimizer` names, with flag overrides applied."""
    from skillopt_dsl.optimizers.gradient_text import GradientText

    chosen: Optimizer | None = base
    if choice is OptimizerChoice.gradient_text and not isinstance(base, GradientText):
        chosen = GradientText(**_carried(base, GradientText))
    elif choice is OptimizerChoice.beam:
        beam = _lazy("skillopt_dsl.optimizers.beam", "Beam", "the beam optimizer")
        chosen = beam(**_carried(base, beam))
    elif choice is OptimizerChoice.optuna:
        optuna_lr = _lazy("skillopt_dsl.optimizers.optuna_lr", "OptunaLR", "the optuna optimizer")
        inner = base if isinstance(base, GradientText) else GradientText()
        chosen = optuna_lr(inner=inner)
    if not overrides:
        return chosen
    result: Optimizer = chosen if chosen is not None else GradientText()
    for name, value in overrides.items():
        result = _override(result, name, value)
    return result


def _carried(base: Optimizer | None, cls: type) -> dict[str, Any]:
    """The recipe's proposers, carried to another optimizer that takes proposers."""
    if base is None or not is_dataclass(cls) or "proposers" not in _field_names(cls):
        return {}
    proposers = getattr(base, "proposers", None)
    return {} if proposers is None else {"proposers": proposers}


def _field_names(obj: Any) -> set[str]:
    return {f.name for f in fields(obj) if f.init} if is_dataclass(obj) else set()


def _override(optimizer: Optimizer, name: str, value: Any) -> Optimizer:
    """`dataclasses.replace` one setting, on the optimizer or on its `inner` optimizer."""
    flag = "--" + name.replace("_", "-")
    if name in (getattr(optimizer, "search_space", None) or {}):
        raise UserInputError(
            f"{flag} is searched by the {type(optimizer).__name__} optimizer, so a fixed value "
            "would be ignored; drop the flag or set the search space in the recipe"
        )
    if name in _field_names(optimizer):
        return replace(optimizer, **{name: value})  # type: ignore[type-var]
    inner = getattr(optimizer, "inner", None)
    if inner is not None and name in _field_names(inner):
        return replace(optimizer, inner=replace(inner, **{name: value}))  # type: ignore[type-var]
    known = ", ".join(sorted(_field_names(optimizer))) or "none settable from the command line"
    raise UserInputError(
        f"{flag} does not apply to the {type(optimizer).__name__} optimizer (its settings: {known})"
    )


def _default_run_dir(recipe: Recipe) -> Path:
    stamp = _dt.datetime.now(_dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    return Path("runs") / f"{recipe.name}-{stamp}"


def _checked_run_dir(recipe: Recipe, run_dir: Path | None, resume: bool) -> Path:
    if not resume:
        return run_dir if run_dir is not None else _default_run_dir(recipe)
    if run_dir is None:
        raise UserInputError(
            f"--resume needs the run to continue: skillopt-dsl compile {recipe.path} "
            "--run-dir runs/<the run> --resume"
        )
    if not (run_dir / "config.json").is_file():
        raise UserInputError(f"there is no run to resume in {run_dir} (no config.json)")
    return run_dir


# -- compile -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class _CompileFlags:
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
        words = ["skillopt-dsl", "compile", str(recipe)]
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
        return shlex.join(words)


@app.command("compile")
def compile_command(
    recipe: RecipeArg,
    optimizer: Annotated[
        OptimizerChoice | None,
        typer.Option("--optimizer", help="Optimizer to use instead of the recipe's."),
    ] = None,
    lr: Annotated[
        float | None, typer.Option("--lr", help="Textual learning rate in (0, 1].")
    ] = None,
    epochs: Annotated[
        int | None, typer.Option("--epochs", min=1, help="Passes over the training set.")
    ] = None,
    batch_size: Annotated[
        int | None, typer.Option("--batch-size", min=1, help="Training examples per step.")
    ] = None,
    model: ModelOpt = None,
    optimizer_model: OptimizerModelOpt = None,
    api_base: ApiBaseOpt = None,
    optimizer_api_base: OptimizerApiBaseOpt = None,
    max_calls: MaxCallsOpt = None,
    max_usd: MaxUsdOpt = None,
    run_dir: Annotated[
        Path | None,
        typer.Option("--run-dir", help="Where the run is recorded (default runs/<recipe>-<time>)."),
    ] = None,
    resume: Annotated[
        bool, typer.Option("--resume", help="Continue the run in --run-dir.")
    ] = False,
    seed: SeedOpt = 0,
    threads: ThreadsOpt = DEFAULT_THREADS,
    max_errors: MaxErrorsOpt = 10,
    debug: DebugOpt = False,
) -> None:
    """Train the recipe's skill; prints seed vs best scores and where best_skill.md is."""
    flags = _CompileFlags(
        optimizer,
        lr,
        epochs,
        batch_size,
        model,
        optimizer_model,
        max_calls,
        max_usd,
        seed,
        threads,
        max_errors,
        api_base,
        optimizer_api_base,
    )
    with _handled(debug):
        _run_compile(recipe, flags, run_dir, resume)


def _run_compile(
    recipe_path: Path, flags: _CompileFlags, run_dir: Path | None, resume: bool
) -> None:
    recipe = load_recipe(recipe_path)
    target, reflector = _models(
        recipe, flags.model, flags.optimizer_model, flags.api_base, flags.optimizer_api_base
    )
    chosen = _optimizer(recipe.optimizer, flags.optimizer, flags.overrides())
    directory = _checked_run_dir(recipe, run_dir, resume)
    started = time.perf_counter()
    epochs = getattr(chosen, "epochs", None)
    with CompileProgress(Console(stderr=True), total_epochs=epochs) as progress:
        try:
            result = compile_skill(
                recipe.module,
                recipe.splits.train,
                recipe.splits.val,
                optimizer=chosen,
                lm=target,
                optimizer_lm=reflector,
                budget=_budget(recipe.budget, flags.max_calls, flags.max_usd),
                run_dir=directory,
                resume=resume,
                testset=recipe.splits.test or None,
                seed=flags.seed,
                threads=flags.threads,
                max_errors=flags.max_errors,
                on_event=progress,
            )
        except KeyboardInterrupt:
            _interrupted(directory, flags.resume_command(recipe.path, directory))
    _print_compile(result, time.perf_counter() - started)


def _interrupted(run_dir: Path, command: str) -> NoReturn:
    best = run_dir / "best_skill.md"
    kept = f"The best skill so far is in {best}" if best.is_file() else "No skill was saved yet"
    typer.echo(f"\nInterrupted. {kept}.", err=True)
    typer.echo(f"Resume with:\n  {command}", err=True)
    raise typer.Exit(EXIT_INTERRUPTED)


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def _delta(after: float | None, before: float | None) -> str:
    return "-" if before is None or after is None else f"{after - before:+.4f}"


def _scores_table(
    title: str,
    rows: Sequence[tuple[str, float | None, float | None]],
    baseline: Baseline | None,
    skill_column: str,
) -> Table:
    """One row per split: seed, best constant answer (when the output is a label), the skill,
    and the skill's gain over each."""
    constant = None if baseline is None else f"constant {baseline.label!r}"
    columns = ["split", "seed", *([constant] if constant else []), skill_column, "vs seed"]
    columns += ["vs constant"] if constant else []
    table = Table(title=title)
    for column in columns:
        table.add_column(column, justify="left" if column == "split" else "right")
    for split, seed, skill in rows:
        cells = [split, _fmt(seed)]
        fixed = _constant_on(baseline, split)
        cells += [_fmt(fixed)] if baseline is not None else []
        cells += [_fmt(skill), _delta(skill, seed)]
        cells += [_delta(skill, fixed)] if baseline is not None else []
        table.add_row(*cells)
    return table


def _constant_on(baseline: Baseline | None, split: str) -> float | None:
    """The constant answer's score on `split` (validation: where it was chosen; any other
    split: the held-out score)."""
    if baseline is None:
        return None
    return baseline.val_score if split == "validation" else baseline.test_score


def _usage_line(usage: Any) -> str:
    cost = "unknown (unpriced model)" if usage.cost_usd is None else f"${usage.cost_usd:.4f}"
    return (
        f"calls: {usage.calls}  cache hits: {usage.cache_hits}  tokens: {usage.total_tokens} "
        f"(prompt {usage.prompt_tokens}, completion {usage.completion_tokens})  cost: {cost}"
    )


def _gate_table(result: CompileResult) -> Table:
    """Every gate decision with its evidence: the significance it could use (alpha), the
    statistic it needed, its p-value, what it spent, and where a stopped loser stopped."""
    table = Table(title="gate decisions: the evidence each needed and had", box=box.SIMPLE_HEAD)
    for column in ("#", "verdict", "cand", "inc", "n", "alpha", "needed", "p", "spent"):
        table.add_column(column, justify="left" if column == "verdict" else "right")
    for number, d in enumerate(result.gate_log, start=1):
        verdict = (
            "ACCEPTED"
            if d.accepted
            else f"stop@{d.stopped_at_look}"
            if d.stopped_early
            else "rejected"
        )
        table.add_row(
            str(number),
            verdict,
            f"{d.candidate_score:.3f}",
            f"{d.incumbent_score:.3f}",
            f"{d.examples_scored}/{d.n_examples}",
            "-" if d.alpha is None else f"{d.alpha:.2g}",
            "-" if d.critical is None else f"{d.critical:g}",
            "-" if d.p_value is None else f"{d.p_value:.2g}",
            "-" if d.charged is None else f"{d.charged:.2g}",
        )
    return table


def _print_compile(result: CompileResult, wall_s: float) -> None:
    name = result.metadata.get("name", "skill")
    rows = (
        ("validation", result.seed_val_score, result.val_score),
        ("test", result.seed_test_score, result.test_score),
    )
    title = f"{name}: seed vs {'constant answer vs ' if result.baseline else ''}compiled"
    Console(soft_wrap=True).print(_scores_table(title, rows, result.baseline, "compiled"))
    if result.baseline is None:
        typer.echo("no constant baseline: the output has no fixed label set; compare with the seed")
    else:
        typer.echo(
            f"constant answer: {result.baseline.label!r} for every example (best on validation, "
            "no model call)"
        )
    if result.baseline_warning is not None:
        typer.echo(f"WARNING: {result.baseline_warning}")
    accepted = sum(1 for d in result.gate_log if d.accepted)
    typer.echo(
        f"stopped: {result.stop_reason}; {accepted} of {len(result.gate_log)} candidates accepted"
    )
    if result.gate_log:
        Console(soft_wrap=True).print(_gate_table(result))
    if result.preflight is not None:
        typer.echo(result.preflight.summary())
        if result.preflight.warning is not None:
            typer.echo(f"WARNING: {result.preflight.warning}")
    typer.echo(f"search {_usage_line(result.usage)}")
    if result.test_usage is not None:
        typer.echo(f"test   {_usage_line(result.test_usage)} (not charged to the search budget)")
    typer.echo(f"wall time: {wall_s:.1f}s")
    if result.run_dir is not None:
        typer.echo(f"best skill: {result.run_dir / 'best_skill.md'}")
        typer.echo(f"report:     skillopt-dsl report {result.run_dir}")


# -- sweep -------------------------------------------------------------------------------------
@app.command("sweep")
def sweep_command(
    recipe: RecipeArg,
    n_trials: Annotated[
        int,
        typer.Option(
            "--n-trials",
            min=1,
            help="Finished trials the study must reach (shared by every worker; a resume runs only the rest).",
        ),
    ],
    storage: Annotated[
        str | None,
        typer.Option(
            "--storage",
            help="Optuna storage URL shared by workers (default sqlite:///runs/<recipe>-sweep.db).",
        ),
    ] = None,
    study: Annotated[
        str | None, typer.Option("--study", help="Study name (default: the recipe name).")
    ] = None,
    model: ModelOpt = None,
    optimizer_model: OptimizerModelOpt = None,
    api_base: ApiBaseOpt = None,
    optimizer_api_base: OptimizerApiBaseOpt = None,
    max_calls: MaxCallsOpt = None,
    max_usd: MaxUsdOpt = None,
    run_dir: Annotated[
        Path | None, typer.Option("--run-dir", help="Where trial runs are recorded.")
    ] = None,
    seed: SeedOpt = 0,
    debug: DebugOpt = False,
) -> None:
    """Run a sweep worker; several workers may share one study through --storage."""
    with _handled(debug):
        loaded = load_recipe(recipe)
        run_sweep_worker = _lazy("skillopt_dsl.sweeps", "run_sweep_worker", "sweeps")
        target, reflector = _models(loaded, model, optimizer_model, api_base, optimizer_api_base)
        folder = run_dir if run_dir is not None else Path("runs") / f"{loaded.name}-sweep"
        if storage is None:
            folder.parent.mkdir(parents=True, exist_ok=True)
            storage = f"sqlite:///{folder.parent / (loaded.name + '-sweep.db')}"
        result = run_sweep_worker(
            loaded.module,
            loaded.splits,
            storage=storage,
            study_name=study or loaded.name,
            n_trials=n_trials,
            inner=loaded.optimizer,
            lm=target,
            optimizer_lm=reflector,
            budget=_budget(loaded.budget, max_calls, max_usd),
            run_dir=folder,
            seed=seed,
        )
        _print_sweep(result)
        typer.echo(f"storage: {storage}  study: {study or loaded.name}")


def _print_sweep(result: Any) -> None:
    """Print a `SweepResult`: one row per trial of the study, then the best trial."""
    table = Table(title=f"study {result.study_name}: {len(result.trials)} trials")
    for column in ("trial", "state", "params", "val score", "calls", "run dir"):
        table.add_column(column)
    for trial in result.trials:
        params = ", ".join(f"{k}={_short(v)}" for k, v in sorted(trial.params.items()))
        table.add_row(
            str(trial.number),
            trial.state.name,
            params,
            _fmt(trial.value),
            str(trial.calls),
            str(trial.run_dir or "-"),
        )
    Console(soft_wrap=True).print(table)
    best = result.best
    if best is None:
        typer.echo("no trial has completed yet")
    else:
        typer.echo(f"best: trial {best.number}, val {_fmt(best.value)}, run dir {best.run_dir}")


def _short(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


# -- eval and transfer -------------------------------------------------------------------------
def _examples(recipe: Recipe, split: SplitChoice) -> list[Example]:
    examples: list[Example] = getattr(recipe.splits, split.value)
    if not examples:
        raise UserInputError(
            f"recipe {recipe.path} has an empty {split.value} split; choose another --split"
        )
    return examples


def _score(
    recipe: Recipe,
    skill_text: Any,
    examples: Sequence[Example],
    lm: Any,
    threads: int,
    seed: int,
    max_errors: int,
) -> EvaluationReport:
    report = evaluate(
        recipe.module,
        examples,
        skill=skill_text,
        lm=lm,
        threads=threads,
        seed=seed,
        max_errors=max_errors,
    )
    if report.records and report.n_errors == len(report.records):
        first = next(r.error for r in report.records if r.error)
        raise ModelError(f"every model call failed; the first error: {first}")
    return report


@app.command("eval")
def eval_command(
    skill_file: Annotated[
        Path, typer.Argument(help="A skill file (best_skill.md or any markdown).")
    ],
    recipe: RecipeOpt,
    split: Annotated[
        SplitChoice, typer.Option("--split", help="Which split to score.")
    ] = SplitChoice.test,
    model: ModelOpt = None,
    api_base: ApiBaseOpt = None,
    compare_seed: Annotated[
        bool,
        typer.Option(
            "--compare-seed/--no-compare-seed",
            help="Also score the recipe's seed skill on the split (twice the calls).",
        ),
    ] = True,
    threads: ThreadsOpt = DEFAULT_THREADS,
    seed: SeedOpt = 0,
    max_errors: MaxErrorsOpt = 10,
    debug: DebugOpt = False,
) -> None:
    """Score a skill file on a recipe's split beside the seed skill and the best constant
    answer (for label outputs); prints the means, counts and a warning when it is no better."""
    with _handled(debug):
        loaded = load_recipe(recipe)
        skill = load_skill(skill_file)
        target = _target(loaded, model, api_base)
        examples = _examples(loaded, split)
        report = _score(loaded, skill, examples, target, threads, seed, max_errors)
        seed_mean = (
            _score(loaded, None, examples, target, threads, seed, max_errors).mean
            if compare_seed
            else None
        )
        _print_eval(loaded, skill.hash, split, report, seed_mean)


def _print_eval(
    recipe: Recipe,
    skill_hash: str,
    split: SplitChoice,
    report: EvaluationReport,
    seed_mean: float | None,
) -> None:
    row_name = "validation" if split is SplitChoice.val else split.value
    held_out = None if split is SplitChoice.val else _examples(recipe, split)
    baseline = constant_baseline(recipe.module, recipe.splits.val, held_out)  # no model call
    typer.echo(f"skill {skill_hash[:12]} on {recipe.name}/{split.value} with {report.model}")
    title = f"seed vs {'constant answer vs ' if baseline else ''}skill"
    rows = [(row_name, seed_mean, report.mean)]
    Console(soft_wrap=True).print(_scores_table(title, rows, baseline, "skill"))
    summary = report.summary()
    correct = sum(1 for r in report.records if r.score >= 1.0)
    typer.echo(f"mean: {report.mean:.4f}")
    typer.echo(
        f"examples: {summary['n']}  correct: {correct}  model errors: {summary['errors']}  "
        f"parse failures: {summary['parse_failures']}"
    )
    if baseline is None:
        typer.echo("no constant baseline: the output has no fixed label set")
        return
    typer.echo(f"constant answer: {baseline.label!r} for every example (best on validation)")
    constant = _constant_on(baseline, row_name)
    warning = (
        None
        if constant is None
        else not_better_warning(baseline.label, row_name, report.mean, constant)
    )
    if warning is not None:
        typer.echo(f"WARNING: {warning}")


@app.command("transfer")
def transfer_command(
    skill_file: Annotated[Path, typer.Argument(help="The skill file to check.")],
    recipe: RecipeOpt,
    models: Annotated[str, typer.Option("--models", help="Comma-separated litellm model strings.")],
    split: Annotated[
        SplitChoice, typer.Option("--split", help="Which split to score.")
    ] = SplitChoice.test,
    api_base: Annotated[
        str | None,
        typer.Option(
            "--api-base",
            envvar=API_BASE_ENV,
            help="URL of the server the non-local models in --models run on "
            "(local/... models run in-process).",
        ),
    ] = None,
    threads: ThreadsOpt = DEFAULT_THREADS,
    seed: SeedOpt = 0,
    max_errors: MaxErrorsOpt = 10,
    debug: DebugOpt = False,
) -> None:
    """Score one skill and the recipe's seed skill across several models; prints a table."""
    with _handled(debug):
        loaded = load_recipe(recipe)
        skill = load_skill(skill_file)
        names = [m.strip() for m in models.split(",") if m.strip()]
        if not names:
            raise UserInputError(
                "--models needs at least one model, e.g. --models local/smollm2-135m,openai/gpt-4o-mini"
            )
        # every client is built (and a bad name refused) before any call
        clients = [_transfer_lm(name, loaded.lm, api_base) for name in names]
        examples = _examples(loaded, split)
        table = Table(title=f"transfer of skill {skill.hash[:12]} on {loaded.name}/{split.value}")
        for column in ("model", "seed", "skill", "delta", "n", "errors"):
            table.add_column(column, justify="left" if column == "model" else "right")
        for client in clients:
            seed_report = _score(loaded, None, examples, client, threads, seed, max_errors)
            report = _score(loaded, skill, examples, client, threads, seed, max_errors)
            table.add_row(
                client.model,
                _fmt(seed_report.mean),
                _fmt(report.mean),
                f"{report.mean - seed_report.mean:+.4f}",
                str(len(report.records)),
                str(report.n_errors),
            )
        Console(soft_wrap=True).print(table)


def _transfer_lm(name: str, base: str | LM | None, api_base: str | None) -> LM:
    """A transfer column's model: served at `api_base` unless it runs in-process."""
    client = _lm_for(name, base)
    if api_base is None or name.startswith("local/"):
        return client
    return LM(name, params=client.params, api_base=api_base)


# -- report and export -------------------------------------------------------------------------
def _run_folder(run_dir: Path) -> Path:
    if not run_dir.is_dir():
        raise UserInputError(f"run directory {str(run_dir)!r} does not exist")
    if not (run_dir / "best_skill.md").is_file():
        raise UserInputError(
            f"{run_dir} is not a run directory (no best_skill.md); pass runs/<run>"
        )
    return run_dir


@app.command("report")
def report_command(
    run_dir: Annotated[Path, typer.Argument(help="A run (or sweep) directory.")],
    debug: DebugOpt = False,
) -> None:
    """Write report.html and PNG plots for a run; prints the files written."""
    with _handled(debug):
        if not run_dir.is_dir():
            raise UserInputError(f"run directory {str(run_dir)!r} does not exist")
        write_report: Callable[[Path], list[Path]] = _lazy(
            "skillopt_dsl.report", "write_report", "reports"
        )
        for path in write_report(run_dir):
            typer.echo(str(path))


@app.command("export")
def export_command(
    run_dir: Annotated[Path, typer.Argument(help="The run whose best skill to export.")],
    out: Annotated[Path, typer.Option("--out", help="A file (md) or a folder (agent-skill).")],
    format: Annotated[
        ExportFormat, typer.Option("--format", help="md or agent-skill.")
    ] = ExportFormat.md,
    name: Annotated[
        str | None, typer.Option("--name", help="Agent-skill name (default: the module's).")
    ] = None,
    description: Annotated[
        str | None,
        typer.Option("--description", help="Agent-skill description (default: the module's)."),
    ] = None,
    debug: DebugOpt = False,
) -> None:
    """Export a run's best skill as best_skill.md or as an agent-skill folder."""
    with _handled(debug):
        best = _run_folder(run_dir) / "best_skill.md"
        meta, _ = split_front_matter(best.read_text(encoding="utf-8"))
        skill = load_skill(best)
        if not (run_dir / "summary.json").is_file():
            logger.warning(
                "%s has no summary.json: the run did not finish; exporting its best skill so far",
                run_dir,
            )
        if format is ExportFormat.md:
            written = export_skill(skill, out, {k: v for k, v in meta.items() if k != "skill_hash"})
        else:
            written = export_agent_skill(
                skill,
                out,
                name=name or str(meta.get("name") or _config(run_dir).get("module") or "skill"),
                description=description or str(meta.get("description") or ""),
                metadata=_scores(meta),
            )
        typer.echo(str(written))


def _config(run_dir: Path) -> dict[str, Any]:
    path = run_dir / "config.json"
    return dict(json.loads(path.read_text(encoding="utf-8"))) if path.is_file() else {}


def _scores(meta: Mapping[str, Any]) -> dict[str, Any]:
    keys = ("val_score", "seed_val_score", "test_score", "seed_test_score", "model", "run_id")
    return {k: meta[k] for k in keys if meta.get(k) is not None}


# -- listings ----------------------------------------------------------------------------------
@benchmarks_app.command("list")
def benchmarks_list(debug: DebugOpt = False) -> None:
    """List the built-in benchmarks."""
    with _handled(debug):
        table = Table(title="built-in benchmarks (BIG-bench, Apache-2.0)")
        for column in ("name", "answers", "description"):
            table.add_column(column)
        for name in list_benchmarks():
            benchmark = get_benchmark(name)
            answers = (
                ", ".join(benchmark.answer_choices) if benchmark.answer_choices else "free text"
            )
            table.add_row(name, answers, benchmark.description)
        Console(soft_wrap=True).print(table)


def _recipe_folder(folder: Path | None) -> Path:
    if folder is not None:
        if not folder.is_dir():
            raise UserInputError(f"recipe folder {str(folder)!r} does not exist")
        return folder
    for candidate in (Path.cwd() / "recipes", Path(__file__).resolve().parents[1] / "recipes"):
        if candidate.is_dir():
            return candidate
    raise UserInputError("no recipes/ folder here or next to the package; pass --dir PATH")


def _first_doc_line(path: Path) -> str:
    try:
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
    except SyntaxError as exc:
        return f"(does not parse: {exc.msg})"
    return doc.strip().splitlines()[0] if doc else "(no docstring)"


@recipes_app.command("list")
def recipes_list(
    folder: Annotated[
        Path | None, typer.Option("--dir", help="Folder of recipes (default ./recipes).")
    ] = None,
    debug: DebugOpt = False,
) -> None:
    """List recipe files with the first line of their docstring."""
    with _handled(debug):
        root = _recipe_folder(folder)
        files = sorted(p for p in root.glob("*.py") if not p.name.startswith("_"))
        if not files:
            raise UserInputError(f"no recipe files (*.py) in {root}")
        table = Table(title=f"recipes in {root}")
        table.add_column("recipe")
        table.add_column("description")
        for path in files:
            table.add_row(path.name, _first_doc_line(path))
        Console(soft_wrap=True).print(table)


def main() -> None:
    """Entry point for `python -m skillopt_dsl.cli`."""
    app()


if __name__ == "__main__":
    main()
