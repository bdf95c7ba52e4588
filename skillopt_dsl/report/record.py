"""Reading a run directory for the report: the run's record (steps, gate decisions, seed and
best skill, baseline) through `skillopt_dsl.runs.RunDirectory`, never changing a file."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from skillopt_dsl.baselines import Baseline
from skillopt_dsl.driver import StepRecord, StepRow
from skillopt_dsl.errors import RunDirError, UserInputError
from skillopt_dsl.events import DecisionRecord, RunEvent, TrialRow
from skillopt_dsl.export import load_skill
from skillopt_dsl.gate import GateDecision
from skillopt_dsl.json_types import JSONObject
from skillopt_dsl.runs import RunDirectory

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class GateEntry:
    """One gate decision as logged, with the step and epoch it belonged to."""

    step: int | None
    epoch: int | None
    decision: GateDecision


@dataclass(frozen=True)
class RunRecord:
    """Everything the report shows about one run, read from its directory."""

    path: Path
    config: JSONObject
    summary: dict[str, Any] | None
    steps: list[StepRecord]
    gates: list[GateEntry]
    seed_val_score: float | None
    seed_text: str
    best_text: str
    sweep_trials: list[Any] | None = None
    baseline: Baseline | None = None
    screens: ScreenSummary | None = None

    @property
    def finished(self) -> bool:
        """True when the run wrote summary.json (it ended, by finishing or by its budget)."""
        return self.summary is not None


def load_run(run_dir: str | Path) -> RunRecord:
    """Read a run directory; a missing or unreadable file is a `RunDirError` naming it."""
    path = existing_dir(run_dir)
    run = RunDirectory(path, create=False)
    for name in run.missing_files():
        raise RunDirError(
            f"{path} is not a complete run directory: {name} is missing. "
            "Point the report at the folder given as run_dir to compile()."
        )
    events = run_records(path)
    steps, gates = _steps_and_gates(events)
    return RunRecord(
        path=path,
        config=run.load_config() or {},
        summary=run.load_summary(),
        steps=steps,
        gates=gates,
        seed_val_score=_seed_score(events),
        seed_text=run.files.version(1).read_text(encoding="utf-8"),
        best_text=load_skill(run.files.best).text,
        sweep_trials=last_sweep(events),
        baseline=_baseline(events),
        screens=ScreenSummary.of(events),
    )


@dataclass(frozen=True)
class ScreenSummary:
    """What screening on training data did in a run: proposals tried on their own mini-batch
    and passed, confirmations tried and passed, the calls it spent, and the calls left when
    the search stopped."""

    tried: int
    passed: int
    confirmations: int
    confirmed: int
    calls: int
    calls_left: int | None

    @classmethod
    def of(cls, events: Sequence[RunEvent]) -> ScreenSummary | None:
        """Read the `screen` and `stop` events (None: the run screened nothing)."""
        screens = [e for e in events if e["event"] == "screen"]
        if not screens:
            return None
        batch = [e for e in screens if e["stage"] == "batch"]
        confirm = [e for e in screens if e["stage"] == "confirm"]
        stops = [e for e in events if e["event"] == "stop"]
        return cls(
            tried=len(batch),
            passed=sum(bool(e["passed"]) for e in batch),
            confirmations=len(confirm),
            confirmed=sum(bool(e["passed"]) for e in confirm),
            calls=sum(int(e["calls"]) for e in screens),
            calls_left=stops[-1].get("calls_left") if stops else None,
        )

    def line(self) -> str:
        """One line for the report's summary."""
        left = "" if self.calls_left is None else f"; {self.calls_left} calls left at the stop"
        return (
            f"{self.passed} of {self.tried} proposals passed their mini-batch, "
            f"{self.confirmed} of {self.confirmations} confirmations passed; "
            f"{self.calls} calls, no validation example, no significance{left}"
        )


def optimizer_settings(config: Mapping[str, object]) -> JSONObject:
    """The optimizer's settings from config.json (empty when it recorded none)."""
    settings = config.get("optimizer")
    return dict(settings) if isinstance(settings, dict) else {}


def existing_dir(run_dir: str | Path) -> Path:
    path = Path(run_dir)
    if not path.exists():
        raise UserInputError(f"run directory {str(path)!r} does not exist")
    if not path.is_dir():
        raise UserInputError(f"{str(path)!r} is a file; the report needs a run directory")
    return path


def run_records(path: Path) -> list[RunEvent]:
    """The typed events of the run at `path`, read without changing a file (none: [])."""
    run = RunDirectory(path, create=False)
    run.load_events(repair=False)
    return run.records()


def read_events(path: Path) -> list[JSONObject]:
    """The events of the run folder that holds `path` (its events.jsonl), read without
    changing it: a torn last line (a killed run) is skipped (`RunDirectory.load_events`)."""
    return RunDirectory(path.parent, create=False).load_events(repair=False)


_STEP_FIELDS = {f.name for f in dataclasses.fields(StepRecord)}


_GATE_FIELDS = {f.name for f in dataclasses.fields(GateDecision)}


def _steps_and_gates(
    events: Sequence[RunEvent],
) -> tuple[list[StepRecord], list[GateEntry]]:
    """Step records and gate decisions in order; work redone after a resume is counted once.

    A `resume` event says how many steps the checkpoint held: later records replace whatever
    the killed process logged past that point. A gate decision is always logged just before its
    step record, so it belongs to the step whose index equals the steps seen before it.
    """
    steps: list[StepRecord] = []
    gates: list[tuple[int, GateEntry]] = []
    for event in events:
        if event["event"] == "resume":
            kept = int(event.get("steps", len(steps)))
            del steps[kept:]
            gates = [(index, gate) for index, gate in gates if index < kept]
        elif event["event"] == "step":
            known = {k: v for k, v in event.items() if k in _STEP_FIELDS}
            steps.append(StepRecord(**cast(StepRow, known)))
        elif event["event"] == "gate":
            fields = {k: v for k, v in event.items() if k in _GATE_FIELDS}
            decision = GateDecision.from_dict(cast(DecisionRecord, fields))
            gates.append((len(steps), GateEntry(event["step"], event["epoch"], decision)))
    return steps, [gate for _, gate in gates]


def _baseline(events: Sequence[RunEvent]) -> Baseline | None:
    """The constant baseline the run logged (a `baseline` event), if its output is a label."""
    for event in events:
        if event["event"] == "baseline":
            test = event["test_score"]
            return Baseline(
                label=str(event["label"]),
                val_score=float(event["val_score"]),
                test_score=None if test is None else float(test),
            )
    return None


def _seed_score(events: Sequence[RunEvent]) -> float | None:
    for event in events:
        if event["event"] == "seed" and event["val_score"] is not None:
            return float(event["val_score"])
    return None


def last_sweep(events: Sequence[RunEvent]) -> list[TrialRow] | None:
    """The trial list of the last `sweep` event (written by OptunaLR), if any."""
    found = [e["trials"] for e in events if e["event"] == "sweep"]
    return list(found[-1]) if found and isinstance(found[-1], list) else None


def model_name(identity: Any) -> Any:
    """The model string of a recorded `LM.identity()` (with its endpoint when one was set);
    older runs recorded the bare string."""
    if not isinstance(identity, dict):
        return identity
    base = identity.get("api_base")
    return f"{identity.get('model')} @ {base}" if base else identity.get("model")
