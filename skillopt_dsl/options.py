"""Keyword front doors over typed settings records (issue 28).

A public API with many optional keywords (`LM(...)`, `evaluate(...)`, `SkillOptimizer(...)`,
`CommandAgent(...)`, `run_sweep_worker(...)`) keeps its required positionals and takes the
rest as `**options: Unpack[XOptions]` (PEP 692): `XOptions` is a `TypedDict(total=False)`
mirroring the frozen dataclass `XSettings` field for field, so mypy and IDEs check every
keyword call. Inside, `settings_from` builds the `XSettings` record once (an unknown keyword is
a `TypeError` naming the API, the keyword and the closest known one), and `takes_options` keeps
`inspect.signature` / `help()` showing each keyword with its default, as before.
"""

from __future__ import annotations

import dataclasses
import difflib
import inspect
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

__all__ = ["settings_from", "takes_options"]

R = TypeVar("R")
F = TypeVar("F", bound=Callable[..., Any])


def settings_from(api: str, record: type[R], options: Mapping[str, object]) -> R:
    """`record(**options)`, refusing a keyword `record` does not have with a `TypeError`
    that names `api` (e.g. `"LM"`), the keyword, the closest known one and the full list."""
    known = _keywords(record)
    unknown = [name for name in options if name not in known]
    if unknown:
        raise TypeError(_unknown_message(api, unknown[0], known))
    return record(**options)


def takes_options(record: type) -> Callable[[F], F]:
    """Decorate a front door whose `**options` are `record`'s fields: its runtime signature
    (`inspect.signature`, `help()`) lists each field as a keyword with its default."""

    def decorate(function: F) -> F:
        shown = inspect.signature(function)
        kept = [p for p in shown.parameters.values() if p.kind is not p.VAR_KEYWORD]
        function.__signature__ = shown.replace(parameters=[*kept, *_parameters(record)])  # type: ignore[attr-defined]
        return function

    return decorate


def _keywords(record: type) -> list[str]:
    return [f.name for f in dataclasses.fields(record) if f.init]


def _parameters(record: type) -> list[inspect.Parameter]:
    shown = []
    for f in dataclasses.fields(record):
        if not f.init:
            continue
        if f.default is not dataclasses.MISSING:
            default = f.default
        elif f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        else:
            default = inspect.Parameter.empty
        shown.append(inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY,
                                       default=default, annotation=f.type))  # fmt: skip
    return shown


def _unknown_message(api: str, keyword: str, known: list[str]) -> str:
    close = difflib.get_close_matches(keyword, known, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return (
        f"{api}() got an unexpected keyword argument {keyword!r}{hint} "
        f"({api} takes {', '.join(known)})"
    )
