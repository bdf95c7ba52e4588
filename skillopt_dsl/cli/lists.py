"""`skillopt-dsl benchmarks list` and `skillopt-dsl recipes list`: what is there to run."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from skillopt_dsl.benchmarks import get_benchmark, list_benchmarks
from skillopt_dsl.cli.options import DebugOpt
from skillopt_dsl.cli_harness import handled
from skillopt_dsl.errors import UserInputError

benchmarks_app = typer.Typer(help="The built-in benchmarks.", no_args_is_help=True)


recipes_app = typer.Typer(help="The runnable recipes.", no_args_is_help=True)


@benchmarks_app.command("list")
def benchmarks_list(debug: DebugOpt = False) -> None:
    """List the built-in benchmarks."""
    with handled(debug):
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
    with handled(debug):
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
