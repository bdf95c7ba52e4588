"""A sweep's result as records: every trial's settings, score, state and cost, and the best."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from skillopt_dsl.events import TrialRow
from skillopt_dsl.json_types import JSONObject
from skillopt_dsl.skill import Skill

if TYPE_CHECKING:
    import optuna

__all__ = ["SweepResult", "SweepRow", "TrialRecord"]


@dataclass(frozen=True)
class TrialRecord:
    """One trial of a sweep: its settings, score, state and cost (JSON-ready via `to_dict`)."""

    number: int
    state: optuna.trial.TrialState
    params: JSONObject
    value: float | None
    skill_hash: str | None
    run_dir: str | None
    calls: int
    cost_usd: float | None
    stop_reason: str | None

    @classmethod
    def from_trial(cls, trial: optuna.trial.FrozenTrial) -> TrialRecord:
        """Read a finished (or running) trial back from the study."""
        attrs = trial.user_attrs
        text = attrs.get("skill_text")
        return cls(
            number=trial.number,
            state=trial.state,
            params=dict(trial.params),
            value=trial.value if trial.values is not None else None,
            skill_hash=Skill(text).hash if isinstance(text, str) else None,
            run_dir=attrs.get("run_dir"),
            calls=int(attrs.get("calls", 0)),
            cost_usd=attrs.get("cost_usd"),
            stop_reason=attrs.get("stop_reason"),
        )

    def to_dict(self) -> TrialRow:
        """JSON-ready copy (the state by name)."""
        return TrialRow(
            number=self.number,
            state=self.state.name,
            params=copy.deepcopy(self.params),
            value=self.value,
            skill_hash=self.skill_hash,
            run_dir=self.run_dir,
            calls=self.calls,
            cost_usd=self.cost_usd,
            stop_reason=self.stop_reason,
        )


class SweepRow(TypedDict):
    """`SweepResult.to_dict()`: a study as the `sweep` event and the optimizer's state store it."""

    study_name: str
    storage: str | None
    best_number: int | None
    trials: list[TrialRow]
    plots: list[str]


@dataclass(frozen=True)
class SweepResult:
    """Every trial of a study, the best one, and the plots written for it."""

    study_name: str
    storage: str | None
    trials: tuple[TrialRecord, ...]
    best_number: int | None
    plots: tuple[Path, ...] = ()

    @property
    def best(self) -> TrialRecord | None:
        """The best complete trial, or None when no trial completed."""
        return next((t for t in self.trials if t.number == self.best_number), None)

    @classmethod
    def from_study(
        cls, study: optuna.study.Study, storage: str | None, plots: Sequence[Path] = ()
    ) -> SweepResult:
        """Summarise a study (loaded from its storage, or in memory)."""
        trials = tuple(TrialRecord.from_trial(t) for t in study.get_trials(deepcopy=False))
        complete = [t for t in trials if t.state.name == "COMPLETE"]
        best = study.best_trial.number if complete else None
        return cls(study.study_name, storage, trials, best, tuple(plots))

    def to_dict(self) -> SweepRow:
        """JSON-ready copy."""
        return {
            "study_name": self.study_name,
            "storage": self.storage,
            "best_number": self.best_number,
            "trials": [t.to_dict() for t in self.trials],
            "plots": [str(p) for p in self.plots],
        }
