"""A night's progress: a rich progress bar on a terminal, log lines everywhere else.

`NightProgress` is the `on_event` listener `sleep run` passes to `run_night`. It shows two bars:
mining (sessions done of sessions harvested) and replays (model or agent calls made, out of the
night's `--max-calls` when one is set, else open-ended with the elapsed time). When stderr is not
a terminal it logs one line per stage and per gate decision instead.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import PurePath
from types import TracebackType
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

from skillopt_dsl.types import json_float, json_int

__all__ = ["NightProgress"]

logger = logging.getLogger("skillopt_dsl.sleep.progress")


class NightProgress:
    """An `on_event` listener for `run_night` (see the module docstring).

    Args:
        console: where the bars are drawn (a stderr console keeps stdout for the summary).
        max_calls: the night's call limit, the replay bar's total (None: open-ended).
        live: force the bars on or off; None decides from `console.is_terminal`.
    """

    def __init__(
        self, console: Console, *, max_calls: int | None = None, live: bool | None = None
    ) -> None:
        use_live = console.is_terminal if live is None else live
        self._progress: Progress | None = None
        if use_live:
            self._progress = Progress(
                SpinnerColumn(),
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TextColumn("{task.fields[note]}"),
                console=console,
                transient=False,
            )
        self._max_calls = max_calls
        self._mine: TaskID | None = None
        self._replay: TaskID | None = None

    def __enter__(self) -> NightProgress:
        if self._progress is not None:
            self._progress.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._progress is not None:
            self._progress.stop()

    def __call__(self, event: str, payload: Mapping[str, object]) -> None:
        """Take one night or compile event."""
        handler = getattr(self, f"_on_{event}", None)
        if handler is not None:
            handler(payload)

    # -- events --------------------------------------------------------------------------------
    def _on_harvest(self, payload: Mapping[str, object]) -> None:
        sessions = json_int(payload.get("sessions", 0))
        self._log(
            "harvested %d session(s) of this project (%d redaction(s))",
            sessions,
            json_int(payload.get("redactions_total", 0)),
        )
        if self._progress is not None:
            self._mine = self._progress.add_task("mining", total=max(sessions, 1), note="")

    def _on_mine(self, payload: Mapping[str, object]) -> None:
        if self._progress is not None and self._mine is not None:
            self._progress.update(self._mine, completed=json_int(payload["done"]))

    def _on_consolidate(self, payload: Mapping[str, object]) -> None:
        self._log("replaying %d task(s) under the live files, then proposing", payload["tasks"])
        if self._progress is not None:
            self._replay = self._progress.add_task(
                "replays", total=self._max_calls, note="scoring the live files"
            )

    def _on_preflight(self, payload: Mapping[str, object]) -> None:
        """What the night's gate can certify, said before the replays are paid for."""
        from skillopt_dsl.evidence import Preflight

        # The summary only: compile logs the warning itself (once).
        logger.info("the night's %s", Preflight.from_dict(payload).summary())

    def _on_seed(self, payload: Mapping[str, object]) -> None:
        self._log("live files on val: %.3f", json_float(payload.get("val_score", 0.0)))
        self._note(f"live files on val {json_float(payload.get('val_score', 0.0)):.3f}")

    def _on_step(self, payload: Mapping[str, object]) -> None:
        calls = json_int(payload.get("calls", 0))
        if self._progress is not None and self._replay is not None:
            self._progress.update(self._replay, completed=calls)
        self._log("step %s done (%d calls so far)", payload.get("step"), calls)

    def _on_gate(self, payload: Mapping[str, object]) -> None:
        verdict = "accepted" if payload.get("accepted") else "rejected"
        self._log("gate %s: %s", verdict, payload.get("reason"))
        self._note(f"gate {verdict}")

    def _on_describe(self, payload: Mapping[str, object]) -> None:
        """A skill folder's description trained after the night's own work (`--describe`): on
        the bar's note (the stage logs its own line, so nothing is logged twice)."""
        folder = PurePath(str(payload.get("folder", ""))).name
        self._note(f"described {folder}: {payload.get('status')}")

    def _on_finish(self, payload: Mapping[str, object]) -> None:
        usage = payload.get("usage") or {}
        if self._progress is not None and self._replay is not None:
            calls = json_int(usage.get("calls", 0)) if isinstance(usage, Mapping) else 0
            self._progress.update(self._replay, completed=calls, total=self._max_calls or calls)

    # -- helpers -------------------------------------------------------------------------------
    def _note(self, text: str) -> None:
        if self._progress is not None and self._replay is not None:
            self._progress.update(self._replay, note=text)

    def _log(self, message: str, *args: Any) -> None:
        if self._progress is None:
            logger.info(message, *args)
