"""Embedded-default demo: learn the answer format of customer-feedback tags with SmolLM2-135M.

Run it with `skillopt-dsl compile recipes/feedback_local.py` (offline; about 85 s on an idle
2-core machine with the prebuilt runtime, which chooses one or two threads by measured speed).
Any litellm model string works in place of the embedded model:
`skillopt-dsl compile recipes/feedback_local.py --model openai/gpt-4o-mini`.

The task (`skillopt_dsl.benchmarks.customer_feedback`): tag a short product review `positive` or
`negative`, the tag alone. SmolLM2-135M mostly knows whether a customer is pleased, but answers
in a sentence that often names no tag; the skill carries the answer format. The best constant
answer scores about 0.5 on every split; the compile screen shows it beside the seed and the
compiled skill.

The proposers need no optimizer model (SmolLM2-135M answers reflection prompts with chat
replies that are never valid edits): output-format rules derived from the declared output type,
and worked examples chosen from the failures with their real labels. With a capable
`--optimizer-model`, add `ReflectiveProposer()`; GradientText benches a proposer that keeps
paying for model calls without reaching an accepted candidate (`bench_after`).
"""

from skillopt_dsl.benchmarks import load_benchmark
from skillopt_dsl.benchmarks.customer_feedback import CustomerFeedback
from skillopt_dsl.lm import LM, SamplingParams
from skillopt_dsl.optimizers import (
    ConsolidationProposer,
    DemonstrationsProposer,
    FormatRuleProposer,
    GradientText,
)

module = CustomerFeedback()
splits = load_benchmark("customer_feedback", seed=0, sizes=(24, 50, 80))
# The target answers in a word: cap its output where the model runs.
lm = LM("local/smollm2-135m", params=SamplingParams(max_tokens=16))
optimizer = GradientText(
    lr=0.3,
    epochs=2,
    batch_size=8,
    proposers=[FormatRuleProposer(), DemonstrationsProposer(per_step=2, max_demos=6)],
    consolidation=ConsolidationProposer(use_model=False),
)
