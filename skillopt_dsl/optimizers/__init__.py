"""Optimizers (all on one contract, see `base.Optimizer`), proposers and learning-rate schedules."""

from __future__ import annotations

from skillopt_dsl.driver import LearningRateBound, RunView, Verdict
from skillopt_dsl.optimizers.base import Optimizer
from skillopt_dsl.optimizers.beam import Beam
from skillopt_dsl.optimizers.bundle import Bundle
from skillopt_dsl.optimizers.gradient_text import GradientText
from skillopt_dsl.optimizers.hand_off import HandOff
from skillopt_dsl.optimizers.optuna_lr import OptunaLR, SweepResult, TrialRecord
from skillopt_dsl.optimizers.proposers import (
    AnswerShapeProposer,
    ConsolidationProposer,
    DemonstrationsProposer,
    EditGroup,
    FormatRuleProposer,
    PlainRuleProposer,
    ProposalRequest,
    Proposer,
    ReflectiveProposer,
    RejectedCandidate,
)
from skillopt_dsl.optimizers.schedules import SCHEDULES, lr_at

__all__ = [
    "SCHEDULES",
    "AnswerShapeProposer",
    "Beam",
    "Bundle",
    "ConsolidationProposer",
    "DemonstrationsProposer",
    "EditGroup",
    "FormatRuleProposer",
    "GradientText",
    "HandOff",
    "LearningRateBound",
    "Optimizer",
    "OptunaLR",
    "PlainRuleProposer",
    "ProposalRequest",
    "Proposer",
    "ReflectiveProposer",
    "RejectedCandidate",
    "RunView",
    "SweepResult",
    "TrialRecord",
    "Verdict",
    "lr_at",
]
