"""JSON readers of typed records: numbers read back as numbers, anything else refused."""

from __future__ import annotations

import pytest

from skillopt_dsl.lm import UsageSnapshot
from skillopt_dsl.types import json_float, json_int


def test_json_numbers_read_back_and_non_numbers_are_refused() -> None:
    """Kills: a reader that lets a null or a list through as a count (a damaged checkpoint
    would then resume with a wrong spend instead of an error)."""
    assert json_int(3) == 3 and json_int("4") == 4 and json_int(2.0) == 2
    assert json_float(0.5) == 0.5 and json_float("0.25") == 0.25 and json_float(1) == 1.0
    for bad in (None, [1], {"calls": 1}):
        with pytest.raises(TypeError):
            json_int(bad)
        with pytest.raises(TypeError):
            json_float(bad)


def test_a_usage_snapshot_round_trips_through_its_json() -> None:
    """Kills: `UsageSnapshot.to_dict`/`from_dict` dropping or renaming a counter (a resumed
    run would forget what it spent)."""
    snapshot = UsageSnapshot(calls=7, cache_hits=2, prompt_tokens=100, completion_tokens=20)
    assert UsageSnapshot.from_dict(snapshot.to_dict()) == snapshot
