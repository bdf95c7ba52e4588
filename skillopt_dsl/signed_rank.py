"""The gate's paired test: an exact one-sided test that paired differences lean positive.

**The paired test.** On the per-example differences d_i = candidate_i - incumbent_i (zeros
dropped), the Wilcoxon signed-rank statistic W+ (sum of the ranks of |d_i| over the positive d_i,
mid-ranks for ties) is compared with its exact conditional null distribution: under "the edit has
no effect" the candidate's and incumbent's outcomes on an example are exchangeable, so each sign
is +/- with probability 1/2 independently given the |d_i|. When all |d_i| are equal (0/1 scores)
this is exactly the sign test, p = P(Binomial(n, 1/2) >= wins). Above `EXACT_LIMIT` non-zero
differences a normal approximation with tie correction is used (recorded as such).

`paired_test(differences, level=...)` also gives the critical statistic at a level and the test's
attained size there (what a rejected decision is charged; see `skillopt_dsl.gate`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from skillopt_dsl.evidence import binomial_upper_tail, sign_test_critical, within_level

__all__ = ["EXACT_LIMIT", "TIE", "PairedTest", "paired_test"]

EXACT_LIMIT = 500
"""Above this many non-zero differences the signed-rank test uses the normal approximation."""

TIE = 1e-12
"""Differences within this of zero are ties (dropped from the test)."""


@dataclass(frozen=True)
class PairedTest:
    """The outcome of `paired_test`: which test ran, its statistic and one-sided p-value.

    With a `level`, `critical` is the least statistic the test accepts at that level (None:
    none) and `attained` the test's exact size there given the differences' magnitudes.
    """

    name: str
    statistic: float
    p_value: float
    critical: float | None = None
    attained: float | None = None


def paired_test(differences: Sequence[float], *, level: float | None = None) -> PairedTest:
    """One-sided exact paired test that the differences lean positive (module docstring).

    With `level`, also the critical statistic at that level and the test's attained size.

    >>> paired_test([1, 1, 1, 1, 1, 0, 0]).p_value  # 5 wins of 5 discordant pairs: 2**-5
    0.03125
    >>> test = paired_test([1] * 9 + [-1] * 3, level=0.05)  # 9 of 12 is not enough
    >>> test.critical, round(test.attained, 4), round(test.p_value, 4)
    (10.0, 0.0193, 0.073)
    """
    nonzero = [d for d in differences if abs(d) > TIE]
    if not nonzero:
        return PairedTest("sign", 0.0, 1.0, None, 0.0 if level is not None else None)
    magnitudes = [round(abs(d), 9) for d in nonzero]
    if len(set(magnitudes)) == 1:
        wins = sum(1 for d in nonzero if d > 0)
        p_value = binomial_upper_tail(wins, len(nonzero))
        if level is None:
            return PairedTest("sign", float(wins), p_value)
        critical, attained = sign_test_critical(len(nonzero), level)
        needed = None if critical > len(nonzero) else float(critical)
        return PairedTest("sign", float(wins), p_value, needed, attained)
    ranks2 = _doubled_midranks(magnitudes)
    w2 = sum(r for r, d in zip(ranks2, nonzero, strict=True) if d > 0)
    if len(nonzero) > EXACT_LIMIT:
        return PairedTest("signed-rank-normal", w2 / 2, _normal_upper_tail(w2, ranks2))
    tails = _exact_upper_tails(ranks2)
    p_value = float(min(1.0, tails[w2]))
    if level is None:
        return PairedTest("signed-rank", w2 / 2, p_value)
    rank_critical, attained = _critical_from_tails(tails, level)
    return PairedTest("signed-rank", w2 / 2, p_value, rank_critical, attained)


def _doubled_midranks(magnitudes: Sequence[float]) -> list[int]:
    """Twice the mid-ranks of `magnitudes` (integers), in their order."""
    order = sorted(range(len(magnitudes)), key=lambda i: magnitudes[i])
    ranks2 = [0] * len(magnitudes)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and magnitudes[order[end + 1]] == magnitudes[order[start]]:
            end += 1
        for position in range(start, end + 1):
            ranks2[order[position]] = start + end + 2  # (start+1 + end+1), i.e. 2 x mid-rank
        start = end + 1
    return ranks2


def _exact_upper_tails(ranks2: Sequence[int]) -> Any:
    """tails[w] = P(sum of a random half-chance subset of `ranks2` >= w), by dynamic
    programming (a numpy array of length sum(ranks2) + 2; the last entry is 0)."""
    import numpy as np

    probabilities = np.zeros(sum(ranks2) + 1)
    probabilities[0] = 1.0
    for rank in ranks2:
        shifted = np.zeros_like(probabilities)
        shifted[rank:] = probabilities[:-rank]
        probabilities = 0.5 * (probabilities + shifted)
    tails = np.zeros(len(probabilities) + 1)
    tails[:-1] = np.cumsum(probabilities[::-1])[::-1]
    return tails


def _critical_from_tails(tails: Any, level: float) -> tuple[float | None, float]:
    """The least W+ (halved from doubled ranks) whose tail is within `level`, and that tail."""
    total = len(tails) - 2  # the largest doubled W+
    for w2 in range(total // 2 + 1, total + 1):
        if within_level(tails[w2], level):
            return w2 / 2, float(tails[w2])
    return None, 0.0


def _normal_upper_tail(w2: int, ranks2: Sequence[int]) -> float:
    """Normal approximation of `_exact_upper_tails` (tie-corrected, continuity-corrected)."""
    mean = sum(ranks2) / 2
    sd = math.sqrt(sum(r * r for r in ranks2) / 4)
    z = (w2 - 1 - mean) / sd
    return 0.5 * math.erfc(z / math.sqrt(2))
