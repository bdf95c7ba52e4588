"""DSPy interop: `SkillOptimizer`, the bridge, `PredictorModule`, metrics and `RawSkillAdapter`.

Every model call goes through the bridge into our `LM` around a `ScriptedLM` FAKE; nothing
reaches a provider. Skipped (with the reason) when the `[dspy]` extra is not installed.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any, Literal

import pytest

dspy = pytest.importorskip("dspy", reason="needs the [dspy] extra: pip install -e '.[dspy]'")

import skillopt_dsl as sd  # noqa: E402
from skillopt_dsl.dspy import (  # noqa: E402
    DSPyProgram,
    DSPyProgramError,
    RawSkillAdapter,
    SkillOptimizer,
    bridge_lm,
    dspy_metric,
    evaluate_program,
)
from skillopt_dsl.export import load_skill  # noqa: E402
from skillopt_dsl.lm import LM, Budget, UsageLedger  # noqa: E402
from skillopt_dsl.optimizers import FormatRuleProposer, GradientText  # noqa: E402
from skillopt_dsl.testing import ScriptedLM  # noqa: E402

RULE = "Reply with exactly one of: even, odd."


class Judge(dspy.Signature):
    """Say whether the number is even or odd."""

    hint: str = dspy.InputField()
    answer: Literal["even", "odd"] = dspy.OutputField()


class Pipeline(dspy.Module):
    """Two predictors: `extract` copies the last digit, `judge` names its parity."""

    def __init__(self) -> None:
        super().__init__()
        self.extract = dspy.Predict("number -> last_digit")
        self.judge = dspy.Predict(Judge)

    def forward(self, number: str) -> Any:
        digit = self.extract(number=number).last_digit
        return self.judge(hint=f"{digit} {dspy.settings.get('marker') or ''}".strip())


def fake_model(messages: list[dict[str, str]]) -> str:
    """The FAKE target: `extract` answers the last digit; `judge` answers right only when its
    system message holds the format rule, else "unsure" (which does not parse)."""
    system = messages[0]["content"] if messages[0]["role"] == "system" else ""
    user = messages[-1]["content"]
    if "even or odd" not in system:
        return user.strip()[-1]
    digit = user.split()[0]
    if RULE in system:
        return "even" if int(digit) % 2 == 0 else "odd"
    return "unsure"


def examples(start: int, count: int) -> list[Any]:
    return [
        dspy.Example(number=str(n), answer="even" if n % 2 == 0 else "odd").with_inputs("number")
        for n in range(start, start + count)
    ]


def accuracy(gold: Any, pred: Any, trace: Any = None) -> float:
    return float(pred.answer == gold.answer)


def optimizer() -> GradientText:
    return GradientText(lr=0.5, epochs=1, batch_size=6, proposers=[FormatRuleProposer()])


def instructions(program: Any) -> dict[str, str]:
    return {name: p.signature.instructions for name, p in program.named_predictors()}


@pytest.fixture(autouse=True)
def no_global_dspy_lm() -> Any:
    with dspy.context(lm=None, adapter=None):
        yield


def test_instructions_are_trained_and_gated_and_the_student_is_untouched(tmp_path: Path) -> None:
    """Kills: training a predictor without the gate (a rejected candidate adopted), mutating the
    student, or leaving the bridge on the returned program."""
    fake = ScriptedLM(fake_model)
    student = Pipeline()
    before = instructions(student)
    tele = SkillOptimizer(
        accuracy, optimizer=optimizer(), lm=LM(fake), adapter=RawSkillAdapter(), threads=2
    )
    compiled = tele.compile(student, trainset=examples(0, 12), valset=examples(100, 16))
    result = compiled.skillopt
    judge = result.predictors["judge"].result
    assert judge.seed_val_score == 0.0 and judge.val_score == 1.0
    assert judge.gate_log[0].accepted
    assert RULE in compiled.judge.signature.instructions
    assert compiled.extract.signature.instructions == before["extract"]  # nothing passed there
    assert instructions(student) == before and compiled is not student
    assert all(p.lm is None for _, p in compiled.named_predictors())
    report = evaluate_program(
        compiled, examples(200, 10), accuracy, lm=LM(fake), adapter=RawSkillAdapter()
    )
    assert report.mean == 1.0


def test_a_run_where_nothing_passes_returns_the_students_instructions() -> None:
    """Kills: adopting the last candidate (or any ungated one) when no candidate passed."""
    fake = ScriptedLM(lambda messages: "unsure")
    student = Pipeline()
    tele = SkillOptimizer(accuracy, optimizer=optimizer(), lm=LM(fake), adapter=RawSkillAdapter())
    compiled = tele.compile(student, trainset=examples(0, 6), valset=examples(100, 12))
    assert instructions(compiled) == instructions(student)
    assert not any(r.improved for r in compiled.skillopt.results.values())


def test_budget_stops_the_program_before_the_call_is_sent() -> None:
    """Kills: scoring a budget stop as 0 (a caught exception in the program hid it), or a
    check after the call is sent (the fake would see a fourth call)."""

    class Swallowing(Pipeline):
        def forward(self, number: str) -> Any:
            try:
                return super().forward(number=number)
            except Exception:
                return dspy.Prediction(answer=None)

    fake = ScriptedLM(fake_model)
    lm = LM(fake, ledger=UsageLedger(Budget(max_calls=3)))
    with pytest.raises(sd.BudgetExceeded):
        evaluate_program(Swallowing(), examples(0, 4), accuracy, lm=lm, threads=1)
    assert len(fake.calls) == 3


def test_the_budget_spans_every_predictor() -> None:
    """Kills: giving each predictor the whole budget (the calls would exceed it)."""
    fake = ScriptedLM(fake_model)
    tele = SkillOptimizer(
        accuracy,
        optimizer=optimizer(),
        lm=LM(fake),
        adapter=RawSkillAdapter(),
        budget=Budget(max_calls=90),
    )
    compiled = tele.compile(Pipeline(), trainset=examples(0, 12), valset=examples(100, 20))
    result = compiled.skillopt
    assert result.stop_reason == "budget"
    assert result.usage.calls == len(fake.calls) <= 90


def test_worker_threads_see_the_callers_dspy_context() -> None:
    """Kills: running the program in the evaluation's worker threads without the caller's
    context (`contextvars.copy_context().run`): the marker would be missing."""
    fake = ScriptedLM(fake_model)
    threads: set[int] = set()
    first_two = threading.Barrier(2, timeout=20)  # two workers must be inside at once
    calls = iter(range(1_000))
    lock = threading.Lock()

    def seen(gold: Any, pred: Any, trace: Any = None) -> float:
        threads.add(threading.get_ident())
        with lock:
            index = next(calls)
        if index < 2:
            first_two.wait()
        return accuracy(gold, pred)

    with dspy.context(marker="from-the-caller"):
        evaluate_program(
            Pipeline(), examples(0, 8), seen, lm=LM(fake), adapter=RawSkillAdapter(), threads=4
        )
    judged = [c for c in fake.calls if "even or odd" in c[0]["content"]]
    assert len(judged) == 8
    assert all("from-the-caller" in c[-1]["content"] for c in judged)
    assert len(threads) > 1


def test_saved_program_loads_with_the_new_instructions(tmp_path: Path) -> None:
    """Kills: saving the student (or the bridge) instead of the compiled program, or writing a
    best_skill.md that differs from what the predictor runs with (cleandoc normalisation)."""
    fake = ScriptedLM(fake_model)
    tele = SkillOptimizer(
        accuracy,
        optimizer=optimizer(),
        lm=LM(fake),
        adapter=RawSkillAdapter(),
        run_dir=tmp_path / "run",
    )
    compiled = tele.compile(Pipeline(), trainset=examples(0, 12), valset=examples(100, 16))
    loaded = Pipeline()
    loaded.load(str(tmp_path / "run" / "program.json"))
    assert instructions(loaded) == instructions(compiled)
    assert RULE in loaded.judge.signature.instructions
    exported = load_skill(tmp_path / "run" / "judge" / "best_skill.md")
    assert exported.text == compiled.judge.signature.instructions
    assert exported.hash == compiled.skillopt.predictors["judge"].skill.hash


def test_resume_replays_a_finished_run_without_new_calls(tmp_path: Path) -> None:
    """Kills: a resume that re-sends calls already paid for or ends with other instructions."""
    fake = ScriptedLM(fake_model)
    settings: dict[str, Any] = {
        "optimizer": optimizer(),
        "adapter": RawSkillAdapter(),
        "run_dir": tmp_path / "run",
    }
    data = {"trainset": examples(0, 12), "valset": examples(100, 16)}
    first = SkillOptimizer(accuracy, lm=LM(fake), **settings).compile(Pipeline(), **data)
    sent = len(fake.calls)
    again = SkillOptimizer(accuracy, lm=LM(fake), resume=True, **settings).compile(
        Pipeline(), **data
    )
    assert instructions(again) == instructions(first)
    assert len(fake.calls) == sent


def test_chat_adapter_parse_failure_scores_zero_with_format_feedback() -> None:
    """Kills: letting `AdapterParseError` escape (the run would crash) or scoring it without
    feedback naming the expected format (the format-rule proposer could not learn)."""
    fake = ScriptedLM(lambda messages: "no idea at all")
    report = evaluate_program(Pipeline(), examples(0, 2), accuracy, lm=LM(fake))
    for record in report.records:
        assert record.score == 0.0 and record.error is None
        assert "[[ ## last_digit ## ]]" in (record.feedback or "")
        assert "could not parse" in (record.feedback or "")


def test_a_failed_model_call_is_a_failed_rollout() -> None:
    """Kills: scoring a failed call with the metric (it must be 0, error kept)."""

    def broken(messages: list[dict[str, str]]) -> str:
        raise ValueError("provider exploded")

    report = evaluate_program(Pipeline(), examples(0, 2), accuracy, lm=LM(ScriptedLM(broken)))
    assert all(r.score == 0.0 and "provider exploded" in (r.error or "") for r in report.records)


def test_both_metric_forms_and_prediction_feedback() -> None:
    """Kills: calling a GEPA five-argument metric with three arguments, dropping the feedback
    of `dspy.Prediction(score=, feedback=)`, or passing the wrong predictor name."""
    fake = ScriptedLM(fake_model)
    seen: list[tuple[Any, int]] = []

    def gepa_metric(gold: Any, pred: Any, trace: Any, pred_name: Any, pred_trace: Any) -> Any:
        seen.append((pred_name, len(pred_trace or [])))
        return dspy.Prediction(score=accuracy(gold, pred), feedback="checked the parity")

    program = DSPyProgram(Pipeline(), gepa_metric, inputs=("number",), adapter=RawSkillAdapter())
    module = program.module("judge")
    skill = sd.Skill(f"Say whether the number is even or odd. {RULE}")
    report = sd.evaluate(module, sd.data.as_examples(examples(0, 4)), skill=skill, lm=LM(fake))
    assert report.mean == 1.0
    assert {r.feedback for r in report.records} == {"checked the parity"}
    assert seen and all(entry == ("judge", 1) for entry in seen)
    plain = DSPyProgram(Pipeline(), accuracy, inputs=("number",)).module("judge")
    outcome = sd.RunOutcome(prediction=sd.Prediction({"answer": "odd"}), output="odd")
    example = sd.data.as_examples(examples(1, 1))[0]
    assert plain.score(example, outcome).value == 1.0


def test_dspy_metric_wraps_feedback_metrics_for_compile() -> None:
    """Kills: `compile` rejecting a five-argument metric returning `dspy.Prediction`."""

    def gepa_metric(gold: Any, pred: Any, trace: Any, pred_name: Any, pred_trace: Any) -> Any:
        return dspy.Prediction(score=float(pred.answer == gold.answer), feedback="compared")

    module = sd.SkillModule.create(
        name="Parity",
        inputs={"number": str},
        outputs={"answer": Literal["even", "odd"]},
        skill="Answer even or odd.",
        metric=dspy_metric(gepa_metric),
    )
    fake = ScriptedLM(lambda m: "even" if int(m[-1]["content"]) % 2 == 0 else "odd")
    report = sd.evaluate(module, sd.data.as_examples(examples(0, 4)), lm=LM(fake))
    assert report.mean == 1.0 and {r.feedback for r in report.records} == {"compared"}


def test_raw_skill_adapter_sends_the_skill_verbatim_and_never_raises() -> None:
    """Kills: wrapping the instructions in field scaffolding, or raising on an unparseable
    reply (the rollout must finish with the error recorded)."""
    fake = ScriptedLM(lambda messages: "")
    skill = "  Say whether the number is even or odd.\n\n- rule one"
    lm = bridge_lm(LM(fake))
    program = dspy.Predict(Judge.with_instructions(skill))
    with dspy.context(lm=lm, adapter=RawSkillAdapter()):
        prediction = program(hint="7")
    assert prediction.answer is None
    (messages,) = fake.calls
    assert messages == [
        {"role": "system", "content": program.signature.instructions},
        {"role": "user", "content": "7"},
    ]
    assert lm.engine.record.parse_errors


def test_clear_errors_for_predictor_lms() -> None:
    """Kills: letting a predictor's own LM bypass the budget."""
    tele = SkillOptimizer(accuracy, lm=LM(ScriptedLM(fake_model)))
    own = Pipeline()
    own.judge.lm = bridge_lm(LM(ScriptedLM(fake_model)))
    with pytest.raises(sd.UserInputError, match="own LM"):
        tele.compile(own, trainset=examples(0, 4), valset=examples(10, 4))


def test_a_bug_in_the_program_is_an_error_naming_the_example() -> None:
    """Kills: scoring a crashing program as 0 (a silent zero hides the bug)."""

    class Buggy(Pipeline):
        def forward(self, number: str) -> Any:
            raise KeyError("oops")

    with pytest.raises(DSPyProgramError, match="KeyError"):
        evaluate_program(Buggy(), examples(0, 1), accuracy, lm=LM(ScriptedLM(fake_model)))


def test_compile_takes_dspy_examples_directly() -> None:
    """Kills: `compile(module, [dspy.Example, ...])` failing on `.id`, or unstable ids that let
    the same example sit in train and val unnoticed."""
    module = sd.SkillModule.create(
        name="Parity",
        inputs={"number": str},
        outputs={"answer": Literal["even", "odd"]},
        skill="Answer even or odd.",
        metric=sd.metrics.exact_match("answer"),
    )
    fake = ScriptedLM(lambda m: "even" if int(m[-1]["content"]) % 2 == 0 else "odd")
    result = sd.compile(
        module, examples(0, 6), examples(100, 12), optimizer=optimizer(), lm=LM(fake)
    )
    assert result.seed_val_score == 1.0
    with pytest.raises(sd.UserInputError, match="must not share"):
        sd.compile(module, examples(0, 6), examples(5, 6), optimizer=optimizer(), lm=LM(fake))


def test_each_predictors_run_gets_what_the_earlier_ones_left_of_the_token_budget() -> None:
    """Kills: giving each predictor's run the whole `max_tokens` (unbounded, the two runs spend
    about 560 + 830 tokens: 1,390 against 1,000)."""
    tele = SkillOptimizer(
        accuracy,
        optimizer=optimizer(),
        lm=LM(ScriptedLM(fake_model)),
        adapter=RawSkillAdapter(),
        budget=Budget(max_tokens=1000),
    )
    compiled = tele.compile(Pipeline(), trainset=examples(0, 12), valset=examples(100, 16))
    result = compiled.skillopt
    assert result.stop_reason == "budget"
    # > 450: the reach probe (one row, two calls, ~30 tokens) is paid first (issue 37, item 2)
    assert result.predictors["extract"].result.usage.total_tokens > 450
    assert result.usage.total_tokens <= 1000


class CallsAtWarning(logging.Handler):
    """Records each WARNING with how many calls the FAKE had answered when it was logged."""

    def __init__(self, fake: ScriptedLM) -> None:
        super().__init__(logging.WARNING)
        self.fake = fake
        self.seen: list[tuple[str, int]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.seen.append((record.getMessage(), len(self.fake.calls)))


NEEDS_57 = (
    "budget max_calls=56 cannot pay for the seed evaluation plus one gate decision: that takes "
    "at least 57 calls (the gate's first look, 12 validation runs, of the seed program, 2 "
    "training runs, 1 reflection call, 2 screening runs and the first look of one candidate, "
    "at 2 call(s) per run, one per predictor; loops and format retries take more); raise "
    "max_calls to at least 57 or use fewer validation examples"
)


@pytest.mark.parametrize(("max_calls", "warned"), [(56, True), (57, False)])
def test_a_budget_too_small_for_one_decision_is_said_before_the_first_call(
    max_calls: int, warned: bool
) -> None:
    """Kills: spending a budget that cannot pay for the seed's validation pass plus one gate
    decision without a WARNING before the first call (and in the result), or a wrong count:
    2 predictors x (12 + 2 + 2 + 12 runs) + 1 reflection call = 57 (the seed and a candidate
    on the gate's first look, 12 of 16, and a tight budget's batch of 2 with its screen)."""
    fake = ScriptedLM(fake_model)
    handler = CallsAtWarning(fake)
    logger = logging.getLogger("skillopt_dsl.dspy.optimizer")
    logger.addHandler(handler)
    try:
        tele = SkillOptimizer(
            accuracy,
            optimizer=optimizer(),
            lm=LM(fake),
            adapter=RawSkillAdapter(),
            budget=Budget(max_calls=max_calls),
        )
        compiled = tele.compile(Pipeline(), trainset=examples(0, 12), valset=examples(100, 16))
    finally:
        logger.removeHandler(handler)
    said = [(text, calls) for text, calls in handler.seen if text.startswith("budget")]
    if warned:
        assert said == [(NEEDS_57, 0)]
        assert compiled.skillopt.warnings == (NEEDS_57,)
    else:
        assert said == [] and compiled.skillopt.warnings == ()


# -- DSPy's habits (issue 25, item 7) --------------------------------------------------------


def test_dspy_names_for_threads_and_run_dir_are_accepted_and_auto_gets_a_hint(
    tmp_path: Path,
) -> None:
    """Kills: `num_threads=` / `log_dir=` raising a bare TypeError (or being ignored), and
    `auto=` failing without saying what sizes our search."""
    tele = SkillOptimizer(
        accuracy,
        optimizer=optimizer(),
        lm=LM(ScriptedLM(fake_model)),
        adapter=RawSkillAdapter(),
        num_threads=3,
        log_dir=tmp_path / "logs",
    )
    assert tele.threads == 3 and tele.run_dir == tmp_path / "logs"
    tele.compile(Pipeline(), trainset=examples(0, 6), valset=examples(100, 6))
    assert (tmp_path / "logs" / "judge" / "events.jsonl").exists()
    with pytest.raises(sd.UserInputError) as auto:
        SkillOptimizer(accuracy, auto="light")
    assert str(auto.value) == (
        "auto='light' is how MIPROv2 and GEPA size their search; SkillOptimizer's search is "
        "sized by budget=Budget(max_calls=N) (and the optimizer's epochs): drop auto= and "
        "pass budget="
    )
    with pytest.raises(sd.UserInputError, match=r"^threads=2 and num_threads=3 name the same"):
        SkillOptimizer(accuracy, threads=2, num_threads=3)


def test_gepa_and_miprov2_names_for_the_reflection_model_are_accepted() -> None:
    """Kills: `reflection_lm=` (GEPA) or `prompt_model=` (MIPROv2) raising a bare TypeError,
    or being ignored (the program's own model would then reflect)."""
    reflector = LM(ScriptedLM(fake_model))
    assert SkillOptimizer(accuracy, reflection_lm=reflector).optimizer_lm is reflector
    assert SkillOptimizer(accuracy, prompt_model=reflector).optimizer_lm is reflector
    other = LM(ScriptedLM(fake_model))
    with pytest.raises(sd.UserInputError, match=r"^optimizer_lm=.* and reflection_lm=.* name"):
        SkillOptimizer(accuracy, optimizer_lm=other, reflection_lm=reflector)


def test_a_dspy_lm_is_accepted_with_its_api_base_and_settings() -> None:
    """Kills: refusing a `dspy.LM` as `lm=`, or dropping its api_base, key or settings (the
    requests would miss the server, or carry other sampling settings)."""
    from skillopt_dsl.testing.fake_server import FakeOpenAIServer

    with FakeOpenAIServer(lambda messages: "7", latency_s=0.0) as server:
        dspy_lm = dspy.LM(
            "openai/served", api_base=server.url, api_key="sk-test", temperature=0.4,
            max_tokens=77,
        )  # fmt: skip
        report = evaluate_program(
            dspy.Predict("number -> answer"),
            [dspy.Example(number="7", answer="7").with_inputs("number")],
            lambda gold, pred: float(pred.answer == gold.answer),
            lm=dspy_lm,
            adapter=RawSkillAdapter(),
        )
        body = server.bodies[-1]
    assert report.mean == 1.0 and server.requests == 1
    assert (body["model"], body["temperature"], body["max_tokens"]) == ("served", 0.4, 77)
    with pytest.raises(sd.UserInputError, match=r"sets \['logprobs'\], which skillopt's LM"):
        SkillOptimizer(accuracy, lm=dspy.LM("openai/x", logprobs=True))


def test_without_a_valset_the_trainset_split_is_stated_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Kills: requiring valset= (GEPA defaults to the trainset, MIPROv2 splits it), or a
    silent split (the split must be logged at WARNING and in the result)."""
    tele = SkillOptimizer(
        accuracy, optimizer=optimizer(), lm=LM(ScriptedLM(fake_model)), adapter=RawSkillAdapter()
    )
    with caplog.at_level(logging.WARNING, logger="skillopt_dsl.dspy.optimizer"):
        compiled = tele.compile(Pipeline(), trainset=examples(0, 10))
    split = compiled.skillopt.split
    assert split is not None and split.startswith(
        "no valset given: the trainset's 10 examples were split (seed 0) into 5 for training "
        "and 5 for the gate, valset = trainset["
    )
    assert split in caplog.messages and compiled.skillopt.warnings[0] == split
    judge = compiled.skillopt.predictors["judge"].result
    assert judge.preflight is not None and judge.preflight.n_val == 5
