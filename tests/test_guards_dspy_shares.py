"""Guards on the predictors' shares of a DSPy program's budget (issue 56, item 7): when what is
left pays the next predictor exactly one decision, it gets it. `SkillOptimizer` gives each
predictor `Budget.left_after(...).share(parts, least_calls=one decision)`."""

from __future__ import annotations

import pytest

from skillopt_dsl.lm import Budget, UsageSnapshot

LEAST = 40
"""One decision's worth of calls."""


@pytest.mark.parametrize(
    ("left", "parts", "first"),
    [
        (2 * LEAST, 3, LEAST),  # the first gets one decision; the rest pays the next exactly one
        (2 * LEAST - 1, 3, 2 * LEAST - 1),  # the rest could pay no other: all to the first
        (LEAST, 2, LEAST),  # exactly one decision left: the next predictor gets it
        (3 * LEAST, 3, LEAST),  # an even split that pays each one decision
        (LEAST - 1, 2, LEAST - 1),  # less than a decision: all of it, split it would buy none
    ],
)
def test_a_predictor_whose_share_pays_exactly_one_decision_gets_it(
    left: int, parts: int, first: int
) -> None:
    """Kills: a share that gives the first predictor everything when what is left after its
    decision pays the next exactly one (`rest <= least_calls` for `rest < least_calls`), and
    one that splits a budget of one decision (an even split kept below `least_calls`)."""
    assert Budget(max_calls=left).share(parts, least_calls=LEAST).max_calls == first


def test_what_the_earlier_predictors_left_pays_the_next_one_its_decision() -> None:
    """Kills: `left_after` not counting what the earlier predictors spent (the next share
    would be priced on the whole budget), at the exact boundary: 100 calls, 20 spent, two
    predictors to go at 40 calls a decision get 40 each."""
    spent = UsageSnapshot(calls=20)
    rest = Budget(max_calls=100).left_after(spent)
    assert rest.max_calls == 80
    assert rest.share(2, least_calls=LEAST).max_calls == LEAST
    last = Budget(max_calls=100).left_after(spent, UsageSnapshot(calls=LEAST))
    assert last.share(1, least_calls=LEAST).max_calls == LEAST
