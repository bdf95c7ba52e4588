"""The generated `citation_keys` benchmark: its rows, its registration and its module.

Each test names the regression it kills.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter

import pytest

from skillopt_dsl.benchmarks import citation_keys, get_benchmark, list_benchmarks, load_benchmark
from skillopt_dsl.benchmarks.tasks import CitationKey, module_for
from skillopt_dsl.optimizers.proposers.answer_shape import answer_shape
from skillopt_dsl.types import Example, Prediction

KEY = re.compile(r"[a-z]+[0-9]{4}")
FIRST_AUTHOR = re.compile(r"(?:[A-Z]\. )*([A-Za-z]+)\b")
"""The entry's first surname: after any leading initials (IEEE), else the first word."""
STYLE_PATTERNS = {
    "apa": re.compile(r"^[A-Za-z]+, [A-Z]\..* \(\d{4}\)\. .+, \d+\(\d+\), \d+-\d+\.$"),
    "mla": re.compile(r'^[A-Za-z]+, .*\." .+, vol\. \d+(, no\. \d+)?, \d{4}, pp\. \d+-\d+\.$'),
    "ieee": re.compile(r'^[A-Z]\. .*," .+, vol\. \d+, no\. \d+, pp\. \d+-\d+, \d{4}\.$'),
    "chicago": re.compile(r'^[A-Za-z]+, .*\." .+ \d+(, no\. \d+ \(\d{4}\)| \(\d+\)): \d+-\d+\.$'),
}


def test_rows_are_deterministic_and_unique() -> None:
    """Kills: an unseeded (or reseeded) generator, or repeated entries."""
    first = citation_keys.rows()
    assert first == citation_keys.rows()
    digest = hashlib.sha256(json.dumps(first, sort_keys=True).encode()).hexdigest()
    assert digest == "7e8495b6aa0a6088ea768940584eba9260b4fa7cef80a044d8681b4a83ec4b60"
    assert len(first) == citation_keys.N_ROWS == 400
    assert [r["id"] for r in first] == [f"citation_keys-{i}" for i in range(400)]
    assert all(set(r) == {"id", "reference", "answer"} for r in first)
    assert len({r["reference"] for r in first}) == len(first)


def test_every_key_is_the_first_authors_surname_in_lower_case_and_the_year() -> None:
    """Kills: a key of the wrong shape, from a later author, or with a year the entry lacks."""
    for row in citation_keys.rows():
        key, reference = row["answer"], row["reference"]
        assert KEY.fullmatch(key), row
        surname, year = key[:-4], key[-4:]
        first = FIRST_AUTHOR.match(reference)
        assert first is not None and first[1].lower() == surname, row
        assert surname in reference.lower(), row
        assert re.findall(r"\b\d{4}\b", reference) == [year], row  # the only 4-digit number
        assert 1950 <= int(year) <= 2023, row


def test_every_style_is_present_and_recognisable() -> None:
    """Kills: a generator stuck on one style (then the first author is always in one place)."""
    styles: Counter[str] = Counter()
    for reference, _, style in citation_keys._rows():
        matched = [name for name, pattern in STYLE_PATTERNS.items() if pattern.match(reference)]
        assert matched == [style], reference
        styles[style] += 1
    assert set(styles) == set(citation_keys.STYLES) == set(STYLE_PATTERNS)
    assert min(styles.values()) >= 60, styles
    references = [row["reference"] for row in citation_keys.rows()]
    assert sum("et al." in r for r in references) >= 10
    apa_authors = Counter(
        len(re.findall(r"[A-Za-z]+, (?:[A-Z]\.)", r.split(" (")[0]))
        for r, _, style in citation_keys._rows()
        if style == "apa"
    )
    assert set(apa_authors) == {1, 2, 3}, apa_authors


def test_registered_and_loads_disjoint_splits() -> None:
    """Kills: a missing or misnamed registration, or splits that share examples."""
    assert "citation_keys" in list_benchmarks()
    bench = get_benchmark("citation_keys")
    assert bench.input_fields == ("reference",) and bench.label_fields == ("answer",)
    assert bench.answer_choices is None and bench.loader is citation_keys.rows
    assert "novak1998" in bench.description
    splits = load_benchmark("citation_keys", seed=0, sizes=(30, 30, 60))
    assert (len(splits.train), len(splits.val), len(splits.test)) == (30, 30, 60)
    assert splits == load_benchmark("citation_keys", seed=0, sizes=(30, 30, 60))
    every = splits.train + splits.val + splits.test
    assert len({e.id for e in every}) == len(every) == 120
    assert len({e.inputs["reference"] for e in every}) == 120
    for example in every:
        assert tuple(example.inputs) == ("reference",) and tuple(example.labels) == ("answer",)
        assert KEY.fullmatch(example.answer)


def _gold(answer: str = "novak1998") -> Example:
    reference = 'M. Novak and J. Li, "Patterns of river erosion," J. Hydrol., vol. 12, 1998.'
    return Example("citation_keys-x", {"reference": reference}, {"answer": answer})


@pytest.mark.parametrize(
    ("output", "score"),
    [("novak1998", 1.0), ("Novak1998", 0.0), ("novak 1998", 0.0), ("Novak (1998)", 0.0)],
)
def test_module_metric_scores_only_the_exact_convention(output: str, score: float) -> None:
    """Kills: a normalising metric (casefolding would make the convention partly free)."""
    module = module_for("citation_keys")
    assert isinstance(module, CitationKey)
    assert module.metric(_gold(), Prediction({"answer": output})).value == score


def test_seed_skill_does_not_state_the_convention() -> None:
    """Kills: a seed skill that gives away what the optimizer should learn."""
    module = module_for("citation_keys")
    text = str(module.skill).lower()
    assert "citation key" in text
    assert not any(word in text for word in ("lower", "surname", "year", "novak", "1998"))
    assert list(module.input_fields) == ["reference"] and list(module.output_fields) == ["answer"]


def test_answer_shape_of_the_train_answers_is_the_convention() -> None:
    """Kills: keys whose shape the AnswerShapeProposer could not state as one rule."""
    splits = load_benchmark("citation_keys", seed=0, sizes=(30, 30, 60))
    shape = answer_shape([e.answer for e in splits.train])
    assert shape is not None
    assert shape.one_word and shape.lower_case and shape.no_punctuation
    assert shape.runs == ("L", "D4")
    assert "lower-case letters, then 4 digits" in shape.rule("answer")
    assert shape.broken_by("Novak1998") == ["lower_case"]
