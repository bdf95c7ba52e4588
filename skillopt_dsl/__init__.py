"""skillopt-dsl: train the markdown skill documents that frozen LLM agents read.

Declare a typed `SkillModule` with a metric, load `Splits`, and call `compile(...)`: an optimizer
proposes edits to the skill under a textual learning rate, and a strict validation `Gate` accepts
a change only when it improves the score. Export the result with `CompileResult.export`.
"""

from __future__ import annotations

from skillopt_dsl import metrics, optimizers
from skillopt_dsl.compile import Baseline, CompileResult, compile
from skillopt_dsl.data import Splits, load_splits
from skillopt_dsl.errors import (
    BudgetExceeded,
    DataError,
    MetricError,
    ModelError,
    RunDirError,
    SkillOptError,
    TooManyErrors,
    UserInputError,
)
from skillopt_dsl.evaluate import EvaluationReport, Rollout, evaluate
from skillopt_dsl.export import export_agent_skill, export_skill, load_skill
from skillopt_dsl.gate import Gate, GateDecision, Guard
from skillopt_dsl.lm import LM, Budget
from skillopt_dsl.metrics import Score
from skillopt_dsl.module import InputField, OutputField, RunOutcome, SkillModule
from skillopt_dsl.skill import Add, ApplyReport, Delete, Replace, Skill
from skillopt_dsl.types import Example, Prediction

__version__ = "0.1.0"

__all__ = [
    "LM",
    "Add",
    "ApplyReport",
    "Baseline",
    "Budget",
    "BudgetExceeded",
    "CompileResult",
    "DataError",
    "Delete",
    "EvaluationReport",
    "Example",
    "Gate",
    "GateDecision",
    "Guard",
    "InputField",
    "MetricError",
    "ModelError",
    "OutputField",
    "Prediction",
    "Replace",
    "Rollout",
    "RunDirError",
    "RunOutcome",
    "Score",
    "Skill",
    "SkillModule",
    "SkillOptError",
    "Splits",
    "TooManyErrors",
    "UserInputError",
    "__version__",
    "compile",
    "evaluate",
    "export_agent_skill",
    "export_skill",
    "load_skill",
    "load_splits",
    "metrics",
    "optimizers",
]
