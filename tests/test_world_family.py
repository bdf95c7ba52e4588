"""The rule world's axes and the family of worlds drawn across them (fakes, no model)."""

from __future__ import annotations

import json
import random
from dataclasses import replace

from skillopt_dsl.evaluate import evaluate
from skillopt_dsl.lm import LM
from skillopt_dsl.optimizers.proposers import ProposalRequest
from skillopt_dsl.search_memory import RejectedCandidate
from skillopt_dsl.skill import Add, Skill
from skillopt_dsl.testing.rule_world import (
    CODE_SEED_SKILL,
    SEED_SKILL,
    RuleWorld,
    RuleWorldCodeTask,
    RuleWorldProposer,
)
from skillopt_dsl.testing.world_family import WorldFamily

PROMPT = "\n".join(f"failing: train{i}" for i in range(10))


def offers(world: RuleWorld, prompt: str = PROMPT) -> list[dict[str, object]]:
    return json.loads(world.reflector()._respond([{"role": "user", "content": prompt}]))


def test_defaults_are_the_published_world_bit_for_bit() -> None:
    # Pinned from commit 12a0cd8 (before the axes): the published world's rows depend on it.
    world = RuleWorld(seed=3)
    assert [(o["rule"], o["for"]) for o in offers(world)] == [
        ("Rule R3: items of kind 3 follow rule 3.", "train2"),
        ("Rule R3: items of kind 3 follow rule 3.", "train8"),
        ("Rule R1: items of kind 1 follow rule 1.", "train6"),
    ]
    items = world.items("test", 200)
    assert world.accuracy(f"{SEED_SKILL}\nRule R1: x", items) == 0.565
    assert world.accuracy("Rule R0: a\nRule H5: b", items) == 0.425
    assert world.accuracy("Rule R0: a\n\nRule H5: b", items) == 0.465
    rare = RuleWorld(seed=5, p_right=0.9, classes=1, class_share=0.05)
    assert [o["rule"][:14] for o in offers(rare)] == [
        "Rule H185935: ",
        "Rule H118309: ",
        "Rule H730257: ",
    ]


def test_addresses_exact_group_none_and_partly_wrong() -> None:
    failing = [f"train{i}" for i in range(10)]
    for seed in range(5):
        for o in offers(RuleWorld(seed=seed)):
            assert o["addresses"] == [o["for"]]
        for o in offers(RuleWorld(seed=seed, addresses="none")):
            assert o["addresses"] == []
        for o in offers(RuleWorld(seed=seed, addresses="group")):
            read = failing[:8]  # ReflectiveProposer: two groups of four
            assert o["for"] in read
            start = read.index(str(o["for"])) // 4 * 4
            assert o["addresses"] == read[start : start + 4]
    wrong = [
        o["addresses"] != [o["for"]]
        for seed in range(40)
        for o in offers(RuleWorld(seed=seed, addresses="partly_wrong"))
    ]
    assert 0.3 < sum(wrong) / len(wrong) < 0.7


def test_the_address_axis_does_not_change_which_rules_are_drawn() -> None:
    rules = [o["rule"] for o in offers(RuleWorld(seed=2))]
    assert [o["rule"] for o in offers(RuleWorld(seed=2, addresses="partly_wrong"))] == rules


def test_noise_keyed_on_text_content_or_difficulty() -> None:
    a, b = "Rule R0: a\nNote N1: b", "Rule R0:  a\n\nNote N1: b"
    items = [f"test{i}" for i in range(400)]

    def moved(world: RuleWorld, x: str, y: str) -> set[str]:
        return {i for i in items if world.right(x, i) != world.right(y, i)}

    text = RuleWorld(seed=1, noise=0.2)
    assert len(moved(text, a, b)) > 40  # whitespace redraws the flips
    content = replace(text, noise_key="content")
    assert moved(content, a, b) == set()  # wording ignored
    assert len(moved(content, a, a + "\nNote N7: c")) > 40  # a new note is new content
    hard = replace(text, noise_key="difficulty")
    movers = moved(hard, a, b) | moved(hard, a, "Rule R0: a") | moved(hard, b, a + " ")
    assert len(movers) > 40
    hard_items = {i for i in items if hard.right(SEED_SKILL, i) != hard.right(SEED_SKILL + " ", i)}
    for x, y in ((a, b), (a, "Rule R0: a")):
        assert moved(hard, x, y) <= {i for i in items if _hard(hard, i)}
    assert hard_items <= {i for i in items if _hard(hard, i)}


def _hard(world: RuleWorld, item: str) -> bool:
    from skillopt_dsl.testing.rule_world import _unit

    return _unit(world.seed, "hard", item) < 2 * world.noise


def test_draw_any_failing_writes_notes_for_failures_without_a_class() -> None:
    world = RuleWorld(seed=0, p_right=1.0, p_harm=0.0, classes=1, class_share=0.3)
    easy = [i for i in (f"train{n}" for n in range(60)) if world.item_class(i) is None][:3]
    classed = [i for i in (f"train{n}" for n in range(60)) if world.item_class(i) == 0][:1]
    prompt = "\n".join(f"failing: {i}" for i in easy + classed)
    rng = random.Random(0)
    drawn = [world.draw_proposal(rng, easy + classed) for _ in range(200)]
    assert all(rule.startswith("Rule R0") for rule, _ in drawn)  # classed: always the class
    any_failing = replace(world, draw="any_failing")
    rng = random.Random(0)
    drawn = [any_failing.draw_proposal(rng, easy + classed) for _ in range(200)]
    notes = [target for rule, target in drawn if rule.startswith("Note")]
    assert 100 < len(notes) < 200 and set(notes) <= set(easy)
    assert all(t in classed for rule, t in drawn if rule.startswith("Rule R0"))
    assert offers(any_failing, prompt)


def test_repeats_offer_an_earlier_proposal_verbatim() -> None:
    world = RuleWorld(seed=4, repeats=1.0)
    reflector = world.reflector()
    first = json.loads(reflector._respond([{"role": "user", "content": PROMPT}]))
    again = json.loads(reflector._respond([{"role": "user", "content": "failing: val3"}]))
    assert all(o in first for o in again)
    fresh = json.loads(
        RuleWorld(seed=4).reflector()._respond([{"role": "user", "content": "failing: val3"}])
    )
    assert all(o["for"] == "val3" for o in fresh)


def test_codes_answer_a_code_per_item() -> None:
    world = RuleWorld(seed=0, answers="codes")
    assert world.seed_skill == CODE_SEED_SKILL and isinstance(world.task(), RuleWorldCodeTask)
    golds = {e.labels["answer"] for e in world.items("val", 50)}
    assert len(golds) > 45 and all(g.startswith("K") for g in golds)
    target = world.target()
    for e in world.items("val", 30):
        reply = target._respond(
            [{"role": "system", "content": "x"}, {"role": "user", "content": e.inputs["item"]}]
        )
        assert (reply == e.labels["answer"]) == world.right("x", e.id)


def test_a_family_draw_is_fixed_by_its_seed_and_covers_every_axis() -> None:
    family = WorldFamily()
    assert family.draw(7, 24) == family.draw(7, 24)
    assert family.draw(7, 24) != family.draw(8, 24)
    members = family.draw(7, 200)
    assert sum(m.null for m in family.draw(7, 24)) == 3
    for m in members:
        assert 8 <= m.train <= 60 and 18 <= m.val <= 100
        assert m.world.classes * m.world.class_share <= 0.8 + 1e-9
        assert 1 <= m.world.alternatives <= 3
        assert m.world.p_right + m.world.p_harm <= 0.95 + 1e-9
    assert {m.world.addresses for m in members} == set(family.addresses)
    assert {m.world.noise_key for m in members} == set(family.noise_keys)
    assert {m.world.draw for m in members} == set(family.draws)
    assert {m.world.answers for m in members} == set(family.answers)
    assert members[0].seeded(5).seed == 5 and members[0].world.seed == 0


def _proposals(reads: str, rejected: list[RejectedCandidate], skill: Skill) -> list[str]:
    """What `RuleWorldProposer(reads=...)` proposes for the same failing batch, told `rejected`
    and expanding `skill`."""
    world = RuleWorld(seed=7, p_right=0.3, p_harm=0.3)
    task = world.task()
    batch = world.items("train", 12)
    lm = LM(world.target())
    report = evaluate(task, batch, skill=Skill(SEED_SKILL), lm=lm, threads=1, progress=False)
    request = ProposalRequest(
        module=task,
        skill=skill,
        batch=batch,
        rollouts=report.records,
        trainset=batch,
        rejected=rejected,
        optimizer_lm=LM(world.reflector()),
        rng=random.Random(0),
        budget_tokens=400,
    )
    proposer = RuleWorldProposer(reads=reads)  # type: ignore[arg-type]
    return [g.rationale for g in proposer.propose(request)]


def test_a_proposer_that_reads_the_request_draws_anew_when_told_of_a_rejection() -> None:
    """`reads="request"` holds what `ReflectiveProposer`'s prompt holds (the skill, the last
    rejected proposals): a real model told of a rejection is asked something new. Killed by a
    prompt of the failing ids alone, where the same failures give the same rules forever."""
    seed = Skill(SEED_SKILL)
    tried = [
        RejectedCandidate(
            (Add(after=None, text=f"Note N{i}: read the item carefully."),), -0.1, i, 0
        )
        for i in range(8)
    ]
    draws = {tuple(_proposals("request", tried[:k], seed)) for k in range(8)}
    assert len(draws) > 1
    grown = {
        tuple(_proposals("request", [], Skill(SEED_SKILL + f"\nRule R{k}."))) for k in range(8)
    }
    assert len(grown) > 1
    blind = {tuple(_proposals("failures", tried[:k], seed)) for k in range(8)}
    assert len(blind) == 1


def test_the_fake_reflection_tells_as_many_rejections_as_the_product() -> None:
    """Kills: the fake's copy of `ReflectiveProposer`'s told-rejection limits drifting from the
    product's (the fake keeps its own copy so the family bench runs against older revisions)."""
    from skillopt_dsl.optimizers.proposers import reflective
    from skillopt_dsl.testing import rule_world

    told = (rule_world.TOLD_REJECTED, rule_world.TOLD_EDITS)
    assert told == (reflective.TOLD_REJECTED, reflective.TOLD_EDITS)


REV_IMPORTS = {
    "skillopt_dsl.metrics": {"exact_match"},
    "skillopt_dsl.module": {"InputField", "OutputField", "SkillModule"},
    "skillopt_dsl.optimizers.proposers": {"EditGroup", "ProposalRequest", "Proposer"},
    "skillopt_dsl.skill": {"Add"},
    "skillopt_dsl.testing.scripted": {"ScriptedLM"},
    "skillopt_dsl.types": {"Example"},
    "skillopt_dsl.testing.rule_world": {"Addresses", "Answers", "Draw", "NoiseKey", "RuleWorld"},
}
"""What the fake world may import from the package: names that commit 0bef2b7 (the family
bench's `--revision`) has, so that the bench runs the fake against that revision's package."""


def test_the_fake_world_imports_only_what_the_benchs_old_revision_has() -> None:
    """Kills: the fake world importing a name newer than the bench's `--revision` (an
    ImportError ended the 20-seed run at its first `rev` job when `rule_world` imported
    `TOLD_EDITS` from the product)."""
    import ast
    from pathlib import Path

    testing = Path(__file__).resolve().parent.parent / "skillopt_dsl" / "testing"
    for name in ("rule_world.py", "world_family.py"):
        tree = ast.parse((testing / name).read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("skillopt_dsl"):
                names = {a.name for a in node.names}
                assert names <= REV_IMPORTS.get(node.module or "", set()), (name, node.module)
