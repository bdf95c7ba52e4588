"""Learning-rate schedules: the textual learning rate as a function of the step.

A schedule maps `(step, total_steps)` to a multiplier of the base `lr` (step counts from 0).
`total_steps` is the optimizer's planned number of steps (epochs x batches per epoch).
"""

from __future__ import annotations

import math
from typing import Literal

from skillopt_dsl.errors import UserInputError

__all__ = ["SCHEDULES", "ScheduleName", "lr_at"]

ScheduleName = Literal["constant", "linear", "cosine", "warmup-cosine", "step"]
SCHEDULES: tuple[ScheduleName, ...] = ("constant", "linear", "cosine", "warmup-cosine", "step")

_MIN_FACTOR = 0.1
"""Decaying schedules end at 10% of the base rate, never 0 (a zero rate would freeze the skill)."""


def _constant(progress: float) -> float:
    return 1.0


def _linear(progress: float) -> float:
    return 1.0 - (1.0 - _MIN_FACTOR) * progress


def _cosine(progress: float) -> float:
    return _MIN_FACTOR + (1.0 - _MIN_FACTOR) * 0.5 * (1.0 + math.cos(math.pi * progress))


def _warmup_cosine(progress: float, warmup: float = 0.1) -> float:
    if progress < warmup:
        return _MIN_FACTOR + (1.0 - _MIN_FACTOR) * progress / warmup
    return _cosine((progress - warmup) / (1.0 - warmup))


def _step(progress: float) -> float:
    return 0.5 ** math.floor(progress * 3.0)


_FACTORS = {
    "constant": _constant,
    "linear": _linear,
    "cosine": _cosine,
    "warmup-cosine": _warmup_cosine,
    "step": _step,
}


def lr_at(schedule: str, base_lr: float, step: int, total_steps: int) -> float:
    """The learning rate at `step` (0-based) of `total_steps` under `schedule`.

    constant: `lr`; linear: down to 10% of `lr`; cosine: cosine decay to 10%; warmup-cosine:
    linear warm-up over the first 10% of steps, then cosine; step: halved at each third.
    """
    if schedule not in _FACTORS:
        raise UserInputError(f"unknown schedule {schedule!r}; choose one of {', '.join(SCHEDULES)}")
    progress = min(max(step, 0) / max(total_steps - 1, 1), 1.0)
    return base_lr * _FACTORS[schedule](progress)
