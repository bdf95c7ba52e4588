"""Splits that can teach (`skillopt_dsl.sleep.splits`): hashed per task id, but the tasks a reply
can fail are shared between train and val when they all hashed to one split (issue 26: on the
real home every task with evidence hashed to val, so a night had nothing to learn from)."""

from __future__ import annotations

import itertools
from pathlib import Path

from skillopt_dsl.sleep.harvest import ProjectMatcher, harvest
from skillopt_dsl.sleep.mine import mine_sessions
from skillopt_dsl.sleep.review import ReviewFolder
from skillopt_dsl.sleep.sources import make_sources
from skillopt_dsl.sleep.splits import balance_splits, informative
from skillopt_dsl.sleep.tasks import (
    DEFAULT_FRACTIONS,
    Contains,
    NoRefusal,
    SplitName,
    Task,
    assign_split,
    save_tasks,
    split_bucket,
)

REAL = Path(__file__).parent / "fixtures" / "real_home"


def _ids(split: SplitName, count: int, prefix: str = "t") -> list[str]:
    """The first `count` ids `prefix0`, `prefix1`, ... whose hash falls in `split`."""
    found = (f"{prefix}{n}" for n in itertools.count())
    return list(itertools.islice((i for i in found if assign_split(i) == split), count))


def _task(identifier: str, *, can_fail: bool = True, rubric: str | None = None) -> Task:
    checks = [NoRefusal(), *([Contains(value=f"`{identifier}`")] if can_fail else [])]
    return Task(
        id=identifier,
        project="p",
        intent=f"do {identifier}",
        checks=checks,
        rubric=rubric,
        split=assign_split(identifier),
    )


def _moved(before: list[Task], after: list[Task]) -> dict[str, SplitName]:
    return {b.id: a.split for b, a in zip(before, after, strict=True) if a.split != b.split}


def _informative_in(tasks: list[Task], split: SplitName) -> list[str]:
    return [t.id for t in tasks if informative(t) and t.split == split]


def test_informative_tasks_all_hashed_to_val_are_shared_with_train() -> None:
    """Kills: the pure hash (no balancing: train learns from nothing), and balancing that also
    moves tasks no reply can fail."""
    tasks = [_task(i) for i in _ids("val", 3)] + [
        _task(i, can_fail=False) for i in _ids("train", 2, "n") + _ids("val", 2, "m")
    ]
    balanced = balance_splits(tasks, DEFAULT_FRACTIONS)
    assert _informative_in(balanced, "train") and _informative_in(balanced, "val")
    moved = _moved(tasks, balanced)
    assert list(moved.values()) == ["train"]
    assert all(informative(t) for t in tasks if t.id in moved)


def test_the_task_that_moves_is_the_one_whose_hash_lies_nearest() -> None:
    """Kills: choosing the task to move by id (or list order) instead of by its hash's distance
    to the split it joins (the rule docs/sleep.md states)."""
    ids = _ids("val", 4, "b")
    nearest = min(ids, key=split_bucket)
    # the test means something only when the nearest is neither end, by id or by order
    assert nearest not in (min(ids), max(ids), ids[0], ids[-1])
    balanced = balance_splits([_task(i) for i in ids], DEFAULT_FRACTIONS)
    assert _informative_in(balanced, "train") == [nearest]


def test_all_in_train_or_all_in_test_fill_the_missing_split() -> None:
    """Kills: filling train only (val left without a task the gate can decide on)."""
    in_train = [_task(i) for i in _ids("train", 2)]
    balanced = balance_splits(in_train, DEFAULT_FRACTIONS)
    assert len(_informative_in(balanced, "train")) == 1
    assert len(_informative_in(balanced, "val")) == 1
    in_test = [_task(i) for i in _ids("test", 2)]
    balanced = balance_splits(in_test, DEFAULT_FRACTIONS)
    assert len(_informative_in(balanced, "train")) == 1
    assert len(_informative_in(balanced, "val")) == 1


def test_the_only_informative_task_of_val_never_moves() -> None:
    """Kills: taking val's only informative task for train (one move would become two, and a
    task would change split for nothing)."""
    tasks = [_task(_ids("val", 1)[0]), _task(_ids("test", 1)[0])]
    balanced = balance_splits(tasks, DEFAULT_FRACTIONS)
    assert _moved(tasks, balanced) == {tasks[1].id: "train"}


def test_splits_that_already_reach_train_and_val_keep_their_hash() -> None:
    """Kills: balancing that re-deals every set (users' splits would change between nights
    and releases), and balancing a single informative task."""
    spread = [_task(i) for i in _ids("train", 1) + _ids("val", 2) + _ids("test", 2)]
    assert _moved(spread, balance_splits(spread, DEFAULT_FRACTIONS)) == {}
    alone = [_task(_ids("test", 1)[0]), *(_task(i, can_fail=False) for i in _ids("train", 2))]
    assert _moved(alone, balance_splits(alone, DEFAULT_FRACTIONS)) == {}


def test_a_rubric_is_informative_and_no_refusal_alone_is_not() -> None:
    """Kills: counting a no_refusal-only task as informative (it fills train with a task the
    live files pass), and ignoring a rubric task."""
    graded = Task(id="r", project="p", intent="explain", rubric="names the file")
    assert informative(graded)
    assert not informative(_task("n", can_fail=False))
    assert informative(_task("c"))


def test_fixed_rows_never_move_and_a_zero_share_is_not_filled() -> None:
    """Kills: moving a row the user already has (`fixed` ignored), and filling train when the
    night's fractions give it no share."""
    tasks = [_task(i) for i in _ids("val", 3)]
    fixed = {t.id for t in tasks}
    assert _moved(tasks, balance_splits(tasks, DEFAULT_FRACTIONS, fixed=fixed)) == {}
    assert _moved(tasks, balance_splits(tasks, (0.0, 0.8, 0.2))) == {}


def test_mining_the_real_home_gives_train_and_val_a_task_a_reply_can_fail() -> None:
    """On the real home, for the project folder `rhnight`, the pure hash sends all three tasks
    with evidence to val (the measured night that reached no gate decision).
    Kills: mining that keeps the pure hash (no balancing after clustering)."""
    sessions = harvest(make_sources("auto", REAL), ProjectMatcher(("/",))).sessions
    tasks, _ = mine_sessions(sessions, project="/tmp/rhnight", lm=None, fractions=DEFAULT_FRACTIONS)
    found = [t for t in tasks if informative(t)]
    assert len(found) == 3
    assert {assign_split(t.id) for t in found} == {"val"}  # what the pure hash gives
    assert _informative_in(tasks, "train") and _informative_in(tasks, "val")
    assert sum(1 for t in tasks if t.split != assign_split(t.id)) == 1


def test_a_merge_balances_added_tasks_against_the_kept_rows(tmp_path: Path) -> None:
    """Kills: a merge that saves the added tasks' splits as mined (the folder's informative
    tasks stay in val), and one that moves a kept row instead of an added one."""
    folder = ReviewFolder(tmp_path / "review")
    kept = [_task(i) for i in _ids("val", 2)]
    folder.folder.mkdir()
    save_tasks(kept, folder.folder)  # an earlier release's harvest: the pure hash
    added = _task(_ids("val", 1, "new")[0])
    folder.merge([added], [])
    after = {t.id: t.split for t in folder.tasks()}
    assert after == {**{t.id: "val" for t in kept}, added.id: "train"}
