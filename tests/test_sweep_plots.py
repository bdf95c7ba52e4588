"""A sweep worker draws nothing (issue 51): `run_sweep_worker(plots=True)` returns the plots
request with its compile, and the caller (the CLI, or `draw_study_plots`) draws it."""

from __future__ import annotations

from pathlib import Path

from skillopt_dsl.data import Splits
from skillopt_dsl.optimizers import GradientText, ReflectiveProposer
from skillopt_dsl.report import draw_study_plots
from skillopt_dsl.sweeps import SweepWorkerResult, run_sweep_worker
from skillopt_dsl.testing import ScriptedLM
from skillopt_dsl.testing.contract import (
    TEST,
    TRAIN,
    VAL,
    ContractParity,
    contract_reflector,
    contract_target,
)
from tests.test_house import _graph, _in_folder, reached_from


def test_the_worker_returns_the_plots_request_and_draws_nothing(tmp_path: Path) -> None:
    """Kills: the worker drawing the plots itself (the folder would exist before the caller
    draws), or losing the request on its way out."""
    result = run_sweep_worker(
        ContractParity(),
        Splits(TRAIN, VAL, TEST),
        storage=f"sqlite:///{tmp_path / 'sweep.db'}",
        study_name="s",
        n_trials=2,
        selection_fraction=0.5,
        inner=GradientText(
            proposers=[ReflectiveProposer(read_successes=False)], epochs=1, bench_after=None
        ),
        lm=ScriptedLM(contract_target),
        optimizer_lm=contract_reflector(),
        sampler_seed=1,
        plots=True,
        run_dir=tmp_path / "run",
    )
    assert isinstance(result, SweepWorkerResult) and len(result.trials) >= 2
    assert result.compiled is not None and result.compiled.study_plots is not None
    folder = result.compiled.study_plots.folder
    assert not folder.exists(), "the worker drew the plots itself"
    written = draw_study_plots(result.compiled)
    assert written and all(p.parent == folder and p.is_file() for p in written)


def test_sweeps_import_nothing_of_the_report() -> None:
    """Kills: `sweeps.py` importing the report (even lazily, inside a function) to draw."""
    reached = reached_from("skillopt_dsl.sweeps", _graph())
    assert not sorted(n for n in reached if _in_folder(n, "report", "cli"))
