"""SkillOptimizer vs dspy.GEPA vs dspy.MIPROv2 on DSPy programs as they fail in the wild (issue
37), calls counted at a FAKE server, in seconds and offline.

The shapes are the ones of tests/test_dspy_wild.py, with the same FAKE target policies, rows
and budgets as the rows of docs/dspy.md's "Programs as they fail in the wild" table:

- `parses_reply`: a `forward` doing `int(pred.answer)`; the target answers `n + 1` except
  "seven" on every multiple of 4 (the `int()` raises on 1 row in 4), budget 60;
- `program_of_thought`: `dspy.ProgramOfThought` with a custom interpreter; the target's code
  never runs on multiples of 4 ("Max hops reached" on 1 row in 4), budget 150;
- `branch`: `if/else` between `geo` and `math`, every row taking `math`; the target answers odd
  `n` right and even `n` wrong, budget 70.

The FAKE reflector answers every optimizer call with "no change" (ours: `{"edits": []}`;
dspy.GEPA: its current instruction back; MIPROv2's proposer: the instruction it was shown), and
no instruction changes what the target answers: accuracy cannot move, so what the rows measure
is whether each method runs the program to the end, what it spends at the server, and whether
that stays within the budget. Train rows `what is n plus 1?` for n = 1..8, val n = 21..28,
test n = 41..56 (16 rows; `branch` likewise).

Methods, each on its own fresh counting `FakeOpenAIServer` (latency 0), at the shape's budget B:

- `SkillOptimizer(exact, optimizer=GradientText(lr=1.0, epochs=1, batch_size=4),
  budget=Budget(max_calls=B), threads=--threads)` — the tests' setting;
- `dspy.GEPA` and `dspy.MIPROv2` as in bench_dspy_react (GEPA: `max_metric_calls` =
  `--gepa-share` x B / server calls a rollout, measured on the student's test pass; MIPROv2:
  trials scaled to B, no call budget of its own).

Test accuracy is our `evaluate_program` through a second fresh server, outside the budget
(a model-caused failure scores 0). Run from the repository root:

    python bench/bench_dspy_wild.py

Writes bench/results/dspy_wild.json (`--name`).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import logging
import sys
import threading
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import dspy
from _common import git_commit, print_table, write_results
from bench_dspy_fake_qa import _CURRENT, GEPA_REFLECTION, exact
from bench_dspy_react import MODEL, Context, Row, Shape, program_state, run_gepa, run_mipro

from skillopt_dsl.dspy import SkillOptimizer, evaluate_program
from skillopt_dsl.lm import LM, Budget
from skillopt_dsl.optimizers import GradientText
from skillopt_dsl.testing.fake_server import FakeOpenAIServer
from tests.test_dspy_proposals import obedient_chat_model
from tests.test_dspy_search import OPTIMIZER_SYSTEMS
from tests.test_dspy_wild import (
    Arithmetic,
    ParsesItsReply,
    Router,
    add_one,
    half_right,
    pot_policy,
    sums,
)

PROGRAM_FIELDS = {"answer", "reasoning", "generated_code"}
"""Output fields the shapes' own predictors ask for; any other request is MIPROv2's proposer."""


def program_of_thought() -> dspy.Module:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return dspy.ProgramOfThought("question -> answer", interpreter_factory=Arithmetic)


def with_proposer(policy: Callable[..., dict[str, Any]]) -> Callable[..., dict[str, Any]]:
    """`policy` for the program's calls; MIPROv2's grounded proposer gets the instruction it
    was shown back unchanged, bland text for its summaries, "COMPLETE" for observations."""

    def answer(system: str, inputs: dict[str, str], wanted: list[str]) -> dict[str, Any]:
        if set(wanted) <= PROGRAM_FIELDS:
            return policy(system, inputs, wanted)
        values: dict[str, Any] = {}
        for name in wanted:
            if name == "proposed_instruction":
                values[name] = inputs.get("basic_instruction", "").strip() or "Answer."
            elif name == "observations":
                values[name] = "COMPLETE"
            else:
                values[name] = "Short arithmetic questions answered by a number."
        return values

    return answer


class NoChangeModel:
    """The FAKE server's model: "no change" for every optimizer call, the target otherwise."""

    def __init__(self, policy: Callable[..., dict[str, Any]]) -> None:
        self._target = obedient_chat_model(with_proposer(policy))
        self._lock = threading.Lock()
        self.optimizer_calls = 0

    def __call__(self, messages: list[dict[str, str]]) -> str:
        system, user = messages[0]["content"], messages[-1]["content"]
        if GEPA_REFLECTION in system:
            found = _CURRENT.search(user)
            reply = json.dumps({"new_instruction": found.group(1).strip() if found else ""})
        elif system.startswith(OPTIMIZER_SYSTEMS):
            reply = '{"edits": []}'
        elif "proposed_instruction" in user:
            reply = self._target(messages)
        else:
            return self._target(messages)
        with self._lock:
            self.optimizer_calls += 1
        return reply


THREADS = 1


def run_ours(ctx: Context, server: FakeOpenAIServer) -> tuple[dspy.Module, Row]:
    """The tests' setting: GradientText(lr=1.0, epochs=1, batch_size=4) at the shape's budget."""
    tele = SkillOptimizer(exact, optimizer=GradientText(lr=1.0, epochs=1, batch_size=4),
                          lm=LM(MODEL, api_base=server.url, max_retries=0),
                          budget=Budget(max_calls=ctx.budget), threads=THREADS)  # fmt: skip
    compiled = tele.compile(ctx.shape.make(), trainset=ctx.shape.train, valset=ctx.shape.val)
    out = compiled.skillopt
    calls = {name: p.result.usage.calls for name, p in out.predictors.items()}
    return compiled, {
        "setting": f"Budget(max_calls={ctx.budget})",
        "val": out.val_score, "seed_val": out.seed_val_score, "stop": out.stop_reason,
        "ledger_calls": out.usage.calls, "predictor_calls": calls,
        "unreached": list(out.unreached), "untrained": list(out.untrained),
        "warnings": list(out.warnings),
    }  # fmt: skip


METHODS: dict[str, Callable[[Context, FakeOpenAIServer], tuple[dspy.Module, Row]]] = {
    "SkillOptimizer": run_ours,
    "dspy.GEPA": run_gepa,
    "dspy.MIPROv2": run_mipro,
}


def quietly() -> contextlib.ExitStack:
    """dspy's, GEPA's and Evaluate's progress bars off the terminal."""
    stack, sink = contextlib.ExitStack(), io.StringIO()
    stack.enter_context(contextlib.redirect_stdout(sink))
    stack.enter_context(contextlib.redirect_stderr(sink))
    return stack


def test_score(program: dspy.Module, shape: Shape) -> Row:
    """Our evaluation of `program` on the test rows, through its own fresh fake server."""
    with FakeOpenAIServer(NoChangeModel(shape.policy), latency_s=0.0) as server, quietly():
        report = evaluate_program(program, shape.test, exact, threads=1,
                                  lm=LM(MODEL, api_base=server.url, max_retries=0))  # fmt: skip
        requests = server.requests
    return {"test": report.mean, "test_correct": int(sum(r.score for r in report.records)),
            "test_requests": requests, "test_errors": report.n_errors}  # fmt: skip


def run_method(method: str, ctx: Context) -> Row:
    row: Row = {"shape": ctx.shape.name, "method": method, "budget": ctx.budget}
    model = NoChangeModel(ctx.shape.policy)
    with FakeOpenAIServer(model, latency_s=0.0) as server:
        started = time.perf_counter()
        try:
            with quietly():
                program, figures = METHODS[method](ctx, server)
        except Exception as exc:  # a method that cannot run is a result to report
            row["error"] = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
            row["requests"] = server.requests
            row["over_budget"] = server.requests > ctx.budget
            return row
        row["seconds"] = round(time.perf_counter() - started, 2)
        row["requests"] = server.requests
    row["over_budget"] = row["requests"] > ctx.budget
    row["optimizer_requests"] = model.optimizer_calls
    row.update(figures)
    row["state"] = program_state(program)
    row.update(test_score(program, ctx.shape))
    return row


def student_row(shape: Shape) -> Row:
    row: Row = {"shape": shape.name, "method": "student (no search)", "budget": None,
                "requests": 0, "over_budget": False}  # fmt: skip
    row.update(test_score(shape.make(), shape))
    row["calls_per_rollout"] = row["test_requests"] / len(shape.test)
    return row


def table_row(row: Row, student: Row) -> list[Any]:
    test = "-"
    if "test_correct" in row:
        test = f"{student['test']:.4g} -> {row['test']:.4g}"
    note = row.get("error") or row.get("stop") or row.get("setting") or ""
    if row.get("unreached"):
        note += f"; unreached {row['unreached']}"
    return [row["shape"], row["method"], row["budget"], test, row["requests"],
            "YES" if row["over_budget"] else "no", row.get("seconds"), note[:110]]  # fmt: skip


SHAPES: dict[str, tuple[Callable[[], dspy.Module], Callable[..., dict[str, Any]], int]] = {
    "parses_reply": (ParsesItsReply, add_one, 60),
    "program_of_thought": (program_of_thought, pot_policy, 150),
    "branch": (Router, half_right, 70),
}
"""name: (program, FAKE target policy, budget of the docs/dspy.md row)."""


def main() -> None:
    global THREADS
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", nargs="+", default=list(SHAPES), choices=list(SHAPES))
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS))
    parser.add_argument("--gepa-share", type=float, default=0.8,
                        help="GEPA max_metric_calls = share x budget / calls a rollout")  # fmt: skip
    parser.add_argument("--threads", type=int, default=1, help="SkillOptimizer's threads")
    parser.add_argument("--name", default="dspy_wild")
    parser.add_argument("--note", default="", help="a line kept with the results")
    args = parser.parse_args()
    THREADS = args.threads
    logging.basicConfig(level=logging.WARNING)
    dspy.disable_logging()
    started = time.perf_counter()
    results: list[Row] = []
    lines: list[list[Any]] = []
    for name in args.shapes:
        make, policy, budget = SHAPES[name]
        shape = Shape(name, make, policy, sums(1, 8), sums(21, 8), sums(41, 16))
        student = student_row(shape)
        results.append(student)
        lines.append(table_row(student, student))
        for method in args.methods:
            ctx = Context(shape, budget, student["calls_per_rollout"], args.gepa_share)
            results.append(run_method(method, ctx))
            lines.append(table_row(results[-1], student))
    seconds = time.perf_counter() - started
    print_table(
        "DSPy programs as they fail in the wild, on a counting fake server (train/val/test "
        "8/8/16; requests = server-counted during compile; test = student -> compiled)",
        ["shape", "method", "budget", "test", "requests", "over budget", "compile s",
         "stop / setting / error"],
        lines,
    )  # fmt: skip
    print(f"\n{seconds:.0f} s")
    write_results(args.name, {
        "git_commit": git_commit(), "note": args.note, "dspy": dspy.__version__,
        "gepa_share": args.gepa_share, "threads": args.threads, "seconds": round(seconds, 1),
        "runs": results,
    })  # fmt: skip


if __name__ == "__main__":
    main()
