"""A night's description stage (`sleep run --describe PATH`, issue 40): after the night's own
work it trains each listed skill folder's description on the trigger rows of the project's
sessions and stages the change under the night; it never writes the live folder or the home,
`auto_adopt` never adopts it, a folder with too few rows is skipped with the reason, and a night
without the option is unchanged. The world is `fixtures.sleep.world` (generic-JSONL sessions the
night learns the Decimal rule from) plus Claude Code sessions of skill loads in the project;
every model is a scripted fake."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest
from fixtures.sleep.world import (
    make_project,
    reflecting_optimizer,
    skill_load_session,
    write_sessions,
)
from typer.testing import CliRunner

from skillopt_dsl.cli import app
from skillopt_dsl.lm import Budget
from skillopt_dsl.lm.base import Message
from skillopt_dsl.optimizers import GradientText
from skillopt_dsl.sleep import SleepConfig, SleepProject, run_night
from skillopt_dsl.sleep import cli as sleep_cli
from skillopt_dsl.sleep import night as night_module
from skillopt_dsl.sleep.night import NightResult
from skillopt_dsl.testing import ScriptedLM
from skillopt_dsl.testing.trigger_fakes import listed_description, skill_call, trigger_request

FIXTURE = Path(__file__).parent / "fixtures" / "sleep" / "skill_home"
PDF_MD = "---\nname: pdf\ndescription: Works with PDF files.\n---\n# PDF\n\nUse pypdf.\n"
XLSX_MD = "---\nname: xlsx\ndescription: Works with spreadsheets.\n---\n# XLSX\n"
SESSION = "c3c3c3c3-0000-4000-8000-000000000001"
runner = CliRunner()


def _fake_target(messages: list[Message]) -> str:
    """FAKE model for the whole night: as a router (a request and a list of skill cards) it
    loads pdf for an invoice request when pdf's card says invoice; as the replay target it
    follows the document when it mentions Decimal, else uses floats."""
    card = listed_description(messages, "pdf")
    if card is not None:
        wanted = "invoice" in card and "invoice" in trigger_request(messages)
        return skill_call("pdf") if wanted else "No tool is needed."
    system = messages[0]["content"] if messages[0]["role"] == "system" else ""
    return "Keep every amount as a Decimal value." if "Decimal" in system else "Use float amounts."


def _write_loads(home: Path, requests: Sequence[tuple[str, str]]) -> None:
    """A Claude Code session in the project where each (request, skill) loads that skill."""
    folder = home / ".claude" / "projects" / "-work-shop"
    folder.mkdir(parents=True, exist_ok=True)
    text = skill_load_session(SESSION, "/work/shop", requests, day="2025-05-01")
    (folder / f"{SESSION}.jsonl").write_text(text)


def _world(tmp_path: Path, loads: int = 60) -> tuple[Path, Path, Path]:
    """(project, home, pdf folder): the night's JSONL sessions, `loads` skill loads (invoices
    load pdf, sheets load xlsx) and a pdf folder with an xlsx folder beside it."""
    home = tmp_path / "home"
    write_sessions(home)
    _write_loads(
        home,
        [(f"request {n} about the {'invoice' if n % 2 else 'sheet'}", "pdf" if n % 2 else "xlsx")
         for n in range(loads)],
    )  # fmt: skip
    folder = tmp_path / "skills" / "pdf"
    (folder / "references").mkdir(parents=True)
    (folder / "SKILL.md").write_text(PDF_MD)
    (folder / "references" / "forms.md").write_text("Flatten forms first.\n")
    (tmp_path / "skills" / "xlsx").mkdir()
    (tmp_path / "skills" / "xlsx" / "SKILL.md").write_text(XLSX_MD)
    return make_project(tmp_path), home, folder


def _config(project: Path, home: Path, **kw: object) -> SleepConfig:
    base = SleepConfig(
        project=project,
        home=home,
        source="auto",
        lm=ScriptedLM(_fake_target, model="scripted/target"),
        optimizer_lm=reflecting_optimizer(),
        mine_with_model=False,
        rubric_judge=False,
        optimizer=GradientText(epochs=1, batch_size=8),
        threads=2,
    )
    return replace(base, **kw)  # type: ignore[arg-type]


def _hashes(root: Path) -> dict[str, tuple[str, int]]:
    """sha256 and modification time of every file under `root`."""
    return {
        p.relative_to(root).as_posix(): (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }  # fmt: skip


def _files(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())


def test_a_described_folder_is_staged_and_never_written(tmp_path: Path) -> None:
    """Kills: the night writing (or touching) the live skill folder or anything under the agent
    home, a change staged anywhere but under the night for `skill-folder adopt`, auto_adopt
    adopting the folder, and the stage running on the whole night's budget, not its share."""
    project, home, folder = _world(tmp_path)
    folder_before, home_before = _hashes(folder), _hashes(home)
    budget = Budget(max_calls=3000)
    config = _config(project, home, describe=(folder,), auto_adopt=True, budget=budget)
    result = run_night(config)
    assert result.report.adopted  # the night's own proposal was auto-adopted ...
    assert _hashes(folder) == folder_before  # ... the folder's was not, nor touched
    assert _hashes(home) == home_before
    (described,) = result.described
    assert described.status == "staged" and described.run_dir == result.path / "describe" / "pdf"
    assert described.outcome is not None
    assert described.outcome.result.usage.calls <= 1500
    run_config = json.loads((described.run_dir / "config.json").read_text())
    assert run_config["budget"]["max_calls"] == 1500, run_config["budget"]
    own_run = json.loads((result.path / "run" / "config.json").read_text())
    assert own_run["budget"]["max_calls"] == 1500, own_run["budget"]  # the night's own half
    proposed = described.run_dir / "skill_folder" / "proposed" / "SKILL.md"
    assert b"Use for: invoice" in proposed.read_bytes()
    record = json.loads((result.path / "describe" / "describe.json").read_text())
    assert record[0]["status"] == "staged" and record[0]["rows"]["rows"] == 60
    adopted = runner.invoke(app, ["skill-folder", "adopt", str(described.run_dir)])
    assert adopted.exit_code == 0, adopted.output
    assert (folder / "SKILL.md").read_bytes() == proposed.read_bytes()


def test_too_few_rows_skip_the_folder_and_the_night_finishes(tmp_path: Path) -> None:
    """Kills: a refusal (too few rows) crashing the night, the folder skipped without its
    reason, or the night's own work (its staged proposal, its watermark) lost to it; and the
    command's advice ("drop --project") given for a night, which has no such option."""
    project, home, folder = _world(tmp_path, loads=3)
    result = run_night(_config(project, home, describe=(folder,)))
    (described,) = result.described
    assert described.status == "skipped" and described.run_dir is None
    assert "too few to split" in (described.skipped or "")
    assert "the next night reads" in (described.skipped or "")
    assert "--project" not in (described.skipped or "")
    assert result.report.accepted and (result.path / "proposed" / "CLAUDE.md").is_file()
    assert SleepProject.open(project).watermark() is not None
    assert "skipped: 3 trigger row(s) for skill 'pdf'" in sleep_cli.night_summary(result)


def test_a_night_without_the_option_is_unchanged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kills: the describe path running (or leaving a file, an event, a report field, a summary
    line, a budget cut) on a night that lists no folder; and a described night whose own stage
    differs from the same night without the option."""
    plain_events: list[str] = []
    described_events: list[str] = []
    project, home, folder = _world(tmp_path / "a")
    with_describe = run_night(
        _config(project, home, describe=(folder,)),
        on_event=lambda event, _payload: described_events.append(event),
    )
    project, home, _folder = _world(tmp_path / "b")

    def no_stage(*_args: object) -> None:
        raise AssertionError("the describe stage ran on a night without --describe")

    monkeypatch.setattr(night_module, "describe_folders", no_stage)
    plain = run_night(
        _config(project, home), on_event=lambda event, _payload: plain_events.append(event)
    )
    assert plain.described == ()
    assert plain_events == [e for e in described_events if e != "describe"]
    assert "describe" in described_events
    own = [f for f in _files(with_describe.path) if not f.startswith("describe/")]
    assert _files(plain.path) == own
    volatile = {"night_id", "project", "created", "home", "wall_s", "watermark_before"}
    reports = [json.loads((r.path / "report.json").read_text()) for r in (plain, with_describe)]
    stable = [{k: v for k, v in r.items() if k not in volatile} for r in reports]
    assert stable[0] == stable[1]
    assert "describe" not in sleep_cli.night_summary(plain)


def test_the_option_and_sleep_json_name_the_folders(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kills: `--describe` (repeatable) not reaching the night, and `sleep.json`'s `describe`
    ignored when the option is not given."""
    seen: list[SleepConfig] = []

    def fake_night(config: SleepConfig, **_kw: object) -> NightResult:
        seen.append(config)
        raise SystemExit(0)

    monkeypatch.setattr(sleep_cli, "run_night", fake_night)
    runner.invoke(app, ["sleep", "run", "--project", str(tmp_path), "--describe", "a",
                        "--describe", "b"])  # fmt: skip
    assert seen[0].describe == (Path("a"), Path("b"))
    project, home, folder = _world(tmp_path / "w", loads=3)
    config_path = project / ".skillopt" / "sleep.json"
    settings = json.loads(config_path.read_text())
    config_path.write_text(json.dumps({**settings, "describe": [str(folder)]}))
    result = run_night(_config(project, home))
    assert [d.folder for d in result.described] == [folder]
