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
the secret redacted; the bad line is counted, never raised; the home is left byte for byte.
"""

from __future__ import annotations

from pathlib import Path

from skillopt_dsl.sleep.harvest import ProjectMatcher, harvest
from skillopt_dsl.sleep.sources import SOURCES, Source
from skillopt_dsl.sleep.transcript import HarvestStats

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

    def test_the_home_is_left_untouched(self, tmp_path: Path) -> None:
        self.write_transcript(tmp_path)
        before = _snapshot(tmp_path)
        harvest([self.source(tmp_path)], ProjectMatcher((PROJECT,)))
        assert _snapshot(tmp_path) == before, "a source wrote under the home directory"
