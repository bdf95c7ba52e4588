"""The optional keywords of `LM(model, ...)`, as one frozen record (see `LM` for each one)."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypedDict

from skillopt_dsl.lm.base import SamplingParams
from skillopt_dsl.lm.cache import ResponseCache
from skillopt_dsl.lm.openai_compat import BackendChoice
from skillopt_dsl.lm.pricing import Price
from skillopt_dsl.lm.usage import UsageLedger

__all__ = ["LMOptions", "LMSettings"]


@dataclass(frozen=True, kw_only=True)
class LMSettings:
    """Every keyword of `LM(model, ...)` with its default (see `LM` for each one)."""

    cache: ResponseCache | None = None
    ledger: UsageLedger | None = None
    params: SamplingParams = field(default_factory=SamplingParams)
    max_concurrency: int = 8
    max_retries: int = 4
    timeout_s: float | None = None
    api_base: str | None = None
    backend: BackendChoice = "auto"
    backoff_base_s: float = 0.5
    backoff_max_s: float = 30.0
    price: Price | tuple[float, float] | None = None
    sleep: Callable[[float], None] = time.sleep
    rng: random.Random | None = None


class LMOptions(TypedDict, total=False):
    """`LMSettings` as keywords: what `LM(model, **options)` accepts."""

    cache: ResponseCache | None
    ledger: UsageLedger | None
    params: SamplingParams
    max_concurrency: int
    max_retries: int
    timeout_s: float | None
    api_base: str | None
    backend: BackendChoice
    backoff_base_s: float
    backoff_max_s: float
    price: Price | tuple[float, float] | None
    sleep: Callable[[float], None]
    rng: random.Random | None
