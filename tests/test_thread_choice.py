"""`ThreadChooser`: llama.cpp's thread count chosen call by call from measured decode speed."""

from __future__ import annotations

import itertools

import pytest

from skillopt_dsl.lm.thread_choice import (
    MAX_PROBE_EVERY,
    MIN_DECODE_STEPS,
    PROBE_EVERY,
    ThreadChooser,
)

IDLE = {2: 0.011, 1: 0.0185}
"""Seconds per decoded token on the idle 2-core machine (measured, 2026-12-06)."""
BUSY = {2: 0.074, 1: 0.0185}
"""The same with the second core busy: two threads four times slower than one."""


def _run(chooser: ThreadChooser, speeds: dict[int, float], calls: int) -> list[int]:
    """`calls` calls of 10 decoded tokens each at `speeds`; the counts the chooser picked."""
    picked = []
    for _ in range(calls):
        count = chooser.choose()
        chooser.record(count, speeds[count] * 10, 10)
        picked.append(count)
    return picked


# Kills: a chooser that keeps the first count whatever it measures (two threads on a busy
# 2-core machine: every call four times slower).
def test_each_count_is_measured_then_the_faster_one_runs() -> None:
    chooser = ThreadChooser((2, 1))
    picked = _run(chooser, BUSY, 40)
    assert picked[:2] == [2, 1]
    assert picked[2:].count(1) >= 36
    assert chooser.best() == 1


# Kills: estimates frozen at their first measurement (or never updated for the count in use):
# a machine that turns busy mid-run would keep the 2-thread slowdown to the end.
def test_a_machine_that_turns_busy_is_followed_within_a_few_calls() -> None:
    chooser = ThreadChooser((2, 1))
    _run(chooser, IDLE, 30)
    assert chooser.best() == 2
    picked = _run(chooser, BUSY, 10)
    assert picked[5:] == [1] * 5


# Kills: a slower count never measured again (a run that began while the machine was busy
# would keep one thread after it turned idle), or measured again on every call.
def test_a_slower_count_is_measured_again_ever_less_often() -> None:
    chooser = ThreadChooser((2, 1))
    picked = _run(chooser, IDLE, 2 + PROBE_EVERY * 8)
    probes = [i for i, count in enumerate(picked) if i >= 2 and count == 1]
    waits = [later - earlier for earlier, later in itertools.pairwise(probes)]
    assert probes[0] == 2 + PROBE_EVERY
    assert len(probes) == 3 and waits[1] > waits[0] > PROBE_EVERY  # the wait doubles
    assert len(_run(ThreadChooser((2, 1)), IDLE, 4000)) == 4000
    busy_then_idle = ThreadChooser((2, 1))
    _run(busy_then_idle, BUSY, 30)
    assert busy_then_idle.best() == 1
    picked = _run(busy_then_idle, IDLE, MAX_PROBE_EVERY + 24)
    assert busy_then_idle.best() == 2  # the idle machine is found again
    assert picked[-20:].count(2) >= 18


# Kills: the wait growing without bound (a probe every MAX_PROBE_EVERY calls at most).
def test_the_wait_between_measurements_is_capped() -> None:
    chooser = ThreadChooser((2, 1))
    picked = _run(chooser, IDLE, 20 * MAX_PROBE_EVERY)
    late = picked[10 * MAX_PROBE_EVERY :]
    assert late.count(1) >= 9


# Kills: a call that decoded one token (a one-word answer) counted as a measurement: its time
# is mostly the call's own overhead, and one such call could flip the choice.
def test_calls_that_decode_almost_nothing_are_not_measured() -> None:
    chooser = ThreadChooser((2, 1))
    chooser.record(2, 5.0, MIN_DECODE_STEPS - 1)
    assert chooser.estimates == {}
    assert chooser.choose() == 2


@pytest.mark.parametrize("counts", [(), (2, 2), (0, 1)])
def test_counts_must_be_distinct_and_positive(counts: tuple[int, ...]) -> None:
    with pytest.raises(ValueError, match="distinct and >= 1"):
        ThreadChooser(counts)
