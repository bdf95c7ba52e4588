"""The settings of a compile, built once from `compile(...)`'s keywords and passed down.

`compile(...)` keeps its keyword front door; it packs its keywords into one frozen
`CompileSettings`, and everything below it (the driver, a sweep's trial runs, the DSPy
optimizer, Sleep, the CLI) reads that object instead of taking the same dozen parameters
again. Defaults live here only (`DEFAULT_THREADS`, the one default of `threads`, is
`skillopt_dsl.evaluate`'s, re-exported here).

`RunModels` is the other half a run needs: the target and reflection models, resolved once,
sharing one ledger (the search budget) and the run's response cache.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from skillopt_dsl.evaluate import DEFAULT_THREADS
from skillopt_dsl.lm import LM, Backend, Budget, ResponseCache, UsageLedger, resolve_lm
from skillopt_dsl.search_memory import RejectedCandidate
from skillopt_dsl.types import Example

if TYPE_CHECKING:
    from skillopt_dsl.evidence import SignificanceBudget
    from skillopt_dsl.gate import Gate

__all__ = ["DEFAULT_THREADS", "CompileSettings", "EventListener", "ModelSpec", "RunModels"]


ModelSpec = str | Backend | LM | None
"""A model as a caller may name it: a model string, a backend, an `LM`, or None (the default)."""

EventListener = Callable[[str, Mapping[str, object]], None]
"""Called with every run event: its kind and its fields (`skillopt_dsl.events`)."""


@dataclass(frozen=True, kw_only=True)
class CompileSettings:
    """Every keyword of `compile(...)` but the optimizer, with its default (see `compile` for
    each one). The optimizer is a plug-in object, passed beside the settings
    (`compile_with(module, trainset, valset, settings, optimizer)`); the driver reads the
    settings and never the optimizer."""

    lm: ModelSpec = None
    optimizer_lm: ModelSpec = None
    gate: Gate | None = None
    budget: Budget | None = None
    run_dir: str | Path | None = None
    resume: bool = False
    testset: Sequence[Example] | None = None
    test_budget: Budget | None = None
    seed: int = 0
    threads: int = DEFAULT_THREADS
    max_errors: int | None = None
    on_event: EventListener | None = None
    significance: SignificanceBudget | None = None
    shared_cache: ResponseCache | None = None
    remembered: tuple[RejectedCandidate, ...] = ()
    """Proposals rejected in earlier runs (a Sleep night's earlier nights): they seed the run's
    search memory (`SearchMemory.remembered`), so the proposers are told about them and never
    propose their edits again."""


@dataclass(frozen=True)
class RunModels:
    """The target and reflection models of a run, sharing one ledger (the search budget) and
    the run's response cache."""

    target: LM
    reflector: LM
    ledger: UsageLedger
    cache: ResponseCache

    @classmethod
    def resolve(cls, settings: CompileSettings, cache_path: Path | None) -> RunModels:
        """Resolve `settings.lm` and `settings.optimizer_lm` under one ledger of
        `settings.budget`, answering from (and filling) the response cache at `cache_path`
        and `settings.shared_cache`."""
        ledger = UsageLedger(settings.budget)
        cache = ResponseCache(cache_path, shared=settings.shared_cache)
        return cls(
            target=resolve_lm(settings.lm, cache=cache, ledger=ledger),
            reflector=resolve_lm(settings.optimizer_lm, cache=cache, ledger=ledger),
            ledger=ledger,
            cache=cache,
        )
