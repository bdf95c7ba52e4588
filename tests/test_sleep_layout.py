"""The shape of `skillopt_dsl.sleep` (issue 39, item 1): an agent is spelled only in its own
source file, no module takes another's private names, and the imports users wrote before the
split keep working (the moved names with a `DeprecationWarning` naming their new home)."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

import skillopt_dsl.sleep as sleep

SLEEP = Path(sleep.__file__).parent
AGENT_WORDS = {"claude", "codex", "claude.md", "agents.md"}


def _modules() -> list[tuple[str, ast.Module]]:
    return [
        (p.relative_to(SLEEP).as_posix(), ast.parse(p.read_text(encoding="utf-8")))
        for p in sorted(SLEEP.rglob("*.py"))
    ]


def private_imports(modules: list[tuple[str, ast.Module]]) -> list[str]:
    """`file: module.name` for every underscore name imported from another package module."""
    found = []
    for relative, tree in modules:
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("skillopt_dsl"):
                found += [
                    f"{relative}: {node.module}.{a.name}"
                    for a in node.names
                    if a.name.startswith("_") and not a.name.startswith("__")
                ]
    return found


def agent_names_spelled(modules: list[tuple[str, ast.Module]]) -> list[str]:
    """`file:line` of every string that is an agent's name or memory file, outside sources/."""
    return [
        f"{relative}:{node.lineno}"
        for relative, tree in modules
        if not relative.startswith("sources/")
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and node.value.strip().casefold() in AGENT_WORDS
    ]


def test_the_checks_see_what_they_look_for() -> None:
    """Kills: a checker that misses `from x import _y` or a quoted agent name (the two tests
    below would then pass on any code)."""
    sample = [
        ("night.py", ast.parse('from skillopt_dsl.a import _b, c\nx = ("claude", "AGENTS.md")'))
    ]
    assert private_imports(sample) == ["night.py: skillopt_dsl.a._b"]
    assert agent_names_spelled(sample) == ["night.py:2", "night.py:2"]
    assert agent_names_spelled([("sources/codex.py", sample[0][1])]) == []


def test_no_private_name_crosses_a_module_of_sleep() -> None:
    """Kills: a module importing another's underscore names (the timeline once took the
    sources' `_CLAUDE_*_PREFIXES`; the CLI commands `_emit` and `_handled`)."""
    assert private_imports(_modules()) == []


def test_an_agent_is_spelled_only_in_its_source() -> None:
    """Kills: `Literal["claude", "codex"]`, a memory-file table or a `session.agent == "codex"`
    branch outside `sleep/sources/` (a new source would silently get none of it)."""
    assert agent_names_spelled(_modules()) == []


@pytest.mark.parametrize(
    ("old", "name", "home"),
    [
        ("replay", "TaskJudge", "judge"),
        ("replay", "RUBRIC_PASS", "judge"),
        ("replay", "ScoreBook", "judge"),
        ("replay", "Entry", "judge"),
        ("replay", "no_regression_guard", "judge"),
        ("replay", "compose", "live"),
        ("replay", "split_document", "live"),
        ("replay", "MEMORY_NOTE", "live"),
    ],
)
def test_a_moved_name_still_imports_from_its_old_module(old: str, name: str, home: str) -> None:
    """Kills: a user's `from skillopt_dsl.sleep.replay import TaskJudge` breaking (or silently
    staying the only home, without a warning naming the new one)."""
    module = importlib.import_module(f"skillopt_dsl.sleep.{old}")
    with pytest.warns(DeprecationWarning, match=f"skillopt_dsl.sleep.{home}"):
        moved = getattr(module, name)
    assert moved is getattr(importlib.import_module(f"skillopt_dsl.sleep.{home}"), name)


def test_agent_commands_still_import_from_agent_replay() -> None:
    """Kills: `agent_replay.AGENT_COMMANDS` gone, or no longer what the sources declare."""
    agent_replay = importlib.import_module("skillopt_dsl.sleep.agent_replay")
    with pytest.warns(DeprecationWarning, match="replay_command"):
        commands = agent_replay.AGENT_COMMANDS
    assert commands["claude"][:2] == (
        ("claude", "-p", "{prompt}", "--output-format", "json", "--permission-mode", "acceptEdits"),
        "json",
    )
    assert set(commands) == {"claude", "codex"}


def test_every_public_name_of_sleep_imports() -> None:
    """Kills: a name left in `skillopt_dsl.sleep.__all__` after its module moved."""
    assert all(hasattr(sleep, name) for name in sleep.__all__)
    timeline = importlib.import_module("skillopt_dsl.sleep.timeline")
    assert {"Step", "StepKind", "Timeline", "read_timeline"} <= set(vars(timeline))
