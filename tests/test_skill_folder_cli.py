"""`skillopt-dsl compile --skill-folder` and `skillopt-dsl skill-folder adopt|rollback|diff`
(issue 40, part 4): compile trains the description, prints seed vs compiled beside "always" and
"never trigger", stages without writing the folder; adopt and rollback round-trip the bytes.
The router and the optimizer model are scripted fakes."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest
from typer.testing import CliRunner

from skillopt_dsl.cli import app
from skillopt_dsl.cli import skill_folder as folder_cli
from skillopt_dsl.cli.options import CompileFlags
from skillopt_dsl.lm import LM
from skillopt_dsl.testing import ScriptedLM
from skillopt_dsl.testing.trigger_fakes import listed_description, skill_call, trigger_request

runner = CliRunner()
SKILL_MD = (
    "---\nname: release-notes\ndescription: Writes text.\n---\n# Release notes\n\nBe brief.\n"
)
NEW_DESCRIPTION = "Writes release notes from a changelog."


def _fake_router(messages: Sequence[dict[str, str]]) -> str:
    """FAKE router: loads release-notes for a changelog request when its card says changelog."""
    card = listed_description(messages, "release-notes") or ""
    wanted = "changelog" in card and "changelog" in trigger_request(messages)
    return skill_call("release-notes") if wanted else "No tool is needed."


def _fake_reflector(_messages: Sequence[dict[str, str]]) -> str:
    """FAKE optimizer model: always proposes the one description edit that helps."""
    edit = {"kind": "replace", "old": "Writes text.", "new": NEW_DESCRIPTION, "rationale": "r"}
    return json.dumps({"edits": [edit]})


@pytest.fixture
def fake_models(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("skillopt_dsl.skill_folder.trigger", reason="the trigger task (part 2)")

    def models(flags: CompileFlags) -> tuple[LM, LM]:
        router = LM(ScriptedLM(_fake_router, model="scripted/router"))
        return router, LM(ScriptedLM(_fake_reflector, model="scripted/reflector"))

    monkeypatch.setattr(folder_cli, "folder_models", models)


@pytest.fixture
def workspace(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A skill folder, its trigger data (half changelog requests) and a distractor file."""
    root = tmp_path / "skills" / "release-notes"
    (root / "references").mkdir(parents=True)
    (root / "SKILL.md").write_text(SKILL_MD)
    (root / "references" / "format.md").write_text("Group by kind.\n")
    rows = [
        {"request": f"request {n} about the {'changelog' if n % 2 else 'weather'}",
         "should_trigger": bool(n % 2)}
        for n in range(60)
    ]  # fmt: skip
    data = tmp_path / "trigger.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in rows))
    cards = tmp_path / "distractors.jsonl"
    cards.write_text(json.dumps({"name": "commit-message", "description": "Writes commits."}))
    return root, data, cards


def _bytes(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def _compile(workspace: tuple[Path, Path, Path], run: Path) -> str:
    root, data, cards = workspace
    result = runner.invoke(
        app,
        ["compile", "--skill-folder", str(root), "--trigger-data", str(data),
         "--distractors", str(cards), "--run-dir", str(run), "--threads", "2"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    return result.stdout


def test_compile_stages_adopt_writes_rollback_restores(
    fake_models: None, workspace: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    """Kills: compile writing the folder, a missing constant-answer row, an adopt command
    that is not printed, or adopt/rollback not round-tripping the bytes."""
    root = workspace[0]
    before = _bytes(root)
    out = _compile(workspace, tmp_path / "run")
    assert _bytes(root) == before
    assert re.search(r"always trigger\s+accuracy 0\.\d+\s+precision 0\.\d+\s+recall 1\.000", out)
    assert re.search(r"never trigger\s+accuracy 0\.\d+\s+precision\s+n/a\s+recall 0\.000", out)
    assert re.search(r"compiled\s+accuracy 1\.000\s+precision 1\.000\s+recall 1\.000", out)
    assert f"skillopt-dsl skill-folder adopt {tmp_path / 'run'}" in out
    diff = runner.invoke(app, ["skill-folder", "diff", str(tmp_path / "run")])
    assert "-description: Writes text.\n" in diff.stdout
    assert re.search(r"\n\+description: .*changelog", diff.stdout)
    proposed = (tmp_path / "run" / "skill_folder" / "proposed" / "SKILL.md").read_bytes()
    adopted = runner.invoke(app, ["skill-folder", "adopt", str(tmp_path / "run")])
    assert adopted.exit_code == 0, adopted.output
    assert (root / "SKILL.md").read_bytes() == proposed
    assert _bytes(root)["references/format.md"] == before["references/format.md"]
    rolled = runner.invoke(app, ["skill-folder", "rollback", str(tmp_path / "run")])
    assert rolled.exit_code == 0, rolled.output
    assert _bytes(root) == before


def test_adopt_of_a_changed_folder_says_what_to_do(
    fake_models: None, workspace: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    """Kills: the CLI adopting over a file edited after the compile, or a traceback instead of
    one line saying what to do."""
    root = workspace[0]
    _compile(workspace, tmp_path / "run")
    (root / "SKILL.md").write_text(SKILL_MD + "my edit\n")
    result = runner.invoke(app, ["skill-folder", "adopt", str(tmp_path / "run")])
    assert result.exit_code == 1
    assert "changed since run" in result.output and "Compile again" in result.output
    assert (root / "SKILL.md").read_text() == SKILL_MD + "my edit\n"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "compile needs a recipe"),
        (["--skill-folder", "x"], "--skill-folder needs --trigger-data"),
        (["--trigger-data", "x.jsonl"], "with --skill-folder"),
        (["r.py", "--skill-folder", "x", "--trigger-data", "t"], "not both"),
    ],
)
def test_compile_says_what_it_needs(args: list[str], message: str) -> None:
    """Kills: a half-given folder task silently falling back to a recipe (or the reverse)."""
    result = runner.invoke(app, ["compile", *args])
    assert result.exit_code == 1 and message in result.output


def test_adopt_of_a_run_without_a_staged_change_says_how_to_stage(tmp_path: Path) -> None:
    """Kills: a bare FileNotFoundError for a run directory with nothing staged."""
    result = runner.invoke(app, ["skill-folder", "adopt", str(tmp_path)])
    assert result.exit_code == 1 and "compile --skill-folder" in result.output


def test_compile_first_undoes_an_adopt_killed_halfway(
    fake_models: None, workspace: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    """Kills: `compile --skill-folder` reading a folder an interrupted adopt left half written
    (it must run recover first, so the new run starts from the old bytes)."""
    root = workspace[0]
    before = _bytes(root)
    _compile(workspace, tmp_path / "run")
    script = (
        "import os\nfrom skillopt_dsl.skill_folder.adopt import adopt_folder\n"
        f"adopt_folder({str(tmp_path / 'run')!r}, after_replace=lambda path: os._exit(9))\n"
    )
    killed = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=120)
    assert killed.returncode == 9 and _bytes(root) != before
    _compile(workspace, tmp_path / "second")
    assert _bytes(root) == before
