"""Live progress for long runs: a rich panel on a terminal, log lines everywhere else.

`CompileProgress` is an `on_event` listener for `compile(...)`. It folds every event into a
`ProgressState` (epoch, step, calls, cost, best validation score, last gate decision). On a
terminal it redraws a small panel; when output is not a terminal (CI, a pipe, a log file) it
logs one line per notable event through `logging` instead, so nothing is lost and nothing is
redrawn.

Example::

    with CompileProgress(console=Console(stderr=True)) as progress:
        result = sd.compile(module, train, val, on_event=progress)
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.table import Table

from skillopt_dsl.events import (
    BaselineEvent,
    EvaluationEvent,
    FinishEvent,
    GateEvent,
    PreflightEvent,
    ProposalEvent,
    ResumeEvent,
    ScreenEvent,
    SeedEvent,
    StepEvent,
    StopEvent,
    TestSkippedEvent,
    as_event,
)

__all__ = ["CompileProgress", "ProgressState"]

logger = logging.getLogger(__name__)


@dataclass
class ProgressState:
    """What the progress display shows, updated from compile events."""

    phase: str = "starting"
    epoch: int | None = None
    total_epochs: int | None = None
    step: int | None = None
    calls: int = 0
    cost_usd: float | None = None
    cost_told: bool = False
    """Whether an event has reported the cost yet (None after one means an unpriced model)."""
    best_val: float | None = None
    seed_val: float | None = None
    constant: str | None = None
    gate_decisions: int = 0
    accepted: int = 0
    last_gate: str = "none yet"
    screened: int = 0
    screen_passed: int = 0
    screen_calls: int = 0

    def update(self, event: str, payload: Mapping[str, object]) -> str | None:
        """Fold one event in; returns a log line when the event is worth one, else None."""
        handler = _HANDLERS.get(event)
        if handler is None:
            return None
        return handler(self, as_event(event, payload))

    def table(self) -> Table:
        """The state as a two-column rich table."""
        table = Table.grid(padding=(0, 2))
        table.add_column(style="bold cyan")
        table.add_column()
        for label, value in self.rows():
            table.add_row(label, value)
        return table

    def rows(self) -> list[tuple[str, str]]:
        """(label, value) pairs, in display order."""
        epochs = "-" if self.epoch is None else str(self.epoch + 1)
        if self.epoch is not None and self.total_epochs is not None:
            epochs += f"/{self.total_epochs}"
        return [
            ("phase", self.phase),
            ("epoch", epochs),
            ("step", "-" if self.step is None else str(self.step)),
            ("calls", str(self.calls)),
            ("cost", _money(self.cost_usd) if self.cost_told else "-"),
            ("best val", _score(self.best_val) + f"  (seed {_score(self.seed_val)})"),
            ("constant", self.constant or "-"),
            ("screen", self.screen_line()),
            ("gate", f"{self.accepted} accepted / {self.gate_decisions} decided"),
            ("last gate", self.last_gate),
        ]

    def screen_line(self) -> str:
        """What screening on training data did: proposals tried, passed, calls spent."""
        if not self.screened:
            return "none yet"
        return (
            f"{self.screen_passed} passed / {self.screened} tried on training data "
            f"({self.screen_calls} calls, no validation)"
        )


def _score(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def _money(value: float | None) -> str:
    return "unknown (unpriced model)" if value is None else f"${value:.4f}"


NO_CONSTANT = "none (the output has no fixed label set)"
"""The constant row once the run has started without a `baseline` event (compile emits one,
for a label output, before its preflight)."""


def _constant_line(baseline: Mapping[str, Any], scored: str = "") -> str:
    """The constant answer as the result table prints it: its label, its validation score
    (on `scored`, e.g. " (12 of 50)", when the run compared on part of validation) and its
    test score."""
    line = f"{baseline['label']!r}: val {_score(baseline.get('val_score'))}{scored}"
    test = baseline.get("test_score")
    return line if test is None else f"{line}, test {_score(test)}"


def _on_preflight(state: ProgressState, payload: PreflightEvent) -> str:
    from skillopt_dsl.evidence import Preflight

    state.constant = state.constant or NO_CONSTANT
    state.phase = "scoring the seed skill on validation (the gate's first look)"
    fields = {k: v for k, v in payload.items() if k != "event"}
    return Preflight.from_dict(fields).statement()


def _on_seed(state: ProgressState, payload: SeedEvent) -> str:
    state.seed_val = state.best_val = float(payload["val_score"])
    state.phase = "optimizing"
    n = payload.get("n")
    return f"seed skill: val {state.seed_val:.4f}" + (f" (first look, {n} examples)" if n else "")


def _on_baseline(state: ProgressState, payload: BaselineEvent) -> str:
    state.constant = _constant_line(payload)
    return f"constant answer {state.constant} (to beat; no model call)"


def _on_resume(state: ProgressState, payload: ResumeEvent) -> str:
    state.phase = "resumed"
    return f"resumed at version {payload.get('version')} after {payload.get('steps')} steps"


def _on_evaluation(state: ProgressState, payload: EvaluationEvent) -> None:
    state.phase = f"scored {payload.get('split', '?')} ({payload.get('n', '?')} examples)"
    return None


def _on_proposal(state: ProgressState, payload: ProposalEvent) -> None:
    state.step = int(payload["step"])
    state.phase = f"proposing ({payload.get('kind', 'step')})"
    return None


def _on_gate(state: ProgressState, payload: GateEvent) -> str:
    state.gate_decisions += 1
    state.step = int(payload["step"])
    state.epoch = int(payload["epoch"])
    verdict = "ACCEPTED" if payload["accepted"] else "rejected"
    candidate, incumbent = float(payload["candidate_score"]), float(payload["incumbent_score"])
    if payload["accepted"]:
        state.accepted += 1
        state.best_val = candidate
    state.last_gate = f"{verdict} step {state.step}: {candidate:.4f} vs {incumbent:.4f}"
    alpha = payload.get("look_alpha") if payload.get("accepted_at_look") else payload.get("alpha")
    evidence = (
        "" if alpha is None else f"; alpha {alpha:.4g}, spent {payload.get('charged') or 0:.4g}"
    )
    return f"gate {state.last_gate} ({payload.get('reason', '')}{evidence})"


def _on_step(state: ProgressState, payload: StepEvent) -> str | None:
    state.step, state.epoch = int(payload["step"]), int(payload["epoch"])
    state.calls = int(payload.get("calls", state.calls))
    state.cost_usd, state.cost_told = payload.get("cost_usd"), True
    incumbent = payload.get("incumbent_score")
    if incumbent is not None:
        state.best_val = float(incumbent)
    note = payload.get("note") or ""
    if payload.get("candidate_hash") is None:
        return f"step {state.step} (epoch {state.epoch + 1}): {note or 'no candidate'}"
    return None


def _on_screen(state: ProgressState, payload: ScreenEvent) -> None:
    state.screened += 1
    state.screen_passed += int(bool(payload["passed"]))
    state.screen_calls += int(payload["calls"])


def _on_stop(state: ProgressState, payload: StopEvent) -> str:
    state.phase = (
        f"search stopped ({payload.get('reason')}): scoring the best skill and the seed for "
        "the result table"
    )
    left = payload.get("calls_left")
    calls_left = "" if left is None else f" ({left} calls left)"
    line = f"search stopped: {payload.get('reason')}{calls_left} {payload.get('detail', '')}"
    return line.rstrip()


def _on_finish(state: ProgressState, payload: FinishEvent) -> str:
    usage = payload.get("usage")
    calls = state.calls if usage is None else usage.get("calls", state.calls)
    cost = state.cost_usd if usage is None else usage.get("cost_usd", state.cost_usd)
    state.calls = calls if isinstance(calls, int) else state.calls
    state.cost_usd = float(cost) if isinstance(cost, int | float) else None
    state.cost_told = True
    state.best_val = float(payload["val_score"])
    state.phase = f"finished ({payload.get('stop_reason')})"
    baseline = payload.get("baseline")
    if baseline is not None:  # rescored where the run compared on part of validation
        scored, size = payload.get("val_examples", 0), payload.get("val_size", 0)
        part = f" ({scored} of {size})" if 0 < scored < size else ""
        state.constant = _constant_line(baseline, part)
    test = payload.get("test_score")
    tested = "" if test is None else f", test {test:.4f}"
    return f"finished: val {state.best_val:.4f}{tested}, {state.calls} search calls"


def _on_test_skipped(state: ProgressState, payload: TestSkippedEvent) -> None:
    state.phase = "test set not scored (test budget)"  # compile() already logs the warning
    return None


_HANDLERS: dict[str, Callable[[ProgressState, Any], str | None]] = {
    "preflight": _on_preflight,
    "seed": _on_seed,
    "baseline": _on_baseline,
    "resume": _on_resume,
    "evaluation": _on_evaluation,
    "proposal": _on_proposal,
    "gate": _on_gate,
    "step": _on_step,
    "screen": _on_screen,
    "stop": _on_stop,
    "finish": _on_finish,
    "test_skipped": _on_test_skipped,
}


class CompileProgress:
    """An `on_event` listener that shows a live panel on a terminal and logs lines otherwise.

    Args:
        console: where the live panel is drawn (use a stderr console to keep stdout clean).
        live: force the live panel on or off; None decides from `console.is_terminal`.
        total_epochs: shown as "epoch 1/N" when known.
    """

    def __init__(
        self, console: Console, *, live: bool | None = None, total_epochs: int | None = None
    ) -> None:
        self.state = ProgressState(total_epochs=total_epochs)
        self._console = console
        use_live = console.is_terminal if live is None else live
        self._live: Live | None = (
            Live(self.state.table(), console=console, refresh_per_second=4, transient=False)
            if use_live
            else None
        )

    def __call__(self, event: str, payload: Mapping[str, object]) -> None:
        """Take one compile event."""
        line = self.state.update(event, payload)
        if self._live is not None:
            self._live.update(self.state.table())
        elif line is not None:
            logger.info(line)

    def __enter__(self) -> CompileProgress:
        if self._live is not None:
            self._live.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._live is not None:
            self._live.stop()
