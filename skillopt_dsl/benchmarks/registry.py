"""The one benchmark registry: `Benchmark` records by name, and every list and message of names.

`skillopt_dsl.benchmarks` registers the shipped ones; `register_benchmark` adds one. Lists
(`list_benchmarks`, the CLI's `benchmarks list`), messages (`get_benchmark`, `module_for`) and
`module_for`'s modules all read this registry, so a benchmark registered once is everywhere.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from skillopt_dsl.errors import UserInputError
from skillopt_dsl.json_types import JSONObject
from skillopt_dsl.module import SkillModule

__all__ = ["Benchmark", "get_benchmark", "list_benchmarks", "module_for", "register_benchmark"]


@dataclass(frozen=True)
class Benchmark:
    """One registered task.

    Attributes:
        name: registry key.
        description: what the task asks, in one or two sentences.
        input_fields: row columns that become `Example.inputs`.
        label_fields: row columns that become `Example.labels`.
        loader: returns every row (with an `id` column) in file order.
        answer_choices: the closed label set of a classification task, else `None`.
        module: the typed `SkillModule` (with its seed skill and metric) that `module_for`
            builds, else `None` (the tool-use `table_lookup` brings its own agent module).
    """

    name: str
    description: str
    input_fields: tuple[str, ...]
    label_fields: tuple[str, ...]
    loader: Callable[[], list[JSONObject]]
    answer_choices: tuple[str, ...] | None = None
    module: type[SkillModule] | None = None


_REGISTRY: dict[str, Benchmark] = {}
"""The one registry: every list of benchmark names and every message that names them reads it."""


def register_benchmark(benchmark: Benchmark) -> Benchmark:
    """Register `benchmark` under its name (a name taken by another benchmark is refused).
    Once registered it is listed, loadable, named in messages and, with a `module`, built by
    `module_for`; the shipped `BenchmarkContract` checks it."""
    known = _REGISTRY.get(benchmark.name)
    if known is not None and known is not benchmark:
        raise UserInputError(f"benchmark name {benchmark.name!r} is already registered")
    _REGISTRY[benchmark.name] = benchmark
    return benchmark


def list_benchmarks() -> list[str]:
    """Names of every registered benchmark, sorted."""
    return sorted(_REGISTRY)


def module_for(benchmark: str) -> SkillModule:
    """A fresh module (with its seed skill) for a registered benchmark that declares one."""
    registered = _REGISTRY.get(benchmark)
    if registered is None or registered.module is None:
        with_module = sorted(name for name, b in _REGISTRY.items() if b.module is not None)
        raise UserInputError(f"no module for benchmark {benchmark!r}; choose one of {with_module}")
    return registered.module()


def get_benchmark(name: str) -> Benchmark:
    """The registered `Benchmark` called `name`; an unknown name lists the valid ones."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise UserInputError(
            f"unknown benchmark {name!r}; choose one of {list_benchmarks()}"
        ) from None
