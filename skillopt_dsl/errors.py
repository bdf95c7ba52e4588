"""Exceptions, split by whose fault it is. Every message says what to do next."""

from __future__ import annotations


class SkillOptError(Exception):
    """Base class of every error this library raises on purpose."""


class UserInputError(SkillOptError, ValueError):
    """The caller passed something unusable (a dataset, a config value, a path)."""


class DataError(UserInputError):
    """A dataset is malformed: missing columns, empty or overlapping splits, wrong types."""


class MetricError(SkillOptError):
    """A user metric raised or returned something that is not a score."""

    def __init__(self, message: str, *, example_id: str | None = None, metric: str | None = None):
        super().__init__(message)
        self.example_id = example_id
        self.metric = metric


class ModelError(SkillOptError):
    """A model call failed after its retries (provider down, timeout, bad key)."""


class BudgetExceeded(SkillOptError):
    """The next model call would exceed the run's `Budget`; nothing was sent."""


class TooManyErrors(SkillOptError):
    """An evaluation hit its `max_errors` limit; the run stopped rather than score garbage."""


class RunDirError(SkillOptError):
    """A run directory is unusable: torn checkpoint, config mismatch on resume, truncated log."""
