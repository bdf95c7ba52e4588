"""`FormatRuleProposer`: an output-format rule from the declared output types, no model call."""

from __future__ import annotations

import typing
from dataclasses import dataclass
from typing import Literal

from skillopt_dsl.evaluate import Rollout
from skillopt_dsl.module import SkillModule
from skillopt_dsl.optimizers.proposers.base import (
    EditGroup,
    ProposalRequest,
    Proposer,
)
from skillopt_dsl.optimizers.proposers.common import (
    FORMAT_HEADING,
    bullet_under_heading,
    states,
)

_FORMAT_WORDS = ("format", "parse", "could not", "allowed answers", "one of", "no number", "empty")


@dataclass(kw_only=True)
class FormatRuleProposer(Proposer):
    """Adds one output-format rule, derived from the declared output types, when rollouts fail
    to parse or the metric's feedback complains about the format. No model is called."""

    name: str = "format-rule"

    def max_calls(self, batch_size: int) -> int:
        return 0  # no model call

    def propose(self, request: ProposalRequest) -> list[EditGroup]:
        failures = request.failures()
        broke = [e.id for e, r in failures if module_broke_format(request.module, r)]
        signals = broke
        if not signals:
            return []
        rule = module_format_rule(request.module)
        if rule is None or states(request.skill, rule):
            return []
        edit = bullet_under_heading(request.skill, FORMAT_HEADING, rule, "output format")
        why = f"{len(signals)} of {len(request.rollouts)} outputs broke the expected format"
        return [
            EditGroup(
                (edit,), self.name, failure_driven=True, rationale=why, addresses=tuple(broke)
            )
        ]


def module_broke_format(module: SkillModule, rollout: Rollout) -> bool:
    """The module's `output_broke_format` hook if it has one, else: the output did not parse,
    the feedback names the format, or the output says more than its one value."""
    hook = getattr(module, "output_broke_format", None)
    if callable(hook):
        return bool(hook(rollout))
    return (
        not rollout.prediction.ok
        or _mentions_format(rollout.feedback)
        or _says_more_than_its_answer(module, rollout)
    )


def _says_more_than_its_answer(module: SkillModule, rollout: Rollout) -> bool:
    """True for a failing output that parsed into its one field but says more than the value
    it was read as: "94 times 87 equals 7602." read as 94 is a format failure, not only a
    wrong number."""
    if len(module.output_fields) != 1 or not rollout.prediction.ok:
        return False
    (name,) = module.output_fields
    value = rollout.prediction.outputs[name]  # the declared field's (a module may add others)
    said = (rollout.prediction.raw or rollout.output).strip().rstrip(".").strip()
    return said.casefold() != str(value).strip().casefold()


def _mentions_format(feedback: str | None) -> bool:
    text = (feedback or "").casefold()
    return any(word in text for word in _FORMAT_WORDS)


def mentions_format(feedback: str | None) -> bool:
    """Whether a metric's feedback complains about the output's format."""
    return _mentions_format(feedback)


def module_format_rule(module: SkillModule) -> str | None:
    """The module's `output_format_rule` hook if it has one, else `format_rule`."""
    hook = getattr(module, "output_format_rule", None)
    if callable(hook):
        rule: str | None = hook()
        return rule
    return format_rule(module)


def format_rule(module: SkillModule) -> str:
    """A one-line output rule that follows from the module's declared output types."""
    if len(module.output_fields) > 1:
        keys = ", ".join(f'"{k}"' for k in module.output_fields)
        return f"Reply with one JSON object with the keys {keys} and nothing else."
    (spec,) = module.output_fields.values()
    annotation = spec.annotation
    if typing.get_origin(annotation) is Literal:
        options = ", ".join(str(a) for a in typing.get_args(annotation))
        return f"Reply with exactly one of: {options}. Write nothing else."
    if annotation in (int, float):
        return "Reply with the number only, in digits, with no words."
    if annotation is bool:
        return "Reply with yes or no only."
    return f"Reply with the {spec.name} only, on one line, with no explanation."


# -- reflection ------------------------------------------------------------------------------
