"""Splits that can teach: hashed per task id, with the tasks a reply can fail shared out.

Every task starts in the split its id's hash gives (`assign_split`), so a task keeps its split
from one night to the next. A night learns only from training tasks the live files fail, and the
gate decides only on val tasks, so a night whose *informative* tasks (`informative`: a rubric, or
any rule check but `no_refusal`, which nearly every reply passes) all hashed to one split cannot
reach a gate decision. `balance_splits` repairs exactly that case and nothing else: when there
are at least two informative tasks and train (or val) holds none of them, the fewest of them move
so that each of train and val holds one. The task that moves is the one whose hash falls nearest
to the split it joins (ties by id), never the only informative task of the other split, and never
a task named in `fixed` (rows a person already has in their review folder). Which task moves
depends only on the ids, so the rule is as deterministic as the hash; a set whose informative
tasks already reach both splits keeps every hashed split.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from skillopt_dsl.sleep.tasks import NoRefusal, SplitFractions, SplitName, Task, split_bucket

__all__ = ["balance_splits", "informative"]

_SHARED: tuple[SplitName, ...] = ("train", "val")
"""The splits that each need an informative task: train to learn from, val to decide on."""


def informative(task: Task) -> bool:
    """Whether a reply can fail the task: it has a rubric, or a rule check other than
    `no_refusal`."""
    has_rubric = bool(task.rubric and task.rubric.strip())
    return has_rubric or any(not isinstance(c, NoRefusal) for c in task.checks)


def balance_splits(
    tasks: Sequence[Task], fractions: SplitFractions, *, fixed: Collection[str] = ()
) -> list[Task]:
    """`tasks` in their splits, with informative tasks moved (fewest possible) so that train and
    val each hold one when there are at least two (see the module docstring).

    Each task's current `split` is its starting point; ids in `fixed` never move. A split whose
    share in `fractions` is 0 is not filled.
    """
    splits: dict[str, SplitName] = {t.id: t.split for t in tasks}
    found = [t for t in tasks if informative(t)]
    if len(found) < 2:
        return list(tasks)
    for target in _SHARED:
        if _share(target, fractions) == 0 or any(splits[t.id] == target for t in found):
            continue
        movable = [t for t in found if t.id not in fixed and not _sole(t, found, splits)]
        if movable:
            chosen = min(movable, key=lambda t: (_distance(t.id, target, fractions), t.id))
            splits[chosen.id] = target
    return [
        t if t.split == splits[t.id] else t.model_copy(update={"split": splits[t.id]})
        for t in tasks
    ]


def _share(split: SplitName, fractions: SplitFractions) -> float:
    return fractions[("train", "val", "test").index(split)]


def _sole(task: Task, found: Sequence[Task], splits: dict[str, SplitName]) -> bool:
    """Whether `task` is the only informative task of a split that needs one."""
    split = splits[task.id]
    return split in _SHARED and sum(1 for t in found if splits[t.id] == split) == 1


def _distance(identifier: str, target: SplitName, fractions: SplitFractions) -> float:
    """How far the id's hash bucket lies from the range of `target`."""
    low = 0.0 if target == "train" else fractions[0]
    high = low + _share(target, fractions)
    bucket = split_bucket(identifier)
    return max(low - bucket, bucket - high, 0.0)
