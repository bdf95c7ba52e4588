"""Read a skill folder as agents load it, and compute the files a trained document changes.

A skill folder is `<name>/SKILL.md` (YAML front matter with `name` and a one-line `description`,
then the body) plus reference files the body points to (`references/*.md`, any other `.md` file
in the folder). Files that are not markdown (templates, scripts) are never trained. A part the
search did not change keeps its file's exact bytes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from skillopt_dsl.errors import UserInputError
from skillopt_dsl.export import split_front_matter
from skillopt_dsl.skill import Skill
from skillopt_dsl.skill_folder.document import (
    BODY,
    DESCRIPTION,
    DescriptionAgent,
    FolderDocument,
    description_problem,
)

__all__ = ["SKILL_FILE", "FolderChange", "SkillFolder"]

SKILL_FILE = "SKILL.md"
_FRONT = "---\n"
_SEPARATOR = "\n---\n"


@dataclass(frozen=True)
class FolderChange:
    """One file of a skill folder a trained document rewrites: its folder-relative path, its
    old and new bytes (decoded as UTF-8) and their sha256."""

    path: str
    old_text: str
    new_text: str

    @property
    def old_sha(self) -> str:
        """sha256 of the file as read."""
        return hashlib.sha256(self.old_text.encode("utf-8")).hexdigest()

    @property
    def new_sha(self) -> str:
        """sha256 of the file as it would be written."""
        return hashlib.sha256(self.new_text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class SkillFolder:
    """A skill folder as read from disk: `root`, the `name` and `description` of its front
    matter, its `body`, and its markdown reference files (folder-relative path -> text).

    `skill_file_text` keeps SKILL.md exactly as read, so an untouched file is written back (or
    rather, left alone) byte for byte."""

    root: Path
    name: str
    description: str
    body: str
    references: tuple[tuple[str, str], ...]
    skill_file_text: str

    @classmethod
    def read(cls, path: str | Path) -> SkillFolder:
        """Read the folder at `path` (the folder holding SKILL.md, or SKILL.md itself)."""
        root = Path(path)
        root = root.parent if root.name == SKILL_FILE else root
        skill_file = root / SKILL_FILE
        if not skill_file.is_file():
            raise UserInputError(
                f"{str(root)!r} is not a skill folder: it has no {SKILL_FILE} (a skill folder is "
                f"<name>/{SKILL_FILE} with a front matter name and description)"
            )
        text = _read_text(skill_file)
        meta, body = split_front_matter(text)
        name, description = meta.get("name"), meta.get("description")
        if not isinstance(name, str) or not name.strip():
            raise UserInputError(f"{skill_file}: the front matter needs a `name`")
        if not isinstance(description, str):
            raise UserInputError(f"{skill_file}: the front matter needs a one-line `description`")
        references = tuple(
            (file.relative_to(root).as_posix(), _read_text(file))
            for file in sorted(root.rglob("*.md"))
            if file != skill_file and file.is_file() and not _hidden(file, root)
        )
        return cls(root, name.strip(), " ".join(description.split()), body, references, text)

    # -- the trainable document ----------------------------------------------------------------
    @property
    def reference_paths(self) -> tuple[str, ...]:
        """The reference files' folder-relative paths, sorted."""
        return tuple(path for path, _ in self.references)

    def reference_text(self, path: str) -> str:
        """The text of reference file `path`; a `KeyError` names the files there are."""
        for reference, text in self.references:
            if reference == path:
                return text
        raise KeyError(f"no reference file {path!r}; the folder has {list(self.reference_paths)}")

    def document(self, parts: Sequence[str] = (DESCRIPTION, BODY)) -> FolderDocument:
        """The parts one run trains, as a `FolderDocument` (`"references"` stands for every
        reference file). `FolderDocument.to_skill()` is the seed skill."""
        chosen: list[tuple[str, str]] = []
        for part in parts:
            if part == DESCRIPTION:
                chosen.append((DESCRIPTION, self.description))
            elif part == BODY:
                chosen.append((BODY, self.body))
            elif part == "references":
                chosen.extend(self.references)
            elif part in self.reference_paths:
                chosen.append((part, self.reference_text(part)))
            else:
                raise UserInputError(
                    f"unknown skill folder part {part!r}; choose 'description', 'body', "
                    f"'references' or one of {list(self.reference_paths)}"
                )
        return FolderDocument(tuple(chosen))

    def seed_skill(self, parts: Sequence[str] = (DESCRIPTION, BODY)) -> Skill:
        """The seed skill document for training `parts` (see `document`)."""
        return self.document(parts).to_skill()

    def trained(self, skill: Skill | str) -> SkillFolder:
        """This folder with the parts of `skill` (a trained folder document) put in place; parts
        the document does not carry keep their text. The description's limits are checked
        (a trained description that no agent could read is an error, never truncated)."""
        document = FolderDocument.from_skill(skill)
        unknown = [
            name
            for name in document.names
            if name not in (DESCRIPTION, BODY, *self.reference_paths)
        ]
        if unknown:
            raise UserInputError(f"the trained document names parts this folder lacks: {unknown}")
        parts = dict(document.parts)
        description = parts.get(DESCRIPTION, self.description)
        if DESCRIPTION in parts and (problem := description_problem(description)) is not None:
            raise UserInputError(f"the trained description cannot be written: {problem}")
        references = tuple((path, parts.get(path, text)) for path, text in self.references)
        return SkillFolder(
            root=self.root,
            name=self.name,
            description=description,
            body=parts.get(BODY, self.body),
            references=references,
            skill_file_text=self.skill_file_text,
        )

    def changes(self, skill: Skill | str) -> tuple[FolderChange, ...]:
        """The files that training to `skill` rewrites, with their old and new text; a part that
        did not change rewrites nothing (its file stays byte-identical)."""
        new = self.trained(skill)
        found: list[FolderChange] = []
        if (new.description, new.body) != (self.description, self.body):
            text = _skill_file_text(self, new.description, new.body)
            found.append(FolderChange(SKILL_FILE, self.skill_file_text, text))
        for (path, old), (_, text) in zip(self.references, new.references, strict=True):
            if text != old:
                found.append(FolderChange(path, old, text))
        return tuple(found)

    def description_problem(self, agent: DescriptionAgent = "claude") -> str | None:
        """Why this folder's description is not one `agent` reads (None: it is)."""
        return description_problem(self.description, agent)


def _read_text(path: Path) -> str:
    try:
        with path.open(encoding="utf-8", newline="") as handle:
            return handle.read()
    except UnicodeDecodeError as exc:
        raise UserInputError(f"{path} is not UTF-8 text: {exc}") from exc


def _hidden(file: Path, root: Path) -> bool:
    return any(part.startswith(".") for part in file.relative_to(root).parts)


def _skill_file_text(folder: SkillFolder, description: str, body: str) -> str:
    """SKILL.md with a new description and body: the front matter keeps every other line as it
    was (only the `description` entry is rewritten), and the body follows it verbatim."""
    text = folder.skill_file_text
    end = text.find(_SEPARATOR, len(_FRONT) - 1)
    front = text[len(_FRONT) : end + 1]
    if description != folder.description:
        front = _with_description(front, description)
    return _FRONT + front + text[end + 1 : end + len(_SEPARATOR)] + body


def _with_description(front: str, description: str) -> str:
    lines = front.splitlines(keepends=True)
    start = next(i for i, line in enumerate(lines) if line.startswith("description:"))
    stop = start + 1
    while stop < len(lines) and lines[stop][:1] in (" ", "\t"):
        stop += 1
    entry = yaml.safe_dump({"description": description}, allow_unicode=True, width=1 << 20)
    rewritten = "".join([*lines[:start], entry, *lines[stop:]])
    before, after = yaml.safe_load(front), yaml.safe_load(rewritten)
    if after != {**before, "description": description}:
        raise UserInputError("the front matter could not be rewritten with the new description")
    return rewritten
