"""Every registered benchmark passes the shipped `BenchmarkContract` (one test class each)."""

from __future__ import annotations

from skillopt_dsl.benchmarks import list_benchmarks
from skillopt_dsl.testing.benchmark_contract import BenchmarkContract

for _name in list_benchmarks():
    globals()[f"TestBenchmarkContract_{_name}"] = type(
        f"TestBenchmarkContract_{_name}", (BenchmarkContract,), {"benchmark": _name}
    )
