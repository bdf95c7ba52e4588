"""Shared builders for tests: the synthetic parity task shipped with the contract suite, and a
recorder of the response caches a module opens.

The fake target answers right only when the skill mentions "divisible by 2" (else always
"odd"), so a skill edit is what makes the score move.
"""

from __future__ import annotations

import importlib.util
import sqlite3
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from skillopt_dsl.lm import ResponseCache
from skillopt_dsl.testing.contract import ContractParity as Parity
from skillopt_dsl.testing.contract import contract_examples as parity_examples
from skillopt_dsl.testing.contract import contract_target as parity_target

__all__ = [
    "Parity",
    "assert_closed",
    "load_bench",
    "parity_examples",
    "parity_target",
    "record_caches",
]

BENCH = Path(__file__).resolve().parent.parent / "bench"


def load_bench(name: str) -> ModuleType:
    """A script of bench/ (`name` without `.py`), loaded under a module name of its own, with
    bench/ on the path for its own imports (`_common`, `family_ablation`)."""
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    spec = importlib.util.spec_from_file_location(f"{name}_under_test", BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def record_caches(monkeypatch: pytest.MonkeyPatch, module: ModuleType) -> list[ResponseCache]:
    """Every `ResponseCache` that `module` opens from now on, in order (for tests that check
    each is closed when its owner is done)."""
    opened: list[ResponseCache] = []

    class Recorded(ResponseCache):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            opened.append(self)

    monkeypatch.setattr(module, "ResponseCache", Recorded)
    return opened


def assert_closed(cache: ResponseCache) -> None:
    """Fails unless `cache`'s database connection is closed."""
    with pytest.raises(sqlite3.ProgrammingError, match="closed"):
        len(cache)
