"""`TriggerWordsProposer` never makes a description say "Use for:" (or "Not for:") twice: a
description that has the clause (a proposal joined before) gets the new words added to it, and
two proposals composed onto one candidate are merged by its `tidy` before the gate; the words it
proposes set the failed requests apart from the other label's."""

from __future__ import annotations

import json
import random
from pathlib import Path

import skillopt_dsl as sd
from skillopt_dsl.evaluate import Rollout
from skillopt_dsl.lm import LM
from skillopt_dsl.lm.base import Message
from skillopt_dsl.optimizers import GradientText
from skillopt_dsl.optimizers.proposers import EditGroup, ProposalRequest
from skillopt_dsl.skill import Replace, Skill
from skillopt_dsl.skill_folder import SkillCard, SkillFolder, TriggerModule
from skillopt_dsl.skill_folder.document import DESCRIPTION, FolderDocument
from skillopt_dsl.skill_folder.trigger_proposer import (
    TriggerWordsProposer,
    distinctive_words,
    merge_clauses,
    with_clause,
)
from skillopt_dsl.testing.scripted import ScriptedLM
from skillopt_dsl.testing.trigger_fakes import listed_description, skill_call, trigger_request
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
    (group,) = TriggerWordsProposer(words=2).propose(_request(module, skill, batch))
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


# -- composing two proposals made on the same line -----------------------------------------------
def test_two_use_for_proposals_composed_on_one_line_say_it_once(tmp_path: Path) -> None:
    """Kills: two "Use for" proposals made on the same description and composed onto one
    candidate (as GradientText composes pending proposals: the second's `old`, the clause-free
    line, is found inside the line the first grew) shipping "Use for: ... Use for: ...", and a
    `tidy` that merges them but drops a word or the text around them."""
    module = _module(tmp_path, "Writes release notes.")
    seed = module.seed_skill
    first = _proposal(module, seed, _missed("changelog tagged", "changelog tagged"))
    second = _proposal(module, seed, _missed("version summary", "version summary"))
    stacked, report = seed.apply([*first.edits, *second.edits])
    assert report.all_applied
    assert _description(stacked).count("Use for:") == 2  # the bug, before tidy
    tidied = TriggerWordsProposer().tidy(stacked)
    assert (
        _description(tidied)
        == "Writes release notes. Use for: version, summary, changelog, tagged."
    )
    assert module.skill_refusal(tidied) is None
    assert merge_clauses("A. Not for: x. Use for: a. Not for: y, x. B.") == (
        "A. Not for: x, y. Use for: a. B."
    )


class _FakeStackingProposer(TriggerWordsProposer):
    """A fake: proposes the text that two composed "Use for" proposals stack (one edit), and
    tidies with `TriggerWordsProposer.tidy`."""

    def propose(self, request: ProposalRequest) -> list[EditGroup]:
        description = _description(request.skill)
        if "Use for" in description:
            return []
        new = f"{description} Use for: yes. Use for: tagged."
        return [EditGroup((Replace(old=description, new=new),), "fake", True, "stacked")]


def _yes_router(messages: list[Message]) -> str:
    shown = listed_description(messages, "release-notes") or ""
    wanted = trigger_request(messages).startswith("yes") and "Use for" in shown
    return skill_call("release-notes") if wanted else "No tool is needed."


def test_gradient_text_tidies_the_composed_candidate_before_the_gate(tmp_path: Path) -> None:
    """Kills: GradientText sending the composed candidate to the door and the gate without its
    proposers' `tidy` (the accepted description says "Use for:" twice)."""
    module = _module(tmp_path, "Writes release notes.")
    train = [_example(f"{w} t{n}", w == "yes") for n in range(4) for w in ("yes", "no")]
    val = [_example(f"{w} v{n}", w == "yes") for n in range(10) for w in ("yes", "no")]
    result = sd.compile(
        module,
        train,
        val,
        optimizer=GradientText(
            epochs=1, batch_size=8, proposers=[_FakeStackingProposer()], screen=False
        ),
        lm=LM(ScriptedLM(_yes_router)),
        optimizer_lm=LM(ScriptedLM(lambda m: "{}")),
        run_dir=tmp_path / "run",
        threads=1,
    )
    assert result.val_score == 1.0
    assert module.description_of(result.best_skill) == "Writes release notes. Use for: yes, tagged."


# -- which words ----------------------------------------------------------------------------------
def test_words_that_near_misses_use_as_often_are_not_proposed() -> None:
    """Kills: choosing words by raw frequency among the missed requests ("write", "version",
    which the near misses use as often, rank first and tell the router nothing), stopwords,
    and words the description has."""
    missed = _missed(
        "write the changelog for version 2", "write a changelog for version 3", "please write notes"
    )
    near_misses = [
        _example("write a commit message for version 2", False),
        _example("write the version bump", False),
    ]
    assert distinctive_words(missed, missed, near_misses, "Writes notes.", 3) == ["changelog"]


def test_of_one_off_words_those_the_whole_label_uses_win() -> None:
    """Kills: ranking a small batch's failures by their own words alone (each used once, the
    first seen wins: "regressions"), ignoring that the label's other training requests use
    "changelog" often; and words cut at a hyphen ("cve-") or kept with a possessive
    ("branch's")."""
    missed = _missed("patch regressions", "the changelog now")
    alike = [*missed, *_missed("changelog for 2.0", "a changelog entry")]
    words = distinctive_words(missed, alike, [], "Writes notes.", 1)
    assert words == ["changelog"]
    request = _missed("fix for cve-2026-1 in branch's code")
    tokens = distinctive_words(request, request * 2, [], "x", 5)
    assert tokens == ["branch", "code"]


def test_a_word_only_one_request_uses_is_never_proposed() -> None:
    """Kills: pasting a failed request's own words ("keep, employees, asking") instead of the
    words the group of its label shares (issue 53: generalise, do not paste)."""
    missed = _missed("keep employees asking about leave", "leave policy for staff")
    alike = [*missed, *_missed("leave balance", "staff leave rules")]
    assert distinctive_words(missed, alike, [], "Writes HR answers.", 5) == ["leave", "staff"]


def test_proposals_made_on_different_lines_all_apply_when_composed(tmp_path: Path) -> None:
    """Kills: anchoring a proposal on the whole description line, which no longer matches once
    another proposal composed before it grew the line (the run's "not_matched" proposals:
    a "Use for" extension after a "Not for" clause joined)."""
    module = _module(tmp_path, "Writes release notes.")
    seed = module.seed_skill
    use = _proposal(module, seed, _missed("changelog tagged", "changelog tagged"))
    grown, _ = seed.apply(use.edits)
    avoid = _proposal(module, seed, _missed("commit message", "commit message"), wanted=False)
    more = _proposal(module, grown, _missed("version summary", "version summary"))
    composed, report = seed.apply([*use.edits, *avoid.edits, *more.edits])
    assert report.all_applied, report
    assert _description(TriggerWordsProposer().tidy(composed)) == (
        "Writes release notes. Not for: commit, message. Use for: changelog, tagged, version, "
        "summary."
    )


def _example(request: str, should: bool) -> Example:
    return Example(id=request, inputs={"request": request}, labels={"should_trigger": should})


def _proposal(
    module: TriggerModule, skill: Skill, batch: list[Example], *, wanted: bool = True
) -> EditGroup:
    """The one proposal on `batch`, every request of it failed: missed ("Use for"), or with
    `wanted=False` relabelled as should-not-trigger and loaded ("Not for")."""
    if not wanted:
        batch = [Example(e.id, e.inputs, {"should_trigger": False}) for e in batch]
    (group,) = TriggerWordsProposer(words=2).propose(
        _request(module, skill, batch, loaded=not wanted)
    )
    return group


def test_a_proposal_over_the_agents_limit_is_not_made(tmp_path: Path) -> None:
    """Kills: proposing a clause that takes the description past the agent's limit (Codex: 500
    characters), which the door would only refuse after the proposal took a screen's place."""
    root = tmp_path / "release-notes"
    root.mkdir()
    description = "Writes release notes " + "x" * 470 + "."
    (root / "SKILL.md").write_text(
        f"---\nname: release-notes\ndescription: {description}\n---\n# Body\n", encoding="utf-8"
    )
    module = TriggerModule(SkillFolder.read(root), OTHERS, agent="codex")
    batch = _missed("changelog tagged", "changelog tagged")
    assert TriggerWordsProposer().propose(_request(module, module.seed_skill, batch)) == []
    claude = TriggerModule(SkillFolder.read(root), OTHERS)
    assert len(TriggerWordsProposer().propose(_request(claude, claude.seed_skill, batch))) == 1


def _request(
    module: TriggerModule, skill: Skill, batch: list[Example], *, loaded: bool = False
) -> ProposalRequest:
    """A proposal request on `batch`, every request of it failed: the router loaded nothing
    (or, with `loaded`, loaded this skill)."""
    rollouts = [Rollout(e.id, "x", Prediction({"should_trigger": loaded}), 0.0) for e in batch]
    return ProposalRequest(
        module, skill, batch, rollouts, batch, [], LM(ScriptedLM(lambda m: "")),
        random.Random(0), 100,
    )  # fmt: skip
