"""Evidence across a DSPy program: one significance budget for all its predictors.

Skipped (with the reason) when the `[dspy]` extra is not installed.
"""

from __future__ import annotations

import pytest

dspy = pytest.importorskip("dspy", reason="needs the [dspy] extra: pip install -e '.[dspy]'")

from skillopt_dsl.dspy import RawSkillAdapter, SkillOptimizer  # noqa: E402
from skillopt_dsl.lm import LM  # noqa: E402
from skillopt_dsl.testing import ScriptedLM  # noqa: E402
from tests.test_dspy import Pipeline, accuracy, examples, fake_model, optimizer  # noqa: E402


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
    tele = SkillOptimizer(
        accuracy, optimizer=optimizer(), lm=LM(ScriptedLM(fake_model)), adapter=RawSkillAdapter()
    )
    compiled = tele.compile(Pipeline(), trainset=examples(0, 12), valset=examples(100, 16))
    extract = compiled.skillopt.predictors["extract"].result.gate_log
    judge = compiled.skillopt.predictors["judge"].result.gate_log
    assert extract and judge
    assert extract[0].alpha == pytest.approx(0.05 * 2 / 3)
    assert all(d.alpha is not None and d.alpha < 0.05 * 2 / 3 for d in judge)
    spent = sum(d.charged or 0.0 for d in [*extract, *judge])
    assert spent <= 0.05 + 1e-12
    assert judge[0].accepted  # the judge's real fix still passes on 16 examples (16 of 16)
