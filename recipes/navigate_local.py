"""Embedded-default demo: compile a skill for BIG-bench `navigate` with SmolLM2-135M, offline.

Run it with `skillopt-dsl compile recipes/navigate_local.py`. Any litellm model string works in
place of the embedded model: `skillopt-dsl compile recipes/navigate_local.py --model openai/gpt-4o-mini`.

SmolLM2-135M is too weak to reflect on its own mistakes (as an optimizer model it answers "The
model FAILED." instead of edits), so this recipe uses the two proposers that need no optimizer
model: output-format rules derived from the declared output type, and worked examples taken from
the training set. With a capable `--optimizer-model`, add `ReflectiveProposer()`.

What the gain is worth: answering "True" to every question scores 0.53 on this recipe's
validation split and 0.60 on its test split, and SmolLM2-135M does not beat that. Its gain over
the seed comes from emitting a valid True/False label, not from solving the task; the compile
screen shows the constant answer beside it and prints a WARNING line. Use `--model` with a
capable model to see a gain that beats the constant answer.
"""

from skillopt_dsl.benchmarks import load_benchmark
from skillopt_dsl.benchmarks.tasks import Navigate
from skillopt_dsl.lm import LM, SamplingParams
from skillopt_dsl.optimizers import (
    ConsolidationProposer,
    DemonstrationsProposer,
    FormatRuleProposer,
    GradientText,
)

module = Navigate()
splits = load_benchmark("navigate", seed=0, sizes=(24, 30, 50))
# The target answers in a word: cap its output where the model runs.
lm = LM("local/smollm2-135m", params=SamplingParams(max_tokens=16))
optimizer = GradientText(
    lr=0.3,
    epochs=2,
    batch_size=8,
    proposers=[FormatRuleProposer(), DemonstrationsProposer(per_step=2, max_demos=6)],
    consolidation=ConsolidationProposer(use_model=False),
)
