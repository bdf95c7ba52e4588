"""`Environment`: for tasks whose success is a state, not a string.

Contract (three methods, one optional):

- `reset(example) -> state`: a fresh state for one example. Never share mutable state between
  examples: rollouts run in parallel threads.
- `tools(state) -> tools`: the tools bound to that state (closures or bound methods, or `Tool`s);
  they are the only way the agent changes it.
- `check(example, state) -> Score | float | bool`: the verdict on the final state; it is the
  module's score when the module declares no metric (a metric, when declared, receives the final
  state inside the trajectory instead).
- `snapshot(state)` (optional): the final state as recorded in the trajectory; a deep copy by
  default, so later mutation of the live state cannot change the record.

Example::

    class Counter(Environment[dict]):
        def reset(self, example):
            return {"value": 0}

        def tools(self, state):
            def add(n: int) -> int:
                \"\"\"Add n to the counter and return the new value.\"\"\"
                state["value"] += n
                return state["value"]
            return [add]

        def check(self, example, state):
            return state["value"] == example.labels["target"]
"""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

from skillopt_dsl.agents.tools import Tool
from skillopt_dsl.metrics.score import Score
from skillopt_dsl.types import Example

__all__ = ["Environment"]

StateT = TypeVar("StateT")


class Environment(ABC, Generic[StateT]):
    """Per example: a fresh state, the tools bound to it, and a check of the final state."""

    @abstractmethod
    def reset(self, example: Example) -> StateT:
        """A fresh state for `example`."""

    @abstractmethod
    def tools(self, state: StateT) -> Sequence[Tool | Callable[..., Any]]:
        """The tools bound to `state`."""

    def check(self, example: Example, state: StateT) -> Score | float | bool:
        """The verdict on the final state (needed when the module declares no metric)."""
        raise NotImplementedError(
            f"{type(self).__name__} has no check(); define check(example, state) or give the "
            "module a metric"
        )

    def snapshot(self, state: StateT) -> Any:
        """The final state as recorded in the trajectory (a deep copy by default)."""
        return copy.deepcopy(state)
