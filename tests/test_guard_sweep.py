"""Guards on OptunaLR's loop and plots (issue 20's audit): a sweep ends at exactly `n_trials`
(with a timeout, so a loop that never ends fails instead of hanging), and the optimizer plots
nothing: `compile` returns its request (`CompileResult.study_plots`) and draws nothing; the caller
(the CLI, `skillopt_dsl.report.draw_study_plots`) draws the sweep plots. Models are `ScriptedLM` fakes.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import pytest

import skillopt_dsl as sd
from skillopt_dsl.optimizers import GradientText, OptunaLR, ReflectiveProposer
from skillopt_dsl.optimizers import optuna_lr as optuna_lr_module
from skillopt_dsl.report import draw_study_plots
from skillopt_dsl.testing import ScriptedLM
from skillopt_dsl.testing.contract import (
    TRAIN,
    VAL,
    ContractParity,
    contract_reflector,
    contract_target,
)

pytestmark = pytest.mark.filterwarnings("ignore::optuna.exceptions.ExperimentalWarning")


def sweep(run_dir: Path | None, **kwargs: Any) -> sd.CompileResult:
    inner = GradientText(proposers=[ReflectiveProposer(read_successes=False)], epochs=1)
    return sd.compile(
        ContractParity(),
        TRAIN,
        VAL,
        optimizer=OptunaLR(inner=inner, selection_fraction=0.5, **kwargs),
        lm=ScriptedLM(contract_target),
        optimizer_lm=contract_reflector(),
        run_dir=run_dir,
        threads=1,
    )


def sweep_trials(run_dir: Path) -> list[dict[str, Any]]:
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    (last,) = [e for e in events if e["event"] == "sweep"]
    return list(last["trials"])


@pytest.mark.timeout(60)
@pytest.mark.parametrize("stored", [False, True], ids=["in-memory", "sqlite"])
def test_a_sweep_runs_exactly_n_trials_and_ends(tmp_path: Path, stored: bool) -> None:
    """Kills: OptunaLR's `finished < n_trials` turned into `<=`: in memory one trial too many;
    on SQLite (a storage with heartbeats) a loop that waits forever for trials "running
    elsewhere" once every slot is taken, which the timeout fails instead of hanging the suite."""
    storage = f"sqlite:///{tmp_path / 'sweep.db'}" if stored else None
    sweep(tmp_path / "run", n_trials=2, plots=False, storage=storage, study_name="s")
    trials = sweep_trials(tmp_path / "run")
    assert [t["state"] for t in trials] == ["COMPLETE", "COMPLETE"]


def test_the_optimizer_module_does_not_import_the_report() -> None:
    """Kills: an optimizer that plots (imports `skillopt_dsl.report`); optimizers print and
    plot nothing, the caller draws."""
    tree = ast.parse(Path(optuna_lr_module.__file__).read_text(encoding="utf-8"))
    imported = {
        node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module
    } | {
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    }
    assert not {m for m in imported if m.startswith(("skillopt_dsl.report", "matplotlib"))}


@pytest.mark.timeout(120)
def test_compile_returns_the_sweep_plots_the_caller_draws(tmp_path: Path) -> None:
    """Kills: sweep plots lost when the optimizer stopped drawing them (an in-memory study
    with a run directory gets `<run_dir>/sweep-plots/` once the caller draws the request
    compile returned, recorded as a `sweep_plots` event), plots drawn by compile itself, and
    plots asked for when turned off."""
    result = sweep(tmp_path / "on", n_trials=2, plots=True)
    assert not (tmp_path / "on" / "sweep-plots").exists()  # compile draws nothing
    written = draw_study_plots(result)
    names = sorted(p.name for p in (tmp_path / "on" / "sweep-plots").iterdir())
    assert "history.png" in names and "score_vs_lr.png" in names
    assert sorted(p.name for p in written) == names
    events = (tmp_path / "on" / "events.jsonl").read_text().splitlines()
    assert json.loads(events[-1])["event"] == "sweep_plots"
    off = sweep(tmp_path / "off", n_trials=2, plots=False)
    assert off.study_plots is None and draw_study_plots(off) == []
    assert not (tmp_path / "off" / "sweep-plots").exists()
