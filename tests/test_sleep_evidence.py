"""Evidence mined from the session itself, without a model (issue 26, item 1): corrections,
refused tool calls, interrupts, reverts, failed-then-fixed commands, the end state and
compaction summaries become checks that cite their transcript line, and each correction check
tells the rejected attempt from the accepted one."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from fixtures.sleep.transcripts import Event, claude_session, codex_session

from skillopt_dsl.sleep.evidence import Request, command_core, fragments, mine_requests
from skillopt_dsl.sleep.harvest import ProjectMatcher, Session, harvest
from skillopt_dsl.sleep.mine import discriminating_checks, heuristic_tasks, mine_sessions
from skillopt_dsl.sleep.sources import make_sources
from skillopt_dsl.sleep.tasks import Task, check_passes
from skillopt_dsl.sleep.timeline import read_timeline

CWD = "/work/app"


def _one(tmp_path: Path, events: list[Event], agent: str = "claude") -> Session:
    home = tmp_path / "home"
    writer = claude_session if agent == "claude" else codex_session
    writer(home, CWD, "0b8f2c1e-5d3a-4e6f-9a7b-2c1d0e9f8a7b", events)
    sessions = harvest(make_sources("auto", home), ProjectMatcher((CWD,))).sessions
    assert len(sessions) == 1
    return sessions[0]


def _described(request: Request) -> list[str]:
    return [c.describe() for c in request.checks]


def _line(source: str) -> dict:  # type: ignore[type-arg]
    path, line = source.rsplit(":", 1)
    return json.loads(Path(path).read_text(encoding="utf-8").splitlines()[int(line) - 1])


MIX = [
    ("user", "run the tests for the accounts context"),
    ("bash", "mix test test/app/accounts_test.exs", "** (Mix) could not connect to app_dev", True),
    ("user", "no, run it with MIX_ENV=test"),
    ("bash", "MIX_ENV=test mix test test/app/accounts_test.exs", "12 tests, 0 failures", False),
    ("reply", "All 12 accounts tests pass."),
    ("user", "thanks"),
]


def test_a_correction_becomes_a_check_the_rejected_attempt_fails(tmp_path: Path) -> None:
    """Kills: ignoring the user's message after an answer (issue 26: "no, run it with
    MIX_ENV=test" gave only `no_refusal`), a check the rejected attempt already passes, or a
    citation that is not the correction's transcript line."""
    session = _one(tmp_path, MIX)
    request = mine_requests(session)[0]
    assert "contains 'MIX_ENV=test'" in _described(request)
    check = next(c for c in request.checks if c.describe() == "contains 'MIX_ENV=test'")
    evidence = next(e for e in request.evidence if e.kind == "correction")
    assert check.source == evidence.source
    assert _line(evidence.source)["message"]["content"] == "no, run it with MIX_ENV=test"
    rejected = _line(evidence.rejected or "")["message"]["content"][0]["input"]["command"]
    accepted = _line(evidence.accepted or "")["message"]["content"][0]["input"]["command"]
    assert not check_passes(check, rejected) and check_passes(check, accepted)


def test_the_end_state_gives_the_last_verification_that_succeeded(tmp_path: Path) -> None:
    """Kills: forgetting what the session ended with (the last successful test command) or
    taking a failed one."""
    request = mine_requests(_one(tmp_path, MIX))[0]
    described = _described(request)
    assert "contains 'MIX_ENV=test mix test test/app/accounts_test.exs'" in described
    assert "contains 'mix test test/app/accounts_test.exs'" not in described
    assert any(e.kind == "end_state" for e in request.evidence)


def test_a_wrong_file_correction_names_the_right_file(tmp_path: Path) -> None:
    """Kills: "that's the wrong file" left without a check."""
    events: list[Event] = [
        ("user", "fix the typo in the signup email"),
        ("edit", "lib/app/mailer.ex"),
        ("reply", "Fixed the typo in the mailer."),
        ("user", "that's the wrong file, the text is in lib/app_web/templates/signup.html.heex"),
        ("edit", "lib/app_web/templates/signup.html.heex"),
        ("reply", "Fixed it in the template."),
    ]
    request = mine_requests(_one(tmp_path, events))[0]
    assert "contains 'lib/app_web/templates/signup.html.heex'" in _described(request)
    assert request.evidence[0].kind == "correction" and request.evidence[0].accepted


def test_a_wrong_file_correction_without_a_name_uses_what_changed(tmp_path: Path) -> None:
    """Kills: a wrong-file correction naming nothing producing no check (the next attempt's
    file is the evidence, the rejected one is `not_contains`)."""
    events: list[Event] = [
        ("user", "fix the typo in the signup email"),
        ("edit", "lib/app/mailer.ex"),
        ("user", "wrong file"),
        ("edit", "lib/app_web/templates/signup.html.heex"),
    ]
    described = _described(mine_requests(_one(tmp_path, events))[0])
    assert "not_contains 'lib/app/mailer.ex'" in described
    assert "contains 'lib/app_web/templates/signup.html.heex'" in described


def test_a_failed_command_then_fixed_becomes_a_check(tmp_path: Path) -> None:
    """Kills: ignoring exit codes in tool results (a command that failed, then a similar one
    that succeeded) or citing the failed line as the source."""
    events: list[Event] = [
        ("user", "add a migration for the orders.status column"),
        ("bash", "python manage.py makemigrations", "python: command not found", True),
        ("bash", "uv run python manage.py makemigrations orders", "Migrations for 'orders'", False),
        ("reply", "Added the migration."),
    ]
    request = mine_requests(_one(tmp_path, events))[0]
    evidence = next(e for e in request.evidence if e.kind == "failed_then_fixed")
    check = next(c for c in request.checks if c.source == evidence.source)
    assert check.describe() == "contains 'uv run python manage.py makemigrations orders'"
    assert _line(evidence.source)["message"]["content"][0]["input"]["command"].startswith("uv run")
    assert "python manage.py makemigrations" in evidence.quote and evidence.rejected


def test_codex_exit_codes_and_patches_are_read(tmp_path: Path) -> None:
    """Kills: Codex `function_call_output` exit codes (metadata) or `apply_patch` edits not
    read, so Codex sessions give no evidence."""
    events: list[Event] = [
        ("user", "make the core crate's tests pass"),
        ("bash", "cargo test", "error: could not find `Cargo.toml` in `/work/app`", True),
        ("bash", "cargo test --manifest-path crates/core/Cargo.toml", "test result: ok", False),
        ("edit", "crates/core/src/lib.rs"),
        ("reply", "The core tests pass."),
    ]
    request = mine_requests(_one(tmp_path, events, agent="codex"))[0]
    described = _described(request)
    assert "contains '--manifest-path crates/core/Cargo.toml'" in described
    assert "contains 'crates/core/src/lib.rs'" in described


def test_a_refused_tool_call_is_a_correction(tmp_path: Path) -> None:
    """Kills: the user's words in a refused tool call ("the user said: ...") not read as a
    correction of the refused command."""
    events: list[Event] = [
        ("user", "clean up the build folder"),
        ("reject", "rm -rf build dist", "use `make clean` instead"),
        ("bash", "make clean", "cleaned", False),
    ]
    request = mine_requests(_one(tmp_path, events))[0]
    assert "contains 'make clean'" in _described(request)
    assert request.evidence[0].kind == "rejection"


def test_an_interrupt_then_a_redirect_is_a_correction(tmp_path: Path) -> None:
    """Kills: an interrupt (Codex `turn_aborted`) not making the next prompt a correction of
    the interrupted attempt (it would be mined as a new request with no check)."""
    events: list[Event] = [
        ("user", "bump the patch version"),
        ("bash", "npm version patch", "v1.2.4", False),
        ("interrupt",),
        ("user", "we are on pnpm here"),
        ("bash", "pnpm version patch", "v1.2.4", False),
    ]
    requests = mine_requests(_one(tmp_path, events, agent="codex"))
    assert len(requests) == 1
    assert "contains 'pnpm version patch'" in _described(requests[0])
    assert requests[0].evidence[0].kind == "interrupt"


def test_a_revert_is_evidence(tmp_path: Path) -> None:
    """Kills: "undo that" (and the `git checkout --` that follows) not marked as a revert."""
    events: list[Event] = [
        ("user", "refactor the parser into smaller functions"),
        ("edit", "src/parser.py"),
        ("reply", "Split the parser into five functions."),
        ("user", "undo that, keep `parse_stream` as one function"),
        ("bash", "git checkout -- src/parser.py", "", False),
    ]
    request = mine_requests(_one(tmp_path, events))[0]
    assert "contains 'parse_stream'" in _described(request)
    assert request.evidence[0].kind == "revert"


def test_a_compaction_summary_names_what_was_done(tmp_path: Path) -> None:
    """Kills: a compaction summary's statement of the work ignored."""
    events: list[Event] = [
        ("compact", "Summary: the billing retry lives in lib/app/billing/retry.ex; tests next."),
        ("user", "carry on with the billing retries"),
        ("edit", "lib/app/billing/retry.ex"),
        ("reply", "Done."),
    ]
    request = mine_requests(_one(tmp_path, events))[0]
    assert any(e.kind == "compaction" for e in request.evidence)
    assert "contains 'lib/app/billing/retry.ex'" in _described(request)


def test_exploration_failures_and_secrets_give_no_check(tmp_path: Path) -> None:
    """Kills: `ls missing` then `ls src` mined as a fix, or a check holding a redacted secret
    (no reply could ever pass it)."""
    events: list[Event] = [
        ("user", "where is the config loaded"),
        ("bash", "ls config", "ls: config: No such file or directory", True),
        ("bash", "ls src", "app.py config.py", False),
        (
            "bash",
            "AWS_ACCESS_KEY_ID=AKIAZX7Q2M9V4K8P1W6Y AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG "
            "make test",
            "ok",
            False,
        ),
        ("reply", "In src/config.py."),
    ]
    events[3:3] = [
        ("user", "no, deploy with `ghp_R8x2Lq9Wm4Zt7Vn3Kp6Yb1Hc5Jd0Fs2Ga8Qe` as the token"),
        ("bash", "make deploy", "deployed", False),
    ]
    request = mine_requests(_one(tmp_path, events))[0]
    assert not any(e.kind == "failed_then_fixed" for e in request.evidence)
    assert all("REDACTED" not in c.describe() for c in request.checks)
    assert "contains 'make test'" in _described(request)


def test_every_step_cites_its_own_line(tmp_path: Path) -> None:
    """Kills: line numbers off by one (or counted from 0) in citations."""
    session = _one(tmp_path, MIX)
    lines = session.path.read_text(encoding="utf-8").splitlines()
    for step in read_timeline(session).steps:
        if step.kind in ("prompt", "reply"):
            assert step.text in json.dumps(json.loads(lines[step.line - 1]))


def test_a_later_request_with_evidence_is_its_own_task(tmp_path: Path) -> None:
    """Kills: evidence of a second request folded into the first task (or dropped)."""
    events: list[Event] = [
        *MIX,
        ("user", "now add a changelog entry for the accounts fix in the release notes"),
        ("edit", "docs/notes.md"),
        ("user", "wrong file, it goes in CHANGELOG.md"),
        ("edit", "CHANGELOG.md"),
    ]
    tasks = heuristic_tasks(_one(tmp_path, events), CWD)
    assert len(tasks) == 2
    assert "contains 'CHANGELOG.md'" in [c.describe() for c in tasks[1].checks]
    assert "CHANGELOG.md" not in " ".join(c.describe() for c in tasks[0].checks)


def test_fragments_and_command_core() -> None:
    """Kills: losing `KEY=value` or `--flags` from a correction, or the tail of a pipeline
    taken as the command."""
    assert fragments("no, run it with MIX_ENV=test and `--trace`") == ["MIX_ENV=test", "--trace"]
    assert fragments("nope, that's the wrong one") == []
    assert command_core("cd /work/app && pytest -q 2>&1 | tail -5") == "pytest -q"


def _home_of_sessions(root: Path) -> Path:
    home = root / "home"
    start = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
    plain: list[Event] = [("user", "explain how sessions are stored"), ("reply", "In ETS.")]
    for i, events in enumerate([MIX, plain, plain]):
        when = start + timedelta(days=i)
        claude_session(home, CWD, f"0b8f2c1e-5d3a-4e6f-9a7b-2c1d0e9f8a{i:02d}", events, start=when)
    return home


def test_mining_counts_sessions_with_evidence_checks(tmp_path: Path) -> None:
    """Kills: the report's evidence counts missing or counting a `no_refusal`-only task as
    discriminating."""
    sessions = harvest(make_sources("auto", _home_of_sessions(tmp_path)), ProjectMatcher((CWD,)))
    tasks, stats = mine_sessions(sessions.sessions, project=CWD, lm=None, fractions=(1, 0, 0))
    assert stats.sessions_with_evidence_checks == 1
    assert stats.to_dict()["evidence"]["correction"] == 1
    plain = next(t for t in tasks if t.intent.startswith("explain"))
    assert discriminating_checks(plain) == []


@pytest.mark.parametrize("field", ["evidence", "checks"])
def test_evidence_and_sources_survive_the_review_file(tmp_path: Path, field: str) -> None:
    """Kills: a task's evidence (or a check's source) lost when tasks.jsonl is read back."""
    sessions = harvest(make_sources("auto", _home_of_sessions(tmp_path)), ProjectMatcher((CWD,)))
    tasks, _ = mine_sessions(sessions.sessions, project=CWD, lm=None, fractions=(1, 0, 0))
    task = next(t for t in tasks if t.evidence)
    back = Task.from_row(json.loads(json.dumps(task.to_row())))
    assert getattr(back, field) == getattr(task, field)
    assert any(c.source for c in back.checks)


def test_names_in_the_request_cite_the_prompt_line(tmp_path: Path) -> None:
    """Kills: a check taken from the request's backticked names without a source (the issue
    asks every mined check to cite its transcript line)."""
    events: list[Event] = [("user", "why does `setup.cfg` break CI?"), ("reply", "A flag.")]
    session = _one(tmp_path, events)
    task = heuristic_tasks(session, CWD)[0]
    check = next(c for c in task.checks if c.describe() == "contains 'setup.cfg'")
    assert check.source is not None
    assert _line(check.source)["message"]["content"] == "why does `setup.cfg` break CI?"
