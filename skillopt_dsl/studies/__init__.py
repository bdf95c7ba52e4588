"""The Optuna study that sweep workers share: `storage` opens it under the creation lock,
`claims` says which worker runs which trial and fails a dead worker's trials, `records` reads
it back as a `SweepResult`. `optimizers.optuna_lr.OptunaLR` runs the trials; `sweeps` starts
workers."""

from __future__ import annotations

from skillopt_dsl.studies.claims import fail_orphaned_trials
from skillopt_dsl.studies.records import SweepResult, TrialRecord
from skillopt_dsl.studies.storage import creation_lock, open_storage, open_study

__all__ = [
    "SweepResult",
    "TrialRecord",
    "creation_lock",
    "fail_orphaned_trials",
    "open_storage",
    "open_study",
]
