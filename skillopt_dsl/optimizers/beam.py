"""Beam: keep the `width` best candidate skills, expand each with proposals, keep the best again.

Candidates are chosen on training data only. At the start, a seeded selection split
(`selection_fraction` of the trainset, `RunView.selection_split`, recorded in the run's events)
is carved off the training set: parents are rolled out on mini-batches drawn from the rest, and
every child is scored on the selection split once (the evaluation cache is keyed by text hash).
The survivors are chosen by mean selection score (`selection="top-k"`) or, GEPA style, among
the candidates that are best on at least one selection example (`selection="pareto"`, parents
sampled with `view.rng`). The gate's validation examples are never used to choose.

Each expansion runs the screened search step GradientText runs (`search.SearchStep`, which it
holds: the proposers through `ProposerRuns`, each proposal fitted, tried alone on the expansion's mini-batch, its
evidence summed across re-proposals, struck at `screen_strikes`; one memory, `SearchMemory`),
and a survivor is scored on the selection split while the round's reserve for the gate allows.

At the end of each round the round's best candidate not yet judged is submitted to the door:
the gate alone decides on validation, so the result never scores below the seed there. A
rejected or duplicate verdict is no progress: its edits are remembered as rejected.

The learning rate is a trust region around the incumbent: a round may move at most
`max(ceil(lr * tokens(incumbent)), lr_floor_tokens)` tokens away from the incumbent. A parent
already `d` tokens away may only change `budget - d` more (token edit distance is a metric, so
the triangle inequality holds), and the door checks the submitted candidate against the same
budget.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Literal, NotRequired, Self, TypedDict

from skillopt_dsl.driver import RunView, SelectionSplit
from skillopt_dsl.errors import BudgetExceeded, UserInputError
from skillopt_dsl.json_types import JSONObject
from skillopt_dsl.optimizers.base import Optimizer, Stop, check_step_settings
from skillopt_dsl.optimizers.proposers import Proposer, default_proposers
from skillopt_dsl.optimizers.search import (
    Fitted,
    ProposerRuns,
    SearchStep,
    draw_examples,
    keeps_reserve,
    proposal_request,
)
from skillopt_dsl.optimizers.state import CheckpointedState, as_json, stored
from skillopt_dsl.skill import Edit, Skill, parse_edits, token_distance

__all__ = ["Beam", "BeamMember", "BeamState", "pareto_front"]

logger = logging.getLogger(__name__)

Selection = Literal["top-k", "pareto"]


class BeamMemberRecord(TypedDict):
    """A `BeamMember` as checkpoints hold it (`edits` may be absent in an older one)."""

    text: str
    scores: dict[str, float]
    edits: NotRequired[list[JSONObject]]


@dataclass(frozen=True)
class BeamMember:
    """A scored candidate: its text, its per-example selection scores, and the edits that
    made it from its parent."""

    text: str
    scores: dict[str, float]
    edits: tuple[Edit, ...] = ()

    @property
    def mean(self) -> float:
        """Mean selection score."""
        return sum(self.scores.values()) / len(self.scores) if self.scores else 0.0

    @property
    def skill(self) -> Skill:
        """The candidate as a `Skill`."""
        return Skill(self.text)

    def to_dict(self) -> BeamMemberRecord:
        """JSON-ready copy."""
        edits = [e.model_dump() for e in self.edits]
        return BeamMemberRecord(text=self.text, scores=dict(self.scores), edits=edits)

    @classmethod
    def from_dict(cls, data: BeamMemberRecord) -> BeamMember:
        """Rebuild from `to_dict` output."""
        return cls(data["text"], dict(data["scores"]), tuple(parse_edits(data.get("edits", []))))


@dataclass
class BeamState(CheckpointedState):
    """Checkpointed run state of Beam (JSON-serialisable); the search's memory (evidence, the
    rejected and the struck, screen strikes and statistics, proposer counters, the step
    counter) is the run's (`RunView.memory`)."""

    round: int = 0
    members: list[BeamMember] = field(default_factory=list)
    judged: list[str] = field(default_factory=list)
    empty_rounds: int = 0
    reserve: int = 0
    """The calls the current round leaves for the gate decision after it (a whole decision, or
    in the budget's tail its first look; 0 without a call budget)."""

    def beam(self) -> list[BeamMember]:
        """The members (a copy of the list)."""
        return list(self.members)

    def to_dict(self) -> JSONObject:
        """JSON-ready copy, in the shape checkpoints have always had."""
        return {**super().to_dict(), "members": [as_json(m.to_dict()) for m in self.members]}

    @classmethod
    def from_dict(cls, data: JSONObject) -> Self:
        """Rebuild from `to_dict` output."""
        members = [BeamMember.from_dict(m) for m in stored(data, "members", BeamMemberRecord)]
        return replace(super().from_dict(data), members=members)


def pareto_front(members: Sequence[BeamMember]) -> list[BeamMember]:
    """Members best on at least one selection example and dominated by no other member.

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


IDLE_ROUNDS = 2
"""Rounds in a row that spend no call and submit nothing after which a search stops with
"plateau", whatever its budget: every rollout they asked for was cached and no proposer was
asked anything new (a training set smaller than a mini-batch, proposers with nothing more to
say), so the rounds after them would spend nothing either and the budget would never end them."""

_PROPOSAL_CALLS = 4
"""Model calls one expansion's proposers are assumed to spend (reflection and its retry, a
little more), when reserving the budget for a gate decision."""


@dataclass(kw_only=True)
class Beam(Optimizer):
    """Beam search over skills, chosen on a selection split, gated on validation (module doc).

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
        selection_fraction: share of the trainset carved off (seeded by the run's seed) to
            score and choose candidates on; the rest feeds the mini-batches.
        until_budget: with a call budget, keep going past `depth` rounds while the budget pays
            for an expansion and a gate decision.
        plateau: stop after this many consecutive rounds with nothing better than the
            incumbent to submit (None, the default: a call budget is spent to its end;
            without one, `depth` ends the run). Whatever it is, `IDLE_ROUNDS` rounds in a row
            that spend no call and submit nothing stop the search with "plateau".
        screen_strikes: the screen failures after which a proposal proposed again is no
            longer screened (as GradientText's: one unlucky mini-batch does not end it).
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
    selection_fraction: float = 0.25
    until_budget: bool = True
    plateau: int | None = None
    screen_strikes: int = 2
    name: str = "beam"
    search_step: SearchStep = field(init=False, repr=False, compare=False)
    """The search step it holds, built from `max_edits` and `screen_strikes`."""

    def __post_init__(self) -> None:
        counts = ("width", "expansions", "depth", "batch_size", "screen_strikes")
        check_step_settings(self, lr=self.lr, max_edits=self.max_edits, at_least_one=counts)
        if self.selection not in ("top-k", "pareto"):
            raise UserInputError(
                f"unknown selection {self.selection!r}; choose 'top-k' or 'pareto'"
            )
        if self.plateau is not None and self.plateau < 1:
            raise UserInputError(f"plateau must be >= 1 or None, got {self.plateau}")
        if not 0 < self.selection_fraction < 1:
            raise UserInputError(
                f"selection_fraction must be in (0, 1), got {self.selection_fraction}"
            )
        self.search_step = SearchStep(max_edits=self.max_edits, screen_strikes=self.screen_strikes)

    def planned_decisions(
        self, n_train: int, *, max_calls: int | None = None, validation_size: int | None = None
    ) -> int | None:
        """One submission per round: `depth` rounds, or under a call budget what it pays for."""
        if max_calls is None or not validation_size or not self.until_budget:
            return self.depth
        selection = max(1, round(self.selection_fraction * n_train))
        per_round = validation_size + self.width * self.expansions * (
            2 * self.batch_size + selection + _PROPOSAL_CALLS
        )
        return max(1, (max_calls - validation_size) // per_round)

    def config(self) -> JSONObject:
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
            "selection_fraction": self.selection_fraction,
            "until_budget": self.until_budget,
            "plateau": self.plateau,
            "screen_strikes": self.screen_strikes,
            "proposers": [p.name for p in self.proposers],
        }

    # -- the loop --------------------------------------------------------------------------
    def optimize(self, view: RunView) -> Stop | None:
        saved = view.optimizer_state
        state = BeamState.from_dict(saved) if saved else BeamState()
        split = view.selection_split(self.selection_fraction)
        idle = 0  # rounds in a row that spent no call and submitted nothing
        while state.round < self.depth or (self.until_budget and view.calls_left() is not None):
            if view.incumbent_is_perfect():  # no candidate can beat it on validation
                return Stop("perfect", round=state.round)
            if not view.can_accept():  # no decision could accept: rounds would only spend calls
                return Stop("significance", round=state.round)
            calls, judged = view.usage().calls, len(state.judged)
            if not self._round(view, state, split):
                raise BudgetExceeded(
                    f"{view.calls_left()} calls left: enough for a gate decision on "
                    f"{view.validation_size} validation examples, not for another expansion"
                )
            quiet = view.usage().calls == calls and len(state.judged) == judged
            idle = idle + 1 if quiet else 0
            if idle >= IDLE_ROUNDS:  # nothing new was asked: the rounds after would not either
                return Stop("plateau", round=state.round, idle_rounds=idle)
            if self.plateau is not None and state.empty_rounds >= self.plateau:
                return Stop("plateau", round=state.round)
        return None

    def _round(self, view: RunView, state: BeamState, split: SelectionSplit) -> bool:
        """One round: expand the beam while the calls left pay for an expansion and the gate
        decision after it, then submit the round's best new member to the gate. Once a whole
        decision no longer fits after an expansion, the round ends there (its best child gets a
        whole decision) and the rounds after it are the budget's tail, reserving only the
        decision's first look. False when the calls left paid for no expansion at all."""
        if not self._can_expand(view, split, first_look=True):
            return False
        incumbent = view.incumbent
        budget = view.step_budget(self.lr)
        pool = {m.skill.hash: m for m in self._members_in_reach(view, state, split, budget)}
        # after the incumbent's selection scores (paid once per incumbent): does a whole
        # decision still fit after an expansion, or is this the budget's tail?
        tail = not self._can_expand(view, split)
        state.reserve = 0 if view.calls_left() is None else view.decision_calls(first_look=tail)
        expanded = 0
        try:
            for parent in self._parents(list(pool.values()), view):
                room = budget - token_distance(incumbent.text, parent.text)
                for _ in range(self.expansions if room > 0 else 0):
                    if not self._can_expand(view, split, first_look=tail):
                        break
                    expanded += 1
                    for child in self._expand(view, state, split, parent, room):
                        pool.setdefault(child.skill.hash, child)
        except BudgetExceeded:
            # Submit the best child found so far (the gate may still afford it), then stop.
            self._close_round(view, state, pool, finished=False)
            raise
        self._close_round(view, state, pool, finished=True)
        return expanded > 0

    def _can_expand(
        self, view: RunView, split: SelectionSplit, *, first_look: bool = False
    ) -> bool:
        """Whether the call budget pays for one more expansion (its mini-batch and the screen
        on it, a few proposal calls, its selection score) and still for a gate decision, every
        rollout at the calls it was measured to cost (`RunView.calls_per_rollout`: an agent
        episode or a DSPy program makes several). Without this reserve a small budget is
        spent on children the gate can never judge. `first_look`: the reserve is the next
        decision's first look only, as in GradientText's tail (`_round` asks for it once a whole
        decision no longer fits after an expansion): the gate accepts there only at a look the
        calls pay for, and stops the decision (a rejection) at the first look they do not."""
        left = view.calls_left()
        if left is None:
            return True
        rollouts = 2 * self.batch_size + len(split.select)
        expansion = math.ceil(rollouts * view.calls_per_rollout()) + _PROPOSAL_CALLS
        return left >= expansion + view.decision_calls(first_look=first_look)

    def _close_round(
        self, view: RunView, state: BeamState, pool: dict[str, BeamMember], *, finished: bool
    ) -> None:
        index = state.round
        state.members = self._survivors(list(pool.values()), view)
        state.round += 1 if finished else 0
        self._submit_best(view, state, index)

    def _members_in_reach(
        self, view: RunView, state: BeamState, split: SelectionSplit, budget: int
    ) -> list[BeamMember]:
        """The beam, minus members too far from the incumbent; the incumbent always leads."""
        incumbent = view.incumbent
        scores = view.evaluate(incumbent, split.select, label="selection").scores
        kept = [
            m
            for m in state.beam()
            if m.text != incumbent.text and token_distance(incumbent.text, m.text) <= budget
        ]
        return [BeamMember(incumbent.text, scores), *kept]

    def _parents(self, members: list[BeamMember], view: RunView) -> list[BeamMember]:
        if self.selection == "top-k":
            return _top(members, self.width)
        front = pareto_front(members)
        if len(front) <= self.width:
            return front
        top = _top(front, 1)[0]
        rest = [m for m in front if m is not top]
        return [top, *view.rng.sample(rest, self.width - 1)]

    def _survivors(self, members: list[BeamMember], view: RunView) -> list[BeamMember]:
        if self.selection == "top-k":
            return _top(members, self.width)
        return pareto_front(members)

    def _expand(
        self,
        view: RunView,
        state: BeamState,
        split: SelectionSplit,
        parent: BeamMember,
        room: int,
    ) -> list[BeamMember]:
        """Propose children of `parent`, one per proposal (edit group), each changing at most
        `room` tokens, through the screened search step GradientText runs (`search.SearchStep`):
        each is tried alone on the expansion's mini-batch (failing examples first; it must fix
        more than it breaks), struck when its evidence rules it out (blocked at its
        `screen_strikes`-th failure), and while the round's reserve for the gate allows, a
        survivor is scored on the selection split. A child no better than its parent there is
        remembered as rejected."""
        batch = draw_examples(view, split.fit, self.batch_size)
        skill = parent.skill
        memory = view.memory
        memory.step += 1
        rollouts = view.evaluate(skill, batch, label="train").records
        request = proposal_request(view, memory, skill, batch, rollouts, room, epoch=state.round)
        runs = ProposerRuns(bench_after=None, retry_every=1)
        search = self.search_step
        groups = search.propose(view, runs, self.proposers, request)
        price = math.ceil((len(batch) + len(split.select)) * view.calls_per_rollout())
        blocked = memory.blocked_keys()
        children: list[BeamMember] = []
        for group in groups:
            fitted, _ = search.fit(view, skill, group, room)
            if fitted is None or fitted.key in blocked:
                continue
            if not keeps_reserve(view, price, state.reserve):
                break  # the calls left are the gate's: proposed again, it is tried again
            blocked.add(fitted.key)
            tried = search.try_alone(view, fitted, batch, rollouts, epoch=state.round)
            if tried.struck:
                continue  # gained nothing, or ruled out: proposed again, tried again unless blocked
            child = self._score_child(view, state, split, parent, fitted)
            if child is not None:
                children.append(child)
        return children

    def _score_child(
        self, view: RunView, state: BeamState, split: SelectionSplit, parent: BeamMember,
        fitted: Fitted,
    ) -> BeamMember | None:  # fmt: skip
        """Score a screened child on the selection split; remember it when it is no better."""
        candidate = fitted.candidate
        scores = view.evaluate(candidate, split.select, label="selection").scores
        child = BeamMember(candidate.text, scores, fitted.kept)
        view.emit(
            "beam_child",
            step=view.memory.step - 1,
            round=state.round,
            parent_hash=parent.skill.hash,
            candidate_hash=candidate.hash,
            selection_score=child.mean,
        )
        if child.mean <= parent.mean:
            view.memory.remember(fitted.kept, child.mean - parent.mean, epoch=state.round)
            return None
        return child

    def _submit_best(self, view: RunView, state: BeamState, round_index: int) -> None:
        incumbent, beam = view.incumbent, state.beam()
        floor = next((m.mean for m in beam if m.text == incumbent.text), -1.0)
        fresh = [
            m
            for m in beam
            if m.mean > floor and m.text != incumbent.text and m.skill.hash not in state.judged
        ]
        if not fresh:
            state.empty_rounds += 1
            view.record_empty_step(
                step=view.memory.step,
                epoch=round_index,
                kind="beam",
                lr=self.lr,
                note="the round found nothing better than the incumbent to submit",
                state=state.to_dict(),
            )
            return
        state.empty_rounds = 0
        best = _top(fresh, 1)[0]
        state.judged.append(best.skill.hash)
        verdict = view.submit(
            best.skill, lr=self.lr, step=view.memory.step, epoch=round_index, kind="beam"
        )
        if not verdict.accepted and best.edits:  # rejected, duplicate or refused
            view.memory.remember(best.edits, verdict.delta, epoch=round_index)
        view.commit(state.to_dict())


def _top(members: Sequence[BeamMember], k: int) -> list[BeamMember]:
    """The `k` best by mean; ties keep the earlier member (stable sort)."""
    return sorted(members, key=lambda m: -m.mean)[:k]
