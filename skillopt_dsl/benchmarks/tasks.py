"""Typed `SkillModule`s for the shipped benchmarks, each with a metric that gives feedback."""

from __future__ import annotations

from typing import Literal

from skillopt_dsl import metrics
from skillopt_dsl.benchmarks.customer_feedback import CustomerFeedback
from skillopt_dsl.benchmarks.registry import module_for
from skillopt_dsl.module import InputField, OutputField, SkillModule

__all__ = [
    "Arithmetic",
    "CausalJudgment",
    "CitationKey",
    "CustomerFeedback",
    "DateUnderstanding",
    "IsoDate",
    "Navigate",
    "SportsUnderstanding",
    "WordSorting",
    "module_for",
]


class SportsUnderstanding(SkillModule):
    """Decide whether a sentence about sports is plausible or implausible."""

    statement: str = InputField("an invented sentence about an athlete and an action")
    answer: Literal["plausible", "implausible"] = OutputField()

    skill = "Answer with one word: plausible or implausible."
    metric = metrics.exact_match("answer")


class Navigate(SkillModule):
    """Decide whether following the instructions returns to the starting point."""

    question: str = InputField()
    answer: Literal["True", "False"] = OutputField()

    skill = "Answer True or False."
    metric = metrics.exact_match("answer")


class CausalJudgment(SkillModule):
    """Answer how a typical person would judge causation in a short story."""

    question: str = InputField()
    answer: Literal["Yes", "No"] = OutputField()

    skill = "Answer Yes or No."
    metric = metrics.exact_match("answer")


class DateUnderstanding(SkillModule):
    """Infer a date from context and pick the right MM/DD/YYYY option."""

    question: str = InputField()
    choices: list[str] = InputField("the options")
    answer: str = OutputField()

    skill = "Answer with one of the listed dates, in MM/DD/YYYY form."
    metric = metrics.multiple_choice("answer")


class Arithmetic(SkillModule):
    """Answer a two-digit arithmetic question with the number."""

    question: str = InputField()
    answer: int = OutputField()

    skill = "Answer with the number."
    metric = metrics.numeric("answer")


class WordSorting(SkillModule):
    """Sort the words alphabetically."""

    words: str = InputField("space-separated words")
    answer: str = OutputField()

    skill = "Sort the words alphabetically. Answer with the sorted words separated by spaces."
    metric = metrics.token_f1("answer")


class CitationKey(SkillModule):
    """Write the citation key for a bibliography entry."""

    reference: str = InputField("a bibliography entry")
    answer: str = OutputField()

    skill = "Write the citation key for the reference."
    # case-sensitive and unnormalised: the default would casefold, so "Novak1998" would pass
    metric = metrics.exact_match("answer", normalize=False)


class IsoDate(SkillModule):
    """Write the date a sentence mentions."""

    text: str = InputField("a sentence that mentions one date")
    answer: str = OutputField()

    skill = "Write the date the sentence mentions."
    # unnormalised: the house format is the convention, so "2021-3-5" must not pass
    metric = metrics.exact_match("answer", normalize=False)
