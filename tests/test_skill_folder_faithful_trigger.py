"""The faithful trigger and trigger rates (issue 53, items 2 and 3): the router sees what an
agent sees (a system prompt with ordinary tools beside a `Skill` tool listing every available
skill), a request needing no skill scores right when no tool is called, each request runs k
times at a temperature above 0 with its own seeds (cached as distinct samples) and scores its
trigger rate, and the pre-flight says before any call how many requests a realistic gain
needs. The routers are scripted fakes."""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from pathlib import Path

import pytest
from typer.testing import CliRunner

from skillopt_dsl.cli import app
from skillopt_dsl.cli import skill_folder as folder_cli
from skillopt_dsl.evaluate import evaluate
from skillopt_dsl.lm import LM, ResponseCache
from skillopt_dsl.skill_folder import SkillCard, SkillFolder, TriggerModule
from skillopt_dsl.skill_folder.trigger import ORDINARY_TOOLS, SKILL_TOOL, TriggerSampling
from skillopt_dsl.skill_folder.trigger_data import trigger_preflight
from skillopt_dsl.testing import ScriptedLM
from skillopt_dsl.testing.trigger_fakes import (
    listed_description,
    listed_names,
    skill_call,
    tool_call,
    trigger_request,
)
from skillopt_dsl.types import Example

ONE = TriggerSampling(samples=1)
OTHERS = (SkillCard("commit-message", "Writes a commit message."), SkillCard("pdf", "Reads PDFs."))


def _folder(tmp_path: Path) -> SkillFolder:
    root = tmp_path / "release-notes"
    root.mkdir()
    (root / "SKILL.md").write_text(
        "---\nname: release-notes\ndescription: Writes release notes.\n---\n# Body\n"
    )
    return SkillFolder.read(root)


def _example(request: str, should: bool) -> Example:
    return Example(id=request, inputs={"request": request}, labels={"should_trigger": should})


def test_the_request_is_an_agent_prompt_with_ordinary_tools_and_a_skill_tool(
    tmp_path: Path,
) -> None:
    """Kills: the bare "name one skill" list (no tools, so "no skill" is no real option), a
    listing that leaves a skill out, and the request folded into the listing's message."""
    module = TriggerModule(_folder(tmp_path), OTHERS, sampling=ONE)
    messages = module.render(module.seed_skill, _example("Tag v2.1 and note it", True))
    system = str(messages[0]["content"])
    assert messages[0]["role"] == "system" and messages[-1] == {
        "role": "user",
        "content": "Tag v2.1 and note it",
    }
    for signature, _ in ORDINARY_TOOLS:
        assert f"- {signature}:" in system
    assert f"- {SKILL_TOOL}(skill):" in system
    assert sorted(listed_names(messages)) == ["commit-message", "pdf", "release-notes"]
    assert listed_description(messages, "release-notes") == "Writes release notes."
    assert listed_description(messages, "pdf") == "Reads PDFs."


@pytest.mark.parametrize(
    ("reply", "should", "score"),
    [
        ("This needs no tool: 2 + 2 = 4.", False, 1.0),  # answered directly
        (tool_call("Bash", command="ls"), False, 1.0),  # an ordinary tool
        (skill_call("pdf"), False, 1.0),  # another skill
        (skill_call("release-notes"), False, 0.0),
        (skill_call("release-notes"), True, 1.0),
        ('Skill(skill="release-notes")', True, 1.0),
        ("release-notes", True, 0.0),  # names it, calls nothing: nothing loads
        (tool_call("Read", file_path="release-notes") + skill_call("release-notes"), True, 0.0),
    ],
)
def test_the_score_is_whether_the_skill_tool_is_called_for_this_skill(
    tmp_path: Path, reply: str, should: bool, score: float
) -> None:
    """Kills: reading a bare skill name (or a name inside another tool's call) as a load, and a
    request needing no skill scored wrong when the router calls no tool or an ordinary one."""
    module = TriggerModule(_folder(tmp_path), OTHERS, sampling=ONE)
    example = _example("what is 2 + 2", should)
    outcome = module.run(module.seed_skill, example, LM(ScriptedLM(lambda m: reply)), seed=0)
    assert module.score(example, outcome).value == score


def test_k_samples_give_graded_scores_at_a_temperature_with_their_own_seeds(
    tmp_path: Path,
) -> None:
    """Kills: one sample per request (0/1 scores), k samples sharing one seed (the cache
    answers all k with the first), a temperature of 0, and the rate scored against the wrong
    label."""
    cycle = itertools.cycle([True, True, False])
    router = ScriptedLM(lambda m: skill_call("release-notes") if next(cycle) else "No tool.")
    module = TriggerModule(_folder(tmp_path), OTHERS)  # the default: k = 3
    assert module.samples == 3
    examples = [_example("changelog for v2", True), _example("weather today", False)]
    cache = ResponseCache(tmp_path / "cache.sqlite")
    report = evaluate(module, examples, lm=LM(router).with_cache(cache), threads=1, seed=4)
    scores = {r.example_id: r.score for r in report.records}
    assert scores == {
        "changelog for v2": pytest.approx(2 / 3),
        "weather today": pytest.approx(1 / 3),
    }
    assert len(router.calls) == 6
    assert {p.temperature for p in router.params} == {0.7}
    seeds = [p.seed for p in router.params]
    assert len(set(seeds[:3])) == 3 and seeds[:3] == seeds[3:]  # paired across requests
    again = evaluate(module, examples, lm=LM(router).with_cache(cache), threads=1, seed=4)
    assert len(router.calls) == 6  # every sample was cached as its own entry
    assert [r.score for r in again.records] == [r.score for r in report.records]


def test_samples_without_a_temperature_are_refused(tmp_path: Path) -> None:
    """Kills: k samples at temperature 0, which agree and only cost k times the calls."""
    with pytest.raises(Exception, match="temperature above 0"):
        TriggerSampling(samples=3, temperature=0.0)


def test_the_preflight_says_how_many_requests_a_realistic_gain_needs() -> None:
    """Kills: a pre-flight that ignores k (graded rates need fewer requests than one sample)
    or the run's size."""
    one, three = trigger_preflight(18, 1), trigger_preflight(18, 3)
    assert three.needed_val < one.needed_val
    assert not three.enough and trigger_preflight(three.needed_val, 3).enough
    assert three.needed_rows > three.needed_val
    assert trigger_preflight(18, 3, gain=0.2).needed_val < three.needed_val
    assert "a gain of +0.10" in three.line() and str(three.needed_val) in three.line()


def test_the_cli_prints_the_preflight_before_any_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kills: a pre-flight computed after the run (a user learns too late that the data are
    too few)."""

    def refusing(_messages: Sequence[dict[str, str]]) -> str:
        raise RuntimeError("no call was expected yet")

    router = LM(ScriptedLM(refusing, model="scripted/router"))
    monkeypatch.setattr(folder_cli, "folder_models", lambda flags: (router, router))
    folder = _folder(tmp_path)
    rows = [{"request": f"r {n}", "should_trigger": n % 2 == 0} for n in range(40)]
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in rows))
    cards = tmp_path / "cards.jsonl"
    cards.write_text(json.dumps({"name": "pdf", "description": "Reads PDFs."}))
    args = ["compile", "--skill-folder", str(folder.root), "--trigger-data", str(data)]
    result = CliRunner().invoke(
        app, [*args, "--distractors", str(cards), "--run-dir", str(tmp_path / "run")]
    )
    assert "pre-flight: 12 validation requests x 3 sample(s)" in result.output
    assert result.exit_code != 0  # the first call failed, after the pre-flight was printed


def test_a_fake_reading_the_prompt_finds_the_request(tmp_path: Path) -> None:
    """Kills: the shipped fakes reading another message than the request."""
    module = TriggerModule(_folder(tmp_path), OTHERS, sampling=ONE)
    messages = module.render(module.seed_skill, _example("bump the version", False))
    assert trigger_request(messages) == "bump the version"
