"""The search memory: one typed, versioned record the run owns (docs/concepts.md, "Search").

What a screened search remembers, whichever optimizer runs it (GradientText, Bundle, Beam, each
part of a composite such as `HandOff`). The run owns it: the driver builds it (seeded by
`CompileSettings.remembered`), checkpoints it beside the optimizer's own state
(checkpoint.json's `memory`), restores it on resume, and hands the same object to every part of
a composite search through `RunView.memory`; `compile`'s report reads its `rejected` from the
run. No optimizer state declares these fields:

- `step`: the search steps begun so far (a step's events carry `step - 1`); the parts of a
  composite search number their steps on from one another;
- `rejected`: the memory proper, proposals never screened again;
- `struck`: proposals that failed a screen but may be screened again when proposed again, until
  their `screen_strikes`-th failure at which their evidence rules them out (a failed screen
  alone does not block, whether or not the proposal names failures: `SearchStep.try_alone`);
  the proposers are told about both lists (`told`);
- `remembered`: proposals rejected in earlier runs (a Sleep night's earlier nights): told to the
  proposers, and any edit equal to one of theirs (`edit_key`) is dropped before it is screened;
- `evidence`: every screen of a proposal summed per proposal key (`EditEvidence`), across
  re-proposals;
- `screen_strikes`: failures per proposal key; `screen_stats`: screens and passes per stage and
  the calls they spent;
- `proposer_stats`, `proposer_asked`: per proposer, its counters and the fingerprint of the last
  request it called a model for.

A checkpoint written before the record had a version held these fields in the optimizer's own
state (under `parts/...` for a composite); `SearchMemory.from_legacy` reads them from there.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from typing import NotRequired, Protocol, Self, TypedDict, cast

from skillopt_dsl.errors import RunDirError
from skillopt_dsl.evidence import BACKGROUND_CHANGE
from skillopt_dsl.json_types import JSONObject
from skillopt_dsl.skill import Edit, parse_edits

__all__ = [
    "DROP_ODDS",
    "MEMORY_VERSION",
    "EditEvidence",
    "MemoryRecord",
    "RejectedCandidate",
    "RejectedRecord",
    "SearchMemory",
    "edit_key",
    "group_key",
]

MEMORY_VERSION = 1
"""The version `SearchMemory.to_dict` writes (a record without one is read as legacy)."""

DROP_ODDS = 4.0
"""A proposal without a net gain is dropped once its fixes and breaks are this many times likelier
for a useless edit than for one with the gain the gate certifies (`EditEvidence.rules_out`); with
fewer moved answers than that, the evidence cannot tell, and the proposal is not blocked (on
trial where its screen gained; screened again if proposed again where it did not)."""


class RejectedRecord(TypedDict):
    """A `RejectedCandidate` as checkpoints hold it."""

    edits: list[JSONObject]
    delta: float
    step: int
    epoch: int


@dataclass(frozen=True)
class RejectedCandidate:
    """A candidate the gate turned down: its edits and its validation delta (the memory)."""

    edits: tuple[Edit, ...]
    delta: float
    step: int
    epoch: int

    def to_dict(self) -> RejectedRecord:
        """JSON-ready form, as kept in checkpoints."""
        return cast(RejectedRecord, {**asdict(self), "edits": [e.model_dump() for e in self.edits]})

    @classmethod
    def from_dict(cls, data: RejectedRecord) -> RejectedCandidate:
        """Rebuild from `to_dict` output."""
        return cls(tuple(parse_edits(data["edits"])), data["delta"], data["step"], data["epoch"])


def edit_key(edit: Edit) -> str:
    """A normalised identity for an edit (whitespace-collapsed, case-folded), for dedup and memory."""
    values = edit.model_dump(exclude={"rationale"})
    normalised = {k: " ".join(str(v).split()).casefold() for k, v in values.items()}
    return json.dumps(normalised, sort_keys=True)


def group_key(edits: Sequence[Edit]) -> str:
    """A proposal's identity for the memory: its edits' keys, in order."""
    return "\n".join(edit_key(e) for e in edits)


class ScreenCounts(Protocol):
    """What one screen counted (`screening.ScreenResult`)."""

    @property
    def fixes(self) -> int: ...
    @property
    def breaks(self) -> int: ...
    @property
    def net(self) -> float: ...
    @property
    def scored(self) -> int: ...


@dataclass(frozen=True)
class EditEvidence:
    """What every screen of one proposal (an edit group, by its key) has shown so far, summed
    over the steps that proposed it again and over its confirmations: examples it fixed and
    broke against its base, the net score difference, examples scored and screens run.

    The screen is sized to this evidence (docs/concepts.md, "Search"): a proposal is dropped
    when it says the proposal hurts or cannot help (`rules_out`), it joins a
    working candidate when its gain is as clear as its batches can show, and where the
    evidence cannot tell (a small or noisy batch) the gate decides.
    """

    fixes: int = 0
    breaks: int = 0
    net: float = 0.0
    scored: int = 0
    screens: int = 0

    def plus(self, result: ScreenCounts) -> EditEvidence:
        """This evidence with one more screen's result added."""
        return EditEvidence(
            self.fixes + result.fixes,
            self.breaks + result.breaks,
            self.net + result.net,
            self.scored + result.scored,
            self.screens + 1,
        )

    def odds(self, effect: float, background: float = BACKGROUND_CHANGE) -> float:
        """How much likelier these screens are for an edit that helps by `effect` (a share of
        the examples) than for a useless one, when any rewording moves `background` of the
        answers at random, half each way (the noise model of the gate's pre-flight,
        `evidence.BACKGROUND_CHANGE`). Per example scored, a useless edit fixes and breaks with
        probability b/2 each and leaves the answer with 1 - b; a helpful one fixes with
        b/2 + effect and leaves it with 1 - b - effect. A fix is evidence for it, an unmoved
        answer against; few examples give odds near 1: the evidence cannot tell."""
        unmoved = max(self.scored - self.fixes - self.breaks, 0)
        keep = max(1 - background - effect, 1e-9) / (1 - background)
        return ((background / 2 + effect) / (background / 2)) ** self.fixes * keep**unmoved

    def rules_out(self, effect: float | None) -> bool:
        """Whether the evidence says the edit hurts or cannot help by `effect`: no net gain,
        and either two breaks more than fixes or odds against a helpful edit of `DROP_ODDS` to
        1 or more (None: the gate runs no test; any edit without a net gain is out)."""
        if self.net > 0:
            return False
        if effect is None or self.net <= -2:
            return True
        return self.odds(effect) <= 1 / DROP_ODDS

    @property
    def rate(self) -> float:
        """Net gain per example scored (0.0 before any)."""
        return self.net / self.scored if self.scored else 0.0

    def to_dict(self) -> dict[str, float]:
        """JSON-ready copy (checkpointed)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, float]) -> EditEvidence:
        """The evidence `to_dict` wrote."""
        counts = {k: int(data[k]) for k in ("fixes", "breaks", "scored", "screens")}
        return cls(**counts, net=float(data["net"]))


class MemoryRecord(TypedDict):
    """A `SearchMemory` as checkpoint.json holds it (`memory`)."""

    version: int
    step: int
    rejected: list[RejectedRecord]
    struck: list[RejectedRecord]
    remembered: NotRequired[list[RejectedRecord]]
    evidence: dict[str, dict[str, float]]
    screen_strikes: dict[str, int]
    screen_stats: dict[str, int]
    proposer_stats: dict[str, dict[str, int]]
    proposer_asked: dict[str, str]


@dataclass
class SearchMemory:
    """The screened search's memory, owned by the run and shared by every optimizer (and every
    part of a composite one) that searches in it (module docstring)."""

    step: int = 0
    rejected: list[RejectedCandidate] = field(default_factory=list)
    struck: list[RejectedCandidate] = field(default_factory=list)
    remembered: list[RejectedCandidate] = field(default_factory=list)
    evidence: dict[str, EditEvidence] = field(default_factory=dict)
    screen_strikes: dict[str, int] = field(default_factory=dict)
    screen_stats: dict[str, int] = field(default_factory=dict)
    proposer_stats: dict[str, dict[str, int]] = field(default_factory=dict)
    proposer_asked: dict[str, str] = field(default_factory=dict)

    # -- the rejected and the struck -------------------------------------------------------
    def remember(
        self, edits: Sequence[Edit], delta: float, *, epoch: int, block: bool = True
    ) -> None:
        """Remember one proposal (an edit group) as rejected: the proposers read it (they are
        asked not to propose it again); a `block`ed one joins the memory proper and is never
        screened again, an unblocked one is only told (`struck`)."""
        key = group_key(edits)
        if key in self.blocked_keys():
            return
        memory = RejectedCandidate(tuple(edits), delta, self.step, epoch)
        self.struck = [r for r in self.struck if group_key(r.edits) != key]
        (self.rejected if block else self.struck).append(memory)

    def strike(
        self, edits: Sequence[Edit], delta: float, *, epoch: int, limit: int, block: bool = True
    ) -> None:
        """A proposal failed a screen: the proposers are told at once, and it is blocked from
        screening at its `limit`-th failure (one unlucky mini-batch does not end a proposal
        proposed again) where `block` (False: this failure does not say the edit is useless,
        and a re-proposal is screened again whatever the count)."""
        key = group_key(edits)
        strikes = self.screen_strikes[key] = self.screen_strikes.get(key, 0) + 1
        self.remember(edits, delta, epoch=epoch, block=block and strikes >= limit)

    def blocked_keys(self) -> set[str]:
        """The proposals never screened again: those in the memory proper."""
        return {group_key(c.edits) for c in self.rejected}

    def remembered_keys(self) -> set[str]:
        """The edits of earlier runs' rejections (`edit_key`): never screened again."""
        return {edit_key(e) for c in self.remembered for e in c.edits}

    def told(self) -> list[RejectedCandidate]:
        """What the proposers are told was tried and rejected: earlier runs' rejections, the
        memory and the struck."""
        return [*self.remembered, *self.rejected, *self.struck]

    def forget(self, keys: set[str]) -> None:
        """Drop accepted proposals from the memory and the struck."""
        self.rejected = [r for r in self.rejected if group_key(r.edits) not in keys]
        self.struck = [r for r in self.struck if group_key(r.edits) not in keys]

    def count(self, name: str, by: int = 1) -> None:
        """Add `by` to the screen statistic `name` (`screen_stats`)."""
        self.screen_stats[name] = self.screen_stats.get(name, 0) + by

    # -- evidence ----------------------------------------------------------------------------
    def evidence_of(self, key: str) -> EditEvidence:
        """What the screens of proposal `key` have shown so far (nothing: all zeros)."""
        return self.evidence.get(key, EditEvidence())

    def add_evidence(self, key: str, result: ScreenCounts) -> EditEvidence:
        """Add one screen of proposal `key` to its evidence; returns the sum."""
        summed = self.evidence[key] = self.evidence_of(key).plus(result)
        return summed

    # -- the record --------------------------------------------------------------------------
    def to_dict(self) -> MemoryRecord:
        """The checkpoint's JSON form (versioned)."""
        return MemoryRecord(
            version=MEMORY_VERSION,
            step=self.step,
            rejected=[r.to_dict() for r in self.rejected],
            struck=[r.to_dict() for r in self.struck],
            remembered=[r.to_dict() for r in self.remembered],
            evidence={k: e.to_dict() for k, e in self.evidence.items()},
            screen_strikes=dict(self.screen_strikes),
            screen_stats=dict(self.screen_stats),
            proposer_stats={k: dict(v) for k, v in self.proposer_stats.items()},
            proposer_asked=dict(self.proposer_asked),
        )

    @classmethod
    def from_dict(cls, data: JSONObject) -> Self:
        """Rebuild from `to_dict` output, or from an older optimizer state that held these
        fields itself (no `version`: its other fields are not the memory's and are skipped;
        a field it lacks starts empty).

        Raises:
            RunDirError: a version this code does not know, or a field of the wrong shape (a
                checkpoint edited by hand).
        """
        version = data.get("version", MEMORY_VERSION)
        if version != MEMORY_VERSION:
            raise RunDirError(
                f"checkpoint memory version {version!r} is not {MEMORY_VERSION}: written by "
                "another version of skillopt-dsl; start a fresh run"
            )
        step = data.get("step", 0)
        if not isinstance(step, int):
            raise RunDirError(f"checkpoint memory field 'step' is not a number: {step!r:.80}")
        evidence = cast(dict[str, dict[str, float]], _mapping(data, "evidence"))
        stats = cast(dict[str, dict[str, int]], _mapping(data, "proposer_stats"))
        return cls(
            step=step,
            rejected=_candidates(data, "rejected"),
            struck=_candidates(data, "struck"),
            remembered=_candidates(data, "remembered"),
            evidence={k: EditEvidence.from_dict(e) for k, e in evidence.items()},
            screen_strikes=cast(dict[str, int], _mapping(data, "screen_strikes")),
            screen_stats=cast(dict[str, int], _mapping(data, "screen_stats")),
            proposer_stats=stats,
            proposer_asked=cast(dict[str, str], _mapping(data, "proposer_asked")),
        )

    @classmethod
    def from_legacy(cls, state: JSONObject, remembered: Sequence[RejectedCandidate]) -> Self:
        """The memory of a checkpoint written before the run owned it: the fields the
        optimizer's own `state` held (the state of the part that saved last, for a composite:
        it started from the earlier part's memory), with `remembered` (which such a run kept
        in its proposers) added."""
        return replace(cls.from_dict(state), remembered=list(remembered))

    @classmethod
    def field_names(cls) -> frozenset[str]:
        """The record's fields (an older optimizer state held them beside its own)."""
        return frozenset(f.name for f in fields(cls))


def _candidates(data: JSONObject, name: str) -> list[RejectedCandidate]:
    rows = data.get(name, [])
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise RunDirError(f"checkpoint memory field {name!r} is not a list of objects")
    return [RejectedCandidate.from_dict(cast(RejectedRecord, r)) for r in rows]


def _mapping(data: JSONObject, name: str) -> JSONObject:
    value = data.get(name, {})
    if not isinstance(value, dict):
        raise RunDirError(f"checkpoint memory field {name!r} is not an object")
    return copy.deepcopy(value)
