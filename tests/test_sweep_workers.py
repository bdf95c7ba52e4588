"""Two worker processes share one Optuna study (SQLite, then a JournalFile): no trial is lost or
duplicated, and the study reloads after the workers exit; on SQLite a queued trial is claimed by
one worker only. ScriptedLM only."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from skillopt_dsl.studies.storage import open_storage
from skillopt_dsl.sweeps import load_sweep

WORKER = """
import sys
from skillopt_dsl.data import Splits
from skillopt_dsl.optimizers import GradientText, ReflectiveProposer
from skillopt_dsl.sweeps import run_sweep_worker
from skillopt_dsl.testing import ScriptedLM
from skillopt_dsl.testing.contract import (
    TEST, TRAIN, VAL, ContractParity, contract_reflector, contract_target,
)

storage, study, n_trials, seed = sys.argv[1:5]
run_sweep_worker(
    ContractParity(), Splits(TRAIN, VAL, TEST), storage=storage, study_name=study,
    n_trials=int(n_trials), selection_fraction=0.5,
    # The scripted reflector gives the fix on its third call: no benching of a proposer whose
    # first two edits fail, since this test is about storages, not about benching.
    inner=GradientText(
        proposers=[ReflectiveProposer(read_successes=False)], epochs=1, bench_after=None
    ),
    lm=ScriptedLM(contract_target), optimizer_lm=contract_reflector(), sampler_seed=int(seed),
)
"""


def _run_workers(tmp_path: Path, storage: str, study: str, n_trials: int) -> None:
    script = tmp_path / "worker.py"
    script.write_text(WORKER, encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    workers = [
        subprocess.Popen(
            [sys.executable, str(script), storage, study, str(n_trials), str(seed)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for seed in (1, 2)
    ]
    for worker in workers:
        _, err = worker.communicate(timeout=180)
        assert worker.returncode == 0, err[-2000:]


@pytest.mark.parametrize("kind", ["sqlite", "journal"])
def test_two_workers_share_one_study(tmp_path: Path, kind: str) -> None:
    """Kills: workers that each run `n_trials` (the study would end with 8), and a storage
    that loses or duplicates trials between processes."""
    storage = (
        f"sqlite:///{tmp_path / 'sweep.db'}" if kind == "sqlite" else str(tmp_path / "sweep.log")
    )
    _run_workers(tmp_path, storage, "shared", n_trials=4)
    result = load_sweep(storage, "shared")
    numbers = [t.number for t in result.trials]
    assert sorted(numbers) == list(range(len(numbers))), "a trial was lost or duplicated"
    complete = [t for t in result.trials if t.state.name == "COMPLETE"]
    surplus = [t for t in result.trials if t.state.name == "FAIL" and not t.params]
    assert len(complete) + len(surplus) == len(numbers), "only surplus trials fail, unrun"
    if kind == "sqlite":
        # A heartbeat storage: a worker whose remaining trials all run elsewhere waits, and a
        # trial started in a race is failed unrun, so the study ends with exactly n_trials.
        assert len(complete) == 4, [(t.number, t.state.name) for t in result.trials]
    else:
        # A journal has no heartbeat (a dead worker's trial would stay RUNNING), so workers
        # never wait on each other: one trial in flight may finish, 4 or 5 in all.
        assert 4 <= len(complete) <= 5 and not surplus, numbers
    assert result.trials[0].params == {"lr": 0.3}, "the seed configuration runs first"
    assert result.best is not None and result.best.value == 1.0
    assert all(t.skill_hash is not None and t.calls >= 0 for t in complete)


def test_a_queued_sqlite_trial_is_claimed_by_one_worker_only(tmp_path: Path) -> None:
    """Kills: a plain `RDBStorage` for SQLite (or a claim outside `SqliteStorage`'s lock): two
    workers read a queued trial as WAITING before either writes RUNNING, both run it, and the
    second to finish fails with "Cannot tell a COMPLETE trial" (the flaky two-worker test).

    Two storages on one database, as two workers have, claim each of 30 queued trials at the
    same moment (a barrier before each claim): exactly one claim of each succeeds."""
    import optuna
    from optuna.trial import TrialState

    url = f"sqlite:///{tmp_path / 'sweep.db'}"
    study = optuna.create_study(storage=open_storage(url), study_name="claims")
    for lr in range(30):
        study.enqueue_trial({"lr": lr})
    ids = [t._trial_id for t in study.get_trials(deepcopy=False)]
    claims = {trial_id: 0 for trial_id in ids}
    together = threading.Barrier(2)
    errors: list[BaseException] = []

    def worker(storage: optuna.storages.BaseStorage) -> None:
        try:
            for trial_id in ids:
                together.wait(timeout=30)
                if storage.set_trial_state_values(trial_id, TrialState.RUNNING):
                    claims[trial_id] += 1  # one int update under the GIL
        except BaseException as exc:  # reported below, not lost in the thread
            together.abort()
            errors.append(exc)

    # opened here, one after the other: `open_storage` silences Optuna's warnings with
    # `warnings.catch_warnings`, which is not thread-safe (workers are processes)
    storages = [open_storage(url) for _ in range(2)]
    threads = [threading.Thread(target=worker, args=(s,)) for s in storages]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors, errors
    twice = [trial_id for trial_id, n in claims.items() if n > 1]
    assert not twice and set(claims.values()) == {1}, claims
