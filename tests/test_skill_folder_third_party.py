"""A real third-party skill folder end to end (issue 53): Anthropic's Apache-2.0
`internal-comms` from the public `anthropics/skills` repository, shipped under
`examples/skill_folders/anthropics/` with its LICENSE.txt and a NOTICE of origin. It is read
as its author wrote it (the `license:` key, its `examples/` reference files; LICENSE.txt and
NOTICE never read as parts), it is trainable for either agent, and `compile --skill-folder`
runs on it from the CLI, stages at most its description line, and adopt and rollback keep
every other byte. The router is a scripted fake; the same command on the embedded model is
in docs/skill_folders.md with its printed output."""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from pathlib import Path

import pytest
from typer.testing import CliRunner

from skillopt_dsl.cli import app
from skillopt_dsl.cli import skill_folder as folder_cli
from skillopt_dsl.cli.options import CompileFlags
from skillopt_dsl.lm import LM
from skillopt_dsl.skill_folder import SkillFolder
from skillopt_dsl.skill_folder.document import DESCRIPTION, FolderDocument
from skillopt_dsl.skill_folder.trigger import trigger_parts
from skillopt_dsl.testing import ScriptedLM
from skillopt_dsl.testing.trigger_fakes import listed_description, skill_call, trigger_request

THIRD_PARTY = Path(__file__).resolve().parents[1] / "examples" / "skill_folders" / "anthropics"
FOLDER = THIRD_PARTY / "internal-comms"
runner = CliRunner()
UPSTREAM = (
    "A set of resources to help me write all kinds of internal communications, using the "
    "formats that my company likes to use. Claude should use this skill whenever asked to "
    "write some sort of internal communications (status reports, leadership updates, 3P "
    "updates, company newsletters, FAQs, incident reports, project updates, etc.)."
)


def _bytes(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_the_folder_is_read_as_its_author_wrote_it() -> None:
    """Kills: the shipped copy losing its licence or notice, a `license:` key or the
    `examples/` folder breaking the reader, LICENSE.txt or NOTICE read as a reference part,
    and a real 325-character description refused for Claude or Codex."""
    folder = SkillFolder.read(FOLDER)
    assert (folder.name, folder.description) == ("internal-comms", UPSTREAM)
    assert set(folder.reference_paths) == {"examples/3p-updates.md", "examples/general-comms.md"}
    assert folder.skipped == ()
    licence = (FOLDER / "LICENSE.txt").read_text()
    assert "Apache License" in licence and "Version 2.0, January 2004" in licence
    notice = (FOLDER / "NOTICE").read_text()
    assert "github.com/anthropics/skills" in notice and "skills/internal-comms" in notice
    for agent in ("claude", "codex"):
        folder.check_trainable(trigger_parts(folder), agent)


def test_a_new_description_rewrites_its_line_alone() -> None:
    """Kills: a rewrite that drops or reorders the `license:` key, touches the body, or
    rewrites the reference files."""
    folder = SkillFolder.read(FOLDER)
    new = FolderDocument(((DESCRIPTION, "Writes internal updates for employees."),)).to_skill()
    (change,) = folder.changes(new)
    old_lines, new_lines = change.old_text.splitlines(), change.new_text.splitlines()
    assert change.path == "SKILL.md" and len(old_lines) == len(new_lines)
    differing = [(a, b) for a, b in zip(old_lines, new_lines, strict=True) if a != b]
    assert differing == [
        (f"description: {UPSTREAM}", "description: Writes internal updates for employees.")
    ]


def _employee_rows(path: Path) -> Path:
    """60 rows: telling the employees something should trigger; replying to a customer not."""
    rows = [
        {"request": f"request {n}: tell the employees about change {n}", "should_trigger": True}
        if n % 2
        else {"request": f"request {n}: reply to the customer about order {n}",
              "should_trigger": False}
        for n in range(60)
    ]  # fmt: skip
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def _fake_router(messages: Sequence[dict[str, str]]) -> str:
    """FAKE router: loads internal-comms for a request to tell the employees something when
    its card says "employees" (the upstream description does not)."""
    card = listed_description(messages, "internal-comms") or ""
    wanted = "employees" in card and "employees" in trigger_request(messages)
    return skill_call("internal-comms") if wanted else "No tool is needed."


@pytest.fixture
def fake_router(monkeypatch: pytest.MonkeyPatch) -> ScriptedLM:
    router = ScriptedLM(_fake_router, model="scripted/router")

    def models(flags: CompileFlags) -> tuple[LM, LM]:
        return LM(router), LM(ScriptedLM(lambda _m: json.dumps({"edits": []})))

    monkeypatch.setattr(folder_cli, "folder_models", models)
    return router


def test_it_compiles_from_the_cli_and_stages_its_description_alone(
    fake_router: ScriptedLM, tmp_path: Path
) -> None:
    """Kills: compile writing the user's folder, staging anything but SKILL.md's description
    line (the licence, notice or references), and adopt/rollback not round-tripping. The
    trigger rows are generated so that the gate accepts (the shipped rows' seed already scores
    0.9 on validation under this fake, and nothing is staged)."""
    folder = tmp_path / "skills" / "internal-comms"
    shutil.copytree(FOLDER, folder)
    before = _bytes(folder)
    run = tmp_path / "run"
    result = runner.invoke(
        app,
        ["compile", "--skill-folder", str(folder),
         "--trigger-data", str(_employee_rows(tmp_path / "rows.jsonl")),
         "--distractors", str(THIRD_PARTY / "distractors.jsonl"),
         "--max-calls", "400", "--threads", "1", "--run-dir", str(run)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "pre-flight:" in result.stdout and "always trigger" in result.stdout
    assert _bytes(folder) == before
    manifest = json.loads((run / "skill_folder" / "manifest.json").read_text())
    assert manifest["parts"] == ["description"] and manifest["accepted"], result.stdout
    assert set(manifest["proposed"]) == {"SKILL.md"}
    assert runner.invoke(app, ["skill-folder", "adopt", str(run)]).exit_code == 0
    after = _bytes(folder)
    assert {path for path in after if after[path] != before[path]} == {"SKILL.md"}
    old, new = before["SKILL.md"].decode().splitlines(), after["SKILL.md"].decode().splitlines()
    changed = [b for a, b in zip(old, new, strict=True) if a != b]
    assert len(changed) == 1 and changed[0].startswith("description: "), changed
    assert runner.invoke(app, ["skill-folder", "rollback", str(run)]).exit_code == 0
    assert _bytes(folder) == before
