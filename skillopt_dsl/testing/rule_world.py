"""A FAKE world for measuring search yield: latent classes, rules that help, hurt or do nothing.

Nothing here calls a real model. The world is a deterministic function of its parameters and
seed, so two runs with the same seed see the same items, the same luck and the same proposals.

- Items belong to latent classes (`classes`, each a `class_share` of the items; the rest are
  easy and always answered right). An item of class `c` is answered right only when the skill
  states class `c`'s rule ("Rule R<c>: ..."); otherwise it is right by luck (`luck`, fixed per
  item).
- Each harmful rule ("Rule H<n>: ...") breaks a `harm` share of all items (fixed per item and
  rule); a neutral note ("Note N<n>: ...") does nothing.
- Any change of the skill text flips a `noise` share of answers (fixed per item and text), as a
  real model's answers move when its prompt moves. The seed text is not flipped.
- One reflection call (`RuleWorldProposer.propose`, one optimizer-model call) reads the batch's
  failures and offers `alternatives` rules, each the right rule for a failing item's class with
  probability `p_right`, a harmful rule with `p_harm`, a neutral note otherwise; each is its own
  edit group of one `Add`.

`RuleWorld.target()` is the fake target model, `RuleWorld.reflector()` the fake optimizer model,
`RuleWorld.accuracy(text, items)` the true accuracy of a skill text (no call). The null world
(`p_right=0`) is one where no proposal helps: a search that keeps anything there is fooled.

The mechanics are named axes (typed fields; the defaults are the published world's mechanics,
so its rows reproduce bit for bit; `skillopt_dsl.testing.world_family` draws worlds across them):

- `addresses`, which failing items a proposal says it is for: "exact" (the one failing item the
  rule was drawn for), "group" (as `ReflectiveProposer`: the reflection reads the failures in
  groups of up to 4, at most 2 groups, and a rule names every id of the group it was written
  from), "none" (says nothing), "partly_wrong" (one id; half the time another failing item).
- `noise_key`, what a change of the skill is keyed on: "text" (the exact text: a whitespace
  change redraws every flipped answer), "content" (the set of rules and notes stated; wording
  and whitespace ignored), "difficulty" (a `2 * noise` share of items are hard; a hard item's
  answer is redrawn, flipped half the time, by any change of the text; easy items never move).
- `draw`, what the reflection writes a rule for: "classed" (a classed failing item whenever the
  batch holds one) or "any_failing" (any failing item, also those failing from noise or a
  harmful rule; a "right" rule for an easy item is a neutral note).
- `alternatives` (rules per reflection call) and `repeats` (the chance an alternative repeats an
  earlier proposal of the run verbatim; the reflector then remembers what it offered).
- `answers`: "letters" (four letters; a constant answer exists) or "codes" (a code per item).
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from skillopt_dsl.metrics import exact_match
from skillopt_dsl.module import InputField, OutputField, SkillModule
from skillopt_dsl.optimizers.proposers import EditGroup, ProposalRequest, Proposer
from skillopt_dsl.skill import Add
from skillopt_dsl.testing.scripted import ScriptedLM
from skillopt_dsl.types import Example

__all__ = ["RuleWorld", "RuleWorldCodeTask", "RuleWorldProposer", "RuleWorldTask", "rules_in"]

LABELS = ("A", "B", "C", "D")
SEED_SKILL = "Answer with one letter: A, B, C or D."
CODE_SEED_SKILL = "Answer with the item's code."
GROUP_SIZE = 4
"""`ReflectiveProposer`'s defaults: failures are read in groups of 4, at most 2 groups."""
MAX_GROUPS = 2

Addresses = Literal["exact", "group", "none", "partly_wrong"]
NoiseKey = Literal["text", "content", "difficulty"]
Draw = Literal["classed", "any_failing"]
Answers = Literal["letters", "codes"]
_RULE = re.compile(r"\b(Rule R|Rule H|Note N)(\d+)\b")

TOLD_REJECTED = 5
"""Rejected proposals the `reads="request"` proposer's prompt lists, as `ReflectiveProposer`'s
(`skillopt_dsl.optimizers.proposers.reflective.TOLD_REJECTED`; a test holds them equal). The
fake keeps its own copy so that the family bench can run it against older revisions, whose
reflective module has no such constant."""
TOLD_EDITS = 3
"""Edits of each rejected proposal the prompt lists, as `ReflectiveProposer`'s `TOLD_EDITS`."""


class RuleWorldTask(SkillModule):
    """Answer the item with its letter."""

    item: str = InputField()
    answer: Literal["A", "B", "C", "D"] = OutputField()

    skill = SEED_SKILL
    metric = exact_match("answer")


class RuleWorldCodeTask(SkillModule):
    """Answer the item with its code."""

    item: str = InputField()
    answer: str = OutputField()

    skill = CODE_SEED_SKILL
    metric = exact_match("answer")


def rules_in(text: str) -> tuple[set[int], set[int], set[int]]:
    """The right rules (classes), harmful rules and neutral notes a skill text states."""
    found: dict[str, set[int]] = {"Rule R": set(), "Rule H": set(), "Note N": set()}
    for kind, number in _RULE.findall(text):
        found[kind].add(int(number))
    return found["Rule R"], found["Rule H"], found["Note N"]


def _unit(*parts: object) -> float:
    """A deterministic uniform draw in [0, 1) from `parts`."""
    digest = hashlib.blake2b(":".join(map(str, parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


@dataclass(frozen=True)
class RuleWorld:
    """The world's parameters and mechanics (module docstring); `seed` fixes items, luck and
    proposals."""

    seed: int = 0
    classes: int = 4
    class_share: float = 0.2
    luck: float = 0.25
    harm: float = 0.25
    noise: float = 0.08
    p_right: float = 0.3
    p_harm: float = 0.45
    alternatives: int = 3
    addresses: Addresses = "exact"
    noise_key: NoiseKey = "text"
    draw: Draw = "classed"
    repeats: float = 0.0
    answers: Answers = "letters"

    @property
    def seed_skill(self) -> str:
        """The seed skill text of the world's task."""
        return SEED_SKILL if self.answers == "letters" else CODE_SEED_SKILL

    def task(self) -> SkillModule:
        """The world's task: a letter per item, or a code per item."""
        return RuleWorldTask() if self.answers == "letters" else RuleWorldCodeTask()

    def items(self, split: str, count: int) -> list[Example]:
        """`count` items of `split` ("train", "val", "test"), each with a latent class."""
        return [
            Example(id=f"{split}{i}", inputs={"item": f"item {split}{i}"}, labels={"answer": self._gold(f"{split}{i}")})
            for i in range(count)
        ]  # fmt: skip

    def item_class(self, item_id: str) -> int | None:
        """The item's latent class (None: easy)."""
        u = _unit(self.seed, "class", item_id)
        index = int(u / self.class_share)
        return index if index < self.classes else None

    def right(self, text: str, item_id: str) -> bool:
        """Whether the target answers `item_id` right under skill `text`."""
        rights, harms, notes = rules_in(text)
        cls = self.item_class(item_id)
        ok = cls is None or cls in rights or _unit(self.seed, "luck", item_id) < self.luck
        if any(_unit(self.seed, "harm", item_id, h) < self.harm for h in harms):
            ok = False
        if self._flipped(text, (rights, harms, notes), item_id):
            ok = not ok
        return ok

    def _flipped(self, text: str, stated: tuple[set[int], ...], item_id: str) -> bool:
        """Whether a change of the skill flips `item_id`'s answer (the `noise_key` axis)."""
        if self.noise_key == "content":
            content = repr(tuple(sorted(s) for s in stated))
            return any(stated) and _unit(self.seed, "noise", item_id, content) < self.noise
        if text.strip() == self.seed_skill:
            return False
        if self.noise_key == "difficulty":
            hard = _unit(self.seed, "hard", item_id) < min(1.0, 2 * self.noise)
            return hard and _unit(self.seed, "noise", item_id, text) < 0.5
        return _unit(self.seed, "noise", item_id, text) < self.noise

    def accuracy(self, text: str, items: Sequence[Example]) -> float:
        """True accuracy of `text` on `items` (no model call)."""
        return sum(self.right(text, e.id) for e in items) / len(items)

    def target(self) -> ScriptedLM:
        """The fake target model: the gold answer when right, another answer otherwise."""

        def respond(messages: list[dict[str, str]]) -> str:
            system = next((m["content"] for m in messages if m["role"] == "system"), "")
            item_id = messages[-1]["content"].split()[-1]
            gold = self._gold(item_id)
            if self.right(system, item_id):
                return gold
            if self.answers == "codes":
                return f"K{(int(gold[1:]) + 1) % 10**6:06d}"
            return LABELS[(LABELS.index(gold) + 1) % len(LABELS)]

        return ScriptedLM(respond, model="scripted/rule-world-target")

    def reflector(self) -> ScriptedLM:
        """The fake optimizer model: reads failing item ids, answers `alternatives` rules, each
        with the item it was written for and the ids it names (the `addresses` axis). With
        `repeats`, it remembers its offers and repeats one verbatim with that chance."""
        earlier: list[dict[str, object]] = []

        def respond(messages: list[dict[str, str]]) -> str:
            prompt = messages[-1]["content"]
            failing = re.findall(r"failing: (\S+)", prompt)
            if self.addresses == "group":
                failing = failing[: GROUP_SIZE * MAX_GROUPS]
            rng = random.Random(f"{self.seed}:{prompt}")
            side = random.Random(f"{self.seed}:side:{prompt}")
            offers: list[dict[str, object]] = []
            for _ in range(self.alternatives):
                if self.repeats and earlier and side.random() < self.repeats:
                    offers.append(side.choice(earlier))
                    continue
                rule, target = self.draw_proposal(rng, failing)
                named = self._named(side, target, failing)
                offers.append({"rule": rule, "for": target, "addresses": named})
            earlier.extend(offers)
            return json.dumps(offers)

        return ScriptedLM(respond, model="scripted/rule-world-reflector")

    def _named(self, side: random.Random, target: str, failing: Sequence[str]) -> list[str]:
        """The ids a proposal written for `target` names (the `addresses` axis)."""
        if self.addresses == "none":
            return []
        if self.addresses == "group":
            start = failing.index(target) // GROUP_SIZE * GROUP_SIZE
            return list(failing[start : start + GROUP_SIZE])
        others = [i for i in failing if i != target]
        if self.addresses == "partly_wrong" and others and side.random() < 0.5:
            return [side.choice(others)]
        return [target]

    def draw_rule(self, rng: random.Random, failing: Sequence[str]) -> str:
        """One proposed rule with the world's odds, for the failing item ids `failing` (a
        peer's reflection in bench/ draws with it)."""
        return self.draw_proposal(rng, failing)[0]

    def draw_proposal(self, rng: random.Random, failing: Sequence[str]) -> tuple[str, str]:
        """One proposed rule with the world's odds and the failing item it is written for (the
        fake reflector's draw). "classed": the right rule of a classed failing item's class
        with `p_right` (when one of `failing` has a class), a harmful rule with `p_harm`, a
        neutral note otherwise (a draw for the right rule with no classed failure gives a
        harmful rule when `p_harm > 0`); a harmful rule or a note is "for" a failing item
        drawn at random. "any_failing": the item is drawn first from all of `failing`; the right rule of
        its class with `p_right` (a note when it has none), harmful or neutral as above."""
        if self.draw == "any_failing":
            u = rng.random()
            target = rng.choice(list(failing)) if failing else ""
            cls = self.item_class(target) if target else None
            if u < self.p_right and cls is not None:
                return _right_rule(cls), target
            harmful = self.p_right <= u < self.p_right + self.p_harm
            return _other_rule(rng, harmful), target
        u = rng.random()
        classed = [(i, c) for i in failing if (c := self.item_class(i)) is not None]
        if u < self.p_right and classed:
            target, cls = rng.choice(classed)
            return _right_rule(cls), target
        target = rng.choice(list(failing)) if failing else ""
        return _other_rule(rng, u < self.p_right + self.p_harm), target

    def _gold(self, item_id: str) -> str:
        if self.answers == "codes":
            return f"K{int(_unit(self.seed, 'gold', item_id) * 10**6):06d}"
        return LABELS[int(_unit(self.seed, "gold", item_id) * len(LABELS))]


def _right_rule(cls: int) -> str:
    return f"Rule R{cls}: items of kind {cls} follow rule {cls}."


def _other_rule(rng: random.Random, harmful: bool) -> str:
    """A harmful rule or a neutral note, numbered by `rng`."""
    if harmful:
        return f"Rule H{rng.randrange(10**6)}: always prefer the first option."
    return f"Note N{rng.randrange(10**6)}: read the item carefully."


@dataclass(kw_only=True)
class RuleWorldProposer(Proposer):
    """The world's reflection as a `Proposer`: one optimizer-model call per `propose`, one
    edit group of one `Add` per alternative the model offers.

    `reads` is what its prompt holds, and so what a new draw needs (the fake reflector's draw
    is a function of the prompt, as a model's answer at temperature 0 is): "failures" (the
    failing ids alone: the same failures give the same rules, whatever the search was told or
    accepted since; the published world) or "request" (the failing ids, the skill (its hash)
    and the last rejected or struck proposals, as many as `ReflectiveProposer`'s prompt lists:
    a rejection or an accepted edit changes the prompt, and the draw)."""

    name: str = "rule-world"
    use_addresses: bool = True
    reads: Literal["failures", "request"] = "failures"

    def propose(self, request: ProposalRequest) -> list[EditGroup]:
        failing = [e.id for e, _ in request.failures()]
        if not failing:
            return []
        prompt = "\n".join(f"failing: {i}" for i in failing)
        if self.reads == "request":
            told = [
                f"tried: {e.model_dump_json(exclude={'rationale'})} (delta {c.delta:+.3f})"
                for c in request.rejected[-TOLD_REJECTED:]
                for e in c.edits[:TOLD_EDITS]
            ]
            prompt = "\n".join([prompt, f"skill: {request.skill.hash}", *told])
        reply = request.optimizer_lm.complete(
            [{"role": "system", "content": "Propose rules."}, {"role": "user", "content": prompt}]
        ).text
        return [
            EditGroup(
                (Add(after=None, text=offer["rule"]),),
                self.name,
                failure_driven=True,
                rationale=offer["rule"],
                addresses=tuple(offer["addresses"]) if self.use_addresses else (),
            )
            for offer in json.loads(reply)
        ]
