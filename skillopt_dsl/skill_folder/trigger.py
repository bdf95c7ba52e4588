"""Triggering as a measured task: does the target model load this skill exactly when it should?

`TriggerModule` shows the target model what an agent sees before it loads a skill — a list of
available skills as `- name: description` lines (this folder's skill, with the description being
trained, among other skills' cards) — and a request, and asks for the name of the one skill to
load, or `none`. An example is `{"request": str, "should_trigger": bool}`; it scores 1 when
(the model picked this skill) == `should_trigger`.

The trained document holds the description part only (`folder.seed_skill(("description",))`);
the router instruction is fixed. The list's order is seeded by the request text and
`order_seed` — never by the candidate — so two candidates are compared on the same lists.
`skill_refusal` refuses a description the chosen agent could not read (empty, several lines,
over its length limit), so the door never sends one to the gate.

Example::

    folder = SkillFolder.read("examples/skill_folders/release-notes")
    others = load_skill_cards("examples/skill_folders/distractors.jsonl")
    module = TriggerModule(folder, others)
    splits = load_trigger_splits("examples/skill_folders/release-notes.trigger.jsonl")
    result = sd.compile(module, splits.train, splits.val)
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Final

from skillopt_dsl.errors import UserInputError
from skillopt_dsl.lm.base import Message
from skillopt_dsl.metrics.score import Score
from skillopt_dsl.module import InputField, OutputField, RunOutcome, SkillModule
from skillopt_dsl.skill import Skill
from skillopt_dsl.skill_folder.cards import SkillCard, check_cards
from skillopt_dsl.skill_folder.document import (
    DESCRIPTION,
    DescriptionAgent,
    FolderDocument,
    description_problem,
)
from skillopt_dsl.skill_folder.folder import SkillFolder
from skillopt_dsl.types import Example, Prediction

if TYPE_CHECKING:
    from skillopt_dsl.lm import LM

__all__ = [
    "ROUTER_INSTRUCTION",
    "TriggerModule",
    "TriggerPick",
    "pick_skill",
    "trigger_match",
]

ROUTER_INSTRUCTION: Final[str] = (
    "You choose which skill an assistant loads for a request. "
    "Reply with the name of one skill from the list, or none if no skill fits. "
    "Reply with the name only."
)
"""The fixed (never trained) system message of every routing call."""

_NONE = ("none", "no skill", "no-skill", "n/a", "null", "nothing")
_TAG = re.compile(r"</?[A-Za-z_][\w-]*>")
_LEAD = re.compile(r"^\s*(?:[-*•>]+|\d+[.)])\s*")
_PREFIX = re.compile(
    r"^\s*(?:final\s+answer|answer|skill\s+name|skill|name|load)\s*[:：=-]\s*", re.IGNORECASE
)
_QUOTES = "\"'`“”‘’*"


@dataclass(frozen=True)
class TriggerPick:
    """One routing call's trace: the skill the model picked (None: none, or an unreadable
    answer) and the names in the order they were shown."""

    picked: str | None
    shown: tuple[str, ...]


def pick_skill(text: str, names: Sequence[str]) -> str | None:
    """The skill a router's reply names, or None.

    Read robustly: case, quotes, a bullet, an `Answer:`/`Skill:` prefix, trailing punctuation,
    `_` or a space for `-`, and a copied `name: description` line are forgiven. The reply's first
    line naming a skill at its start wins; a first line starting with `none` is None; otherwise a
    reply naming exactly one skill anywhere picks it. Anything else (no name, or several) is None.
    """
    lines = [line for line in _TAG.sub(" ", text).splitlines() if line.strip()]
    if not lines:
        return None
    first = _cleaned(lines[0])
    leading = [name for name in names if _name_pattern(name, anchored=True).match(first)]
    if leading:
        return max(leading, key=len)
    if first.casefold().startswith(_NONE):
        return None
    whole = " ".join(lines)
    found = [name for name in names if _name_pattern(name, anchored=False).search(whole)]
    return found[0] if len(found) == 1 else None


def trigger_match(example: Example, prediction: Prediction) -> Score:
    """1 when the prediction's `should_trigger` equals the example's; a missing or non-boolean
    label is an error naming the example (a string "false" must not count as a label)."""
    wanted = example.labels.get("should_trigger")
    if not isinstance(wanted, bool):
        raise UserInputError(
            f"trigger example {example.id!r}: `should_trigger` must be true or false, got "
            f"{wanted!r}"
        )
    return Score(1.0 if prediction.outputs.get("should_trigger") is wanted else 0.0)


class TriggerModule(SkillModule):
    """Pick the one skill to load for a request from a list of available skills."""

    request: str = InputField()
    should_trigger: bool = OutputField()

    def __init__(
        self,
        folder: SkillFolder,
        others: Sequence[SkillCard],
        *,
        agent: DescriptionAgent = "claude",
        order_seed: int = 0,
        shown_others: int | None = None,
        reply_tokens: int | None = None,
    ) -> None:
        """`folder`: the skill whose description is trained; `others`: the other skills'
        cards (the user's own, or shipped distractors); `agent`: whose description limits the
        door enforces; `order_seed`: seeds the per-request order of the list; `shown_others`:
        how many of `others` each request's list shows (a seeded sample; None: all of them),
        which keeps the prompt short for a small model; `reply_tokens`: the most tokens a
        routing reply may use (a skill name needs few; None: the model's own `max_tokens`),
        which keeps a small model from copying the whole list back."""
        if not others:
            raise UserInputError("a trigger task needs at least one other skill to choose among")
        if shown_others is not None and not 1 <= shown_others <= len(others):
            raise UserInputError(
                f"shown_others must be between 1 and {len(others)} (the other skills), "
                f"got {shown_others}"
            )
        if reply_tokens is not None and reply_tokens < 1:
            raise UserInputError(f"reply_tokens must be at least 1, got {reply_tokens}")
        cards = check_cards((*others, SkillCard(folder.name, "(this skill)")))
        self.folder = folder
        self.others: tuple[SkillCard, ...] = cards[:-1]
        self.agent: DescriptionAgent = agent
        self.order_seed = order_seed
        self.shown_others = shown_others
        self.reply_tokens = reply_tokens
        super().__init__(skill=folder.seed_skill((DESCRIPTION,)), metric=trigger_match)

    # -- what the router sees ---------------------------------------------------------------
    def description_of(self, skill: Skill) -> str:
        """The description a trained document carries (an empty skill: an empty description,
        which is how proposers render the task alone)."""
        if not skill.text:
            return ""
        return FolderDocument.from_skill(skill).text_of(DESCRIPTION).strip()

    def card_order(self, request: str) -> tuple[str, ...]:
        """The names in the order the list shows them for `request`: seeded by `order_seed`
        and the request text, never by the description being trained."""
        rng = random.Random(f"{self.order_seed}:{request}")
        others = sorted(card.name for card in self.others)
        if self.shown_others is not None:
            others = rng.sample(others, self.shown_others)
        names = [*others, self.folder.name]
        rng.shuffle(names)
        return tuple(names)

    def render(self, skill: Skill, inputs: Example | Mapping[str, object]) -> list[Message]:
        """The routing call's messages: the fixed instruction, then the list and the request."""
        values = inputs.inputs if isinstance(inputs, Example) else inputs
        request = values.get("request")
        if not isinstance(request, str):
            raise UserInputError(f"a trigger example needs a string `request`, got {request!r}")
        cards = {card.name: card for card in self.others}
        cards[self.folder.name] = SkillCard(self.folder.name, self.description_of(skill) or "-")
        listing = "\n".join(cards[name].line() for name in self.card_order(request))
        user = f"Skills:\n{listing}\n\nRequest: {request}\n\nSkill to load:"
        return [
            {"role": "system", "content": ROUTER_INSTRUCTION},
            {"role": "user", "content": user},
        ]

    def parse(self, text: str) -> Prediction:
        """`should_trigger` is whether the reply picks this skill; never an error (an
        unreadable reply picks no skill)."""
        names = [card.name for card in self.others] + [self.folder.name]
        return Prediction({"should_trigger": pick_skill(text, names) == self.folder.name}, raw=text)

    # -- the seam -----------------------------------------------------------------------------
    def run(self, skill: Skill, example: Example, lm: LM, *, seed: int) -> RunOutcome:
        """One routing call; the trace says which skill was picked among which."""
        messages = self.render(skill, example)
        params = (
            None if self.reply_tokens is None else replace(lm.params, max_tokens=self.reply_tokens)
        )
        reply = lm.complete(messages, seed=seed, params=params)
        shown = self.card_order(example.request)
        picked = pick_skill(reply.text, shown)
        return RunOutcome(
            prediction=Prediction({"should_trigger": picked == self.folder.name}, raw=reply.text),
            output=reply.text,
            prompt_tokens=reply.prompt_tokens,
            completion_tokens=reply.completion_tokens,
            latency_s=reply.latency_s,
            cached=reply.cached,
            trace=TriggerPick(picked, shown),
        )

    def score(self, example: Example, outcome: RunOutcome) -> Score:
        """`trigger_match`, with feedback naming what the router picked instead."""
        score = trigger_match(example, outcome.prediction)
        pick = outcome.trace
        if score.value == 1.0 or not isinstance(pick, TriggerPick):
            return score
        chosen = repr(pick.picked) if pick.picked is not None else "no skill"
        if example.labels["should_trigger"]:
            why = f"the router loaded {chosen} for a request {self.folder.name!r} should handle"
        else:
            why = f"the router loaded {self.folder.name!r} for a request it should not handle"
        return Score(score.value, f"{why}: {example.request!r}")

    def skill_refusal(self, skill: Skill) -> str | None:
        """Why a trained document cannot be routed: not a description-only folder document,
        or a description `self.agent` cannot read (see `description_problem`)."""
        try:
            document = FolderDocument.from_skill(skill)
        except UserInputError as exc:
            return str(exc)
        if document.names != (DESCRIPTION,):
            return f"a trigger task trains the description alone; this document has {list(document.names)}"
        return description_problem(document.text_of(DESCRIPTION), self.agent)


def _cleaned(line: str) -> str:
    cleaned = _LEAD.sub("", line.strip())
    for _ in range(2):
        cleaned = _PREFIX.sub("", cleaned.strip().strip(_QUOTES)).strip()
    return cleaned.strip(_QUOTES).strip()


def _name_pattern(name: str, *, anchored: bool) -> re.Pattern[str]:
    """`name` with `-`, `_` or spaces between its words, not inside a longer name."""
    words = [re.escape(word) for word in re.split(r"[-_\s]+", name.strip()) if word]
    body = r"[-_\s]+".join(words)
    start = "^" if anchored else r"(?<![\w-])"
    return re.compile(rf"{start}{body}(?![\w-])", re.IGNORECASE)
