"""DSPy interop, both ways (the `[dspy]` extra: `pip install "skillopt-dsl[dspy]"`).

- `SkillOptimizer`: a DSPy teleprompter that trains a DSPy program's instructions with our
  optimizers, gated on the program's metric, under one hard budget.
- `DSPyProgram` / `PredictorModule`: a DSPy program's predictor as a `SkillModule`, so every
  optimizer, the gate, the budget and the run directory work on it unchanged.
- `bridge_lm` / `BridgeEngine`: a `dspy.LM` whose every call goes through our `LM` (cache,
  ledger, retries, budget checked before the call is sent; a stop is `BridgeBudgetExceeded`,
  a `BudgetExceeded` DSPy does not wrap); `from_dspy_lm`: a user's `dspy.LM` as our `LM`.
- `RawSkillAdapter`: the skill verbatim as the system message and tolerant parsing, for small
  local models (the embedded one included).
- `dspy_metric` / `dspy_score`: DSPy metrics (both forms, float / bool /
  `dspy.Prediction(score=, feedback=)`) as our `Score`.
- `evaluate_program`: our evaluation of any DSPy program (no swallowed exceptions).
- Proposals fit the predictor they train (`skillopt_dsl.dspy.proposals`): worked examples from
  real labels or that predictor's own traced calls, format rules in the program's adapter
  format, reflection on the predictor's own inputs and outputs.

DSPy data in our own API needs no import from here: `compile` and `load_splits` accept
`dspy.Example` lists directly (`skillopt_dsl.data.as_examples`).
"""

from __future__ import annotations

try:
    import dspy as _dspy  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        'skillopt_dsl.dspy needs DSPy: pip install "skillopt-dsl[dspy]" (dspy>=3.4.1,<3.5)'
    ) from exc

from skillopt_dsl.dspy.adapter import RawSkillAdapter
from skillopt_dsl.dspy.bridge import (
    BridgeBudgetExceeded,
    BridgeEngine,
    RunRecord,
    bridge_lm,
    from_dspy_lm,
)
from skillopt_dsl.dspy.metrics import dspy_metric, dspy_score
from skillopt_dsl.dspy.optimizer import (
    PredictorResult,
    SkillOptimizer,
    SkillOptimizerResult,
    evaluate_program,
)
from skillopt_dsl.dspy.program import (
    DSPyProgram,
    DSPyProgramError,
    PredictorModule,
    ProgramTrace,
    to_dspy_example,
)

__all__ = [
    "BridgeBudgetExceeded",
    "BridgeEngine",
    "DSPyProgram",
    "DSPyProgramError",
    "PredictorModule",
    "PredictorResult",
    "ProgramTrace",
    "RawSkillAdapter",
    "RunRecord",
    "SkillOptimizer",
    "SkillOptimizerResult",
    "bridge_lm",
    "dspy_metric",
    "dspy_score",
    "evaluate_program",
    "from_dspy_lm",
    "to_dspy_example",
]
