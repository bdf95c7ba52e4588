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

__all__ = ["RuleWorld", "RuleWorldProposer", "RuleWorldTask", "rules_in"]

LABELS = ("A", "B", "C", "D")
SEED_SKILL = "Answer with one letter: A, B, C or D."
_RULE = re.compile(r"\b(Rule R|Rule H|Note N)(\d+)\b")


class RuleWorldTask(SkillModule):
    """Answer the item with its letter."""

    item: str = InputField()
    answer: Literal["A", "B", "C", "D"] = OutputField()

    skill = SEED_SKILL
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
    """The world's parameters (module docstring); `seed` fixes items, luck and proposals."""

    seed: int = 0
    classes: int = 4
    class_share: float = 0.2
    luck: float = 0.25
    harm: float = 0.25
    noise: float = 0.08
    p_right: float = 0.3
    p_harm: float = 0.45
    alternatives: int = 3

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
        rights, harms, _ = rules_in(text)
        cls = self.item_class(item_id)
        ok = cls is None or cls in rights or _unit(self.seed, "luck", item_id) < self.luck
        if any(_unit(self.seed, "harm", item_id, h) < self.harm for h in harms):
            ok = False
        if text.strip() != SEED_SKILL and _unit(self.seed, "noise", item_id, text) < self.noise:
            ok = not ok
        return ok

    def accuracy(self, text: str, items: Sequence[Example]) -> float:
        """True accuracy of `text` on `items` (no model call)."""
        return sum(self.right(text, e.id) for e in items) / len(items)

    def target(self) -> ScriptedLM:
        """The fake target model: the gold letter when right, another letter otherwise."""

        def respond(messages: list[dict[str, str]]) -> str:
            system = next((m["content"] for m in messages if m["role"] == "system"), "")
            item_id = messages[-1]["content"].split()[-1]
            gold = self._gold(item_id)
            if self.right(system, item_id):
                return gold
            return LABELS[(LABELS.index(gold) + 1) % len(LABELS)]

        return ScriptedLM(respond, model="scripted/rule-world-target")

    def reflector(self) -> ScriptedLM:
        """The fake optimizer model: reads failing item ids, answers `alternatives` rules."""

        def respond(messages: list[dict[str, str]]) -> str:
            prompt = messages[-1]["content"]
            failing = re.findall(r"failing: (\S+)", prompt)
            rng = random.Random(f"{self.seed}:{prompt}")
            drawn = [self.draw_proposal(rng, failing) for _ in range(self.alternatives)]
            return json.dumps([{"rule": rule, "for": target} for rule, target in drawn])

        return ScriptedLM(respond, model="scripted/rule-world-reflector")

    def draw_rule(self, rng: random.Random, failing: Sequence[str]) -> str:
        """One proposed rule with the world's odds, for the failing item ids `failing` (a
        peer's reflection in bench/ draws with it)."""
        return self.draw_proposal(rng, failing)[0]

    def draw_proposal(self, rng: random.Random, failing: Sequence[str]) -> tuple[str, str]:
        """One proposed rule with the world's odds and the failing item it is written for (the
        fake reflector's draw): the right rule of that item's class with `p_right` (when one
        of `failing` has a class), a harmful rule with `p_harm`, a neutral note otherwise; a
        harmful rule or a note is "for" a failing item drawn at random."""
        u = rng.random()
        classed = [(i, c) for i in failing if (c := self.item_class(i)) is not None]
        if u < self.p_right and classed:
            target, cls = rng.choice(classed)
            return f"Rule R{cls}: items of kind {cls} follow rule {cls}.", target
        target = rng.choice(list(failing)) if failing else ""
        if u < self.p_right + self.p_harm:
            return f"Rule H{rng.randrange(10**6)}: always prefer the first option.", target
        return f"Note N{rng.randrange(10**6)}: read the item carefully.", target

    def _gold(self, item_id: str) -> str:
        return LABELS[int(_unit(self.seed, "gold", item_id) * len(LABELS))]


@dataclass(kw_only=True)
class RuleWorldProposer(Proposer):
    """The world's reflection as a `Proposer`: one optimizer-model call per `propose`, one
    edit group of one `Add` per alternative the model offers."""

    name: str = "rule-world"
    use_addresses: bool = True

    def propose(self, request: ProposalRequest) -> list[EditGroup]:
        failing = [e.id for e, _ in request.failures()]
        if not failing:
            return []
        prompt = "\n".join(f"failing: {i}" for i in failing)
        reply = request.optimizer_lm.complete(
            [{"role": "system", "content": "Propose rules."}, {"role": "user", "content": prompt}]
        ).text
        return [
            EditGroup(
                (Add(after=None, text=offer["rule"]),),
                self.name,
                failure_driven=True,
                rationale=offer["rule"],
                addresses=(offer["for"],) if self.use_addresses else (),
            )
            for offer in json.loads(reply)
        ]
