"""The one error harness of every command line (`skillopt-dsl ...` and `skillopt-dsl sleep ...`).

`handled(debug, ...)` wraps a command's body: a user's mistake (a `SkillOptError`, a missing or
unreadable file) prints one line, `Error: <what to do>`, and exits 1; any other exception
prints one line naming it as unexpected and exits 1; Ctrl-C exits 130. With `--debug` the
traceback is shown instead and debug logs go to stderr. Progress lines go to stderr through
`logging`, never to stdout (which stays clean for `--json`).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import click
import typer
from rich.console import Console
from rich.logging import RichHandler

from skillopt_dsl.errors import SkillOptError

__all__ = ["EXIT_INTERRUPTED", "EXIT_USER_ERROR", "USER_ERRORS", "describe", "handled"]

EXIT_USER_ERROR = 1
EXIT_INTERRUPTED = 130
USER_ERRORS: tuple[type[BaseException], ...] = (SkillOptError, OSError)
"""Errors that are the user's to fix: printed as one line without a traceback."""

_HANDLER_MARK = "_skillopt_cli_handler"


@contextmanager
def handled(
    debug: bool,
    *,
    progress_logger: str = "skillopt_dsl.progress",
    interrupted: str = "Interrupted.",
) -> Iterator[None]:
    """Turn errors into one line and an exit code (or a traceback with `--debug`).

    Args:
        debug: show tracebacks and debug logs.
        progress_logger: the logger whose INFO lines are the command's progress.
        interrupted: the line printed on Ctrl-C (say how to resume or clean up).
    """
    setup_logging(debug, progress_logger)
    try:
        yield
    except (typer.Exit, typer.Abort, click.exceptions.Exit, click.ClickException):
        raise
    except KeyboardInterrupt:
        typer.echo(interrupted, err=True)
        raise typer.Exit(EXIT_INTERRUPTED) from None
    except USER_ERRORS as exc:
        if debug:
            raise
        typer.echo(f"Error: {describe(exc)}", err=True)
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


def describe(exc: BaseException) -> str:
    """One line for a user's error (a file error names the file)."""
    if isinstance(exc, OSError) and exc.filename is not None:
        return f"{exc.strerror or type(exc).__name__}: {exc.filename}"
    return str(exc)


def setup_logging(debug: bool, progress_logger: str = "skillopt_dsl.progress") -> None:
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
    logging.getLogger(progress_logger).setLevel(logging.INFO)
