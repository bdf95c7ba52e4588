"""The live panel's constant answer: shown from the start, and the same as the result table's.

The README's demo (customer feedback, sizes 24/50/80) has a best constant answer, `negative`;
the panel said "none (the output has no fixed label set)" while the seed was scored, because
compile emitted its `baseline` event only after the seed's first look, and the row's default
claimed there was no label set. After a run that compared on part of validation, the panel kept
the whole set's constant score and the result table printed the test split's in its validation
row.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

import skillopt_dsl as sd
from skillopt_dsl.benchmarks import load_benchmark
from skillopt_dsl.benchmarks.customer_feedback import CustomerFeedback
from skillopt_dsl.cli.tables import print_compile
from skillopt_dsl.lm import LM
from skillopt_dsl.lm.base import Message
from skillopt_dsl.optimizers import FormatRuleProposer, GradientText
from skillopt_dsl.progress import CompileProgress
from skillopt_dsl.testing import ScriptedLM

SPLITS = load_benchmark("customer_feedback", seed=0, sizes=(24, 50, 80))


def _compile(run_dir: Path, progress: CompileProgress, lm: LM, max_calls: int) -> sd.CompileResult:
    return sd.compile(
        CustomerFeedback(),
        SPLITS.train,
        SPLITS.val,
        testset=SPLITS.test,
        lm=lm,
        optimizer=GradientText(epochs=1, proposers=[FormatRuleProposer()]),
        budget=sd.Budget(max_calls=max_calls),
        run_dir=run_dir,
        on_event=progress,
    )


def test_the_panel_shows_the_constant_answer_before_the_first_model_call(tmp_path: Path) -> None:
    """Kills: the `baseline` event emitted after the seed's first look (the panel said "none"
    while the first model calls ran), and the row's default claiming there is no label set."""
    progress = CompileProgress(Console(file=io.StringIO()), live=False)
    at_calls: list[str] = []

    def fake_target(messages: list[Message]) -> str:
        at_calls.append(dict(progress.state.rows())["constant"])
        return "positive"

    with progress:
        result = _compile(tmp_path / "run", progress, LM(ScriptedLM(fake_target)), 12)
    assert result.baseline is not None and result.baseline.label == "negative"
    assert at_calls and set(at_calls) == {"'negative': val 0.5800, test 0.4500"}


def test_the_panel_ends_with_the_result_tables_constant(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Kills: the panel keeping the whole validation set's constant score (0.5800) when the run
    compared on the 12 examples the seed was scored on (0.5833, "12 of 50"), and the result
    table printing the test split's constant (0.4500) in its "validation (12 of 50)" row."""
    progress = CompileProgress(Console(file=io.StringIO()), live=False)
    with progress:
        result = _compile(tmp_path / "run", progress, LM(ScriptedLM(lambda m: "positive")), 12)
    assert result.stop_reason == "budget" and result.val_examples < result.val_size
    assert result.baseline is not None and result.baseline.test_score is not None
    val, test = f"{result.baseline.val_score:.4f}", f"{result.baseline.test_score:.4f}"
    assert (val, test) == ("0.5833", "0.4500")
    part = f"({result.val_examples} of {result.val_size})"
    assert dict(progress.state.rows())["constant"] == f"'negative': val {val} {part}, test {test}"
    capsys.readouterr()
    print_compile(result, 1.0)
    table = capsys.readouterr().out.splitlines()
    row = next(line for line in table if line.startswith("│ validation"))
    assert row.split("│")[3].strip() == val, row


def test_a_free_text_output_says_there_is_no_constant_once_the_run_starts(tmp_path: Path) -> None:
    """Kills: the panel claiming no label set before the run has said (a dash until then), and
    never saying it for a free-text output."""
    from skillopt_dsl.progress import ProgressState

    assert dict(ProgressState().rows())["constant"] == "-"

    class Echo(sd.SkillModule):
        """Repeat the text."""

        text: str = sd.InputField()
        answer: str = sd.OutputField()
        skill = "Repeat the text."
        metric = sd.metrics.exact_match("answer")

    rows = [sd.Example(f"e{i}", {"text": f"w{i}"}, {"answer": f"w{i}"}) for i in range(12)]
    progress = CompileProgress(Console(file=io.StringIO()), live=False)
    with progress:
        sd.compile(
            Echo(),
            rows[:6],
            rows[6:],
            lm=LM(ScriptedLM(lambda m: "w")),
            optimizer=GradientText(epochs=1, proposers=[FormatRuleProposer()]),
            budget=sd.Budget(max_calls=12),
            run_dir=tmp_path / "run",
            on_event=progress,
        )
    assert dict(progress.state.rows())["constant"] == "none (the output has no fixed label set)"


def test_the_cost_row_waits_for_a_reported_cost() -> None:
    """Kills: "unknown (unpriced model)" shown for the free embedded model while its seed was
    scored, before any event had reported a cost."""
    from skillopt_dsl.progress import ProgressState

    state = ProgressState()
    assert dict(state.rows())["cost"] == "-"
    state.update("step", {"step": 0, "epoch": 0, "calls": 12, "cost_usd": 0.0})
    assert dict(state.rows())["cost"] == "$0.0000"
    state.update("step", {"step": 1, "epoch": 0, "calls": 20, "cost_usd": None})
    assert dict(state.rows())["cost"] == "unknown (unpriced model)"
