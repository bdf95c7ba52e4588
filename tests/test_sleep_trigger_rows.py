"""`sleep trigger-rows`: labels only from recorded skill loads, redacted, the home untouched."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from skillopt_dsl.cli import app
from skillopt_dsl.errors import UserInputError
from skillopt_dsl.skill_folder import load_trigger_splits
from skillopt_dsl.skill_folder.trigger_data import read_trigger_rows
from skillopt_dsl.sleep.errors import SleepError
from skillopt_dsl.sleep.sources import ClaudeCodeSource, CodexSource
from skillopt_dsl.sleep.trigger_rows import trigger_rows
from skillopt_dsl.testing.source_contract import SECRET

FIXTURE = Path(__file__).parent / "fixtures" / "sleep" / "skill_home"
TAX = "Fill in the tax form PDF for me"
CHART = "Turn this spreadsheet into a chart"


def _labels(home: Path, skill: str = "pdf") -> dict[str, bool]:
    found = trigger_rows([ClaudeCodeSource(home)], skill)
    return {row.request: row.should_trigger for row in found.rows}


def _snapshot(home: Path) -> dict[str, tuple[bytes, int]]:
    return {
        str(p): (p.read_bytes(), p.stat().st_mtime_ns)
        for p in sorted(home.rglob("*"))
        if p.is_file()
    }


def test_a_load_of_the_skill_is_positive_and_another_skills_load_negative() -> None:
    """Kills: labelling from anything but the load (every request true, or the label flipped),
    and dropping another skill's load instead of making it a near-miss negative."""
    labels = _labels(FIXTURE)
    assert labels[TAX] is True
    assert labels[CHART] is False
    assert _labels(FIXTURE, "xlsx")[CHART] is True and _labels(FIXTURE, "xlsx")[TAX] is False


def test_no_load_and_a_failed_load_give_no_row() -> None:
    """Kills: a request with no skill load labelled (as false), and an `is_error` Skill call
    counted as a load."""
    found = trigger_rows([ClaudeCodeSource(FIXTURE)], "pdf")
    requests = {row.request for row in found.rows}
    assert "What does this function do?" not in requests
    assert "Open the scanned manual" not in requests
    assert found.unlabelled == 2 and found.requests == 6


def test_a_plugin_skill_counts_and_the_request_is_redacted() -> None:
    """Kills: `plugin:pdf` not read as `pdf`, and a request written with its secret."""
    merge = [r for r in _labels(FIXTURE) if r.startswith("Merge report.pdf")]
    assert len(merge) == 1 and _labels(FIXTURE)[merge[0]] is True
    assert SECRET not in merge[0] and "[REDACTED" in merge[0]


def test_rows_are_deduplicated_and_a_conflict_is_dropped(tmp_path: Path) -> None:
    """Kills: a request asked twice written twice, and a request seen with both labels kept."""
    found = trigger_rows([ClaudeCodeSource(FIXTURE)], "pdf")
    assert [row.request for row in found.rows].count(TAX) == 1 and found.duplicates == 1
    home = tmp_path / "home"
    shutil.copytree(FIXTURE, home)
    first = next((home / ".claude" / "projects" / "-work-docs").glob("*1.jsonl"))
    text = first.read_text(encoding="utf-8").replace('"skill": "xlsx"', '"skill": "pdf"', 1)
    text = text.replace(CHART, TAX)
    first.write_text(text, encoding="utf-8")
    again = trigger_rows([ClaudeCodeSource(home)], "xlsx")
    assert again.conflicts == 0
    mixed = trigger_rows([ClaudeCodeSource(home)], "pdf")
    assert TAX in {row.request for row in mixed.rows}
    (home / ".claude" / "projects" / "-work-docs" / "c.jsonl").write_text(
        first.read_text(encoding="utf-8").replace('"skill": "pdf"', '"skill": "xlsx"'),
        encoding="utf-8",
    )
    conflicted = trigger_rows([ClaudeCodeSource(home)], "pdf")
    assert TAX not in {row.request for row in conflicted.rows} and conflicted.conflicts == 1


def test_a_source_that_records_no_load_is_refused() -> None:
    """Kills: Codex (whose rollouts record no skill load) read as if every request had none."""
    with pytest.raises(SleepError, match="do not record which skill"):
        trigger_rows([CodexSource(FIXTURE)], "pdf")


def test_the_cli_writes_rows_compile_reads_and_leaves_the_home_untouched(tmp_path: Path) -> None:
    """Kills: a write (or touch) under the home, and rows `load_trigger_splits` cannot read."""
    home = tmp_path / "home"
    shutil.copytree(FIXTURE, home)
    before = _snapshot(home)
    out = tmp_path / "trigger.jsonl"
    args = ["sleep", "trigger-rows", "--skill", "pdf", "--out", str(out), "--home", str(home)]
    result = CliRunner().invoke(app, [*args, "--source", "claude", "--json"])
    assert result.exit_code == 0, result.output
    assert _snapshot(home) == before
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert {(r["request"], r["should_trigger"]) for r in rows} >= {(TAX, True), (CHART, False)}
    assert all(set(r) == {"request", "should_trigger"} for r in rows)
    assert len(read_trigger_rows(out)) == 3  # what load_trigger_splits reads (then refuses: few)
    with pytest.raises(UserInputError, match="fewer than 6 validation requests"):
        load_trigger_splits(out, sizes=(1, 1, 1))
    assert json.loads(result.output)["should_trigger"] == 2
