"""More budget is never worse on `dspy.ReAct` (issue 52, item 4): a predictor's share of the
calls pays for a decision at what a run really costs.

The world is `bench/bench_dspy_react.py`'s (two tools, a FAKE counting server, a FAKE
reflector that knows the rule), with population questions made costlier: the agent calls
`cities_in_country` three times before `lookup`, so a run costs 6 requests where a country
question costs 3. The reach probe's first training row is a country question: priced on it, the
`react` step's share (an even split from 200 calls up) was ~40 calls short of one decision, and
it spent its share without deciding.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import pytest

dspy = pytest.importorskip("dspy", reason="needs the [dspy] extra: pip install -e '.[dspy]'")

from skillopt_dsl.testing.fake_server import FakeOpenAIServer  # noqa: E402

BENCH = Path(__file__).resolve().parents[1] / "bench"


@pytest.fixture
def bench(monkeypatch: pytest.MonkeyPatch) -> Any:
    """`bench_dspy_react` with costlier population questions (see the module docstring)."""
    monkeypatch.syspath_prepend(str(BENCH))
    module = importlib.import_module("bench_dspy_react")
    plain = module.plan

    def plan(question: str) -> list[tuple[str, dict[str, str]]]:
        steps = plain(question)
        return steps[:1] * 3 + steps[1:] if module._PEOPLE_Q.search(question) else steps

    monkeypatch.setattr(module, "plan", plan)
    monkeypatch.setattr(module, "MAX_ITERS", 10)
    return module


def compiled(bench: Any, budget: int) -> Any:
    shape = bench.Shape("react", bench.react_program, bench.react_policy,
                        bench.question_rows(0, 10), bench.question_rows(10, 12), [])  # fmt: skip
    with FakeOpenAIServer(bench.FakeModel(shape.policy), latency_s=0.0) as server:
        program, _ = bench.run_ours(bench.Context(shape, budget, 4.0, 0.8), server)
        assert server.requests <= budget
    return program.skillopt


def test_a_larger_budget_never_leaves_the_react_step_without_a_decision(bench: Any) -> None:
    """Kills: a share priced at the reach probe's one cheap row (`least` at the mean rate of
    one country question, 3 calls a run): from 200 calls the even split gave `react` fewer
    calls than one decision costs at 5+ calls a run, so it decided nothing while 150 calls
    (all given to it) did; and the probe never pricing a second row (`more` always False)."""
    results = {budget: compiled(bench, budget) for budget in (150, 200, 250)}
    for budget, result in results.items():
        assert result.predictors["react"].result.gate_log, f"react decided nothing at {budget}"
    scores = [results[budget].val_score for budget in (150, 200, 250)]
    assert scores == sorted(scores) and scores[0] == 1.0
