"""Beam: keep the `width` best candidate skills, expand each with proposals, keep the best again.

Each round, every parent in the beam is expanded `expansions` times: the parent is rolled out on
a training mini-batch drawn with `context.rng`, the proposers (shared with GradientText) read the
rollouts, and their edits are ranked and clipped to the learning rate with GradientText's own
`rank_edits` and `clip_to_budget`. Every child is scored on the validation set once (the
driver's evaluation cache is keyed by text hash). The survivors are chosen by mean validation
score (`selection="top-k"`) or, GEPA style, among the candidates that are best on at least one
validation example (`selection="pareto"`, parents sampled with `context.rng`).

At the end of each round the round's best candidate is submitted to the gate: the incumbent
changes only through `context.submit`, so the result never scores below the seed on validation.

The learning rate is a trust region around the incumbent: a round may move at most
`max(ceil(lr * tokens(incumbent)), lr_floor_tokens)` tokens away from the incumbent. A parent
already `d` tokens away may only change `budget - d` more (token edit distance obeys the triangle
inequality), so the candidate the gate sees never exceeds one step's budget.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from skillopt_dsl.driver import CompileContext, Proposal
from skillopt_dsl.errors import BudgetExceeded, UserInputError
from skillopt_dsl.optimizers.base import Optimizer, check_step_settings
from skillopt_dsl.optimizers.gradient_text import clip_to_budget, rank_edits
from skillopt_dsl.optimizers.proposers import (
    ProposalRequest,
    Proposer,
    RejectedCandidate,
    default_proposers,
    edit_key,
)
from skillopt_dsl.optimizers.state import CheckpointedState
from skillopt_dsl.skill import Skill, token_distance
from skillopt_dsl.types import Example

__all__ = ["Beam", "BeamMember", "BeamState", "pareto_front"]

logger = logging.getLogger(__name__)

Selection = Literal["top-k", "pareto"]


@dataclass(frozen=True)
class BeamMember:
    """A scored candidate: its text and its per-example validation scores."""

    text: str
    scores: dict[str, float]

    @property
    def mean(self) -> float:
        """Mean validation score."""
        return sum(self.scores.values()) / len(self.scores) if self.scores else 0.0

    @property
    def skill(self) -> Skill:
        """The candidate as a `Skill`."""
        return Skill(self.text)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready copy."""
        return {"text": self.text, "scores": dict(self.scores)}


@dataclass
class BeamState(CheckpointedState):
    """Checkpointed run state of Beam (JSON-serialisable)."""

    round: int = 0
    step: int = 0
    members: list[dict[str, Any]] = field(default_factory=list)
    rejected: list[dict[str, Any]] = field(default_factory=list)

    def beam(self) -> list[BeamMember]:
        """The members as typed records."""
        return [BeamMember(m["text"], dict(m["scores"])) for m in self.members]


def pareto_front(members: Sequence[BeamMember]) -> list[BeamMember]:
    """Members best on at least one validation example and dominated by no other member.

    The member with the best mean is always included (it may win no single example outright).
    Order follows `members`.
    """
    if not members:
        return []
    ids = list(members[0].scores)
    best = {i: max(m.scores.get(i, 0.0) for m in members) for i in ids}
    winners = [m for m in members if any(m.scores.get(i, 0.0) >= best[i] for i in ids)]
    front = [m for m in winners if not any(_dominates(o, m, ids) for o in winners)]
    top = max(members, key=lambda m: m.mean)
    return front if top in front else [top, *front]


def _dominates(a: BeamMember, b: BeamMember, ids: Sequence[str]) -> bool:
    pairs = [(a.scores.get(i, 0.0), b.scores.get(i, 0.0)) for i in ids]
    return all(x >= y for x, y in pairs) and any(x > y for x, y in pairs)


@dataclass(kw_only=True)
class Beam(Optimizer):
    """Beam search over skills, gated on validation (see the module docstring).

    Args:
        width: candidates kept (and expanded) each round.
        expansions: children proposed per parent per round, each from its own mini-batch.
        depth: rounds.
        proposers: where edits come from (default: format rules, worked examples, reflection).
        selection: "top-k" (best means) or "pareto" (per-example winners, sampled).
        lr: the share of the incumbent a round may change (a trust region, see above).
        lr_floor_tokens: the least a round may change, so short or empty seeds can grow.
        max_edits: cap on edits per child (None: only the learning rate limits).
        batch_size: training examples per expansion.
    """

    width: int = 4
    expansions: int = 2
    depth: int = 3
    proposers: Sequence[Proposer] = field(default_factory=default_proposers)
    selection: Selection = "top-k"
    lr: float = 0.3
    lr_floor_tokens: int = 128
    max_edits: int | None = None
    batch_size: int = 8
    name: str = "beam"

    def __post_init__(self) -> None:
        check_step_settings(
            self,
            lr=self.lr,
            max_edits=self.max_edits,
            at_least_one=("width", "expansions", "depth", "batch_size"),
        )
        if self.selection not in ("top-k", "pareto"):
            raise UserInputError(
                f"unknown selection {self.selection!r}; choose 'top-k' or 'pareto'"
            )

    def config(self) -> dict[str, Any]:
        return {
            "optimizer": self.name,
            "width": self.width,
            "expansions": self.expansions,
            "depth": self.depth,
            "selection": self.selection,
            "lr": self.lr,
            "lr_floor_tokens": self.lr_floor_tokens,
            "max_edits": self.max_edits,
            "batch_size": self.batch_size,
            "proposers": [p.name for p in self.proposers],
        }

    # -- the loop --------------------------------------------------------------------------
    def optimize(self, context: CompileContext) -> None:
        state = (
            BeamState.from_dict(context.optimizer_state) if context.optimizer_state else BeamState()
        )
        while state.round < self.depth:
            self._round(context, state)

    def _budget(self, incumbent: Skill) -> int:
        return max(math.ceil(self.lr * incumbent.token_count), self.lr_floor_tokens)

    def _round(self, context: CompileContext, state: BeamState) -> None:
        incumbent = context.incumbent
        budget = self._budget(incumbent)
        pool = {m.skill.hash: m for m in self._members_in_reach(context, state, budget)}
        try:
            for parent in self._parents(list(pool.values()), context):
                room = budget - token_distance(incumbent.text, parent.text)
                for _ in range(self.expansions if room > 0 else 0):
                    child = self._expand(context, state, parent, room)
                    if child is not None and child.skill.hash not in pool:
                        pool[child.skill.hash] = child
        except BudgetExceeded:
            # Children already scored on validation cost nothing more to submit: keep the best.
            self._close_round(context, state, pool, budget, finished=False)
            raise
        self._close_round(context, state, pool, budget, finished=True)

    def _close_round(
        self,
        context: CompileContext,
        state: BeamState,
        pool: dict[str, BeamMember],
        budget: int,
        *,
        finished: bool,
    ) -> None:
        index = state.round
        state.members = [m.to_dict() for m in self._survivors(list(pool.values()), context)]
        state.round += 1 if finished else 0
        self._submit_best(context, state, budget, index)

    def _members_in_reach(
        self, context: CompileContext, state: BeamState, budget: int
    ) -> list[BeamMember]:
        """The beam, minus members too far from the incumbent; the incumbent always leads."""
        incumbent = context.incumbent
        first = BeamMember(incumbent.text, context.incumbent_report.scores)
        kept = [
            m
            for m in state.beam()
            if m.text != incumbent.text and token_distance(incumbent.text, m.text) <= budget
        ]
        return [first, *kept]

    def _parents(self, members: list[BeamMember], context: CompileContext) -> list[BeamMember]:
        if self.selection == "top-k":
            return _top(members, self.width)
        front = pareto_front(members)
        if len(front) <= self.width:
            return front
        top = _top(front, 1)[0]
        rest = [m for m in front if m is not top]
        return [top, *context.rng.sample(rest, self.width - 1)]

    def _survivors(self, members: list[BeamMember], context: CompileContext) -> list[BeamMember]:
        if self.selection == "top-k":
            return _top(members, self.width)
        return pareto_front(members)

    def _expand(
        self, context: CompileContext, state: BeamState, parent: BeamMember, room: int
    ) -> BeamMember | None:
        """Propose one child of `parent` changing at most `room` tokens; score it on validation."""
        batch = _draw(context, self.batch_size)
        skill = parent.skill
        step = state.step
        state.step += 1
        rollouts = context.evaluate(skill, batch, label="train").records
        request = ProposalRequest(
            module=context.module,
            skill=skill,
            batch=batch,
            rollouts=rollouts,
            trainset=context.trainset,
            rejected=state.memory(),
            optimizer_lm=context.optimizer_lm,
            rng=context.rng,
            budget_tokens=room,
            step=step,
            epoch=state.round,
        )
        groups = [g for proposer in self.proposers for g in proposer.propose(request)]
        for note in request.notes:
            context.emit(note.pop("kind"), step=step, **note)
        rejected_keys = {edit_key(e) for c in state.memory() for e in c.edits}
        ranked = [r.edit for r in rank_edits(groups, rejected_keys)]
        candidate, kept, report = clip_to_budget(skill, ranked, room, self.max_edits)
        context.emit("edit_report", step=step, outcomes=[o.to_dict() for o in report.outcomes])
        if not kept:
            return None
        scores = context.evaluate(candidate, context.valset, label="val").scores
        child = BeamMember(candidate.text, scores)
        context.emit(
            "beam_child",
            step=step,
            round=state.round,
            parent_hash=skill.hash,
            candidate_hash=candidate.hash,
            val_score=child.mean,
        )
        if child.mean <= parent.mean:
            memory = RejectedCandidate(tuple(kept), child.mean - parent.mean, step, state.round)
            state.rejected.append(memory.to_dict())
        return child

    def _submit_best(
        self, context: CompileContext, state: BeamState, budget: int, round_index: int
    ) -> None:
        incumbent = context.incumbent
        best = _top(state.beam(), 1)[0]
        candidate = best.skill
        if candidate.hash == incumbent.hash or candidate.hash in context.scored:
            context.record_empty_step(
                step=state.step,
                epoch=round_index,
                kind="beam",
                lr_budget=self.lr,
                budget_tokens=budget,
                note="the round found nothing new to submit",
            )
            return
        change = token_distance(incumbent.text, candidate.text)
        longer = max(incumbent.token_count, candidate.token_count, 1)
        proposal = Proposal(
            candidate, state.step, round_index, "beam", self.lr, budget, change, change / longer
        )
        context.submit(proposal, lambda _decision: _state_json(state))


def _state_json(state: BeamState) -> dict[str, Any]:
    return state.to_dict()


def _top(members: Sequence[BeamMember], k: int) -> list[BeamMember]:
    """The `k` best by mean; ties keep the earlier member (stable sort)."""
    return sorted(members, key=lambda m: -m.mean)[:k]


def _draw(context: CompileContext, size: int) -> list[Example]:
    ordered = sorted(context.trainset, key=lambda e: e.id)
    return context.rng.sample(ordered, min(size, len(ordered)))
