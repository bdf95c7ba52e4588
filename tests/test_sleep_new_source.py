"""A new agent format is one class in one file: registered once, it gets the harvest, the
timeline (and so command evidence), its memory file trained, replays through its own CLI and
the CLI's help and validation, without a line changed anywhere else (issue 39, item 1).

The toy format lives in this file only: `{"sid", "dir", "at", "who": "me" | "bot", "say",
"ran": {"cmd", "exit", "out"}}` lines under `<home>/.toy/logs/`, the memory file `TOY.md`, and
the FAKE CLI `tests/fixtures/sleep/fake_toy_agent.py`.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from fixtures.sleep.world import FOLLOW_UP, MEMORY, PROMPTS, reflecting_optimizer
from typer.testing import CliRunner

from skillopt_dsl.optimizers import GradientText
from skillopt_dsl.sleep import ProjectConfig, SleepConfig, SleepError, run_night
from skillopt_dsl.sleep.agent_replay import AgentSettings
from skillopt_dsl.sleep.cli import sleep_app
from skillopt_dsl.sleep.evidence import mine_requests
from skillopt_dsl.sleep.harvest import ProjectMatcher, harvest
from skillopt_dsl.sleep.redact import Redactor
from skillopt_dsl.sleep.sources import (
    SOURCES,
    ReplayCommand,
    Source,
    make_sources,
    register_source,
)
from skillopt_dsl.sleep.sources.reading import json_lines, record_time, tool_output
from skillopt_dsl.sleep.timeline import read_timeline
from skillopt_dsl.sleep.transcript import HarvestStats, ReadCounts, Session, ToolCall, Turn
from skillopt_dsl.testing.source_contract import PROJECT, REQUEST, SourceContract

FAKE_TOY = Path(__file__).parent / "fixtures" / "sleep" / "fake_toy_agent.py"
SHOP = "/work/shop"


class ToySource(Source):
    """The toy format (see the module docstring); no timeline reader of its own."""

    name = "toy"
    folders = (".toy/logs",)
    memory_file = "TOY.md"
    replay_command = ReplayCommand((sys.executable, str(FAKE_TOY), "{prompt}"), "text")

    def files(self, stats: HarvestStats) -> list[Path]:
        root = self.home / ".toy" / "logs"
        return sorted(root.glob("*.jsonl")) if root.is_dir() else []

    def read(self, path: Path, counts: ReadCounts) -> list[Session]:
        redactor = Redactor()
        turns: dict[str, tuple[str, list[Turn]]] = {}
        for line_no, record in json_lines(path, counts):
            when = record_time({"timestamp": record.get("at")}, path, line_no, counts)
            if when is None:
                continue
            text = redactor.redact(str(record.get("say") or ""))
            ran = record.get("ran")
            calls = (_call(ran, redactor, line_no),) if isinstance(ran, dict) else ()
            role = "user" if record.get("who") == "me" else "assistant"
            turns.setdefault(str(record["sid"]), (str(record["dir"]), []))[1].append(
                Turn(role, text, when, calls)
            )
        counts.redactions.update(redactor.counts)
        return [
            Session(sid, "toy", cwd, path, tuple(found), counts=counts)
            for sid, (cwd, found) in sorted(turns.items())
        ]


def _call(ran: dict[str, object], redactor: Redactor, line_no: int) -> ToolCall:
    code = ran.get("exit")
    output = tool_output(str(ran.get("out") or ""), redactor, exit_code=code)  # type: ignore[arg-type]
    command = json.dumps({"command": redactor.redact(str(ran.get("cmd") or ""))})
    return ToolCall("bash", command, output.text, output.failed, output.exit_code, f"c{line_no}")


def _write(home: Path, lines: list[dict[str, object]], name: str = "log.jsonl") -> Path:
    folder = home / ".toy" / "logs"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n{not json\n", encoding="utf-8")
    return path


def _line(sid: str, at: datetime, who: str, say: str, **extra: object) -> dict[str, object]:
    return {"sid": sid, "dir": SHOP, "at": at.isoformat(), "who": who, "say": say, **extra}


@pytest.fixture
def toy() -> Iterator[type[ToySource]]:
    register_source(ToySource)
    try:
        yield ToySource
    finally:
        SOURCES.pop("toy", None)


@pytest.fixture(autouse=True)
def _registered(toy: type[ToySource]) -> type[ToySource]:
    return toy


class TestToySourceContract(SourceContract):
    """The shipped contract suite passes for the toy, timeline, memory file and replay included."""

    source = ToySource

    def write_transcript(self, home: Path) -> None:
        at = datetime(2025, 6, 1, 10, tzinfo=UTC)
        lines = [
            {"sid": "t1", "dir": PROJECT, "at": at.isoformat(), "who": "me", "say": REQUEST},
            {"sid": "t1", "dir": PROJECT, "at": at.isoformat(), "who": "bot", "say": "ok"},
        ]
        _write(home, lines)


def test_a_new_source_gets_command_evidence_from_its_turns(tmp_path: Path) -> None:
    """Kills: a timeline keyed on the shipped agents' names (a new source's session then has no
    command steps, so no failed-then-fixed evidence), and a default timeline that drops tool
    calls or their exit codes."""
    at = datetime(2025, 6, 1, 10, tzinfo=UTC)
    _write(
        tmp_path,
        [
            _line("t1", at, "me", "add a migration for the orders.status column"),
            _line("t1", at, "bot", "", ran={"cmd": "python manage.py makemigrations", "exit": 1}),
            _line(
                "t1",
                at + timedelta(minutes=1),
                "bot",
                "Added the migration.",
                ran={"cmd": "uv run python manage.py makemigrations orders", "exit": 0},
            ),
        ],
    )
    (session,) = harvest(make_sources("toy", tmp_path), ProjectMatcher((SHOP,))).sessions
    timeline = read_timeline(session)
    assert [s.kind for s in timeline.steps] == [
        "prompt",
        "command",
        "result",
        "reply",
        "command",
        "result",
    ]
    assert timeline.cite(2) == f"{session.path}#turn-2", "turn numbers cited as file lines"
    request = mine_requests(session)[0]
    evidence = next(e for e in request.evidence if e.kind == "failed_then_fixed")
    assert "makemigrations orders" in " ".join(c.describe() for c in request.checks)
    assert evidence.rejected == f"{session.path}#turn-2"


def _help(command: str) -> str:
    """`sleep <command> --help` as one line of words (the help panel's borders left out)."""
    shown = CliRunner().invoke(sleep_app, [command, "--help"], env={"COLUMNS": "300"}).output
    return " ".join(shown.replace("│", " ").split())


def test_a_new_source_is_in_the_cli_help_and_its_validation() -> None:
    """Kills: `--source`, `--agent` or `--replay-agent` help written by hand (or read from the
    registry once, at import, before a source registers), and agent validation against a
    hard-coded list."""
    flat = _help("run")
    assert "jsonl, toy or auto" in flat, flat
    assert "codex (AGENTS.md) or toy (TOY.md)" in flat
    assert "(codex exec) or toy (" in flat
    assert "jsonl, toy or auto" in _help("harvest")
    wrong = CliRunner().invoke(sleep_app, ["run", "--agent", "cursor"])
    assert wrong.exit_code == 1 and "choose one of claude, codex, toy" in wrong.output
    assert ProjectConfig(agent="toy").agent == "toy"
    with pytest.raises(ValueError, match="choose one of claude, codex, toy"):
        ProjectConfig(agent="jsonl")  # a source without a memory file is not an agent to train
    with pytest.raises(SleepError, match="choose one of claude, codex, toy"):
        AgentSettings("jsonl")


def test_a_night_trains_the_new_agents_memory_file_and_replays_through_its_cli(
    tmp_path: Path,
) -> None:
    """Kills: the memory file or the replay command looked up in a table of the shipped agents
    (the night would train CLAUDE.md or run `claude -p`), and `sleep.json` refusing an agent
    registered after the package was imported."""
    home, project = tmp_path / "home", tmp_path / "shop"
    start = datetime(2025, 6, 1, 9, tzinfo=UTC)
    lines = []
    for i, prompt in enumerate(PROMPTS):
        t = start + timedelta(hours=i)
        said = [
            ("me", prompt),
            ("bot", "I changed the amounts to float and rounded them."),
            ("me", FOLLOW_UP),
            ("bot", "Amounts are Decimal now."),
        ]
        lines += [_line(f"s{i:02d}", t + timedelta(minutes=j), *x) for j, x in enumerate(said)]
    _write(home, lines)
    (project / ".skillopt").mkdir(parents=True)
    (project / "TOY.md").write_text(MEMORY, encoding="utf-8")
    config = {"agent": "toy", "session_cwds": [SHOP], "replay": {"agent": "toy", "timeout_s": 60}}
    (project / ".skillopt" / "sleep.json").write_text(json.dumps(config), encoding="utf-8")
    night = run_night(
        SleepConfig(
            project=project,
            home=home,
            source="toy",
            optimizer_lm=reflecting_optimizer(),
            mine_with_model=False,
            optimizer=GradientText(epochs=1, batch_size=8),
            threads=2,
        )
    )
    report = night.report
    assert report.replay == "agent CLI: toy (timeout 60 s)"
    assert report.sources == ["toy"] and report.harvest["sessions"] == 40
    assert report.accepted and report.proposed_files == ["TOY.md"], report.blocked
    assert report.candidate_val is not None and report.seed_val is not None
    assert report.candidate_val > report.seed_val
    assert not (project / "CLAUDE.md").exists() and not (project / "AGENTS.md").exists()
