"""The transcript sources as a family: one registry drives every list and message."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from skillopt_dsl.sleep.errors import SleepError
from skillopt_dsl.sleep.harvest import ProjectMatcher, harvest
from skillopt_dsl.sleep.sources import (
    SOURCES,
    GenericJsonlSource,
    agent_choices,
    make_sources,
    memory_files,
    register_source,
    replay_choices,
    replay_command,
    source_choices,
)


class NotesSource(GenericJsonlSource):
    """A new format registered in one place (it reads the generic lines from its own folder)."""

    name = "notes"
    folders = (".notes/sessions",)

    @property
    def root(self) -> Path:
        return self.home / ".notes" / "sessions"


@pytest.fixture
def notes_registered() -> Iterator[type[NotesSource]]:
    register_source(NotesSource)
    try:
        yield NotesSource
    finally:
        SOURCES.pop("notes", None)


def test_a_source_registered_once_appears_in_every_list_and_message(
    notes_registered: type[NotesSource], tmp_path: Path
) -> None:
    """Kills: a list of sources or a message spelled by hand somewhere (a new source then
    missing from `--source`'s choices, the unknown-source message or the folders looked in)."""
    assert list(SOURCES) == ["claude", "codex", "jsonl", "notes"]
    assert source_choices() == ["claude", "codex", "jsonl", "notes", "auto"]
    with pytest.raises(SleepError, match=r"choose one of claude, codex, jsonl, notes, auto$"):
        make_sources("cursor", tmp_path)
    with pytest.raises(SleepError, match=r"\.skillopt/sessions and \.notes/sessions; pass"):
        make_sources("auto", tmp_path)
    folder = tmp_path / ".notes" / "sessions"
    folder.mkdir(parents=True)
    (folder / "a.jsonl").write_text(
        '{"session_id": "s1", "project": "/work/app", "timestamp": "2025-06-01T10:00:00Z", '
        '"role": "user", "text": "add a test"}\n',
        encoding="utf-8",
    )
    (auto,) = make_sources("auto", tmp_path)
    assert type(auto) is NotesSource and type(make_sources("notes", tmp_path)[0]) is NotesSource
    (session,) = harvest([auto], ProjectMatcher(("/work/app",))).sessions
    assert session.prompts == ["add a test"]


def test_the_shipped_sources_name_every_folder_they_read() -> None:
    """Kills: the 'no transcripts' message losing a folder a shipped source reads."""
    assert [folder for cls in SOURCES.values() for folder in cls.folders] == [
        ".claude/projects",
        ".codex/sessions",
        ".codex/archived_sessions",
        ".skillopt/sessions",
    ]


@pytest.mark.parametrize(
    ("name", "folders", "why"),
    [("auto", (".x",), "other than 'auto'"), ("claude", (".x",), "taken"), ("x", (), "folders")],
)
def test_a_bad_registration_is_refused(name: str, folders: tuple[str, ...], why: str) -> None:
    """Kills: a source that shadows `auto` or a shipped name, or one no message can name."""
    bad = type("Bad", (GenericJsonlSource,), {"name": name, "folders": folders})
    with pytest.raises(TypeError, match=why):
        register_source(bad)
    assert SOURCES.get(name) is not bad


def test_the_shipped_agents_memory_files_and_replay_commands() -> None:
    """Kills: a shipped source losing its memory file or its replay command (its agent then
    vanishes from `--agent` / `--replay-agent` and `sleep.json`), or the defaults changing."""
    assert memory_files() == {"claude": "CLAUDE.md", "codex": "AGENTS.md"}
    assert agent_choices() == replay_choices() == ["claude", "codex"]
    assert replay_command("claude").argv[:3] == ("claude", "-p", "{prompt}")
    assert replay_command("codex").argv[:2] == ("codex", "exec")
    assert replay_command("codex").key_env == ("OPENAI_API_KEY", "CODEX_API_KEY")
