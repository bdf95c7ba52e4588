"""Shared helpers for the bench scripts: a synthetic task, machine info, tables, result files.

Bench scripts are run as files (`python bench/bench_overhead.py`), never imported as a package.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import skillopt_dsl as sd
from skillopt_dsl.testing.contract import contract_examples
from skillopt_dsl.types import Example

RESULTS = Path(__file__).resolve().parent / "results"


class Parity(sd.SkillModule):
    """Say whether a number is even or odd."""

    number: str = sd.InputField()
    answer: Literal["even", "odd"] = sd.OutputField()

    skill = "Answer with one word: even or odd."
    metric = sd.metrics.exact_match("answer")


def parity_examples(count: int, start: int = 0) -> list[Example]:
    """`count` examples `n=start..`, labelled with their parity (the contract suite's task)."""
    return contract_examples(start, count)


def parity_answer(messages: Sequence[dict[str, str]]) -> str:
    """The deterministic fake model: the right parity of the number in the last message."""
    words = messages[-1]["content"].split()
    digits = words[-1] if words else "1"
    return "even" if digits.isdigit() and int(digits) % 2 == 0 else "odd"


def machine() -> dict[str, Any]:
    """Where and when the figures were taken."""
    return {
        "date": _dt.datetime.now(_dt.UTC).replace(microsecond=0).isoformat(),
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "processor": platform.processor() or platform.machine(),
    }


def write_results(name: str, figures: dict[str, Any]) -> Path:
    """Write `bench/results/<name>.json` with the machine block added."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps({"machine": machine(), **figures}, indent=2) + "\n")
    print(f"\nwrote {path}")
    return path


def print_table(title: str, headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """Print a plain-text table."""
    cells = [[_fmt(v) for v in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(headers)]
    print(f"\n{title}")
    print("  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)))
    print("  ".join("-" * w for w in widths))
    for row in cells:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)))


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return "-" if value is None else str(value)


@contextmanager
def timer() -> Iterator[Callable[[], float]]:
    """`with timer() as elapsed: ...; elapsed()` -> seconds."""
    start = time.perf_counter()
    end: list[float] = []
    yield lambda: (end[0] if end else time.perf_counter()) - start
    end.append(time.perf_counter())


def optional(name: str) -> Any:
    """Import an optional package, or None (the bench reports it as not available)."""
    try:
        return __import__(name)
    except Exception as exc:  # an optional competitor may fail to import in many ways
        print(f"({name} not available: {type(exc).__name__}: {exc})")
        return None


def git_commit() -> str:
    """The checked-out commit, short, with `+dirty` when tracked files are changed."""

    def git(*args: str) -> str:
        try:
            return subprocess.run(["git", *args], capture_output=True, text=True).stdout.strip()
        except OSError:
            return "unknown"

    dirty = git("status", "--porcelain", "--untracked-files=no")
    return git("rev-parse", "--short", "HEAD") + ("+dirty" if dirty else "")
