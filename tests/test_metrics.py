"""Tests for the built-in metrics, `weighted`, `llm_judge` and the `call_metric` contract."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from skillopt_dsl.errors import MetricError, UserInputError
from skillopt_dsl.metrics import (
    Score,
    call_metric,
    contains,
    exact_match,
    json_schema,
    llm_judge,
    multiple_choice,
    numeric,
    regex_match,
    to_score,
    token_f1,
    weighted,
)
from skillopt_dsl.metrics.judge import CompletesChat
from skillopt_dsl.metrics.score import metric_name
from skillopt_dsl.types import Example, Prediction


def ex(gold: Any = None, *, label: str = "answer", id: str = "ex-1", **inputs: Any) -> Example:
    labels = {} if gold is None else {label: gold}
    return Example(id, inputs or {"question": "q?"}, labels)


def pred(value: Any, field: str = "answer") -> Prediction:
    return Prediction({field: value}, raw=str(value))


def failed(raw: str = "I think the answer is Paris", field: str = "answer") -> Prediction:
    return Prediction({field: None}, raw=raw, error="expected JSON with field 'answer'")


# --------------------------------------------------------------------------- exact_match


@pytest.mark.parametrize(
    "output", ["Paris", "  paris ", '"Paris"', "Paris.", "'PARIS.'", "“Paris”", '"Paris".']
)
def test_exact_match_normalises(output: str) -> None:
    score = exact_match("answer")(ex("Paris"), pred(output))
    assert score.value == 1.0
    assert score.feedback is not None and score.feedback.startswith("Correct")


def test_exact_match_collapses_inner_whitespace() -> None:
    assert exact_match("answer")(ex("New York"), pred("new   york")).value == 1.0


def test_exact_match_wrong_answer_feedback_names_both() -> None:
    score = exact_match("answer")(ex("Paris"), pred("London"))
    assert score.value == 0.0
    assert score.feedback is not None
    assert "Paris" in score.feedback and "London" in score.feedback


def test_exact_match_without_normalisation_is_strict() -> None:
    metric = exact_match("answer", normalize=False)
    assert metric(ex("Paris"), pred("paris")).value == 0.0
    assert metric(ex("Paris"), pred("Paris")).value == 1.0


def test_exact_match_accepts_any_of_a_label_list() -> None:
    metric = exact_match("answer")
    gold = ["NYC", "New York City"]
    assert metric(ex(gold), pred("new york city")).value == 1.0
    wrong = metric(ex(gold), pred("Boston"))
    assert wrong.value == 0.0
    assert wrong.feedback is not None and "one of" in wrong.feedback and "NYC" in wrong.feedback


def test_exact_match_reads_a_differently_named_label() -> None:
    metric = exact_match("answer", "target")
    assert metric(ex("yes", label="target"), pred("Yes")).value == 1.0
    assert metric_name(metric) == "exact_match(answer, label=target)"


def test_missing_label_raises_naming_field_and_example() -> None:
    with pytest.raises(MetricError, match="target") as info:
        exact_match("answer", "target")(ex("x", id="row-7"), pred("x"))
    assert info.value.example_id == "row-7"
    assert "row-7" in str(info.value)


def test_misspelt_output_field_raises() -> None:
    with pytest.raises(MetricError, match="answr"):
        exact_match("answr", "answer")(ex("x"), pred("x"))


def test_metrics_have_readable_names() -> None:
    assert metric_name(exact_match("answer")) == "exact_match(answer)"
    assert metric_name(numeric("n")) == "numeric(n)"
    assert metric_name(regex_match("a", r"\d+")) == r"regex_match(a, '\\d+')"


# --------------------------------------------------------------------------- parse failures

ALL_FIELD_METRICS = [
    exact_match("answer"),
    contains("answer"),
    numeric("answer"),
    token_f1("answer"),
    regex_match("answer", r"\d+"),
    multiple_choice("answer", choices=["12", "13"]),
    json_schema("answer", {"type": "object"}),
]


@pytest.mark.parametrize("metric", ALL_FIELD_METRICS, ids=metric_name)
def test_parse_failure_scores_zero_with_feedback(metric: Any) -> None:
    score = call_metric(metric, ex("12"), failed("my answer: twelve"))
    assert score.value == 0.0
    assert score.feedback is not None
    assert "could not be parsed" in score.feedback
    assert "expected JSON with field 'answer'" in score.feedback
    assert "my answer: twelve" in score.feedback


def test_parse_failure_feedback_truncates_raw_output() -> None:
    raw = "A" * 150 + "B" * 150
    score = exact_match("answer")(ex("x"), failed(raw))
    assert score.feedback is not None
    assert "A" * 150 + "B" * 50 in score.feedback
    assert "B" * 51 not in score.feedback
    assert "truncated" in score.feedback


def test_empty_output_without_error_scores_zero() -> None:
    score = exact_match("answer")(ex("x"), Prediction({"answer": None}, raw=""))
    assert score.value == 0.0
    assert score.feedback is not None and "no value" in score.feedback


# --------------------------------------------------------------------------- contains


def test_contains_finds_gold_inside_output() -> None:
    metric = contains("answer")
    assert metric(ex("Paris"), pred("I believe it is PARIS, France")).value == 1.0
    miss = metric(ex("Paris"), pred("London"))
    assert miss.value == 0.0
    assert miss.feedback is not None and "Paris" in miss.feedback and "London" in miss.feedback


def test_contains_needs_whole_words() -> None:
    metric = contains("answer")
    assert metric(ex("plausible"), pred("implausible")).value == 0.0
    assert metric(ex("12"), pred("112")).value == 0.0
    assert metric(ex("12"), pred("the total is 12.")).value == 1.0


def test_contains_label_list_and_empty_gold() -> None:
    metric = contains("answer")
    assert metric(ex(["cat", "kitten"]), pred("a small kitten")).value == 1.0
    with pytest.raises(MetricError, match="empty gold"):
        metric(ex(""), pred("anything"))


# --------------------------------------------------------------------------- numeric


@pytest.mark.parametrize(
    ("gold", "output"),
    [("1234", "1,234"), (-5, "The answer is -5."), ("3", "3.0"), (2.5, "2.50 units"), ("7", 7)],
)
def test_numeric_parses_first_number(gold: Any, output: Any) -> None:
    assert numeric("answer")(ex(gold), pred(output)).value == 1.0


def test_numeric_wrong_and_missing_number_feedback() -> None:
    metric = numeric("answer")
    wrong = metric(ex("109"), pred("108 apples"))
    assert wrong.value == 0.0
    assert wrong.feedback is not None and "109" in wrong.feedback and "108" in wrong.feedback
    none = metric(ex("109"), pred("about a hundred"))
    assert none.value == 0.0
    assert none.feedback is not None and "no number" in none.feedback


def test_numeric_tolerance() -> None:
    assert numeric("answer")(ex("100"), pred("101")).value == 0.0
    assert numeric("answer", rel_tol=0.02)(ex("100"), pred("101")).value == 1.0
    assert numeric("answer", abs_tol=0.5)(ex("100"), pred("101")).value == 0.0
    assert numeric("answer", abs_tol=1.0)(ex("100"), pred("101")).value == 1.0


def test_numeric_rejects_bad_gold_and_bad_tolerance() -> None:
    with pytest.raises(MetricError, match="no number"):
        numeric("answer")(ex("banana"), pred("3"))
    with pytest.raises(UserInputError):
        numeric("answer", rel_tol=-1)


# --------------------------------------------------------------------------- token_f1


def test_token_f1_partial_overlap() -> None:
    score = token_f1("answer")(ex("the big red dog"), pred("a red cat"))
    # tokens: gold [big, red, dog], predicted [red, cat] -> P=1/2, R=1/3, F1=0.4
    assert score.value == pytest.approx(0.4)
    assert score.feedback is not None and "dog" in score.feedback and "cat" in score.feedback


def test_token_f1_exact_and_disjoint_and_best_of_list() -> None:
    metric = token_f1("answer")
    assert metric(ex("The Eiffel Tower!"), pred("eiffel tower")).value == 1.0
    assert metric(ex("blue"), pred("green")).value == 0.0
    assert metric(ex(["blue sky", "green grass"]), pred("green grass")).value == 1.0


# --------------------------------------------------------------------------- regex_match


def test_regex_match_requires_full_match() -> None:
    metric = regex_match("answer", r"[-+]?\d+")
    assert metric(ex(), pred("-42")).value == 1.0
    wrong = metric(ex(), pred("42 apples"))
    assert wrong.value == 0.0
    assert wrong.feedback is not None and "42 apples" in wrong.feedback and r"\d+" in wrong.feedback


def test_regex_match_rejects_invalid_pattern() -> None:
    with pytest.raises(UserInputError, match="invalid regular expression"):
        regex_match("answer", "(")


# --------------------------------------------------------------------------- multiple_choice

SPORTS = ["plausible", "implausible"]


def test_multiple_choice_right_and_wrong() -> None:
    metric = multiple_choice("answer", choices=SPORTS)
    assert metric(ex("plausible"), pred("It is plausible.")).value == 1.0
    wrong = metric(ex("plausible"), pred("implausible"))
    assert wrong.value == 0.0
    assert wrong.feedback is not None
    assert "Chose 'implausible'" in wrong.feedback
    assert "correct option is 'plausible'" in wrong.feedback


def test_multiple_choice_none_or_several_options() -> None:
    metric = multiple_choice("answer", choices=SPORTS)
    none = metric(ex("plausible"), pred("maybe"))
    assert none.value == 0.0
    assert none.feedback is not None and "none of the options" in none.feedback
    both = metric(ex("plausible"), pred("plausible or implausible"))
    assert both.value == 0.0
    assert both.feedback is not None and "several options" in both.feedback


def test_multiple_choice_target_scores_label() -> None:
    metric = multiple_choice("answer", "target_scores")
    gold = {"05/01/2021": 1, "02/23/2021": 0, "03/11/2021": 0}
    example = ex(gold, label="target_scores")
    assert metric(example, pred("05/01/2021")).value == 1.0
    wrong = metric(example, pred("I'd say 02/23/2021"))
    assert wrong.value == 0.0
    assert wrong.feedback is not None and "05/01/2021" in wrong.feedback


def test_multiple_choice_reads_choices_from_example() -> None:
    example = Example("e", {"question": "q", "choices": ["yes", "no"]}, {"answer": "no"})
    assert multiple_choice("answer")(example, pred("No")).value == 1.0
    assert multiple_choice("answer")(example, pred("yes")).value == 0.0


def test_multiple_choice_dataset_problems_raise() -> None:
    with pytest.raises(MetricError, match="no options"):
        multiple_choice("answer")(ex("yes"), pred("yes"))
    with pytest.raises(MetricError, match="not among the options"):
        multiple_choice("answer", choices=SPORTS)(ex("maybe"), pred("plausible"))
    with pytest.raises(MetricError, match="no option as correct"):
        multiple_choice("answer")(ex({"a": 0, "b": 0}), pred("a"))


# --------------------------------------------------------------------------- json_schema

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


def test_json_schema_accepts_dict_and_json_string() -> None:
    metric = json_schema("answer", SCHEMA)
    assert metric(ex(), pred({"n": 3})).value == 1.0
    assert metric(ex(), pred('{"n": 3}')).value == 1.0


def test_json_schema_failures_explain_why() -> None:
    metric = json_schema("answer", SCHEMA)
    wrong = metric(ex(), pred('{"n": "three"}'))
    assert wrong.value == 0.0
    assert wrong.feedback is not None and "not of type 'integer'" in wrong.feedback
    missing = metric(ex(), pred({}))
    assert missing.feedback is not None and "'n' is a required property" in missing.feedback
    broken = metric(ex(), pred("{n: 3"))
    assert broken.value == 0.0
    assert broken.feedback is not None and "not valid JSON" in broken.feedback


def test_json_schema_rejects_invalid_schema() -> None:
    with pytest.raises(UserInputError, match="invalid JSON schema"):
        json_schema("answer", {"type": "no-such-type"})


# --------------------------------------------------------------------------- call_metric contract


def test_raising_metric_becomes_metric_error_naming_example_and_metric() -> None:
    def my_metric(example: Example, prediction: Prediction) -> float:
        raise KeyError("boom")

    with pytest.raises(MetricError) as info:
        call_metric(my_metric, ex("x", id="row-42"), pred("x"))
    assert info.value.example_id == "row-42"
    assert info.value.metric == "my_metric"
    assert "row-42" in str(info.value) and "my_metric" in str(info.value)


def test_dspy_style_trace_metric_is_accepted() -> None:
    seen: list[object] = []

    def dspy_metric(example: Any, pred: Any, trace: object = "unset") -> bool:
        seen.append(trace)
        return bool(example.answer == pred.answer)

    assert call_metric(dspy_metric, ex("a"), pred("a")) == Score(1.0)
    assert seen == [None]


@pytest.mark.parametrize("bad", [2.0, "yes", None, -0.1, float("nan")])
def test_bad_metric_return_is_metric_error(bad: object) -> None:
    def returns_bad(example: Example, prediction: Prediction) -> Any:
        return bad

    with pytest.raises(MetricError, match="returns_bad"):
        call_metric(returns_bad, ex("x", id="e9"), pred("x"))


def test_to_score_converts_bools_and_floats() -> None:
    assert to_score(True) == Score(1.0)
    assert to_score(0.25) == Score(0.25)


# --------------------------------------------------------------------------- weighted


def const(value: float, feedback: str | None = None, name: str = "const") -> Any:
    def metric(example: Example, prediction: Prediction) -> Score:
        return Score(value, feedback)

    metric.__name__ = name
    return metric


def test_weighted_mean_normalises_weights() -> None:
    metric = weighted((const(1.0, "good", "a"), 3), (const(0.0, "bad", "b"), 1))
    score = metric(ex(), pred("x"))
    assert score.value == pytest.approx(0.75)
    assert score.feedback is not None
    assert "[a, weight 0.75] score 1.00: good" in score.feedback
    assert "[b, weight 0.25] score 0.00: bad" in score.feedback


def test_weighted_accepts_a_dict_and_real_metrics() -> None:
    metric = weighted({exact_match("answer"): 1, regex_match("answer", "[a-z]+"): 1})
    score = call_metric(metric, ex("paris"), pred("london"))
    assert score.value == pytest.approx(0.5)
    assert score.feedback is not None and "exact_match(answer)" in score.feedback
    assert metric_name(metric).startswith("weighted(exact_match(answer)=0.5")


def test_weighted_components_errors_name_example() -> None:
    def broken(example: Example, prediction: Prediction) -> float:
        raise RuntimeError("nope")

    metric = weighted((const(1.0), 1), (broken, 1))
    with pytest.raises(MetricError, match="broken") as info:
        call_metric(metric, ex("x", id="e5"), pred("x"))
    assert info.value.example_id == "e5"


@pytest.mark.parametrize(
    "args",
    [(), ((const(1.0), 0),), ((const(1.0), -1),), ((const(1.0), True),), (("not callable", 1),)],
)
def test_weighted_rejects_bad_components(args: tuple[Any, ...]) -> None:
    with pytest.raises(UserInputError):
        weighted(*args)


# --------------------------------------------------------------------------- llm_judge


@dataclass
class FakeResponse:
    text: str


class FakeJudgeLM:
    """Replies with scripted texts in order and records every request."""

    def __init__(self, *replies: str) -> None:
        self.replies = list(replies)
        self.requests: list[list[dict[str, str]]] = []

    def complete(self, messages: list[dict[str, str]]) -> FakeResponse:
        self.requests.append(messages)
        return FakeResponse(self.replies.pop(0))


def judge(lm: CompletesChat, **kwargs: Any) -> Any:
    return llm_judge("The answer must be the capital city.", lm=lm, **kwargs)


def test_llm_judge_parses_json_reply() -> None:
    lm = FakeJudgeLM('Sure! {"score": 4, "reason": "Close but verbose."} Thanks.')
    score = judge(lm)(ex("Paris", question="Capital of France?"), pred("Paris, I think"))
    assert score.value == pytest.approx(0.75)
    assert score.feedback is not None and "4/5" in score.feedback
    assert "Close but verbose." in score.feedback
    prompt = lm.requests[0][-1]["content"]
    assert "capital city" in prompt and "Capital of France?" in prompt
    assert "Paris, I think" in prompt and "Reference answer" in prompt


def test_llm_judge_leading_integer_and_scale() -> None:
    score = judge(FakeJudgeLM("3 - partly right"), scale=3)(ex("Paris"), pred("Lyon"))
    assert score.value == 1.0
    assert score.feedback is not None and "partly right" in score.feedback
    low = judge(FakeJudgeLM("1"))(ex("Paris"), pred("Lyon"))
    assert low.value == 0.0


@pytest.mark.parametrize("reply", ["I cannot grade this.", '{"score": 9}', "7 out of 5", ""])
def test_llm_judge_unparseable_reply_raises(reply: str) -> None:
    with pytest.raises(MetricError, match="holds no score") as info:
        judge(FakeJudgeLM(reply))(ex("Paris", id="j1"), pred("Lyon"))
    assert info.value.example_id == "j1"
    if reply:
        assert reply in str(info.value)


def test_llm_judge_skips_the_call_on_parse_failure_and_limits_fields() -> None:
    lm = FakeJudgeLM('{"score": 5, "reason": "ok"}')
    metric = judge(lm, fields=["answer"])
    assert metric(ex("Paris"), failed()).value == 0.0
    assert lm.requests == []
    prediction = Prediction({"answer": "Paris", "secret": "hidden-text"}, raw="")
    assert metric(ex("Paris"), prediction).value == 1.0
    assert "hidden-text" not in lm.requests[0][-1]["content"]


def test_llm_judge_rejects_bad_configuration() -> None:
    with pytest.raises(UserInputError):
        llm_judge(" ", lm=FakeJudgeLM())
    with pytest.raises(UserInputError):
        judge(FakeJudgeLM(), scale=1)
    with pytest.raises(UserInputError):
        llm_judge("rubric", lm=object())  # type: ignore[arg-type]


def test_llm_judge_accepts_a_backend_like_any_model_argument() -> None:
    from skillopt_dsl.testing import ScriptedLM

    fake = ScriptedLM(lambda messages: '{"score": 5, "reason": "good"}')
    judge = llm_judge("Is it right?", lm=fake)
    example = Example(id="j1", inputs={"q": "x"}, labels={"answer": "a"})
    score = call_metric(judge, example, Prediction({"answer": "a"}))
    assert score.value == 1.0 and len(fake.calls) == 1


def test_gepa_feedback_metric_and_prediction_result_become_a_score() -> None:
    """Kills: `call_metric` calling a GEPA-style `(gold, pred, trace, pred_name, pred_trace)`
    metric with two arguments (TypeError -> MetricError), and `to_score` refusing a
    `dspy.Prediction(score=, feedback=)`-style result (its feedback would never reach
    reflection)."""
    seen: list[tuple[Any, ...]] = []

    @dataclass
    class Verdict:
        score: float
        feedback: str

    def gepa_metric(gold: Any, pred: Any, trace: Any, pred_name: Any, pred_trace: Any) -> Verdict:
        seen.append((trace, pred_name, pred_trace))
        right = pred.outputs["answer"] == gold.answer
        return Verdict(1.0 if right else 0.0, "right" if right else "say the number")

    assert call_metric(gepa_metric, ex("12"), pred("12")) == Score(1.0, feedback="right")
    assert call_metric(gepa_metric, ex("12"), pred("13")) == Score(0.0, "say the number")
    assert seen == [(None, None, None), (None, None, None)]
    with pytest.raises(MetricError):
        call_metric(lambda g, p: Verdict(1.5, "too high"), ex("12"), pred("12"))


def test_dspy_prediction_result_is_a_score() -> None:
    """Kills: the same refusal for a real `dspy.Prediction` (skipped without the [dspy] extra)."""
    dspy = pytest.importorskip("dspy", reason="the [dspy] extra is not installed")
    result = call_metric(
        lambda g, p: dspy.Prediction(score=0.5, feedback="half"), ex("1"), pred("1")
    )
    assert result == Score(0.5, feedback="half")
