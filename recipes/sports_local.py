"""BIG-bench `sports_understanding`: is a sentence about an athlete plausible? Runs offline by default.

Run it with `skillopt-dsl compile recipes/sports_local.py`; any litellm model string replaces the
embedded target, e.g. `--model openai/gpt-4o-mini`. With a capable `--optimizer-model`, add
`ReflectiveProposer()` to the proposers below so the optimizer can reflect on failures.
"""

from skillopt_dsl.benchmarks import load_benchmark
from skillopt_dsl.benchmarks.tasks import SportsUnderstanding
from skillopt_dsl.lm import LM, SamplingParams
from skillopt_dsl.optimizers import DemonstrationsProposer, FormatRuleProposer, GradientText

module = SportsUnderstanding()
splits = load_benchmark("sports_understanding", seed=0, sizes=(24, 30, 50))
# The answer is one word: cap the target's output wherever it runs.
lm = LM("local/smollm2-135m", params=SamplingParams(max_tokens=16))
optimizer = GradientText(
    lr=0.3,
    epochs=2,
    batch_size=8,
    proposers=[FormatRuleProposer(), DemonstrationsProposer(per_step=2, max_demos=6)],
)
