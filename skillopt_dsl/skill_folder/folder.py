"""Read a skill folder as agents load it, and compute the files a trained document changes.

A skill folder is `<name>/SKILL.md` (YAML front matter with `name` and a one-line `description`,
then the body) plus reference files the body points to (`references/*.md`, any other `.md` file
in the folder). Files that are not markdown (templates, scripts) are never trained. A part the
search did not change keeps its file's exact bytes.
"""

from __future__ import annotations

import hashlib
import logging
import re
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
    WHEN_TO_USE,
    DescriptionAgent,
    FolderDocument,
    description_problem,
)

__all__ = ["NAME_LIMIT", "SKILL_FILE", "FolderChange", "SkillFolder"]

logger = logging.getLogger(__name__)

SKILL_FILE = "SKILL.md"
NAME_LIMIT = 64
"""The longest skill `name` the Agent Skills specification allows."""
_NAME = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
_ONE_LINE = (DESCRIPTION, WHEN_TO_USE)
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

    `skill_file_text` keeps SKILL.md exactly as read (a byte-order mark and CRLF line endings
    included; `name`, `description` and `body` are read with LF endings), so an untouched file
    is left alone byte for byte and a rewritten one keeps its mark and line endings. `skipped`
    lists the `.md` files that could not be read as text, each with why (they are never
    trained; a run that names one is refused)."""

    root: Path
    name: str
    description: str
    body: str
    references: tuple[tuple[str, str], ...]
    skill_file_text: str
    skipped: tuple[tuple[str, str], ...] = ()
    when_to_use: str | None = None
    """The front matter's `when_to_use` as one line (Claude Code shows it beside the
    description in the skill listing; it trains as the part `when_to_use`); None: none."""

    @classmethod
    def read(cls, path: str | Path) -> SkillFolder:
        """Read the folder at `path` (the folder holding SKILL.md, or SKILL.md itself).

        SKILL.md may open with a byte-order mark and use CRLF line endings; its front matter
        must be a YAML mapping with a `name` and a `description` (a `UserInputError` names
        the file, and the line where the YAML breaks). A reference file that is not UTF-8 is
        skipped with a warning (`skipped`), not an error: a run that trains no reference
        never needs it."""
        root = Path(path)
        root = root.parent if root.name == SKILL_FILE else root
        skill_file = root / SKILL_FILE
        if not skill_file.is_file():
            raise UserInputError(
                f"{str(root)!r} is not a skill folder: it has no {SKILL_FILE} (a skill folder is "
                f"<name>/{SKILL_FILE} with a front matter name and description)"
            )
        text = _read_text(skill_file)
        meta, body = split_front_matter(_plain(text), str(skill_file))
        name, description = meta.get("name"), meta.get("description")
        if not isinstance(name, str) or not name.strip():
            raise UserInputError(f"{skill_file}: the front matter needs a `name`")
        if not isinstance(description, str):
            raise UserInputError(f"{skill_file}: the front matter needs a one-line `description`")
        references: list[tuple[str, str]] = []
        skipped: list[tuple[str, str]] = []
        for file in sorted(root.rglob("*.md")):
            if file == skill_file or not file.is_file() or _hidden(file, root):
                continue
            rel = file.relative_to(root).as_posix()
            try:
                references.append((rel, _read_text(file)))
            except UserInputError as exc:
                logger.warning("skipped %s: %s", file, exc)
                skipped.append((rel, str(exc)))
        return cls(
            root,
            name.strip(),
            " ".join(description.split()),
            body,
            tuple(references),
            text,
            tuple(skipped),
            _one_line(meta.get("when_to_use")),
        )

    @property
    def front_matter(self) -> dict[str, object]:
        """SKILL.md's front matter as YAML reads it."""
        return split_front_matter(_plain(self.skill_file_text), SKILL_FILE)[0]

    @property
    def raw_description(self) -> str:
        """The front matter's `description` exactly as YAML reads it (before joining it to
        one line): a folded block with a blank line in it holds a line break here."""
        value = self.front_matter.get("description")
        return value if isinstance(value, str) else ""

    @property
    def model_invocable(self) -> bool:
        """False when the front matter sets `disable-model-invocation: true`: the agent never
        offers the skill to its model (only the user can invoke it), so it has no trigger."""
        return self.front_matter.get("disable-model-invocation") is not True

    def name_problem(self) -> str | None:
        """Why this folder's `name` breaks the Agent Skills specification (None: it keeps it):
        it must match the folder's name, use only lowercase letters, digits and hyphens (not
        first or last, never two in a row) and be at most 64 characters."""
        name, folder = self.name, self.root.resolve().name
        if len(name) > NAME_LIMIT:
            return f"the name {name!r} has {len(name)} characters; the most is {NAME_LIMIT}"
        if "--" in name:
            return f"the name {name!r} holds `--`; hyphens may not follow each other"
        if not _NAME.fullmatch(name):
            return (
                f"the name {name!r} may use only lowercase letters, digits and hyphens, and may "
                "not start or end with a hyphen"
            )
        if name != folder:
            return f"the name {name!r} does not match its folder {folder!r}; rename one of them"
        return None

    def write_back_problem(self, parts: Sequence[str]) -> str | None:
        """Why a run training `parts` could not write its result back (None: it could): a
        description that is not one line as read (a folded block with a blank line), a front
        matter whose `description` entry cannot be rewritten alone (a quoted key, a flow
        mapping), a SKILL.md that mixes line endings, or a part that names a skipped file.
        Checked before the first model call, so no budget is spent on a change that cannot be
        staged."""
        document = self.document(parts)
        raw_when = self.front_matter.get("when_to_use")
        if WHEN_TO_USE in document.names and "\n" in str(raw_when).strip():
            return "the `when_to_use` spans several lines as YAML reads it; make it one paragraph"
        if DESCRIPTION in document.names and "\n" in self.raw_description.strip():
            return (
                "the description spans several lines as YAML reads it (a folded `>` block with "
                "a blank line keeps a line break); make it one paragraph"
            )
        if _layout(self.skill_file_text).render(_plain(self.skill_file_text)) != (
            self.skill_file_text
        ):
            return "SKILL.md mixes CRLF and LF line endings; use one kind throughout"
        probe = FolderDocument(
            tuple(
                (name, text + " probe" if name in _ONE_LINE else text + "\nprobe")
                for name, text in document.parts
            )
        )
        try:
            changes = self.changes(probe.to_skill())
        except (UserInputError, StopIteration, yaml.YAMLError) as exc:
            return f"the front matter's description entry cannot be rewritten alone ({exc})"
        if not changes and document.names:
            return "a trained part would rewrite no file"
        return None

    def check_trainable(self, parts: Sequence[str], agent: DescriptionAgent = "claude") -> None:
        """Refuse, before any model call, a run on `parts` whose result could not be staged:
        a name the specification refuses (`name_problem`), a result that could not be written
        back (`write_back_problem`), a description trained for a skill the model is never
        offered (`disable-model-invocation: true`), or a seed description `agent` cannot
        read."""
        skill_file = self.root / SKILL_FILE
        problem = self.name_problem() or self.write_back_problem(parts)
        if problem is None and WHEN_TO_USE in parts and self.when_to_use is not None:
            problem = description_problem(self.when_to_use, agent)
        if problem is None and DESCRIPTION in parts and not self.model_invocable:
            problem = (
                "it sets `disable-model-invocation: true`, so the agent never offers this skill "
                "to its model and its trigger cannot be trained; remove the key to let the "
                "model load it, or train the body instead"
            )
        if problem is None and DESCRIPTION in parts:
            problem = description_problem(self.description, agent)
        if problem is not None:
            raise UserInputError(f"{skill_file}: {problem}; nothing was run")

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
            elif part == WHEN_TO_USE:
                if self.when_to_use is None:
                    raise UserInputError(f"{SKILL_FILE} has no `when_to_use` to train")
                chosen.append((WHEN_TO_USE, self.when_to_use))
            elif part == "references":
                chosen.extend(self.references)
            elif part in self.reference_paths:
                chosen.append((part, self.reference_text(part)))
            elif part in dict(self.skipped):
                raise UserInputError(f"{part} cannot be trained: {dict(self.skipped)[part]}")
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
            if name not in (DESCRIPTION, BODY, WHEN_TO_USE, *self.reference_paths)
            or (name == WHEN_TO_USE and self.when_to_use is None)
        ]
        if unknown:
            raise UserInputError(f"the trained document names parts this folder lacks: {unknown}")
        parts = dict(document.parts)
        description = parts.get(DESCRIPTION, self.description)
        if DESCRIPTION in parts and (problem := description_problem(description)) is not None:
            raise UserInputError(f"the trained description cannot be written: {problem}")
        when = parts.get(WHEN_TO_USE, self.when_to_use)
        if WHEN_TO_USE in parts and (problem := description_problem(str(when))) is not None:
            raise UserInputError(f"the trained when_to_use cannot be written: {problem}")
        references = tuple((path, parts.get(path, text)) for path, text in self.references)
        return SkillFolder(
            root=self.root,
            name=self.name,
            description=description,
            body=parts.get(BODY, self.body),
            references=references,
            skill_file_text=self.skill_file_text,
            skipped=self.skipped,
            when_to_use=when,
        )

    def changes(self, skill: Skill | str) -> tuple[FolderChange, ...]:
        """The files that training to `skill` rewrites, with their old and new text; a part that
        did not change rewrites nothing (its file stays byte-identical)."""
        new = self.trained(skill)
        found: list[FolderChange] = []
        if (new.description, new.body, new.when_to_use) != (
            self.description,
            self.body,
            self.when_to_use,
        ):
            text = _skill_file_text(self, new)
            found.append(FolderChange(SKILL_FILE, self.skill_file_text, text))
        for (path, old), (_, text) in zip(self.references, new.references, strict=True):
            if text != old:
                found.append(FolderChange(path, old, text))
        return tuple(found)

    def description_problem(self, agent: DescriptionAgent = "claude") -> str | None:
        """Why this folder's description is not one `agent` reads (None: it is)."""
        return description_problem(self.description, agent)


def _one_line(value: object) -> str | None:
    return " ".join(value.split()) or None if isinstance(value, str) else None


def _read_text(path: Path) -> str:
    try:
        with path.open(encoding="utf-8", newline="") as handle:
            return handle.read()
    except UnicodeDecodeError as exc:
        raise UserInputError(f"{path} is not UTF-8 text: {exc}") from exc


def _hidden(file: Path, root: Path) -> bool:
    return any(part.startswith(".") for part in file.relative_to(root).parts)


@dataclass(frozen=True)
class _Layout:
    """How SKILL.md is laid out on disk: a byte-order mark and CRLF line endings, or neither."""

    bom: bool
    crlf: bool

    def render(self, plain: str) -> str:
        """`plain` (LF endings, no mark) laid out like the file."""
        text = plain.replace("\n", "\r\n") if self.crlf else plain
        return ("\ufeff" if self.bom else "") + text


def _layout(text: str) -> _Layout:
    rest = text.removeprefix("\ufeff")
    return _Layout(bom=rest != text, crlf=rest.startswith("---\r\n"))


def _plain(text: str) -> str:
    """SKILL.md's text as parsed: no byte-order mark, LF line endings where it uses CRLF."""
    rest = text.removeprefix("\ufeff")
    return rest.replace("\r\n", "\n") if rest.startswith("---\r\n") else rest


def _skill_file_text(folder: SkillFolder, new: SkillFolder) -> str:
    """SKILL.md with `new`'s description, `when_to_use` and body: the front matter keeps every
    other line as it was (only a changed entry is rewritten), the body follows it verbatim,
    and the file keeps its byte-order mark and line endings."""
    text = _plain(folder.skill_file_text)
    end = text.find(_SEPARATOR, len(_FRONT) - 1)
    front = text[len(_FRONT) : end + 1]
    if new.description != folder.description:
        front = _with_entry(front, "description", new.description)
    if new.when_to_use != folder.when_to_use and new.when_to_use is not None:
        front = _with_entry(front, "when_to_use", new.when_to_use)
    plain = _FRONT + front + text[end + 1 : end + len(_SEPARATOR)] + new.body
    return _layout(folder.skill_file_text).render(plain)


def _with_entry(front: str, key: str, value: str) -> str:
    """`front` with its `key:` entry (and the entry's continuation lines) rewritten as one
    line holding `value`; an error when there is no plain `key:` line, or when the rewrite
    would change any other entry."""
    lines = front.splitlines(keepends=True)
    found = [i for i, line in enumerate(lines) if line.startswith(f"{key}:")]
    if not found:
        raise UserInputError(f"the front matter has no plain `{key}:` line to rewrite")
    start = found[0]
    stop = start + 1
    while stop < len(lines) and lines[stop][:1] in (" ", "\t"):
        stop += 1
    entry = yaml.safe_dump({key: value}, allow_unicode=True, width=1 << 20)
    rewritten = "".join([*lines[:start], entry, *lines[stop:]])
    before, after = yaml.safe_load(front), yaml.safe_load(rewritten)
    if after != {**before, key: value}:
        raise UserInputError(f"the front matter could not be rewritten with the new {key}")
    return rewritten
