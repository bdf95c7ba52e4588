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
from skillopt_dsl.optimizers.proposers import EditGroup
from skillopt_dsl.search_memory import EditEvidence, group_key
from skillopt_dsl.skill import Skill
from skillopt_dsl.types import Example

__all__ = ["EditEvidence", "ScreenResult", "compare", "draw_examples", "merge_duplicates", "screen"]

Stage = Literal["batch", "confirm"]


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
    parts = [examples] if stage == "confirm" else _failing_first(examples, base, addresses)
    records: list[Rollout] = []
    for part in parts:
        records += view.evaluate(candidate, part, label="screen").records
        if compare(base, records)[2] <= 0:
            break  # it has gained nothing so far
    fixes, breaks, net = compare(base, records)
    calls = view.usage().calls - before
    passed = net >= 0 if stage == "confirm" else net > 0
    return ScreenResult(stage, len(records), fixes, breaks, net, calls, passed=passed)


def _failing_first(
    examples: Sequence[Example], base: Sequence[Rollout], addresses: Sequence[str]
) -> list[list[Example]]:
    """The parts of a batch stage's screen, in the order it scores them: the failing examples
    the candidate addresses, then the other failing examples, then the rest (each scored only
    when the candidate gained on the ones before; empty parts left out)."""
    scores = {r.example_id: r.score for r in base}
    wanted = set(addresses)
    failing = [e for e in examples if scores[e.id] < 1.0]
    parts = [
        [e for e in failing if e.id in wanted],
        [e for e in failing if e.id not in wanted],
        [e for e in examples if scores[e.id] >= 1.0],
    ]
    return [p for p in parts if p]


def merge_duplicates(groups: Sequence[EditGroup]) -> list[EditGroup]:
    """One group per distinct edit list (the first proposed), naming the failures every copy
    named: a proposal reached from two groups of failures is screened once, first on all of
    them (on none in particular if one copy named none)."""
    merged: dict[str, EditGroup] = {}
    for group in groups:
        key = group_key(group.edits)
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
