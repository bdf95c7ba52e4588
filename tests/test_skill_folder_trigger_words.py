"""`TriggerWordsProposer` never makes a description say "Use for:" (or "Not for:") twice: a
description that has the clause (a proposal joined before) gets the new words added to it."""

from __future__ import annotations

import json
import random
from pathlib import Path

from skillopt_dsl.evaluate import Rollout
from skillopt_dsl.lm import LM
from skillopt_dsl.optimizers.proposers import ProposalRequest
from skillopt_dsl.skill import Skill
from skillopt_dsl.skill_folder import SkillCard, SkillFolder, TriggerModule
from skillopt_dsl.skill_folder.document import DESCRIPTION, FolderDocument
from skillopt_dsl.skill_folder.trigger_proposer import TriggerWordsProposer, with_clause
from skillopt_dsl.testing.scripted import ScriptedLM
from skillopt_dsl.types import Example, Prediction

OTHERS = (SkillCard("commit-message", "Writes a git commit message."),)


def _module(tmp_path: Path, description: str) -> TriggerModule:
    root = tmp_path / "release-notes"
    root.mkdir(parents=True, exist_ok=True)
    (root / "SKILL.md").write_text(
        f"---\nname: release-notes\ndescription: {json.dumps(description)}\n---\n# Body\n",
        encoding="utf-8",
    )
    return TriggerModule(SkillFolder.read(root), OTHERS)


def _missed(*requests: str) -> list[Example]:
    return [
        Example(id=f"e{n}", inputs={"request": r}, labels={"should_trigger": True})
        for n, r in enumerate(requests)
    ]


def _use_for(module: TriggerModule, skill: Skill, batch: list[Example]) -> Skill:
    """The skill after the one "Use for" proposal on `batch` (every request missed)."""
    rollouts = [Rollout(e.id, "x", Prediction({"should_trigger": False}), 0.0) for e in batch]
    request = ProposalRequest(
        module, skill, batch, rollouts, batch, [], LM(ScriptedLM(lambda m: "")),
        random.Random(0), 100,
    )  # fmt: skip
    (group,) = TriggerWordsProposer(words=2).propose(request)
    after, report = skill.apply(group.edits)
    assert report.all_applied, report
    return after


def _description(skill: Skill) -> str:
    return FolderDocument.from_skill(skill).text_of(DESCRIPTION)


def test_a_second_proposal_extends_the_use_for_clause(tmp_path: Path) -> None:
    """Kills: appending a second "Use for:" clause to a description that has one (the
    teammate's "Use for: a. Use for: b." seen after an accepted step)."""
    module = _module(tmp_path, "Writes release notes.")
    first = _use_for(module, module.seed_skill, _missed("changelog tagged", "changelog tagged"))
    assert _description(first) == "Writes release notes. Use for: changelog, tagged."
    second = _use_for(module, first, _missed("version summary", "version summary"))
    assert _description(second) == (
        "Writes release notes. Use for: changelog, tagged, version, summary."
    )
    assert module.skill_refusal(second) is None


def test_with_clause_keeps_the_rest_of_the_description() -> None:
    """Kills: a merge that drops the text after the clause, or a new clause beside one that
    differs only in case."""
    merged = with_clause("Writes notes. use for: a, b. Not for: c.", "Use for", ["d"])
    assert merged == "Writes notes. Use for: a, b, d. Not for: c."
    assert with_clause("Writes notes.", "Not for", ["x", "y"]) == "Writes notes. Not for: x, y."
