"""Evidence across a DSPy program: one significance budget for all its predictors.

Skipped (with the reason) when the `[dspy]` extra is not installed.
"""

from __future__ import annotations

import pytest

dspy = pytest.importorskip("dspy", reason="needs the [dspy] extra: pip install -e '.[dspy]'")

from typing import Any  # noqa: E402

from skillopt_dsl.dspy import RawSkillAdapter, SkillOptimizer  # noqa: E402
from skillopt_dsl.lm import LM  # noqa: E402
from skillopt_dsl.optimizers import FormatRuleProposer, GradientText  # noqa: E402
from skillopt_dsl.testing import ScriptedLM  # noqa: E402
from tests.test_dspy import RULE, Pipeline, examples  # noqa: E402

TRAIN, VAL = examples(0, 12), examples(100, 16)
TRAIN_NUMBERS = frozenset(e.number for e in TRAIN)
EXTRACT_RULE = "last_digit only"
"""In the format rule FormatRuleProposer derives for `extract`."""


def overfit_model(messages: list[dict[str, str]]) -> str:
    """The FAKE target: `extract` answers the last digit, and with its format rule it adds a
    "!" on the *training* numbers only; `judge` answers right when its system message holds
    the format rule or its hint carries the "!", else the wrong parity (it parses). So
    extract's rule passes the screen on training data and gains nothing on validation: its
    gate decision is a rejection that spends significance before the judge's turn."""
    system = messages[0]["content"] if messages[0]["role"] == "system" else ""
    user = messages[-1]["content"].strip()
    if "even or odd" not in system:
        number = user.split()[-1]
        return (
            f"{number[-1]} !" if EXTRACT_RULE in system and number in TRAIN_NUMBERS else number[-1]
        )
    even = int(user.split()[0]) % 2 == 0
    if RULE in system or "!" in user:
        return "even" if even else "odd"
    return "odd" if even else "even"


def parity_model(messages: list[dict[str, str]]) -> str:
    """The FAKE target: `extract` answers the last digit; `judge` answers right only when its
    system message holds the format rule, else the wrong one (it parses, and is wrong)."""
    system = messages[0]["content"] if messages[0]["role"] == "system" else ""
    user = messages[-1]["content"]
    if "even or odd" not in system:
        return user.strip()[-1]
    even = int(user.split()[0]) % 2 == 0
    return "even" if even == (RULE in system) else "odd"


def format_feedback(gold: Any, pred: Any, trace: Any, pred_name: Any, pred_trace: Any) -> Any:
    """The metric says when the answer is wrong that the format is wrong (so every predictor
    gets a format rule to decide on)."""
    right = pred.answer == gold.answer
    return dspy.Prediction(score=float(right), feedback=None if right else "wrong format")


def compiled_pipeline() -> Any:
    """The two-predictor program compiled on `overfit_model`, every proposal that passes its
    own mini-batch screen sent to the gate alone, at once."""
    optimizer = GradientText(
        lr=0.5, epochs=1, batch_size=6, proposers=[FormatRuleProposer()],
        compose=1, confirm_steps=0, min_net=1.0, submit_at_net=0.0,
    )  # fmt: skip
    tele = SkillOptimizer(
        format_feedback,
        optimizer=optimizer,
        lm=LM(ScriptedLM(overfit_model)),
        adapter=RawSkillAdapter(),
    )
    return tele.compile(Pipeline(), trainset=TRAIN, valset=VAL)


@pytest.fixture(autouse=True)
def no_global_dspy_lm():  # type: ignore[no-untyped-def]
    with dspy.context(lm=None, adapter=None):
        yield


def test_predictors_share_one_alpha() -> None:
    """Kills: one compile per predictor each starting a fresh significance budget (a program
    of k predictors could then accept a useless edit in up to k x alpha of runs).

    Two predictors, 3 planned decisions each: the program's first decision may use 2/3 of
    alpha; the second predictor's decisions share what is left, and the whole program never
    spends more than alpha."""
    compiled = compiled_pipeline()
    extract = compiled.skillopt.predictors["extract"].result.gate_log
    judge = compiled.skillopt.predictors["judge"].result.gate_log
    assert extract and judge
    assert not extract[0].accepted and extract[0].charged  # it spent part of alpha
    assert extract[0].alpha == pytest.approx(0.05 * 2 / 3)
    assert all(d.alpha is not None and d.alpha < 0.05 * 2 / 3 for d in judge)
    spent = sum(d.charged or 0.0 for d in [*extract, *judge])
    assert spent <= 0.05 + 1e-12
    assert judge[0].accepted  # the judge's real fix still passes on 16 examples (16 of 16)


def test_a_dspy_programs_plan_covers_every_predictor() -> None:
    """Kills: planning the program's significance over one predictor's decisions (3) instead
    of every predictor's (2 x 3): the second predictor's first decision would then be past the
    plan, taking an open-ended share of what is left instead of an equal share of it."""
    compiled = compiled_pipeline()
    extract = compiled.skillopt.predictors["extract"].result
    judge = compiled.skillopt.predictors["judge"].result
    assert extract.preflight.planned == judge.preflight.planned == 6
    left = 0.05 - sum(d.charged or 0.0 for d in extract.gate_log)
    assert judge.gate_log[0].alpha == pytest.approx(left / (6 - len(extract.gate_log)))


def test_the_validation_size_warning_is_logged_once_per_program(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Kills: the pre-flight warning logged by the program's plan and again by each
    predictor's run (three times for two predictors)."""
    with caplog.at_level("WARNING"):
        compiled_pipeline()
    warned = [m for m in caplog.messages if "validation examples are too few" in m]
    assert len(warned) == 1 and warned[0].startswith("program of 2 predictor(s): 16 validation")
