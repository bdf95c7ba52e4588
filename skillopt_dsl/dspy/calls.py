"""What one program run did, predictor by predictor, and the copies that keep a program's shape.

- `CallWatch`: a DSPy callback that sees every predictor call of a run, failed ones included
  (DSPy's trace keeps only the calls that returned): which program predictors the run reached,
  and which one's output could not be parsed. A parse failure is attributed to the call that
  raised it, never guessed from field names (two predictors may share them).
- `failure_note`: a model-caused failure (the program raised after its model answered) in
  words, with the end of its traceback, for the score's feedback and the reflection prompt.
- `copy_program`: a deep copy of a DSPy program that keeps aliases aliases (`self.b = self.a`
  stays one predictor) even where `copy.deepcopy` cannot copy an attribute (a lock, a client),
  where DSPy's own `Module.deepcopy` copies each attribute apart and splits them.
"""

from __future__ import annotations

import copy
import threading
import traceback
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import dspy
from dspy.primitives.base_module import BaseModule
from dspy.utils.callback import BaseCallback
from dspy.utils.exceptions import AdapterParseError

__all__ = [
    "ORIGIN",
    "CallWatch",
    "ProgramTrace",
    "copy_program",
    "failure_note",
    "origin",
    "outputs_of",
]

ORIGIN = "_skillopt_predictor"
"""The attribute naming the program predictor a run copy's predictor stands for. Deep copies
keep it, so calls of the copies that `dspy.BestOfN`, `dspy.Refine` or `dspy.Parallel` make are
attributed to the predictor they were copied from."""

_TRACEBACK_FRAMES = 4
_NOTE_CHARS = 1200


@dataclass(frozen=True)
class ProgramTrace:
    """What one program run left for scoring and reflection (kept on `Rollout.trace`).

    Attributes:
        gold: the example as a `dspy.Example`.
        prediction: what the program returned (None when it could not finish).
        trace: DSPy's trace: `(predictor, inputs, prediction)` for every predictor call.
        pred_trace: the entries of `trace` made by the predictor being trained, or by a copy
            of it (`dspy.BestOfN`, `dspy.Refine`, `dspy.Parallel` run deep copies).
        failure: why the rollout scores 0 without calling the metric (an unparseable output,
            naming the expected format); None when the program finished.
        unparsed: the predictors whose output could not be parsed in this run.
        reached: the program predictors the run called (failed calls included).
        predictor: the predictor whose module made the run (`pred_trace` holds its calls).
        lm: the model client the run charged (its ledger and cache): a judge the metric
            calls while scoring this run is charged to it too.
    """

    gold: dspy.Example
    prediction: Any
    trace: tuple[Any, ...]
    pred_trace: tuple[Any, ...]
    failure: str | None = None
    unparsed: tuple[str, ...] = ()
    reached: tuple[str, ...] = ()
    predictor: str | None = None
    lm: Any = field(default=None, compare=False, repr=False)


def outputs_of(prediction: Any) -> dict[str, Any]:
    """The fields of what the program returned (a `dspy.Prediction` or a mapping)."""
    items = getattr(prediction, "items", None)
    if callable(items):
        return dict(items())
    if isinstance(prediction, Mapping):
        return dict(prediction)
    return {"output": prediction}


def origin(predictor: Any) -> str | None:
    """The program predictor a traced predictor is (or was copied from); None for a predictor
    the program does not own (one a wrapper builds on the fly, such as `dspy.Refine`'s)."""
    name = getattr(predictor, ORIGIN, None)
    return name if isinstance(name, str) else None


class CallWatch(BaseCallback):  # type: ignore[misc]
    """Every predictor call of one run (see the module docstring). Thread-safe.

    Attributes:
        reached: the program predictors called in the run, in first-call order (a call that
            failed counts: the program's path went through it).
        unparsed: the program predictors whose call raised `AdapterParseError`.
    """

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()
        self._open: dict[str, str] = {}
        self.reached: list[str] = []
        self.unparsed: list[str] = []

    def on_module_start(self, call_id: str, instance: Any, inputs: dict[str, Any]) -> None:
        """Remember which program predictor this call is (other modules are not tracked)."""
        name = origin(instance) if isinstance(instance, dspy.Predict) else None
        if name is None:
            return
        with self._lock:
            self._open[call_id] = name
            if name not in self.reached:
                self.reached.append(name)

    def on_module_end(
        self, call_id: str, outputs: Any | None, exception: BaseException | None = None
    ) -> None:
        """A call that raised a parse failure names its predictor in `unparsed`."""
        with self._lock:
            name = self._open.pop(call_id, None)
            if name is None or not isinstance(exception, AdapterParseError):
                return
            if name not in self.unparsed:
                self.unparsed.append(name)


def failure_note(exc: BaseException, calls: int, failure_score: float) -> str:
    """A model-caused failure in words: what was raised, after how many model calls, the
    score it gets, and the last frames of its traceback (where the program choked on the
    reply)."""
    frames = traceback.extract_tb(exc.__traceback__)[-_TRACEBACK_FRAMES:]
    where = "".join(traceback.format_list(frames)).rstrip()
    text = (
        f"the program raised {type(exc).__name__}: {exc} after {calls} model call(s); a "
        f"failure caused by the model's reply, scored {failure_score:g}. Traceback (last "
        f"{len(frames)} frames):\n{where}"
    )
    return text if len(text) <= _NOTE_CHARS else text[: _NOTE_CHARS - 3] + "..."


def copy_program(module: Any) -> Any:
    """A deep copy of `module` in which two attributes holding one object still hold one
    object (see the module docstring); an attribute no copy can take is shared."""
    try:
        return copy.deepcopy(module)
    except Exception:  # an attribute deepcopy refuses (a lock, a client, a connection)
        return _copy_module(module, {})


def _copy_module(module: Any, memo: dict[int, Any]) -> Any:
    """DSPy's attribute-by-attribute copy, with one `memo` for the whole program."""
    if id(module) in memo:
        return memo[id(module)]
    new = module.__class__.__new__(module.__class__)
    memo[id(module)] = new
    for name, value in module.__dict__.items():
        setattr(new, name, _copy_value(value, memo))
    return new


def _copy_value(value: Any, memo: dict[int, Any]) -> Any:
    if isinstance(value, BaseModule):
        return _copy_module(value, memo)
    if id(value) in memo:
        return memo[id(value)]
    try:
        return copy.deepcopy(value, memo)
    except Exception:
        try:
            return copy.copy(value)
        except Exception:
            return value
