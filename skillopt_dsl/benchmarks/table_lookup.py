"""A tool-use benchmark: answer questions about invented cities by looking them up in a table.

The table (40 cities with a country, a population and a founding year) is generated from a fixed
seed, so it is the same everywhere, licence-free, and unknown to every model: an answer is right
only if the agent called `lookup` and read the result. Each question names one city and one
attribute; the label is the answer as text, and `tool_calls` holds the reference solution
(one `lookup` call), which `ToolDemonstrationsProposer` turns into worked examples.

`TableLookup` is the agent module, with a seed skill that never mentions the tool.

Example::

    splits = load_benchmark("table_lookup", seed=0, sizes=(16, 30, 30))
    result = compile(TableLookup(), splits.train, splits.val, testset=splits.test)
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from functools import cache

from skillopt_dsl import metrics
from skillopt_dsl.agents.module import AgentModule
from skillopt_dsl.json_types import JSONObject
from skillopt_dsl.module import InputField, OutputField

__all__ = ["CITIES", "TableLookup", "lookup", "rows"]

_SYLLABLES = ("var", "nor", "kes", "tel", "mar", "qu", "ost", "lin", "dra", "bel", "sor", "vik")
_ENDINGS = ("holm", "vale", "by", "stad", "mere", "ford", "wick", "grad")
_COUNTRIES = ("Ostmark", "Velland", "Quorria", "Dravonia", "Belisar")
_QUESTIONS = {
    "country": "Which country is {city} in?",
    "population": "What is the population of {city}?",
    "founded": "In what year was {city} founded?",
}


@dataclass(frozen=True)
class City:
    """One row of the table."""

    name: str
    country: str
    population: int
    founded: int


@cache
def _cities() -> dict[str, City]:
    rng = random.Random(20240611)
    table: dict[str, City] = {}
    while len(table) < 40:
        name = (rng.choice(_SYLLABLES) + rng.choice(_SYLLABLES) + rng.choice(_ENDINGS)).title()
        if name not in table:
            table[name] = City(
                name,
                rng.choice(_COUNTRIES),
                rng.randrange(2_000, 900_000),
                rng.randrange(1100, 1950),
            )
    return table


CITIES: tuple[str, ...] = tuple(_cities())
"""The city names, in table order."""


def lookup(city: str) -> dict[str, object]:
    """Look up a city in the table and return its country, population and founding year.

    Args:
        city: the city's name, e.g. "Belqumere".
    """
    record = _cities().get(city.strip().title())
    if record is None:
        raise KeyError(f"no city named {city!r} in the table")
    return {
        "city": record.name,
        "country": record.country,
        "population": record.population,
        "founded": record.founded,
    }


def rows() -> list[JSONObject]:
    """Every question (one per city and attribute), with ids `table_lookup-<n>`."""
    result: list[JSONObject] = []
    for city in CITIES:
        for attribute, template in _QUESTIONS.items():
            result.append(
                {
                    "id": f"table_lookup-{len(result)}",
                    "question": template.format(city=city),
                    "answer": str(getattr(_cities()[city], attribute)),
                    "tool_calls": [{"tool": "lookup", "arguments": {"city": city}}],
                }
            )
    return result


class TableLookup(AgentModule):
    """Answer a question about a city using the lookup tool."""

    question: str = InputField()
    answer: str = OutputField()

    skill = "Answer the question."
    tools = (lookup,)
    max_turns = 3
    metric = metrics.exact_match("answer")
