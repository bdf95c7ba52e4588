"""What a run may spend and what it spent: `Budget` (hard limits, with the arithmetic for
several searches under one budget: what is left, split into shares) and `UsageSnapshot` (a
ledger's counters, with their sum and difference).

Every coordinator of several searches under one budget uses this arithmetic and no other:
`SkillOptimizer` (a DSPy program's predictors, one after another: `Budget.share`, then
`Budget.left_after`), a Sleep night (its own work and each described folder's fixed share:
`Budget.split`; what mining left for the search: `Budget.left_after`). `HandOff` needs none: its
parts run one after another under the run's one ledger, each seeing the calls left.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from types import MappingProxyType
from typing import TypedDict

from skillopt_dsl.errors import UserInputError
from skillopt_dsl.json_types import json_float, json_int

__all__ = ["Budget", "UsageRecord", "UsageSnapshot"]


@dataclass(frozen=True)
class Budget:
    """Hard limits for a run, checked before every call. `None` means unlimited.

    `max_tokens` counts prompt plus completion tokens. Under `max_usd` every model call needs a
    known price (litellm's price table, `LM(..., price=...)`; the embedded local model costs
    0.0): a model with no known price is refused before its first call, with a message saying
    how to set one.
    """

    max_calls: int | None = None
    max_tokens: int | None = None
    max_usd: float | None = None

    def __post_init__(self) -> None:
        for name in ("max_calls", "max_tokens", "max_usd"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise UserInputError(f"Budget.{name} must be >= 0 or None, got {value!r}.")

    # -- several searches under one budget (one way, for every coordinator) ---------------------
    def left_after(self, *spent: UsageSnapshot) -> Budget:
        """What is left of this budget after the runs that spent `spent` (each limit less what
        they spent together, never below zero; an unknown price counts as 0.0)."""
        used = UsageSnapshot.total(spent)
        usd = used.cost_usd or 0.0
        return Budget(
            max_calls=None if self.max_calls is None else max(self.max_calls - used.calls, 0),
            max_tokens=None
            if self.max_tokens is None
            else max(self.max_tokens - used.total_tokens, 0),
            max_usd=None if self.max_usd is None else max(self.max_usd - usd, 0.0),
        )

    def share(self, parts: int, *, least_calls: int = 0) -> Budget:
        """The next of `parts` searches run one after another: its share of the calls, an even
        split but at least `least_calls` (one gate decision's worth) while the budget has it,
        and all of them when what would be left after `least_calls` could not pay another
        (split, neither would get a decision). A search spends the calls it is given, so an
        unsplit budget would go whole to the first; what it leaves goes on to the next
        (`left_after`). Token and dollar limits stay whole: they do not drive the search."""
        if self.max_calls is None or parts <= 1:
            return self
        calls = self.max_calls // parts
        if calls < least_calls:
            rest = self.max_calls - least_calls
            calls = self.max_calls if rest < least_calls else least_calls
        return replace(self, max_calls=calls)

    def split(self, parts: int) -> tuple[Budget, Budget]:
        """Fixed shares for `parts` runs: every limit cut in `parts` equal shares (whole calls
        and tokens, rounded down); returns the first part's (with what the rounding left) and
        each other part's."""
        if parts < 1:
            raise UserInputError(f"a budget is split into 1 or more parts, got {parts}")
        calls, first_calls = _cut(self.max_calls, parts)
        tokens, first_tokens = _cut(self.max_tokens, parts)
        usd = None if self.max_usd is None else self.max_usd / parts
        first_usd = None if self.max_usd is None else self.max_usd - (parts - 1) * (usd or 0.0)
        share = Budget(max_calls=calls, max_tokens=tokens, max_usd=usd)
        return Budget(max_calls=first_calls, max_tokens=first_tokens, max_usd=first_usd), share


def _cut(limit: int | None, parts: int) -> tuple[int | None, int | None]:
    """A whole-number limit cut in `parts`: one share (rounded down), and the first part's
    (the share and what the rounding left)."""
    if limit is None:
        return None, None
    share = limit // parts
    return share, limit - (parts - 1) * share


class UsageRecord(TypedDict):
    """`UsageSnapshot.to_dict()`: the counters as a checkpoint, summary.json and the journal
    hold them, with the derived `cost_usd` and `total_tokens`."""

    calls: int
    cache_hits: int
    prompt_tokens: int
    completion_tokens: int
    priced_cost_usd: float
    unpriced_calls: int
    errors: int
    retries: int
    estimated_usage_calls: int
    lost_calls: int
    error_types: dict[str, int]
    cost_usd: float | None
    total_tokens: int


@dataclass(frozen=True)
class UsageSnapshot:
    """An immutable copy of a ledger's counters (what a checkpoint stores).

    `lost_calls` are calls that were in flight when a process was killed (found unsettled in
    the journal on resume; error type `"lost"`) or interrupted (`KeyboardInterrupt` and the like;
    error type `"interrupted"`): they are counted in `calls` and `errors` at their reserved
    worst case (tokens and price), since the provider may have served them. A resumed run sends
    them again, so it spends `lost_calls` more than an uninterrupted one.
    """

    calls: int = 0
    cache_hits: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    priced_cost_usd: float = 0.0
    unpriced_calls: int = 0
    errors: int = 0
    retries: int = 0
    estimated_usage_calls: int = 0
    lost_calls: int = 0
    error_types: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def total_tokens(self) -> int:
        """Prompt plus completion tokens."""
        return self.prompt_tokens + self.completion_tokens

    @property
    def cost_usd(self) -> float | None:
        """Known spend in USD; `None` when every successful call so far had an unknown price."""
        priced = self.calls - self.errors - self.unpriced_calls
        if self.unpriced_calls > 0 and priced <= 0:
            return None
        return self.priced_cost_usd

    @classmethod
    def total(cls, usages: Iterable[UsageSnapshot]) -> UsageSnapshot:
        """The sum of several runs' usage (every counter, and the error types merged)."""
        usages = list(usages)
        errors: dict[str, int] = {}
        for usage in usages:
            for kind, count in usage.error_types.items():
                errors[kind] = errors.get(kind, 0) + count
        counters = {
            f.name: sum(getattr(u, f.name) for u in usages)
            for f in fields(cls)
            if f.name != "error_types"
        }
        return cls(**counters, error_types=MappingProxyType(errors))

    def minus(self, before: UsageSnapshot) -> UsageSnapshot:
        """What was spent since `before` (the counters less `before`'s; error types: none)."""
        counters = {
            f.name: getattr(self, f.name) - getattr(before, f.name)
            for f in fields(UsageSnapshot)
            if f.name != "error_types"
        }
        return UsageSnapshot(**counters)

    def to_dict(self) -> UsageRecord:
        """A JSON-ready dict (derived `cost_usd` and `total_tokens` included)."""
        return UsageRecord(
            calls=self.calls,
            cache_hits=self.cache_hits,
            prompt_tokens=self.prompt_tokens,
            completion_tokens=self.completion_tokens,
            priced_cost_usd=self.priced_cost_usd,
            unpriced_calls=self.unpriced_calls,
            errors=self.errors,
            retries=self.retries,
            estimated_usage_calls=self.estimated_usage_calls,
            lost_calls=self.lost_calls,
            error_types=dict(self.error_types),
            cost_usd=self.cost_usd,
            total_tokens=self.total_tokens,
        )

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> UsageSnapshot:
        """Rebuild a snapshot written by `to_dict`; unknown keys are an error."""
        names = {f.name for f in fields(cls)}
        unknown = set(data) - names - {"cost_usd", "total_tokens"}
        if unknown:
            raise UserInputError(
                f"Unknown usage snapshot keys {sorted(unknown)}; expected {sorted(names)}."
            )
        error_types = data.get("error_types", {})
        if not isinstance(error_types, Mapping):
            raise UserInputError(f"usage snapshot error_types should be an object: {error_types!r}")

        def count(name: str) -> int:
            return json_int(data.get(name, 0))

        return cls(
            calls=count("calls"),
            cache_hits=count("cache_hits"),
            prompt_tokens=count("prompt_tokens"),
            completion_tokens=count("completion_tokens"),
            priced_cost_usd=json_float(data.get("priced_cost_usd", 0.0)),
            unpriced_calls=count("unpriced_calls"),
            errors=count("errors"),
            retries=count("retries"),
            estimated_usage_calls=count("estimated_usage_calls"),
            lost_calls=count("lost_calls"),
            error_types=MappingProxyType({str(k): json_int(v) for k, v in error_types.items()}),
        )
