"""The `skillopt-dsl` command line, driven through typer's runner and (for Ctrl-C) a subprocess.

Every recipe here is written into tmp_path and backed by ScriptedLM fakes: the target answers
right only when the skill says "divisible by 2", the reflector proposes a useless edit first and
the right one once it has seen a rejection.
"""

from __future__ import annotations

import io
import json
import logging
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from typer.testing import CliRunner

from skillopt_dsl import cli
from skillopt_dsl.export import load_skill, split_front_matter
from skillopt_dsl.lm import LM
from skillopt_dsl.progress import CompileProgress, ProgressState
from skillopt_dsl.testing import ScriptedLM

REPO = Path(__file__).resolve().parents[1]
runner = CliRunner()

RECIPE = '''"""Parity with scripted fakes (tests only)."""
import json
import os
import time
from typing import Literal

import skillopt_dsl as sd
from skillopt_dsl.lm import LM
from skillopt_dsl.optimizers import GradientText, ReflectiveProposer
from skillopt_dsl.testing import ScriptedLM
from skillopt_dsl.types import Example

SLEEP = {sleep}
GOOD = {{"kind": "add", "after": None, "text": "Check if the number is divisible by 2.", "rationale": "parity"}}
NOISE = {{"kind": "add", "after": None, "text": "Be brief.", "rationale": "style"}}


class Parity(sd.SkillModule):
    """Say whether a number is even or odd."""

    number: str = sd.InputField()
    answer: Literal["even", "odd"] = sd.OutputField()

    skill = "Answer with one word."
    metric = sd.metrics.exact_match("answer")


def _examples(start, count):
    return [
        Example(id=f"n{{n}}", inputs={{"number": str(n)}}, labels={{"answer": "even" if n % 2 == 0 else "odd"}})
        for n in range(start, start + count)
    ]


_BLOCK_AFTER = int(os.environ.get("SKILLOPT_TEST_BLOCK_AFTER_CALLS", "0"))
_CALLS = []


def _target(messages):
    time.sleep(SLEEP)
    _CALLS.append(1)
    while _BLOCK_AFTER and len(_CALLS) > _BLOCK_AFTER:
        time.sleep(0.05)  # hold the run here until the test's SIGINT arrives
    system = next((m["content"] for m in messages if m["role"] == "system"), "")
    number = int(messages[-1]["content"])
    if "divisible by 2" in system:
        return "even" if number % 2 == 0 else "odd"
    return "odd"


def _reflect(messages):
    seen = "Already tried and rejected" in messages[-1]["content"]
    return json.dumps({{"edits": [GOOD] if seen else [NOISE]}})


module = Parity()
splits = sd.Splits(train=_examples(0, 16), val=_examples(100, 30), test=_examples({test_start}, {test_count}))
lm = LM(ScriptedLM(_target))
optimizer_lm = LM(ScriptedLM(_reflect, model="scripted/reflector"))
{optimizer}
'''

GRADIENT = (
    "optimizer = GradientText(proposers=[ReflectiveProposer(read_successes=False)], "
    "epochs=2, batch_size=4)"
)


def write_recipe(
    folder: Path,
    name: str = "parity.py",
    *,
    sleep: float = 0.0,
    test_count: int = 10,
    optimizer: str = GRADIENT,
) -> Path:
    path = folder / name
    text = RECIPE.format(sleep=sleep, test_start=200, test_count=test_count, optimizer=optimizer)
    path.write_text(text, encoding="utf-8")
    return path


def invoke(*args: str | Path) -> object:
    return runner.invoke(cli.app, [str(a) for a in args])


@pytest.fixture
def recipe(tmp_path: Path) -> Path:
    return write_recipe(tmp_path)


@pytest.fixture
def finished_run(tmp_path: Path, recipe: Path) -> Path:
    run_dir = tmp_path / "run"
    result = invoke("compile", recipe, "--run-dir", run_dir, "--threads", "1")
    assert result.exit_code == 0, result.output
    return run_dir


# -- compile -----------------------------------------------------------------------------------
def test_compile_prints_scores_and_writes_the_best_skill(tmp_path: Path, recipe: Path) -> None:
    run_dir = tmp_path / "run"
    result = invoke("compile", recipe, "--run-dir", run_dir)
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "validation" in out and "0.5000" in out and "1.0000" in out and "+0.5000" in out
    assert "test" in out
    assert f"best skill: {run_dir / 'best_skill.md'}" in out
    assert "calls:" in out and "cache hits:" in out and "tokens:" in out and "wall time:" in out
    assert "divisible by 2" in load_skill(run_dir / "best_skill.md").text
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["test_score"] == 1.0 and summary["seed_test_score"] == 0.5
    # Kills: a screen without the gate's evidence (each decision's alpha, what it needed and
    # spent) or without what the gate could certify at this validation size.
    assert "gate decisions: the evidence each needed and had" in out
    assert "ACCEPTED" in out and "alpha" in out and "spent" in out and "needed" in out
    assert "the first decision (alpha" in out and "passes it about half the time" in out


def test_compile_shows_the_constant_answer_and_test_figures_after_a_budget_stop(
    tmp_path: Path, recipe: Path
) -> None:
    """Kills: the constant-answer column dropped from the compile screen, no warning line when
    the skill only ties the constant answer, and no test figures after a budget stop (test
    scored through the spent search budget)."""
    run_dir = tmp_path / "run"
    result = invoke("compile", recipe, "--run-dir", run_dir, "--max-calls", "32", "--threads", "1")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "stopped: budget" in out
    assert "constant 'even'" in out and "vs constant" in out
    test_row = next(line for line in out.splitlines() if "│ test" in line)
    assert test_row.count("0.5000") == 3, "seed, constant and compiled test scores are all shown"
    assert "WARNING: the skill does not beat the constant answer 'even' on test" in out
    assert "(not charged to the search budget)" in out
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["usage"]["calls"] <= 32 and summary["test_usage"]["calls"] == 10


def test_compile_default_run_dir_is_under_runs(
    tmp_path: Path, recipe: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = invoke("compile", recipe)
    assert result.exit_code == 0, result.output
    runs = list((tmp_path / "runs").glob("parity-*Z"))
    assert len(runs) == 1 and (runs[0] / "best_skill.md").is_file()


def test_compile_flags_override_the_recipe(tmp_path: Path, recipe: Path) -> None:
    run_dir = tmp_path / "run"
    result = invoke(
        "compile",
        recipe,
        "--run-dir",
        run_dir,
        "--lr",
        "0.5",
        "--epochs",
        "1",
        "--batch-size",
        "8",
        "--seed",
        "3",
    )
    assert result.exit_code == 0, result.output
    config = json.loads((run_dir / "config.json").read_text())
    assert config["optimizer"]["lr"] == 0.5
    assert config["optimizer"]["epochs"] == 1
    assert config["optimizer"]["batch_size"] == 8
    assert config["seed"] == 3


def test_compile_budget_flag_stops_the_run(tmp_path: Path, recipe: Path) -> None:
    run_dir = tmp_path / "run"
    result = invoke("compile", recipe, "--run-dir", run_dir, "--max-calls", "30", "--threads", "1")
    assert result.exit_code == 0, result.output
    assert "stopped: budget" in result.stdout
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["usage"]["calls"] <= 30


def test_compile_with_beam_optimizer(tmp_path: Path, recipe: Path) -> None:
    pytest.importorskip("skillopt_dsl.optimizers.beam")
    run_dir = tmp_path / "run"
    result = invoke("compile", recipe, "--optimizer", "beam", "--run-dir", run_dir, "--lr", "0.4")
    assert result.exit_code == 0, result.output
    config = json.loads((run_dir / "config.json").read_text())
    assert config["optimizer"]["optimizer"] == "beam"
    assert config["optimizer"]["lr"] == 0.4


def test_compile_with_bundle_optimizer(tmp_path: Path, recipe: Path) -> None:
    """Kills: `--optimizer bundle` accepted by the flag's choices but not mapped to `Bundle`
    (the recipe's optimizer would run instead)."""
    run_dir = tmp_path / "run"
    result = invoke(
        "compile", recipe, "--optimizer", "bundle", "--run-dir", run_dir, "--max-calls", "60"
    )
    assert result.exit_code == 0, result.output
    config = json.loads((run_dir / "config.json").read_text())
    assert config["optimizer"]["optimizer"] == "bundle"


def test_compile_with_the_hand_off_sets_each_search(tmp_path: Path, recipe: Path) -> None:
    """Kills: `--optimizer hand-off` not mapped to `HandOff` (the recipe's GradientText would
    run), and a setting flag that reaches only one of its two searches (`--lr` set on
    GradientText while Bundle keeps its own)."""
    run_dir = tmp_path / "run"
    args = ("--optimizer", "hand-off", "--lr", "0.4", "--batch-size", "6", "--max-calls", "60")
    result = invoke("compile", recipe, *args, "--run-dir", run_dir)
    assert result.exit_code == 0, result.output
    config = json.loads((run_dir / "config.json").read_text())["optimizer"]
    assert config["optimizer"] == "hand-off"
    assert config["first"]["lr"] == config["then"]["lr"] == 0.4
    assert config["first"]["batch_size"] == 6
    assert config["first"]["proposers"] == config["then"]["proposers"]


def test_override_the_optimizer_lacks_is_an_error(tmp_path: Path, recipe: Path) -> None:
    pytest.importorskip("skillopt_dsl.optimizers.beam")
    result = invoke(
        "compile", recipe, "--optimizer", "beam", "--epochs", "2", "--run-dir", tmp_path / "r"
    )
    assert result.exit_code == 1
    assert "--epochs does not apply to the Beam optimizer" in result.output
    assert not (tmp_path / "r").exists()


def test_compile_with_optuna_optimizer(tmp_path: Path, recipe: Path) -> None:
    pytest.importorskip("skillopt_dsl.optimizers.optuna_lr")
    searched = invoke("compile", recipe, "--optimizer", "optuna", "--lr", "0.2")
    assert (
        searched.exit_code == 1 and "--lr is searched by the OptunaLR optimizer" in searched.output
    )
    run_dir = tmp_path / "run"
    args = ("--optimizer", "optuna", "--epochs", "1", "--batch-size", "16", "--run-dir", run_dir)
    result = invoke("compile", recipe, *args)
    assert result.exit_code == 0, result.output
    config = json.loads((run_dir / "config.json").read_text())
    assert config["optimizer"]["optimizer"] == "optuna-lr"
    assert config["optimizer"]["inner"]["epochs"] == 1
    assert "stopped: finished" in result.stdout
    # Kills: the CLI not drawing the sweep plots compile returned (compile draws nothing).
    assert (run_dir / "sweep-plots" / "history.png").is_file()
    assert f"sweep plots: {run_dir / 'sweep-plots'}" in result.stdout


def test_override_on_a_custom_optimizer_without_the_field(tmp_path: Path) -> None:
    custom = (
        "from dataclasses import dataclass\n"
        "from skillopt_dsl.optimizers import Optimizer\n\n"
        "@dataclass\nclass _Fixed(Optimizer):\n    name: str = 'fixed'\n"
        "    def optimize(self, context):\n        return None\n"
        "    def config(self):\n        return {'optimizer': 'fixed'}\n\n"
        "optimizer = _Fixed()"
    )
    path = write_recipe(tmp_path, optimizer=custom)
    result = invoke("compile", path, "--lr", "0.2", "--run-dir", tmp_path / "r")
    assert result.exit_code == 1
    assert "--lr does not apply to the _Fixed optimizer" in result.output


def test_bad_lr_is_one_clear_error(tmp_path: Path, recipe: Path) -> None:
    result = invoke("compile", recipe, "--lr", "2", "--run-dir", tmp_path / "r")
    assert result.exit_code == 1
    assert "lr must be in (0, 1]" in result.output
    assert "Traceback" not in result.output


def test_missing_recipe_is_one_clear_error(tmp_path: Path) -> None:
    result = invoke("compile", tmp_path / "nope.py")
    assert result.exit_code == 1
    assert result.output.startswith("Error: recipe")
    assert "is not a Python file" in result.output and "Traceback" not in result.output


def test_recipe_that_raises_is_one_message_unless_debug(tmp_path: Path) -> None:
    broken = tmp_path / "broken.py"
    broken.write_text("x = 1 / 0\n", encoding="utf-8")
    result = invoke("compile", broken)
    assert result.exit_code == 1
    assert "failed to load: ZeroDivisionError" in result.output
    # one line for the error, after the one that said the recipe was loading
    assert result.output.strip().splitlines()[0].startswith(f"loading {broken} ")
    assert len(result.output.strip().splitlines()) == 2
    debug = invoke("compile", broken, "--debug")
    assert debug.exit_code != 0
    assert debug.exception is not None and not isinstance(debug.exception, SystemExit)


def test_recipe_typo_in_a_setting_name_is_an_error(tmp_path: Path) -> None:
    path = write_recipe(tmp_path, optimizer=GRADIENT.replace("optimizer =", "optimiser =", 1))
    result = invoke("compile", path, "--run-dir", tmp_path / "r")
    assert result.exit_code == 1
    assert "did you mean `optimizer`" in result.output


def test_recipe_missing_splits_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "nosplits.py"
    path.write_text("from skillopt_dsl.benchmarks.tasks import Navigate\nmodule = Navigate()\n")
    result = invoke("compile", path)
    assert result.exit_code == 1
    assert "must define `splits`" in result.output


def test_unknown_option_is_an_error(recipe: Path) -> None:
    result = invoke("compile", recipe, "--learning-rate", "0.1")
    assert result.exit_code == 2
    assert "No such option" in result.output


def test_unknown_optimizer_name_is_an_error(recipe: Path) -> None:
    result = invoke("compile", recipe, "--optimizer", "adam")
    assert result.exit_code == 2
    assert "gradient-text" in result.output


def test_unknown_local_model_lists_the_local_models(tmp_path: Path, recipe: Path) -> None:
    result = invoke("compile", recipe, "--model", "local/nope", "--run-dir", tmp_path / "r")
    assert result.exit_code == 1
    assert "Unknown local model 'local/nope'" in result.output
    assert "local/smollm2-135m" in result.output
    assert not (tmp_path / "r").exists()
    reflector = invoke(
        "compile", recipe, "--optimizer-model", "local/nope2", "--run-dir", tmp_path / "r"
    )
    assert reflector.exit_code == 1 and "Unknown local model 'local/nope2'" in reflector.output


def test_resume_needs_a_run_dir(recipe: Path, tmp_path: Path) -> None:
    result = invoke("compile", recipe, "--resume")
    assert result.exit_code == 1 and "--resume needs the run to continue" in result.output
    missing = invoke("compile", recipe, "--resume", "--run-dir", tmp_path / "none")
    assert missing.exit_code == 1 and "there is no run to resume" in missing.output


def test_compile_into_a_finished_run_without_resume_is_refused(
    finished_run: Path, recipe: Path
) -> None:
    result = invoke("compile", recipe, "--run-dir", finished_run)
    assert result.exit_code == 1
    assert "already holds a run" in result.output


def test_resume_with_different_settings_is_refused(finished_run: Path, recipe: Path) -> None:
    result = invoke("compile", recipe, "--run-dir", finished_run, "--resume", "--lr", "0.9")
    assert result.exit_code == 1
    assert "settings differ" in result.output


# -- Ctrl-C and --resume -----------------------------------------------------------------------
def _cli_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "skillopt_dsl.cli", *args]


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _wait_for_gate(events: Path, process: subprocess.Popen[str], timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if events.exists() and '"event": "gate"' in events.read_text(encoding="utf-8"):
            return
        if process.poll() is not None:
            raise AssertionError(f"compile ended before a gate decision: {process.communicate()}")
        time.sleep(0.02)
    raise AssertionError("no gate decision within the timeout")


def _events(run_dir: Path, kind: str) -> list[dict[str, Any]]:
    lines = (run_dir / "events.jsonl").read_text(encoding="utf-8").splitlines()
    return [e for e in map(json.loads, lines) if e["event"] == kind]


def test_ctrl_c_stops_cleanly_and_resume_finishes_the_same_run(tmp_path: Path) -> None:
    recipe = write_recipe(tmp_path, sleep=0.03)
    run_dir = tmp_path / "interrupted"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    whole = invoke("compile", recipe, "--run-dir", tmp_path / "whole", "--threads", "1")
    assert whole.exit_code == 0, whole.output
    # The uninterrupted run says how many calls reach its first gate decision (seed
    # validation, screened training steps, the candidate's validation); the fake target then
    # blocks until SIGINT, so the signal always lands mid-run however loaded the machine is.
    first_gate = next(
        s["calls"] for s in _events(tmp_path / "whole", "step") if s["candidate_hash"]
    )
    process = subprocess.Popen(
        _cli_command("compile", str(recipe), "--run-dir", str(run_dir), "--threads", "1"),
        cwd=tmp_path,
        env={**env, "SKILLOPT_TEST_BLOCK_AFTER_CALLS": str(first_gate)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # As in a terminal: a runner started as a background job inherits SIGINT ignored.
        preexec_fn=_default_sigint,
    )
    _wait_for_gate(run_dir / "events.jsonl", process)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    assert "Traceback" not in stderr
    assert f"The best skill so far is in {run_dir / 'best_skill.md'}" in stderr
    assert (run_dir / "best_skill.md").is_file() and not (run_dir / "summary.json").exists()
    resume_line = stderr.split("Resume with:")[1].strip().splitlines()[0]
    words = shlex.split(resume_line)
    assert words[:2] == ["skillopt-dsl", "compile"] and words[-1] == "--resume"

    resumed = subprocess.run(
        _cli_command(*words[1:]), cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert resumed.returncode == 0, resumed.stderr
    resumed_summary = json.loads((run_dir / "summary.json").read_text())
    whole_summary = json.loads((tmp_path / "whole" / "summary.json").read_text())
    assert load_skill(run_dir / "best_skill.md") == load_skill(tmp_path / "whole" / "best_skill.md")
    for key in ("best_skill_hash", "val_score", "gate_decisions", "accepted_steps", "steps"):
        assert resumed_summary[key] == whole_summary[key], key


# -- eval and transfer -------------------------------------------------------------------------
def test_eval_scores_a_skill_file(tmp_path: Path, recipe: Path) -> None:
    skill = tmp_path / "skill.md"
    skill.write_text("Check if the number is divisible by 2.", encoding="utf-8")
    result = invoke("eval", skill, "--recipe", recipe, "--split", "val")
    assert result.exit_code == 0, result.output
    assert "mean: 1.0000" in result.stdout
    assert "examples: 30  correct: 30  model errors: 0" in result.stdout
    seed = tmp_path / "seed.md"
    seed.write_text("Answer with one word.", encoding="utf-8")
    default_split = invoke("eval", seed, "--recipe", recipe)
    assert "parity/test" in default_split.stdout and "mean: 0.5000" in default_split.stdout


def test_eval_shows_the_seed_and_the_constant_answer_and_warns(
    tmp_path: Path, recipe: Path
) -> None:
    """Kills: eval without the constant answer or the seed beside the skill, and eval silent
    when the skill only ties the constant answer (or warning for one that beats it)."""
    seed = tmp_path / "seed.md"
    seed.write_text("Answer with one word.", encoding="utf-8")
    tied = invoke("eval", seed, "--recipe", recipe)
    assert tied.exit_code == 0, tied.output
    assert "constant 'even'" in tied.stdout
    assert "WARNING: the skill does not beat the constant answer 'even' on test: 0.5000" in (
        tied.stdout
    )
    good = tmp_path / "good.md"
    good.write_text("Check if the number is divisible by 2.", encoding="utf-8")
    beats = invoke("eval", good, "--recipe", recipe, "--split", "val")
    assert beats.exit_code == 0, beats.output
    row = next(line for line in beats.stdout.splitlines() if "│ validation" in line)
    assert [cell.strip() for cell in row.strip("│ ").split("│")] == [
        "validation",
        "0.5000",
        "0.5000",
        "1.0000",
        "+0.5000",
        "+0.5000",
    ]
    assert "WARNING" not in beats.stdout
    alone = invoke("eval", good, "--recipe", recipe, "--no-compare-seed")
    assert alone.exit_code == 0 and "mean: 1.0000" in alone.stdout


def test_eval_reads_an_exported_best_skill(finished_run: Path, recipe: Path) -> None:
    result = invoke("eval", finished_run / "best_skill.md", "--recipe", recipe)
    assert result.exit_code == 0, result.output
    assert "mean: 1.0000" in result.stdout


def test_eval_errors(tmp_path: Path, recipe: Path) -> None:
    missing = invoke("eval", tmp_path / "none.md", "--recipe", recipe)
    assert missing.exit_code == 1 and "does not exist" in missing.output
    skill = tmp_path / "skill.md"
    skill.write_text("x", encoding="utf-8")
    bad_split = invoke("eval", skill, "--recipe", recipe, "--split", "dev")
    assert bad_split.exit_code == 2
    empty = write_recipe(tmp_path, "empty_test.py", test_count=0)
    no_test = invoke("eval", skill, "--recipe", empty)
    assert no_test.exit_code == 1 and "empty test split" in no_test.output
    bad_model = invoke("eval", skill, "--recipe", recipe, "--model", "local/nope")
    assert bad_model.exit_code == 1 and "local/smollm2-135m" in bad_model.output


def test_eval_with_a_model_whose_every_call_fails(tmp_path: Path, recipe: Path) -> None:
    skill = tmp_path / "skill.md"
    skill.write_text("x", encoding="utf-8")
    result = invoke(
        "eval", skill, "--recipe", recipe, "--model", "openai/not-a-model", "--max-errors", "100"
    )
    assert result.exit_code == 1
    assert "every model call failed" in result.output and "openai/not-a-model" in result.output


def _fake_models(monkeypatch: pytest.MonkeyPatch) -> None:
    """`--models smart,dumb`: smart follows the skill, dumb always answers 'odd'."""

    def smart(messages: list[dict[str, str]]) -> str:
        number = int(messages[-1]["content"])
        if "divisible by 2" in messages[0]["content"]:
            return "even" if number % 2 == 0 else "odd"
        return "odd"

    answers = {"fake/smart": smart, "fake/dumb": lambda messages: "odd"}
    monkeypatch.setattr(
        cli, "_lm_for", lambda model, base: LM(ScriptedLM(answers[model], model=model))
    )


def test_transfer_prints_a_row_per_model(
    tmp_path: Path, recipe: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fake_models(monkeypatch)
    skill = tmp_path / "skill.md"
    skill.write_text("Check if the number is divisible by 2.", encoding="utf-8")
    result = invoke("transfer", skill, "--recipe", recipe, "--models", "fake/smart,fake/dumb")
    assert result.exit_code == 0, result.output
    rows = {line.split()[1]: line for line in result.stdout.splitlines() if "fake/" in line}
    assert "+0.5000" in rows["fake/smart"] and "1.0000" in rows["fake/smart"]
    assert "+0.0000" in rows["fake/dumb"]


def test_transfer_errors(tmp_path: Path, recipe: Path) -> None:
    skill = tmp_path / "skill.md"
    skill.write_text("x", encoding="utf-8")
    bad = invoke("transfer", skill, "--recipe", recipe, "--models", "local/smollm2-135m,local/nope")
    assert bad.exit_code == 1 and "Unknown local model 'local/nope'" in bad.output
    empty = invoke("transfer", skill, "--recipe", recipe, "--models", " , ")
    assert empty.exit_code == 1 and "--models needs at least one model" in empty.output
    missing = invoke("transfer", skill, "--recipe", recipe)
    assert missing.exit_code == 2 and "--models" in missing.output


# -- report and export -------------------------------------------------------------------------
def test_report_writes_files(finished_run: Path) -> None:
    pytest.importorskip("skillopt_dsl.report")
    result = invoke("report", finished_run)
    assert result.exit_code == 0, result.output
    written = [Path(line) for line in result.stdout.splitlines() if line.strip()]
    assert any(p.name == "report.html" for p in written)
    assert all(p.is_file() and p.stat().st_size > 0 for p in written)


def test_report_of_a_missing_dir_is_an_error(tmp_path: Path) -> None:
    result = invoke("report", tmp_path / "nope")
    assert result.exit_code == 1 and "does not exist" in result.output


def test_export_md_and_agent_skill(finished_run: Path, tmp_path: Path) -> None:
    best = load_skill(finished_run / "best_skill.md")
    out = tmp_path / "exported.md"
    md = invoke("export", finished_run, "--format", "md", "--out", out)
    assert md.exit_code == 0, md.output
    assert load_skill(out) == best
    meta, _ = split_front_matter(out.read_text())
    assert meta["val_score"] == 1.0 and meta["name"] == "Parity"
    agent = invoke("export", finished_run, "--format", "agent-skill", "--out", tmp_path / "skills")
    assert agent.exit_code == 0, agent.output
    target = tmp_path / "skills" / "parity" / "SKILL.md"
    assert agent.stdout.strip() == str(target.resolve())
    meta, body = split_front_matter(target.read_text())
    assert body == best.text and meta["description"] == "Say whether a number is even or odd."
    assert meta["metadata"]["val_score"] == 1.0


def test_export_errors(tmp_path: Path, finished_run: Path) -> None:
    not_a_run = invoke("export", tmp_path, "--out", tmp_path / "x.md")
    assert not_a_run.exit_code == 1 and "is not a run directory" in not_a_run.output
    bad_format = invoke("export", finished_run, "--format", "pdf", "--out", tmp_path / "x")
    assert bad_format.exit_code == 2


# -- sweep -------------------------------------------------------------------------------------
def test_sweep_runs_trials_into_a_shared_storage(tmp_path: Path, recipe: Path) -> None:
    sweeps = pytest.importorskip("skillopt_dsl.sweeps")
    if not hasattr(sweeps, "run_sweep_worker"):
        pytest.skip("skillopt_dsl.sweeps.run_sweep_worker is not written yet")
    storage = f"sqlite:///{tmp_path / 'sweep.db'}"
    args = (
        "sweep",
        recipe,
        "--n-trials",
        "2",
        "--storage",
        storage,
        "--study",
        "s1",
        "--run-dir",
        tmp_path / "sweep",
    )
    result = invoke(*args)
    assert result.exit_code == 0, result.output
    assert "study: s1" in result.stdout and (tmp_path / "sweep.db").is_file()


def test_sweep_errors(tmp_path: Path, recipe: Path) -> None:
    no_trials = invoke("sweep", recipe)
    assert no_trials.exit_code == 2 and "--n-trials" in no_trials.output
    bad_recipe = invoke("sweep", tmp_path / "nope.py", "--n-trials", "1")
    assert bad_recipe.exit_code == 1 and "is not a Python file" in bad_recipe.output


# -- listings ----------------------------------------------------------------------------------
def test_benchmarks_list() -> None:
    result = invoke("benchmarks", "list")
    assert result.exit_code == 0
    for name in ("navigate", "sports_understanding", "date_understanding", "word_sorting"):
        assert name in result.stdout


def test_recipes_list(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "recipes").mkdir()
    write_recipe(tmp_path / "recipes", "mine.py")
    monkeypatch.chdir(tmp_path)
    here = invoke("recipes", "list")
    assert here.exit_code == 0, here.output
    assert "mine.py" in here.stdout and "Parity with scripted fakes" in here.stdout
    shipped = invoke("recipes", "list", "--dir", REPO / "recipes")
    assert "navigate_local.py" in shipped.stdout and "Embedded-default demo" in shipped.stdout
    missing = invoke("recipes", "list", "--dir", tmp_path / "none")
    assert missing.exit_code == 1 and "does not exist" in missing.output


def test_no_command_shows_help() -> None:
    result = invoke()
    assert "compile" in result.output and "transfer" in result.output


# -- progress ----------------------------------------------------------------------------------
EVENTS = [
    ("seed", {"val_score": 0.5}),
    ("proposal", {"step": 0, "kind": "step"}),
    (
        "gate",
        {
            "step": 0,
            "epoch": 0,
            "accepted": False,
            "candidate_score": 0.4,
            "incumbent_score": 0.5,
            "reason": "no gain",
        },
    ),
    (
        "step",
        {
            "step": 0,
            "epoch": 0,
            "calls": 25,
            "cost_usd": 0.01,
            "incumbent_score": 0.5,
            "candidate_hash": "abc",
            "note": "",
        },
    ),
    (
        "gate",
        {
            "step": 1,
            "epoch": 1,
            "accepted": True,
            "candidate_score": 0.9,
            "incumbent_score": 0.5,
            "reason": "improved",
        },
    ),
]


def test_progress_state_follows_events() -> None:
    state = ProgressState(total_epochs=2)
    lines = [state.update(event, payload) for event, payload in EVENTS]
    assert lines[0] == "seed skill: val 0.5000" and lines[1] is None
    rows = dict(state.rows())
    assert rows["epoch"] == "2/2" and rows["step"] == "1" and rows["calls"] == "25"
    assert rows["cost"] == "$0.0100" and rows["best val"].startswith("0.9000")
    assert rows["gate"] == "1 accepted / 2 decided"
    assert rows["last gate"] == "ACCEPTED step 1: 0.9000 vs 0.5000"
    assert state.update("unknown_event", {}) is None


def test_progress_logs_lines_when_not_a_terminal(caplog: pytest.LogCaptureFixture) -> None:
    console = Console(file=io.StringIO(), force_terminal=False)
    with (
        caplog.at_level(logging.INFO, logger="skillopt_dsl.progress"),
        CompileProgress(console) as p,
    ):
        for event, payload in EVENTS:
            p(event, payload)
    messages = [r.getMessage() for r in caplog.records]
    assert messages[0] == "seed skill: val 0.5000"
    assert any(m.startswith("gate ACCEPTED step 1") for m in messages)
    assert console.file.getvalue() == ""  # type: ignore[attr-defined]


def test_progress_draws_a_panel_on_a_terminal(caplog: pytest.LogCaptureFixture) -> None:
    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=True, width=100)
    with (
        caplog.at_level(logging.INFO, logger="skillopt_dsl.progress"),
        CompileProgress(console) as p,
    ):
        for event, payload in EVENTS:
            p(event, payload)
    assert "ACCEPTED step 1" in buffer.getvalue() and "best val" in buffer.getvalue()
    assert not caplog.records
