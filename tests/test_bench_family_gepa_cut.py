"""The family bench holds gepa to the budget the others are held to (bench/bench_search_family.py).

gepa checks its call budget between iterations, so its last iteration runs past it (a whole
validation pass of a new candidate). The family's `gepa-cut` is gepa's pick as it stood at its
last check within the budget; these tests kill a cut that reports the overshooting run (its
calls past the budget) and one that reports the seed whatever gepa had found within it.
"""

from __future__ import annotations

from types import ModuleType

import pytest

from skillopt_dsl.testing.rule_world import RuleWorld
from skillopt_dsl.types import Example
from tests.helpers import load_bench

pytest.importorskip("gepa")


def _bench() -> ModuleType:
    return load_bench("bench_search_family")


def _member(seed: int) -> tuple[RuleWorld, list[Example], list[Example]]:
    world = RuleWorld(classes=1, class_share=0.6, p_right=0.6, p_harm=0.1, seed=seed)
    train, val = world.items("train", 20), world.items("val", 40)
    return world, train, val


def test_gepa_cut_spends_no_more_than_the_budget_where_gepa_runs_past_it() -> None:
    bench = _bench()
    overshoots = 0
    for seed in range(4):
        world, train, val = _member(seed)
        _, spent = bench._gepa(world, train, val, 100)
        _, cut_spent = bench._gepa(world, train, val, 100, cut=True)
        overshoots += spent > 100
        assert cut_spent <= 100
        assert cut_spent <= spent
    assert overshoots, "no seed made gepa run past its budget: the test shows nothing"


def test_gepa_cut_keeps_what_gepa_found_within_the_budget() -> None:
    bench = _bench()
    kept = 0
    for seed in range(4):
        world, train, val = _member(seed)
        text, spent = bench._gepa(world, train, val, 300, cut=True)
        full, _ = bench._gepa(world, train, val, 300)
        kept += text != world.seed_skill
        if spent < 300 - len(val):  # gepa stopped on its own well within: the same pick
            assert text == full
    assert kept, "gepa-cut returned the seed in every run"
