"""Harvest: real Claude Code and Codex record formats, read only, skipping what is not the user's
own work, counting what is broken, and a timezone-aware watermark."""

from __future__ import annotations

import hashlib
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest

from skillopt_dsl.sleep.errors import SleepError
from skillopt_dsl.sleep.harvest import ProjectMatcher, harvest
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
    assert result.stats.skipped["sidechain"] == 2
    assert result.stats.malformed_lines == 1
    assert result.stats.unknown_records == 1
    assert result.stats.meta_prompts == 2
    assert result.stats.tool_results == 2


def test_own_replays_and_other_projects_are_never_harvested(home: Path) -> None:
    """Kills: harvesting sessions that Sleep's replays started (run inside a night folder, or
    opened by the replay marker), or another project's sessions."""
    result = harvest(make_sources("auto", home), SHOP)
    assert result.stats.skipped["own_replay"] == 2
    assert result.stats.skipped["other_project"] == 1
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
    assert result.stats.mirrored_records == 3
    assert result.stats.injected_blocks == 2
    archived = {s.id for s in result.sessions}
    assert "0197a1b2-c3d4-7e5f-8a9b-aaaaaaaaaaaa" in archived  # archived_sessions are read too


def test_generic_jsonl_needs_a_time_zone(home: Path) -> None:
    """Kills: accepting a timestamp without a zone (it would be compared as local time)."""
    result = harvest([GenericJsonlSource(home)], SHOP)
    assert "j3" not in {s.id for s in result.sessions}
    assert any("no time zone" in m for m in result.stats.malformed_examples)


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
