"""The driver's private run state and its checkpointed form.

Only the door (skillopt_dsl.driver) writes a `RunState`; `to_checkpoint` / `from_checkpoint`
are the "driver" part of a run's checkpoint (`RunDirectory.save_checkpoint`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NotRequired, TypedDict, cast

from skillopt_dsl.driver.door import StepRecord, StepRow
from skillopt_dsl.errors import RunDirError
from skillopt_dsl.evaluate import EvaluationReport
from skillopt_dsl.events import DecisionRecord
from skillopt_dsl.evidence import BudgetState
from skillopt_dsl.gate import GateDecision
from skillopt_dsl.json_types import JSONObject, JSONValue
from skillopt_dsl.lm.usage import UsageRecord
from skillopt_dsl.search_memory import MemoryRecord
from skillopt_dsl.skill import Skill

__all__ = ["CheckpointRecord", "DriverRecord", "RunState", "as_checkpoint"]


class DriverRecord(TypedDict):
    """The checkpoint's "driver" part (`RunState.to_checkpoint` and the run's random state)."""

    incumbent: str
    version: int
    gate_log: list[DecisionRecord]
    scored: dict[str, DecisionRecord]
    history: list[StepRow]
    incumbent_examples: NotRequired[list[str] | None]
    rng: list[JSONValue]


class CheckpointRecord(TypedDict):
    """checkpoint.json: what a resumed run reads back (`CompileContext.checkpoint`); the parts
    marked `NotRequired` are absent from an older run's checkpoint."""

    driver: DriverRecord
    optimizer: NotRequired[JSONObject]
    memory: NotRequired[MemoryRecord]
    significance: NotRequired[BudgetState]
    call_rate: NotRequired[dict[str, int]]
    usage: UsageRecord
    cache_rowid: NotRequired[int]
    events: NotRequired[int]


def as_checkpoint(data: JSONObject) -> CheckpointRecord:
    """The typed record of a checkpoint read from disk (`RunDirectory.load_checkpoint`).

    Raises:
        RunDirError: the driver part or the usage is not an object (edited by hand).
    """
    if not isinstance(data.get("driver"), dict) or not isinstance(data.get("usage"), dict):
        raise RunDirError("checkpoint.json lacks its driver state or usage; not a run checkpoint")
    return cast(CheckpointRecord, data)


@dataclass
class RunState:
    """The run's mutable state. Private to the driver: only the door writes it.

    `incumbent_report` may cover fewer validation examples than the set (an early acceptance);
    `restored_ids` are the examples it covered when a resumed run was checkpointed (None: all).
    """

    incumbent: Skill
    incumbent_report: EvaluationReport | None = None
    version: int = 1
    gate_log: list[GateDecision] = field(default_factory=list)
    history: list[StepRecord] = field(default_factory=list)
    scored: dict[str, GateDecision] = field(default_factory=dict)
    optimizer_state: JSONObject = field(default_factory=dict)
    restored_ids: frozenset[str] | None = None

    def to_checkpoint(self, n_val: int, rng: list[JSONValue]) -> DriverRecord:
        """The state as the checkpoint's "driver" part stores it (`n_val`: validation size,
        `rng`: the run's random state as `rng_to_json` writes it)."""
        return {
            "incumbent": self.incumbent.text,
            "version": self.version,
            "gate_log": [d.to_dict() for d in self.gate_log],
            "scored": {h: d.to_dict() for h, d in self.scored.items()},
            "history": [r.to_dict() for r in self.history],
            "incumbent_examples": self._partial_ids(n_val),
            "rng": rng,
        }

    def _partial_ids(self, n_val: int) -> list[str] | None:
        """The incumbent's scored validation ids when fewer than all (None: all of them)."""
        report = self.incumbent_report
        if report is None:  # resumed and not re-scored yet
            return None if self.restored_ids is None else sorted(self.restored_ids)
        return list(report.example_ids) if len(report.records) < n_val else None

    @classmethod
    def from_checkpoint(cls, driver: DriverRecord, optimizer: JSONObject) -> RunState:
        """The state `to_checkpoint` wrote (the incumbent's report is re-scored from cache)."""
        scored = driver.get("incumbent_examples")
        return cls(
            incumbent=Skill(driver["incumbent"]),
            version=int(driver["version"]),
            gate_log=[GateDecision.from_dict(d) for d in driver["gate_log"]],
            history=[StepRecord(**r) for r in driver["history"]],
            scored={h: GateDecision.from_dict(d) for h, d in driver["scored"].items()},
            optimizer_state=dict(optimizer),
            restored_ids=None if scored is None else frozenset(scored),
        )
