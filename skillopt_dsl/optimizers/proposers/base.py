"""The proposer contract: `Proposer`, the `ProposalRequest` it reads, the `EditGroup`s it
returns; the rejected-proposal records (`RejectedCandidate`, `edit_key`) are the search
memory's (`skillopt_dsl.search_memory`), re-exported here."""

from __future__ import annotations

import logging
import random
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field

from skillopt_dsl.evaluate import Rollout
from skillopt_dsl.json_types import JSONObject, JSONValue
from skillopt_dsl.lm import LM
from skillopt_dsl.module import SkillModule
from skillopt_dsl.search_memory import RejectedCandidate, RejectedRecord, edit_key
from skillopt_dsl.skill import Edit, Skill
from skillopt_dsl.types import Example

__all__ = [
    "EditGroup",
    "ProposalRequest",
    "Proposer",
    "RejectedCandidate",
    "RejectedRecord",
    "edit_key",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class EditGroup:
    """Edits one proposer drew from one group of rollouts."""

    edits: tuple[Edit, ...]
    source: str
    failure_driven: bool
    rationale: str = ""
    addresses: tuple[str, ...] = ()
    """Ids of the batch's failing examples this group was written to fix (empty: not said).
    The screen scores a proposal on these first and drops it when it fixes none of them."""


@dataclass
class ProposalRequest:
    """Everything a proposer may read for one step (one context object, not a parameter list)."""

    module: SkillModule
    skill: Skill
    batch: Sequence[Example]
    rollouts: Sequence[Rollout]
    trainset: Sequence[Example]
    rejected: Sequence[RejectedCandidate]
    optimizer_lm: LM
    rng: random.Random
    budget_tokens: int
    step: int = 0
    epoch: int = 0
    notes: list[JSONObject] = field(default_factory=list)
    """The notes of this step (`note`): each its `kind` and fields, emitted as an event."""

    def note(self, kind: str, **payload: JSONValue) -> None:
        """Record something worth keeping in the run's events (a dropped group, say): an
        event of kind `kind` with JSON fields `payload`."""
        self.notes.append({"kind": kind, **payload})

    def note_events(self) -> list[tuple[str, JSONObject]]:
        """The notes as events: each one's kind and its other fields."""
        return [(str(n["kind"]), {k: v for k, v in n.items() if k != "kind"}) for n in self.notes]

    def failures(self, threshold: float = 1.0) -> list[tuple[Example, Rollout]]:
        """The batch's (example, rollout) pairs scoring below `threshold`."""
        return [
            (e, r) for e, r in zip(self.batch, self.rollouts, strict=True) if r.score < threshold
        ]

    def successes(self, threshold: float = 1.0) -> list[tuple[Example, Rollout]]:
        """The batch's pairs scoring at least `threshold`."""
        return [
            (e, r) for e, r in zip(self.batch, self.rollouts, strict=True) if r.score >= threshold
        ]


class Proposer(ABC):
    """Turns a `ProposalRequest` into edit groups. See the module docstring for the contract."""

    name: str = "proposer"

    @abstractmethod
    def propose(self, request: ProposalRequest) -> list[EditGroup]:
        """Return zero or more edit groups; never raise for one bad group."""

    def max_calls(self, batch_size: int) -> int:
        """The most optimizer-model calls one `propose` on a batch of `batch_size` rollouts
        makes (what a search prices a proposer at when the calls left are few; retries
        included). Default: one; a proposer that calls no model returns 0."""
        return 1

    def tidy(self, skill: Skill) -> Skill:
        """The composed candidate, tidied: when several proposals made on the same text are
        applied one after another, a proposer whose edits then stack (two clauses where one is
        meant) merges them here, before the door and the gate see the candidate. Default: the
        skill unchanged."""
        return skill
