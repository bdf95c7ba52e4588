"""Sleep's errors, split by whose fault they are; every message says what to do next."""

from __future__ import annotations

from skillopt_dsl.errors import SkillOptError, UserInputError

__all__ = [
    "MemoryFileError",
    "SleepError",
    "SleepLocked",
    "StageMismatch",
]


class SleepError(UserInputError):
    """A Sleep command cannot go ahead (bad project, nothing staged, bad transcript home)."""


class SleepLocked(SkillOptError):
    """Another Sleep command holds this project's lock; the message names the holder."""


class MemoryFileError(SleepError):
    """A memory file's learned-block markers are broken; the file is refused, never truncated."""


class StageMismatch(SleepError):
    """A live (or staged) file changed since the night was staged; adopt or rollback refuses."""
