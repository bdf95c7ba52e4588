"""Screening: try a proposal on training examples before it may reach the gate.

The gate is expensive (a look or more on validation, and a share of the run's significance);
the incumbent's training rollouts are already paid for. So each proposal (one edit group) is
first tried *alone* against the skill it was proposed for (its *base*) on the mini-batch whose
rollouts produced it, and passes only when it fixes more than it breaks there:

    net = sum over the examples of (candidate score - base score) > 0

The failing examples the proposal says it was written for (`EditGroup.addresses`) are scored
first, then the base's other failing examples, then the rest; the screen stops as soon as the
candidate has gained nothing so far (it cannot fix more than it breaks: a useless proposal that
names its failures costs a call or two, one that names none about half a batch). A survivor is then *confirmed* on training
examples it has not been proposed from (stage "confirm": the same comparison on a fresh
mini-batch, where it must gain again; the optimizer decides how much gain in all it needs). Screening never touches validation, so it spends no significance; only what reaches the
gate does.

Every screen is an event (`screen`: the stage, examples scored, fixes, breaks, net, verdict,
calls spent), read by the progress screen and the report.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Literal

from skillopt_dsl.driver import RunView
from skillopt_dsl.evaluate import Rollout
from skillopt_dsl.evidence import BACKGROUND_CHANGE
from skillopt_dsl.optimizers.proposers import EditGroup, edit_key
from skillopt_dsl.skill import Skill
from skillopt_dsl.types import Example

__all__ = [
    "EditEvidence",
    "EvidenceBook",
    "ScreenResult",
    "compare",
    "draw_examples",
    "merge_duplicates",
    "screen",
]

Stage = Literal["batch", "confirm"]

DROP_ODDS = 4.0
"""A proposal without a net gain is dropped once its fixes and breaks are this many times likelier
for a useless edit than for one with the gain the gate certifies (`EditEvidence.rules_out`); with
fewer moved answers than that, the evidence cannot tell, and the proposal stays on trial."""


@dataclass(frozen=True)
class ScreenResult:
    """How a candidate did against its base on training examples (one stage).

    `fixes`/`breaks`: examples where it scored above/below the base; `net`: the summed score
    difference; `scored`: examples the candidate was scored on (the screen may stop before
    the whole sample); `calls`: model calls the stage spent (cache hits are free).
    """

    stage: Stage
    scored: int
    fixes: int
    breaks: int
    net: float
    calls: int
    passed: bool

    def to_dict(self) -> dict[str, object]:
        """JSON-ready copy."""
        return asdict(self)


@dataclass(frozen=True)
class EditEvidence:
    """What every screen of one proposal (an edit group, by its key) has shown so far, summed
    over the steps that proposed it again and over its confirmations: examples it fixed and
    broke against its base, the net score difference, examples scored and screens run.

    The screen is sized to this evidence (docs/concepts.md, "Search"): a proposal is dropped
    when it says the proposal hurts or cannot help (`hurts`: no net gain in all), it joins a
    working candidate when its gain is as clear as its batches can show, and where the
    evidence cannot tell (a small or noisy batch) the gate decides.
    """

    fixes: int = 0
    breaks: int = 0
    net: float = 0.0
    scored: int = 0
    screens: int = 0

    def plus(self, result: ScreenResult) -> EditEvidence:
        """This evidence with one more screen's result added."""
        return EditEvidence(
            self.fixes + result.fixes,
            self.breaks + result.breaks,
            self.net + result.net,
            self.scored + result.scored,
            self.screens + 1,
        )

    @property
    def hurts(self) -> bool:
        """No net gain over every example it was scored on: it hurts or cannot help."""
        return self.net <= 0

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
        return {
            "fixes": self.fixes,
            "breaks": self.breaks,
            "net": self.net,
            "scored": self.scored,
            "screens": self.screens,
        }

    @classmethod
    def from_dict(cls, data: dict[str, float]) -> EditEvidence:
        """The evidence `to_dict` wrote."""
        return cls(
            int(data["fixes"]),
            int(data["breaks"]),
            float(data["net"]),
            int(data["scored"]),
            int(data["screens"]),
        )


class EvidenceBook:
    """Mixin of an optimizer's checkpointed state with an `evidence` field (proposal key ->
    `EditEvidence.to_dict()`): every screen of a proposal summed, across re-proposals."""

    evidence: dict[str, dict[str, float]]

    def evidence_of(self, key: str) -> EditEvidence:
        """What the screens of proposal `key` have shown so far (nothing: all zeros)."""
        data = self.evidence.get(key)
        return EditEvidence() if data is None else EditEvidence.from_dict(data)

    def add_evidence(self, key: str, result: ScreenResult) -> EditEvidence:
        """Add one screen of proposal `key` to its evidence; returns the sum."""
        summed = self.evidence_of(key).plus(result)
        self.evidence[key] = summed.to_dict()
        return summed


def compare(base: Sequence[Rollout], candidate: Sequence[Rollout]) -> tuple[int, int, float]:
    """Fixes, breaks and net score difference of `candidate` over `base` (paired by example)."""
    by_id = {r.example_id: r.score for r in base}
    diffs = [r.score - by_id[r.example_id] for r in candidate]
    return sum(d > 0 for d in diffs), sum(d < 0 for d in diffs), sum(diffs)


def screen(
    view: RunView,
    candidate: Skill,
    examples: Sequence[Example],
    base: Sequence[Rollout],
    *,
    stage: Stage = "batch",
    addresses: Sequence[str] = (),
) -> ScreenResult:
    """Score `candidate` on `examples` against the base's rollouts `base` there.

    stage "batch" (the mini-batch that produced the proposal): the failing examples in
    `addresses` first, then the other failing ones, then the rest, stopping when it has gained
    nothing so far; passes on a positive net gain. stage "confirm" (fresh examples): all
    examples at once; passes when the candidate does not lose (net >= 0).
    """
    before = view.usage().calls
    if stage == "confirm":
        records = list(view.evaluate(candidate, examples, label="screen").records)
    else:
        records = _failing_first(view, candidate, examples, base, addresses)
    fixes, breaks, net = compare(base, records)
    calls = view.usage().calls - before
    passed = net >= 0 if stage == "confirm" else net > 0
    return ScreenResult(stage, len(records), fixes, breaks, net, calls, passed=passed)


def _failing_first(
    view: RunView,
    candidate: Skill,
    examples: Sequence[Example],
    base: Sequence[Rollout],
    addresses: Sequence[str] = (),
) -> list[Rollout]:
    """The candidate's rollouts on the failing examples it addresses, then (only when it gained
    there) on the other failing examples, then (only when it gained there) on the rest."""
    scores = {r.example_id: r.score for r in base}
    wanted = set(addresses)
    failing = [e for e in examples if scores[e.id] < 1.0]
    stages = [
        [e for e in failing if e.id in wanted],
        [e for e in failing if e.id not in wanted],
        [e for e in examples if scores[e.id] >= 1.0],
    ]
    records: list[Rollout] = []
    for part in stages:
        if not part:
            continue
        if records and compare(base, records)[2] <= 0:
            break
        records += view.evaluate(candidate, part, label="screen").records
        if compare(base, records)[2] <= 0:
            break
    return records


def merge_duplicates(groups: Sequence[EditGroup]) -> list[EditGroup]:
    """One group per distinct edit list (the first proposed), naming the failures every copy
    named: a proposal reached from two groups of failures is screened once, first on all of
    them (on none in particular if one copy named none)."""
    merged: dict[str, EditGroup] = {}
    for group in groups:
        key = "\n".join(edit_key(e) for e in group.edits)
        first = merged.setdefault(key, group)
        if first is not group:
            both = first.addresses and group.addresses
            addresses = tuple(dict.fromkeys((*first.addresses, *group.addresses))) if both else ()
            merged[key] = replace(first, addresses=addresses)
    return list(merged.values())


def draw_examples(view: RunView, pool: Sequence[Example], size: int) -> list[Example]:
    """A sample of `size` examples of `pool` (all of them when it is smaller), drawn with the
    run's one `view.rng` from the pool sorted by id (the same on resume)."""
    ordered = sorted(pool, key=lambda e: e.id)
    return view.rng.sample(ordered, min(size, len(ordered)))
