"""What every screened search promises, whichever optimizer runs it: the shipped contract
suite (`skillopt_dsl.testing.search_contract.ScreenedSearchContract`) run on GradientText,
Beam, Bundle and HandOff. Each of its tests names the regression it kills."""

from __future__ import annotations

from skillopt_dsl.optimizers import Beam, Bundle, GradientText, HandOff, Optimizer
from skillopt_dsl.optimizers.proposers import Proposer
from skillopt_dsl.testing.search_contract import ScreenedSearchContract


class TestGradientTextSearch(ScreenedSearchContract):
    def make_optimizer(self, proposer: Proposer) -> Optimizer:
        return GradientText(proposers=[proposer], batch_size=4)


class TestBeamSearch(ScreenedSearchContract):
    def make_optimizer(self, proposer: Proposer) -> Optimizer:
        return Beam(proposers=[proposer], batch_size=4, width=2, expansions=1)


class TestBundleSearch(ScreenedSearchContract):
    def make_optimizer(self, proposer: Proposer) -> Optimizer:
        return Bundle(proposers=[proposer], failures_per_step=4)


class TestHandOffSearch(ScreenedSearchContract):
    def make_optimizer(self, proposer: Proposer) -> Optimizer:
        first = GradientText(proposers=[proposer], batch_size=4)
        return HandOff(first=first, then=Bundle(proposers=[proposer], failures_per_step=4))
