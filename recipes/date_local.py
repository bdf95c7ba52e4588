"""BIG-bench `date_understanding`: infer a date and pick the MM/DD/YYYY option. Runs offline by default.

Run it with `skillopt-dsl compile recipes/date_local.py`; any litellm model string replaces the
embedded target, e.g. `--model ollama/llama3.1`. The metric accepts only one of the listed
choices, so output-format rules and worked examples are the proposers used here.
"""

from skillopt_dsl.benchmarks import load_benchmark
from skillopt_dsl.benchmarks.tasks import DateUnderstanding
from skillopt_dsl.lm import LM, SamplingParams
from skillopt_dsl.optimizers import DemonstrationsProposer, FormatRuleProposer, GradientText

module = DateUnderstanding()
splits = load_benchmark("date_understanding", seed=0, sizes=(24, 30, 50))
# A date is about ten tokens: cap the target's output wherever it runs.
lm = LM("local/smollm2-135m", params=SamplingParams(max_tokens=24))
optimizer = GradientText(
    lr=0.3,
    epochs=2,
    batch_size=8,
    proposers=[FormatRuleProposer(), DemonstrationsProposer(per_step=2, max_demos=6)],
)
