"""The shipped optimizer contract suite, run on GradientText, Beam, Bundle, HandOff and OptunaLR (ScriptedLM
only)."""

from __future__ import annotations

import pytest

from skillopt_dsl.optimizers import (
    Beam,
    Bundle,
    GradientText,
    HandOff,
    OptunaLR,
    ReflectiveProposer,
)
from skillopt_dsl.optimizers.base import Optimizer
from skillopt_dsl.testing.contract import OptimizerContract


def _reflective() -> list[ReflectiveProposer]:
    return [ReflectiveProposer(read_successes=False)]


class TestGradientTextContract(OptimizerContract):
    def make_optimizer(self) -> Optimizer:
        return GradientText(proposers=_reflective(), epochs=2, batch_size=8)


class TestBeamContract(OptimizerContract):
    def make_optimizer(self) -> Optimizer:
        return Beam(width=2, expansions=2, depth=3, batch_size=8, proposers=_reflective())


class TestBundleContract(OptimizerContract):
    def make_optimizer(self) -> Optimizer:
        return Bundle(proposers=_reflective(), max_steps=6)


class TestHandOffContract(OptimizerContract):
    def make_optimizer(self) -> Optimizer:
        first = GradientText(proposers=_reflective(), epochs=2, batch_size=8)
        return HandOff(first=first, then=Bundle(proposers=_reflective(), max_steps=6))


class TestBeamParetoContract(OptimizerContract):
    def make_optimizer(self) -> Optimizer:
        return Beam(width=2, expansions=2, depth=3, selection="pareto", proposers=_reflective())


@pytest.mark.timeout(120)  # OptunaLR's n_trials loop: a loop that never ends must fail, not hang
class TestOptunaLRContract(OptimizerContract):
    budget_calls = 60

    def make_optimizer(self) -> Optimizer:
        inner = GradientText(proposers=_reflective(), epochs=2, batch_size=8)
        return OptunaLR(
            inner=inner,
            search_space={"lr": (0.05, 0.5, "log")},
            n_trials=3,
            plots=False,
            selection_fraction=0.5,
        )


class _IgnoresTheLearningRate(OptimizerContract):
    """Not collected: a deliberately broken optimizer, to show the suite catches it."""

    def make_optimizer(self) -> Optimizer:
        return GradientText(proposers=_reflective(), lr=1.0, lr_floor_tokens=100_000)


def test_the_suite_catches_an_optimizer_that_ignores_the_learning_rate() -> None:
    with pytest.raises(AssertionError, match="learning-rate budget"):
        _IgnoresTheLearningRate().test_learning_rate_respected()
