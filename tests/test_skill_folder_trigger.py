"""Triggering as a measured task (issue 40 part 2): the router's reply is read robustly, the list
order never depends on the candidate, precision and recall count a scripted router's picks, the
door refuses a description no agent could read, and trigger data keeps its booleans."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import skillopt_dsl as sd
from skillopt_dsl.errors import UserInputError
from skillopt_dsl.lm import LM
from skillopt_dsl.lm.base import Message
from skillopt_dsl.optimizers import GradientText
from skillopt_dsl.optimizers.proposers import EditGroup, ProposalRequest, Proposer
from skillopt_dsl.skill import Replace, Skill
from skillopt_dsl.skill_folder import (
    SkillCard,
    SkillFolder,
    TriggerModule,
    TriggerSummary,
    constant_trigger_summary,
    load_skill_cards,
    load_trigger_splits,
    measure_trigger,
    pick_skill,
    read_skill_cards,
)
from skillopt_dsl.testing.scripted import ScriptedLM
from skillopt_dsl.testing.trigger_fakes import (
    listed_description,
    listed_names,
    skill_call,
    tool_call,
    trigger_request,
)
from skillopt_dsl.types import Example

NAMES = ("release-notes", "commit-message", "pr-description", "release-notes-v2")
OTHERS = (
    SkillCard("commit-message", "Writes a git commit message."),
    SkillCard("pr-description", "Drafts a pull request description."),
    SkillCard("version-bump", "Decides the next version number."),
)
EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "skill_folders"


def _folder(tmp_path: Path, description: str = "Writes release notes.") -> SkillFolder:
    root = tmp_path / "release-notes"
    root.mkdir(parents=True, exist_ok=True)
    front = json.dumps(description)
    (root / "SKILL.md").write_text(
        f"---\nname: release-notes\ndescription: {front}\n---\n# Body\n", encoding="utf-8"
    )
    return SkillFolder.read(root)


def _example(request: str, should: bool) -> Example:
    return Example(
        id=f"{should}-{request}", inputs={"request": request}, labels={"should_trigger": should}
    )


def _request_of(messages: list[Message]) -> str:
    return trigger_request(messages)


def _description_shown(messages: list[Message]) -> str:
    return listed_description(messages, "release-notes") or ""


# -- reading the router's reply ------------------------------------------------------------------
@pytest.mark.parametrize(
    ("reply", "picked"),
    [
        ("release-notes", "release-notes"),
        ("Release-Notes.", "release-notes"),
        ("  `release_notes`  ", "release-notes"),
        ('"Release notes"', "release-notes"),
        ("Answer: release-notes", "release-notes"),
        ("Skill: **commit-message**", "commit-message"),
        (
            "- pr-description: Drafts a pull request description.\n- release-notes: ...",
            "pr-description",
        ),
        ("<answer>release-notes</answer>", "release-notes"),
        ("release-notes-v2", "release-notes-v2"),
        ("release-notes-v3", None),
        ("I would load release-notes for this.", "release-notes"),
        ("none", None),
        ("None of these. release-notes is close.", None),
        ("release-notes or commit-message", "release-notes"),
        ("Maybe commit-message, maybe release-notes", None),
        ("notes", None),
        ("", None),
        ("The request is about software.", None),
    ],
)
def test_the_reply_is_read_robustly(reply: str, picked: str | None) -> None:
    """Kills: a case-sensitive or punctuation-sensitive match, a prefix match that reads
    `release-notes-v2` as `release-notes` (or the reverse), a reply naming two skills counted as
    one, and an unreadable reply read as a pick instead of none."""
    assert pick_skill(reply, NAMES) == picked


# -- the list the router sees ----------------------------------------------------------------------
def test_the_list_order_does_not_depend_on_the_candidate(tmp_path: Path) -> None:
    """Kills: seeding the order (or the sample of others shown) with the skill text, which
    would let a candidate win by moving itself up the list, and one order for every request
    (this skill always in the same place)."""
    module = TriggerModule(_folder(tmp_path), OTHERS, shown_others=2)
    seed = module.seed_skill
    other = Skill(seed.text.replace("Writes release notes.", "Something else entirely, longer."))
    positions = set()
    for n in range(12):
        example = _example(f"request number {n}", True)
        names = listed_names(module.render(seed, example))
        other_names = listed_names(module.render(other, example))
        assert names == other_names and len(names) == 3
        positions.add(names.index("release-notes"))
    assert len(positions) > 1


def test_the_router_sees_the_trained_description_and_a_fixed_instruction(tmp_path: Path) -> None:
    """Kills: showing the seed's description instead of the candidate's, or putting the
    trained text in the instruction (the router instruction is not trained)."""
    module = TriggerModule(_folder(tmp_path), OTHERS)
    candidate = Skill(
        module.seed_skill.text.replace("Writes release notes.", "Use for changelogs.")
    )
    messages = module.render(candidate, _example("x", True))
    assert _description_shown(messages) == "Use for changelogs."
    seed_prompt = module.render(module.seed_skill, _example("x", True))[0]["content"]
    assert str(messages[0]["content"]).replace("Use for changelogs.", "Writes release notes.") == (
        seed_prompt
    )
    assert messages[-1] == {"role": "user", "content": "x"}  # the request alone


# -- precision and recall against a scripted router -----------------------------------------------
def test_precision_and_recall_count_a_scripted_routers_picks(tmp_path: Path) -> None:
    """Kills: precision and recall swapped, a false positive counted as a true one, a reply
    picking another skill counted as this one, or accuracy not equal to the mean score."""
    module = TriggerModule(_folder(tmp_path), OTHERS)
    replies = {
        "tp1": skill_call("release-notes"),
        "tp2": 'Skill(skill="Release notes")',
        "fn1": skill_call("commit-message"),
        "fn2": "No tool is needed.",
        "fn3": "release-notes",  # names the skill but calls no tool: no load
        "fp1": skill_call("release-notes"),
        "tn1": tool_call("Read", file_path="release-notes.md"),
        "tn2": "none",
    }
    examples = [_example(key, key.startswith(("tp", "fn"))) for key in replies]
    router = ScriptedLM(lambda messages: replies[_request_of(messages)])
    summary = measure_trigger(module, examples, lm=LM(router), threads=1)
    assert (summary.true_positives, summary.false_positives) == (2, 1)
    assert (summary.true_negatives, summary.false_negatives) == (2, 3)
    assert summary.precision == pytest.approx(2 / 3)
    assert summary.recall == pytest.approx(2 / 5)
    assert summary.accuracy == pytest.approx(4 / 8)
    report = sd.evaluate(module, examples, lm=LM(router), threads=1)
    assert report.mean == pytest.approx(summary.accuracy)


def test_the_constant_answers(tmp_path: Path) -> None:
    """Kills: "always trigger" and "never trigger" swapped, or a precision made up for a skill
    that is never loaded (it is undefined, not 0 or 1)."""
    examples = [_example("a", True), _example("b", False), _example("c", False)]
    always, never = (
        constant_trigger_summary(examples, True),
        constant_trigger_summary(examples, False),
    )
    assert (always.accuracy, always.precision, always.recall) == (
        pytest.approx(1 / 3),
        pytest.approx(1 / 3),
        1.0,
    )
    assert (never.accuracy, never.precision, never.recall) == (pytest.approx(2 / 3), None, 0.0)
    assert "n/a" in never.line("never")


def test_a_failed_call_is_never_right() -> None:
    """Kills: a failed call on a should-not-trigger request counted as a right "no"."""
    from skillopt_dsl.evaluate import Rollout
    from skillopt_dsl.types import Prediction

    failed = Prediction({"should_trigger": None}, error="model call failed")
    examples = [_example("a", True), _example("b", False)]
    rollouts = [Rollout(e.id, "", failed, 0.0, error="down") for e in examples]
    summary = TriggerSummary.from_rollouts(examples, rollouts)
    assert (summary.accuracy, summary.false_negatives, summary.failed_negatives) == (0.0, 1, 1)


# -- the door ----------------------------------------------------------------------------------------
class LongDescriptionProposer(Proposer):
    """A fake proposer: replaces the description with one over Claude's 1,024 characters."""

    name = "long-description"

    def propose(self, request: ProposalRequest) -> list[EditGroup]:
        old = "Writes release notes."
        if old not in request.skill.text:
            return []
        new = "Writes release notes " + "and changelogs " * 80 + "for every version."
        failing = tuple(e.id for e, _ in request.failures())
        return [
            EditGroup((Replace(old=old, new=new),), self.name, True, "longer", addresses=failing)
        ]


def _long_lover(messages: list[Message]) -> str:
    """A fake router that never loads release-notes under a short description and loads it
    exactly when it should under a long one (so the long candidate wins every screen and
    reaches the door)."""
    long = len(_description_shown(messages)) > 200
    wanted = long and _request_of(messages).startswith("yes")
    return skill_call("release-notes") if wanted else "none"


def test_the_door_refuses_a_description_over_the_limit(tmp_path: Path) -> None:
    """Kills: a module that accepts any text at the door (the over-long description would reach
    the gate, win, and be truncated or rejected at export). The screen is off, so the proposal
    goes straight to the door (with it on, training rollouts of a refused text score 0 and it
    never gets that far: `test_skill_folder.py`)."""
    module = TriggerModule(_folder(tmp_path), OTHERS)
    train = [_example(f"{w} t{n}", w == "yes") for n in range(8) for w in ("yes", "no")]
    val = [_example(f"{w} v{n}", w == "yes") for n in range(10) for w in ("yes", "no")]
    result = sd.compile(
        module,
        train,
        val,
        optimizer=GradientText(
            lr=1.0,
            lr_floor_tokens=2048,
            epochs=1,
            batch_size=8,
            proposers=[LongDescriptionProposer()],
            screen=False,
        ),
        lm=LM(ScriptedLM(_long_lover)),
        optimizer_lm=LM(ScriptedLM(lambda m: "{}")),
        run_dir=tmp_path / "run",
        threads=1,
    )
    events = [
        json.loads(line) for line in (tmp_path / "run" / "events.jsonl").read_text().splitlines()
    ]
    refused = [e for e in events if e.get("event") == "refused"]
    assert refused and all("1024" in e["reason"] for e in refused)
    gated = {e.get("candidate_hash") for e in events if e.get("event") == "gate"}
    assert not gated & {e["candidate_hash"] for e in refused}
    assert result.best_skill == module.seed_skill
    assert module.folder.changes(result.best_skill) == ()


def test_a_seed_description_over_the_limit_is_a_user_error_at_compile(tmp_path: Path) -> None:
    """Kills: compile starting from a seed no agent could read (it would train a description
    that can never be exported)."""
    module = TriggerModule(_folder(tmp_path, "x" * 1025), OTHERS)
    examples = [_example("a", True), _example("b", False)]
    with pytest.raises(UserInputError, match="1024"):
        sd.compile(module, examples[:1], examples[1:], lm=LM(ScriptedLM(lambda m: "none")))


def test_the_codex_limit_is_the_modules_choice(tmp_path: Path) -> None:
    """Kills: the agent setting ignored (Codex reads 500 characters, Claude 1,024), and a
    document carrying parts other than the description accepted."""
    folder = _folder(tmp_path, "y" * 600)
    assert TriggerModule(folder, OTHERS).skill_refusal(folder.seed_skill(("description",))) is None
    refusal = TriggerModule(folder, OTHERS, agent="codex").skill_refusal(
        folder.seed_skill(("description",))
    )
    assert refusal is not None and "500" in refusal
    both = TriggerModule(folder, OTHERS).skill_refusal(folder.seed_skill(("description", "body")))
    assert both is not None and "description alone" in both


# -- data and cards ------------------------------------------------------------------------------------
def test_trigger_data_keeps_its_booleans(tmp_path: Path) -> None:
    """Kills: labels read as strings (a "false" string is truthy), and the shipped example
    losing its near misses."""
    splits = load_trigger_splits(EXAMPLES / "release-notes.trigger.jsonl")
    rows = [*splits.train, *splits.val, *splits.test]
    assert len(rows) == 200
    assert {type(e.labels["should_trigger"]) for e in rows} == {bool}
    assert sum(e.labels["should_trigger"] for e in rows) == 100


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ([{"request": "a", "should_trigger": True}, {"request": "b"}], "should_trigger"),
        ([{"should_trigger": True}, {"should_trigger": False}], "request"),
        (
            [{"request": "a", "should_trigger": "true"}, {"request": "b", "should_trigger": "no"}],
            "true or false",
        ),
    ],
)
def test_a_bad_trigger_row_is_a_clear_user_error(
    tmp_path: Path, rows: list[dict[str, object]], message: str
) -> None:
    """Kills: a row without a label loaded as None (scored as never triggering), or string
    labels accepted."""
    path = tmp_path / "bad.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    with pytest.raises(UserInputError, match=message):
        load_trigger_splits(path, sizes=(1, 1, 0))


def test_cards_come_from_skill_folders_and_from_jsonl(tmp_path: Path) -> None:
    """Kills: the trained skill listed among its own distractors, a name listed twice, and the
    shipped distractor file unreadable."""
    for name in ("alpha", "beta", "release-notes"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "SKILL.md").write_text(
            f"---\nname: {name}\ndescription: Does {name}.\n---\nbody\n", encoding="utf-8"
        )
    cards = read_skill_cards(tmp_path, exclude=["release-notes"])
    assert cards == (SkillCard("alpha", "Does alpha."), SkillCard("beta", "Does beta."))
    assert len(load_skill_cards(EXAMPLES / "distractors.jsonl")) == 10
    with pytest.raises(UserInputError, match="unique"):
        TriggerModule(_folder(tmp_path / "x"), (SkillCard("release-notes", "Clash."),))


def test_the_words_proposer_appends_missed_words_on_one_line(tmp_path: Path) -> None:
    """Kills: words the description already has proposed again, a "Use for" built from the
    wrongly loaded requests (or the reverse), and an edit that breaks the description's line."""
    import random

    from skillopt_dsl.evaluate import Rollout
    from skillopt_dsl.skill_folder.trigger_proposer import TriggerWordsProposer
    from skillopt_dsl.types import Prediction

    module = TriggerModule(_folder(tmp_path), OTHERS)
    batch = [
        _example("release changelog for the tagged version", True),
        _example("changelog of release notes", True),
        _example("tagged changelog draft", True),
        _example("commit summary for staged files", False),
        _example("commit summary please", False),
    ]
    rollouts = [
        Rollout(e.id, "x", Prediction({"should_trigger": not e.should_trigger}), 0.0) for e in batch
    ]
    request = ProposalRequest(
        module,
        module.seed_skill,
        batch,
        rollouts,
        batch,
        [],
        LM(ScriptedLM(lambda m: "")),
        random.Random(0),
        100,
    )
    use, avoid = TriggerWordsProposer(words=2).propose(request)
    (use_edit,), (avoid_edit,) = use.edits, avoid.edits
    assert isinstance(use_edit, Replace) and isinstance(avoid_edit, Replace)
    assert use_edit.new == "Writes release notes. Use for: changelog, tagged."
    assert avoid_edit.new == "Writes release notes. Not for: commit, summary."
    after, _ = module.seed_skill.apply([use_edit])
    assert module.skill_refusal(after) is None


def test_the_trigger_recipe_routes_its_shipped_data() -> None:
    """Kills: the recipe losing its example data (a path that only works from one directory),
    showing every card despite `shown_others`, or a right router reply scoring below 1."""
    from skillopt_dsl.metrics.score import Score
    from skillopt_dsl.recipes import load_recipe

    recipe = load_recipe(Path(__file__).resolve().parents[1] / "recipes" / "skill_trigger_local.py")
    module = recipe.module
    assert isinstance(module, TriggerModule) and recipe.splits.test
    for example in recipe.splits.val[:4]:
        assert len(listed_names(module.render(module.seed_skill, example))) == 5
        reply = skill_call("release-notes") if example.labels["should_trigger"] else "none"
        outcome = module.run(
            module.seed_skill, example, LM(ScriptedLM(lambda m, r=reply: r)), seed=0
        )
        assert module.score(example, outcome) == Score(1.0)
