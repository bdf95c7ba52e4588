"""The one registry of transcript sources: it drives `SOURCES`, `--source`'s choices and every
message that names sources or their folders."""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

from skillopt_dsl.sleep.errors import SleepError
from skillopt_dsl.sleep.sources.base import Source

__all__ = ["AUTO", "SOURCES", "make_sources", "register_source", "source_choices"]

AUTO = "auto"
"""The `--source` choice that means every registered source whose folder exists."""

SOURCES: dict[str, type[Source]] = {}
"""The sources `--source` can name, in registration order (plus `auto`)."""

S = TypeVar("S", bound=type[Source])


def register_source(cls: S) -> S:
    """Class decorator: register a `Source` under its `name` (a name taken twice, `auto`, or a
    source without `folders` is refused)."""
    name = getattr(cls, "name", "")
    if not isinstance(name, str) or not name or name == AUTO:
        raise TypeError(f"{cls.__name__}.name must be a non-empty name other than {AUTO!r}")
    if name in SOURCES and SOURCES[name] is not cls:
        raise TypeError(f"source name {name!r} is taken by {SOURCES[name].__name__}")
    if not getattr(cls, "folders", ()):
        raise TypeError(f"{cls.__name__}.folders must name the folders it reads under home")
    SOURCES[name] = cls
    return cls


def source_choices() -> list[str]:
    """Every value `--source` accepts: the registered names, then `auto`."""
    return [*SOURCES, AUTO]


def _folders() -> str:
    folders = [folder for cls in SOURCES.values() for folder in cls.folders]
    return ", ".join(folders[:-1]) + " and " + folders[-1] if len(folders) > 1 else folders[0]


def make_sources(choice: str, home: Path) -> list[Source]:
    """The sources for `--source <name>|auto` under `home` (see `source_choices`)."""
    if choice == AUTO:
        chosen = [cls(home) for cls in SOURCES.values()]
        found = [s for s in chosen if s.available()]
        if not found:
            raise SleepError(
                f"no transcripts under {home}: looked for {_folders()}; pass --home or --source"
            )
        return found
    if choice not in SOURCES:
        raise SleepError(f"unknown source {choice!r}; choose one of {', '.join(source_choices())}")
    return [SOURCES[choice](home)]
