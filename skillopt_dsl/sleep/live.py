"""The live files a night trains and may propose to replace: the agent's memory file and,
optionally, a skill file. Read once, as bytes, so the manifest pins exactly what was read.

The document the replays run under (`compose`) is the skill file, then the memory file's own
text inside a protected region (the agent reads it, no edit may touch it), then the memory
file's learned block. `split_document` cuts an optimised document back into the skill file's
text and the learned block.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from skillopt_dsl.skill import PROTECTED_CLOSE, PROTECTED_OPEN, Skill
from skillopt_dsl.sleep.errors import SleepError
from skillopt_dsl.sleep.memory import MemoryFile
from skillopt_dsl.sleep.project import SleepProject

__all__ = ["MEMORY_NOTE", "LiveFiles", "compose", "split_document"]

MEMORY_NOTE = (
    "<!-- skillopt-sleep: the memory file follows; only the text after this region is learned -->"
)


def compose(skill_text: str, memory_outside: str, learned: str) -> Skill:
    """The trainable document: skill file, protected memory text, learned block."""
    protected = f"{PROTECTED_OPEN}\n{MEMORY_NOTE}\n{memory_outside.strip()}\n{PROTECTED_CLOSE}"
    parts = [p for p in (skill_text.strip(), protected, learned.strip()) if p]
    return Skill("\n\n".join(parts) + "\n")


def split_document(document: str) -> tuple[str, str]:
    """`(skill file text, learned block)` of a document made by `compose` (and then edited)."""
    note = document.find(MEMORY_NOTE)
    start = document.rfind(PROTECTED_OPEN, 0, note)
    end = document.find(PROTECTED_CLOSE, note)
    if note < 0 or start < 0 or end < 0:
        raise SleepError(
            "the optimised document lost its protected memory region; this is a bug, "
            "please report it (nothing was staged)"
        )
    return document[:start].strip(), document[end + len(PROTECTED_CLOSE) :].strip()


def _read(path: Path) -> bytes | None:
    return path.read_bytes() if path.is_file() else None


def _text(data: bytes | None, path: Path) -> str:
    if data is None:
        return ""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise SleepError(f"{path} is not UTF-8 text; re-save it as UTF-8") from None


@dataclass(frozen=True)
class LiveFiles:
    """The memory file (parsed into the user's text and the learned block) and the skill file."""

    project: SleepProject
    memory_rel: str
    skill_rel: str | None
    raw: dict[str, bytes | None]
    memory: MemoryFile

    @classmethod
    def read(cls, project: SleepProject, memory_rel: str, skill_rel: str | None) -> LiveFiles:
        """Read the files; a memory file with broken markers raises `MemoryFileError`."""
        raw = {memory_rel: _read(project.path / memory_rel)}
        if skill_rel is not None:
            skill_path = project.path / skill_rel
            if not skill_path.is_file():
                raise SleepError(f"skill file {skill_path} does not exist; fix --skill-file")
            raw[skill_rel] = _read(skill_path)
        memory_path = project.path / memory_rel
        memory = MemoryFile.parse(memory_path, _text(raw[memory_rel], memory_path))
        return cls(project, memory_rel, skill_rel, raw, memory)

    @property
    def skill_text(self) -> str:
        """The skill file's text ('' without one)."""
        if self.skill_rel is None:
            return ""
        return _text(self.raw[self.skill_rel], self.project.path / self.skill_rel)

    def document(self) -> Skill:
        """The trainable document the replays run under (see `compose`)."""
        return compose(self.skill_text, self.memory.outside, self.memory.learned)

    def proposals(self, best: Skill) -> dict[str, bytes]:
        """The new bytes of every live file the optimised document changes."""
        skill_text, learned = split_document(best.text)
        changed: dict[str, bytes] = {}
        if self.skill_rel is None:
            learned = "\n\n".join(p for p in (skill_text, learned) if p)
        elif skill_text != self.skill_text.strip():
            changed[self.skill_rel] = (skill_text + "\n").encode("utf-8")
        if learned != self.memory.learned.strip():
            changed[self.memory_rel] = self.memory.with_learned(learned).encode("utf-8")
        return changed
