"""Fakes and reusable test helpers shipped with the library (no real model is ever called).

`ScriptedLM` is the fake model, `FaultyBackend` injects provider faults, `FakeOpenAIServer`
serves an OpenAI-compatible endpoint locally. The contract suites, one per swappable piece,
each a class to subclass in a test module: `OptimizerContract` (`skillopt_dsl.testing.contract`,
loaded on first use), `ProposerContract` (`.proposer_contract`), `SourceContract`
(`.source_contract`), `BackendContract` (`.backend_contract`), `BenchmarkContract`
(`.benchmark_contract`), `ScreenedSearchContract` (`.search_contract`) and
`SkillModuleContract` (`.module_contract`). CONTRIBUTING.md maps each piece to its folder,
base and suite.
"""

from __future__ import annotations

from typing import Any

from skillopt_dsl.testing.fake_server import FakeOpenAIServer, echo_last_word
from skillopt_dsl.testing.faults import (
    FaultKind,
    FaultyBackend,
    InjectedRateLimit,
    InjectedServerError,
    InjectedTimeout,
)
from skillopt_dsl.testing.scripted import ScriptedLM

__all__ = [
    "FakeOpenAIServer",
    "FaultKind",
    "FaultyBackend",
    "InjectedRateLimit",
    "InjectedServerError",
    "InjectedTimeout",
    "OptimizerContract",
    "ScriptedLM",
    "echo_last_word",
]


def __getattr__(name: str) -> Any:
    if name == "OptimizerContract":
        from skillopt_dsl.testing.contract import OptimizerContract

        return OptimizerContract
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
