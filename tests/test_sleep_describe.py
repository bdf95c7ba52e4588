"""`skillopt-dsl sleep describe` (issue 40): trigger rows from the agent's own sessions, the
description compiled on them by `compile --skill-folder`'s path, the change staged, never
written. The home is the shipped fixture (`tests/fixtures/sleep/skill_home`) plus one session of
generated skill loads; the router and the optimizer model are scripted fakes."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fixtures.sleep.world import skill_load_session
from typer.testing import CliRunner

from skillopt_dsl.cli import app
from skillopt_dsl.cli import skill_folder as folder_cli
from skillopt_dsl.cli.options import CompileFlags
from skillopt_dsl.errors import UserInputError
from skillopt_dsl.lm import LM
from skillopt_dsl.sleep import trigger_splits
from skillopt_dsl.sleep.trigger_rows import TriggerRow, TriggerRows
from skillopt_dsl.testing import ScriptedLM
from skillopt_dsl.testing.trigger_fakes import listed_description, skill_call, trigger_request

FIXTURE = Path(__file__).parent / "fixtures" / "sleep" / "skill_home"
PROJECTS = Path(".claude") / "projects" / "-work-docs"
PDF_MD = "---\nname: pdf\ndescription: Works with PDF files.\n---\n# PDF\n\nUse pypdf.\n"
XLSX_MD = "---\nname: xlsx\ndescription: Works with spreadsheets.\n---\n# XLSX\n"
runner = CliRunner()


def _fake_router(messages: Sequence[dict[str, str]]) -> str:
    """FAKE router: loads pdf for an invoice request when pdf's card says invoice."""
    card = listed_description(messages, "pdf") or ""
    wanted = "invoice" in card and "invoice" in trigger_request(messages)
    return skill_call("pdf") if wanted else "No tool is needed."


def _fake_reflector(_messages: Sequence[dict[str, str]]) -> str:
    """FAKE optimizer model: proposes nothing (the words proposer calls no model)."""
    return json.dumps({"edits": []})


def _home(tmp_path: Path) -> Path:
    """The fixture home plus a session of 60 loads: invoices load pdf, sheets load xlsx."""
    home = tmp_path / "home"
    shutil.copytree(FIXTURE, home)
    requests = [
        (f"request {n} about the {'invoice' if n % 2 else 'sheet'}", "pdf" if n % 2 else "xlsx")
        for n in range(60)
    ]
    session = "b2b2b2b2-0000-4000-8000-000000000001"
    (home / PROJECTS / f"{session}.jsonl").write_text(
        skill_load_session(session, "/work/docs", requests)
    )
    return home


def _skills(tmp_path: Path) -> Path:
    """A pdf skill folder with a reference file, and an xlsx folder beside it (a distractor)."""
    root = tmp_path / "skills" / "pdf"
    (root / "references").mkdir(parents=True)
    (root / "SKILL.md").write_text(PDF_MD)
    (root / "references" / "forms.md").write_text("Flatten forms first.\n")
    (tmp_path / "skills" / "xlsx").mkdir()
    (tmp_path / "skills" / "xlsx" / "SKILL.md").write_text(XLSX_MD)
    return root


def _hashes(root: Path) -> dict[str, tuple[str, int]]:
    """sha256 and modification time of every file under `root`."""
    return {
        p.relative_to(root).as_posix(): (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }  # fmt: skip


@dataclass
class Described:
    """One `sleep describe` run on the grown home, and what it left."""

    output: str
    exit_code: int
    folder: Path
    run: Path
    folder_before: dict[str, tuple[str, int]]
    folder_after: dict[str, tuple[str, int]]
    home_before: dict[str, tuple[str, int]]
    home_after: dict[str, tuple[str, int]]


def _fake_models(monkeypatch: pytest.MonkeyPatch, calls: list[str]) -> None:
    """Route `compile_folder`'s models to the fakes, counting the router's calls."""

    def router(messages: Sequence[dict[str, str]]) -> str:
        calls.append(messages[-1]["content"])
        return _fake_router(messages)

    def models(_flags: CompileFlags) -> tuple[LM, LM]:
        fake = LM(ScriptedLM(router, model="scripted/router"))
        return fake, LM(ScriptedLM(_fake_reflector, model="scripted/reflector"))

    monkeypatch.setattr(folder_cli, "folder_models", models)


def _describe(args: Sequence[str], monkeypatch: pytest.MonkeyPatch, calls: list[str]) -> str:
    _fake_models(monkeypatch, calls)
    result = runner.invoke(app, ["sleep", "describe", *args], catch_exceptions=False)
    return result.output


@pytest.fixture(scope="module")
def described(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Described]:
    tmp_path = tmp_path_factory.mktemp("describe")
    home, folder, run = _home(tmp_path), _skills(tmp_path), tmp_path / "run"
    folder_before, home_before = _hashes(folder), _hashes(home)
    args = ["--skill-folder", str(folder), "--home", str(home), "--source", "claude",
            "--run-dir", str(run), "--threads", "2"]  # fmt: skip
    with pytest.MonkeyPatch.context() as monkeypatch:
        _fake_models(monkeypatch, [])
        result = runner.invoke(app, ["sleep", "describe", *args])
    yield Described(
        result.output, result.exit_code, folder, run,
        folder_before, _hashes(folder), home_before, _hashes(home),
    )  # fmt: skip


def test_the_live_folder_stays_byte_identical(described: Described) -> None:
    """Kills: describe writing (or touching) any file of the skill folder instead of staging."""
    assert described.exit_code == 0, described.output
    assert described.folder_after == described.folder_before
    assert "staged: SKILL.md (the folder is unchanged)" in described.output


def test_the_home_is_only_read(described: Described) -> None:
    """Kills: the rows (or anything else) written under the agent home, or a file there touched."""
    assert described.exit_code == 0, described.output
    assert described.home_after == described.home_before
    rows = (described.run / "trigger_rows.jsonl").read_text().splitlines()
    assert len(rows) == 63 and all(
        set(json.loads(r)) == {"request", "should_trigger"} for r in rows
    )


def test_the_output_shows_seed_and_constant_baselines(described: Described) -> None:
    """Kills: describe printing the compiled score without the seed and the constant answers
    it must beat, or without the rows it read."""
    out = described.output
    assert "63 row(s) for skill 'pdf': 32 should trigger" in out
    assert re.search(r"│ validation │ 0\.\d+ │", out)
    assert re.search(r"\n  seed\s+accuracy 0\.\d+\s+precision\s+\S+\s+recall 0\.000", out)
    assert re.search(r"always trigger\s+accuracy 0\.\d+\s+precision 0\.\d+\s+recall 1\.000", out)
    assert re.search(r"never trigger\s+accuracy 0\.\d+\s+precision\s+n/a\s+recall 0\.000", out)
    assert re.search(r"compiled\s+accuracy 0\.\d+\s+precision 1\.000\s+recall 0\.9\d\d", out)


def test_the_staged_change_is_what_adopt_applies(described: Described) -> None:
    """Kills: a stage whose proposal differs from what `skill-folder adopt` writes, or an adopt
    that rewrites more than the description."""
    assert f"skillopt-dsl skill-folder adopt {described.run}" in described.output
    proposed = (described.run / "skill_folder" / "proposed" / "SKILL.md").read_bytes()
    assert re.search(rb"\ndescription: '?Works with PDF files\. Use for: invoice", proposed)
    adopted = runner.invoke(app, ["skill-folder", "adopt", str(described.run)])
    assert adopted.exit_code == 0, adopted.output
    assert (described.folder / "SKILL.md").read_bytes() == proposed
    after = _hashes(described.folder)
    assert after["references/forms.md"] == described.folder_before["references/forms.md"]
    rolled = runner.invoke(app, ["skill-folder", "rollback", str(described.run)])
    assert rolled.exit_code == 0, rolled.output
    assert (described.folder / "SKILL.md").read_text() == PDF_MD


@pytest.mark.parametrize(
    ("skill", "message"),
    [
        ("pdf", "3 trigger row(s) for skill 'pdf' (2 should trigger, 1 should not) are too few "
                "to split"),
        ("docx", "3 trigger row(s) for skill 'docx' (0 should trigger, 3 should not) hold only "
                 "one label"),
    ],
)  # fmt: skip
def test_too_few_rows_or_one_label_is_refused_before_any_call(
    skill: str, message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kills: describe compiling (or writing a run dir) on rows too few to split or holding one
    label, and a refusal that does not say the counts and what to do."""
    calls: list[str] = []
    folder, run = _skills(tmp_path), tmp_path / "run"
    args = ["--skill-folder", str(folder), "--skill", skill, "--home", str(FIXTURE),
            "--run-dir", str(run)]  # fmt: skip
    out = " ".join(_describe(args, monkeypatch, calls).split())
    assert message in out and "to get more rows" in out
    assert not calls and not run.exists()


def test_trigger_splits_refuses_one_label_as_user_input() -> None:
    """Kills: one-label rows split and trained on (every description ties the constant)."""
    rows = TriggerRows("pdf", [TriggerRow(f"r{n}", True) for n in range(20)])
    with pytest.raises(UserInputError, match=r"20 should trigger, 0 should not"):
        trigger_splits(rows)
    rows.rows.append(TriggerRow("other", False))
    assert len(trigger_splits(rows).val) > 0


@pytest.fixture(scope="module")
def described_json(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[dict[str, Any], Path]]:
    """The same run as `described`, on a fresh copy of the same home and folder, with --json."""
    tmp_path = tmp_path_factory.mktemp("describe_json")
    home, folder, run = _home(tmp_path), _skills(tmp_path), tmp_path / "run"
    args = ["--skill-folder", str(folder), "--home", str(home), "--source", "claude",
            "--run-dir", str(run), "--threads", "2", "--json"]  # fmt: skip
    with pytest.MonkeyPatch.context() as monkeypatch:
        _fake_models(monkeypatch, [])
        result = runner.invoke(app, ["sleep", "describe", *args])
    assert result.exit_code == 0, result.output
    yield json.loads(result.stdout), run


def _text_trigger(output: str) -> dict[str, tuple[float, float | None, float]]:
    """The printed trigger table: label -> (accuracy, precision or None for n/a, recall)."""
    found: dict[str, tuple[float, float | None, float]] = {}
    pattern = r"\n  (.+?)\s+accuracy (\S+)\s+precision\s+(\S+)\s+recall (\S+)"
    for label, accuracy, precision, recall in re.findall(pattern, output):
        found[label] = (
            float(accuracy), None if precision == "n/a" else float(precision), float(recall)
        )  # fmt: skip
    return found


def test_json_holds_the_measured_figures_the_text_prints(
    described: Described, described_json: tuple[dict[str, Any], Path]
) -> None:
    """Kills: `--json` printing nothing but JSON-less text, dropping a figure (rows, seed or
    compiled or constant trigger scores, gate decisions, stop reason, calls, what was staged),
    or figures that differ from the ones the text output prints for the same run."""
    data, run = described_json
    assert data["rows"]["rows"] == 63 and data["rows"]["should_trigger"] == 32
    assert data["rows"]["out"] == str(run / "trigger_rows.jsonl")
    text = _text_trigger(described.output)
    assert set(data["trigger"]) == set(text) == {
        "seed", "compiled", "always trigger", "never trigger"
    }  # fmt: skip
    for label, (accuracy, precision, recall) in text.items():
        row = data["trigger"][label]
        assert round(row["accuracy"], 3) == accuracy, label
        assert (None if row["precision"] is None else round(row["precision"], 3)) == precision
        assert round(row["recall"], 3) == recall, label
    assert data["held_out"] == int(re.findall(r"trigger on (\d+) held-out", described.output)[0])
    val = re.findall(r"│ validation │ (\S+) │\s+\S+ │\s+(\S+) │", described.output)[0]
    assert (f"{data['scores']['seed_val']:.4f}", f"{data['scores']['val']:.4f}") == val
    stopped = re.findall(r"stopped: (\S+); (\d+) of (\d+) candidates", described.output)[0]
    gate = data["gate"]
    assert (data["stop_reason"], str(gate["accepted"]), str(gate["decisions"])) == stopped
    assert gate["accepted"] >= 1
    assert f"search calls: {data['calls']['search']} " in described.output
    assert f"test   calls: {data['calls']['test']} " in described.output
    staged = data["staged"]
    assert staged["accepted"] is True and staged["files"] == ["SKILL.md"]
    assert staged["adopt"] == f"skillopt-dsl skill-folder adopt {run}"
    assert data["run_dir"] == str(run)


def test_json_prints_one_object_and_no_table(
    described_json: tuple[dict[str, Any], Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kills: the text tables (or the rows summary) leaking into `--json`'s stdout, which a
    script then cannot parse; and a refusal under `--json` that exits 0."""
    data, _run = described_json
    assert isinstance(data, dict) and "proposers" not in json.dumps(data)
    folder = _skills(tmp_path)
    args = ["--skill-folder", str(folder), "--home", str(FIXTURE), "--run-dir",
            str(tmp_path / "run"), "--json"]  # fmt: skip
    _fake_models(monkeypatch, [])
    result = runner.invoke(app, ["sleep", "describe", *args])
    assert result.exit_code == 1 and "too few to split" in " ".join(result.output.split())
