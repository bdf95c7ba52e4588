"""BIG-bench 2-digit addition: answer 'What is A plus B?' with the number. Runs offline by default.

Run it with `skillopt-dsl compile recipes/arithmetic_local.py`; any litellm model string replaces
the embedded target, e.g. `--model anthropic/claude-3-5-haiku-latest`. The metric is numeric
equality, and its feedback names the expected number, so worked examples are the main lever.
"""

from skillopt_dsl.benchmarks import load_benchmark
from skillopt_dsl.benchmarks.tasks import Arithmetic
from skillopt_dsl.lm import LM, SamplingParams
from skillopt_dsl.optimizers import DemonstrationsProposer, FormatRuleProposer, GradientText

module = Arithmetic()
splits = load_benchmark("arithmetic_2_digit_addition", seed=0, sizes=(24, 30, 50))
# A number needs few tokens: cap the target's output wherever it runs.
lm = LM("local/smollm2-135m", params=SamplingParams(max_tokens=16))
optimizer = GradientText(
    lr=0.3,
    epochs=2,
    batch_size=8,
    proposers=[FormatRuleProposer(), DemonstrationsProposer(per_step=2, max_demos=6)],
)
