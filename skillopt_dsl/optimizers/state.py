"""What every optimizer's checkpointed state shares: JSON round-trips and the rejected-edit memory."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any, Self

from skillopt_dsl.optimizers.proposers import RejectedCandidate

__all__ = ["CheckpointedState"]


class CheckpointedState:
    """Mixin for an optimizer's state dataclass with a `rejected: list[dict]` field.

    The state is stored in checkpoint.json as plain JSON, so it holds only JSON values.
    """

    rejected: list[dict[str, Any]]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready copy."""
        return asdict(self)  # type: ignore[call-overload]

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        """Rebuild from `to_dict` output."""
        return cls(**data)

    def memory(self) -> list[RejectedCandidate]:
        """The rejected-edit memory as typed records."""
        return [RejectedCandidate.from_dict(r) for r in self.rejected]
