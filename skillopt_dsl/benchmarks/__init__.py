"""Small shipped benchmarks with fixed, seeded splits.

The registry is data only: each `Benchmark` names its input and label fields, the answer choices
of classification tasks, and a loader that returns flat rows. `load_benchmark` turns those rows
into `Splits` with `load_splits`, so the same name, seed and sizes always give the same splits.

Most tasks come from BIG-bench (Google LLC and contributors, Apache License 2.0); the unmodified
task files and their licence notice ship in `skillopt_dsl/benchmarks/data/`. `customer_feedback`,
`citation_keys`, `iso_dates` and `table_lookup` are generated here from fixed seeds.

Example::

    splits = load_benchmark("sports_understanding", seed=0, sizes=(30, 30, 50))
"""

from __future__ import annotations

from typing import Literal

from skillopt_dsl.benchmarks import (
    bigbench,
    citation_keys,
    customer_feedback,
    iso_dates,
    table_lookup,
    tasks,
)
from skillopt_dsl.benchmarks.registry import (
    Benchmark,
    get_benchmark,
    list_benchmarks,
    module_for,
    register_benchmark,
)
from skillopt_dsl.data import Splits, load_splits

__all__ = [
    "DEFAULT_SIZES",
    "Benchmark",
    "BenchmarkName",
    "get_benchmark",
    "list_benchmarks",
    "load_benchmark",
    "module_for",
    "register_benchmark",
]

# For type checkers and editors; `test_benchmarks.py` keeps it equal to the registry's names.
BenchmarkName = Literal[
    "arithmetic_2_digit_addition",
    "arithmetic_2_digit_multiplication",
    "arithmetic_2_digit_subtraction",
    "causal_judgment",
    "citation_keys",
    "customer_feedback",
    "date_understanding",
    "iso_dates",
    "navigate",
    "sports_understanding",
    "table_lookup",
    "word_sorting",
]

DEFAULT_SIZES: tuple[int, int, int] = (30, 30, 50)
"""Default (train, val, test) counts of `load_benchmark`: small enough for a laptop run."""


def _arithmetic(operation: str, word: str) -> Benchmark:
    return Benchmark(
        name=f"arithmetic_2_digit_{operation}",
        description=f"BIG-bench 2-digit {operation}: answer 'What is A {word} B?' with the number.",
        input_fields=("question",),
        label_fields=("answer",),
        loader=bigbench.arithmetic(operation),
        module=tasks.Arithmetic,
    )


_BENCHMARKS: tuple[Benchmark, ...] = (
    Benchmark(
        name="sports_understanding",
        description="BIG-bench: decide whether an invented sentence about sports is plausible "
        "or implausible.",
        input_fields=("statement",),
        label_fields=("answer",),
        loader=bigbench.sports_understanding,
        answer_choices=("plausible", "implausible"),
        module=tasks.SportsUnderstanding,
    ),
    Benchmark(
        name="navigate",
        description="BIG-bench: given navigation instructions, decide whether one ends up back "
        "at the starting point (True or False).",
        input_fields=("question",),
        label_fields=("answer",),
        loader=bigbench.navigate,
        answer_choices=("True", "False"),
        module=tasks.Navigate,
    ),
    Benchmark(
        name="causal_judgment",
        description="BIG-bench: how would a typical person answer a question about causation "
        "in a short story (Yes or No)?",
        input_fields=("question",),
        label_fields=("answer",),
        loader=bigbench.causal_judgment,
        answer_choices=("Yes", "No"),
        module=tasks.CausalJudgment,
    ),
    Benchmark(
        name="date_understanding",
        description="BIG-bench: infer a date from context; pick the MM/DD/YYYY answer from "
        "the listed choices.",
        input_fields=("question", "choices"),
        label_fields=("answer",),
        loader=bigbench.date_understanding,
        module=tasks.DateUnderstanding,
    ),
    _arithmetic("addition", "plus"),
    _arithmetic("subtraction", "minus"),
    _arithmetic("multiplication", "times"),
    Benchmark(
        name="word_sorting",
        description="BIG-bench: sort a space-separated list of words alphabetically; answer "
        "with the sorted words separated by spaces.",
        input_fields=("words",),
        label_fields=("answer",),
        loader=bigbench.word_sorting,
        module=tasks.WordSorting,
    ),
    Benchmark(
        name="customer_feedback",
        description="Answer format: tag a short product review with the house label, positive "
        "or negative, alone; generated (skillopt_dsl.benchmarks.customer_feedback).",
        input_fields=("question",),
        label_fields=("answer",),
        loader=customer_feedback.rows,
        answer_choices=customer_feedback.LABELS,
        module=tasks.CustomerFeedback,
    ),
    Benchmark(
        name="citation_keys",
        description="Output convention: write the house citation key (first author's surname "
        "in lower case, then the year, e.g. novak1998) for a bibliography entry; generated "
        "(skillopt_dsl.benchmarks.citation_keys).",
        input_fields=("reference",),
        label_fields=("answer",),
        loader=citation_keys.rows,
        module=tasks.CitationKey,
    ),
    Benchmark(
        name="iso_dates",
        description="Output convention: write the date a sentence mentions in the house "
        "format, ISO 8601 YYYY-MM-DD (2021-03-05); generated "
        "(skillopt_dsl.benchmarks.iso_dates).",
        input_fields=("text",),
        label_fields=("answer",),
        loader=iso_dates.rows,
        module=tasks.IsoDate,
    ),
    Benchmark(
        name="table_lookup",
        description="Tool use: answer a question about an invented city by calling the lookup "
        "tool (skillopt_dsl.benchmarks.table_lookup.TableLookup).",
        input_fields=("question",),
        label_fields=("answer", "tool_calls"),
        loader=table_lookup.rows,
    ),
)

for _benchmark in _BENCHMARKS:
    register_benchmark(_benchmark)


def load_benchmark(
    name: BenchmarkName | str,
    *,
    seed: int = 0,
    sizes: tuple[int, int, int] = DEFAULT_SIZES,
) -> Splits:
    """Fixed seeded `Splits` of a registered benchmark (`sizes` = train, val, test counts).

    Ids are `<task>-<index in the BIG-bench file>`, so they never depend on the seed.
    """
    benchmark = get_benchmark(name)
    return load_splits(
        benchmark.loader(),
        seed=seed,
        sizes=sizes,
        input_fields=benchmark.input_fields,
        label_fields=benchmark.label_fields,
        id_field="id",
    )
