"""The command line's flags: declared once in `skillopt_dsl.flags` (shared with Sleep's
commands); re-exported here for the CLI's modules and older imports."""

from __future__ import annotations

from skillopt_dsl.flags import (
    ApiBaseOpt,
    CompileFlags,
    DebugOpt,
    ExportFormat,
    MaxCallsOpt,
    MaxErrorsOpt,
    MaxUsdOpt,
    ModelOpt,
    OptimizerApiBaseOpt,
    OptimizerChoice,
    OptimizerModelOpt,
    RecipeArg,
    RecipeOpt,
    SeedOpt,
    SplitChoice,
    ThreadsOpt,
)

__all__ = [
    "ApiBaseOpt",
    "CompileFlags",
    "DebugOpt",
    "ExportFormat",
    "MaxCallsOpt",
    "MaxErrorsOpt",
    "MaxUsdOpt",
    "ModelOpt",
    "OptimizerApiBaseOpt",
    "OptimizerChoice",
    "OptimizerModelOpt",
    "RecipeArg",
    "RecipeOpt",
    "SeedOpt",
    "SplitChoice",
    "ThreadsOpt",
]
