"""Sleep on a home of REAL public transcripts (`tests/fixtures/real_home`, files copied unmodified
from public repositories; its README names each file's repository, path, commit and licence).

The harvest reads the home without writing a byte of it, and its heuristic mining gives a
cited, discriminating check for at least a third of the sessions (issue 26). The evidence kinds
it relies on are tested here on the real lines: Claude Code's "Stop hook feedback" (a hook that
turned an answer down) and a literal the request quoted.
"""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from skillopt_dsl.sleep.cli import sleep_app
from skillopt_dsl.sleep.evidence import mine_requests
from skillopt_dsl.sleep.harvest import ProjectMatcher, Session, harvest
from skillopt_dsl.sleep.sources import make_sources
from skillopt_dsl.sleep.tasks import check_passes
from skillopt_dsl.sleep.timeline import read_timeline

REAL = Path(__file__).parent / "fixtures" / "real_home"
PROJECTS = REAL / ".claude" / "projects"
COVERAGE = PROJECTS / "-tmp-tmpw6sk2trg" / "c64cc478-3430-40fe-8e9c-4ee9986e9754.jsonl"
FIRST_STOP = PROJECTS / "-tmp-tmpcy4oc572" / "cb88ae13-898d-4076-aeb5-bc37191c5d2e.jsonl"
SHARE = 1 / 3
"""The share of the project's sessions that must give a discriminating check (issue 26)."""


def _sessions() -> list[Session]:
    return harvest(make_sources("auto", REAL), ProjectMatcher(("/",))).sessions


def _session(path: Path) -> Session:
    return next(s for s in _sessions() if s.path == path)


def _snapshot(root: Path) -> dict[str, tuple[bytes, int]]:
    return {
        str(p.relative_to(root)): (p.read_bytes() if p.is_file() else b"", p.stat().st_mtime_ns)
        for p in sorted(root.rglob("*"))
    }


def _project(root: Path) -> Path:
    project = root / "project"
    (project / ".skillopt").mkdir(parents=True)
    (project / "CLAUDE.md").write_text("# project\n", encoding="utf-8")
    cwds = sorted({s.cwd for s in _sessions()})
    config = {"agent": "claude", "session_cwds": cwds}
    (project / ".skillopt" / "sleep.json").write_text(json.dumps(config), encoding="utf-8")
    return project


def test_every_real_file_is_read_and_every_session_is_the_projects() -> None:
    """Kills: a reader that drops a real record shape (a session, its cwd or its prompt)."""
    files = sorted(p for p in REAL.rglob("*.jsonl"))
    sessions = _sessions()
    assert len(files) == 7
    assert sorted(s.path for s in sessions) == files
    assert all(s.prompts and s.cwd for s in sessions)


def test_harvest_reads_the_real_home_only_and_mines_a_third(tmp_path: Path) -> None:
    """Kills: a harvest that writes under the home (a byte, a file, an mtime), mining that
    gives fewer than a third of the real sessions a cited check another reply can fail (the
    hook or quoted-literal evidence removed), and a citation that names no real line."""
    project = _project(tmp_path)
    before = _snapshot(REAL)
    argv = ["harvest", "--heuristic-only", "--home", str(REAL), "--project", str(project)]
    result = CliRunner().invoke(sleep_app, [*argv, "--all", "--json"])
    assert result.exit_code == 0, result.output
    assert _snapshot(REAL) == before
    mining = json.loads(result.stdout)["mining"]
    assert mining["sessions"] == 7 and mining["model_calls"] == 0
    assert mining["sessions_with_evidence_checks"] / mining["sessions"] >= SHARE
    assert mining["sessions_with_paired_checks"] >= 1
    rows = project / ".skillopt" / "sleep" / "review" / "tasks.jsonl"
    cited = [c for line in rows.read_text().splitlines() for c in json.loads(line)["checks"]]
    sources = [c["source"] for c in cited if c.get("source")]
    assert sources
    for source in sources:
        path, _, line = source.rpartition(":")
        assert Path(path).is_relative_to(REAL)
        assert 1 <= int(line) <= len(Path(path).read_text(encoding="utf-8").splitlines())


def test_stop_hook_feedback_is_a_hook_step_not_a_request() -> None:
    """Kills: hook feedback read as a prompt (a request Sleep would replay) or dropped as
    meta (its evidence lost)."""
    timeline = read_timeline(_session(COVERAGE))
    hooks = [s for s in timeline.steps if s.kind == "hook"]
    assert [s.line for s in hooks] == [16, 26]
    assert [s.line for s in timeline.steps if s.kind == "prompt"] == [2]


def test_a_hook_that_turned_an_answer_down_gives_paired_checks() -> None:
    """Kills: hook evidence not mined, checks that do not cite the hook's line, plain words of
    the hook ("run quality checks") taken as names, and checks that the turned-down attempt
    passes (or the work after the hook fails)."""
    request = mine_requests(_session(COVERAGE))[0]
    hook = [e for e in request.evidence if e.kind == "hook"]
    assert [e.source.rsplit(":", 1)[1] for e in hook] == ["16", "26"]
    assert [e.rejected.rsplit(":", 1)[1] for e in hook if e.rejected] == ["3", "17"]
    first = [c for c in request.checks if (c.source or "").endswith(":16")]
    second = [c for c in request.checks if (c.source or "").endswith(":26")]
    named_and_done = {"git status", "python -m pytest tests/test_math_utils.py -v"}
    assert {getattr(c, "value", "") for c in first} == named_and_done  # no plain words
    assert {getattr(c, "value", "") for c in second} == {".gitignore"}
    lines = COVERAGE.read_text(encoding="utf-8").splitlines()
    turned_down = json.loads(lines[14])["message"]["content"][0]["text"]  # the answer at line 15
    assert not any(check_passes(c, turned_down) for c in first)


def test_a_quoted_literal_the_work_holds_is_a_check_on_the_request_line() -> None:
    """Kills: quoted-literal evidence not mined, or cited on another line than the request's."""
    request = mine_requests(_session(FIRST_STOP))[0]
    quoted = [c for c in request.checks if getattr(c, "value", "") == "modified content"]
    assert len(quoted) == 1 and (quoted[0].source or "").endswith(":2")
    assert [e.kind for e in request.evidence] == ["quoted"]


def test_a_hook_check_the_turned_down_attempt_already_passes_is_dropped(tmp_path: Path) -> None:
    """Kills: keeping a hook check that the attempt the hook turned down already passes (it
    would not tell that attempt from the one that satisfied the hook)."""
    from skillopt_dsl.sleep.evidence import Request, _hook
    from skillopt_dsl.sleep.timeline import Step, Timeline

    hook = Step("hook", 4, "Stop hook feedback:\nRun `git status`, then `uv run pytest -q`.")
    before = [Step("command", 2, "git status", call_id="a"), Step("reply", 3, "Done.")]
    after = [Step("command", 5, "git status", call_id="b"), Step("command", 7, "uv run pytest -q")]
    results = [Step("result", 6, "ok", call_id="b"), Step("result", 8, "1 passed", call_id="c")]
    after[1] = Step("command", 7, "uv run pytest -q", call_id="c")
    steps = (*before, hook, after[0], results[0], after[1], results[1])
    timeline = Timeline(tmp_path / "s.jsonl", "/work", steps)
    request = Request(Step("prompt", 1, "fix it"))
    _hook(request, hook, before, after, timeline)
    assert [getattr(c, "value", "") for c in request.checks] == ["uv run pytest -q"]
    assert [e.rejected for e in request.evidence] == [timeline.cite(2)]
