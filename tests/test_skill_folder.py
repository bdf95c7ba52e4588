"""A skill folder as one trainable document (issue 40): the parts round-trip exactly, a part the
search did not change stays byte-identical, and the description's limits are checked, never
truncated."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from skillopt_dsl.compile import compile
from skillopt_dsl.errors import UserInputError
from skillopt_dsl.evaluate import evaluate
from skillopt_dsl.module import RunOutcome
from skillopt_dsl.optimizers import GradientText
from skillopt_dsl.skill import Add, Delete, Replace, Skill
from skillopt_dsl.skill_folder import (
    FolderDocument,
    SkillFolder,
    description_problem,
    part_marker,
)
from skillopt_dsl.testing.contract import ContractParity, contract_examples, contract_target
from skillopt_dsl.testing.scripted import ScriptedLM
from skillopt_dsl.testing.search_contract import PARITY_FIX, OfferedEdits
from skillopt_dsl.types import Example

SKILL_MD = (
    "---\nname: release-notes\ndescription: >\n  Write release notes\n  from a changelog.\n"
    "license: MIT\nmetadata:\n  owner: docs\n---\n# Release notes\n\nBe brief.\n"
)
ALL = ("description", "body", "references")


def _folder(tmp_path: Path) -> Path:
    root = tmp_path / "release-notes"
    (root / "references").mkdir(parents=True)
    (root / "SKILL.md").write_text(SKILL_MD, encoding="utf-8")
    (root / "references" / "style.md").write_text("Use bullets.\n", encoding="utf-8")
    (root / "references" / "tone.md").write_text("No hype.", encoding="utf-8")
    (root / "template.txt").write_text("{{notes}}", encoding="utf-8")
    return root


def test_reading_a_folder_finds_its_parts(tmp_path: Path) -> None:
    """Kills: reading the folded description with its line breaks (agents read one line), or
    treating a non-markdown file (a template) as a trainable reference."""
    folder = SkillFolder.read(_folder(tmp_path))
    assert folder.name == "release-notes"
    assert folder.description == "Write release notes from a changelog."
    assert folder.body == "# Release notes\n\nBe brief.\n"
    assert folder.reference_paths == ("references/style.md", "references/tone.md")


@pytest.mark.parametrize("tail", ["", "\n", "\n\n", "text without newline"])
def test_the_document_round_trips_every_part_exactly(tail: str) -> None:
    """Kills: dropping the separator newline on the way in but not out (or the reverse), which
    would change a part's bytes even when no edit touched it."""
    document = FolderDocument((("description", "d"), ("body", "b" + tail), ("x.md", tail)))
    assert FolderDocument.from_skill(document.to_skill()) == document


def test_an_untouched_part_stays_byte_identical(tmp_path: Path) -> None:
    """Kills: rewriting every file on export (a reference the gate never changed must keep its
    bytes), or re-dumping the whole front matter when only the body changed."""
    folder = SkillFolder.read(_folder(tmp_path))
    seed = folder.seed_skill(ALL)
    assert folder.changes(seed) == ()
    body_edit, _ = seed.apply([Replace(old="Be brief.", new="Be brief. Use past tense.")])
    (change,) = folder.changes(body_edit)
    assert change.path == "SKILL.md"
    assert change.new_text == SKILL_MD.replace("Be brief.", "Be brief. Use past tense.")
    reference_edit, _ = seed.apply([Replace(old="No hype.", new="No hype. No emoji.")])
    assert [c.path for c in folder.changes(reference_edit)] == ["references/tone.md"]


def test_a_new_description_rewrites_only_its_front_matter_entry(tmp_path: Path) -> None:
    """Kills: losing the other front matter keys (license, metadata) or the body's bytes when the
    description changes."""
    folder = SkillFolder.read(_folder(tmp_path))
    trained, _ = folder.seed_skill(ALL).apply(
        [Replace(old="Write release notes", new="Use when asked to write release notes")]
    )
    (change,) = folder.changes(trained)
    assert change.new_text == (
        "---\nname: release-notes\n"
        "description: Use when asked to write release notes from a changelog.\n"
        "license: MIT\nmetadata:\n  owner: docs\n---\n# Release notes\n\nBe brief.\n"
    )


def test_no_edit_can_move_or_delete_a_part_marker(tmp_path: Path) -> None:
    """Kills: part markers that are not protected (an edit deleting one would merge two parts,
    and the body would be written into the description)."""
    seed = SkillFolder.read(_folder(tmp_path)).seed_skill(ALL)
    marker = part_marker("body").strip()
    after, report = seed.apply([Delete(old=marker), Add(after=None, text="x")])
    assert marker in after.text
    assert report.outcomes[0].status == "refused"


@pytest.mark.parametrize(
    ("text", "agent", "problem"),
    [
        ("", "claude", "empty"),
        ("two\nlines", "claude", "one line"),
        ("x" * 1025, "claude", "1024"),
        ("x" * 501, "codex", "500"),
    ],
)
def test_description_limits(text: str, agent: str, problem: str) -> None:
    """Kills: a limit off by one, or the wrong agent's limit."""
    found = description_problem(text, agent)  # type: ignore[arg-type]
    assert found is not None and problem in found
    assert description_problem(text[:-1] if len(text) > 500 else "ok", agent) is None  # type: ignore[arg-type]


def test_a_trained_description_over_the_limit_is_refused_not_truncated(tmp_path: Path) -> None:
    """Kills: truncating a description after the gate (what the gate certified is what ships)."""
    folder = SkillFolder.read(_folder(tmp_path))
    too_long, _ = folder.seed_skill(ALL).apply(
        [Replace(old="Write release notes", new="Write " + "very " * 300 + "release notes")]
    )
    with pytest.raises(UserInputError, match="1024"):
        folder.changes(too_long)


def test_a_folder_without_skill_md_says_what_a_skill_folder_is(tmp_path: Path) -> None:
    """Kills: a bare FileNotFoundError traceback instead of a message saying what to fix."""
    with pytest.raises(UserInputError, match=r"SKILL\.md"):
        SkillFolder.read(tmp_path)


class NoShouting(ContractParity):
    """The contract's parity task, whose module cannot run a skill that shouts (a stand-in for
    a trigger description an agent cannot read)."""

    def skill_refusal(self, skill: Skill) -> str | None:
        return "it shouts" if "SHOUT" in skill.text else None

    def run(self, skill: Skill, example: Example, lm: Any, *, seed: int) -> RunOutcome:
        if self.skill_refusal(skill) is not None:  # as a router with a two-line description
            raise UserInputError("cannot render a shouting skill")
        return super().run(skill, example, lm, seed=seed)


def test_a_refused_text_met_on_training_data_scores_zero_without_a_call() -> None:
    """Kills: evaluating a text the module refuses (the module raising mid-compile, as the
    trigger router did on a two-line description proposed by a format rule), or calling the
    model for it (the refusal is known before any call)."""
    seen: list[str] = []

    def target(messages: list[dict[str, str]]) -> str:
        seen.append(messages[0]["content"])
        return contract_target(messages)

    report = evaluate(
        NoShouting(), contract_examples(0, 4), skill="SHOUT", lm=ScriptedLM(target), threads=1
    )
    assert [r.score for r in report.records] == [0.0] * 4
    assert all("cannot run this skill: it shouts" in (r.error or "") for r in report.records)
    assert seen == []


def test_the_search_drops_a_refused_proposal_and_keeps_going(tmp_path: Path) -> None:
    """Kills: a compile killed by a proposal its module refuses (screened on training data
    before the door ever sees it): the run goes on and the real fix is accepted."""
    optimizer = GradientText(proposers=[OfferedEdits(texts=["SHOUT ANSWERS", PARITY_FIX])])
    result = compile(
        NoShouting(), contract_examples(0, 24), contract_examples(100, 30), optimizer=optimizer,
        lm=ScriptedLM(contract_target), optimizer_lm=ScriptedLM(lambda m: "{}"),
        run_dir=tmp_path, threads=1,
    )  # fmt: skip
    assert PARITY_FIX in result.best_skill.text and "SHOUT" not in result.best_skill.text
