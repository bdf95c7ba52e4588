"""End to end on the embedded SmolLM2-135M model: offline, in-process, deterministic."""

from __future__ import annotations

from pathlib import Path

import pytest

import skillopt_dsl as sd
from skillopt_dsl.benchmarks import load_benchmark
from skillopt_dsl.benchmarks.tasks import Navigate
from skillopt_dsl.lm import LM, SamplingParams
from skillopt_dsl.optimizers import DemonstrationsProposer, FormatRuleProposer, GradientText

pytestmark = pytest.mark.integration


def short_lm() -> LM:
    return LM("local/smollm2-135m", params=SamplingParams(max_tokens=12))


def test_evaluate_real_examples_with_the_embedded_model() -> None:
    splits = load_benchmark("navigate", seed=0, sizes=(4, 6, 4))
    report = sd.evaluate(Navigate(), splits.val, lm=short_lm(), threads=2, progress=False)
    assert len(report.records) == 6
    assert all(r.error is None and r.output for r in report.records)
    assert all(r.prompt_tokens > 0 and r.completion_tokens > 0 for r in report.records)
    again = sd.evaluate(Navigate(), splits.val, lm=short_lm(), threads=1, progress=False)
    assert [r.output for r in again.records] == [r.output for r in report.records], (
        "greedy decoding"
    )


def test_short_compile_with_the_embedded_model(tmp_path: Path) -> None:
    splits = load_benchmark("navigate", seed=0, sizes=(8, 10, 4))
    optimizer = GradientText(
        epochs=1,
        batch_size=8,
        slow_update=False,
        proposers=[FormatRuleProposer(), DemonstrationsProposer()],
    )
    result = sd.compile(
        Navigate(),
        splits.train,
        splits.val,
        optimizer=optimizer,
        lm=short_lm(),
        run_dir=tmp_path,
        threads=2,
    )
    assert result.val_score >= result.seed_val_score
    assert len(result.gate_log) == 1
    assert result.gate_log[0].accepted == (result.val_score > result.seed_val_score)
    assert sd.load_skill(tmp_path / "best_skill.md") == result.best_skill
    assert result.usage.calls > 0 and result.usage.cost_usd == 0.0
