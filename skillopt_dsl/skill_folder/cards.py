"""The other skills a router chooses among: `SkillCard` (a skill's name and description), read
from the user's own skill folders (`read_skill_cards`) or from a JSONL file of cards
(`load_skill_cards`, one `{"name": ..., "description": ...}` object a line)."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from skillopt_dsl.errors import UserInputError
from skillopt_dsl.skill_folder.folder import SKILL_FILE, SkillFolder

__all__ = ["SkillCard", "check_cards", "load_skill_cards", "read_skill_cards"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class SkillCard:
    """What an agent sees of a skill before loading it: its name, its one-line description and,
    where it has one, its one-line `when_to_use`."""

    name: str
    description: str
    when_to_use: str | None = None

    def __post_init__(self) -> None:
        if not self.name.strip() or "\n" in self.name:
            raise UserInputError(f"a skill card needs a one-line name, got {self.name!r}")
        if not self.description.strip() or "\n" in self.description.strip():
            raise UserInputError(
                f"skill card {self.name!r} needs a one-line description, got {self.description!r}"
            )

    def line(self) -> str:
        """The card as the listing shows it: `- name: description`, then ` — when to use:
        ...` where the skill has a `when_to_use` (Claude Code shows both)."""
        when = f" — when to use: {self.when_to_use.strip()}" if self.when_to_use else ""
        return f"- {self.name}: {self.description.strip()}{when}"


def read_skill_cards(root: str | Path, *, exclude: Sequence[str] = ()) -> tuple[SkillCard, ...]:
    """The cards of every skill folder directly under `root` (each `<root>/<name>/SKILL.md`),
    sorted by name, leaving out the skills named in `exclude` (the one being trained) and those
    that set `disable-model-invocation: true` (never in the model's listing). A folder
    that cannot be read (bad front matter, not UTF-8, no description) is skipped with a warning
    that names it and why: it is not a skill an agent could load either."""
    base = Path(root)
    if not base.is_dir():
        raise UserInputError(f"{str(base)!r} is not a folder of skill folders")
    cards: list[SkillCard] = []
    for folder in sorted(p.parent for p in base.glob(f"*/{SKILL_FILE}")):
        try:
            read = SkillFolder.read(folder)
            card = _card_of(read)
        except UserInputError as exc:  # a broken folder beside is no skill to choose: note it
            logger.warning("skipped the skill folder %s as a card: %s", folder, exc)
            continue
        if not read.model_invocable:  # never offered to the model: not in its listing
            continue
        if card.name not in exclude:
            cards.append(card)
    return check_cards(tuple(cards))


def load_skill_cards(path: str | Path) -> tuple[SkillCard, ...]:
    """The cards of a JSONL file, one `{"name": ..., "description": ...}` object a line."""
    file = Path(path)
    if not file.is_file():
        raise UserInputError(f"skill card file {str(file)!r} does not exist")
    cards = []
    for number, raw in enumerate(file.read_text(encoding="utf-8").splitlines(), start=1):
        if raw.strip():
            cards.append(_card_from_line(raw, f"{file}:{number}"))
    return check_cards(tuple(cards))


def check_cards(cards: tuple[SkillCard, ...]) -> tuple[SkillCard, ...]:
    """`cards` unchanged, after checking that no name is listed twice (case-insensitively: a
    router could not tell two such skills apart)."""
    seen: set[str] = set()
    for card in cards:
        key = card.name.casefold()
        if key in seen:
            raise UserInputError(f"two skills are named {card.name!r}; names must be unique")
        seen.add(key)
    return cards


def _card_of(folder: SkillFolder) -> SkillCard:
    return SkillCard(folder.name, folder.description, folder.when_to_use)


def _card_from_line(raw: str, where: str) -> SkillCard:
    try:
        row = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise UserInputError(f"{where}: not a JSON object ({exc.msg})") from exc
    if not isinstance(row, dict):
        raise UserInputError(f"{where}: a skill card is a JSON object with name and description")
    name, description = row.get("name"), row.get("description")
    when = row.get("when_to_use")
    if not isinstance(name, str) or not isinstance(description, str):
        raise UserInputError(f"{where}: a skill card needs string fields `name` and `description`")
    if when is not None and not isinstance(when, str):
        raise UserInputError(f"{where}: a card's `when_to_use` is text, got {when!r}")
    return SkillCard(name.strip(), " ".join(description.split()), when and " ".join(when.split()))
