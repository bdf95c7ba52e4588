"""Bench 1: framework overhead per rollout with an in-process, zero-latency model.

2,000 examples. Floor: a bare Python loop that builds the messages and calls the same model
function. Ours: `skillopt_dsl.evaluate` (render, LM client with ledger and budget checks, parse,
metric, rollout record). DSPy: `dspy.Evaluate` over `dspy.Predict` with its `DummyLM` (caches
off), against the same floor and against a bare loop calling `DummyLM` directly.

Run: `python bench/bench_overhead.py` (DSPy columns need dspy installed, e.g. /work/bench-venv).
"""

from __future__ import annotations

from typing import Any

from _common import (
    Parity,
    optional,
    parity_answer,
    parity_examples,
    print_table,
    timer,
    write_results,
)

import skillopt_dsl as sd
from skillopt_dsl.lm import LM, ResponseCache
from skillopt_dsl.testing import ScriptedLM

N = 2000


def bare_loop(examples: list[Any], skill: str) -> float:
    with timer() as elapsed:
        for example in examples:
            parity_answer(
                [
                    {"role": "system", "content": skill},
                    {"role": "user", "content": example.inputs["number"]},
                ]
            )
    return elapsed()


def ours(examples: list[Any], threads: int, cache: bool) -> float:
    module = Parity()
    lm = LM(ScriptedLM(parity_answer), cache=ResponseCache() if cache else None, max_concurrency=64)
    with timer() as elapsed:
        report = sd.evaluate(module, examples, lm=lm, threads=threads, progress=False)
    assert report.mean == 1.0 and len(report.records) == len(examples)
    return elapsed()


def dspy_figures(examples: list[Any]) -> dict[str, float] | None:
    dspy = optional("dspy")
    if dspy is None:
        return None
    from dspy.utils.dummies import DummyLM

    dspy.configure_cache(enable_disk_cache=False, enable_memory_cache=False)
    devset = [
        dspy.Example(number=e.inputs["number"], answer=e.labels["answer"]).with_inputs("number")
        for e in examples
    ]
    answers = [{"answer": e.labels["answer"]} for e in examples]
    dspy.configure(lm=DummyLM(answers))
    program = dspy.Predict("number -> answer")
    evaluate = dspy.Evaluate(
        devset=devset,
        metric=lambda ex, pred, trace=None: ex.answer == pred.answer,
        num_threads=1,
        display_progress=False,
        display_table=False,
    )
    with timer() as elapsed:
        result = evaluate(program)
    score = getattr(result, "score", result)
    assert float(score) == 100.0, f"DummyLM answers were not all right: {score}"
    lm = DummyLM([{"answer": "odd"}] * len(examples))
    with timer() as bare_dummy:
        for e in examples:
            lm(messages=[{"role": "user", "content": e.inputs["number"]}])
    return {"evaluate_s": elapsed(), "bare_dummylm_s": bare_dummy()}


def main() -> None:
    examples = parity_examples(N)
    skill = Parity().seed_skill.text
    bare_loop(examples[:100], skill)  # warm up
    ours(examples[:100], 1, False)
    floor = min(bare_loop(examples, skill) for _ in range(3))
    rows: list[list[Any]] = [["bare loop (floor)", 1, floor / N * 1e6, 1.0]]
    figures: dict[str, Any] = {"n": N, "floor_s": floor, "runs": []}
    for threads, cache in [(1, False), (8, False), (1, True)]:
        seconds = min(ours(examples, threads, cache) for _ in range(2))
        label = f"skillopt_dsl.evaluate{' + response cache' if cache else ''}"
        rows.append([label, threads, seconds / N * 1e6, seconds / floor])
        figures["runs"].append(
            {"name": label, "threads": threads, "seconds": seconds, "ratio": seconds / floor}
        )
    dspy_run = dspy_figures(examples)
    if dspy_run is None:
        rows.append(["dspy.Evaluate + DummyLM", 1, "not available", None])
    else:
        seconds = dspy_run["evaluate_s"]
        rows.append(["dspy.Evaluate + DummyLM", 1, seconds / N * 1e6, seconds / floor])
        rows.append(["bare loop over DummyLM", 1, dspy_run["bare_dummylm_s"] / N * 1e6,
                     dspy_run["bare_dummylm_s"] / floor])  # fmt: skip
        figures["dspy"] = dspy_run | {"ratio": seconds / floor,
                                      "ratio_to_bare_dummylm": seconds / dspy_run["bare_dummylm_s"]}  # fmt: skip
    print_table(
        f"Overhead: {N} rollouts, zero-latency in-process model",
        ["runner", "threads", "us/rollout", "x floor"],
        rows,
    )
    write_results("overhead", figures)


if __name__ == "__main__":
    main()
