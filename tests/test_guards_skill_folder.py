"""Guards on skill folders' promises (issue 56, item 6): each test names the promise and, in its
docstring, the one-spot mutation it kills. Scripted fakes only."""

from __future__ import annotations

from pathlib import Path

import pytest

from skillopt_dsl.cli.sleep_describe import ROWS_FILE, _fresh_run_dir
from skillopt_dsl.errors import UserInputError
from skillopt_dsl.evaluate import Rollout
from skillopt_dsl.skill_folder import SkillFolder
from skillopt_dsl.skill_folder.adopt import adopt_folder, folder_receipts, rollback_folder
from skillopt_dsl.skill_folder.document import BODY, DESCRIPTION, FolderDocument, part_marker
from skillopt_dsl.skill_folder.stage import stage_folder
from skillopt_dsl.skill_folder.trigger_data import TriggerSummary
from skillopt_dsl.sleep.describe_stage import _unique
from skillopt_dsl.types import Example, Prediction
from tests.test_skill_folder_adopt import (
    DESCRIPTION_EDIT,
    compile_folder,
    make_folder,
    snapshot,
)


def test_adopt_rollback_adopt_can_still_be_rolled_back(tmp_path: Path) -> None:
    """Kills: receipts numbered by anything but their count (a second adopt reusing number 1
    overwrites the first receipt, or sorts before the rollback): after adopt, rollback and
    adopt again, the change in force must still roll back to the exact old bytes."""
    root = make_folder(tmp_path)
    edits = [{**DESCRIPTION_EDIT, "new": "Write release notes from a changelog."}]
    result, folder = compile_folder(root, tmp_path / "run", edits, ("description", "body"))
    stage_folder(result, folder)
    before = {k: v[0] for k, v in snapshot(root).items()}
    adopt_folder(tmp_path / "run")
    rollback_folder(tmp_path / "run")
    adopt_folder(tmp_path / "run")
    assert (root / "SKILL.md").read_bytes() != before["SKILL.md"]
    rollback_folder(tmp_path / "run")
    assert {k: v[0] for k, v in snapshot(root).items()} == before
    receipts = [(r.number, r.action) for r in folder_receipts(tmp_path / "run")]
    assert receipts == [(1, "adopt"), (2, "rollback"), (3, "adopt"), (4, "rollback")], receipts


def test_text_before_the_first_part_marker_is_refused_not_dropped() -> None:
    """Kills: `FolderDocument.from_skill` reading the parts from the first marker on, wherever
    it is (`markers[0].start() != 0` dropped): an edit that put text above the first part
    would be silently lost from every file the folder writes back."""
    document = (
        part_marker(DESCRIPTION) + "Write release notes.\n" + part_marker(BODY) + "Be brief.\n"
    )
    assert FolderDocument.from_skill(document).names == (DESCRIPTION, BODY)
    with pytest.raises(UserInputError, match="must open with a part marker"):
        FolderDocument.from_skill("Always cite the changelog.\n" + document)


def _routed(example_id: str, picked: bool | None, error: str | None = None) -> Rollout:
    outputs = {"should_trigger": picked}
    score = 0.0 if error else 1.0
    return Rollout(example_id, "", Prediction(outputs, error=error), score, error=error)


def test_failed_router_calls_on_negative_requests_stay_in_the_denominator() -> None:
    """Kills: a failed router call on a should-not-trigger request counted as a true negative
    (`_cell`'s failed branch dropped) or left out of `n` (`failed_negatives` dropped from the
    sum): a router whose calls fail would score as well as one that routes right."""
    examples = [
        Example(id=f"r{k}", inputs={"request": f"request {k}"}, labels={"should_trigger": k < 2})
        for k in range(4)
    ]
    rollouts = [
        _routed("r0", True),
        _routed("r1", True),
        _routed("r2", None, error="the call failed"),
        _routed("r3", None, error="the call failed"),
    ]
    summary = TriggerSummary.from_rollouts(examples, rollouts)
    assert (summary.true_negatives, summary.failed_negatives) == (0, 2)
    assert summary.n == 4 and summary.accuracy == 0.5
    assert summary.precision == 1.0 and summary.recall == 1.0


def test_sleep_describe_never_reuses_a_run_dir_that_holds_trigger_rows(tmp_path: Path) -> None:
    """Kills: `sleep describe` checking only for an earlier run's config (`or (directory /
    ROWS_FILE).exists()` dropped): a run dir where an earlier describe wrote its rows but
    crashed before compiling would have them overwritten and mixed with a new run's."""
    folder = SkillFolder.read(make_folder(tmp_path))
    fresh = tmp_path / "fresh"
    assert _fresh_run_dir(folder, fresh) == fresh
    held = tmp_path / "held"
    held.mkdir()
    (held / ROWS_FILE).write_text('{"request": "notes", "should_trigger": true}\n')
    with pytest.raises(UserInputError, match="already holds a run"):
        _fresh_run_dir(folder, held)


def test_a_night_gives_two_folders_of_one_name_two_run_dirs() -> None:
    """Kills: the night's describe stage not recording a name it used (`used.add` dropped from
    `_unique`): two folders named alike would write their trigger rows into one run dir."""
    used: set[str] = set()
    assert [_unique("notes", used) for _ in range(3)] == ["notes", "notes-2", "notes-3"]
