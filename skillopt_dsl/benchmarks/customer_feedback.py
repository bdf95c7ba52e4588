"""A label-format benchmark: tag a piece of customer feedback `positive` or `negative`.

Each input asks "What kind of customer feedback is this?" about one short product review; the
answer is the house tag, `positive` or `negative`, alone. A small model mostly knows whether a
customer is pleased, but asked the question it answers in a sentence ("This customer feedback is
likely a classic example of ...") that names no tag a third of the time; an output-format rule
in the skill makes it name one. The answer format is the convention the skill carries: a model
cannot guess that the answer must be one of exactly these two words.

The reviews are generated from a fixed seed (products, praise and complaint phrases, openers and
sign-offs from the short lists below), so every split is the same everywhere, licence-free and
new to every model. Labels alternate, so each split is close to balanced and the best constant
answer scores about 0.5. Invariants (tested): the same rows on every call; labels balanced to
one row; no review is repeated; every review's label follows from its phrase list.

Example::

    splits = load_benchmark("customer_feedback", seed=0, sizes=(24, 50, 80))
    result = compile(CustomerFeedback(), splits.train, splits.val, testset=splits.test)
"""

from __future__ import annotations

import random
from functools import cache
from typing import Literal

from skillopt_dsl import metrics
from skillopt_dsl.json_types import JSONObject
from skillopt_dsl.module import InputField, OutputField, SkillModule

__all__ = ["LABELS", "QUESTION", "CustomerFeedback", "rows"]

N_ROWS = 400
"""How many reviews the generator makes (ids `customer_feedback-0` … `customer_feedback-399`)."""

LABELS: tuple[str, str] = ("positive", "negative")
QUESTION = 'What kind of customer feedback is this? "{review}"'
"""The input text around each review."""

_SEED = 20261201

_PRODUCTS = (
    "kettle", "jacket", "lamp", "blender", "backpack", "monitor", "desk chair", "toaster",
    "umbrella", "headphones", "coffee grinder", "rain coat", "bike light", "phone case",
    "frying pan", "office chair", "sleeping bag", "water bottle", "keyboard", "vacuum cleaner",
)  # fmt: skip
_PHRASES: dict[str, tuple[str, ...]] = {
    "positive": (
        "The {p} works perfectly and arrived early.",
        "I love this {p}, great quality.",
        "Excellent {p}, exactly as described.",
        "Very happy with the {p}, it is fast and quiet.",
        "The {p} is wonderful and well made.",
        "Best {p} I have ever owned.",
        "The {p} exceeded my expectations.",
        "Great value, the {p} does everything I need.",
        "The {p} looks beautiful and feels solid.",
        "So pleased with this {p}, it is perfect.",
    ),
    "negative": (
        "The {p} broke after two days.",
        "Terrible quality, the {p} stopped working.",
        "The {p} arrived scratched and nobody answers my emails.",
        "Very disappointed, the {p} is much smaller than in the photos.",
        "The {p} is noisy and the handle fell off.",
        "Worst {p} I have ever bought.",
        "The {p} smells of burnt plastic.",
        "Awful, the {p} was missing parts.",
        "The {p} feels cheap and flimsy.",
        "So annoyed with this {p}, it is useless.",
    ),
}
_OPENERS = ("", "", "Honestly, ", "Update: ", "Second order here. ")
_CLOSERS: dict[str, tuple[str, ...]] = {
    "positive": ("", "", " Thank you!", " Will buy again.", " Five stars."),
    "negative": ("", "", " Please help.", " Not happy.", " I want a refund."),
}


def _review(rng: random.Random, label: str) -> str:
    phrase = rng.choice(_PHRASES[label]).format(p=rng.choice(_PRODUCTS))
    opener = rng.choice(_OPENERS)
    if opener and phrase[0].isupper() and not opener.endswith(". "):
        phrase = phrase[0].lower() + phrase[1:]
    return f"{opener}{phrase}{rng.choice(_CLOSERS[label])}"


@cache
def _rows() -> tuple[tuple[str, str], ...]:
    rng = random.Random(_SEED)
    seen: set[str] = set()
    made: list[tuple[str, str]] = []
    while len(made) < N_ROWS:
        label = LABELS[len(made) % 2]
        review = _review(rng, label)
        if review not in seen:
            seen.add(review)
            made.append((review, label))
    return tuple(made)


def rows() -> list[JSONObject]:
    """Every review as a row `{id, question, answer}`, ids `customer_feedback-<n>` in
    generation order."""
    return [
        {
            "id": f"customer_feedback-{i}",
            "question": QUESTION.format(review=review),
            "answer": label,
        }
        for i, (review, label) in enumerate(_rows())
    ]


class CustomerFeedback(SkillModule):
    """Tag customer feedback with the house label: positive or negative."""

    question: str = InputField()
    answer: Literal["positive", "negative"] = OutputField()

    skill = "Tag the customer feedback."
    metric = metrics.exact_match("answer")
