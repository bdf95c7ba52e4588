"""The learned block of an agent's memory file (`CLAUDE.md`, `AGENTS.md`).

Sleep edits only the text between two marker lines; everything else in the file is the user's
and is kept byte for byte::

    <!-- skillopt-sleep:learned:start -->
    ...what Sleep learned...
    <!-- skillopt-sleep:learned:end -->

A file without markers has an empty learned block, appended at the end on adoption. A file with a
start marker and no end marker (or an end marker and no start, markers out of order, or more than
one block) is refused with `MemoryFileError`: Sleep never guesses where the block ends, so it can
never truncate the user's text.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from skillopt_dsl.sleep.errors import MemoryFileError

__all__ = ["LEARNED_END", "LEARNED_START", "MemoryFile"]

LEARNED_START = "<!-- skillopt-sleep:learned:start -->"
LEARNED_END = "<!-- skillopt-sleep:learned:end -->"


@dataclass(frozen=True)
class MemoryFile:
    """A memory file cut into the user's text before and after the block, and the block."""

    path: Path
    before: str
    learned: str
    after: str
    has_block: bool

    @classmethod
    def parse(cls, path: Path, text: str) -> MemoryFile:
        """Cut `text`; raises `MemoryFileError` for broken markers (see the module docstring)."""
        starts, ends = text.count(LEARNED_START), text.count(LEARNED_END)
        if starts == 0 and ends == 0:
            return cls(path, text, "", "", has_block=False)
        where = f"{path}"
        if starts != 1 or ends != 1:
            raise MemoryFileError(
                f"{where} has {starts} start and {ends} end marker(s) of the learned block; "
                f"it needs exactly one '{LEARNED_START}' line followed by one '{LEARNED_END}' "
                "line. Fix the markers by hand (Sleep never guesses where the block ends)."
            )
        start, end = text.index(LEARNED_START), text.index(LEARNED_END)
        if end < start:
            raise MemoryFileError(
                f"{where}: the learned block's end marker comes before its start marker; "
                "put the start marker first."
            )
        body_start = start + len(LEARNED_START)
        body = text[body_start:end]
        return cls(
            path,
            text[:body_start],
            body.strip("\n"),
            text[end:],
            has_block=True,
        )

    @classmethod
    def read(cls, path: Path) -> MemoryFile:
        """Parse the file at `path`; a missing file is an empty memory file."""
        text = path.read_text(encoding="utf-8") if path.exists() else ""
        return cls.parse(path, text)

    @property
    def outside(self) -> str:
        """The user's own text (the file without the learned block)."""
        if not self.has_block:
            return self.before
        return self.before[: -len(LEARNED_START)] + self.after[len(LEARNED_END) :]

    def with_learned(self, learned: str) -> str:
        """The whole file with the block's body replaced by `learned` (the rest untouched)."""
        body = learned.strip("\n")
        inner = f"\n{body}\n" if body else "\n"
        if self.has_block:
            return f"{self.before}{inner}{self.after}"
        separator = (
            ""
            if not self.before or self.before.endswith("\n\n")
            else ("\n" if self.before.endswith("\n") else "\n\n")
        )
        return f"{self.before}{separator}{LEARNED_START}{inner}{LEARNED_END}\n"
