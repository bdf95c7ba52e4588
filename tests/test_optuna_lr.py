"""OptunaLR: trials, the enqueued seed configuration, pruning, storage and plots (ScriptedLM only)."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import optuna
import pytest

import skillopt_dsl as sd
from skillopt_dsl.optimizers import GradientText, OptunaLR, ReflectiveProposer
from skillopt_dsl.optimizers.optuna_lr import fail_orphaned_trials, open_storage
from skillopt_dsl.optimizers.proposers import EditGroup, ProposalRequest, Proposer
from skillopt_dsl.report import draw_study_plots, write_sweep_plots
from skillopt_dsl.skill import Add
from skillopt_dsl.sweeps import load_sweep
from skillopt_dsl.testing import ScriptedLM
from skillopt_dsl.testing.contract import (
    FIX_EDIT,
    TRAIN,
    VAL,
    ContractParity,
    contract_reflector,
    contract_target,
)

pytestmark = [
    pytest.mark.filterwarnings("ignore::optuna.exceptions.ExperimentalWarning"),
    # Every test here runs OptunaLR's `n_trials` loop: a loop that never ends must fail (each
    # takes under 10 s; the limit leaves room for a loaded machine), not hang the suite.
    pytest.mark.timeout(120),
]


def inner(**kwargs: Any) -> GradientText:
    kwargs.setdefault("epochs", 2)
    return GradientText(proposers=[ReflectiveProposer(read_successes=False)], **kwargs)


def sweep(
    run_dir: Path | None = None, reflector: ScriptedLM | None = None, **kwargs: Any
) -> sd.CompileResult:
    kwargs.setdefault("inner", inner())
    kwargs.setdefault("plots", False)
    kwargs.setdefault("selection_fraction", 0.5)
    return sd.compile(
        ContractParity(),
        TRAIN,
        VAL,
        optimizer=OptunaLR(**kwargs),
        lm=ScriptedLM(contract_target),
        optimizer_lm=reflector or contract_reflector(),
        run_dir=run_dir,
        threads=1,
    )


def study_of(path: Path) -> optuna.study.Study:
    return optuna.load_study(study_name="s", storage=f"sqlite:///{path}")


def test_trials_record_settings_skill_run_dir_and_cost(tmp_path: Path) -> None:
    db = tmp_path / "sweep.db"
    space = {
        "lr": (0.05, 0.5, "log"),
        "schedule": ["constant", "cosine"],
        "batch_size": (4, 16, "int"),
    }
    result = sweep(
        tmp_path / "run", search_space=space, n_trials=3, storage=f"sqlite:///{db}", study_name="s"
    )
    trials = study_of(db).trials
    assert len(trials) == 3
    assert trials[0].params == {"lr": 0.3, "schedule": "constant", "batch_size": 8}
    for trial in trials:
        json.dumps(trial.user_attrs)  # JSON-serialisable, not Python objects
        assert Path(trial.user_attrs["run_dir"]).name == f"{trial.number:04d}"
        assert (Path(trial.user_attrs["run_dir"]) / "best_skill.md").is_file()
        assert trial.user_attrs["skill_text"].startswith("Answer with one word.")
        assert 4 <= trial.params["batch_size"] <= 16
    assert trials[0].user_attrs["calls"] > 0, "the first trial pays for its calls"
    assert result.val_score == 1.0 and result.improved
    assert [d.accepted for d in result.gate_log] == [True], "one submission, to the outer gate"
    assert result.history[-1].kind == "sweep"


def test_sweep_result_reports_every_trial(tmp_path: Path) -> None:
    storage = str(tmp_path / "sweep.journal")
    sweep(n_trials=3, storage=storage, study_name="j")
    result = load_sweep(storage, "j")
    assert [t.number for t in result.trials] == [0, 1, 2]
    assert result.best is not None and result.best.value == 1.0
    row = result.to_dict()["trials"][0]
    assert row["state"] == "COMPLETE" and set(row["params"]) == {"lr"} and "calls" in row


def test_stored_sweep_resumes_to_n_trials(tmp_path: Path) -> None:
    """Kills: a sweep that does not stop once the study holds `n_trials` finished trials
    (neither the remainder count nor Optuna's MaxTrialsCallback; the killed-worker test below
    kills the remainder count alone)."""
    storage = f"sqlite:///{tmp_path / 'sweep.db'}"
    sweep(n_trials=2, storage=storage, study_name="s")
    sweep(n_trials=3, storage=storage, study_name="s")
    assert len(study_of(tmp_path / "sweep.db").trials) == 3
    sweep(n_trials=3, storage=storage, study_name="s")
    assert len(study_of(tmp_path / "sweep.db").trials) == 3, "a finished sweep runs nothing more"


@pytest.mark.parametrize("name", ["MedianPruner", "WilcoxonPruner"])
def test_pruners_stop_a_setting_that_cannot_learn(tmp_path: Path, name: str) -> None:
    # A floor of 2 tokens clips the fix away (the seed has 5 tokens): that setting cannot learn.
    db = tmp_path / "p.db"
    pruner = (
        optuna.pruners.MedianPruner(n_startup_trials=1)
        if name == "MedianPruner"
        else optuna.pruners.WilcoxonPruner(p_threshold=0.2)
    )
    sweep(
        search_space={"lr_floor_tokens": [128, 2]},
        n_trials=2,
        storage=f"sqlite:///{db}",
        study_name=name,
        sampler=optuna.samplers.BruteForceSampler(seed=0),
        pruner=pruner,
        reflector=contract_reflector([FIX_EDIT]),
    )
    trials = optuna.load_study(study_name=name, storage=f"sqlite:///{db}").trials
    states = {t.params["lr_floor_tokens"]: t.state.name for t in trials}
    assert states == {128: "COMPLETE", 2: "PRUNED"}, name
    pruned = next(t for t in trials if t.state.name == "PRUNED")
    assert pruned.user_attrs["stop_reason"] == "pruned"
    select = round(0.5 * len(TRAIN))  # the selection split the trials' gates decide on
    expected_steps = set(range(select)) if name == "WilcoxonPruner" else {0}
    assert set(pruned.intermediate_values) <= expected_steps
    assert pruned.intermediate_values, "the pruned trial reported before it was stopped"


def test_plots_written_next_to_the_study(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Kills: a sweep's plot request lost between the optimizer and `CompileResult`, or drawn
    by compile itself (compile returns the request; `draw_study_plots` draws it)."""
    storage = f"sqlite:///{tmp_path / 'sweep.db'}"
    result = sweep(n_trials=3, storage=storage, study_name="s", plots=True)
    assert result.study_plots is not None and result.study_plots.folder == tmp_path / "s-plots"
    assert not (tmp_path / "s-plots").exists()  # compile draws nothing
    draw_study_plots(result)
    names = sorted(p.name for p in (tmp_path / "s-plots").iterdir())
    assert names == ["history.png", "importances.png", "score_vs_lr.png"]
    with caplog.at_level(logging.INFO, logger="skillopt_dsl.report"):
        one = optuna.create_study(direction="maximize")
        one.add_trial(
            optuna.trial.create_trial(
                params={"lr": 0.1},
                distributions={"lr": optuna.distributions.FloatDistribution(0.01, 1, log=True)},
                value=0.5,
            )
        )
        written = write_sweep_plots(one, tmp_path / "one")
    assert sorted(p.name for p in written) == ["history.png", "score_vs_lr.png"]
    assert "importance" in caplog.text


def test_bad_settings_are_refused() -> None:
    with pytest.raises(sd.UserInputError, match="not settings of GradientText"):
        OptunaLR(inner=inner(), search_space={"learning_rate": (0.1, 0.5, "log")})
    with pytest.raises(sd.UserInputError, match="low < high"):
        OptunaLR(inner=inner(), search_space={"lr": (0.5, 0.1, "log")})
    with pytest.raises(sd.UserInputError, match="unknown storage"):
        open_storage("redis://localhost")
    with pytest.raises(sd.UserInputError, match="n_trials"):
        OptunaLR(n_trials=0)


KILLED_SWEEP = """
import os, signal, sys
import optuna
import skillopt_dsl as sd
from skillopt_dsl.optimizers import GradientText, OptunaLR, ReflectiveProposer
from skillopt_dsl.testing import ScriptedLM
from skillopt_dsl.testing.contract import (
    TRAIN, VAL, ContractParity, contract_reflector, contract_target,
)

run_dir, storage, kill = sys.argv[1], sys.argv[2], sys.argv[3] == "kill"


class DiesInTrialOne(optuna.samplers.RandomSampler):
    def sample_independent(self, study, trial, name, distribution):
        if kill and trial.number == 1:
            os.kill(os.getpid(), signal.SIGKILL)  # dies inside trial 1: it stays RUNNING
        return super().sample_independent(study, trial, name, distribution)


inner = GradientText(proposers=[ReflectiveProposer(read_successes=False)], epochs=1)
sd.compile(
    ContractParity(), TRAIN, VAL, lm=ScriptedLM(contract_target),
    optimizer_lm=contract_reflector(),
    optimizer=OptunaLR(inner=inner, n_trials=3, storage=storage, study_name="k", plots=False,
                       selection_fraction=0.5, sampler=DiesInTrialOne(seed=0)),
    run_dir=run_dir, resume=not kill, threads=1,
)
"""


def test_a_killed_sweep_resumes_to_exactly_n_trials(tmp_path: Path) -> None:
    """Kills: a resume that runs `n_trials` more trials (4+ COMPLETE here), and one that
    leaves the killed worker's trial RUNNING instead of failing it and re-running its settings."""
    script, run_dir, db = tmp_path / "sweep.py", tmp_path / "run", tmp_path / "k.db"
    script.write_text(KILLED_SWEEP, encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    for mode, code in (("kill", -signal.SIGKILL), ("resume", 0)):
        done = subprocess.run(
            [sys.executable, str(script), str(run_dir), f"sqlite:///{db}", mode],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == code, done.stderr[-2000:]
    trials = study_of_named(db, "k").trials
    states = [t.state.name for t in trials]
    assert states.count("COMPLETE") == 3, states
    assert states.count("FAIL") == 1 and "RUNNING" not in states, states
    failed = next(t for t in trials if t.state.name == "FAIL")
    retried = [t for t in trials if t.system_attrs.get("failed_trial") == failed.number]
    assert len(retried) == 1, "the killed trial was not re-run"
    assert failed.params.items() <= retried[0].params.items(), "the re-run changed its settings"


def test_heartbeat_fails_a_silent_trial_and_re_enqueues_it(tmp_path: Path) -> None:
    """Kills: `open_storage` building RDB storages without a heartbeat (a killed worker's trial
    would stay RUNNING forever for every other worker)."""
    storage = open_storage(f"sqlite:///{tmp_path / 'h.db'}", heartbeat_interval=1, grace_period=1)
    study = optuna.create_study(storage=storage, study_name="h", direction="maximize")
    silent = study.ask({"lr": optuna.distributions.FloatDistribution(0.01, 1, log=True)})
    assert storage is not None
    storage.record_heartbeat(silent._trial_id)  # type: ignore[attr-defined]
    time.sleep(2.1)
    assert fail_orphaned_trials(study, owner=None) == [silent.number]
    trials = study.get_trials()
    assert trials[0].state.name == "FAIL"
    assert trials[1].state.name == "WAITING" and trials[1].params == trials[0].params


def study_of_named(path: Path, name: str) -> optuna.study.Study:
    return optuna.load_study(study_name=name, storage=f"sqlite:///{path}")


def test_racing_workers_never_run_more_than_n_trials(tmp_path: Path) -> None:
    """Kills: a worker starting a fresh trial while the study's last remaining trials still run
    in other workers (the study then ends with n+1 COMPLETE trials): a trial created after
    `n_trials` lower-numbered trials are finished, running or queued is surplus, and a worker
    whose remaining trials are all running elsewhere waits instead of starting one."""
    from skillopt_dsl.studies.claims import all_claimed as _all_claimed
    from skillopt_dsl.studies.claims import is_surplus as _is_surplus

    study = optuna.create_study(
        storage=open_storage(f"sqlite:///{tmp_path / 'race.db'}"), study_name="race"
    )
    done = study.ask()
    study.tell(done, 0.5)
    elsewhere = study.ask()  # RUNNING in another worker
    assert _all_claimed(study, finished=1, n_trials=2)
    late = study.ask()  # a worker that looked before `elsewhere` was created
    assert _is_surplus(late, n_trials=2) and not _is_surplus(elsewhere, n_trials=2)
    assert not _is_surplus(late, n_trials=3) and not _all_claimed(study, 1, n_trials=4)
    in_memory = optuna.create_study()
    in_memory.ask()
    assert not _all_claimed(in_memory, finished=0, n_trials=1), "no heartbeat: never wait"


def test_workers_opening_one_study_together_enqueue_its_first_trial_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kills: the study and its first trial created outside the creation lock: two workers
    that both find the new study empty both enqueue the first trial (the window between the
    look and the enqueue is widened here to 0.3 s, so the race happens every time)."""
    import threading

    from skillopt_dsl.optimizers.optuna_lr import open_study

    storage = f"sqlite:///{tmp_path / 'sweep.db'}"
    open_storage(storage)  # the tables exist: only the study is raced for
    looked = optuna.study.Study.get_trials

    def slow_look(self: optuna.study.Study, *args: Any, **kwargs: Any) -> Any:
        trials = looked(self, *args, **kwargs)
        time.sleep(0.3)
        return trials

    monkeypatch.setattr(optuna.study.Study, "get_trials", slow_look)
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            open_study(storage, "race", sampler=optuna.samplers.RandomSampler(seed=0),
                       pruner=optuna.pruners.NopPruner(), first_trial={"lr": 0.3})  # fmt: skip
        except BaseException as exc:  # reported below, with the trials
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    monkeypatch.undo()
    trials = optuna.load_study(study_name="race", storage=open_storage(storage)).get_trials()
    assert not errors, errors
    assert [t.system_attrs.get("fixed_params") for t in trials] == [{"lr": 0.3}]


class FreshNotes(Proposer):
    """A FAKE proposer: a new useless note at every step."""

    name = "fresh-notes"

    def propose(self, request: ProposalRequest) -> list[EditGroup]:
        text = f"Note {request.step}: be calm."
        return [EditGroup((Add(after=None, text=text),), self.name, True, text)]


def test_a_trial_runs_its_epochs_not_the_whole_call_budget(tmp_path: Path) -> None:
    """Kills: a trial's inner optimizer searching until the sweep's call budget is spent
    (`until_budget`): the first trial would take every call and the others none."""
    db = tmp_path / "sweep.db"
    kwargs: dict[str, Any] = {"n_trials": 3, "storage": f"sqlite:///{db}", "study_name": "s"}
    # a fresh useless note every step: nothing ends a trial but its epochs (or the budget)
    searcher = GradientText(proposers=[FreshNotes()], epochs=1, plateau=None)
    result = sd.compile(
        ContractParity(),
        TRAIN,
        VAL,
        optimizer=OptunaLR(inner=searcher, plots=False, selection_fraction=0.5, **kwargs),
        lm=ScriptedLM(contract_target),
        optimizer_lm=contract_reflector(),
        budget=sd.Budget(max_calls=5_000),
        threads=1,
    )
    trials = study_of(db).trials
    assert [t.state for t in trials] == [optuna.trial.TrialState.COMPLETE] * 3, result.stop_reason
    assert result.usage.calls < 2_000
