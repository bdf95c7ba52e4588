"""Mining: typed tasks whose checks cannot be invented, heuristic tasks from feedback, recurring
tasks clustered, stable hashed splits, and the reviewable dataset."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pydantic
import pytest

from skillopt_dsl.lm import LM
from skillopt_dsl.sleep.errors import SleepError
from skillopt_dsl.sleep.harvest import ProjectMatcher, Session, Turn, harvest
from skillopt_dsl.sleep.mine import MINE_SYSTEM, mine_sessions
from skillopt_dsl.sleep.sources import make_sources
from skillopt_dsl.sleep.tasks import (
    Task,
    assign_split,
    check_passes,
    load_tasks,
    save_tasks,
    task_id,
)
from skillopt_dsl.testing import ScriptedLM

HOME = Path(__file__).parent / "fixtures" / "sleep" / "home"
PROJECT = "/work/shop"


@pytest.fixture
def sessions(tmp_path: Path) -> list:  # type: ignore[type-arg]
    home = tmp_path / "home"
    shutil.copytree(HOME, home)
    return harvest(make_sources("auto", home), ProjectMatcher((PROJECT,))).sessions


def test_an_unknown_check_is_a_validation_error_never_a_pass() -> None:
    """Kills: accepting unknown check kinds (SkillOpt-Sleep let them pass), stray fields, or a
    regex that does not compile."""
    base = {"id": "t", "project": PROJECT, "intent": "do it"}
    with pytest.raises(pydantic.ValidationError):
        Task.model_validate({**base, "checks": [{"kind": "smells_good"}]})
    with pytest.raises(pydantic.ValidationError):
        Task.model_validate({**base, "checks": [{"kind": "contains", "value": "x", "maybe": 1}]})
    with pytest.raises(pydantic.ValidationError):
        Task.model_validate({**base, "checks": [{"kind": "regex", "pattern": "(["}]})
    with pytest.raises(pydantic.ValidationError, match="rule check or a rubric"):
        Task.model_validate(base)


def test_rule_checks_behave() -> None:
    """Kills: a check that always passes (each kind is shown both passing and failing)."""
    cases = [
        ({"kind": "contains", "value": "decimal"}, "Use Decimal.", "Use float."),
        ({"kind": "not_contains", "value": "float"}, "Use Decimal.", "Use FLOAT."),
        ({"kind": "regex", "pattern": r"^\d+ passed$"}, "ok\n12 passed", "failed"),
        ({"kind": "max_chars", "limit": 5}, "short", "too long"),
        ({"kind": "section_present", "heading": "Testing"}, "## Testing\nran it", "no tests"),
        ({"kind": "no_refusal"}, "Done: added it.", "I'm sorry, but I can't help with that."),
    ]
    for raw, passing, failing in cases:
        check = Task.model_validate(
            {"id": "t", "project": "p", "intent": "i", "checks": [raw]}
        ).checks[0]
        assert check_passes(check, passing) and not check_passes(check, failing), raw


def _miner(reply: str) -> tuple[LM, ScriptedLM]:
    fake = ScriptedLM(lambda messages: reply, model="scripted/miner")
    return LM(fake), fake


def test_model_mining_one_call_per_session_with_redacted_prompts(sessions: list) -> None:  # type: ignore[type-arg]
    """Kills: more than one mining call per session, sending unredacted transcripts to the
    model, dropping a valid model proposal, or a model that replaces the evidence-mined tasks
    instead of adding to them (issue 26: the model adds intents, checks and rubrics)."""
    reply = json.dumps(
        {
            "tasks": [
                {
                    "intent": "Make prices exact",
                    "checks": [{"kind": "contains", "value": "Decimal"}],
                    "rubric": None,
                    "outcome": "resolved",
                }
            ]
        }
    )
    lm, fake = _miner(reply)
    tasks, stats = mine_sessions(sessions, project=PROJECT, lm=lm, fractions=(0.4, 0.4, 0.2))
    assert len(fake.calls) == len(sessions) == stats.model_calls
    assert all(c[0]["content"] == MINE_SYSTEM for c in fake.calls)
    sent = " ".join(m["content"] for c in fake.calls for m in c)
    assert "sk-proj-AbCdEf" not in sent and "[REDACTED:openai_key]" in sent
    assert stats.model_tasks == len(sessions) and stats.heuristic_tasks >= len(sessions)
    assert "# Checks already mined from the session's evidence" in sent
    added = [t for t in tasks if t.intent == "Make prices exact"]
    assert len(added) == 1 and added[0].weight == len(sessions)  # one recurring task
    assert any(t.origin == "heuristic" for t in tasks)


def test_an_invalid_reply_falls_back_to_the_heuristic(sessions: list) -> None:  # type: ignore[type-arg]
    """Kills: a reply with an unknown check kind becoming a task (or crashing the night)."""
    bad = json.dumps({"tasks": [{"intent": "x", "checks": [{"kind": "vibes"}]}]})
    lm, _ = _miner(bad)
    tasks, stats = mine_sessions(sessions, project=PROJECT, lm=lm, fractions=(0.4, 0.4, 0.2))
    assert stats.invalid_replies >= 1 and stats.model_tasks == 0
    assert all(t.origin == "heuristic" for t in tasks)


def test_a_model_that_cannot_mine_is_dropped_after_its_first_reply(
    sessions: list,  # type: ignore[type-arg]
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Kills: asking a model whose first reply holds no valid task again for every session
    (issue 18: the 135M model took 99 s for 3 sessions, every reply "holds no JSON object"),
    or dropping it silently (the report must say so, and a warning must give the reason)."""
    lm, fake = _miner("Sure! Here are some tasks for the developer.")
    with caplog.at_level("WARNING", logger="skillopt_dsl.sleep.mine"):
        tasks, stats = mine_sessions(sessions, project=PROJECT, lm=lm, fractions=(0.4, 0.4, 0.2))
    assert len(fake.calls) == 1 and stats.model_calls == 1 and stats.invalid_replies == 1
    assert stats.model_dropped is not None and "evidence" in stats.model_dropped
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert any("holds no JSON object" in w and "scripted/miner" in w for w in warned), warned
    assert stats.to_dict()["model_dropped"] == stats.model_dropped
    assert stats.heuristic_tasks == len(sessions) and len(tasks) > 0


def test_a_model_that_mined_well_is_not_dropped_for_one_bad_reply(sessions: list) -> None:  # type: ignore[type-arg]
    """Kills: dropping a model that already yielded valid tasks because one later reply was
    invalid (the drop is for models that cannot mine at all)."""
    good = json.dumps(
        {
            "tasks": [
                {
                    "intent": "Make prices exact",
                    "checks": [{"kind": "contains", "value": "Decimal"}],
                }
            ]
        }
    )
    replies = iter([good, "not json"] + [good] * 50)
    fake = ScriptedLM(lambda messages: next(replies), model="scripted/miner")
    _, stats = mine_sessions(sessions, project=PROJECT, lm=LM(fake), fractions=(0.4, 0.4, 0.2))
    assert stats.model_dropped is None and stats.model_calls == len(sessions)
    assert stats.invalid_replies == 1


def test_heuristic_task_reads_corrections_and_feedback(sessions: list) -> None:  # type: ignore[type-arg]
    """Kills: ignoring the user's "no, still wrong — use X not Y" correction or their "thanks"."""
    tasks, _ = mine_sessions(sessions, project=PROJECT, lm=None, fractions=(0.4, 0.4, 0.2))
    price = next(t for t in tasks if "parse_price" in t.intent)
    described = [c.describe() for c in price.checks]
    assert "contains 'Decimal'" in described and "not_contains 'float'" in described
    assert "contains 'parse_price'" in described and "no_refusal" in described
    assert price.outcome == "resolved"
    assert price.reference == "`parse_price` now returns `Decimal(s)`."


def test_the_same_prompt_in_three_sessions_is_one_weighted_task(sessions: list) -> None:  # type: ignore[type-arg]
    """Kills: no clustering (three copies would inflate val and leak across splits) or a
    similarity so loose that different tasks merge."""
    tasks, stats = mine_sessions(sessions, project=PROJECT, lm=None, fractions=(0.4, 0.4, 0.2))
    summary = [t for t in tasks if "Summarise the changes" in t.intent]
    assert len(summary) == 1 and summary[0].weight == 3
    assert len(summary[0].source_sessions) == 3
    assert stats.recurring_clusters == 1
    assert len(tasks) == len(sessions) - 2


def _session(sid: str, prompt: str, hour: int) -> Session:
    when = datetime(2026, 1, 5, hour, tzinfo=UTC)
    turns = (Turn("user", prompt, when), Turn("assistant", "ok", when))
    return Session(sid, "claude", PROJECT, Path(f"{sid}.jsonl"), turns)


def test_different_beads_issues_and_files_are_never_merged() -> None:
    """Kills: clustering "Work on bead bd-12" with "Work on bead bd-13" (issue 18: four
    different bead requests merged into one task whose intent named one of them), or a scorer
    that merges a short request into any longer one containing its words."""
    prompts = [
        "Work on bead skillopt-a1x",
        "Work on bead skillopt-b2y",
        "Work on bead skillopt-c3z",
        "Work on bead skillopt-a1x",
        "fix the bug",
        "fix the bug in the parser and add tests",
    ]
    sessions = [_session(f"s{i}", p, 9 + i) for i, p in enumerate(prompts)]
    tasks, stats = mine_sessions(sessions, project=PROJECT, lm=None, fractions=(0.4, 0.4, 0.2))
    by_intent = {t.intent: t.weight for t in tasks}
    assert by_intent == {
        "Work on bead skillopt-a1x": 2,
        "Work on bead skillopt-b2y": 1,
        "Work on bead skillopt-c3z": 1,
        "fix the bug": 1,
        "fix the bug in the parser and add tests": 1,
    }
    assert stats.recurring_clusters == 1


def test_splits_are_stable_hashes_of_the_task_id() -> None:
    """Kills: random or order-dependent splits (a task would move from train to val between
    nights) and ids that depend on where the project is checked out."""
    assert task_id("/a/shop", "Fix it") == task_id("/b/shop/", "fix   IT")
    ids = [task_id("shop", f"task {i}") for i in range(300)]
    first = [assign_split(i) for i in ids]
    assert first == [assign_split(i) for i in ids]
    shares = {s: first.count(s) / len(first) for s in ("train", "val", "test")}
    assert 0.3 < shares["train"] < 0.5 and 0.3 < shares["val"] < 0.5 and 0.1 < shares["test"] < 0.3
    with pytest.raises(SleepError, match="sum to 1"):
        assign_split("x", (0.5, 0.5, 0.5))


def test_tasks_round_trip_through_the_dataset_and_review(tmp_path: Path, sessions: list) -> None:  # type: ignore[type-arg]
    """Kills: a dataset that loses checks, an edited row with a bad check silently skipped, or
    `reviewed_only` ignoring the review flag."""
    tasks, _ = mine_sessions(sessions, project=PROJECT, lm=None, fractions=(0.4, 0.4, 0.2))
    save_tasks(tasks, tmp_path)
    from datasets import load_from_disk

    assert len(load_from_disk(str(tmp_path / "tasks"))) == len(tasks)
    assert load_tasks(tmp_path / "tasks") == tasks
    rows = [json.loads(line) for line in (tmp_path / "tasks.jsonl").read_text().splitlines()]
    rows[0]["reviewed"] = True
    edited = tmp_path / "edited.jsonl"
    edited.write_text("\n".join(json.dumps(r) for r in rows))
    assert [t.id for t in load_tasks(edited, reviewed_only=True)] == [rows[0]["id"]]
    rows[1]["checks"] = json.dumps([{"kind": "telepathy"}])
    edited.write_text("\n".join(json.dumps(r) for r in rows))
    with pytest.raises(SleepError, match="task row 1 is invalid"):
        load_tasks(edited)


def test_a_model_adds_a_rubric_to_the_task_mined_from_evidence(sessions: list) -> None:  # type: ignore[type-arg]
    """Kills: a model's rubric lost when its task merges with the evidence-mined task of the
    same request (the merged task would keep only the first task's empty rubric)."""

    def respond(messages: list[dict[str, str]]) -> str:
        first = messages[-1]["content"].split("USER: ", 1)[1].split("\n\n", 1)[0]
        task = {"intent": first, "rubric": "Says which file changed.", "checks": []}
        return json.dumps({"tasks": [task]})

    lm = LM(ScriptedLM(respond, model="scripted/miner"))
    tasks, _ = mine_sessions(sessions, project=PROJECT, lm=lm, fractions=(0.4, 0.4, 0.2))
    price = next(t for t in tasks if "parse_price" in t.intent)
    assert price.rubric == "Says which file changed." and price.origin == "heuristic"
    assert any(c.source for c in price.checks)


def test_a_valid_reply_that_finds_no_task_does_not_drop_the_model(sessions: list) -> None:  # type: ignore[type-arg]
    """Kills: reading one session with nothing to mine as a model that cannot mine (a model
    whose first answer was a valid `{"tasks": []}` was not asked about any other session, and
    the report said its reply held no valid task)."""
    good = json.dumps(
        {
            "tasks": [
                {
                    "intent": "Make prices exact",
                    "checks": [{"kind": "contains", "value": "Decimal"}],
                }
            ]
        }
    )
    replies = iter([json.dumps({"tasks": []})] + [good] * 50)
    fake = ScriptedLM(lambda messages: next(replies), model="scripted/miner")
    tasks, stats = mine_sessions(sessions, project=PROJECT, lm=LM(fake), fractions=(0.4, 0.4, 0.2))
    assert stats.model_dropped is None and stats.model_calls == len(sessions) > 1
    assert stats.invalid_replies == 0 and stats.model_tasks == len(sessions) - 1
    assert any(t.origin == "model" for t in tasks)


def test_a_reply_whose_tasks_have_no_check_counts_as_invalid(sessions: list) -> None:  # type: ignore[type-arg]
    """Kills: a reply of tasks with neither a check nor a rubric read as a valid empty answer
    (the model that writes only intents would be asked about every session for nothing)."""
    lm, fake = _miner(json.dumps({"tasks": [{"intent": "Be careful", "checks": []}]}))
    _, stats = mine_sessions(sessions, project=PROJECT, lm=lm, fractions=(0.4, 0.4, 0.2))
    assert len(fake.calls) == 1 and stats.invalid_replies == 1
    assert (
        stats.model_dropped is not None and "no task has a check or a rubric" in stats.model_dropped
    )
