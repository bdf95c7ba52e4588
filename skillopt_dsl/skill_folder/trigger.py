"""Triggering as a measured task: does the agent call this skill exactly when it should?

`TriggerModule` shows the target model what a coding agent sees (Claude Code's layout): a system
prompt offering ordinary tools (`Read`, `Write`, `Bash`, `WebSearch`) beside a `Skill` tool
whose description lists every available skill as `- name: description` (plus `when_to_use`
where a card has one): this folder's skill, with the description being trained, among the
other skills' cards. The user message is the request alone. The model decides whether any tool
is worth calling at all; the request triggers this skill only when the reply calls `Skill`
with its name (the text tool protocol of `skillopt_dsl.agents.protocol`: a JSON block, or a
Python-style call). A reply that calls another tool, calls `Skill` for another skill, or
answers directly does not trigger it, so "no skill" is a real option.

Each request is run `samples` times (default 3) at `temperature` (default 0.7), each sample
with its own seed, so the response cache keeps them as distinct samples. The request's score
is its trigger rate against the label: the share of samples that called this skill when it
should trigger, the share that did not when it should not. A graded score per request gives
the gate more power per request than one 0/1 sample (`skillopt_dsl.skill_folder.trigger_data.
trigger_preflight` says how many requests a run needs). An example is `{"request": str,
"should_trigger": bool}`; the prediction carries `should_trigger` (a majority of the samples)
and `trigger_rate`.

The trained document holds the description part only (`folder.seed_skill(("description",))`);
the agent prompt is fixed. The listing's order is seeded by the request text and `order_seed`
— never by the candidate — so two candidates are compared on the same prompts.
`skill_refusal` refuses a description the chosen agent could not read (empty, several lines,
over its length limit) or one that pushes the listing of every skill over the agent's shared
budget (`LISTING_BUDGET`), so the door never sends one to the gate. A folder's `when_to_use` is
shown beside its description, as Claude Code shows it.

Example::

    folder = SkillFolder.read("examples/skill_folders/release-notes")
    others = load_skill_cards("examples/skill_folders/distractors.jsonl")
    module = TriggerModule(folder, others)
    splits = load_trigger_splits("examples/skill_folders/release-notes.trigger.jsonl")
    result = sd.compile(module, splits.train, splits.val)
"""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Final

from skillopt_dsl.agents.protocol import parse_tool_calls
from skillopt_dsl.errors import UserInputError
from skillopt_dsl.lm.base import Message
from skillopt_dsl.metrics.score import Score
from skillopt_dsl.module import InputField, OutputField, RunOutcome, SkillModule
from skillopt_dsl.skill import Skill
from skillopt_dsl.skill_folder.cards import SkillCard, check_cards
from skillopt_dsl.skill_folder.document import (
    DESCRIPTION,
    WHEN_TO_USE,
    DescriptionAgent,
    FolderDocument,
    description_problem,
)
from skillopt_dsl.skill_folder.folder import SkillFolder
from skillopt_dsl.types import Example, Prediction

if TYPE_CHECKING:
    from skillopt_dsl.lm import LM

__all__ = [
    "DEFAULT_SAMPLES",
    "DEFAULT_TEMPERATURE",
    "LISTING_BUDGET",
    "ORDINARY_TOOLS",
    "ROUTER_INSTRUCTION",
    "SKILL_TOOL",
    "TriggerModule",
    "TriggerPick",
    "TriggerSampling",
    "agent_prompt",
    "pick_skill",
    "skill_called",
    "trigger_match",
    "trigger_parts",
]

ROUTER_INSTRUCTION: Final[str] = (
    "You are a coding assistant working in the user's project. For each request, decide "
    "whether one of your tools helps: call a tool only when it does, and answer directly "
    "when none is needed."
)
"""The fixed (never trained) opening of every trigger call's system prompt."""

SKILL_TOOL: Final[str] = "Skill"
"""The name of the tool that loads a skill."""

ORDINARY_TOOLS: Final[tuple[tuple[str, str], ...]] = (
    ("Read(file_path)", "Read a file from the project."),
    ("Write(file_path, content)", "Write a file in the project."),
    ("Bash(command)", "Run a shell command in the project."),
    ("WebSearch(query)", "Search the web."),
)
"""The ordinary tools every trigger prompt offers beside the skill tool (signature, what it
does)."""

LISTING_BUDGET: Final[int] = 8_000
"""The characters the skill listing may take by default: Claude Code gives it about 1% of the
context window (8,000 characters for 200k tokens at 4 characters a token; an agent leaves out
the skills past it). A description that pushes the listing of every available skill over the
budget is refused (`TriggerModule(listing_budget=...)` changes it, None turns it off)."""

DEFAULT_SAMPLES: Final[int] = 3
"""How many times each request is run by default (its score is the trigger rate)."""
DEFAULT_TEMPERATURE: Final[float] = 0.7
"""The sampling temperature of the samples by default (above 0, so samples differ)."""

_NONE = ("none", "no skill", "no-skill", "n/a", "null", "nothing")
_TAG = re.compile(r"</?[A-Za-z_][\w-]*>")
_LEAD = re.compile(r"^\s*(?:[-*•>]+|\d+[.)])\s*")
_PREFIX = re.compile(
    r"^\s*(?:final\s+answer|answer|skill\s+name|skill|name|load)\s*[:：=-]\s*", re.IGNORECASE
)
_QUOTES = "\"'`“”‘’*"


@dataclass(frozen=True)
class TriggerSampling:
    """How each trigger request is sampled: `samples` runs (its score is the trigger rate over
    them) at `temperature` (above 0 when there are several, or they would all agree)."""

    samples: int = DEFAULT_SAMPLES
    temperature: float = DEFAULT_TEMPERATURE

    def __post_init__(self) -> None:
        if self.samples < 1:
            raise UserInputError(f"samples must be at least 1, got {self.samples}")
        if self.samples > 1 and self.temperature <= 0:
            raise UserInputError(
                f"{self.samples} samples at temperature {self.temperature} would all agree; "
                "give a temperature above 0 (or samples=1)"
            )


@dataclass(frozen=True)
class TriggerPick:
    """One request's samples: the skill each sample loaded (None: no `Skill` call, another
    tool, or an unreadable skill name), the most common of them (`picked`), the names in the
    order the listing showed them, and the trigger rate (the share of samples that loaded this
    skill)."""

    picked: str | None
    shown: tuple[str, ...]
    picks: tuple[str | None, ...] = ()
    rate: float = 0.0


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
    """The trigger rate against the label: `trigger_rate` when the prediction has one (the
    share of samples that loaded the skill), else 1 or 0 from `should_trigger`; scored as the
    rate when the example should trigger, one minus it when not. A missing or non-boolean label
    is an error naming the example (a string "false" must not count as a label)."""
    wanted = example.labels.get("should_trigger")
    if not isinstance(wanted, bool):
        raise UserInputError(
            f"trigger example {example.id!r}: `should_trigger` must be true or false, got "
            f"{wanted!r}"
        )
    rate = prediction.outputs.get("trigger_rate")
    if not isinstance(rate, int | float) or isinstance(rate, bool):
        rate = 1.0 if prediction.outputs.get("should_trigger") is True else 0.0
    return Score(float(rate) if wanted else 1.0 - float(rate))


def skill_called(text: str, names: Sequence[str]) -> str | None:
    """The skill a reply loads through the `Skill` tool, or None: the reply's first tool call
    must be `Skill` with a `skill` (or `name`, `command`) argument naming one of `names`
    (read with `pick_skill`'s tolerance); no call, another tool first, or an unknown name
    load nothing."""
    calls = parse_tool_calls(
        text, [SKILL_TOOL, *(tool.split("(")[0] for tool, _ in ORDINARY_TOOLS)]
    )
    if not calls or calls[0].name.casefold() != SKILL_TOOL.casefold():
        return None
    arguments = calls[0].arguments
    value = next(
        (arguments[key] for key in ("skill", "name", "command") if key in arguments),
        next(iter(arguments.values()), None),
    )
    return pick_skill(value, names) if isinstance(value, str) else None


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
        sampling: TriggerSampling | None = None,
        listing_budget: int | None = LISTING_BUDGET,
    ) -> None:
        """`folder`: the skill whose description is trained; `others`: the other skills'
        cards (the user's own, or shipped distractors); `agent`: whose description limits the
        door enforces; `order_seed`: seeds the per-request order of the list; `shown_others`:
        how many of `others` each request's list shows (a seeded sample; None: all of them),
        which keeps the prompt short for a small model; `reply_tokens`: the most tokens a
        routing reply may use (a skill name needs few; None: the model's own `max_tokens`),
        which keeps a small model from copying the whole list back; `sampling`: how many
        times each request runs (its score is the trigger rate over them) and at which
        temperature (`TriggerSampling`; default 3 samples at 0.7);
        `listing_budget`: the characters the listing of every available skill may take (see
        `LISTING_BUDGET`; a seed over it is refused here, a candidate at the door)."""
        if not others:
            raise UserInputError("a trigger task needs at least one other skill to choose among")
        if shown_others is not None and not 1 <= shown_others <= len(others):
            raise UserInputError(
                f"shown_others must be between 1 and {len(others)} (the other skills), "
                f"got {shown_others}"
            )
        if reply_tokens is not None and reply_tokens < 1:
            raise UserInputError(f"reply_tokens must be at least 1, got {reply_tokens}")
        chosen = sampling if sampling is not None else TriggerSampling()
        cards = check_cards((*others, SkillCard(folder.name, "(this skill)")))
        self.folder = folder
        self.others: tuple[SkillCard, ...] = cards[:-1]
        self.agent: DescriptionAgent = agent
        self.order_seed = order_seed
        self.shown_others = shown_others
        self.reply_tokens = reply_tokens
        self.samples = chosen.samples
        self.temperature = chosen.temperature
        self.listing_budget = listing_budget
        if (problem := self.listing_problem(folder.description, folder.when_to_use)) is not None:
            raise UserInputError(f"{folder.root}: {problem}; nothing was run")
        super().__init__(skill=folder.seed_skill(trigger_parts(folder)), metric=trigger_match)

    # -- what the router sees ---------------------------------------------------------------
    def description_of(self, skill: Skill) -> str:
        """The description a trained document carries (an empty skill: an empty description,
        which is how proposers render the task alone)."""
        if not skill.text:
            return ""
        return FolderDocument.from_skill(skill).text_of(DESCRIPTION).strip()

    def when_of(self, skill: Skill) -> str | None:
        """The `when_to_use` a trained document carries (the folder's when it trains none)."""
        if not skill.text:
            return self.folder.when_to_use
        document = FolderDocument.from_skill(skill)
        if WHEN_TO_USE not in document.names:
            return self.folder.when_to_use
        return document.text_of(WHEN_TO_USE).strip()

    def own_card(self, description: str, when: str | None = None) -> SkillCard:
        """This skill's card with `description` and `when` (its `when_to_use`)."""
        return SkillCard(self.folder.name, description or "-", when)

    def listing_problem(self, description: str, when: str | None = None) -> str | None:
        """Why the listing of every available skill, this one with `description` and `when`,
        would not fit `listing_budget` (None: it fits, or there is no budget)."""
        if self.listing_budget is None:
            return None
        cards = (*self.others, self.own_card(description, when))
        size = sum(len(card.line()) + 1 for card in cards)
        if size <= self.listing_budget:
            return None
        return (
            f"the listing of all {len(cards)} skills would take {size} characters, over the "
            f"agent's budget of {self.listing_budget}; past it an agent leaves skills out. "
            "Shorten the descriptions (this one or the others')"
        )

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
        """The trigger call's messages: the agent's system prompt (the fixed instruction, the
        ordinary tools and the `Skill` tool with the listing), then the request alone."""
        values = inputs.inputs if isinstance(inputs, Example) else inputs
        request = values.get("request")
        if not isinstance(request, str):
            raise UserInputError(f"a trigger example needs a string `request`, got {request!r}")
        cards = {card.name: card for card in self.others}
        cards[self.folder.name] = self.own_card(self.description_of(skill), self.when_of(skill))
        listing = "\n".join(cards[name].line() for name in self.card_order(request))
        return [
            {"role": "system", "content": agent_prompt(listing)},
            {"role": "user", "content": request},
        ]

    def parse(self, text: str) -> Prediction:
        """`should_trigger` is whether the reply calls `Skill` with this skill; never an
        error (a reply that calls nothing loads no skill)."""
        names = [card.name for card in self.others] + [self.folder.name]
        picked = skill_called(text, names) == self.folder.name
        return Prediction({"should_trigger": picked, "trigger_rate": float(picked)}, raw=text)

    # -- the seam -----------------------------------------------------------------------------
    def run(self, skill: Skill, example: Example, lm: LM, *, seed: int) -> RunOutcome:
        """`samples` calls, each with its own seed (`seed * samples + i`, so the cache keeps
        them apart and a candidate and the seed meet the same seeds); the trace says which
        skill each loaded among which."""
        messages = self.render(skill, example)
        params = replace(
            lm.params,
            temperature=self.temperature if self.samples > 1 else lm.params.temperature,
            max_tokens=self.reply_tokens or lm.params.max_tokens,
        )
        shown = self.card_order(example.request)
        replies = [
            lm.complete(messages, seed=seed * self.samples + i, params=params)
            for i in range(self.samples)
        ]
        picks = tuple(skill_called(reply.text, shown) for reply in replies)
        rate = sum(1 for pick in picks if pick == self.folder.name) / self.samples
        picked = Counter(picks).most_common(1)[0][0]
        outputs = {"should_trigger": rate > 0.5, "trigger_rate": rate}
        text = "\n\n".join(reply.text for reply in replies)
        return RunOutcome(
            prediction=Prediction(outputs, raw=text),
            output=text,
            prompt_tokens=sum(reply.prompt_tokens for reply in replies),
            completion_tokens=sum(reply.completion_tokens for reply in replies),
            latency_s=sum(reply.latency_s for reply in replies),
            cached=all(reply.cached for reply in replies),
            trace=TriggerPick(picked, shown, picks, rate),
        )

    def score(self, example: Example, outcome: RunOutcome) -> Score:
        """`trigger_match`, with feedback naming what the router picked instead."""
        score = trigger_match(example, outcome.prediction)
        pick = outcome.trace
        if score.value == 1.0 or not isinstance(pick, TriggerPick):
            return score
        runs = len(pick.picks) or 1
        if example.labels["should_trigger"]:
            missed = [p for p in pick.picks if p != self.folder.name] or [pick.picked]
            chosen = ", ".join(sorted({repr(p) if p else "no skill" for p in missed}))
            why = (
                f"the agent loaded {chosen} in {len(missed)} of {runs} run(s) for a request "
                f"{self.folder.name!r} should handle"
            )
        else:
            loaded = sum(1 for p in pick.picks if p == self.folder.name) or 1
            why = (
                f"the agent loaded {self.folder.name!r} in {loaded} of {runs} run(s) for a "
                "request it should not handle"
            )
        return Score(score.value, f"{why}: {example.request!r}")

    def skill_refusal(self, skill: Skill) -> str | None:
        """Why a trained document cannot be routed: not a description-only folder document,
        or a description `self.agent` cannot read (see `description_problem`)."""
        try:
            document = FolderDocument.from_skill(skill)
        except UserInputError as exc:
            return str(exc)
        expected = trigger_parts(self.folder)
        if document.names != expected:
            return (
                "a trigger task trains the description alone (beside the folder's "
                f"when_to_use where it has one: {list(expected)}); this document has "
                f"{list(document.names)}"
            )
        description = document.text_of(DESCRIPTION)
        when = document.text_of(WHEN_TO_USE) if WHEN_TO_USE in expected else None
        return (
            description_problem(description, self.agent)
            or (None if when is None else _when_problem(when, self.agent))
            or self.listing_problem(description.strip(), None if when is None else when.strip())
        )


def trigger_parts(folder: SkillFolder) -> tuple[str, ...]:
    """The parts a trigger task trains on `folder`: its description, and its `when_to_use`
    beside it where it has one (the listing shows both; the same limits and gate apply)."""
    return (DESCRIPTION,) if folder.when_to_use is None else (DESCRIPTION, WHEN_TO_USE)


def _when_problem(text: str, agent: DescriptionAgent) -> str | None:
    problem = description_problem(text, agent)
    return None if problem is None else f"when_to_use: {problem}"


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


def agent_prompt(listing: str) -> str:
    """The agent's system prompt around a skill listing (`- name: description` lines): the
    fixed instruction, the ordinary tools, the `Skill` tool and the tool protocol."""
    tools = [f"- {signature}: {does}" for signature, does in ORDINARY_TOOLS]
    skill_tool = (
        f"- {SKILL_TOOL}(skill): Load a skill: instructions for one kind of task. Call it when "
        "one of the available skills below fits the request, with that skill's name.\n"
        f"  <available_skills>\n{_indented(listing)}\n  </available_skills>"
    )
    call = json.dumps({"tool": "<tool name>", "arguments": {"<argument>": "..."}})
    return "\n".join(
        [
            ROUTER_INSTRUCTION,
            "",
            "You can call these tools:",
            *tools,
            skill_tool,
            "",
            f"To call a tool, reply with only a JSON block like this:\n```json\n{call}\n```",
            "When no tool is needed, reply with your answer.",
        ]
    )


def _indented(listing: str) -> str:
    return "\n".join(f"  {line}" for line in listing.splitlines())
