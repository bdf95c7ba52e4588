"""What one gate decision costs a DSPy program, said before the budget is spent.

`SkillOptimizer` warns (and reports in its result) when `Budget.max_calls` cannot pay for the seed
program's validation pass plus one gate decision: before the first call at one call per
predictor, and again once the reach probe (`reach.probe_reach`) has run the program and
measured what a run really costs (a ReAct loop, a tool, a format retry: several calls).
"""

from __future__ import annotations

import logging
import math

from skillopt_dsl.dspy.program import DSPyProgram
from skillopt_dsl.gate import Gate
from skillopt_dsl.lm import Budget
from skillopt_dsl.types import Example

__all__ = ["budget_warning", "one_decision"]

logger = logging.getLogger("skillopt_dsl.dspy.optimizer")


def budget_warning(
    budget: Budget | None,
    gate: Gate | None,
    program: DSPyProgram,
    train: list[Example],
    val: list[Example],
    per_run: float | None = None,
) -> tuple[str, ...]:
    """The warning (logged at WARNING, and returned for the result) when `budget` cannot pay
    for one decision, each run of the program at `per_run` calls (None: one per predictor,
    before anything was measured); () when it can."""
    max_calls = None if budget is None else budget.max_calls
    if max_calls is None:
        return ()
    rate = per_run if per_run is not None else float(len(program.predictor_names))
    needed, batch, look = one_decision(gate, program, train, val, rate)
    if max_calls >= needed:
        return ()
    price = (
        f"{rate:g} call(s) per run, one per predictor; loops and format retries take more"
        if per_run is None
        else f"{rate:.1f} calls per run, as measured on the program's first training run"
    )
    message = (
        f"budget max_calls={max_calls} cannot pay for the seed evaluation plus one gate "
        f"decision: that takes at least {needed} calls (the gate's first look, {look} "
        f"validation runs, of the seed program, {batch} training runs, 1 reflection call, "
        f"{batch} screening runs and the first look of one candidate, at {price}); raise "
        f"max_calls to at least {needed} or use fewer validation examples"
    )
    logger.warning("%s", message)
    return (message,)


def one_decision(
    gate: Gate | None,
    program: DSPyProgram,
    train: list[Example],
    val: list[Example],
    per_run: float | None = None,
) -> tuple[int, int, int]:
    """(calls, batch, look): the fewest calls that pay for one gate decision (the seed program
    and a candidate on the gate's first look, the smallest training batch, its reflection and
    its screen), each run at `per_run` calls (None: one per predictor)."""
    batch, look = min(len(train), 2), (gate or Gate()).look_sizes(len(val))[0]
    rate = per_run if per_run is not None else len(program.predictor_names)
    return math.ceil((2 * look + 2 * batch) * rate - 1e-9) + 1, batch, look
