"""The `skillopt-dsl` command line: compile, sweep, eval, transfer, report, export, list.

Every command takes a recipe (a Python file declaring `module` and `splits`, see
`skillopt_dsl.recipes`) or a run directory; flags override the recipe. Errors print one line
and exit 1 (`--debug` shows the traceback instead); Ctrl-C exits 130 and, during `compile`,
prints the exact command that resumes the run.

The package's rooms: this file holds the commands (and the app `skillopt_dsl.cli:app`);
`options` the flags they share, `overrides` the optimizer settings taken from flags, `tables`
what they print, `lists` the `benchmarks list` and `recipes list` commands; errors go through the one harness, `skillopt_dsl.cli_harness`.
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.table import Table

from skillopt_dsl.cli.lists import benchmarks_app, recipes_app
from skillopt_dsl.cli.lists import benchmarks_list as benchmarks_list
from skillopt_dsl.cli.lists import recipes_list as recipes_list
from skillopt_dsl.cli.loading import load_in_process as load_in_process
from skillopt_dsl.cli.loading import progress_log
from skillopt_dsl.cli.options import (
    ApiBaseOpt,
    CompileFlags,
    DebugOpt,
    ExportFormat,
    MaxCallsOpt,
    MaxErrorsOpt,
    MaxUsdOpt,
    ModelOpt,
    OptimizerApiBaseOpt,
    OptimizerModelOpt,
    RecipeArg,
    RecipeOpt,
    SeedOpt,
    SplitChoice,
    ThreadsOpt,
)
from skillopt_dsl.cli.overrides import lazy, optimizer_from_flags
from skillopt_dsl.cli.skill_folder import (
    FolderFlags,
    FolderTask,
    SkillFolderOpt,
    compile_folder,
    compile_target,
    skill_folder_app,
)
from skillopt_dsl.cli.sleep_describe import describe_command
from skillopt_dsl.cli.tables import fmt_score, print_compile, print_eval, print_sweep
from skillopt_dsl.cli_harness import EXIT_INTERRUPTED, handled
from skillopt_dsl.compile import CompileResult, default_optimizer
from skillopt_dsl.compile import compile as compile_skill
from skillopt_dsl.errors import ModelError, UserInputError
from skillopt_dsl.evaluate import DEFAULT_THREADS, EvaluationReport, evaluate
from skillopt_dsl.export import export_agent_skill, export_skill, load_skill, split_front_matter
from skillopt_dsl.flags import takes_flag_records
from skillopt_dsl.lm import LM, Budget, SamplingParams
from skillopt_dsl.lm.endpoint import API_BASE_ENV, OPTIMIZER_API_BASE_ENV, at_api_base
from skillopt_dsl.progress import CompileProgress
from skillopt_dsl.recipes import Recipe, load_recipe
from skillopt_dsl.runs import RunFiles
from skillopt_dsl.sleep.cli import sleep_app
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
app.add_typer(benchmarks_app, name="benchmarks")
app.add_typer(recipes_app, name="recipes")
sleep_app.command("describe")(describe_command)  # it reuses compile --skill-folder (a layer up)
app.add_typer(sleep_app, name="sleep")
app.add_typer(skill_folder_app, name="skill-folder")


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
    if not RunFiles(run_dir).config.is_file():
        raise UserInputError(f"there is no run to resume in {run_dir} (no config.json)")
    return run_dir


@app.command("compile")
@takes_flag_records
def compile_command(
    recipe: Annotated[
        Path | None,
        typer.Argument(help="A recipe file, e.g. recipes/navigate_local.py (or --skill-folder)."),
    ] = None,
    skill_folder: SkillFolderOpt = None,
    *,
    folder: FolderFlags,
    flags: CompileFlags,
    run_dir: Annotated[
        Path | None,
        typer.Option("--run-dir", help="Where the run is recorded (default runs/<recipe>-<time>)."),
    ] = None,
    resume: Annotated[
        bool, typer.Option("--resume", help="Continue the run in --run-dir.")
    ] = False,
    debug: DebugOpt = False,
) -> None:
    """Train the recipe's skill; prints seed vs best scores and where best_skill.md is. With
    --skill-folder, train the folder's description on --trigger-data and stage the change in
    the run dir (the folder is untouched until `skillopt-dsl skill-folder adopt RUN_DIR`)."""
    with handled(debug):
        chosen = compile_target(recipe, skill_folder, folder)
        if isinstance(chosen, FolderTask):
            compile_folder(chosen, flags, run_dir, resume)
        else:
            _run_compile(chosen, flags, run_dir, resume)


def _run_compile(
    recipe_path: Path, flags: CompileFlags, run_dir: Path | None, resume: bool
) -> None:
    if recipe_path.is_file():  # else load_recipe's error is the first line
        progress_log.info("loading %s (the recipe and the model layer: a few seconds)", recipe_path)
    recipe = load_recipe(recipe_path)
    target, reflector = _models(
        recipe, flags.model, flags.optimizer_model, flags.api_base, flags.optimizer_api_base
    )
    load_in_process(target)
    chosen = optimizer_from_flags(
        recipe.optimizer, flags.optimizer, flags.overrides(), default_optimizer(recipe.module)
    )
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
    plots = _draw_study_plots(result)
    print_compile(result, time.perf_counter() - started)
    if plots:
        typer.echo(f"sweep plots: {plots[0].parent} ({len(plots)} files)")


def _draw_study_plots(result: CompileResult) -> list[Path]:
    """Draw the study plots the compile returned a request for (an `OptunaLR` sweep with
    `plots=True`): compile draws nothing itself."""
    if result.study_plots is None:
        return []
    draw: Callable[[CompileResult], list[Path]] = lazy(
        "skillopt_dsl.report", "draw_study_plots", "sweep plots"
    )
    return draw(result)


def _interrupted(run_dir: Path, command: str) -> NoReturn:
    best = RunFiles(run_dir).best
    kept = f"The best skill so far is in {best}" if best.is_file() else "No skill was saved yet"
    typer.echo(f"\nInterrupted. {kept}.", err=True)
    typer.echo(f"Resume with:\n  {command}", err=True)
    raise typer.Exit(EXIT_INTERRUPTED)


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
    with handled(debug):
        loaded = load_recipe(recipe)
        run_sweep_worker = lazy("skillopt_dsl.sweeps", "run_sweep_worker", "sweeps")
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
        plots = _draw_study_plots(result.compiled) if result.compiled is not None else []
        print_sweep(result)
        if plots:
            typer.echo(f"sweep plots: {plots[0].parent} ({len(plots)} files)")
        typer.echo(f"storage: {storage}  study: {study or loaded.name}")


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
    with handled(debug):
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
        held_out = None if split is SplitChoice.val else _examples(loaded, split)
        print_eval(loaded, skill.hash, split, report, seed_mean, held_out)


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
    with handled(debug):
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
                fmt_score(seed_report.mean),
                fmt_score(report.mean),
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


def _run_folder(run_dir: Path) -> Path:
    if not run_dir.is_dir():
        raise UserInputError(f"run directory {str(run_dir)!r} does not exist")
    if not (RunFiles(run_dir).best).is_file():
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
    with handled(debug):
        if not run_dir.is_dir():
            raise UserInputError(f"run directory {str(run_dir)!r} does not exist")
        write_report: Callable[[Path], list[Path]] = lazy(
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
    with handled(debug):
        best = RunFiles(_run_folder(run_dir)).best
        meta, _ = split_front_matter(best.read_text(encoding="utf-8"))
        skill = load_skill(best)
        if not RunFiles(run_dir).summary.is_file():
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
    path = RunFiles(run_dir).config
    return dict(json.loads(path.read_text(encoding="utf-8"))) if path.is_file() else {}


def _scores(meta: Mapping[str, Any]) -> dict[str, Any]:
    keys = ("val_score", "seed_val_score", "test_score", "seed_test_score", "model", "run_id")
    return {k: meta[k] for k in keys if meta.get(k) is not None}


def main() -> None:
    """Entry point for `python -m skillopt_dsl.cli`."""
    app()
