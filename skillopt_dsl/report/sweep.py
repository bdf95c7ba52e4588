"""A sweep's trials for the report: from `sweep.json`, else the run's last `sweep` event
(OptunaLR), else the runs under a `trials/` folder."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skillopt_dsl.errors import RunDirError
from skillopt_dsl.json_types import json_float
from skillopt_dsl.report.record import existing_dir, last_sweep, optimizer_settings, run_records
from skillopt_dsl.runs import RunDirectory, RunFiles

_LR_KEYS = ("lr", "learning_rate")


@dataclass(frozen=True)
class SweepTrial:
    """One trial of a sweep: its parameters, its value (validation score) and its state."""

    number: int
    params: dict[str, Any]
    value: float | None
    state: str
    run_dir: Path | None = None

    @property
    def lr(self) -> float | None:
        """The trial's learning rate, when its parameters name one (`lr` or `learning_rate`)."""
        for key in _LR_KEYS:
            if isinstance(self.params.get(key), int | float):
                return float(self.params[key])
        return None


def load_sweep_trials(sweep_dir: str | Path) -> list[SweepTrial]:
    """The trials of a sweep: from `sweep.json`, else the run's last `sweep` event (OptunaLR),
    else the runs under `trials/`."""
    path = existing_dir(sweep_dir)
    trials = sweep_trials(path, last_sweep(run_records(path)))
    if trials is None:
        raise RunDirError(
            f"{path} is not a sweep: it has no sweep.json, no sweep event and no trials/ folder"
        )
    return trials


def sweep_trials(path: Path, logged: list[Any] | None) -> list[SweepTrial] | None:
    if (path / "sweep.json").is_file():
        data = json.loads((path / "sweep.json").read_text(encoding="utf-8"))
        raw = data.get("trials") if isinstance(data, dict) else data
        return _trials_from_list(raw, path, path / "sweep.json")
    if logged is not None:
        return _trials_from_list(logged, path, RunFiles(path).events)
    if (path / "trials").is_dir():
        return _trials_from_runs(path / "trials")
    return None


def _trials_from_list(raw: Any, sweep: Path, source: Path) -> list[SweepTrial]:
    if not isinstance(raw, list):
        raise RunDirError(f"{source} must hold a list of trials (or {{'trials': [...]}})")
    trials = []
    for index, item in enumerate(raw):
        if not isinstance(item, dict) or not isinstance(item.get("params", {}), dict):
            raise RunDirError(f"{source}: trial {index} is not {{params, value, state}}")
        number = int(item.get("number", index))
        trials.append(
            SweepTrial(
                number=number,
                params=dict(item.get("params", {})),
                value=None if item.get("value") is None else float(item["value"]),
                state=str(item.get("state", "UNKNOWN")),
                run_dir=_trial_dir(sweep, item.get("run_dir"), number),
            )
        )
    return trials


def _is_complete_run(path: Path) -> bool:
    return RunFiles(path).is_complete()


def _trial_dir(sweep: Path, run: object, number: int) -> Path | None:
    """The trial's run directory when it is a complete run (a report can be written for it)."""
    named = [Path(run), sweep / str(run)] if isinstance(run, str) and run else []
    numbered = [sweep / "trials" / n for n in (f"{number:04d}", str(number), f"trial_{number}")]
    return next((p for p in named + numbered if _is_complete_run(p)), None)


def _trials_from_runs(trials_dir: Path) -> list[SweepTrial]:
    trials = []
    runs = sorted(p for p in trials_dir.iterdir() if RunFiles(p).config.is_file())
    for number, run in enumerate(runs):
        trial = RunDirectory(run, create=False)
        config, summary = trial.load_config() or {}, trial.load_summary()
        optimizer = optimizer_settings(config)
        params = {k: optimizer[k] for k in (*_LR_KEYS, "schedule") if k in optimizer}
        score = None if summary is None else summary.get("val_score")
        value = None if score is None else json_float(score)
        state = "COMPLETE" if summary is not None else "RUNNING_OR_KILLED"
        trials.append(
            SweepTrial(number, params, value, state, run if _is_complete_run(run) else None)
        )
    return trials
