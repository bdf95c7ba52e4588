"""`DemonstrationsProposer`: worked examples from the training set, no model call."""

from __future__ import annotations

import random
from dataclasses import dataclass

from skillopt_dsl.optimizers.proposers.base import (
    EditGroup,
    ProposalRequest,
    Proposer,
    edit_key,
)
from skillopt_dsl.optimizers.proposers.common import (
    EXAMPLES_HEADING,
    existing_demos,
    has_heading,
    module_demo,
)
from skillopt_dsl.skill import Add, Edit, Replace, Skill, tokenize


@dataclass(kw_only=True)
class DemonstrationsProposer(Proposer):
    """Adds (or, once `max_demos` are present, swaps in) worked examples from the training set.

    Failing batch examples come first, then random training examples. Demos already in the skill,
    demos longer than the step's token budget, and edits already rejected are skipped. Each demo
    is its own edit, so the learning rate can keep some and clip the rest. No model is called.
    """

    per_step: int = 2
    max_demos: int = 6
    name: str = "demonstrations"

    def max_calls(self, batch_size: int) -> int:
        return 0  # no model call

    def propose(self, request: ProposalRequest) -> list[EditGroup]:
        rejected = {edit_key(e) for c in request.rejected for e in c.edits}
        failing = [e for e, _ in request.failures()]
        others = [e for e in request.trainset if e not in failing]
        request.rng.shuffle(others)
        planner = _DemoPlanner(request.skill, self.max_demos, request.rng)
        edits: list[Edit] = []
        by_id = {e.id: r for e, r in zip(request.batch, request.rollouts, strict=True)}
        for example in failing + others:
            demo = module_demo(request.module, example, by_id.get(example.id))
            if demo is None or demo in request.skill.text:
                continue
            if len(tokenize(demo)) > request.budget_tokens:
                continue
            edit = planner.edit_for(demo)
            if edit is None or edit_key(edit) in rejected:
                continue
            planner.commit(edit)
            edits.append(edit)
            if len(edits) >= self.per_step:
                break
        if not edits:
            return []
        return [
            EditGroup(
                tuple(edits), self.name, failure_driven=bool(failing), rationale="worked examples"
            )
        ]


class _DemoPlanner:
    """Plans demo edits in order: create the section, then add under it, then swap."""

    def __init__(self, skill: Skill, max_demos: int, rng: random.Random) -> None:
        self.has_section = has_heading(skill, EXAMPLES_HEADING)
        self.existing = existing_demos(skill)
        self.count = len(self.existing)
        self.max_demos, self.rng = max_demos, rng

    def edit_for(self, demo: str) -> Edit | None:
        if self.count >= self.max_demos:
            if not self.existing:
                return None
            old = self.existing[self.rng.randrange(len(self.existing))]
            return Replace(old=old, new=demo, rationale="swap a worked example")
        if not self.has_section:
            return Add(
                after=None, text=f"## {EXAMPLES_HEADING}\n\n{demo}", rationale="worked example"
            )
        return Add(after=EXAMPLES_HEADING, text=demo, rationale="worked example")

    def commit(self, edit: Edit) -> None:
        if isinstance(edit, Replace):
            self.existing.remove(edit.old)
            return
        self.has_section, self.count = True, self.count + 1
