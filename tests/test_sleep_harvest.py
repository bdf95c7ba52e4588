"""Harvest: real Claude Code and Codex record formats, read only, skipping what is not the user's
own work, counting what is broken, and a timezone-aware watermark."""

from __future__ import annotations

import hashlib
import json
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest

from skillopt_dsl.sleep.errors import SleepError
from skillopt_dsl.sleep.harvest import HarvestResult, ProjectMatcher, Session, harvest
from skillopt_dsl.sleep.sources import (
    ClaudeCodeSource,
    CodexSource,
    GenericJsonlSource,
    make_sources,
)

HOME = Path(__file__).parent / "fixtures" / "sleep" / "home"
SHOP = ProjectMatcher(("/work/shop",))


@pytest.fixture
def home(tmp_path: Path) -> Path:
    copy = tmp_path / "home"
    shutil.copytree(HOME, copy)
    return copy


def _hashes(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def _by_id(home: Path, source: type, **kw: object) -> dict[str, object]:
    result = harvest([source(home)], SHOP, **kw)  # type: ignore[arg-type]
    return {s.id: s for s in result.sessions}


def test_harvest_never_writes_to_the_home(home: Path) -> None:
    """Kills: a source that opens transcripts for writing, touches, moves or adds any file
    (every file under the home is hashed before and after, and the file list compared)."""
    before = _hashes(home)
    harvest(make_sources("auto", home), SHOP)
    assert _hashes(home) == before


def test_claude_session_keeps_prompts_and_replies_and_skips_the_rest(home: Path) -> None:
    """Kills: reading tool results or meta prompts (`Caveat:`, `<command-name>`) as user prompts,
    dropping the follow-up correction, or losing the tool names of a reply."""
    session = _by_id(home, ClaudeCodeSource)["11111111-1111-4111-8111-111111111111"]
    prompts = session.prompts  # type: ignore[attr-defined]
    assert prompts == [
        "Fix the `parse_price` helper in `shop/prices.py`: 19.99 becomes 19.989999.",
        "no, still wrong — use `Decimal` not `float` for prices",
        "thanks, that fixed it",
    ]
    tools = [t for turn in session.turns for t in turn.tools]  # type: ignore[attr-defined]
    assert tools == ["Read", "Bash"]
    assert session.branch == "main"  # type: ignore[attr-defined]


def test_sidechains_malformed_lines_and_unknown_records_are_counted_not_fatal(home: Path) -> None:
    """Kills: harvesting sub-agent transcripts (`subagents/`, `agent-*.jsonl`), crashing on a
    truncated line, or silently dropping unknown record types without counting them."""
    result = harvest([ClaudeCodeSource(home)], SHOP)
    ids = {s.id for s in result.sessions}
    assert "agent-d4e5f6" not in ids
    assert result.stats.home_skipped["sidechain_file"] == 2
    assert result.stats.project.malformed_lines == 1
    assert result.stats.project.unknown == {"mystery-record": 1}
    assert result.stats.project.meta_prompts == 2
    assert result.stats.project.tool_results == 2


def test_own_replays_and_other_projects_are_never_harvested(home: Path) -> None:
    """Kills: harvesting sessions that Sleep's replays started (run inside a night folder, or
    opened by the replay marker), or another project's sessions."""
    result = harvest(make_sources("auto", home), SHOP)
    assert result.stats.skipped["own_replay"] == 2
    assert result.stats.home_skipped["other_project"] == 1
    assert "j2" not in {s.id for s in result.sessions}


def test_codex_mirrored_turns_are_counted_once(home: Path) -> None:
    """Kills: reading both the `response_item` and the `event_msg` copy of each Codex turn (the
    session would have every prompt twice), or keeping the injected AGENTS.md/environment blocks."""
    result = harvest([CodexSource(home)], SHOP)
    live = {s.id: s for s in result.sessions}["0197a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"]
    assert live.prompts == ["Summarise the changes on this branch for the PR", "thanks"]
    assert [t.role for t in live.turns] == ["user", "assistant", "user"]
    assert live.turns[1].tools == ("shell",)
    assert live.branch == "feature/pr"
    assert result.stats.project.mirrored_records == 3
    assert result.stats.project.injected_blocks == 2
    archived = {s.id for s in result.sessions}
    assert "0197a1b2-c3d4-7e5f-8a9b-aaaaaaaaaaaa" in archived  # archived_sessions are read too


def test_generic_jsonl_needs_a_time_zone(home: Path) -> None:
    """Kills: accepting a timestamp without a zone (it would be compared as local time)."""
    result = harvest([GenericJsonlSource(home)], SHOP)
    assert "j3" not in {s.id for s in result.sessions}
    assert any("no time zone" in m for m in result.stats.home.malformed_examples)


def test_watermark_compares_times_not_strings_across_time_zones(home: Path) -> None:
    """Kills: a watermark compared as a string or stored without a zone. The UTC+8 session ends
    before the watermark (but its string sorts after it); the UTC−5 session ends after it (but
    its string sorts before); the straddling session is read once, whole."""
    watermark = datetime(2025, 6, 10, 12, 0, tzinfo=UTC)
    result = harvest([GenericJsonlSource(home)], SHOP, watermark=watermark)
    kept = [s.id for s in result.sessions]
    assert kept == ["w-straddle", "w-west"]
    straddle = result.sessions[0]
    assert len(straddle.turns) == 2
    assert result.newest == datetime(2025, 6, 10, 12, 45, tzinfo=UTC)
    with pytest.raises(SleepError, match="timezone-aware"):
        harvest([GenericJsonlSource(home)], SHOP, watermark=datetime(2025, 6, 10, 12))


def test_an_empty_home_is_a_clear_error(tmp_path: Path) -> None:
    """Kills: `--source auto` on a home without transcripts silently staging an empty night."""
    with pytest.raises(SleepError, match="no transcripts under"):
        make_sources("auto", tmp_path)
    with pytest.raises(SleepError, match="unknown source"):
        make_sources("cursor", tmp_path)


# -- the real formats (fixtures of the shapes Claude Code 2.1 and Codex CLI 0.104 / mid-2025
# write, under tests/fixtures/sleep/real_home) ---------------------------------------------------

REAL = Path(__file__).parent / "fixtures" / "sleep" / "real_home"
APP = ProjectMatcher(("/work/app",))
CLAUDE_ID = "7c1e2a90-5b3d-4f6e-9a8b-1c2d3e4f5a6b"
CODEX_ID = "019b2c3d-4e5f-7a6b-8c9d-0e1f2a3b4c5d"
LEGACY_ID = "5f0c2e1a-9b8d-4c7e-a6f5-3d2c1b0a9e8f"


@pytest.fixture(scope="module")
def real() -> HarvestResult:
    return harvest(make_sources("auto", REAL), APP)


def _session(result: HarvestResult, session_id: str) -> Session:
    return next(s for s in result.sessions if s.id == session_id)


def test_compaction_summaries_are_not_prompts(real: HarvestResult) -> None:
    """Kills: a `user` record with `isCompactSummary: true` ("This session is being continued
    from a previous conversation...") harvested as the user's request (issue 18, item 1), or a
    Codex `compacted` record read as a turn."""
    prompts = " ".join(p for s in real.sessions for p in s.prompts)
    assert "being continued" not in prompts and "Summary of the work" not in prompts
    assert real.stats.project.compact_summaries == 2


def test_task_notifications_are_not_prompts(real: HarvestResult) -> None:
    """Kills: `<task-notification>` records (a string `user` record, or a `queued_command`
    attachment with `commandMode: task-notification`) harvested as requests (item 2)."""
    prompts = " ".join(_session(real, CLAUDE_ID).prompts)
    assert "task-notification" not in prompts and "Background command" not in prompts
    assert real.stats.project.notices == 2


def test_a_slash_command_request_is_read_from_its_args(real: HarvestResult) -> None:
    """Kills: dropping a `<command-name>` record as meta, which loses the request in
    `<command-args>` and mines the task from a later follow-up (item 3); or reading a settings
    command (`/model opus`) or a prompt typed mid-turn wrongly."""
    session = _session(real, CLAUDE_ID)
    assert session.prompts[0] == "/fix-issue the login page crashes when the email has a plus sign"
    assert session.prompts[1].startswith("also add a test for it")  # queued mid-turn
    assert not any("/model" in p or "opus" in p for p in session.prompts)
    assert session.prompts[-1] == "thanks, ship it"
    stats = real.stats.project
    assert (stats.slash_commands, stats.queued_prompts) == (1, 1)
    assert stats.meta_prompts == 4  # the expanded isMeta prompt, /model, its output, an interrupt


def test_counts_are_for_the_project_not_the_home(tmp_path: Path) -> None:
    """Kills: counting sessions, redactions, unknown records and malformed lines before the
    project filter (item 4: a project none of whose sessions holds a secret reported the home's
    redactions); home-wide figures are kept apart and labelled."""
    result = harvest(make_sources("auto", REAL), ProjectMatcher(("/work/other",)))
    assert result.stats.sessions == 1
    assert result.stats.project.redactions_total == 1  # only its own key
    assert result.stats.project.unknown == {"other-unknown-kind": 1}
    assert result.stats.project.malformed_lines == 1
    clean = harvest(make_sources("auto", REAL), ProjectMatcher(("/work/nothing-here",)))
    data = clean.stats.to_dict()
    assert data["sessions"] == 0 and data["redactions_total"] == 0
    assert data["unknown_records"] == 0 and data["malformed_lines"] == 0
    assert data["home_wide"]["redactions_total"] == 9
    assert data["home_wide"]["skipped"]["other_project"] == 5


def test_routine_records_are_known_and_only_unknown_types_are_named(real: HarvestResult) -> None:
    """Kills: counting `progress`, `queue-operation`, `file-history-snapshot`, `attachment`,
    `system` subtypes, titles and the Codex `record_type: state` lines as unknown (item 5:
    6,635 "unknown records" in 20 files); unknown types must be reported by name."""
    stats = real.stats.project
    assert stats.unknown == {"hologram-sync": 1, "spaceship_launch": 1}
    for kind in (
        "progress",
        "queue-operation",
        "file-history-snapshot",
        "attachment",
        "system",
        "custom-title",
        "ai-title",
        "last-prompt",
        "permission-mode",
        "summary",
        "record_type:state",
        "compacted",
        "turn_context",
    ):
        assert stats.records[kind] >= 1, kind
    assert real.stats.to_dict()["unknown_types"] == {"hologram-sync": 1, "spaceship_launch": 1}


def test_codex_web_search_and_every_tool_call_kind_count(real: HarvestResult) -> None:
    """Kills: `web_search_call` items (or `custom_tool_call`, `local_shell_call`) not counted as
    tool calls (item 6), or their inputs dropped."""
    session = _session(real, CODEX_ID)
    calls = [c for t in session.turns for c in t.calls]
    assert [c.name for c in calls] == ["web_search", "shell_command", "apply_patch", "local_shell"]
    assert calls[0].input == "sqlite fts5 python"
    assert calls[3].input == "pytest -q tests/test_search.py"
    assert session.tool_calls == 4
    assert session.prompts == [
        "Add full-text search to the notes API; staging uses [REDACTED:openai_key]",
        "rank results by recency",
    ]
    assert session.branch == "feat/search"


def test_codex_sub_agent_sessions_are_skipped(real: HarvestResult) -> None:
    """Kills: ignoring `session_meta.source` (a `{"subagent": ...}` session, e.g. a review
    sub-agent, harvested as if the user had asked for it; item 6)."""
    assert "019b2c3d-aaaa-7a6b-8c9d-0e1f2a3b4c5d" not in {s.id for s in real.sessions}
    assert real.stats.skipped["subagent"] == 1


def test_codex_rollouts_in_the_mid_2025_format_are_read(real: HarvestResult) -> None:
    """Kills: the older format (a bare header line, `record_type: state` lines, bare items
    without timestamps) giving 0 sessions with no warning (item 6); its cwd comes from the
    `<environment_context>` block."""
    session = _session(real, LEGACY_ID)
    assert session.cwd == "/work/app" and session.branch == "main"
    assert session.prompts == ["Why does `make test` hang on CI?"]
    assert [c.name for t in session.turns for c in t.calls] == ["shell"]
    assert session.started == datetime(2025, 7, 14, 16, 20, 41, 512000, tzinfo=UTC)
    assert session.assistant_chars > 0


def test_sub_agent_records_of_a_fork_keep_the_first_session_meta(tmp_path: Path) -> None:
    """Kills: a forked rollout (its own `session_meta` first, then its parent's copied after)
    taking the parent's id and cwd from the second line."""
    folder = tmp_path / ".codex" / "sessions" / "2026" / "03" / "01"
    folder.mkdir(parents=True)
    lines = [
        {
            "timestamp": "2026-03-01T10:00:00Z",
            "type": "session_meta",
            "payload": {"id": "child", "cwd": "/work/app", "source": "cli"},
        },
        {
            "timestamp": "2026-03-01T10:00:00Z",
            "type": "session_meta",
            "payload": {"id": "parent", "cwd": "/work/elsewhere", "source": "cli"},
        },
        {
            "timestamp": "2026-03-01T10:00:01Z",
            "type": "event_msg",
            "payload": {"type": "user_message", "message": "go on"},
        },
    ]
    (folder / "rollout-2026-03-01T10-00-00-child.jsonl").write_text(
        "\n".join(json.dumps(x) for x in lines) + "\n"
    )
    result = harvest([CodexSource(tmp_path)], APP)
    assert [s.id for s in result.sessions] == ["child"]


# -- issue 27: injected blocks and queued notices are not the user's requests ---------------

_INJECTED = {
    "environment_context": "<environment_context>\n  <cwd>/work/app</cwd>\n  <shell>bash</shell>"
    "\n</environment_context>",
    "AGENTS.md": "# AGENTS.md instructions for /work/app\n\n<INSTRUCTIONS>\nRun `make test`."
    "\n</INSTRUCTIONS>",
    "user_instructions": "<user_instructions>\n\nRun `make test`.\n\n</user_instructions>",
}


def _rollout(home: Path, lines: list[dict[str, object]]) -> None:
    folder = home / ".codex" / "sessions" / "2026" / "02" / "04"
    folder.mkdir(parents=True, exist_ok=True)
    meta = {
        "timestamp": "2026-02-04T08:00:00Z",
        "type": "session_meta",
        "payload": {"id": "019b2c3d-2222-7a6b-8c9d-0e1f2a3b4c5d", "cwd": "/work/app"},
    }
    (folder / "rollout-2026-02-04T08-00-00-019b2c3d-2222-7a6b-8c9d-0e1f2a3b4c5d.jsonl").write_text(
        "\n".join(json.dumps(x) for x in [meta, *lines]) + "\n"
    )


def _codex_user(second: int, text: str, copy: str) -> dict[str, object]:
    when = f"2026-02-04T08:00:{second:02d}Z"
    if copy == "event_msg":
        return {
            "timestamp": when,
            "type": "event_msg",
            "payload": {"type": "user_message", "message": text},
        }
    return {
        "timestamp": when,
        "type": "response_item",
        "payload": {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": text}],
        },
    }


@pytest.mark.parametrize("copy", ["event_msg", "response_item"])
@pytest.mark.parametrize("block", sorted(_INJECTED))
def test_codex_injected_blocks_are_not_user_requests(tmp_path: Path, block: str, copy: str) -> None:
    """Kills: reading an injected `<environment_context>`, AGENTS.md or `<user_instructions>`
    block as a request, in a rollout whose turns are `event_msg`s or in one that has only
    `response_item` messages (each copy has its own check)."""
    _rollout(
        tmp_path,
        [
            _codex_user(1, _INJECTED[block], copy),
            _codex_user(2, "Add search to the notes API", copy),
        ],
    )
    (session,) = harvest([CodexSource(tmp_path)], APP).sessions
    assert session.prompts == ["Add search to the notes API"]


def _queued(prompt: str, mode: str | None) -> dict[str, object]:
    attachment: dict[str, object] = {"type": "queued_command", "prompt": prompt}
    if mode is not None:
        attachment["commandMode"] = mode
    return {
        "type": "attachment",
        "attachment": attachment,
        "cwd": "/work/app",
        "sessionId": "6b1e2a90-5b3d-4f6e-9a8b-1c2d3e4f5a6b",
        "uuid": "att",
        "timestamp": "2026-01-20T10:00:08.000Z",
    }


@pytest.mark.parametrize(
    ("prompt", "mode"),
    [
        # an older Claude Code: no commandMode, the notice known by its tag
        (
            "<task-notification>\n<task-id>c1</task-id>\n<status>completed</status>\n"
            "</task-notification>",
            None,
        ),
        ("<task-notification>\n<task-id>c2</task-id>\n</task-notification>", "prompt"),
        # a 2.1 notice: known by its commandMode, whatever its text starts with
        ('Background command "npm run build" completed (exit code 0)', "task-notification"),
    ],
)
def test_a_queued_task_notification_is_not_a_user_request(
    tmp_path: Path, prompt: str, mode: str | None
) -> None:
    """Kills: a queued `<task-notification>` read as a prompt the user typed, whether it is
    recognised by its tag (no or a `prompt` commandMode) or by its commandMode."""
    folder = tmp_path / ".claude" / "projects" / "-work-app"
    folder.mkdir(parents=True)
    user = {
        "type": "user",
        "cwd": "/work/app",
        "sessionId": "6b1e2a90-5b3d-4f6e-9a8b-1c2d3e4f5a6b",
        "uuid": "u1",
        "timestamp": "2026-01-20T10:00:01.000Z",
        "message": {"role": "user", "content": "Fix the login crash"},
    }
    (folder / "6b1e2a90-5b3d-4f6e-9a8b-1c2d3e4f5a6b.jsonl").write_text(
        "\n".join(json.dumps(x) for x in [user, _queued(prompt, mode)]) + "\n"
    )
    result = harvest([ClaudeCodeSource(tmp_path)], APP)
    (session,) = result.sessions
    assert session.prompts == ["Fix the login crash"]
    assert result.stats.project.notices == 1 and result.stats.project.queued_prompts == 0


def test_tool_outputs_are_paired_with_their_calls_with_exit_codes(real: HarvestResult) -> None:
    """Kills: outputs attached to the wrong call (or none), the exit code of a Codex output
    (`Exit code: N` text, or the older JSON `metadata.exit_code`) not read, or Claude's
    `is_error` ignored."""
    codex = [c for t in _session(real, CODEX_ID).turns for c in t.calls]
    shell = next(c for c in codex if c.name == "shell_command")
    assert shell.output.startswith("Exit code: 0") and shell.exit_code == 0 and not shell.failed
    assert next(c for c in codex if c.name == "apply_patch").output == "Success."
    legacy = [c for t in _session(real, LEGACY_ID).turns for c in t.calls]
    assert legacy[0].output == "test:\n\tpytest --watch" and legacy[0].exit_code == 0
    claude = [c for t in _session(real, CLAUDE_ID).turns for c in t.calls]
    assert [c.output for c in claude] == ["1 failed", "ok"]
    assert claude[0].failed is False and claude[1].failed is None


def test_a_failed_command_is_marked_failed_with_its_exit_code(tmp_path: Path) -> None:
    """Kills: a failing command read as a success (Claude `is_error: true` with `Exit code 1`,
    Codex `Exit code: 2`), which would hide the failed-then-fixed evidence from mining."""
    from fixtures.sleep.planted import LOCATIONS

    LOCATIONS["claude tool output"](tmp_path / "c", "")
    path = next((tmp_path / "c").rglob("*.jsonl"))
    text = path.read_text().replace(
        '"content": "config:\\n\\n1 passed", "is_error": false',
        '"content": "Exit code 1\\nFAILED test_login", "is_error": true',
    )
    path.write_text(text)
    (claude,) = harvest(make_sources("claude", tmp_path / "c"), APP).sessions
    (call,) = [c for t in claude.turns for c in t.calls]
    assert call.failed is True and call.exit_code == 1 and "FAILED test_login" in call.output
    _rollout(
        tmp_path / "x",
        [
            _codex_user(1, "run the tests", "event_msg"),
            {
                "timestamp": "2026-02-04T08:00:02Z",
                "type": "response_item",
                "payload": {
                    "type": "function_call",
                    "name": "shell_command",
                    "call_id": "c9",
                    "arguments": json.dumps({"command": "pytest -q"}),
                },
            },
            {
                "timestamp": "2026-02-04T08:00:03Z",
                "type": "response_item",
                "payload": {
                    "type": "function_call_output",
                    "call_id": "c9",
                    "output": "Exit code: 2\nWall time: 1.1 seconds\nOutput:\nE   ImportError",
                },
            },
        ],
    )
    (codex,) = harvest([CodexSource(tmp_path / "x")], APP).sessions
    (call,) = [c for t in codex.turns for c in t.calls]
    assert call.failed is True and call.exit_code == 2 and call.output.endswith("ImportError")


def test_a_long_tool_output_keeps_its_head_and_its_tail(tmp_path: Path) -> None:
    """Kills: keeping only the head of a long output (a test run's verdict and traceback are at
    its end) or keeping it whole (sessions.jsonl and the mining prompt would grow unbounded)."""
    from fixtures.sleep.planted import LOCATIONS

    from skillopt_dsl.sleep.harvest import TOOL_OUTPUT_CHARS

    long = "collected 300 items\n" + "tests/test_x.py ....\n" * 300 + "AssertionError: 3 != 4"
    LOCATIONS["codex tool output"](tmp_path, long)
    (session,) = harvest([CodexSource(tmp_path)], APP).sessions
    shell = next(c for t in session.turns for c in t.calls if c.name == "shell_command")
    assert len(shell.output) <= TOOL_OUTPUT_CHARS
    assert shell.output.startswith("Exit code: 0") and "\n...\n" in shell.output
    assert shell.output.endswith("AssertionError: 3 != 4\nok")
