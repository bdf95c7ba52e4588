"""A review that survives: harvest merges into the review folder, the watermark says what it
skipped and how to re-read it, `sleep review` accepts, drops and edits tasks whose checks are
plain JSON objects, and every check field is documented."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fixtures.sleep.world import PROMPTS, make_project, write_sessions
from typer.testing import CliRunner

from skillopt_dsl.sleep import SleepConfig, run_night
from skillopt_dsl.sleep.cli import sleep_app
from skillopt_dsl.sleep.errors import SleepError
from skillopt_dsl.sleep.review import CHECK_FIELDS, ReviewFolder, check_error, parse_checks
from skillopt_dsl.sleep.tasks import load_tasks

DOCS = Path(__file__).parent.parent / "docs" / "sleep.md"


def _tasks_path(project: Path) -> Path:
    return project / ".skillopt" / "sleep" / "review" / "tasks.jsonl"


def _invoke(*args: str) -> str:
    done = CliRunner().invoke(sleep_app, list(args))
    assert done.exit_code == 0, done.output
    return done.output


def _harvest(project: Path, home: Path, *extra: str) -> str:
    return _invoke(
        "harvest",
        "--project",
        str(project),
        "--home",
        str(home),
        "--source",
        "jsonl",
        "--heuristic-only",
        *extra,
    )


def _rows(project: Path) -> list[dict[str, object]]:
    path = project / ".skillopt" / "sleep" / "review" / "tasks.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def _write_rows(project: Path, rows: list[dict[str, object]]) -> None:
    path = project / ".skillopt" / "sleep" / "review" / "tasks.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


@pytest.fixture
def world(tmp_path: Path) -> tuple[Path, Path]:
    home = tmp_path / "home"
    write_sessions(home, PROMPTS[:4])
    return make_project(tmp_path), home


def test_harvest_after_a_review_keeps_every_reviewed_row(world: tuple[Path, Path]) -> None:
    """Kills: a harvest that rewrites the review folder from what it mined (issue 26: the
    reviewed count went from 1 to 0, and after a night both review files were emptied)."""
    project, home = world
    _harvest(project, home)
    rows = _rows(project)
    rows[0]["reviewed"] = True
    rows[1]["checks"] = [{"kind": "contains", "value": "Money", "case_sensitive": True}]
    rows[1]["reviewed"] = True
    _write_rows(project, rows)
    reviewed = load_tasks(_tasks_path(project))
    again = _harvest(project, home)
    assert "4 task(s) kept as they were (2 reviewed), 0 added" in again
    assert load_tasks(_tasks_path(project)) == reviewed
    assert reviewed[1].checks[0].value == "Money"  # type: ignore[union-attr]
    run_night(SleepConfig(project=project, home=home, source="jsonl", mine_with_model=False))
    after_night = _harvest(project, home)
    assert "this project: 0 session(s)" in after_night
    assert load_tasks(_tasks_path(project)) == reviewed
    sessions = project / ".skillopt" / "sleep" / "review" / "sessions.jsonl"
    assert len(sessions.read_text().splitlines()) == 4


def test_new_tasks_are_added_beside_the_reviewed_ones(world: tuple[Path, Path]) -> None:
    """Kills: a merge that keeps the old rows but drops what was newly mined."""
    project, home = world
    _harvest(project, home)
    write_sessions(home, PROMPTS[4:6], name="later.jsonl")
    out = _harvest(project, home)
    assert "4 task(s) kept as they were (0 reviewed), 2 added" in out
    assert len(_rows(project)) == 6


def test_the_watermark_message_names_what_it_skipped_and_how_to_reread(
    world: tuple[Path, Path],
) -> None:
    """Kills: `sleep harvest` printing "0 session(s)" after a night without saying that the
    sessions were skipped as older than the watermark, and `--since` / `--all` missing."""
    project, home = world
    run_night(SleepConfig(project=project, home=home, source="jsonl", mine_with_model=False))
    out = _harvest(project, home)
    assert "4 session(s) older than the watermark (2025-06-01T12:03:00+00:00) were skipped" in out
    assert "sleep harvest --since YYYY-MM-DD" in out and "sleep harvest --all" in out
    night = _invoke(
        "run",
        "--project",
        str(project),
        "--home",
        str(home),
        "--source",
        "jsonl",
        "--heuristic-only",
    )
    assert "this project: 0 session(s)" in night
    assert "4 session(s) older than the watermark (2025-06-01T12:03:00+00:00)" in night
    assert "this project: 4 session(s)" in _harvest(project, home, "--all")
    assert "this project: 2 session(s)" in _harvest(project, home, "--since", "2025-06-01T10:30")
    both = CliRunner().invoke(
        sleep_app,
        [
            "harvest",
            "--project",
            str(project),
            "--home",
            str(home),
            "--all",
            "--since",
            "2025-06-01",
            "--heuristic-only",
        ],
    )
    assert both.exit_code == 1 and "not both" in both.output


def test_a_dropped_task_is_not_added_again(world: tuple[Path, Path]) -> None:
    """Kills: `--drop` that only deletes the line (the next harvest would bring it back)."""
    project, home = world
    _harvest(project, home)
    dropped = _rows(project)[2]["id"]
    out = _invoke("review", "--project", str(project), "--drop", str(dropped)[:6])
    assert f"dropped {dropped}: " in out
    again = _harvest(project, home, "--all")
    assert "3 task(s) kept as they were (0 reviewed), 0 added, 1 you dropped not re-added" in again
    assert dropped not in [r["id"] for r in _rows(project)]


def test_review_lists_tasks_with_their_checks_and_accepts_or_edits_one(
    world: tuple[Path, Path],
) -> None:
    """Kills: `sleep review` missing, a listing without the checks, `--accept` not marking the
    task reviewed, `--edit` not replacing or adding checks (as JSON objects in the file)."""
    project, home = world
    _harvest(project, home)
    first, second = (str(r["id"]) for r in _rows(project)[:2])
    listing = _invoke("review", "--project", str(project))
    assert "4 task(s)" in listing and f"[ ] {first}" in listing
    checks_line = next(line for line in listing.splitlines() if line.strip().startswith("checks:"))
    assert "no_refusal" in checks_line and "contains 'Decimal'" in checks_line
    assert "not_contains 'float' [night.jsonl:" in checks_line  # where it was mined from
    _invoke("review", "--project", str(project), "--accept", first)
    _invoke(
        "review",
        "--project",
        str(project),
        "--edit",
        second,
        "--checks",
        '[{"kind": "max_chars", "limit": 400}]',
        "--add-check",
        '{"kind": "regex", "pattern": "Decimal\\\\("}',
        "--intent",
        "Make refunds exact",
    )
    rows = {r["id"]: r for r in _rows(project)}
    assert rows[first]["reviewed"] is True and rows[first]["origin"] == "heuristic"
    edited = rows[second]
    assert [{k: v for k, v in c.items() if k != "source"} for c in edited["checks"]] == [
        {"kind": "max_chars", "limit": 400},
        {"kind": "regex", "pattern": "Decimal\\("},
    ]
    assert edited["intent"] == "Make refunds exact"
    assert edited["origin"] == "edited" and edited["reviewed"] is True
    reviewed = load_tasks(project / ".skillopt/sleep/review/tasks.jsonl", reviewed_only=True)
    assert {t.id for t in reviewed} == {first, second}
    assert "[x] " + first in _invoke("review", "--project", str(project))


def test_checks_are_plain_json_objects_and_the_old_string_form_is_read(
    world: tuple[Path, Path],
) -> None:
    """Kills: `checks` written as a JSON string inside the JSON line (hard to edit by hand),
    or a reader that no longer accepts a file written in that older form."""
    project, home = world
    _harvest(project, home)
    rows = _rows(project)
    assert all(isinstance(r["checks"], list) and isinstance(r["checks"][0], dict) for r in rows)
    rows[0]["checks"] = json.dumps(rows[0]["checks"])  # the older form
    _write_rows(project, rows)
    _invoke("review", "--project", str(project), "--accept", str(rows[0]["id"]))
    assert isinstance(_rows(project)[0]["checks"], list)


def test_a_check_with_a_wrong_field_names_the_field_its_kind_takes(
    world: tuple[Path, Path],
) -> None:
    """Kills: a pydantic dump that buries the field (issue 26: `{"kind": "max_chars",
    "value": "120"}` fails, the field is `limit`) in `sleep review --add-check` and in a
    hand-edited tasks file given to `sleep run --tasks`."""
    problem = check_error({"kind": "max_chars", "value": "120"})
    assert problem is not None and "max_chars takes limit (int > 0, required); not value" in problem
    assert check_error({"kind": "max_chars", "limit": 120}) is None
    assert "unknown kind 'telepathy'" in str(check_error({"kind": "telepathy"}))
    with pytest.raises(SleepError, match="regex takes pattern"):
        parse_checks('{"kind": "regex", "value": "x"}')
    project, home = world
    _harvest(project, home)
    task = str(_rows(project)[0]["id"])
    bad = CliRunner().invoke(
        sleep_app,
        [
            "review",
            "--project",
            str(project),
            "--edit",
            task,
            "--add-check",
            '{"kind": "max_chars", "value": "120"}',
        ],
    )
    assert bad.exit_code == 1 and "max_chars takes limit" in bad.output
    rows = _rows(project)
    rows[1]["checks"] = [{"kind": "max_chars", "value": "120"}]
    _write_rows(project, rows)
    run = CliRunner().invoke(
        sleep_app,
        [
            "run",
            "--project",
            str(project),
            "--tasks",
            str(project / ".skillopt/sleep/review/tasks.jsonl"),
        ],
    )
    assert run.exit_code == 1 and "task row 1: check" in run.output
    assert "max_chars takes limit" in run.output


def test_every_check_field_is_documented() -> None:
    """Kills: a check kind or field missing from docs/sleep.md (users edit tasks by hand)."""
    docs = DOCS.read_text(encoding="utf-8")
    assert set(CHECK_FIELDS) == {
        "contains",
        "not_contains",
        "regex",
        "max_chars",
        "section_present",
        "no_refusal",
    }
    for kind, fields in CHECK_FIELDS.items():
        row = next((line for line in docs.splitlines() if line.startswith(f"| `{kind}` |")), None)
        assert row is not None, kind
        for field in fields:
            assert f"`{field.split(' ', 1)[0]}`" in row, (kind, field)


def test_review_folder_find_refuses_an_ambiguous_prefix(tmp_path: Path) -> None:
    """Kills: acting on the first task whose id starts with an ambiguous prefix."""
    from skillopt_dsl.sleep.tasks import NoRefusal, Task

    folder = ReviewFolder(tmp_path)
    tasks = [
        Task(id=f"ab{i}", project="p", intent=f"intent {i}", checks=[NoRefusal()]) for i in range(2)
    ]
    folder.merge(tasks, [])
    with pytest.raises(SleepError, match="2 tasks"):
        folder.accept("ab")
    assert folder.accept("ab1").reviewed


def test_every_dropped_task_stays_dropped_across_later_drops_and_harvests(
    tmp_path: Path,
) -> None:
    """Kills: a drop that rewrites `dropped.jsonl` with its own task only (the first dropped
    task would come back at the next harvest), and a merge that forgets earlier drops.

    Three tasks are dropped one by one, a harvest mining all four after each drop; at every
    harvest each task dropped so far stays out and is counted as not re-added."""
    from skillopt_dsl.sleep.tasks import NoRefusal, Task

    folder = ReviewFolder(tmp_path)
    mined = [
        Task(id=f"task{i}", project="p", intent=f"intent {i}", checks=[NoRefusal()])
        for i in range(4)
    ]
    folder.merge(mined, [])
    for count, task in enumerate(mined[:3], start=1):
        folder.drop(task.id)
        report = folder.merge(mined, [])  # the next harvest mines every task again
        gone = {t.id for t in mined[:count]}
        assert folder.dropped() == gone
        assert {t.id for t in folder.tasks()} == {t.id for t in mined} - gone
        assert (report.added, report.skipped_dropped) == (0, count)
