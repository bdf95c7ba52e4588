"""Replays through the user's own agent CLI: `CommandAgent` in a copy of the project, the
candidate memory file written in, the replay marker first, the project itself untouched; and
the replay target chosen by flag or `sleep.json`."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from fixtures.sleep.world import make_project, reflecting_optimizer, write_sessions

from skillopt_dsl.lm import Budget
from skillopt_dsl.optimizers import GradientText
from skillopt_dsl.sleep import SleepConfig, SleepError, SleepProject, run_night
from skillopt_dsl.sleep.agent_replay import AgentSettings
from skillopt_dsl.sleep.judge import TaskJudge
from skillopt_dsl.sleep.night import replay_target

FAKE_AGENT = Path(__file__).parent / "fixtures" / "sleep" / "fake_agent_cli.py"


def _fake_claude() -> AgentSettings:
    """FAKE `claude -p`: a script that answers from the workspace's CLAUDE.md."""
    return AgentSettings("claude", argv=(sys.executable, str(FAKE_AGENT), "{prompt}"), timeout_s=60)


def test_a_night_replayed_through_the_agent_cli_accepts_a_real_improvement(
    tmp_path: Path,
) -> None:
    """Kills: agent replays that do not write the candidate memory file into the workspace (the
    agent would never see the learned rule, so nothing could be accepted), that run in the
    project itself (the agent edits the user's files), or that lose the replay marker; and a
    night folder without `sessions.jsonl` (what the night read)."""
    home = tmp_path / "home"
    write_sessions(home)
    project = make_project(tmp_path)
    (project / "shop").mkdir()
    (project / "shop" / "prices.py").write_text("def parse_price(s): return float(s)\n")
    night = run_night(
        SleepConfig(
            project=project,
            home=home,
            source="jsonl",
            replay_agent=_fake_claude(),
            optimizer_lm=reflecting_optimizer(),
            mine_with_model=False,
            optimizer=GradientText(epochs=1, batch_size=8),
            threads=2,
        )
    )
    report = night.report
    assert report.replay == "agent CLI: claude (timeout 60 s)"
    assert report.seed_val is not None and report.candidate_val is not None
    assert report.accepted and report.proposed_files == ["CLAUDE.md"], report.blocked
    assert report.candidate_val > report.seed_val
    assert report.spend["compile_calls"] > 0
    assert (project / "shop" / "prices.py").read_text() == "def parse_price(s): return float(s)\n"
    read = [json.loads(x) for x in (night.path / "sessions.jsonl").read_text().splitlines()]
    assert len(read) == report.harvest["sessions"] == 40 and read[0]["prompts"][0]
    evidence = [json.loads(x) for x in (night.path / "evidence.jsonl").read_text().splitlines()]
    assert any(r["candidate_reply"] == "Keep every amount as a Decimal value." for r in evidence)


def test_the_replay_target_comes_from_the_flag_then_sleep_json(tmp_path: Path) -> None:
    """Kills: `sleep.json`'s `replay` ignored, a flag that does not override it, or a replay
    config naming both (or neither) an agent and a model accepted silently."""
    project = SleepProject.open(make_project(tmp_path))
    config = SleepConfig(project=project.path)
    assert replay_target(config, project.config()) is None  # the embedded model
    settings = json.loads(project.config_path.read_text())
    settings["replay"] = {"agent": "codex", "timeout_s": 120, "env": ["MY_PROXY"]}
    project.config_path.write_text(json.dumps(settings))
    chosen = replay_target(config, project.config())
    assert chosen == AgentSettings("codex", None, 120.0, ("MY_PROXY",))
    assert (
        replay_target(SleepConfig(project=project.path, lm="openai/gpt-4o-mini"), project.config())
        == "openai/gpt-4o-mini"
    )
    assert (
        replay_target(
            SleepConfig(project=project.path, replay_agent=_fake_claude()), project.config()
        )
        == _fake_claude()
    )
    settings["replay"] = {"agent": "codex", "model": "openai/gpt-4o-mini"}
    project.config_path.write_text(json.dumps(settings))
    with pytest.raises(SleepError, match="exactly one of"):
        project.config()


def test_a_missing_agent_cli_is_an_error_before_any_spend(tmp_path: Path) -> None:
    """Kills: a night that harvests, mines and then fails on every replay because the agent CLI
    is not installed (it must refuse before anything runs)."""
    home = tmp_path / "home"
    write_sessions(home)
    project = make_project(tmp_path)
    missing = AgentSettings("claude", argv=("/nonexistent/claude", "-p", "{prompt}"))
    with pytest.raises(Exception, match="was not found"):
        run_night(
            SleepConfig(
                project=project,
                home=home,
                source="jsonl",
                replay_agent=missing,
                mine_with_model=False,
            )
        )
    opened = SleepProject.open(project)
    assert not opened.nights() and not opened.partial_nights() and opened.watermark() is None


def test_the_embedded_default_cuts_replies_short() -> None:
    """Kills: replays on the embedded 135M model generating 256 tokens a reply (it repeats itself
    past ~128, and generation is most of a demo night's time: issue 18, the demo night took 45
    minutes on 2 cores)."""
    from skillopt_dsl.lm import DEFAULT_MODEL
    from skillopt_dsl.sleep.night import EMBEDDED_REPLY_TOKENS, embedded_replay_lm

    lm = embedded_replay_lm()
    assert lm.model == DEFAULT_MODEL and lm.params.max_tokens == EMBEDDED_REPLY_TOKENS == 128


def test_a_dollar_budget_needs_a_declared_price_per_agent_run(tmp_path: Path) -> None:
    """Kills: agent replays sent under `--max-usd` without a declared price per run (issue 20:
    unpriced agent runs under a dollar budget were all sent), or a declared price that never
    reaches `CommandAgent`."""
    home = tmp_path / "home"
    write_sessions(home)
    project = make_project(tmp_path)
    with pytest.raises(SleepError, match="cannot be priced before it runs"):
        run_night(
            SleepConfig(
                project=project,
                home=home,
                source="jsonl",
                replay_agent=_fake_claude(),
                budget=Budget(max_usd=1.0),
                mine_with_model=False,
            )
        )
    opened = SleepProject.open(project)
    assert not opened.partial_nights() and opened.watermark() is None
    priced = AgentSettings("claude", _fake_claude().argv, max_usd_per_run=0.25)
    assert priced.command_agent(TaskJudge()).max_usd_per_run == 0.25
