"""A night on a home built from transcript files plus sessions written in the same formats,
replayed through the FAKE agent CLI (issue 26, item 4): the heuristic finds evidence, the gate
accepts a real improvement, adopt applies it and rollback restores the memory file byte for byte.

Two homes: `fixtures/sleep/real_home/` (files written in the Claude Code 2.1 and Codex 0.104
shapes) and `fixtures/real_home/` (real public transcripts, copied unmodified; see its README),
whose sessions are all made the project's through `session_cwds`."""

from __future__ import annotations

import json
import re
import shutil
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from fixtures.sleep.transcripts import Event, claude_session

from skillopt_dsl.lm.base import Message
from skillopt_dsl.optimizers import GradientText
from skillopt_dsl.optimizers.proposers import ReflectiveProposer
from skillopt_dsl.sleep import SleepConfig, SleepProject, adopt, rollback, run_night
from skillopt_dsl.sleep.agent_replay import AgentSettings
from skillopt_dsl.testing import ScriptedLM, fake_agent_cli

SHAPED = Path(__file__).parent / "fixtures" / "sleep" / "real_home"
REAL = Path(__file__).parent / "fixtures" / "real_home"
REAL_CWDS = (
    "/Users/macmini/Code/homelab-migration", "/tmp/tmp74wiyiny", "/tmp/tmpcy4oc572",
    "/tmp/tmphwsm9u6c", "/tmp/tmpjzzcbyb3", "/tmp/tmpw6sk2trg", "/tmp/tmpyyfcniwy",
)  # fmt: skip
HOMES = {
    "shaped": (SHAPED, (), 3, {"failed_then_fixed"}),
    "real": (REAL, REAL_CWDS, 7, {"failed_then_fixed", "hook", "quoted"}),
}
"""Each home: its folder, the working directories made the project's, how many of its sessions
are then the project's, and evidence kinds the night must mine."""
CWD = "/work/app"
MODULES = [
    "billing", "orders", "invoices", "users", "search", "notes", "tags", "auth", "export",
    "import", "mailer", "admin", "reports", "cache", "queue", "webhooks", "audit", "files",
]  # fmt: skip
MEMORY = "# app\n\nA notes service.\n\n## Layout\n- Code lives in `app/`.\n"


def _sessions(name: str) -> list[Event]:
    test = f"tests/test_{name}.py"
    return [
        ("user", f"fix the failing {name} test in {test}"),
        ("bash", f"pytest {test} -q", "ModuleNotFoundError: No module named 'app'", True),
        ("bash", f"uv run pytest {test} -q", "3 passed in 0.41s", False),
        ("edit", f"app/{name}.py"),
        ("reply", f"Fixed app/{name}.py; the {name} tests pass."),
    ]


def _home(root: Path, files: Path) -> Path:
    home = root / "home"
    shutil.copytree(files, home)
    start = datetime(2026, 1, 2, 9, 0, tzinfo=UTC)
    for i, name in enumerate(MODULES):
        sid = f"5e1d{i:04d}-1c2b-4a3d-8e9f-0a1b2c3d4e5f"
        claude_session(home, CWD, sid, _sessions(name), start=start + timedelta(hours=i))
    return home


def _project(root: Path, cwds: tuple[str, ...]) -> Path:
    project = root / "app"
    (project / ".skillopt").mkdir(parents=True)
    (project / "CLAUDE.md").write_text(MEMORY, encoding="utf-8")
    (project / "app").mkdir()
    (project / "app" / "notes.py").write_text("def notes():\n    return []\n", encoding="utf-8")
    config = {"agent": "claude", "session_cwds": [CWD, *cwds]}
    (project / ".skillopt" / "sleep.json").write_text(json.dumps(config), encoding="utf-8")
    return project


def _reflecting_optimizer() -> ScriptedLM:
    """FAKE optimizer model: proposes a rule asking for the value the most failed `contains`
    checks in its prompt want (what a reflecting model would conclude from the feedback)."""

    def respond(messages: list[Message]) -> str:
        if not messages[0]["content"].startswith("You improve a skill document"):
            return json.dumps({"edits": []})
        wanted = re.findall(r"contains '([^']+)'", messages[-1]["content"])
        if not wanted:
            return json.dumps({"edits": []})
        value = max(set(wanted), key=wanted.count)
        edit = {"kind": "add", "after": None, "text": f"- Always use `{value}`.", "rationale": "r"}
        return json.dumps({"edits": [edit]})

    return ScriptedLM(respond, model="scripted/optimizer")


@pytest.mark.parametrize("which", sorted(HOMES))
def test_a_real_home_night_through_the_agent_cli_adopts_and_rolls_back(
    tmp_path: Path, which: str
) -> None:
    """Kills: a heuristic that mines nothing discriminating from real-format sessions (every
    night "val 1.000 -> 1.000, no proposal"), a home whose files are not read, an agent replay
    that never sees the learned rule, and an adopt or rollback that is not byte-exact."""
    files, cwds, from_home, kinds = HOMES[which]
    home, project = _home(tmp_path, files), _project(tmp_path, cwds)
    before = (project / "CLAUDE.md").read_bytes()
    agent = AgentSettings(
        "claude",
        argv=(sys.executable, fake_agent_cli.__file__, "--follow-rules", "{prompt}"),
        timeout_s=60,
    )
    night = run_night(
        SleepConfig(
            project=project,
            home=home,
            source="auto",
            replay_agent=agent,
            optimizer_lm=_reflecting_optimizer(),
            mine_with_model=False,
            optimizer=GradientText(epochs=1, batch_size=8, proposers=[ReflectiveProposer()]),
            threads=2,
        )
    )
    report = night.report
    assert report.harvest["sessions"] == len(MODULES) + from_home
    assert kinds <= set(report.mining["evidence"]), report.mining["evidence"]
    assert report.mining["sessions_with_evidence_checks"] >= len(MODULES)
    assert report.mining["evidence"]["failed_then_fixed"] >= len(MODULES)
    assert report.accepted and report.proposed_files == ["CLAUDE.md"], report.blocked
    assert report.candidate_val is not None and report.seed_val is not None
    assert report.candidate_val > report.seed_val
    staged = night.path / "proposed" / "CLAUDE.md"
    assert "- Always use `uv run`." in staged.read_text()
    assert (project / "CLAUDE.md").read_bytes() == before
    sleep_project = SleepProject.open(project)
    adopt(sleep_project)
    assert (project / "CLAUDE.md").read_bytes() == staged.read_bytes()
    rollback(sleep_project)
    assert (project / "CLAUDE.md").read_bytes() == before
