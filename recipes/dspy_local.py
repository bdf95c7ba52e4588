"""From DSPy: a two-predictor DSPy program (ChainOfThought, then Predict) on BIG-bench
`sports_understanding`, trained with the embedded SmolLM2-135M through `RawSkillAdapter`, offline.

Needs the `[dspy]` extra. `python recipes/dspy_local.py` runs `SkillOptimizer` over both
predictors (the final `decide` first, then `assess.predict`) under one budget, and prints the
validation and test figures of the student and of the compiled program. As a CLI recipe,
`skillopt-dsl compile recipes/dspy_local.py` trains the `decide` predictor alone; either way the
whole program runs on every example and every call goes through skillopt's ledger and budget.

`RawSkillAdapter` sends each predictor's instructions verbatim as the system message and parses
tolerantly; DSPy's `ChatAdapter` scaffolding defeats a 135M model. The optimizer uses the two
proposers that need no reflection model (the embedded model cannot reflect usefully).
"""

from __future__ import annotations

import logging
from typing import Any, Literal

import dspy

from skillopt_dsl.benchmarks import load_benchmark
from skillopt_dsl.dspy import DSPyProgram, RawSkillAdapter, SkillOptimizer, evaluate_program
from skillopt_dsl.lm import LM, Budget, SamplingParams
from skillopt_dsl.optimizers import DemonstrationsProposer, FormatRuleProposer, GradientText


class Assess(dspy.Signature):
    """Think about whether the sentence about sports is plausible."""

    statement: str = dspy.InputField()
    verdict: str = dspy.OutputField()


class Decide(dspy.Signature):
    """Decide whether the sentence about sports is plausible or implausible."""

    statement: str = dspy.InputField()
    assessment: str = dspy.InputField()
    answer: Literal["plausible", "implausible"] = dspy.OutputField()


class SportsProgram(dspy.Module):
    """ChainOfThought assesses the sentence; Predict decides from the assessment."""

    def __init__(self) -> None:
        super().__init__()
        self.assess = dspy.ChainOfThought(Assess)
        self.decide = dspy.Predict(Decide)

    def forward(self, statement: str) -> dspy.Prediction:
        assessment = self.assess(statement=statement).verdict or ""
        return self.decide(statement=statement, assessment=assessment)


def exact_answer(gold: Any, pred: Any, trace: Any = None) -> float:
    """1.0 when the program's answer is the gold label (a DSPy metric)."""
    return float(getattr(pred, "answer", None) == gold.answer)


splits = load_benchmark("sports_understanding", seed=0, sizes=(10, 12, 20))
# Short completions keep the CPU run to minutes; the final answer is one word.
lm = LM("local/smollm2-135m", params=SamplingParams(max_tokens=48), max_concurrency=2)
optimizer = GradientText(
    lr=0.3,
    epochs=1,
    batch_size=6,
    proposers=[FormatRuleProposer(), DemonstrationsProposer(per_step=2, max_demos=4)],
)
budget = Budget(max_calls=120)
# The CLI's module: the `decide` predictor, the whole program running on every example.
module = DSPyProgram(
    SportsProgram(), exact_answer, inputs=("statement",), adapter=RawSkillAdapter()
).module("decide")


def main() -> None:
    """Train both predictors under one budget and print the figures."""
    logging.basicConfig(level=logging.WARNING)
    student = SportsProgram()
    tele = SkillOptimizer(
        exact_answer,
        optimizer=optimizer,
        budget=budget,
        lm=lm,
        predictors=["decide", "assess.predict"],
        adapter=RawSkillAdapter(),
        threads=2,
    )
    compiled = tele.compile(student, trainset=splits.train, valset=splits.val)
    result = compiled.skillopt
    print(f"budget {budget.max_calls} calls; search made {result.usage.calls} calls")
    print(f"stop: {result.stop_reason}; untrained: {list(result.untrained) or 'none'}")
    for name, run in result.predictors.items():
        accepted = sum(d.accepted for d in run.result.gate_log)
        print(
            f"{name}: val {run.result.seed_val_score:.3f} -> {run.result.val_score:.3f} "
            f"({accepted} of {len(run.result.gate_log)} candidates accepted)"
        )
    for label, program in (("student", student), ("compiled", compiled)):
        test_lm = LM("local/smollm2-135m", params=lm.params, max_concurrency=2)
        report = evaluate_program(
            program, splits.test, exact_answer, lm=test_lm, adapter=RawSkillAdapter(), threads=2
        )
        calls = test_lm.ledger.snapshot().calls
        print(f"test ({len(splits.test)} examples) {label}: {report.mean:.3f} ({calls} calls)")
    for name, predictor in compiled.named_predictors():
        print(f"--- {name} instructions ---\n{predictor.signature.instructions}")


if __name__ == "__main__":
    main()
