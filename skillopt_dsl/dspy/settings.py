"""The keywords of `SkillOptimizer(metric, ...)`, as one frozen record (see `SkillOptimizer`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeAlias, TypedDict

import dspy

from skillopt_dsl.gate import Gate
from skillopt_dsl.lm import LM, Backend, Budget
from skillopt_dsl.optimizers.base import Optimizer

__all__ = ["ModelSpec", "SkillOptimizerOptions", "SkillOptimizerSettings"]

ModelSpec: TypeAlias = str | Backend | LM | dspy.BaseLM | None
"""A model as `SkillOptimizer` takes it: a litellm string, a skillopt `LM` or `Backend`, or a
`dspy.LM` (its model, `api_base`, key and settings are carried, see `from_dspy_lm`)."""


@dataclass(frozen=True, kw_only=True)
class SkillOptimizerSettings:
    """Every keyword of `SkillOptimizer(metric, ...)` as given, with its default (see
    `SkillOptimizer` for each one; DSPy's names are folded into ours when it is built)."""

    optimizer: Optimizer | None = None
    gate: Gate | None = None
    budget: Budget | None = None
    lm: ModelSpec = None
    optimizer_lm: ModelSpec = None
    predictors: Literal["all"] | Sequence[str] = "all"
    adapter: Any = None
    run_dir: str | Path | None = None
    resume: bool = False
    seed: int = 0
    threads: int | None = None
    max_errors: int | None = None
    num_threads: int | None = None
    log_dir: str | Path | None = None
    reflection_lm: ModelSpec = None
    prompt_model: ModelSpec = None
    auto: str | None = None
    demos: bool = False
    failure_score: float = 0.0


class SkillOptimizerOptions(TypedDict, total=False):
    """`SkillOptimizerSettings` as keywords: what `SkillOptimizer(metric, **options)` accepts."""

    optimizer: Optimizer | None
    gate: Gate | None
    budget: Budget | None
    lm: ModelSpec
    optimizer_lm: ModelSpec
    predictors: Literal["all"] | Sequence[str]
    adapter: Any
    run_dir: str | Path | None
    resume: bool
    seed: int
    threads: int | None
    max_errors: int | None
    num_threads: int | None
    log_dir: str | Path | None
    reflection_lm: ModelSpec
    prompt_model: ModelSpec
    auto: str | None
    demos: bool
    failure_score: float
