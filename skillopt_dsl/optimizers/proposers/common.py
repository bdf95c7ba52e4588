"""Helpers the shipped proposers share: worked examples and gold answers as the model should
write them, and rules placed under a heading of the skill."""

from __future__ import annotations

import json

from skillopt_dsl.evaluate import Rollout
from skillopt_dsl.module import SkillModule
from skillopt_dsl.skill import Add, Edit, Skill
from skillopt_dsl.types import Example

EXAMPLES_HEADING = "Examples"


def render_demo(module: SkillModule, example: Example) -> str:
    """A worked example as it appears in the skill: the input, then the gold answer."""
    user = module.render(Skill(""), example)[-1]["content"]
    return f"Input: {user}\nAnswer: {gold_answer(module, example)}"


def gold_answer(module: SkillModule, example: Example) -> str:
    """The example's expected output, rendered the way the model should write it."""
    if len(module.output_fields) == 1:
        (name,) = module.output_fields
        value = example.labels.get(name, next(iter(example.labels.values()), ""))
        if isinstance(value, (list, tuple)) and value:
            value = value[0]
        return str(value)
    return json.dumps({k: example.labels.get(k) for k in module.output_fields}, ensure_ascii=False)


def module_gold_answer(module: SkillModule, example: Example) -> str | None:
    """The module's `labelled_answer` hook if it has one (None: the labels give no answer for
    this module's output), else `gold_answer`."""
    hook = getattr(module, "labelled_answer", None)
    if callable(hook):
        answer: str | None = hook(example)
        return answer
    return gold_answer(module, example)


def module_demo(module: SkillModule, example: Example, rollout: Rollout | None) -> str | None:
    """The module's `worked_example` hook if it has one, else `render_demo`."""
    hook = getattr(module, "worked_example", None)
    if callable(hook):
        demo: str | None = hook(example, rollout)
        return demo
    return render_demo(module, example)


def bullet_under_heading(skill: Skill, heading: str, rule: str, rationale: str) -> Edit:
    """An edit adding `- rule` at the end of the skill's `heading` section (found in any case,
    and named as the skill spells it), creating the section if the skill has none."""
    title = _heading_title(skill, heading)
    if title is not None:
        return Add(after=title, text=f"- {rule}", rationale=rationale)
    return Add(after=None, text=f"## {heading}\n\n- {rule}", rationale=rationale)


def states(skill: Skill, text: str) -> bool:
    """True when `skill` already says `text` (case and line breaks aside): a rule it states
    is never proposed again."""
    wanted = " ".join(text.split()).casefold()
    return bool(wanted) and wanted in " ".join(skill.text.split()).casefold()


def _heading_title(skill: Skill, title: str) -> str | None:
    """The skill's own spelling of the heading `title` (compared case-insensitively), or None."""
    for section in skill.sections():
        if (section.heading or "").strip().casefold() == title.casefold():
            return (section.heading or "").strip()
    return None


def has_heading(skill: Skill, title: str) -> bool:
    return _heading_title(skill, title) is not None


def existing_demos(skill: Skill) -> list[str]:
    for section in skill.sections():
        if (section.heading or "").strip().casefold() == EXAMPLES_HEADING.casefold():
            blocks = [b.strip() for b in section.text.split("\n\n")]
            return [b for b in blocks if b.startswith("Input:")]
    return []


# -- format rules ----------------------------------------------------------------------------

FORMAT_HEADING = "Output format"
