"""Command 1 says what it does before the progress panel starts: loading the recipe (which
imports the model layer, seconds under load) and loading the embedded model into the process.

Before, the first seconds printed nothing and the model loaded silently inside the panel's
"starting" phase, on the seed's first call.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from skillopt_dsl import cli
from skillopt_dsl.lm import LM, local
from skillopt_dsl.testing import ScriptedLM

RECIPE = '''
import skillopt_dsl as sd
from typing import Literal
from skillopt_dsl.lm import LM
from skillopt_dsl.testing import ScriptedLM


class Parity(sd.SkillModule):
    """Is the number even or odd?"""

    number: str = sd.InputField()
    answer: Literal["even", "odd"] = sd.OutputField()
    skill = "Answer even or odd."
    metric = sd.metrics.exact_match("answer")


module = Parity()
rows = [sd.Example(f"n{i}", {"number": str(i)}, {"answer": "even" if i % 2 == 0 else "odd"})
        for i in range(24)]
splits = sd.Splits(train=rows[:8], val=rows[8:20], test=rows[20:])
lm = LM(ScriptedLM(lambda m: "even"))  # a FAKE target: no model is called
optimizer = sd.optimizers.GradientText(epochs=1, proposers=[sd.optimizers.FormatRuleProposer()])
'''


def test_compile_says_it_is_loading_the_recipe(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Kills: silence while the recipe and the model layer import (about 6 s here under load)."""
    recipe = tmp_path / "parity.py"
    recipe.write_text(RECIPE, encoding="utf-8")
    with caplog.at_level(logging.INFO, logger="skillopt_dsl.progress"):
        result = CliRunner().invoke(
            cli.app,
            ["compile", str(recipe), "--run-dir", str(tmp_path / "run"), "--max-calls", "12"],
        )
    assert result.exit_code == 0, result.output
    messages = [r.getMessage() for r in caplog.records]
    assert messages[0] == f"loading {recipe} (the recipe and the model layer: a few seconds)"
    assert not any("into this process" in m for m in messages)  # a fake target loads nothing


def test_an_in_process_model_is_loaded_before_the_panel_saying_so(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Kills: the embedded model loaded silently on the seed's first call (the panel said
    "starting" meanwhile), and a load attempted for a model that is not in-process."""
    loaded: list[str] = []

    def fake_load(spec: Any) -> object:  # a FAKE loader: llama.cpp is never touched
        loaded.append(spec.name)
        return object()

    monkeypatch.setattr(local, "_load", fake_load)
    monkeypatch.setattr(local, "check_local_model", lambda model: local.local_spec(model))
    monkeypatch.setattr(local, "select_runtime", lambda: "prebuilt")
    with caplog.at_level(logging.INFO, logger="skillopt_dsl.progress"):
        cli.load_in_process(LM(ScriptedLM(lambda m: "x")))
        assert not loaded and not caplog.records
        cli.load_in_process(LM("local/smollm2-135m"))
    assert loaded == ["smollm2-135m"]
    messages = [r.getMessage() for r in caplog.records]
    assert messages[0] == (  # the runtime in use is named
        "loading the model local/smollm2-135m into this process "
        "(llama.cpp, prebuilt by llama-cpp-cffi 0.4.20)"
    )
    assert messages[1].startswith("model loaded in ") and messages[1].endswith(
        " s; scoring the seed skill next"
    )


class _Stop(Exception):
    """Raised by the fake planner: the test needs only what compile said before the panel."""


def test_a_skill_folder_compile_loads_the_default_model_saying_so(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    """Kills: `compile --skill-folder` on the embedded model (no `--model`) loading it silently
    inside the panel, as command 1 did before."""
    from skillopt_dsl.cli import skill_folder as folder_cli

    loaded: list[str] = []

    def fake_load(spec: Any) -> object:  # a FAKE loader: llama.cpp is never touched
        loaded.append(spec.name)
        return object()

    def stop(*_args: object, **_kwargs: object) -> None:
        raise _Stop

    monkeypatch.setattr(local, "_load", fake_load)
    monkeypatch.setattr(local, "check_local_model", lambda model: local.local_spec(model))
    monkeypatch.setattr(local, "select_runtime", lambda: "llama-cpp-python")
    monkeypatch.setattr(folder_cli, "plan_description", stop)
    root = tmp_path / "skills" / "notes"
    root.mkdir(parents=True)
    (root / "SKILL.md").write_text("---\nname: notes\ndescription: Writes text.\n---\nBe brief.\n")
    rows = [{"request": f"request {n}", "should_trigger": bool(n % 2)} for n in range(20)]
    data = tmp_path / "trigger.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in rows))
    with caplog.at_level(logging.INFO, logger="skillopt_dsl.progress"):
        result = CliRunner().invoke(
            cli.app,
            ["compile", "--skill-folder", str(root), "--trigger-data", str(data),
             "--run-dir", str(tmp_path / "run")],
        )  # fmt: skip
    assert "_Stop" in result.output  # the fake planner ended the run after the loading lines
    assert loaded == ["smollm2-135m"]
    messages = [r.getMessage() for r in caplog.records]
    assert (
        "loading the model local/smollm2-135m into this process (llama.cpp via llama-cpp-python)"
        in messages
    )
