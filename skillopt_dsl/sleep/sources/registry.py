"""The one registry of transcript sources: it drives `SOURCES`, `--source`'s choices, the agents
`--agent` and `--replay-agent` accept, and every message that names sources or their folders.

What an agent has is looked up here by name, never spelled elsewhere: its timeline reader
(`source_for`), its memory file (`memory_files`, `agent_choices`) and its replay command
(`replay_command`, `replay_choices`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

from skillopt_dsl.sleep.errors import SleepError
from skillopt_dsl.sleep.sources.base import ReplayCommand, Source

__all__ = [
    "AUTO",
    "SOURCES",
    "agent_choices",
    "check_agent",
    "check_replay_agent",
    "make_sources",
    "memory_files",
    "register_source",
    "replay_choices",
    "replay_command",
    "source_choices",
    "source_for",
]

AUTO = "auto"
"""The `--source` choice that means every registered source whose folder exists."""

SOURCES: dict[str, type[Source]] = {}
"""The sources `--source` can name, in registration order (plus `auto`)."""

S = TypeVar("S", bound=type[Source])


def register_source(cls: S) -> S:
    """Class decorator: register a `Source` under its `name` (a name taken twice, `auto`, a
    source without `folders`, a `memory_file` that is not a relative path or a
    `replay_command` without `{prompt}` is refused)."""
    name = getattr(cls, "name", "")
    if not isinstance(name, str) or not name or name == AUTO:
        raise TypeError(f"{cls.__name__}.name must be a non-empty name other than {AUTO!r}")
    if name in SOURCES and SOURCES[name] is not cls:
        raise TypeError(f"source name {name!r} is taken by {SOURCES[name].__name__}")
    if not getattr(cls, "folders", ()):
        raise TypeError(f"{cls.__name__}.folders must name the folders it reads under home")
    memory = cls.memory_file
    if memory is not None and (not memory or Path(memory).is_absolute() or ".." in memory):
        raise TypeError(f"{cls.__name__}.memory_file must be a path inside the project")
    if cls.replay_command is not None and "{prompt}" not in cls.replay_command.argv:
        raise TypeError(f"{cls.__name__}.replay_command.argv must hold '{{prompt}}'")
    SOURCES[name] = cls
    return cls


def source_choices() -> list[str]:
    """Every value `--source` accepts: the registered names, then `auto`."""
    return [*SOURCES, AUTO]


def agent_choices() -> list[str]:
    """The agents whose memory file Sleep can train (`--agent`, `sleep.json`'s `agent`)."""
    return [name for name, cls in SOURCES.items() if cls.memory_file is not None]


def replay_choices() -> list[str]:
    """The agents whose own CLI can run the replays (`--replay-agent`)."""
    return [name for name, cls in SOURCES.items() if cls.replay_command is not None]


def memory_files() -> dict[str, str]:
    """Each agent's memory file by name (`{"claude": "CLAUDE.md", ...}`), in registration order."""
    return {name: cls.memory_file for name, cls in SOURCES.items() if cls.memory_file is not None}


def source_for(name: str) -> type[Source] | None:
    """The registered source a session's `agent` names, None for a name no source has."""
    return SOURCES.get(name)


def check_agent(name: str, what: str = "agent") -> str:
    """`name` when it is an agent whose memory file Sleep trains; else `SleepError` listing them."""
    if name not in agent_choices():
        raise SleepError(f"unknown {what} {name!r}; choose one of {_or(agent_choices())}")
    return name


def check_replay_agent(name: str, what: str = "replay agent") -> str:
    """`name` when its CLI can run replays; else `SleepError` listing the agents that can."""
    replay_command(name, what)
    return name


def replay_command(name: str, what: str = "replay agent") -> ReplayCommand:
    """The replay command of agent `name` (`SleepError` listing the choices when it has none)."""
    cls = SOURCES.get(name)
    if cls is None or cls.replay_command is None:
        raise SleepError(f"unknown {what} {name!r}; choose one of {_or(replay_choices())}")
    return cls.replay_command


def _or(names: list[str]) -> str:
    return ", ".join(names) if names else "(none registered)"


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
