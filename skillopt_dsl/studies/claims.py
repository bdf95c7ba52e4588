"""How workers sharing one study claim its trials, and fail the ones a dead worker left.

A sweep ends with `n_trials` finished (COMPLETE or PRUNED) trials in its study, counting earlier
runs and other workers. On storages with a heartbeat (RDB), a trial created after `n_trials`
earlier trials were already claimed is surplus (`is_surplus`), and a worker whose remaining
trials all run elsewhere waits (`all_claimed`). A trial left RUNNING by a killed worker is
failed and its settings re-enqueued (`fail_orphaned_trials`).
"""

from __future__ import annotations

import logging
import warnings
from typing import TYPE_CHECKING

from skillopt_dsl.studies.storage import optuna_module, retry_callback

if TYPE_CHECKING:
    import optuna

__all__ = [
    "CLAIM_POLL_S",
    "FINISHED",
    "SurplusTrial",
    "all_claimed",
    "fail_orphaned_trials",
    "finished_trials",
    "has_heartbeat",
    "is_surplus",
]

logger = logging.getLogger(__name__)

FINISHED = ("COMPLETE", "PRUNED")
"""Trial states that count towards `n_trials`."""

CLAIM_POLL_S = 0.5
"""Seconds a worker waits between looks at a study whose remaining trials all run elsewhere."""

_CLAIMING = ("COMPLETE", "PRUNED", "RUNNING", "WAITING")


class SurplusTrial(Exception):
    """A trial created after `n_trials` earlier trials were already claimed; it is failed
    unrun, so a study shared by racing workers ends with exactly `n_trials` finished trials."""


def has_heartbeat(study: optuna.study.Study) -> bool:
    """Whether the study's storage fails trials whose worker died (RDB storages)."""
    interval = getattr(study._storage, "get_heartbeat_interval", lambda: None)()
    return interval is not None


def all_claimed(study: optuna.study.Study, finished: int, n_trials: int) -> bool:
    """True when running trials fill every remaining slot and none is queued; only on storages
    with a heartbeat, where a dead worker's trial cannot stay RUNNING forever."""
    if not has_heartbeat(study):
        return False
    states = [t.state.name for t in study.get_trials(deepcopy=False)]
    return "WAITING" not in states and finished + states.count("RUNNING") >= n_trials


def is_surplus(trial: optuna.trial.Trial, n_trials: int) -> bool:
    """True when `n_trials` lower-numbered trials are finished, running or queued (trial
    numbers are assigned atomically by the storage, so racing workers agree on the order)."""
    if not has_heartbeat(trial.study):
        return False
    earlier = [
        t
        for t in trial.study.get_trials(deepcopy=False)
        if t.number < trial.number and t.state.name in _CLAIMING
    ]
    return len(earlier) >= n_trials


def finished_trials(study: optuna.study.Study) -> int:
    """How many trials of `study` count towards `n_trials` (COMPLETE or PRUNED)."""
    return sum(1 for t in study.get_trials(deepcopy=False) if t.state.name in FINISHED)


def fail_orphaned_trials(study: optuna.study.Study, owner: str | None) -> list[int]:
    """Fail the RUNNING trials no live process will finish, and re-enqueue their settings.

    Those whose heartbeat stopped (RDB storages, after the grace period), and those `owner`
    (this run directory) left RUNNING when it was killed: a run directory belongs to one
    worker, so its RUNNING trials are orphans as soon as it starts again. Returns their numbers.
    """
    optuna = optuna_module()
    from optuna.storages import fail_stale_trials

    before = {t.number for t in study.get_trials(deepcopy=False) if t.state.name == "FAIL"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        fail_stale_trials(study)  # a no-op on storages without a heartbeat
    failed = [
        t.number
        for t in study.get_trials(deepcopy=False)
        if t.state.name == "FAIL" and t.number not in before
    ]
    running = optuna.trial.TrialState.RUNNING
    for trial in study.get_trials(deepcopy=False, states=(running,)):
        if owner is None or trial.user_attrs.get("owner") != owner:
            continue
        # Optuna's storages address trials by their internal id (as fail_stale_trials does).
        storage = study._storage
        storage.set_trial_state_values(trial._trial_id, optuna.trial.TrialState.FAIL)
        retry_callback()(study, storage.get_trial(trial._trial_id))
        failed.append(trial.number)
    if failed:
        logger.info("failed orphaned trials %s; their settings run again", failed)
    return failed
