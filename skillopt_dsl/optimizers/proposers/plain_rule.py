"""A reflection prompt a small optimizer model can follow: one rule, in plain text.

`ReflectiveProposer` asks for JSON edits; a 0.5B model often answers with prose, and SmolLM2-135M
with a chat reply. `PlainRuleProposer` asks for less: one sentence, shown the failing inputs, the
model's answers and the real answers side by side. The reply is checked before it becomes an
edit — first line only, bullets and `Rule:` prefixes removed, 4 to 40 words, no chat opener
("Sure", "Here is", "I ..."), nothing vacuous ("the model should give the correct answers"),
no copied answer (a gold answer that is not one of a declared label
set), not already in the skill — and a reply that fails is dropped and recorded as a
`rule_dropped` note saying why, never turned into an edit. The rule is added under a `## Rules`
heading. One model call per step; `GradientText(bench_after=...)` stops asking a model whose
rules never pass.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from dataclasses import dataclass

from skillopt_dsl.baselines import label_set
from skillopt_dsl.errors import ModelError
from skillopt_dsl.evaluate import Rollout
from skillopt_dsl.optimizers.proposers.base import EditGroup, ProposalRequest, Proposer
from skillopt_dsl.optimizers.proposers.common import (
    bullet_under_heading,
    gold_answer,
    module_gold_answer,
    states,
)
from skillopt_dsl.skill import Skill
from skillopt_dsl.types import Example

__all__ = ["RULES_HEADING", "PlainRuleProposer", "check_rule"]

RULES_HEADING = "Rules"

_SYSTEM = (
    "You write one rule for a task. Reply with the rule only: one sentence, "
    "no greeting, no explanation."
)
_CHAT_OPENERS = (
    "sure", "here", "i ", "i'm", "i am", "as an", "certainly", "of course", "great", "hello",
    "the model failed", "thank", "sorry", "okay", "ok,",
)  # fmt: skip
_VACUOUS = ("the model", "correct answer", "right answer")
"""Phrases of a rule about the rule-writing itself, not the task (SmolLM2: "The model should give
the correct answers to the question ...")."""
_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s*")
_PREFIX = re.compile(r"^\s*(?:new\s+)?rule\s*[:：-]\s*", re.IGNORECASE)


def check_rule(reply: str, skill: Skill, copied: set[str]) -> tuple[str | None, str]:
    """Clean `reply` into one rule; returns `(rule, "")`, or `(None, why it was refused)`.

    `copied` holds answers the rule must not contain (case-insensitively)."""
    line = next((ln for ln in reply.splitlines() if ln.strip()), "")
    rule = _PREFIX.sub("", _BULLET.sub("", line)).strip().strip("\"'`“”").strip()
    words = rule.split()
    lowered = rule.casefold()
    if not 4 <= len(words) <= 40:
        return None, f"not one rule of 4-40 words ({len(words)} words)"
    if lowered.startswith(_CHAT_OPENERS):
        return None, "a chat reply, not a rule"
    if any(phrase in lowered for phrase in _VACUOUS):
        return None, "says nothing the model can act on"
    leaked = sorted(a for a in copied if a.casefold() in lowered)
    if leaked:
        return None, f"copies an answer ({leaked[0]!r})"
    if states(skill, rule):
        return None, "already in the skill"
    return (rule if rule.endswith((".", "!", "?")) else f"{rule}."), ""


@dataclass(kw_only=True)
class PlainRuleProposer(Proposer):
    """Asks the optimizer model for one plain-text rule from the batch's failures, checks it,
    and adds it under `## Rules` (see the module docstring).

    Args:
        max_cases: failing examples shown to the model.
        max_tokens: the reply's token cap (one sentence needs few).
    """

    max_cases: int = 4
    max_tokens: int = 64
    name: str = "plain-rule"

    def propose(self, request: ProposalRequest) -> list[EditGroup]:
        failures = [
            (e, r)
            for e, r in request.failures()
            if module_gold_answer(request.module, e) is not None
        ][: self.max_cases]
        if not failures:
            return []
        messages = [
            {"role": "system", "content": _SYSTEM},
            {"role": "user", "content": _prompt(request, failures)},
        ]
        lm = request.optimizer_lm
        params = dataclasses.replace(lm.params, max_tokens=self.max_tokens)
        try:
            reply = lm.complete(messages, seed=request.step * 100 + 97, params=params).text
        except ModelError as exc:
            request.note("rule_dropped", reason=f"model error: {exc}", reply="")
            return []
        labels = {str(label) for label in (label_set(request.module) or ())}
        golds = {gold_answer(request.module, e) for e, _ in failures}
        copied = {g for g in golds if g not in labels and len(g) > 3}
        rule, why = check_rule(reply, request.skill, copied)
        if rule is None:
            request.note("rule_dropped", reason=why, reply=reply[:300])
            return []
        edit = bullet_under_heading(request.skill, RULES_HEADING, rule, "plain rule")
        why = f"a rule from {len(failures)} failures"
        return [EditGroup((edit,), self.name, True, why, tuple(e.id for e, _ in failures))]


def _prompt(request: ProposalRequest, failures: Sequence[tuple[Example, Rollout]]) -> str:
    cases = []
    for example, rollout in failures:
        text = request.module.render(Skill(""), example)[-1]["content"]
        cases.append(
            f"Input: {text[:400]}\n"
            f"Model's answer: {rollout.output[:200]}\n"
            f"Correct answer: {gold_answer(request.module, example)}"
        )
    task = request.module.description or request.module.name
    return (
        f"Task: {task}\n\nCurrent instructions:\n{request.skill.text or '(none)'}\n\n"
        "Cases the model got wrong:\n\n" + "\n\n".join(cases) + "\n\n"
        "Write one new rule, in one sentence, that would make the model give the correct "
        "answers. Do not copy the answers."
    )
