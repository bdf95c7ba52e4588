"""A reusable contract suite every transcript source must pass (ours and yours).

Subclass `SourceContract` under a name pytest collects; give the source class and a writer of
one small transcript in its format, in the project `/work/app`, whose user request holds
`SECRET` and whose file ends with a line that is not JSON::

    class TestMySource(SourceContract):
        source = MySource

        def write_transcript(self, home: Path) -> None:
            ...

Tests (the contract written in `skillopt_dsl.sleep.sources.base.Source`): registered under its
name with the folders it reads; an empty home yields no files, no sessions and no error; the
transcript reads into the project's sessions, named by the source, with the request kept and
the secret redacted; the bad line is counted, never raised; the session's timeline (the
source's own reader, or the default from its turns) holds the request as a prompt, redacted,
citing a line that holds it; the memory file and the replay command the source declares are
the ones the registry, `--agent`, `--replay-agent` and `sleep.json` use (and a source without
them is refused there); reading and re-reading the timeline leaves the home byte for byte.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from skillopt_dsl.sleep.agent_replay import AgentSettings
from skillopt_dsl.sleep.errors import SleepError
from skillopt_dsl.sleep.harvest import HarvestResult, ProjectMatcher, harvest
from skillopt_dsl.sleep.project import ProjectConfig
from skillopt_dsl.sleep.sources import (
    SOURCES,
    Source,
    agent_choices,
    memory_files,
    replay_choices,
    replay_command,
)
from skillopt_dsl.sleep.timeline import read_timeline
from skillopt_dsl.sleep.transcript import HarvestStats, Timeline

__all__ = ["PROJECT", "REQUEST", "SECRET", "SourceContract"]

PROJECT = "/work/app"
SECRET = "sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"
REQUEST = f"Rotate the key {SECRET} in config.py"
"""The user request the transcript must hold (with the secret inside it)."""


def _snapshot(home: Path) -> dict[str, bytes]:
    return {str(p.relative_to(home)): p.read_bytes() for p in home.rglob("*") if p.is_file()}


class SourceContract:
    """The contract suite; subclass it as `TestSomething`, set `source`, write a transcript."""

    source: type[Source]

    def write_transcript(self, home: Path) -> None:
        """Write one session of `PROJECT` whose request is `REQUEST`, then one non-JSON line."""
        raise NotImplementedError("subclass SourceContract and implement write_transcript()")

    def test_registered_once_with_its_folders(self) -> None:
        assert SOURCES.get(self.source.name) is self.source, "register the source by its name"
        assert self.source.folders, "a source names the folders it reads under home"

    def test_an_empty_home_is_no_error(self, tmp_path: Path) -> None:
        source = self.source(tmp_path)
        assert source.files(HarvestStats()) == [] and not source.available()
        assert harvest([source], ProjectMatcher((PROJECT,))).sessions == []

    def test_reads_the_request_redacted_and_counts_the_bad_line(self, tmp_path: Path) -> None:
        self.write_transcript(tmp_path)
        result = harvest([self.source(tmp_path)], ProjectMatcher((PROJECT,)))
        assert result.sessions, "the transcript's session was not read"
        prompts = [p for s in result.sessions for p in s.prompts]
        assert all(s.agent == self.source.name and s.cwd == PROJECT for s in result.sessions)
        assert any("Rotate the key" in p for p in prompts), prompts
        kept = " ".join(t.text for s in result.sessions for t in s.turns)
        assert SECRET not in kept, "a secret reached a Session unredacted"
        assert result.stats.home.malformed_lines >= 1, "the non-JSON line was not counted"

    def test_the_timeline_holds_the_request_redacted_at_its_line(self, tmp_path: Path) -> None:
        self.write_transcript(tmp_path)
        timelines = [read_timeline(s) for s in self._harvest(tmp_path).sessions]
        prompts = [(t, s) for t in timelines for s in t.steps if s.kind == "prompt"]
        asked = [(t, s) for t, s in prompts if "Rotate the key" in s.text]
        assert asked, f"the timeline lost the request: {[s.text for _, s in prompts]}"
        assert all(s.line >= 1 for t in timelines for s in t.steps), "a step without a line"
        kept = " ".join(s.text for t in timelines for s in t.steps)
        assert SECRET not in kept, "a secret reached a timeline step unredacted"
        timeline, step = asked[0]
        if timeline.numbered == "line":
            assert "Rotate the key" in _file_line(timeline, step.line), "cites the wrong line"

    def test_its_memory_file_and_replay_command_are_the_ones_used(self) -> None:
        name, memory, command = (
            self.source.name,
            self.source.memory_file,
            self.source.replay_command,
        )
        assert memory_files().get(name) == memory
        assert (name in agent_choices()) == (memory is not None)
        if memory is not None:
            assert not Path(memory).is_absolute(), "a memory file lies inside the project"
            assert ProjectConfig(agent=name).agent == name
        else:
            with pytest.raises(ValueError, match="choose one of"):
                ProjectConfig(agent=name)
        assert (name in replay_choices()) == (command is not None)
        if command is not None:
            assert replay_command(name) is command and "{prompt}" in command.argv
            assert AgentSettings(name).agent == name
        else:
            with pytest.raises(SleepError, match="choose one of"):
                AgentSettings(name)

    def test_the_home_is_left_untouched(self, tmp_path: Path) -> None:
        self.write_transcript(tmp_path)
        before = _snapshot(tmp_path)
        for session in self._harvest(tmp_path).sessions:
            read_timeline(session)
        assert _snapshot(tmp_path) == before, "a source wrote under the home directory"

    def _harvest(self, home: Path) -> HarvestResult:
        return harvest([self.source(home)], ProjectMatcher((PROJECT,)))


def _file_line(timeline: Timeline, line: int) -> str:
    """Line `line` (1-based) of the timeline's transcript file."""
    with timeline.path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            if number == line:
                return raw.decode("utf-8", errors="replace")
    return ""
