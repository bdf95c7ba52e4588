"""Optimizers (all on one contract, see `base.Optimizer`), proposers and learning-rate schedules."""

from __future__ import annotations

from skillopt_dsl.optimizers.base import Optimizer
from skillopt_dsl.optimizers.gradient_text import GradientText
from skillopt_dsl.optimizers.proposers import (
    DemonstrationsProposer,
    EditGroup,
    FormatRuleProposer,
    ProposalRequest,
    Proposer,
    ReflectiveProposer,
    RejectedCandidate,
)
from skillopt_dsl.optimizers.schedules import SCHEDULES, lr_at

__all__ = [
    "SCHEDULES",
    "DemonstrationsProposer",
    "EditGroup",
    "FormatRuleProposer",
    "GradientText",
    "Optimizer",
    "ProposalRequest",
    "Proposer",
    "ReflectiveProposer",
    "RejectedCandidate",
    "lr_at",
]
