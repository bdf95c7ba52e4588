"""What a loaded skill cost: one request's `SkillCost`, and `SkillUseSummary` over an evaluation.

A request pays the skill's system message (the body and the list of reference files) on every
model call of its episode, and each reference file's text every time the agent opens it; a
reference it never opened costs nothing. Counts are the target model's tokens.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from skillopt_dsl.evaluate import Rollout

__all__ = ["SkillCost", "SkillUseSummary"]


@dataclass(frozen=True)
class SkillCost:
    """The skill tokens one request paid.

    Attributes:
        instruction_tokens: tokens of the system message the skill puts in every call.
        calls: model calls of the episode (each one carries the system message).
        opened: `(path, tokens)` for each reference text the tool returned, in order.
    """

    instruction_tokens: int
    calls: int
    opened: tuple[tuple[str, int], ...]

    @property
    def reference_tokens(self) -> int:
        """Tokens of every reference text returned to the model."""
        return sum(tokens for _, tokens in self.opened)

    @property
    def total(self) -> int:
        """Every skill token the request paid: instructions on each call, plus references."""
        return self.instruction_tokens * self.calls + self.reference_tokens

    @property
    def opened_paths(self) -> tuple[str, ...]:
        """The reference files opened at least once, in first-opened order."""
        return tuple(dict.fromkeys(path for path, _ in self.opened))

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready dict, the totals included."""
        return {
            "instruction_tokens": self.instruction_tokens,
            "calls": self.calls,
            "opened": [[path, tokens] for path, tokens in self.opened],
            "reference_tokens": self.reference_tokens,
            "total": self.total,
        }


@dataclass(frozen=True)
class SkillUseSummary:
    """Skill cost over an evaluation.

    Attributes:
        requests: rollouts that carry a skill cost (every one that ran).
        unrecorded: rollouts without one (a model call failed for good, or the module refused
            the skill and made no call).
        mean_skill_tokens: mean `SkillCost.total` per request.
        mean_instruction_tokens: mean system-message tokens paid per request (all calls).
        mean_reference_tokens: mean reference tokens paid per request.
        mean_calls: mean model calls per request.
        opened_in: `(path, n)` for every reference: how many requests opened it at least once.
    """

    requests: int
    unrecorded: int
    mean_skill_tokens: float
    mean_instruction_tokens: float
    mean_reference_tokens: float
    mean_calls: float
    opened_in: tuple[tuple[str, int], ...]

    @classmethod
    def of(cls, rollouts: Sequence[Rollout], reference_paths: Sequence[str]) -> SkillUseSummary:
        """The summary of `rollouts`; every path of `reference_paths` is listed, opened or not
        (a path a rollout opened that is not listed is added after them)."""
        costs = [r.trace.skill_cost for r in rollouts if _has_cost(r)]
        count = len(costs)
        opened: dict[str, int] = dict.fromkeys(reference_paths, 0)
        for cost in costs:
            for path in cost.opened_paths:
                opened[path] = opened.get(path, 0) + 1
        return cls(
            requests=count,
            unrecorded=len(rollouts) - count,
            mean_skill_tokens=_mean([c.total for c in costs]),
            mean_instruction_tokens=_mean([c.instruction_tokens * c.calls for c in costs]),
            mean_reference_tokens=_mean([c.reference_tokens for c in costs]),
            mean_calls=_mean([c.calls for c in costs]),
            opened_in=tuple(opened.items()),
        )

    @property
    def open_rate(self) -> dict[str, float]:
        """Per reference, the share of requests that opened it (0.0 with no requests)."""
        return {path: n / self.requests if self.requests else 0.0 for path, n in self.opened_in}

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready dict (the open rates included)."""
        return {
            "requests": self.requests,
            "unrecorded": self.unrecorded,
            "mean_skill_tokens": self.mean_skill_tokens,
            "mean_instruction_tokens": self.mean_instruction_tokens,
            "mean_reference_tokens": self.mean_reference_tokens,
            "mean_calls": self.mean_calls,
            "opened_in": dict(self.opened_in),
            "open_rate": self.open_rate,
        }


def _has_cost(rollout: Rollout) -> bool:
    return isinstance(getattr(rollout.trace, "skill_cost", None), SkillCost)


def _mean(values: Sequence[int]) -> float:
    return sum(values) / len(values) if values else 0.0
