"""Guards on the constant answer and the test set (issue 20's audit): the constant answer's
TEST score is what `eval` and the report show on the test row, and a resumed finished run
charges none of its test calls to the search budget.

Every earlier fixture was label-balanced, so the constant answer scored the same on
validation and test and no test could tell the two apart. Here validation is odd-heavy and
test even-heavy: the constant answer "odd" scores 0.7 on validation and 0.2 on test. Models are
`ScriptedLM` fakes (`contract_target` answers "odd" unless the skill says "divisible by 2").
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

import skillopt_dsl as sd
from skillopt_dsl import cli
from skillopt_dsl.baselines import constant_baseline
from skillopt_dsl.optimizers import GradientText, ReflectiveProposer
from skillopt_dsl.report import load_run, score_rows, scores_markdown
from skillopt_dsl.testing import ScriptedLM
from skillopt_dsl.testing.contract import (
    ContractParity,
    contract_examples,
    contract_reflector,
    contract_target,
)
from skillopt_dsl.types import Example

VAL_NUMBERS = (101, 103, 105, 107, 109, 111, 113, 100, 102, 104)  # 7 odd, 3 even
TEST_NUMBERS = (201, 203, 200, 202, 204, 206, 208, 210, 212, 214)  # 2 odd, 8 even


def picked(numbers: tuple[int, ...]) -> list[Example]:
    return [example for n in numbers for example in contract_examples(n, 1)]


TRAIN = contract_examples(0, 16)
VAL, TEST = picked(VAL_NUMBERS), picked(TEST_NUMBERS)


def test_the_fixture_is_label_unbalanced() -> None:
    """The premise of this file: the constant answer scores differently on val and test."""
    assert constant_baseline(ContractParity(), VAL, TEST) == sd.Baseline("odd", 0.7, 0.2)


def compile_run(run_dir: Path, *, resume: bool = False) -> sd.CompileResult:
    return sd.compile(
        ContractParity(),
        TRAIN,
        VAL,
        testset=TEST,
        optimizer=GradientText(
            proposers=[ReflectiveProposer(read_successes=False)], epochs=1, batch_size=8
        ),
        lm=ScriptedLM(contract_target),
        optimizer_lm=contract_reflector(),
        run_dir=run_dir,
        resume=resume,
        threads=1,
    )


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, sd.CompileResult]:
    run_dir = tmp_path_factory.mktemp("unbalanced") / "run"
    return run_dir, compile_run(run_dir)


def test_the_report_test_row_shows_the_constant_answers_test_score(
    finished_run: tuple[Path, sd.CompileResult],
) -> None:
    """Kills: the report's test row showing the constant answer's validation score."""
    run_dir, _ = finished_run
    record = load_run(run_dir)
    validation, test = score_rows(record)
    assert (validation.split, validation.constant) == ("validation", 0.7)
    assert (test.split, test.constant) == ("test", 0.2)
    markdown = scores_markdown(record)
    test_line = next(line for line in markdown.splitlines() if line.startswith("| test |"))
    assert "| 0.2000 |" in test_line and "0.7000" not in test_line, test_line


@pytest.mark.parametrize("journal", [True, False], ids=["journal", "older-run-without-journal"])
def test_a_resumed_finished_run_charges_no_test_calls_to_the_search_budget(
    finished_run: tuple[Path, sd.CompileResult], tmp_path: Path, journal: bool
) -> None:
    """Kills: the checkpoint after test scoring dropped. A run directory without a usage
    journal (`ledger.jsonl`, as an older run left it) is resumed from the checkpoint's cache
    mark: without that checkpoint the resume finds the test calls in the run's cache after the
    mark and charges them to the search budget. With the journal, the replay must not count
    them either."""
    run_dir, first = finished_run
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    if not journal:
        (copy / "ledger.jsonl").unlink()
    assert first.test_usage is not None and first.test_usage.calls > 0
    resumed = compile_run(copy, resume=True)
    assert resumed.usage.calls == first.usage.calls, (resumed.usage, first.usage)
    assert resumed.test_score == first.test_score


RECIPE = f'''"""Label-unbalanced parity with scripted fakes (tests only)."""
import skillopt_dsl as sd
from skillopt_dsl.lm import LM
from skillopt_dsl.testing import ScriptedLM
from skillopt_dsl.testing.contract import ContractParity, contract_examples, contract_target


def _picked(numbers):
    return [e for n in numbers for e in contract_examples(n, 1)]


module = ContractParity()
splits = sd.Splits(
    train=contract_examples(0, 16), val=_picked({VAL_NUMBERS!r}), test=_picked({TEST_NUMBERS!r})
)
lm = LM(ScriptedLM(contract_target))
'''


def cells(output: str, split: str) -> list[str]:
    """The cells of the scores table row for `split` in `eval`'s output."""
    row = next(line for line in output.splitlines() if f"│ {split}" in line)
    return [cell.strip() for cell in row.strip("│ ").split("│")]


def test_eval_shows_the_constant_answers_test_score_on_the_test_split(tmp_path: Path) -> None:
    """Kills: `eval` showing (and warning against) the constant answer's validation score on
    the test split. Columns: split, seed, constant 'odd', skill, vs seed, vs constant."""
    recipe = tmp_path / "unbalanced.py"
    recipe.write_text(RECIPE, encoding="utf-8")
    good, seed = tmp_path / "good.md", tmp_path / "seed.md"
    good.write_text("A number divisible by 2 is even.", encoding="utf-8")
    seed.write_text("Answer with one word.", encoding="utf-8")
    runner = CliRunner()
    beats = runner.invoke(cli.app, ["eval", str(good), "--recipe", str(recipe), "--split", "test"])
    assert beats.exit_code == 0, beats.output
    assert cells(beats.stdout, "test") == [
        "test",
        "0.2000",
        "0.2000",
        "1.0000",
        "+0.8000",
        "+0.8000",
    ]
    ties = runner.invoke(cli.app, ["eval", str(seed), "--recipe", str(recipe), "--split", "test"])
    assert ties.exit_code == 0, ties.output
    assert "constant answer 'odd' on test: 0.2000 vs 0.2000" in ties.stdout
    on_val = runner.invoke(cli.app, ["eval", str(good), "--recipe", str(recipe), "--split", "val"])
    assert on_val.exit_code == 0, on_val.output
    assert cells(on_val.stdout, "validation")[2] == "0.7000"
