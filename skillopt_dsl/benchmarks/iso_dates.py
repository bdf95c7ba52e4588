"""An output-convention benchmark: write the date a sentence mentions in the house format.

Each input is one short everyday sentence (a meeting moved, an invoice due, a flight, a
birthday, a release, ...) that mentions exactly one calendar date, written in one of eight human
styles: `March 5, 2021`, `5 March 2021`, `Mar. 5th, 2021`, `the 5th of March, 2021`,
`5/3/2021 (day first)`, `3/5/2021 (month first)`, `Friday, March 5, 2021` (always the true
weekday) and `2021, March 5`. The answer is the house format, ISO 8601 `YYYY-MM-DD`
(`2021-03-05`), nothing else. A small model can read the date, but nothing in the sentence says
how to write it back: `March 5, 2021`, `03/05/2021`, `2021-3-5` and `5 March 2021` are all
reasonable guesses. The format is the convention the skill carries, and `IsoDate` (in
`skillopt_dsl.benchmarks.tasks`) scores it exactly.

The sentences are generated from a fixed seed (templates, names and places from the short lists
below, dates between 1990-01-01 and 2030-12-31), so every split is the same everywhere,
licence-free and new to every model. The templates, names and places hold no digits and no
month or weekday names, so the date is the only one in the sentence; numeric dates always say
which number is the day. Invariants (tested): the same rows on every call; every answer matches
`^\\d{4}-\\d{2}-\\d{2}$` and is a real date; the sentence's date parses back to the answer; a
weekday is the true one; no sentence is repeated; every style is present in at least 30 rows.

Example::

    splits = load_benchmark("iso_dates", seed=0, sizes=(30, 30, 60))
    result = compile(IsoDate(), splits.train, splits.val, testset=splits.test)
"""

from __future__ import annotations

import random
from datetime import date
from functools import cache

from skillopt_dsl.json_types import JSONObject

__all__ = ["FIRST_DAY", "LAST_DAY", "N_ROWS", "STYLES", "rows"]

N_ROWS = 400
"""How many sentences the generator makes (ids `iso_dates-0` … `iso_dates-399`)."""

STYLES: tuple[str, ...] = (
    "month_day_year",  # March 5, 2021
    "day_month_year",  # 5 March 2021
    "abbreviated_ordinal",  # Mar. 5th, 2021
    "ordinal_of",  # the 5th of March, 2021
    "numeric_day_first",  # 5/3/2021 (day first), 05.03.2021 (day first)
    "numeric_month_first",  # 3/5/2021 (month first)
    "weekday",  # Friday, March 5, 2021
    "year_first",  # 2021, March 5
)
"""The styles the dates are written in, drawn uniformly."""

FIRST_DAY = date(1990, 1, 1)
LAST_DAY = date(2030, 12, 31)
"""The dates are drawn uniformly from FIRST_DAY … LAST_DAY (both included)."""

_SEED = 20261216

_MONTHS = (
    "January", "February", "March", "April", "May", "June", "July", "August", "September",
    "October", "November", "December",
)  # fmt: skip
_MONTH_ABBREVIATIONS = (
    "Jan.", "Feb.", "Mar.", "Apr.", "May", "Jun.", "Jul.", "Aug.", "Sept.", "Oct.", "Nov.",
    "Dec.",
)  # fmt: skip
_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
"""Indexed by `date.weekday()` (Monday is 0)."""

_NAMES = (
    "Maria", "Ravi", "Ahmed", "Sofia", "David", "Elena", "Kenji", "Amara", "Lukas", "Priya",
    "Tomas", "Ingrid", "Omar", "Hana", "Pablo", "Grace", "Viktor", "Nadia", "Samuel", "Yuki",
)  # fmt: skip
_PLACES = (
    "Lisbon", "Oslo", "Nairobi", "Toronto", "Osaka", "Dublin", "Lima", "Krakow", "Cairo",
    "Seattle", "Porto", "Hanoi",
)  # fmt: skip
_TEMPLATES = (
    "The quarterly planning meeting has been moved to {date}.",
    "{name} says the invoice from the printer is due on {date}.",
    "Our flight to {place} leaves on {date}, so pack the night before.",
    "{name} is throwing a birthday party on {date}.",
    "The new version of the app is scheduled for release on {date}.",
    "The lease on the flat in {place} starts on {date}.",
    "{name} has a dentist appointment on {date} in the afternoon.",
    "The library book must be returned by {date} to avoid a fine.",
    "The wedding in {place} will take place on {date}.",
    "According to the tracking page, the parcel should arrive on {date}.",
    "{name} takes the driving test on {date}.",
    "The bakery on the corner reopens on {date} after the renovation.",
    "Registration for the conference in {place} closes on {date}.",
    "The concert was postponed to {date} because of the storm.",
    "{name} signs the contract for the new job on {date}.",
    "The last day to submit the expense report is {date}.",
    "We move into the house in {place} on {date}.",
    "The museum exhibition opens to the public on {date}.",
)


def _ordinal(day: int) -> str:
    """`1st`, `2nd`, `3rd`, `4th`, …, `11th`, `12th`, `13th`, …, `21st`, …"""
    suffix = "th" if day in (11, 12, 13) else {1: "st", 2: "nd", 3: "rd"}.get(day % 10, "th")
    return f"{day}{suffix}"


def _numeric(rng: random.Random, first: int, second: int, year: int) -> str:
    """`first/second/year`, both numbers zero-padded or neither (the caller says which number
    is the day)."""
    if rng.random() < 0.5:
        return f"{first}/{second}/{year}"
    return f"{first:02d}/{second:02d}/{year}"


def _phrase(rng: random.Random, day: date, style: str) -> str:
    """`day` written in `style`."""
    month, d, y = _MONTHS[day.month - 1], day.day, day.year
    if style == "month_day_year":
        return f"{month} {d}, {y}"
    if style == "day_month_year":
        return f"{d} {month} {y}"
    if style == "abbreviated_ordinal":
        return f"{_MONTH_ABBREVIATIONS[day.month - 1]} {_ordinal(d)}, {y}"
    if style == "ordinal_of":
        return f"the {_ordinal(d)} of {month}, {y}"
    if style == "numeric_day_first":
        numeric = _numeric(rng, d, day.month, y)
        if rng.random() < 0.3:
            numeric = f"{d:02d}.{day.month:02d}.{y}"
        return f"{numeric} (day first)"
    if style == "numeric_month_first":
        return f"{_numeric(rng, day.month, d, y)} (month first)"
    if style == "weekday":
        return f"{_WEEKDAYS[day.weekday()]}, {month} {d}, {y}"
    if style == "year_first":
        return f"{y}, {month} {d}"
    raise ValueError(f"unknown style {style!r}")


@cache
def _rows() -> tuple[tuple[str, str, str, str], ...]:
    """(text, answer, style, date phrase) for every sentence, in generation order."""
    rng = random.Random(_SEED)
    first, last = FIRST_DAY.toordinal(), LAST_DAY.toordinal()
    seen: set[str] = set()
    made: list[tuple[str, str, str, str]] = []
    while len(made) < N_ROWS:
        style = rng.choice(STYLES)
        day = date.fromordinal(rng.randint(first, last))
        phrase = _phrase(rng, day, style)
        text = rng.choice(_TEMPLATES).format(
            date=phrase, name=rng.choice(_NAMES), place=rng.choice(_PLACES)
        )
        if text not in seen:
            seen.add(text)
            made.append((text, day.isoformat(), style, phrase))
    return tuple(made)


def rows() -> list[JSONObject]:
    """Every sentence as a row `{id, text, answer}`, ids `iso_dates-<n>` in generation order."""
    return [
        {"id": f"iso_dates-{i}", "text": text, "answer": answer}
        for i, (text, answer, _, _) in enumerate(_rows())
    ]
