"""Several searches under one budget (issue 51 item 3): one arithmetic on `Budget` and
`UsageSnapshot` (`skillopt_dsl.lm.spend`) that `SkillOptimizer` (a program's predictors) and a
Sleep night (its own work and its described folders) both use."""

from __future__ import annotations

from types import MappingProxyType

import pytest

from skillopt_dsl.errors import UserInputError
from skillopt_dsl.lm import Budget, UsageSnapshot


@pytest.mark.parametrize(
    ("calls", "parts", "least", "share"),
    [
        (300, 2, 85, 150),  # an even split pays each predictor a decision
        (97, 2, 85, 97),  # split, neither could decide: the first gets it all (ReAct at 100)
        (200, 2, 120, 200),  # one decision's worth leaves 80, too few for the next
        (220, 3, 80, 80),  # 73 each pays none: the first gets a decision's worth, 140 stay
        (150, 3, 60, 60),  # 50 each cannot pay one; 60 leaves 90, enough for another
        (100, 1, 0, 100),  # one search: all of it
    ],
)
def test_the_next_search_gets_its_share_of_the_calls_or_all_when_a_split_pays_no_decision(
    calls: int, parts: int, least: int, share: int
) -> None:
    """Kills: the even split floored at one decision's estimate (`min(least, calls)`) when the
    rest could not pay the next search's decision (`dspy.ReAct` at 100 calls gave its agent
    step 85 of the 97 left and the extract step the rest: neither could decide), and token or
    dollar limits cut (they do not drive the search; what is left goes on to the next)."""
    given = Budget(max_calls=calls, max_tokens=9, max_usd=1.0).share(parts, least_calls=least)
    assert (given.max_calls, given.max_tokens, given.max_usd) == (share, 9, 1.0)
    assert Budget(max_tokens=9).share(3, least_calls=5) == Budget(max_tokens=9)


def test_fixed_shares_are_equal_and_the_first_keeps_the_rounding() -> None:
    """Kills: a share that is not an equal cut, a first part (a night's own work) that loses
    the rounding, and a cut of a limit that is not set."""
    whole = Budget(max_calls=100, max_tokens=1001, max_usd=3.0)
    own, share = whole.split(3)
    assert share == Budget(max_calls=33, max_tokens=333, max_usd=1.0)
    assert own == Budget(max_calls=34, max_tokens=335, max_usd=1.0)
    assert whole.split(1) == (whole, whole)
    assert Budget(max_calls=10).split(2) == (Budget(max_calls=5), Budget(max_calls=5))
    with pytest.raises(UserInputError):
        whole.split(0)


def test_what_is_left_subtracts_every_run_and_never_goes_below_zero() -> None:
    """Kills: only the last run's spend subtracted (a program's earlier predictors forgotten),
    tokens counted without the completion, an unknown price read as spending everything, and
    a limit driven negative."""
    first = UsageSnapshot(calls=30, prompt_tokens=100, completion_tokens=20, priced_cost_usd=0.5)
    second = UsageSnapshot(calls=50, prompt_tokens=10, completion_tokens=5, unpriced_calls=50)
    left = Budget(max_calls=100, max_tokens=1000, max_usd=2.0).left_after(first, second)
    assert left == Budget(max_calls=20, max_tokens=865, max_usd=1.5)
    assert Budget(max_calls=10).left_after(first) == Budget(max_calls=0)
    assert Budget().left_after(first) == Budget()


def test_usage_adds_up_and_subtracts_counter_by_counter() -> None:
    """Kills: a counter left out of the sum (errors, lost calls) or error types not merged."""
    a = UsageSnapshot(calls=3, errors=1, lost_calls=1, error_types=MappingProxyType({"x": 1}))
    b = UsageSnapshot(calls=4, errors=2, error_types=MappingProxyType({"x": 1, "y": 1}))
    total = UsageSnapshot.total([a, b])
    assert (total.calls, total.errors, total.lost_calls) == (7, 3, 1)
    assert dict(total.error_types) == {"x": 2, "y": 1}
    assert total.minus(a) == UsageSnapshot(calls=4, errors=2)
