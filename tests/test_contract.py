"""The shipped optimizer contract suite, run on GradientText, Beam and OptunaLR (ScriptedLM only)."""

from __future__ import annotations

from skillopt_dsl.optimizers import Beam, GradientText, OptunaLR, ReflectiveProposer
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


class TestBeamParetoContract(OptimizerContract):
    def make_optimizer(self) -> Optimizer:
        return Beam(width=2, expansions=2, depth=3, selection="pareto", proposers=_reflective())


class TestOptunaLRContract(OptimizerContract):
    budget_calls = 60

    def make_optimizer(self) -> Optimizer:
        inner = GradientText(proposers=_reflective(), epochs=2, batch_size=8)
        return OptunaLR(inner=inner, search_space={"lr": (0.05, 0.5, "log")}, n_trials=3, plots=False)
