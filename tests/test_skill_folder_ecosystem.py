"""The ecosystem's own fields and the overfitting guide (issue 53, items 4 and 5):
`disable-model-invocation` folders are never trained for their trigger nor listed, `when_to_use`
is shown beside the description, the shared listing budget is checked, the default words
proposer proposes only words a group of requests shares, and the staged diff flags words copied
from training requests that no validation request holds."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_skill_folder_adopt import DESCRIPTION_EDIT, compile_folder, make_folder
from typer.testing import CliRunner

from skillopt_dsl.cli import app
from skillopt_dsl.errors import UserInputError
from skillopt_dsl.skill import Skill
from skillopt_dsl.skill_folder import (
    FolderDocument,
    SkillCard,
    SkillFolder,
    TriggerModule,
    stage_folder,
)
from skillopt_dsl.skill_folder.cards import read_skill_cards
from skillopt_dsl.skill_folder.stage import read_folder_manifest
from skillopt_dsl.skill_folder.trigger import TriggerSampling
from skillopt_dsl.skill_folder.trigger_proposer import copied_words
from skillopt_dsl.testing.trigger_fakes import listed_description
from skillopt_dsl.types import Example

ONE = TriggerSampling(samples=1)
OTHERS = (SkillCard("commit-message", "Writes a commit message."),)


def _skill(root: Path, name: str, front: str = "") -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    text = f"---\nname: {name}\ndescription: Does {name}.\n{front}---\n# Body\n"
    (folder / "SKILL.md").write_text(text)
    return folder


def test_a_skill_the_model_is_never_offered_is_not_trained_nor_listed(tmp_path: Path) -> None:
    """Kills: training the trigger of a `disable-model-invocation: true` skill (moot: the model
    never sees it), and listing such a skill among the distractors."""
    hidden = _skill(tmp_path, "deploy", "disable-model-invocation: true\n")
    with pytest.raises(UserInputError, match="disable-model-invocation"):
        SkillFolder.read(hidden).check_trainable(("description",))
    SkillFolder.read(hidden).check_trainable(("body",))  # the body still trains
    _skill(tmp_path, "lint")
    assert [card.name for card in read_skill_cards(tmp_path)] == ["lint"]


def test_when_to_use_is_shown_beside_the_description(tmp_path: Path) -> None:
    """Kills: dropping `when_to_use` from the listing (Claude Code shows it beside the
    description, and it decides triggers as much)."""
    root = _skill(tmp_path, "release-notes", "when_to_use: After a version is tagged.\n")
    module = TriggerModule(SkillFolder.read(root), OTHERS, sampling=ONE)
    messages = module.render(module.seed_skill, Example("r", {"request": "r"}, {}))
    shown = listed_description(messages, "release-notes")
    assert shown == "Does release-notes. — when to use: After a version is tagged."


def test_the_shared_listing_budget_is_checked(tmp_path: Path) -> None:
    """Kills: a description that pushes the listing of every skill past the agent's budget
    (the agent would leave skills out) reaching the gate, and a seed over it run at all."""
    folder = SkillFolder.read(_skill(tmp_path, "release-notes"))
    module = TriggerModule(folder, OTHERS, sampling=ONE, listing_budget=120)
    long = Skill(module.seed_skill.text.replace("Does release-notes.", "Writes notes. " * 8))
    assert "budget of 120" in str(module.skill_refusal(long))
    assert module.skill_refusal(module.seed_skill) is None
    with pytest.raises(UserInputError, match="over the agent's budget of 40"):
        TriggerModule(folder, OTHERS, sampling=ONE, listing_budget=40)


def test_copied_words_are_those_only_training_requests_hold() -> None:
    """Kills: flagging a word validation requests hold too (the gate saw it help there), a
    word the old description had, or a stopword."""

    def rows(*requests: str) -> list[Example]:
        return [Example(r, {"request": r}, {"should_trigger": True}) for r in requests]

    train = rows("keep employees asking about leave", "leave for staff")
    val = rows("staff leave balance")
    new = "Answers HR questions. Use for: leave, staff, employees, asking, about."
    assert copied_words("Answers HR questions.", new, train, val) == ("employees", "asking")


def test_the_staged_diff_flags_copied_words(tmp_path: Path) -> None:
    """Kills: flags computed but not kept with the staged change, or `skill-folder diff` not
    showing them to the reviewer."""
    root = make_folder(tmp_path)
    run = tmp_path / "run"
    new = "Write release notes from a changelog."
    result, folder = compile_folder(root, run, [{**DESCRIPTION_EDIT, "new": new}], ("description",))
    stage_folder(result, folder, flags=["the description adds words: changelog"])
    assert read_folder_manifest(run).flags == ["the description adds words: changelog"]
    shown = CliRunner().invoke(app, ["skill-folder", "diff", str(run)])
    assert shown.exit_code == 0 and "review: the description adds words: changelog" in shown.output


def test_when_to_use_trains_beside_the_description_and_writes_back_alone(tmp_path: Path) -> None:
    """Kills: a `when_to_use` that cannot train (the seed document without it), an edit to it
    that the listing does not show, a write-back that rewrites other front matter entries, and
    one over the agent's limit reaching the gate."""
    front = "when_to_use: After a version is tagged.\nlicense: MIT\n"
    root = _skill(tmp_path, "release-notes", front)
    folder = SkillFolder.read(root)
    module = TriggerModule(folder, OTHERS, sampling=ONE)
    assert FolderDocument.from_skill(module.seed_skill).names == ("description", "when_to_use")
    edited = Skill(module.seed_skill.text.replace("After a version", "When a release"))
    assert module.skill_refusal(edited) is None
    messages = module.render(edited, Example("r", {"request": "r"}, {}))
    assert str(listed_description(messages, "release-notes")).endswith("When a release is tagged.")
    (change,) = folder.changes(edited)
    assert change.new_text == folder.skill_file_text.replace("After a version", "When a release")
    too_long = Skill(module.seed_skill.text.replace("After a version", "x" * 1100))
    assert "when_to_use" in str(module.skill_refusal(too_long))
