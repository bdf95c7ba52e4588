"""Use as a measured task (issue 40 part 3): an agent runs a request with a skill folder loaded
and opens reference files through `open_reference`.

Fakes: `ScriptedLM` agents (named `fake_*`) that read the system message and the tool results,
and `FixedReferenceProposer`, a scripted proposer. Each test names the regression it kills.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

import skillopt_dsl as sd
from skillopt_dsl.errors import UserInputError
from skillopt_dsl.evaluate import evaluate
from skillopt_dsl.lm import LM
from skillopt_dsl.lm.tokens import count_text_tokens
from skillopt_dsl.optimizers import GradientText
from skillopt_dsl.optimizers.proposers import EditGroup, ProposalRequest, Proposer
from skillopt_dsl.skill import Replace, Skill
from skillopt_dsl.skill_folder import SKILL_FILE, FolderDocument, SkillFolder
from skillopt_dsl.skill_folder.use import (
    REFERENCE_TOOL,
    SkillUseModule,
    SkillUseTrajectory,
)
from skillopt_dsl.testing.scripted import ScriptedLM
from skillopt_dsl.types import Example

BREAKING = "references/breaking.md"
STYLE = "references/style.md"
SEED_RULE = "Breaking changes: no rule yet."
TRAINED_RULE = "Breaking changes: prefix the note with BREAKING."
BODY_TEXT = (
    "# Release notes\n\nWrite one line per change, in the present tense.\n"
    "For a breaking change, read references/breaking.md first.\n"
)


def make_folder(root: Path) -> SkillFolder:
    """A skill folder with a body and two reference files (one the task needs, one it does not)."""
    (root / "references").mkdir(parents=True)
    (root / SKILL_FILE).write_text(
        "---\nname: release-notes\ndescription: Use when writing release notes.\n---\n" + BODY_TEXT,
        encoding="utf-8",
    )
    (root / BREAKING).write_text(f"# Breaking changes\n\n{SEED_RULE}\n", encoding="utf-8")
    (root / STYLE).write_text("# Style\n\nKeep notes under eighty characters.\n", "utf-8")
    return SkillFolder.read(root)


def note_metric(example: Example, prediction: sd.Prediction) -> bool:
    return bool(prediction.outputs["note"] == example.labels["note"])


def notes_module(folder: SkillFolder, trains: Sequence[str] = ("references",)) -> SkillUseModule:
    return SkillUseModule.from_folder(
        folder,
        name="Notes",
        inputs={"change": str},
        outputs={"note": str},
        metric=note_metric,
        trains=trains,
        description="Write the release note for a change.",
    )


def call(path: str) -> str:
    return "```json\n" + json.dumps({"tool": REFERENCE_TOOL, "arguments": {"path": path}}) + "\n```"


def last_result(messages: list[dict[str, str]]) -> str | None:
    last = messages[-1]["content"]
    prefix = f"Result of {REFERENCE_TOOL}: "
    return last.removeprefix(prefix) if last.startswith(prefix) else None


def change_of(messages: list[dict[str, str]]) -> str:
    user = next(m["content"] for m in messages if m["role"] == "user")
    return user.split("\n\n", 1)[0]


def fake_agent(messages: list[dict[str, str]]) -> str:
    """FAKE target: opens the breaking-changes reference, then follows the rule it read."""
    result = last_result(messages)
    if result is None:
        return call(BREAKING)
    prefix = "BREAKING: " if "prefix the note with BREAKING" in result else ""
    return prefix + change_of(messages)


def fake_lost_agent(messages: list[dict[str, str]]) -> str:
    """FAKE target: first asks for a path that does not exist, then for the one the error
    lists, then answers from what it read."""
    result = last_result(messages)
    if result is None:
        return call("breaking.md")
    if result.startswith("error:"):
        return call(BREAKING)
    return fake_agent(messages)


def examples(prefix: str, n: int) -> list[Example]:
    return [
        Example(
            f"{prefix}{i}",
            {"change": f"drop the v{i} API ({prefix})"},
            {"note": f"BREAKING: drop the v{i} API ({prefix})"},
        )
        for i in range(n)
    ]


def trained_skill(folder: SkillFolder) -> Skill:
    """The folder document of the references with the breaking-changes rule trained in."""
    document = folder.document(("references",))
    parts = tuple((name, text.replace(SEED_RULE, TRAINED_RULE)) for name, text in document.parts)
    return FolderDocument(parts).to_skill()


def test_open_reference_returns_the_trained_text_not_the_seed(tmp_path: Path) -> None:
    """The tool reads the reference from the document being evaluated.
    Kills: `open_reference` returning the folder's (seed) text when references train; the
    system message omitting the list of reference files."""
    folder = make_folder(tmp_path / "skill")
    module = notes_module(folder)
    fake = ScriptedLM(fake_agent)
    report = evaluate(module, examples("t", 2), skill=trained_skill(folder), lm=LM(fake))
    assert report.mean == 1.0
    trajectory = report.records[0].trace
    assert isinstance(trajectory, SkillUseTrajectory)
    (opened,) = trajectory.tool_calls
    assert opened.ok and opened.result == f"# Breaking changes\n\n{TRAINED_RULE}\n"
    system = fake.calls[0][0]["content"]
    assert system.startswith(BODY_TEXT.strip()) and f"- {BREAKING}\n- {STYLE}" in system
    seed = evaluate(module, examples("t", 2), lm=LM(ScriptedLM(fake_agent)))
    assert seed.mean == 0.0


def test_the_system_message_is_the_trained_body_when_the_body_trains(tmp_path: Path) -> None:
    """Kills: the system message taking the folder's body while the body trains (an edit to
    the body would never reach the model)."""
    folder = make_folder(tmp_path / "skill")
    module = notes_module(folder, trains=("body", "references"))
    parts = tuple(
        (name, "# Release notes\n\nTrained body.\n" if name == "body" else text)
        for name, text in folder.document(("body", "references")).parts
    )
    fake = ScriptedLM(lambda messages: "a note")
    evaluate(module, examples("b", 1), skill=FolderDocument(parts).to_skill(), lm=LM(fake))
    system = fake.calls[0][0]["content"]
    assert system.startswith("# Release notes\n\nTrained body.") and "one line" not in system


def test_unknown_path_returns_the_valid_paths_and_the_run_goes_on(tmp_path: Path) -> None:
    """A wrong path is an error the model reads, listing the files; the episode continues.
    Kills: an unknown path ending the run or raising into evaluate; an error that does not
    list the valid paths."""
    folder = make_folder(tmp_path / "skill")
    module = notes_module(folder)
    report = evaluate(
        module, examples("u", 1), skill=trained_skill(folder), lm=LM(ScriptedLM(fake_lost_agent))
    )
    (record,) = report.records
    assert record.error is None and record.score == 1.0
    wrong, right = record.trace.tool_calls
    assert wrong.error is not None and not wrong.ok
    assert "'breaking.md'" in wrong.error and BREAKING in wrong.error and STYLE in wrong.error
    assert right.ok and record.trace.n_turns == 3


def test_skill_tokens_count_instructions_per_call_and_opened_references_only(
    tmp_path: Path,
) -> None:
    """The cost is the system message on every call plus each opened reference, exactly.
    Kills: counting the system message once per episode; counting a reference that was not
    opened; counting the failed (unknown path) open; the seed's reference text counted."""
    folder = make_folder(tmp_path / "skill")
    module = notes_module(folder)
    skill = trained_skill(folder)
    fake = ScriptedLM(fake_lost_agent)
    report = evaluate(module, examples("c", 2), skill=skill, lm=LM(fake))
    model = fake.model
    system = count_text_tokens(model, module.instructions(skill))
    reference = count_text_tokens(model, f"# Breaking changes\n\n{TRAINED_RULE}\n")
    cost = report.records[0].trace.skill_cost
    assert (cost.instruction_tokens, cost.calls) == (system, 3)
    assert cost.opened == ((BREAKING, reference),)
    assert cost.total == 3 * system + reference
    summary = module.use_summary(report)
    assert summary.requests == 2 and summary.unrecorded == 0
    assert summary.mean_skill_tokens == 3 * system + reference
    assert summary.open_rate == {BREAKING: 1.0, STYLE: 0.0}


def fake_python_style_agent(messages: list[dict[str, str]]) -> str:
    """FAKE target: opens the reference with a Python-style positional call."""
    if last_result(messages) is None:
        return f'{REFERENCE_TOOL}("{BREAKING}")'
    return fake_agent(messages)


def test_a_positional_call_is_counted_under_the_path_it_opened(tmp_path: Path) -> None:
    """Kills: reading the opened path from the raw arguments, which a Python-style call keeps
    positionally (the open counted under an empty path, the real file shown as never opened)."""
    folder = make_folder(tmp_path / "skill")
    module = notes_module(folder)
    report = evaluate(
        module,
        examples("p", 1),
        skill=trained_skill(folder),
        lm=LM(ScriptedLM(fake_python_style_agent)),
    )
    assert report.mean == 1.0
    assert report.records[0].trace.skill_cost.opened_paths == (BREAKING,)
    assert module.use_summary(report).open_rate == {BREAKING: 1.0, STYLE: 0.0}


def test_an_episode_that_opens_nothing_pays_only_the_instructions(tmp_path: Path) -> None:
    """Kills: reference tokens charged to a request that never opened a reference."""
    folder = make_folder(tmp_path / "skill")
    module = notes_module(folder, trains=("body",))
    fake = ScriptedLM(lambda messages: "a note")
    report = evaluate(module, examples("n", 1), lm=LM(fake))
    cost = report.records[0].trace.skill_cost
    assert cost.opened == () and cost.total == count_text_tokens(
        fake.model, module.instructions(module.seed_skill)
    )
    assert module.use_summary(report).open_rate == {BREAKING: 0.0, STYLE: 0.0}


def test_the_door_refuses_a_document_missing_a_part_the_module_needs(tmp_path: Path) -> None:
    """Kills: `skill_refusal` accepting a document without a trained part, one with a part the
    module does not train, or a text that is no folder document; a refused skill run anyway
    (evaluate scores it 0 with no call; `run` raises)."""
    folder = make_folder(tmp_path / "skill")
    module = notes_module(folder, trains=("body", "references"))
    assert module.skill_refusal(module.seed_skill) is None
    missing = module.skill_refusal(folder.seed_skill(("body",)))
    assert missing is not None and BREAKING in missing and STYLE in missing
    extra = module.skill_refusal(folder.seed_skill(("description", "body", "references")))
    assert extra is not None and "description" in extra
    assert module.skill_refusal(Skill(BODY_TEXT)) is not None
    fake = ScriptedLM(fake_agent)
    refused = evaluate(module, examples("d", 2), skill=folder.seed_skill(("body",)), lm=LM(fake))
    assert refused.mean == 0.0 and fake.calls == []
    assert all("lacks the part" in (r.error or "") for r in refused.records)
    assert module.use_summary(refused).unrecorded == 2
    with pytest.raises(UserInputError, match="lacks the part"):
        module.run(folder.seed_skill(("body",)), examples("d", 1)[0], LM(fake), seed=0)


def test_declaration_errors_are_clear(tmp_path: Path) -> None:
    """Kills: a use module silently training the description it never reads; a folder without
    reference files accepted; a user tool shadowing open_reference."""
    folder = make_folder(tmp_path / "skill")
    with pytest.raises(UserInputError, match="trigger module"):
        notes_module(folder, trains=("description", "body"))
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / SKILL_FILE).write_text("---\nname: b\ndescription: d\n---\nbody\n", "utf-8")
    with pytest.raises(UserInputError, match="no reference files"):
        notes_module(SkillFolder.read(bare))

    def open_reference(path: str) -> str:
        """Shadow."""
        return path

    class Shadow(SkillUseModule):
        change: str = sd.InputField()
        note: str = sd.OutputField()

    with pytest.raises(UserInputError, match="own tool"):
        Shadow(folder=folder, metric=note_metric, tools=[open_reference])


@dataclass(kw_only=True)
class FixedReferenceProposer(Proposer):
    """FAKE proposer: at every step, one edit that writes the rule into the reference file."""

    name: str = "fixed-reference"

    def propose(self, request: ProposalRequest) -> list[EditGroup]:
        edit = Replace(old=SEED_RULE, new=TRAINED_RULE)
        return [EditGroup((edit,), self.name, True, "the rule belongs in the reference")]


def test_compile_accepts_a_reference_edit_and_changes_only_that_file(tmp_path: Path) -> None:
    """A proposal that fixes the task by editing one reference file passes the gate, and the
    folder change touches that file alone (SKILL.md, trained but unchanged, stays as read).
    Kills: the tool serving the seed text during compile (the edit would not help and the gate
    would reject it); a refusal of valid folder documents at the door."""
    folder = make_folder(tmp_path / "skill")
    module = notes_module(folder, trains=("body", "references"))
    result = sd.compile(
        module,
        examples("train", 12),
        examples("val", 20),
        optimizer=GradientText(proposers=[FixedReferenceProposer()]),
        lm=ScriptedLM(fake_agent),
        optimizer_lm=ScriptedLM(lambda messages: "{}"),
        run_dir=tmp_path / "run",
        threads=1,
        budget=sd.Budget(max_calls=200),
    )
    assert result.seed_val_score == 0.0 and result.val_score == 1.0
    changes = folder.changes(result.best_skill)
    assert [change.path for change in changes] == [BREAKING]
    assert TRAINED_RULE in changes[0].new_text
