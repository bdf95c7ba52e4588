"""The live files a night trains and may propose to replace: the agent's memory file and,
optionally, a skill file. Read once, as bytes, so the manifest pins exactly what was read."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from skillopt_dsl.skill import Skill
from skillopt_dsl.sleep.errors import SleepError
from skillopt_dsl.sleep.memory import MemoryFile
from skillopt_dsl.sleep.project import SleepProject
from skillopt_dsl.sleep.replay import compose, split_document

__all__ = ["LiveFiles"]


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
        """The trainable document the replays run under (see `replay.compose`)."""
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
