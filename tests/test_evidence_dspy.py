"""Evidence across a DSPy program: one significance budget for all its predictors.

Skipped (with the reason) when the `[dspy]` extra is not installed.
"""

from __future__ import annotations

import pytest

dspy = pytest.importorskip("dspy", reason="needs the [dspy] extra: pip install -e '.[dspy]'")

from skillopt_dsl.dspy import RawSkillAdapter, SkillOptimizer  # noqa: E402
from skillopt_dsl.lm import LM  # noqa: E402
from skillopt_dsl.optimizers import FormatRuleProposer, GradientText  # noqa: E402
from skillopt_dsl.testing import ScriptedLM  # noqa: E402
from tests.test_dspy import RULE, Pipeline, accuracy, examples  # noqa: E402

TRAIN, VAL = examples(0, 12), examples(100, 16)
TRAIN_NUMBERS = frozenset(e.number for e in TRAIN)
EXTRACT_RULE = "last_digit only"
"""In the format rule FormatRuleProposer derives for `extract`."""


def overfit_model(messages: list[dict[str, str]]) -> str:
    """The FAKE target: `extract` answers the last digit, and with its format rule it adds a
    "!" on the *training* numbers only; `judge` answers right when its system message holds
    the format rule or its hint carries the "!", else "unsure" (which does not parse). So
    extract's rule passes the screen on training data and gains nothing on validation: its
    gate decision is a rejection that spends significance before the judge's turn."""
    system = messages[0]["content"] if messages[0]["role"] == "system" else ""
    user = messages[-1]["content"].strip()
    if "even or odd" not in system:
        number = user.split()[-1]
        return (
            f"{number[-1]} !" if EXTRACT_RULE in system and number in TRAIN_NUMBERS else number[-1]
        )
    digit = user.split()[0]
    if RULE in system or "!" in user:
        return "even" if int(digit) % 2 == 0 else "odd"
    return "unsure"


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
    # Every proposal that passes its own mini-batch screen goes to the gate alone, at once.
    optimizer = GradientText(
        lr=0.5, epochs=1, batch_size=6, proposers=[FormatRuleProposer()],
        compose=1, confirm_steps=0, min_net=1.0, submit_at_net=0.0,
    )  # fmt: skip
    tele = SkillOptimizer(
        accuracy, optimizer=optimizer, lm=LM(ScriptedLM(overfit_model)), adapter=RawSkillAdapter()
    )
    compiled = tele.compile(Pipeline(), trainset=TRAIN, valset=VAL)
    extract = compiled.skillopt.predictors["extract"].result.gate_log
    judge = compiled.skillopt.predictors["judge"].result.gate_log
    assert extract and judge
    assert not extract[0].accepted and extract[0].charged  # it spent part of alpha
    assert extract[0].alpha == pytest.approx(0.05 * 2 / 3)
    assert all(d.alpha is not None and d.alpha < 0.05 * 2 / 3 for d in judge)
    spent = sum(d.charged or 0.0 for d in [*extract, *judge])
    assert spent <= 0.05 + 1e-12
    assert judge[0].accepted  # the judge's real fix still passes on 16 examples (16 of 16)
