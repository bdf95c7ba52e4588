"""How much evidence a gate decision needs, and how a run's significance is spent.

A run (or everything that shares one `SignificanceBudget`: the predictors of a DSPy program,
the candidates of a Sleep night) may accept a useless edit with probability at most `alpha`.
Every gate decision draws a *level* from the budget before it sees the candidate's scores, and
is *charged* afterwards:

- an **accepted** decision is charged nothing: its level passes on to later decisions (the
  fallback procedure of multiple testing: a correct acceptance spends no error budget);
- a decision **stopped early** for futility is charged its whole level (its unseen examples are
  never scored, so the conditional size of its test is unknown; the level bounds it);
- any other decision is charged the **attained size** of its test: the probability, given the
  magnitudes of its paired differences, that a useless edit reaches the critical value. A
  discrete test (the sign test on 0/1 scores) usually attains less than its level, and the rest
  stays in the budget.

The level of the next decision is computed from what is left (`SignificanceBudget.level`): with
a plan of K decisions the first may use `first_share` of the budget and each later one an equal
part of what remains over the decisions still planned; past the plan, or with no plan, the
shares follow 6/(π²k²), which never runs out. Why the run-level bound holds is argued in
docs/concepts.md ("Evidence").

`preflight(gate, n_val, planned)` says, before anything is spent, what the first decision can
certify at a validation size: the net wins a clean fix needs and the gain that has an even
chance to pass.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Protocol, TypedDict, cast

from skillopt_dsl.errors import UserInputError

__all__ = [
    "GateLevels",
    "Preflight",
    "SignificanceBudget",
    "any_result_passes",
    "binomial_upper_tail",
    "look_sizes",
    "preflight",
    "sign_test_critical",
    "within_level",
]

_TOLERANCE = 1e-12
"""Below this, significance left is spent (what float sums of shares leave over); charges may
exceed their level by this much."""
_RELATIVE = 1e-9
"""A p-value passes a level it exceeds by at most this share of the level (float rounding in a
level's shares): relative, so that a level of zero passes nothing (an absolute tolerance let a
clean fix of 40 or more examples, p = 2^-40, pass a spent budget's level of 0)."""


class BudgetState(TypedDict):
    """`SignificanceBudget.to_dict()`: the budget's state as a checkpoint stores it."""

    alpha: float
    first_share: float
    planned: int | None
    spent: float
    decisions: int


class PreflightRecord(TypedDict):
    """`Preflight.to_dict()`: every field, as the `preflight` event and summary.json hold it."""

    n_val: int
    planned: int | None
    alpha: float
    first_level: float | None
    clean_fix: int | None
    even_chance_gain: float | None
    warning: str | None


@dataclass
class SignificanceBudget:
    """The significance `alpha` that a run's gate decisions spend (module docstring).

    Share one instance between runs to bound them together (`compile(..., significance=)`):
    each run adds its planned decisions with `plan`, every decision takes `level()` and is
    charged with `charge`. Its state is checkpointed with the run.

    >>> budget = SignificanceBudget(alpha=0.05, first_share=0.5)
    >>> budget.plan(3)
    >>> budget.level()  # the first of 3 planned decisions: half the budget
    0.025
    >>> budget.charge(level=0.025, charged=0.01)
    >>> round(budget.level(), 4)  # 0.04 left over 2 planned decisions
    0.02
    """

    alpha: float = 0.05
    first_share: float = 2 / 3
    planned: int | None = 0
    spent: float = 0.0
    decisions: int = 0

    def __post_init__(self) -> None:
        if not 0 < self.alpha < 1:
            raise UserInputError(f"alpha must be in (0, 1), got {self.alpha}")
        if not 0 < self.first_share <= 1:
            raise UserInputError(f"first_share must be in (0, 1], got {self.first_share}")

    @property
    def remaining(self) -> float:
        """The significance not yet spent."""
        left = self.alpha - self.spent
        return left if left > _TOLERANCE else 0.0

    def plan(self, decisions: int | None) -> None:
        """Add the decisions a run plans to make (None: unknown, so the plan becomes unknown)."""
        if decisions is not None and decisions < 0:
            raise UserInputError(f"a plan needs decisions >= 0, got {decisions}")
        if decisions is None or self.planned is None:
            self.planned = None
        else:
            self.planned += decisions

    def replan(self, decisions: int) -> None:
        """Plan `decisions` more decisions from here on, in place of what was planned and not
        yet made: a run whose search changes (`HandOff` handing the run to Bundle) plans the
        decisions the new search will ask for. Only for a budget one run owns (a shared
        budget's plan is its owner's). Levels still depend only on past decisions and the
        plan, and never exceed what is left, so the bound of `alpha` holds.

        >>> budget = SignificanceBudget(alpha=0.05)
        >>> budget.plan(6)
        >>> round(budget.level(), 4)  # the first of 6 planned decisions: two thirds
        0.0333
        >>> budget.replan(1)  # none made yet; one more: it may use the whole budget
        >>> budget.level()
        0.05
        """
        if decisions < 0:
            raise UserInputError(f"a plan needs decisions >= 0, got {decisions}")
        self.planned = self.decisions + decisions

    def level(self) -> float:
        """The significance the next decision may use (it depends only on past decisions)."""
        k = self.decisions  # 0-based index of the next decision
        if self.planned is not None and k < self.planned:
            if k == 0 and self.planned > 1:
                return self.remaining * self.first_share
            return self.remaining / (self.planned - k)
        beyond = k + 1 if self.planned is None else k - self.planned + 1
        return self.remaining * _series_share(beyond)

    def split(self, level: float, early_share: float) -> tuple[float, float]:
        """(whole-set level, early level) for a decision drawn at `level` whose interim looks
        may accept: the early level is `early_share` x `level`, paid first from what the budget
        has not given this decision and only the rest from `level` itself, so the two together
        never exceed what is left.

        >>> budget = SignificanceBudget(alpha=0.05, first_share=0.5)
        >>> budget.plan(3)
        >>> budget.split(budget.level(), 0.25)  # room left: the whole-set level is kept
        (0.025, 0.00625)
        >>> SignificanceBudget(alpha=0.04, planned=1).split(0.04, 0.25)  # none: it pays
        (0.03, 0.01)
        """
        if not 0 <= early_share < 1:
            raise UserInputError(f"early_share must be in [0, 1), got {early_share}")
        early = early_share * level
        room = max(self.remaining - level, 0.0)
        return level - max(early - room, 0.0), early

    def charge(self, *, level: float, charged: float | None) -> None:
        """Record a decision made at `level` that spent `charged` (None: the whole level)."""
        spent = level if charged is None else charged
        if spent < -_TOLERANCE or spent > level + _TOLERANCE:
            raise ValueError(f"a decision may spend between 0 and its level {level}, got {spent}")
        self.spent = min(self.alpha, self.spent + max(spent, 0.0))
        self.decisions += 1

    def to_dict(self) -> BudgetState:
        """A JSON-ready dict of the budget's state."""
        return BudgetState(
            alpha=self.alpha,
            first_share=self.first_share,
            planned=self.planned,
            spent=self.spent,
            decisions=self.decisions,
        )

    def restore(self, data: BudgetState) -> None:
        """Load the state written by `to_dict` (a resumed run continues where it stopped)."""
        self.alpha = float(data["alpha"])
        self.first_share = float(data["first_share"])
        self.planned = None if data["planned"] is None else int(data["planned"])
        self.spent = float(data["spent"])
        self.decisions = int(data["decisions"])


def _series_share(j: int) -> float:
    """The share of what is left that the j-th decision (1-based) of an open-ended run takes:
    (1/j²) / Σ_{i≥j} 1/i², so that with nothing recycled decision j gets α·6/(π²j²)."""
    tail = math.pi**2 / 6 - sum(1.0 / (i * i) for i in range(1, j))
    return min(1.0, (1.0 / (j * j)) / max(tail, 1.0 / j))


# -- the sign test's critical values -----------------------------------------------------------


@lru_cache(maxsize=4096)
def _binomial_tails(n: int) -> tuple[float, ...]:
    """P(Binomial(n, 1/2) >= w) for w = 0..n+1."""
    counts = [math.comb(n, i) for i in range(n + 1)]
    tails = [0.0] * (n + 2)
    running = 0
    for w in range(n, -1, -1):
        running += counts[w]
        tails[w] = running / 2**n
    return tuple(tails)


def binomial_upper_tail(wins: int, n: int) -> float:
    """P(Binomial(n, 1/2) >= wins), exact (integer sums, one rounding): the sign test's p-value."""
    return _binomial_tails(n)[max(wins, 0)] if wins <= n else 0.0


def within_level(p_value: float, level: float) -> bool:
    """Whether `p_value` passes `level` (equal passes, up to float rounding; a level of zero
    passes nothing)."""
    return p_value <= level * (1.0 + _RELATIVE)


def sign_test_critical(n: int, level: float) -> tuple[int, float]:
    """The fewest wins out of `n` discordant pairs that the one-sided sign test accepts at
    `level`, and the test's attained size (0.0 when no count of wins is enough).

    >>> sign_test_critical(12, 0.05)  # 10 of 12 (p = 0.0193); 9 of 12 would be p = 0.073
    (10, 0.019287109375)
    """
    tails = _binomial_tails(n)
    for wins in range(n + 1):
        if wins > n / 2 and within_level(tails[wins], level):
            return wins, tails[wins]
    return n + 1, 0.0


# -- pre-flight power --------------------------------------------------------------------------

BACKGROUND_CHANGE = 0.2
"""The share of validation answers a reworded skill changes by chance (half for the better,
half for the worse) that `preflight` assumes; the noise protocol of bench/bench_gate_noise.py."""


@dataclass(frozen=True)
class Preflight:
    """What a gate can certify at a validation size, before anything is spent.

    `first_level` is the significance of the run's first decision; `clean_fix` the fewest
    validation answers a candidate must fix, breaking none, to pass it (None: no number is
    enough); `even_chance_gain` the gain in mean accuracy that passes it about half the time
    when rewording also changes `BACKGROUND_CHANGE` of the answers at random (None: none up to
    +1.0); `warning` says when the set is too small to certify a useful gain, and what to do.
    """

    n_val: int
    planned: int | None
    alpha: float
    first_level: float | None
    clean_fix: int | None
    even_chance_gain: float | None
    warning: str | None

    def summary(self) -> str:
        """One line for a screen or a log."""
        if self.first_level is None:
            return (
                f"gate: mean only on {self.n_val} validation examples (no significance test: "
                "a useless edit can pass)"
            )
        plan = "an open-ended run" if self.planned is None else f"{self.planned} planned decisions"
        fix = (
            "no clean fix is enough"
            if self.clean_fix is None
            else f"a clean fix of {self.clean_fix} answers ({self.clean_fix / self.n_val:+.2f})"
        )
        gain = (
            "no gain up to +1.00"
            if self.even_chance_gain is None
            else f"a gain of {self.even_chance_gain:+.2f}"
        )
        return (
            f"gate: {self.n_val} validation examples, alpha {self.alpha:g} over {plan}; "
            f"the first decision (alpha {self.first_level:.4g}) needs {fix}; "
            f"{gain} passes it about half the time"
        )

    def statement(self) -> str:
        """The summary, with the warning appended when there is one (reports, a night)."""
        if self.warning is None:
            return self.summary()
        return f"{self.summary()}. WARNING: {self.warning}"

    def log(self, log: logging.Logger, subject: str) -> None:
        """Log the summary (info) and the warning (warning) for `subject`."""
        log.info("%s: %s", subject, self.summary())
        if self.warning is not None:
            log.warning("%s: %s", subject, self.warning)

    def to_dict(self) -> PreflightRecord:
        """A JSON-ready dict of every field."""
        return cast(PreflightRecord, asdict(self))

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> Preflight:
        """Rebuild a pre-flight written by `to_dict` (an event, summary.json); a missing or
        unknown key raises `TypeError`, as the constructor does."""
        return cls(**cast(PreflightRecord, data))


class GateLevels(Protocol):
    """What `preflight` reads of a gate (`skillopt_dsl.Gate` has it): its test (None: the
    mean-only gate, which tests nothing), its run-level `alpha`, the share of alpha the first
    planned decision may use, the share of a level its interim looks may spend on early
    acceptance, and its looks. Evidence sits below the gate and never imports it."""

    @property
    def test(self) -> str | None: ...

    @property
    def alpha(self) -> float: ...

    @property
    def first_share(self) -> float: ...

    @property
    def early_share(self) -> float: ...

    @property
    def looks(self) -> tuple[float, ...]: ...

    @property
    def min_look(self) -> int: ...


def look_sizes(gate: GateLevels, n: int) -> list[int]:
    """How many validation examples `gate` scores at each look of a set of `n` (the last is
    all `n`; a gate without a test has no interim look)."""
    if gate.test is None:
        return [n]
    sizes = sorted({round(f * n) for f in gate.looks if gate.min_look <= round(f * n) < n})
    return [*sizes, n]


def preflight(
    gate: GateLevels, n_val: int, planned: int | None, *, first_level: float | None = None
) -> Preflight:
    """What `gate` can certify on `n_val` validation examples in a run of `planned` decisions.

    `first_level` overrides the first decision's whole-set significance (a shared budget that
    has been spent already). Without it, the level the budget gives, less what early acceptance
    at interim looks takes from it (`SignificanceBudget.split`). Pure arithmetic: no model call.
    """
    if gate.test is None:
        return Preflight(n_val, planned, gate.alpha, None, None, None, _mean_only_warning())
    if first_level is None:
        budget = SignificanceBudget(alpha=gate.alpha, first_share=gate.first_share)
        budget.plan(planned)
        first_level = budget.level()
        if len(look_sizes(gate, n_val)) > 1 and gate.early_share > 0:
            first_level = budget.split(first_level, gate.early_share)[0]
    clean = _clean_fix(n_val, first_level)
    gain = _even_chance_gain(n_val, first_level)
    return Preflight(
        n_val, planned, gate.alpha, first_level, clean, gain, _warning(n_val, planned, clean, gain)
    )


def any_result_passes(n_val: int, level: float) -> bool:
    """Whether any result on `n_val` validation examples passes the sign test at `level`: a
    candidate that fixes every one of them and breaks none (False: the level is spent)."""
    return _clean_fix(n_val, level) is not None


def _clean_fix(n_val: int, level: float) -> int | None:
    """The fewest wins with no loss that pass the sign test at `level` (None: more than n)."""
    for wins in range(1, n_val + 1):
        if within_level(2.0**-wins, level):
            return wins
    return None


def _acceptance_chance(n_val: int, level: float, gain: float) -> float:
    """P(accept) when each example is a win w.p. gain + b/2 and a loss w.p. b/2 (b: background)."""
    loss = BACKGROUND_CHANGE / 2 * (1 - gain)
    win = gain + loss
    if win + loss > 1:
        return 1.0
    total = 0.0
    for discordant in range(1, n_val + 1):
        p_discordant = math.comb(n_val, discordant) * (win + loss) ** discordant
        p_discordant *= (1 - win - loss) ** (n_val - discordant)
        if p_discordant < 1e-15:
            continue
        critical, _ = sign_test_critical(discordant, level)
        share = win / (win + loss)
        tail = sum(
            math.comb(discordant, w) * share**w * (1 - share) ** (discordant - w)
            for w in range(critical, discordant + 1)
        )
        total += p_discordant * tail
    return total


def _even_chance_gain(n_val: int, level: float) -> float | None:
    """The smallest gain (in steps of 0.01) accepted at least half the time (None: none)."""
    for hundredths in range(1, 101):
        gain = hundredths / 100
        if _acceptance_chance(n_val, level, gain) >= 0.5:
            return gain
    return None


TOO_SMALL_GAIN = 0.25
"""`preflight` warns when the gain with an even chance to pass is above this."""


def _warning(n_val: int, planned: int | None, clean: int | None, gain: float | None) -> str | None:
    if gain is not None and gain <= TOO_SMALL_GAIN:
        return None
    what = (
        "no gain can be certified"
        if clean is None
        else f"only a gain above {gain if gain is not None else 1.0:+.2f} has an even chance"
    )
    fewer = "" if planned is None or planned <= 1 else f" fewer planned decisions ({planned} now),"
    return (
        f"{n_val} validation examples are too few for the gate to certify a useful gain: {what}. "
        f"Use more validation examples (50-100+),{fewer} or Gate.mean_only() if you accept that "
        "useless edits will pass most of the time"
    )


def _mean_only_warning() -> str:
    return (
        "Gate.mean_only() tests nothing: on noisy outcomes most runs accept a useless edit "
        "(bench/bench_gate_noise.py)"
    )
