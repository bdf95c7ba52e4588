"""Model prices: what a call may cost at most, known before it is sent.

A `Price` is per token (input and output) plus an optional flat per-call fee. `table_price`
reads litellm's price table (the map bundled with the pinned litellm, or what
`litellm.register_model` added); where a model has tiered prices (`..._above_128k_tokens`) the
highest tier is taken, so a reservation is an upper bound. `LM(..., price=...)` overrides it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass

from skillopt_dsl.errors import UserInputError

__all__ = ["Price", "as_price", "table_price"]

LOCAL_PREFIX = "local/"


@dataclass(frozen=True)
class Price:
    """USD per prompt token, per completion token, and per call (all >= 0).

    >>> round(Price(1e-6, 2e-6).cost(prompt_tokens=100, completion_tokens=10), 8)
    0.00012
    """

    input_per_token: float
    output_per_token: float
    per_call: float = 0.0

    def __post_init__(self) -> None:
        for name in ("input_per_token", "output_per_token", "per_call"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
                raise UserInputError(f"Price.{name} must be a finite number >= 0, got {value!r}.")

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        """The price of a call that used these tokens."""
        return (
            self.per_call
            + prompt_tokens * self.input_per_token
            + completion_tokens * self.output_per_token
        )


FREE = Price(0.0, 0.0)
"""The embedded local models' price."""


def as_price(value: Price | tuple[float, float] | None) -> Price | None:
    """`Price` from a `(input_per_token, output_per_token)` pair; a `Price` or None unchanged."""
    if value is None or isinstance(value, Price):
        return value
    if isinstance(value, tuple) and len(value) == 2:
        return Price(float(value[0]), float(value[1]))
    raise UserInputError(
        f"price must be a Price or an (input_per_token, output_per_token) pair in USD, got {value!r}."
    )


def table_price(model: str) -> Price | None:
    """The model's price from litellm's price table, or None when litellm has none."""
    if model.startswith(LOCAL_PREFIX):
        return FREE
    from skillopt_dsl.lm._litellm import litellm

    try:
        info: Mapping[str, object] = litellm.get_model_info(model)
    except Exception:  # litellm raises ModelNotMappedError, or a bare Exception for odd names
        return None
    prompt, completion = (
        _highest(info, "input_cost_per_token"),
        _highest(info, "output_cost_per_token"),
    )
    if prompt is None or completion is None:
        return None
    return Price(prompt, completion)


def _highest(info: Mapping[str, object], base: str) -> float | None:
    """The base price or its highest long-prompt tier (`base_above_200k_tokens`).

    Opt-in service tiers (`_priority`, `_flex`, `_batches`) are not what a plain call pays.
    """
    tier = re.compile(rf"{base}(_above_\d+k_tokens)?")
    values = [
        float(v)
        for k, v in info.items()
        if tier.fullmatch(k) and isinstance(v, int | float) and not isinstance(v, bool)
    ]
    return max(values) if values else None


def unknown_price_message(model: str) -> str:
    """What to do when a dollar budget meets a model with no known price."""
    return (
        f"Budget.max_usd is set but {model!r} has no known price, so the dollar budget cannot "
        "bound its calls; nothing was sent. Give the price per token, e.g. "
        f"LM({model!r}, price=(input_usd_per_token, output_usd_per_token)), or register it with "
        f'litellm.register_model({{"{model}": {{"input_cost_per_token": ..., '
        '"output_cost_per_token": ..., "litellm_provider": "openai", "mode": "chat"}}), '
        "or drop max_usd and bound the run with Budget(max_calls=...) or max_tokens."
    )
