"""The shared driver every optimizer runs under, and the one door to the incumbent.

- `run`: `CompileContext` (the driver: models, gate, run directory, the run's private state);
- `view`: `RunView`, the read-only view an optimizer gets, with its one `submit` (the door),
  and views `within` one part of a composite optimizer (`state_parts`: each part's state);
- `door`: the door's records and rules (`StepRecord`, `Verdict`, `LearningRateBound`, why a
  candidate is refused, the order of the gate's looks);
- `looks`: a gate decision look by look (`SequentialJudge`, what a look costs);
- `val_book`: what validation has been paid for (the incumbent's scores, the measured call rate);
- `run_state`: the run's mutable state, which only the driver writes, and its checkpoint
  (`CheckpointRecord`, read back with `as_checkpoint`).

Every public name is importable from `skillopt_dsl.driver` itself.
"""

from __future__ import annotations

from skillopt_dsl.driver.door import StepRow, look_order
from skillopt_dsl.driver.run import (
    CompileContext,
    LearningRateBound,
    SelectionSplit,
    StateAfter,
    StepRecord,
    UncommittedVerdict,
    Verdict,
)
from skillopt_dsl.driver.run_state import CheckpointRecord, DriverRecord, as_checkpoint
from skillopt_dsl.driver.view import RunView

__all__ = [
    "CheckpointRecord",
    "CompileContext",
    "DriverRecord",
    "LearningRateBound",
    "RunView",
    "SelectionSplit",
    "StateAfter",
    "StepRecord",
    "StepRow",
    "UncommittedVerdict",
    "Verdict",
    "as_checkpoint",
    "look_order",
]
