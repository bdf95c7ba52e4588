"""Every model call a DSPy program or its metric makes, under the run's ledger and budget.

A DSPy program reaches models by more paths than the LM `SkillOptimizer` sets: a step run under
`dspy.context(lm=other)` inside `forward`, a call's `lm=` keyword, `TwoStepAdapter(
extraction_model=...)`, a metric calling a judge configured with `dspy.configure(lm=...)` or
`dspy.context(lm=judge)`. Every one of them ends in DSPy's `dspy.clients.execution.execute`
(or `aexecute`, for `acall`): `BaseLM.__call__`, `BaseLM.acall` and `LM.forward` all send
through it. This module wraps those two functions, once, at import:

- Outside a skillopt run (no `Route` in DSPy's settings) nothing changes.
- Inside one (`PredictorModule.run` and `score` set `dspy.context(skillopt_route=Route(...))`,
  which DSPy carries into its own worker threads), a call to any LM other than the run's own
  bridge is sent instead through a bridge to that LM (`from_dspy_lm`: its model, endpoint and
  settings) sharing the run's ledger and response cache: counted, cached and refused before it
  is sent once the budget is spent. An LM that cannot be bridged (a custom `BaseLM` subclass)
  is refused with `UserInputError` before anything is sent.
- A call to a bridge carries its **sample**: DSPy's `rollout_id` (`dspy.BestOfN`, `dspy.Refine`)
  and the candidate's index within one `n=` call. The first candidate of rollout 0 (or none) is
  the plain request; any other sample gets its own seed (`sample_seed`), so repeated attempts
  are distinct requests to the provider and distinct entries in the cache, as
  `dspy.Evaluate` would send them, while a rerun of the same sample is still a cache hit.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

import dspy
from dspy.clients import execution

from skillopt_dsl.dspy.bridge import (
    SAMPLE,
    BridgeEngine,
    RunRecord,
    Sample,
    bridge_lm,
    from_dspy_lm,
)
from skillopt_dsl.errors import UserInputError
from skillopt_dsl.lm import LM

__all__ = ["ROUTE_KEY", "Route", "charged", "refuse_unroutable"]

ROUTE_KEY = "skillopt_route"
"""The `dspy.settings` key holding the run's `Route` (DSPy copies its settings into its
worker threads, where a plain `contextvars.ContextVar` would be lost)."""


@dataclass
class Route:
    """Where a run's DSPy calls go: `lm` (its ledger, cache and budget) with the rollout
    `seed`; what they did is counted on `record`. `lm=None` refuses every LM but the run's
    own (scoring with no run to charge)."""

    lm: LM | None
    seed: int | None
    record: RunRecord
    _bridges: dict[int, tuple[Any, dspy.LM]] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def owns(self, target: Any) -> bool:
        """Whether `target` is a bridge reporting to this run's ledger."""
        engine = getattr(target, "engine", None)
        return (
            isinstance(engine, BridgeEngine)
            and self.lm is not None
            and engine.lm.ledger is self.lm.ledger
        )

    def bridge(self, target: Any) -> dspy.LM:
        """A bridge to `target` (any `dspy.LM`) under this run's ledger and cache.

        Raises:
            UserInputError: an LM the bridge cannot carry, or no run to charge it to.
        """
        with self._lock:
            known = self._bridges.get(id(target))
            if known is not None and known[0] is target:
                return known[1]
        name = getattr(target, "model", type(target).__name__)
        if self.lm is None:
            raise UserInputError(
                f"a DSPy call to {name!r} was made outside any program run (a metric scoring "
                "a prediction with no run behind it), where skillopt has no budget to charge "
                "it to; call judge models only from a metric scoring a program run"
            )
        try:
            client = from_dspy_lm(target).with_ledger(self.lm.ledger)
        except UserInputError as exc:
            raise UserInputError(
                f"the program or its metric calls the model {name!r}, which skillopt cannot "
                f"route through its budget: {exc}"
            ) from None
        if self.lm.cache is not None:
            client = client.with_cache(self.lm.cache)
        bridged = bridge_lm(client, seed=self.seed, record=self.record)
        with self._lock:
            self._bridges[id(target)] = (target, bridged)
        return bridged


@contextmanager
def charged(lm: LM | None, seed: int | None = None) -> Iterator[RunRecord]:
    """Every DSPy call inside the block charged to `lm`'s ledger and cache (None: refused),
    counted on the record it yields: a metric's judge, an adapter whose `parse` calls a model
    (`TwoStepAdapter`) while a worked example is checked."""
    route = Route(lm, seed, RunRecord())
    with dspy.context(**{ROUTE_KEY: route}):
        yield route.record


def refuse_unroutable(where: str, value: Any, seen: set[int] | None = None) -> None:
    """Refuse, before any call, an LM reachable from `value` (a program's attributes, an
    adapter's `extraction_model`, ...) that the bridge cannot carry; a `dspy.LM` it can is
    left to be bridged when it is called.

    Raises:
        UserInputError: naming the attribute and why.
    """
    seen = set() if seen is None else seen
    if id(value) in seen or isinstance(value, str | int | float | bool | type(None)):
        return
    seen.add(id(value))
    if isinstance(value, dspy.BaseLM):
        if isinstance(getattr(value, "engine", None), BridgeEngine):
            return
        try:
            from_dspy_lm(value)
        except UserInputError as exc:
            raise UserInputError(
                f"{where} is a model skillopt cannot route through its budget: {exc}"
            ) from None
        return
    if isinstance(value, dict):
        for key, item in value.items():
            refuse_unroutable(f"{where}[{key!r}]", item, seen)
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            refuse_unroutable(f"{where}[{index}]", item, seen)
    elif isinstance(value, dspy.Module | dspy.Adapter):
        for name, item in vars(value).items():
            if name != "history":
                refuse_unroutable(f"{where}.{name}", item, seen)


def _route() -> Route | None:
    route = dspy.settings.get(ROUTE_KEY)
    return route if isinstance(route, Route) else None


def _rerouted(target: Any, call: Any, asynchronous: bool) -> tuple[Any, Any]:
    """(lm, call) to execute: a foreign LM's call re-prepared on its bridge, inside a run."""
    route = _route()
    if route is None or route.owns(target):
        return target, call
    bridged = route.bridge(target)
    request = call.request
    if request is not None:
        request = replace(request, model=bridged.model)
    prompt = request if request is not None else call.prompt
    messages = None if request is not None else call.messages
    again = execution.prepare(bridged, prompt, messages, call.kwargs, asynchronous=asynchronous)
    return bridged, again


def _rollout_of(call: Any) -> Any:
    return call.legacy.get("rollout_id", call.kwargs.get("rollout_id"))


_ORIGINAL = getattr(
    execution.execute, "_skillopt_original", (execution.execute, execution.aexecute)
)


def _execute(lm: Any, call: Any) -> Any:
    target, chosen = _rerouted(lm, call, False)
    if not isinstance(getattr(target, "engine", None), BridgeEngine):
        return _ORIGINAL[0](target, chosen)
    token = SAMPLE.set(Sample(_rollout_of(call)))
    try:
        return _ORIGINAL[0](target, chosen)
    finally:
        SAMPLE.reset(token)


async def _aexecute(lm: Any, call: Any) -> Any:
    target, chosen = _rerouted(lm, call, True)
    if not isinstance(getattr(target, "engine", None), BridgeEngine):
        return await _ORIGINAL[1](target, chosen)
    token = SAMPLE.set(Sample(_rollout_of(call)))
    try:
        return await _ORIGINAL[1](target, chosen)
    finally:
        SAMPLE.reset(token)


def _install() -> None:
    """Wrap DSPy's two execution functions (once; `BaseLM` imports them at each call)."""
    if getattr(execution.execute, "_skillopt_route", False):
        return
    for wrapper in (_execute, _aexecute):
        setattr(wrapper, "_skillopt_route", True)  # noqa: B010
        setattr(wrapper, "_skillopt_original", _ORIGINAL)  # noqa: B010
    execution.execute = _execute
    execution.aexecute = _aexecute


_install()
