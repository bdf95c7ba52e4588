"""`skillopt-dsl compile --skill-folder` end to end on the embedded SmolLM2-135M model (issue 40,
done-when): the shipped example folder, copied, compiles from the CLI; compile writes nothing
into the folder; the run directory holds the staging manifest; what is staged is only the
description the gate accepted (the references are never staged), and adopt then rollback
restore the folder byte for byte. A small budget on 20 of the shipped requests keeps the model
time well under a minute."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from skillopt_dsl.cli import app

pytestmark = pytest.mark.integration

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "skill_folders"
runner = CliRunner()


def _bytes(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def _few_requests(path: Path, each: int) -> Path:
    """`each` should-trigger and `each` should-not-trigger rows of the shipped trigger data."""
    rows = [json.loads(line) for line in (EXAMPLE / "release-notes.trigger.jsonl").open()]
    chosen = [r for r in rows if r["should_trigger"]][:each]
    chosen += [r for r in rows if not r["should_trigger"]][:each]
    path.write_text("".join(json.dumps(row) + "\n" for row in chosen), encoding="utf-8")
    return path


def test_compile_a_copy_of_the_shipped_folder_on_the_embedded_model(tmp_path: Path) -> None:
    """Kills: compile writing to the user's folder; staging a part the gate did not accept (a
    reference file, or a description when nothing was accepted); adopt/rollback not restoring
    the exact bytes; the CLI path not finishing on the embedded model."""
    folder = tmp_path / "skills" / "release-notes"
    shutil.copytree(EXAMPLE / "release-notes", folder)
    before = _bytes(folder)
    run = tmp_path / "run"
    result = runner.invoke(
        app,
        ["compile", "--skill-folder", str(folder),
         "--trigger-data", str(_few_requests(tmp_path / "trigger.jsonl", 10)),
         "--distractors", str(EXAMPLE / "distractors.jsonl"),
         "--shown-others", "2", "--max-calls", "30", "--threads", "2", "--run-dir", str(run)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "proposers: trigger-words (no optimizer-model call" in result.stdout
    assert _bytes(folder) == before
    manifest = json.loads((run / "skill_folder" / "manifest.json").read_text())
    assert manifest["folder"] == str(folder.resolve()) and manifest["parts"] == ["description"]
    assert set(manifest["proposed"]) <= {"SKILL.md"}
    if not manifest["accepted"]:
        assert manifest["proposed"] == {} and "gate accepted no candidate" in result.stdout
        assert not (run / "skill_folder" / "folder.diff").exists()
        refused = runner.invoke(app, ["skill-folder", "adopt", str(run)])
        assert refused.exit_code == 1 and "nothing to adopt" in refused.output
        assert _bytes(folder) == before
        return
    adopted = runner.invoke(app, ["skill-folder", "adopt", str(run)])
    assert adopted.exit_code == 0, adopted.output
    after = _bytes(folder)
    assert {path for path in after if after[path] != before[path]} == {"SKILL.md"}
    new, old = after["SKILL.md"].decode(), before["SKILL.md"].decode()
    changed = [line for line in new.splitlines() if line not in old.splitlines()]
    assert len(changed) == 1 and changed[0].startswith("description:")
    rolled = runner.invoke(app, ["skill-folder", "rollback", str(run)])
    assert rolled.exit_code == 0, rolled.output
    assert _bytes(folder) == before
