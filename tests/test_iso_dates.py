"""The generated `iso_dates` benchmark: its rows, its registration and its module.

Each test names the regression it kills. The parse of the written dates below is the test's
own, independent of the generator: it reads each style's fields back with a regular expression.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from datetime import date

import pytest

from skillopt_dsl.benchmarks import get_benchmark, iso_dates, list_benchmarks, load_benchmark
from skillopt_dsl.benchmarks.tasks import IsoDate, module_for
from skillopt_dsl.optimizers.proposers.answer_shape import answer_shape
from skillopt_dsl.types import Example, Prediction

ISO = re.compile(r"^\d{4}-\d{2}-\d{2}$")
MONTHS = (
    "January", "February", "March", "April", "May", "June", "July", "August", "September",
    "October", "November", "December",
)  # fmt: skip
ABBREVIATIONS = {
    "Jan.": 1, "Feb.": 2, "Mar.": 3, "Apr.": 4, "May": 5, "Jun.": 6, "Jul.": 7, "Aug.": 8,
    "Sept.": 9, "Oct.": 10, "Nov.": 11, "Dec.": 12,
}  # fmt: skip
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_M = r"(?P<month>[A-Z][a-z]+)"
_D = r"(?P<day>\d{1,2})"
_Y = r"(?P<year>\d{4})"
_TH = r"(?P<suffix>st|nd|rd|th)"
STYLE_PATTERNS = {
    "month_day_year": re.compile(rf"{_M} {_D}, {_Y}"),
    "day_month_year": re.compile(rf"{_D} {_M} {_Y}"),
    "abbreviated_ordinal": re.compile(rf"(?P<abbreviation>[A-Z][a-z]+\.?) {_D}{_TH}, {_Y}"),
    "ordinal_of": re.compile(rf"the {_D}{_TH} of {_M}, {_Y}"),
    "numeric_day_first": re.compile(
        rf"{_D}(?P<sep>[/.])(?P<month_number>\d{{1,2}})(?P=sep){_Y} \(day first\)"
    ),
    "numeric_month_first": re.compile(rf"(?P<month_number>\d{{1,2}})/{_D}/{_Y} \(month first\)"),
    "weekday": re.compile(rf"(?P<weekday>[A-Z][a-z]+day), {_M} {_D}, {_Y}"),
    "year_first": re.compile(rf"{_Y}, {_M} {_D}"),
}
"""Each style's written form, with the fields that name the date (matched in full)."""
NOT_A_DATE = re.compile(
    r"\d|\b(?:" + "|".join([*MONTHS, *WEEKDAYS, *(a.rstrip(".") for a in ABBREVIATIONS)]) + r")\b"
)
"""Anything that could be read as (part of) a date: a digit, a month or a weekday name."""


def _parse(phrase: str) -> tuple[str, date]:
    """The one style `phrase` is written in and the date it names; a weekday must be true."""
    matched = [(s, p.fullmatch(phrase)) for s, p in STYLE_PATTERNS.items()]
    found = [(s, m) for s, m in matched if m is not None]
    assert len(found) == 1, (phrase, [s for s, _ in found])
    style, match = found[0]
    fields = match.groupdict()
    if fields.get("month") is not None:
        month = MONTHS.index(fields["month"]) + 1
    elif fields.get("abbreviation") is not None:
        month = ABBREVIATIONS[fields["abbreviation"]]
    else:
        month = int(fields["month_number"])
    day = date(int(fields["year"]), month, int(fields["day"]))
    if fields.get("suffix") is not None:
        n = day.day
        suffix = "th" if n in (11, 12, 13) else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
        assert fields["suffix"] == suffix, phrase
    if fields.get("weekday") is not None:
        assert fields["weekday"] == WEEKDAYS[day.weekday()], phrase
    return style, day


def test_parse_reads_each_style() -> None:
    """Kills: a test parse that would accept a wrong date (it is checked on known dates)."""
    day = date(2021, 3, 5)
    written = {
        "March 5, 2021": "month_day_year",
        "5 March 2021": "day_month_year",
        "Mar. 5th, 2021": "abbreviated_ordinal",
        "the 5th of March, 2021": "ordinal_of",
        "5/3/2021 (day first)": "numeric_day_first",
        "05.03.2021 (day first)": "numeric_day_first",
        "03/05/2021 (month first)": "numeric_month_first",
        "Friday, March 5, 2021": "weekday",
        "2021, March 5": "year_first",
    }
    for phrase, style in written.items():
        assert _parse(phrase) == (style, day)
    with pytest.raises(AssertionError):
        _parse("Monday, March 5, 2021")  # a false weekday
    with pytest.raises(AssertionError):
        _parse("5/3/2021")  # which number is the day?
    with pytest.raises(AssertionError):
        _parse("Mar. 5rd, 2021")


def test_rows_are_deterministic_and_unique() -> None:
    """Kills: an unseeded (or reseeded) generator, or repeated sentences."""
    first = iso_dates.rows()
    assert first == iso_dates.rows()
    digest = hashlib.sha256(json.dumps(first, sort_keys=True).encode()).hexdigest()
    assert digest == "8ae21adb4b46fc7a640a9c85e4a9ed8fb77713b3774e5380fca36d8105deba61"
    assert len(first) == iso_dates.N_ROWS == 400
    assert [r["id"] for r in first] == [f"iso_dates-{i}" for i in range(400)]
    assert all(set(r) == {"id", "text", "answer"} for r in first)
    assert len({r["text"] for r in first}) == len(first)


def test_every_answer_is_an_iso_date_in_range() -> None:
    """Kills: an answer not in the house format, or a date that does not exist."""
    for row in iso_dates.rows():
        answer = row["answer"]
        assert ISO.fullmatch(answer), row
        day = date.fromisoformat(answer)  # raises on 2021-02-30
        assert day.isoformat() == answer, row
        assert date(1990, 1, 1) <= day <= date(2030, 12, 31), row


def test_the_sentence_names_exactly_the_answers_date() -> None:
    """Kills: a text whose date differs from the answer, a false weekday, an ambiguous numeric
    date, or a template with another number, month or weekday that a model could pick."""
    for text, answer, style, phrase in iso_dates._rows():
        assert text.count(phrase) == 1, text
        assert _parse(phrase) == (style, date.fromisoformat(answer)), text
        assert not NOT_A_DATE.search(text.replace(phrase, " ")), text
        assert re.findall(r"\d{4}", text) == [answer[:4]], text


def test_every_style_is_present_in_at_least_30_rows() -> None:
    """Kills: a generator stuck on a few styles (then one way of reading suffices)."""
    styles = Counter(style for _, _, style, _ in iso_dates._rows())
    assert set(styles) == set(iso_dates.STYLES) == set(STYLE_PATTERNS)
    assert min(styles.values()) >= 30, styles
    day_first = [p for _, _, s, p in iso_dates._rows() if s == "numeric_day_first"]
    assert any("." in p for p in day_first) and any("/" in p for p in day_first)
    numeric = [p for _, _, s, p in iso_dates._rows() if s.startswith("numeric")]
    assert any(p.startswith("0") for p in numeric)
    assert any(re.match(r"\d[/.]\d[/.]", p) for p in numeric)  # unpadded, and ambiguous unsaid


def test_registered_and_loads_disjoint_splits() -> None:
    """Kills: a missing or misnamed registration, or splits that share examples."""
    assert "iso_dates" in list_benchmarks()
    bench = get_benchmark("iso_dates")
    assert bench.input_fields == ("text",) and bench.label_fields == ("answer",)
    assert bench.answer_choices is None and bench.loader is iso_dates.rows
    assert "YYYY-MM-DD (2021-03-05)" in bench.description
    splits = load_benchmark("iso_dates", seed=0, sizes=(30, 30, 60))
    assert (len(splits.train), len(splits.val), len(splits.test)) == (30, 30, 60)
    assert splits == load_benchmark("iso_dates", seed=0, sizes=(30, 30, 60))
    every = splits.train + splits.val + splits.test
    assert len({e.id for e in every}) == len(every) == 120
    assert len({e.inputs["text"] for e in every}) == 120
    for example in every:
        assert tuple(example.inputs) == ("text",) and tuple(example.labels) == ("answer",)
        assert ISO.fullmatch(example.answer)


def _gold(answer: str = "2021-03-05") -> Example:
    text = "The quarterly planning meeting has been moved to Friday, March 5, 2021."
    return Example("iso_dates-x", {"text": text}, {"answer": answer})


@pytest.mark.parametrize(
    ("output", "score"),
    [("2021-03-05", 1.0), ("March 5, 2021", 0.0), ("2021-3-5", 0.0), ("05/03/2021", 0.0)],
)
def test_module_metric_scores_only_the_exact_convention(output: str, score: float) -> None:
    """Kills: a lenient metric (a date parser would make the convention free)."""
    module = module_for("iso_dates")
    assert isinstance(module, IsoDate)
    assert module.metric(_gold(), Prediction({"answer": output})).value == score


def test_seed_skill_does_not_state_the_convention() -> None:
    """Kills: a seed skill that gives away what the optimizer should learn."""
    module = module_for("iso_dates")
    text = str(module.skill)
    assert "date" in text.lower()
    assert not any(word in text for word in ("ISO", "iso", "YYYY", "yyyy", "-", "8601"))
    assert list(module.input_fields) == ["text"] and list(module.output_fields) == ["answer"]


def test_answer_shape_of_the_train_answers_is_the_convention() -> None:
    """Kills: answers whose shape the AnswerShapeProposer could not state as one rule."""
    splits = load_benchmark("iso_dates", seed=0, sizes=(30, 30, 60))
    shape = answer_shape([e.answer for e in splits.train])
    assert shape is not None
    assert shape.one_word and not shape.lower_case and not shape.no_punctuation
    assert shape.runs == ("D4", "-", "D2", "-", "D2")
    assert shape.rule("answer") == (
        "The answer is one word: 4 digits, then '-', then 2 digits, then '-', then 2 digits, "
        f"with no spaces (like {splits.train[0].answer})."
    )
    assert "4 digits, then '-', then 2 digits" in shape.rule("answer")
    assert shape.broken_by("2021-3-5") == ["runs"]
    assert shape.broken_by("March 5, 2021") == ["one_word", "runs", "max_words"]
