"""Flag records (issue 51): a typer command takes a frozen record of flags as one parameter and
typer shows each field as its own flag (`skillopt_dsl.flags.takes_flag_records`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

import pytest
import typer
from typer.testing import CliRunner

from skillopt_dsl.flags import CompileFlags, FlagRecord, takes_flag_records


@dataclass(frozen=True)
class Extra(FlagRecord):
    note: Annotated[str, typer.Option("--note", help="A note.")] = "none"


@dataclass(frozen=True)
class NoDefault(FlagRecord):
    x: Annotated[int, typer.Option("--x")]


def _app(seen: list[object]) -> typer.Typer:
    app = typer.Typer()

    @app.command()
    @takes_flag_records
    def run(
        name: Annotated[str, typer.Argument()],
        *,
        flags: CompileFlags,
        extra: Extra,
        loud: Annotated[bool, typer.Option("--loud")] = False,
    ) -> None:
        seen.append((name, flags, extra, loud))

    return app


def test_a_record_arrives_built_from_its_fields_flags() -> None:
    """Kills: a record field dropped from the command line, a record not built (the command
    would get loose keywords), or another parameter lost on the way."""
    seen: list[object] = []
    result = CliRunner().invoke(
        _app(seen), ["x", "--lr", "0.3", "--seed", "2", "--note", "n", "--loud"]
    )
    assert result.exit_code == 0, result.output
    assert seen == [("x", CompileFlags(lr=0.3, seed=2), Extra(note="n"), True)]
    seen.clear()
    CliRunner().invoke(_app(seen), ["y"])
    assert seen == [("y", CompileFlags(), Extra(), False)]


def test_bad_records_are_refused_when_the_command_is_declared() -> None:
    """Kills: a field without a default silently required, and two records sharing a flag
    name (one would shadow the other)."""

    def needs(*, flags: NoDefault) -> None: ...

    with pytest.raises(TypeError, match="needs a default"):
        takes_flag_records(needs)

    def twice(*, a: CompileFlags, b: CompileFlags) -> None: ...

    with pytest.raises(TypeError, match="repeats a parameter name"):
        takes_flag_records(twice)
