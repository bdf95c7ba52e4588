"""The house of issue 28: the typed run record, the run directory's one reader, the settings
object, evidence below the gate, the optimizer's after-compile hook, the one CLI harness."""

from __future__ import annotations

import inspect
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from fixtures.sleep.world import make_project
from typer.testing import CliRunner

import skillopt_dsl as sd
from skillopt_dsl.compile import compile_with
from skillopt_dsl.driver import CompileContext
from skillopt_dsl.errors import RunDirError
from skillopt_dsl.evaluate import DEFAULT_THREADS, evaluate
from skillopt_dsl.events import as_event, event_kinds, read_event
from skillopt_dsl.evidence import preflight
from skillopt_dsl.optimizers.base import StudyPlots
from skillopt_dsl.optimizers.gradient_text import GradientText
from skillopt_dsl.report import read_events
from skillopt_dsl.runs import RunDirectory, RunFiles
from skillopt_dsl.settings import CompileSettings
from skillopt_dsl.testing import ScriptedLM
from skillopt_dsl.testing.contract import (
    FIX_EDIT,
    TRAIN,
    VAL,
    ContractParity,
    contract_reflector,
    contract_target,
)


def _write_run(folder: Path, lines: list[str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "events.jsonl").write_text("".join(lines), encoding="utf-8")
    return folder / "events.jsonl"


# Kills: the report's reader cutting a torn line (changing a run it only reads), or the
# resume reader leaving it in place (the next append would glue onto half a line).
def test_the_report_reads_a_torn_run_without_changing_it(tmp_path: Path) -> None:
    seed = json.dumps({"event": "seed", "skill_hash": "a", "val_score": 0.5}) + "\n"
    path = _write_run(tmp_path / "run", [seed, '{"event": "gate", "ste'])
    before = path.read_bytes()
    assert [e["event"] for e in read_events(path)] == ["seed"]
    assert path.read_bytes() == before, "the report changed the run it reads"
    assert [e["event"] for e in RunDirectory(tmp_path / "run").load_events()] == ["seed"]
    assert path.read_bytes() == seed.encode(), "resume did not cut the torn line"


# Kills: a known event kind read back without the fields its readers rely on, or an unknown
# kind refused (an optimizer's own note must stay readable).
def test_events_are_typed_and_checked() -> None:
    gate = as_event("gate", {"step": 1, "epoch": 0, "accepted": True, "candidate_score": 0.9,
                             "incumbent_score": 0.5})  # fmt: skip
    assert gate is not None and gate["event"] == "gate" and gate["accepted"] is True
    with pytest.raises(RunDirError, match="accepted"):
        as_event("gate", {"step": 1, "epoch": 0, "candidate_score": 0.9, "incumbent_score": 0.5})
    assert read_event({"event": "my_optimizer_note", "x": 1}) is None
    with pytest.raises(RunDirError, match="not an event"):
        read_event({"kind": "gate"})
    search = {"screen", "compose", "stop", "proposer", "candidate_sources", "selection_split"}
    assert search <= set(event_kinds())


def test_every_event_a_compile_writes_is_known_and_well_formed(tmp_path: Path) -> None:
    """Kills: a writer that renames a field a reader relies on, or a new kind left untyped."""
    sd.compile(ContractParity(), TRAIN, VAL, lm=ScriptedLM(contract_target, model="fake/t"),
               optimizer_lm=contract_reflector([FIX_EDIT]), run_dir=tmp_path, threads=1)  # fmt: skip
    run = RunDirectory(tmp_path, create=False)
    raw = run.load_events(repair=False)
    unknown = {e["event"] for e in raw} - set(event_kinds())
    assert not unknown, f"event kinds without a record in skillopt_dsl.events: {unknown}"
    assert len(run.records()) == len(raw)


# Kills: a run-directory file name spelled apart from RunFiles (the report would look for a
# file the run never wrote).
def test_run_files_name_what_a_run_writes(tmp_path: Path) -> None:
    sd.compile(ContractParity(), TRAIN, VAL, lm=ScriptedLM(contract_target, model="fake/t"),
               optimizer_lm=contract_reflector([FIX_EDIT]), run_dir=tmp_path, threads=1)  # fmt: skip
    files = RunFiles(tmp_path)
    assert files.is_complete()
    for path in (files.config, files.summary, files.checkpoint, files.cache, files.ledger):
        assert path.is_file(), path
    assert RunDirectory(tmp_path, create=False).missing_files() == []


@dataclass(frozen=True)
class _GateLevels:
    test: str | None = "paired"
    alpha: float = 0.05
    first_share: float = 2 / 3
    early_share: float = 0.25
    looks: tuple[float, ...] = (0.25, 0.5, 0.75)
    min_look: int = 10


# Kills: evidence reaching back into the gate (`gate.significance_budget()`), which a plain
# record of the gate's levels does not have.
def test_preflight_needs_only_the_gate_levels() -> None:
    assert preflight(_GateLevels(), 30, 4) == preflight(sd.Gate(), 30, 4)
    assert preflight(_GateLevels(test=None), 30, 4).first_level is None


# Kills: a front door whose threads default drifts from the one default.
def test_one_default_for_threads() -> None:
    assert inspect.signature(sd.compile).parameters["threads"].default == DEFAULT_THREADS
    assert inspect.signature(evaluate).parameters["threads"].default == DEFAULT_THREADS
    assert CompileSettings().threads == DEFAULT_THREADS


@dataclass
class _HookedGradientText(GradientText):
    seen: list[CompileContext] = field(default_factory=list)

    def study_plots(self, context: CompileContext) -> StudyPlots | None:
        self.seen.append(context)
        return None


# Kills: compile not asking the optimizer's hook (or asking it with another run's context),
# and compile_with not reading the settings it is given.
def test_compile_asks_the_optimizer_after_the_search(tmp_path: Path) -> None:
    optimizer = _HookedGradientText()
    settings = CompileSettings(lm=ScriptedLM(contract_target, model="fake/t"),
                               optimizer_lm=contract_reflector([FIX_EDIT]), run_dir=tmp_path,
                               threads=1, seed=7)  # fmt: skip
    result = compile_with(ContractParity(), TRAIN, VAL, settings, optimizer)
    assert len(optimizer.seen) == 1
    context = optimizer.seen[0]
    assert context.run.path == tmp_path and context.seed == 7 and context.threads == 1
    assert context.settings is settings and result.val_score == 1.0


# Kills: Sleep's CLI letting an unexpected exception out as a traceback.
def test_sleep_cli_reports_an_unexpected_error_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import skillopt_dsl.sleep.cli as sleep_cli

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(sleep_cli, "run_night", broken)
    args = ["run", "--project", str(make_project(tmp_path)), "--heuristic-only"]
    done = CliRunner().invoke(sleep_cli.sleep_app, args)
    assert done.exit_code == 1
    assert isinstance(done.exception, SystemExit), "a traceback escaped"
    assert "Error: RuntimeError: disk on fire (unexpected" in done.output
