"""A reusable contract suite every registered benchmark must pass (ours and yours).

Subclass `BenchmarkContract` under a name pytest collects and set `benchmark` to a registered
name (`skillopt_dsl.benchmarks.register_benchmark`). Tests: registered and described; the
same name, seed and sizes give the same splits; ids are unique and do not depend on the seed;
every example holds the declared input and label fields; a classification task's labels are
among its `answer_choices`; a benchmark with a `module` scores its own gold answer in full
(its seed module, parser and metric agree with its data).
"""

from __future__ import annotations

from skillopt_dsl.benchmarks import get_benchmark, list_benchmarks, load_benchmark
from skillopt_dsl.types import Example

__all__ = ["BenchmarkContract"]

SIZES = (6, 6, 6)


class BenchmarkContract:
    """The contract suite; subclass it as `TestSomething` and set `benchmark`."""

    benchmark: str

    def examples(self, seed: int = 0) -> list[Example]:
        """Every example of the benchmark's splits under `seed`."""
        splits = load_benchmark(self.benchmark, seed=seed, sizes=SIZES)
        return [*splits.train, *splits.val, *splits.test]

    def test_registered_and_described(self) -> None:
        assert self.benchmark in list_benchmarks()
        spec = get_benchmark(self.benchmark)
        assert spec.name == self.benchmark and spec.description.strip()
        assert spec.input_fields and spec.label_fields

    def test_seeded_splits_repeat_and_ids_never_depend_on_the_seed(self) -> None:
        first, again, other = self.examples(0), self.examples(0), self.examples(1)
        assert first == again, "the same seed gave different splits"
        assert len({e.id for e in first}) == len(first), "example ids repeat"
        rows = {r["id"] for r in get_benchmark(self.benchmark).loader()}
        assert {e.id for e in first + other} <= rows, "ids must be the rows' own ids"

    def test_examples_hold_the_declared_fields(self) -> None:
        spec = get_benchmark(self.benchmark)
        for example in self.examples():
            assert tuple(example.inputs) == spec.input_fields
            assert tuple(example.labels) == spec.label_fields

    def test_labels_are_among_the_answer_choices(self) -> None:
        spec = get_benchmark(self.benchmark)
        if spec.answer_choices is None:
            return
        labels = {str(e.labels[spec.label_fields[0]]) for e in self.examples()}
        assert labels <= set(spec.answer_choices), labels - set(spec.answer_choices)

    def test_the_module_scores_its_gold_answer_in_full(self) -> None:
        spec = get_benchmark(self.benchmark)
        if spec.module is None:
            return
        module = spec.module()
        for example in self.examples()[:6]:
            gold = str(example.labels[spec.label_fields[0]])
            score = module.score(example, module.outcome(_GoldReply(gold)))
            assert score.value == 1.0, f"{example.id}: gold {gold!r} scored {score}"


class _GoldReply:
    """A reply whose text is the gold answer (for `SkillModule.outcome`)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.prompt_tokens = self.completion_tokens = 0
        self.latency_s = 0.0
        self.cached = False
