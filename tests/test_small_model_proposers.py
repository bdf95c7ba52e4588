"""Proposals a small model can use, and budget spent on the proposers whose edits pass.

Fakes only (`ScriptedLM`): a fake target that answers right once the skill holds a rule, and fake
optimizer models that reply like a small chat model (no JSON) or with a useful edit. Each test
names the regression it kills.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections import Counter
from pathlib import Path
from typing import Any

import skillopt_dsl as sd
from skillopt_dsl.baselines import constant_baseline
from skillopt_dsl.benchmarks import customer_feedback as feedback
from skillopt_dsl.benchmarks import load_benchmark
from skillopt_dsl.evaluate import Rollout
from skillopt_dsl.lm import LM
from skillopt_dsl.metrics import exact_match
from skillopt_dsl.module import InputField, OutputField, SkillModule
from skillopt_dsl.optimizers import (
    DemonstrationsProposer,
    FormatRuleProposer,
    GradientText,
    PlainRuleProposer,
    ReflectiveProposer,
)
from skillopt_dsl.optimizers.proposers import ProposalRequest
from skillopt_dsl.optimizers.proposers.answer_shape import (
    AnswerShapeProposer,
    answer_shape,
    shape_of,
)
from skillopt_dsl.skill import Skill
from skillopt_dsl.testing import ScriptedLM
from skillopt_dsl.types import Example, Prediction
from tests.helpers import Parity, parity_examples, parity_target

TRAIN, VAL = parity_examples(0, 48), parity_examples(100, 30)
FIX = {"kind": "add", "after": None, "text": "Odd or even: divisible by 2 means even."}
CHAT_REPLY = "Sure! The model FAILED. It should try harder next time."


def _events(run_dir: Path, kind: str) -> list[dict[str, Any]]:
    lines = (run_dir / "events.jsonl").read_text(encoding="utf-8").splitlines()
    return [e for e in map(json.loads, lines) if e["event"] == kind]


def _imperfect_target(messages: list[dict[str, str]]) -> str:
    """`parity_target`, always wrong on 1 and 101: no skill makes training or validation
    perfect, so a search goes on after its first acceptance."""
    if messages[-1]["content"].split()[-1] in ("1", "101"):
        return "even"
    return parity_target(messages)


def _compile(
    tmp_path: Path, optimizer: GradientText, reflector: ScriptedLM, *, perfectible: bool = True
) -> sd.CompileResult:
    return sd.compile(
        Parity(),
        TRAIN,
        VAL,
        optimizer=optimizer,
        lm=ScriptedLM(parity_target if perfectible else _imperfect_target),
        optimizer_lm=reflector,
        run_dir=tmp_path,
        threads=1,
    )


def _chatty() -> ScriptedLM:
    """A fake optimizer model that answers reflection prompts like SmolLM2: a chat reply."""
    return ScriptedLM(lambda messages: CHAT_REPLY, model="scripted/chatty")


# -- spending the budget on proposers whose edits pass -------------------------------------------


def test_a_proposer_that_never_passes_stops_paying_for_model_calls(tmp_path: Path) -> None:
    """Kills: benching disabled (a useless reflector is asked at every step, forever)."""
    proposers = [ReflectiveProposer(read_successes=False, max_failure_groups=1)]
    settings: dict[str, Any] = {"epochs": 3, "batch_size": 8, "slow_update": False}
    always = _chatty()
    _compile(
        tmp_path / "always", GradientText(proposers=proposers, bench_after=None, **settings), always
    )
    benched = _chatty()
    _compile(
        tmp_path / "benched", GradientText(proposers=proposers, bench_after=2, **settings), benched
    )
    # 18 steps; each run of the reflector costs 2 calls (a reply and one retry)
    assert len(always.calls) == 18 * 2
    runs = [e for e in _events(tmp_path / "benched", "proposer") if not e["benched"]]
    assert [e["step"] for e in runs] == [0, 1, 4, 8, 12, 16]  # 2 paid runs, then every 4th step
    assert len(benched.calls) == len(runs) * 2 < len(always.calls)


def test_a_proposer_whose_edit_was_accepted_is_never_benched(tmp_path: Path) -> None:
    """Kills: acceptance (or surviving the screen, which every accepted proposal did first) not
    credited to the proposer whose edit reached the candidate. With the door settings the fix
    joins and goes to the gate in the step its screen passes, which is the proposer's second
    paid run: uncredited, it would sit out every step after it but the 4th."""
    noise_then_fix = ScriptedLM(
        lambda messages: json.dumps(
            {
                "edits": [
                    FIX
                    if "Already tried" in messages[-1]["content"]
                    else {**FIX, "text": "Be careful."}
                ]
            }
        ),
        model="scripted/reflector",
    )
    optimizer = GradientText(
        proposers=[ReflectiveProposer(read_successes=False, max_failure_groups=1)],
        epochs=2,
        batch_size=8,
        slow_update=False,
        bench_after=2,
        compose=1,
        confirm_steps=0,
        min_net=1.0,
        submit_at_net=0.0,
    )
    result = _compile(tmp_path, optimizer, noise_then_fix, perfectible=False)
    assert any(d.accepted for d in result.gate_log)
    events = _events(tmp_path, "proposer")
    first_accept = min(
        e["step"] for e in _events(tmp_path, "candidate_sources") if e["status"] == "accepted"
    )
    paid = [e["step"] for e in events if e.get("calls")]
    assert len(paid) >= 2 and paid[1] == first_accept  # bench_after=2 is reached
    after = [e for e in events if e["step"] > first_accept]
    assert [e for e in after if e["step"] % 4] and not any(e["benched"] for e in after)


def test_proposers_that_call_no_model_are_never_benched(tmp_path: Path) -> None:
    """Kills: benching by rejected candidates alone (a free proposer would be silenced)."""
    optimizer = GradientText(
        proposers=[DemonstrationsProposer(per_step=1, max_demos=40)],
        epochs=2,
        batch_size=8,
        slow_update=False,
        bench_after=1,
    )
    _compile(tmp_path, optimizer, _chatty())
    events = _events(tmp_path, "proposer")
    assert len(events) == 12 and not any(e["benched"] for e in events)
    assert all(e["calls"] == 0 for e in events)


def test_proposer_events_count_the_calls_each_proposer_spent(tmp_path: Path) -> None:
    """Kills: calls not measured per proposer (where the budget goes is invisible)."""
    reflector = _chatty()
    optimizer = GradientText(
        proposers=[FormatRuleProposer(), ReflectiveProposer(read_successes=False)],
        epochs=1,
        batch_size=8,
        slow_update=False,
        bench_after=None,
    )
    _compile(tmp_path, optimizer, reflector)
    spent = Counter()
    for event in _events(tmp_path, "proposer"):
        spent[event["name"]] += event["calls"]
    assert spent["format-rule"] == 0
    assert spent["reflective"] == len(reflector.calls) > 0


def test_a_proposer_is_not_asked_again_while_its_request_is_unchanged(tmp_path: Path) -> None:
    """Kills: the reflector asked again at every step with nothing changed (the same skill,
    the same failing examples and outputs, the same rejected list): 71 of one predictor's 78
    calls in a ReAct run (issue 37). Each step here reads the whole 8-row trainset with the
    same skill and an empty memory (the chat reply gives no edit), so only step 0 pays."""
    reflector = _chatty()
    optimizer = GradientText(
        proposers=[ReflectiveProposer(read_successes=False, max_failure_groups=1)],
        epochs=4,
        batch_size=8,
        slow_update=False,
        bench_after=None,
    )
    sd.compile(Parity(), TRAIN[:8], VAL, optimizer=optimizer, lm=ScriptedLM(parity_target),
               optimizer_lm=reflector, run_dir=tmp_path, threads=1)  # fmt: skip
    events = _events(tmp_path, "proposer")
    assert [(e["step"], e.get("unchanged", False), e["calls"]) for e in events] == [
        (0, False, 2), (1, True, 0), (2, True, 0), (3, True, 0)
    ]  # fmt: skip
    assert len(reflector.calls) == 2


# -- answer-shape rules mined from failures, no model -----------------------------------------


class _Key(SkillModule):
    """Write the key."""

    reference: str = InputField()
    key: str = OutputField()

    skill = "Write the key."
    metric = exact_match("key", normalize=False)


def _request(
    outputs: list[str], golds: list[str], skill: str = "Write the key."
) -> ProposalRequest:
    module = _Key()
    examples = [Example(f"e{i}", {"reference": f"r{i}"}, {"key": g}) for i, g in enumerate(golds)]
    rollouts = [
        Rollout(
            example_id=e.id,
            prediction=module.parse(o),
            output=o,
            score=float(o == e.labels["key"]),
        )
        for e, o in zip(examples, outputs, strict=True)
    ]
    return _proposal_request(module, skill, examples, rollouts)


def _proposal_request(
    module: SkillModule, skill: str, examples: list[Example], rollouts: list[Rollout]
) -> ProposalRequest:
    return ProposalRequest(
        module=module,
        skill=Skill(skill),
        batch=examples,
        rollouts=rollouts,
        trainset=examples,
        rejected=[],
        optimizer_lm=LM(ScriptedLM(lambda m: "")),
        rng=random.Random(0),
        budget_tokens=128,
    )


def test_answer_shape_rule_states_the_shape_every_gold_answer_shares() -> None:
    """Kills: a rule mined from one example instead of from what all answers share."""
    shape = answer_shape(["novak1998", "garcia1975", "obi2003"])
    assert shape is not None and shape_of("novak1998") == ("L", "D4")
    assert shape.rule("key") == (
        "The key is one word: lower-case letters, then 4 digits, with no spaces or punctuation "
        "(like novak1998)."
    )
    mixed = answer_shape(["novak1998", "Garcia1975", "obi-2003"])
    assert mixed is not None
    assert not mixed.lower_case and not mixed.no_punctuation and mixed.runs is None
    assert "lower-case" not in mixed.rule("key") and "digits" not in mixed.rule("key")


def test_answer_shape_proposes_a_rule_when_failing_outputs_break_the_shape() -> None:
    """Kills: the miner reading successes (or nothing) instead of the metric's failures."""
    golds = ["novak1998", "garcia1975", "obi2003"]
    groups = AnswerShapeProposer().propose(_request(["Novak, J. (1998)", "garcia1975", "x"], golds))
    (group,) = groups
    (edit,) = group.edits
    assert group.failure_driven and "2 failing outputs" in group.rationale
    assert edit.text.startswith("## Output format\n\n- The key is one word")  # type: ignore[union-attr]


def test_answer_shape_is_silent_when_failures_already_have_the_shape() -> None:
    """Kills: a shape rule added for failures that are wrong in content, not in form."""
    golds = ["novak1998", "garcia1975", "obi2003"]
    assert (
        AnswerShapeProposer().propose(_request(["obi1999", "garcia1975", "novak2003"], golds)) == []
    )


def test_answer_shape_leaves_label_outputs_to_the_format_rule() -> None:
    """Kills: a shape rule for a label set (the format rule already lists the labels)."""
    request = _request(["It is even, I think.", "odd", "Maybe."], ["even", "odd", "even"])
    request.module = Parity()
    assert AnswerShapeProposer().propose(request) == []


# -- one plain-text rule, checked before it becomes an edit -----------------------------------


def _rule_request(reply: str, golds: list[str] | None = None) -> tuple[ProposalRequest, ScriptedLM]:
    fake = ScriptedLM(lambda messages: reply, model="scripted/small-reflector")
    request = _request(
        ["Novak, J. (1998)", "x", "garcia1975"], golds or ["novak1998", "obi2003", "garcia1975"]
    )
    request.optimizer_lm = LM(fake)
    return request, fake


def test_plain_rule_becomes_one_edit_under_rules_after_cleanup() -> None:
    """Kills: a reply kept with its bullet and `Rule:` prefix, or a second line taken as rule."""
    request, fake = _rule_request("- Rule: Write the surname in lower case, then the year\nThanks!")
    (group,) = PlainRuleProposer().propose(request)
    (edit,) = group.edits
    assert edit.text == "## Rules\n\n- Write the surname in lower case, then the year."  # type: ignore[union-attr]
    assert group.source == "plain-rule" and group.failure_driven
    assert len(fake.calls) == 1
    prompt = fake.calls[0][-1]["content"]
    assert "Model's answer: Novak, J. (1998)" in prompt and "Correct answer: novak1998" in prompt


def test_plain_rule_refuses_a_chat_reply_and_says_why() -> None:
    """Kills: a small model's chat reply turned into a rule (SmolLM2: "Sure! The model...")."""
    request, _ = _rule_request("Sure! The model FAILED because it did not follow the rules.")
    assert PlainRuleProposer().propose(request) == []
    (note,) = request.notes
    assert note["kind"] == "rule_dropped" and note["reason"] == "a chat reply, not a rule"


def test_plain_rule_refuses_a_vacuous_rule() -> None:
    """Kills: SmolLM2's measured reply on the feedback recipe accepted as a rule (it passed the
    other checks, rode along with the format rule in one candidate, and sank it)."""
    reply = 'The model should give the correct answers to the question "What kind of feedback?"'
    request, _ = _rule_request(reply)
    assert PlainRuleProposer().propose(request) == []
    assert request.notes[0]["reason"] == "says nothing the model can act on"


def test_plain_rule_refuses_a_rule_that_copies_an_answer() -> None:
    """Kills: a 'rule' that hard-codes one example's answer."""
    request, _ = _rule_request("Always answer novak1998 for references by Novak.")
    assert PlainRuleProposer().propose(request) == []
    assert request.notes[0]["reason"] == "copies an answer ('novak1998')"


def test_plain_rule_may_name_a_declared_label() -> None:
    """Kills: label tasks refused every rule (a rule naming a label is not a copied answer)."""
    request, _ = _rule_request(
        "Answer even when the number ends in 0, 2, 4, 6 or 8.", ["even", "odd", "even"]
    )
    request.module = Parity()
    request.batch = [
        Example(f"p{i}", {"number": str(i + 1)}, {"answer": g})
        for i, g in enumerate(["even", "odd", "even"])
    ]
    request.trainset = request.batch
    (group,) = PlainRuleProposer().propose(request)
    assert "ends in 0, 2, 4" in group.edits[0].text  # type: ignore[union-attr]


# -- the customer_feedback generator ----------------------------------------------------------


def test_customer_feedback_rows_are_deterministic_balanced_and_unique() -> None:
    """Kills: an unseeded (or reseeded) generator, unbalanced labels or repeated reviews; the
    README's figures are measured on exactly these rows."""
    first = feedback.rows()
    digest = hashlib.sha256(json.dumps(first, sort_keys=True).encode()).hexdigest()
    assert digest == "536659ed9224516cc63e3eceb4ae3ec638d9d2fbfc93f401da823c3611d30837"
    assert len(first) == feedback.N_ROWS
    assert Counter(r["answer"] for r in first) == {"positive": 200, "negative": 200}
    assert len({r["question"] for r in first}) == len(first)
    assert all(r["question"].startswith("What kind of customer feedback is this?") for r in first)


def test_customer_feedback_labels_follow_their_phrase_lists() -> None:
    """Kills: a label drawn independently of the review it tags."""
    for row in feedback.rows():
        text = row["question"].lower()
        found = {
            label
            for label, phrases in feedback._PHRASES.items()
            for phrase in phrases
            if phrase.split("{p}")[-1].strip(" .,").lower() in text
        }
        assert found == {row["answer"]}, row


def test_customer_feedback_constant_answer_is_a_real_baseline_on_the_recipe_splits() -> None:
    """Kills: a split where answering one tag to everything already scores well."""
    splits = load_benchmark("customer_feedback", seed=0, sizes=(24, 50, 80))
    baseline = constant_baseline(feedback.CustomerFeedback(), splits.val, splits.test)
    assert baseline is not None
    assert 0.4 <= baseline.val_score <= 0.6 and baseline.test_score is not None
    assert 0.4 <= baseline.test_score <= 0.6
    module = feedback.CustomerFeedback()
    chatty = module.parse("This customer feedback is likely a classic example of a review.")
    assert not chatty.ok  # a sentence that names no tag scores 0: the format is the lesson
    named = module.parse("This customer feedback is negative.")
    assert named.outputs == {"answer": "negative"}
    assert Prediction({"answer": "negative"}).ok


class _Sum(SkillModule):
    """Answer with the number."""

    question: str = InputField()
    answer: int = OutputField()

    skill = "Answer with the number."
    metric = sd.metrics.numeric("answer")


def _numeric_request(outputs: list[str], golds: list[int]) -> ProposalRequest:
    module = _Sum()
    examples = [Example(f"n{i}", {"question": f"q{i}"}, {"answer": g}) for i, g in enumerate(golds)]
    rollouts = []
    for example, output in zip(examples, outputs, strict=True):
        prediction = module.parse(output)
        score = sd.metrics.call_metric(module.metric_fn, example, prediction)
        rollouts.append(
            Rollout(example.id, output, prediction, score.value, feedback=score.feedback)
        )
    return _proposal_request(module, module.skill, examples, rollouts)


def test_format_rule_fires_when_a_parsed_answer_hides_in_a_sentence() -> None:
    """Kills: format signals read only from parse errors, so "94 times 87 equals 8178." (read
    as 94, a wrong number) never gets the number-only rule that would make it right."""
    request = _numeric_request(["94 times 87 equals 8178.", "72"], [8178, 72])
    assert request.rollouts[0].prediction.ok and request.rollouts[0].score == 0.0
    (group,) = FormatRuleProposer().propose(request)
    assert "number only" in group.edits[0].text  # type: ignore[union-attr]
    assert "1 of 2 outputs" in group.rationale


def test_format_rule_is_silent_when_a_bare_answer_is_only_wrong() -> None:
    """Kills: a format rule for outputs that are already the bare value (wrong in content)."""
    assert FormatRuleProposer().propose(_numeric_request(["8177", "72."], [8178, 71])) == []


def test_default_optimizer_learns_a_house_key_convention_from_labels_alone(tmp_path: Path) -> None:
    """Kills: the answer-shape rule left out of the default proposers (with a reflector that
    only chats, nothing else states the convention "lower-case surname, then the year")."""
    from skillopt_dsl.benchmarks.tasks import CitationKey

    splits = load_benchmark("citation_keys", seed=0, sizes=(16, 20, 4))
    gold = {e.reference: e.answer for e in [*splits.train, *splits.val, *splits.test]}

    def target(messages: list[dict[str, str]]) -> str:
        text = "\n".join(m["content"] for m in messages)
        key = next(k for ref, k in gold.items() if ref in messages[-1]["content"])
        return key if "lower-case letters, then 4 digits" in text else key.capitalize()

    result = sd.compile(
        CitationKey(),
        splits.train,
        splits.val,
        optimizer=GradientText(epochs=1, batch_size=8, slow_update=False),
        lm=LM(ScriptedLM(target, model="scripted/key-writer")),
        optimizer_lm=LM(_chatty()),
        run_dir=tmp_path,
        threads=1,
    )
    assert result.seed_val_score == 0.0 and result.val_score == 1.0
    assert "lower-case letters, then 4 digits" in result.best_skill.text


# -- the promises of the rule proposers (issue 27) ----------------------------------------------

KEY_GOLDS = ["novak1998", "garcia1975", "obi2003"]
KEY_RULE = (
    "The key is one word: lower-case letters, then 4 digits, with no spaces or punctuation "
    "(like novak1998)."
)


def _applied(skill: str, edit: Any) -> Skill:
    new, report = Skill(skill).apply([edit])
    assert report.all_applied, report
    return new


def _section_of(skill: Skill, text: str) -> str | None:
    """The heading of the section holding `text` (None: before the first heading or absent)."""
    offset = skill.text.find(text)
    assert offset >= 0, f"{text!r} not in the skill"
    return next(s.heading for s in skill.sections() if s.start <= offset < s.end)


def test_answer_shape_rule_already_in_the_skill_is_not_proposed_again() -> None:
    """Kills: the answer-shape rule proposed again once the skill states it (a duplicate
    bullet per step), also when the skill wraps it over lines or changes its case."""
    outputs = ["Novak, J. (1998)", "x", "garcia1975"]
    assert AnswerShapeProposer().propose(_request(outputs, KEY_GOLDS))  # a rule is due
    stated = f"Write the key.\n\n## Output format\n\n- {KEY_RULE}\n"
    assert AnswerShapeProposer().propose(_request(outputs, KEY_GOLDS, skill=stated)) == []
    wrapped = stated.replace("with no spaces ", "with no\n  Spaces ")
    assert AnswerShapeProposer().propose(_request(outputs, KEY_GOLDS, skill=wrapped)) == []


def test_format_rule_already_in_the_skill_is_not_proposed_again() -> None:
    """Kills: the format rule proposed again once the skill states it, also in another case."""
    request = _numeric_request(["94 times 87 equals 8178.", "72"], [8178, 72])
    rule = "Reply with the number only, in digits, with no words."
    request.skill = Skill(f"Answer with the number.\n\n## Output format\n\n- {rule}\n")
    assert FormatRuleProposer().propose(request) == []
    request.skill = Skill(f"Answer with the number.\n\n## Output format\n\n- {rule.lower()}\n")
    assert FormatRuleProposer().propose(request) == []


def test_answer_shape_is_mined_from_the_training_set_not_the_batch() -> None:
    """Kills: the shape mined from the mini-batch's gold answers: the batch's three keys all
    end in 4 digits, but a training key does not, so no rule may claim the digits."""
    request = _request(["Novak, J. (1998)", "x", "garcia1975"], KEY_GOLDS)
    request.trainset = [
        *request.batch,
        Example("t0", {"reference": "r"}, {"key": "lee"}),
        Example("t1", {"reference": "r"}, {"key": "kim12"}),
    ]
    (group,) = AnswerShapeProposer().propose(request)
    (edit,) = group.edits
    assert "digits" not in edit.text  # type: ignore[union-attr]
    assert "one word" in edit.text and "lower case" in edit.text  # type: ignore[union-attr]
    small = _request(["Novak, J. (1998)", "x"], KEY_GOLDS[:2])  # 2 answers: too few to mine
    small.trainset = request.trainset
    assert AnswerShapeProposer().propose(small)  # the training set's 5 answers are enough


def test_format_rule_ignores_an_answer_that_differs_from_its_value_only_in_case() -> None:
    """Kills: a case-sensitive "says more than its value" signal: "Even" read as the label
    "even" is wrong in content, not in format, and gets no format rule."""
    module = Parity()
    examples = [Example(f"p{i}", {"number": str(n)}, {"answer": g}) for i, (n, g) in
                enumerate([(3, "odd"), (4, "even")])]  # fmt: skip
    rollouts = []
    for example, output in zip(examples, ["Even", "Odd."], strict=True):
        prediction = module.parse(output)
        assert prediction.ok and prediction.outputs["answer"] == output.rstrip(".").lower()
        rollouts.append(Rollout(example.id, output, prediction, 0.0))
    request = _proposal_request(module, module.skill, examples, rollouts)
    assert FormatRuleProposer().propose(request) == []
    rollouts[0] = Rollout("p0", "It is even.", module.parse("It is even."), 0.0)
    assert rollouts[0].prediction.ok  # read as "even": a sentence around the label
    request = _proposal_request(module, module.skill, examples, rollouts)
    assert FormatRuleProposer().propose(request)  # is a format failure


def test_rule_goes_under_an_existing_heading_in_any_case() -> None:
    """Kills: a case-sensitive heading check (a second `## Output format` section appears
    beside the skill's `## output format`), and an anchor in the proposer's spelling (found
    only by fuzzy matching, the rule then lands before the section's other rules)."""
    skill = "Write the key.\n\n## output format\n\n- Be short.\n\n## Notes\n\n- Keys are unique.\n"
    (group,) = AnswerShapeProposer().propose(
        _request(["Novak, J. (1998)", "x", "garcia1975"], KEY_GOLDS, skill=skill)
    )
    new = _applied(skill, group.edits[0])
    headings = [s.heading for s in new.sections() if s.heading]
    assert headings == ["output format", "Notes"], new.text
    assert _section_of(new, KEY_RULE) == "output format"
    assert new.text.index("- Be short.") < new.text.index(KEY_RULE)  # at the section's end


def test_rule_lands_under_its_heading_not_at_the_end() -> None:
    """Kills: the rule added at the end of the skill (inside whatever section is last)."""
    skill = "Write the key.\n\n## Output format\n\n- Be short.\n\n## Notes\n\n- Keys are unique.\n"
    (group,) = AnswerShapeProposer().propose(
        _request(["Novak, J. (1998)", "x", "garcia1975"], KEY_GOLDS, skill=skill)
    )
    new = _applied(skill, group.edits[0])
    assert _section_of(new, KEY_RULE) == "Output format"
    assert new.text.index(KEY_RULE) < new.text.index("## Notes")
    request, _ = _rule_request("Write the surname in lower case, then the year.")
    request.skill = Skill("Write the key.\n\n## Rules\n\n- Be short.\n\n## Notes\n\n- x.\n")
    (plain,) = PlainRuleProposer().propose(request)
    added = _applied(request.skill.text, plain.edits[0])
    assert _section_of(added, "Write the surname in lower case") == "Rules"


def test_plain_rule_refuses_a_copied_answer_in_any_case() -> None:
    """Kills: a case-sensitive copied-answer check (the gold key in capitals passes)."""
    request, _ = _rule_request("Always answer NOVAK1998 for references by Novak.")
    assert PlainRuleProposer().propose(request) == []
    assert request.notes[0]["reason"] == "copies an answer ('novak1998')"


def test_plain_rule_already_in_the_skill_in_another_case_is_refused() -> None:
    """Kills: a case-sensitive already-in-the-skill check (the same rule, capitalised
    differently, proposed again)."""
    request, _ = _rule_request("write the Surname in lower case, then the year")
    request.skill = Skill(
        "Write the key.\n\n## Rules\n\n- Write the surname in lower case, then the year.\n"
    )
    assert PlainRuleProposer().propose(request) == []
    assert request.notes[0]["reason"] == "already in the skill"


def test_plain_rule_of_more_than_40_words_is_refused() -> None:
    """Kills: the word limit off by one or dropped (a 41-word reply becomes a rule)."""
    words = ["Write", "the", "surname", "in", "lower", "case"] + ["then"] * 34
    request, _ = _rule_request(" ".join(words))  # 40 words: a rule
    assert PlainRuleProposer().propose(request)
    request, _ = _rule_request(" ".join([*words, "year"]))  # 41 words: refused
    assert PlainRuleProposer().propose(request) == []
    assert request.notes[0]["reason"] == "not one rule of 4-40 words (41 words)"


def test_one_broken_output_triggers_the_shape_rule_by_default() -> None:
    """Kills: `min_broken` compared with <= (one broken output no longer enough at the
    default of 1); two are needed at min_broken=2."""
    outputs = ["Novak, J. (1998)", "obi1999", "garcia1975"]  # one output breaks the shape
    (group,) = AnswerShapeProposer().propose(_request(outputs, KEY_GOLDS))
    assert "1 failing outputs" in group.rationale
    assert AnswerShapeProposer(min_broken=2).propose(_request(outputs, KEY_GOLDS)) == []


def test_a_bare_array_of_edits_is_read_without_a_retry() -> None:
    """Small models often reply with the edits' array alone, dropping the `{"edits": ...}`
    wrapper. That reply is read as it is: one call, the edit kept. Kills: taking the reply from
    its first `{` to its last `}` (two edits joined by a comma are no object; the call is
    retried and the group dropped)."""
    second = {"kind": "add", "after": None, "text": "Keys have no spaces.", "rationale": "keys"}
    reply = "```json\n" + json.dumps([FIX, second], indent=2) + "\n```"
    request, fake = _rule_request(reply)
    (group,) = ReflectiveProposer(read_successes=False).propose(request)
    assert [e.text for e in group.edits] == [FIX["text"], "Keys have no spaces."]  # type: ignore[attr-defined]
    assert len(fake.calls) == 1, "a readable reply was retried"


def test_the_edits_a_reply_completed_before_its_cut_are_kept_without_a_retry() -> None:
    """A reply cut off by `max_tokens` in its second edit keeps its first, whole edit, and no
    retry is paid for. Kills: dropping the cut reply (then the retry, cut again, drops the
    group) and keeping a half-written edit."""
    whole = json.dumps(FIX)
    reply = '```json\n{"edits": [\n  ' + whole + ',\n  {"kind": "add", "after": null, "text": "Cut'
    request, fake = _rule_request(reply)
    (group,) = ReflectiveProposer(read_successes=False).propose(request)
    assert [e.text for e in group.edits] == [FIX["text"]]  # type: ignore[attr-defined]
    assert len(fake.calls) == 1, "the completed edit was thrown away and a retry paid for"
