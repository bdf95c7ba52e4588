"""Shared builders for tests: a small typed module and examples."""

from __future__ import annotations

from typing import Literal

import skillopt_dsl as sd
from skillopt_dsl.types import Example


class Parity(sd.SkillModule):
    """Say whether a number is even or odd."""

    number: str = sd.InputField()
    answer: Literal["even", "odd"] = sd.OutputField()

    skill = "Answer with one word."
    metric = sd.metrics.exact_match("answer")


def parity_examples(start: int, count: int) -> list[Example]:
    """Examples `n=start..start+count-1` with their parity as the label."""
    return [
        Example(
            id=f"n{n}",
            inputs={"number": str(n)},
            labels={"answer": "even" if n % 2 == 0 else "odd"},
        )
        for n in range(start, start + count)
    ]


def parity_target(messages: list[dict[str, str]]) -> str:
    """A fake target: right only when the skill mentions the parity rule, else always 'odd'."""
    system = next((m["content"] for m in messages if m["role"] == "system"), "")
    number = int(messages[-1]["content"])
    if "divisible by 2" in system:
        return "even" if number % 2 == 0 else "odd"
    return "odd"
