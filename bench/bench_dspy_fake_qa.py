"""SkillOptimizer vs dspy.GEPA on `dspy.ChainOfThought("question -> answer")` QA, against the
same counting FAKE server (issue 24, item 2), in seconds and offline.

The FAKE target is the one of tests/test_dspy_search.py (`addition_policy` through
`obedient_chat_model`): it knows every sum and writes it in a sentence ("The sum is 27.") unless
its instructions say the answer is "one word", when it writes the bare number. The metric is
exact match, so the untouched program scores 0 and the one fix that matters is an answer-shape
rule.

The same fake also answers every optimizer call, with a FAKE reflector that has the same
knowledge for both methods: asked to improve the instructions, it writes the fix
"Answer with one word: the bare number." in the form each method parses (nothing more, and
nothing when the instructions already say "one word"):

- ours (`ReflectiveProposer`'s system prompt "You improve a skill document"): the edit JSON,
  one `Add` of the rule; our plain-rule prompt ("You write one rule"): the rule; our
  consolidation prompt: no edits;
- dspy.GEPA 3.4 (its default `InstructionProposer`: `dspy.Predict(ProposeInstruction)` through
  a `JSONAdapter`, system prompt "I provided an assistant with instructions to perform a task"):
  `{"new_instruction": <the current instruction with the rule appended>}`. (The ``` block form
  is the `gepa` package's own template, used by `gepa.optimize`, not by `dspy.GEPA`.)

`--reflector none` rows show where each method's gain comes from when the reflector proposes
nothing: ours gets `{"edits": []}` to every optimizer prompt (as in the test), GEPA gets its
current instruction back unchanged.

Splits as in the test: train rows n=0..9, val n=100..111, test n=200..219 ("What is n plus
n+7?"). Each run gets its own `FakeOpenAIServer` (latency 0), so "requests" are counted at the
server: target rollouts, reflection calls, adapter retries, everything during compile. The
compiled program is then scored on the 20 test rows with our `evaluate_program` through a
second fresh fake server (outside the budget; those requests are reported apart).

Run from the repository root:

    PYTHONPATH=$PWD python bench/bench_dspy_fake_qa.py

Writes bench/results/dspy_fake_qa.json.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import logging
import re
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import dspy
from _common import git_commit, print_table, write_results

from skillopt_dsl.dspy import SkillOptimizer, evaluate_program
from skillopt_dsl.lm import LM, Budget
from skillopt_dsl.testing.fake_server import FakeOpenAIServer
from tests.test_dspy_proposals import obedient_chat_model
from tests.test_dspy_search import OPTIMIZER_SYSTEMS, addition_policy, rows

RULE = "Answer with one word: the bare number."
OUR_REFLECTION = "You improve a skill document"
OUR_PLAIN_RULE = "You write one rule"
GEPA_REFLECTION = "I provided an assistant with instructions to perform a task"
_CURRENT = re.compile(r"\[\[ ## current_instruction ## \]\]\n(.*?)\n\n\[\[ ## ", re.S)
MODEL = "openai/fake-target"


def states_the_rule(document: str) -> bool:
    """The fake target's own test: the instructions say the answer is "one word"."""
    return "one word" in document.lower()


def fake_reflector(messages: list[dict[str, str]], proposes: bool) -> str | None:
    """The FAKE reflector's reply to an optimizer call of either method (None: not one).

    `proposes=False`: it proposes nothing (no edits; GEPA gets its instruction back)."""
    system, user = messages[0]["content"], messages[-1]["content"]
    if GEPA_REFLECTION in system:
        found = _CURRENT.search(user)
        if found is None:
            raise ValueError("dspy.GEPA's reflection request has no current_instruction field")
        current = found.group(1).strip()
        new = current if not proposes or states_the_rule(current) else f"{current}\n\n{RULE}"
        return json.dumps({"new_instruction": new})
    if not system.startswith(OPTIMIZER_SYSTEMS):
        return None
    document = user.partition("# Document\n")[2].split("\n# ", 1)[0]
    if not proposes or states_the_rule(document):
        return '{"edits": []}'
    if system.startswith(OUR_PLAIN_RULE):
        return RULE
    if system.startswith(OUR_REFLECTION):
        edit = {"kind": "add", "after": None, "text": RULE, "rationale": "answers are bare numbers"}
        return json.dumps({"edits": [edit]})
    return '{"edits": []}'  # consolidation: nothing to merge


class FakeModel:
    """One FAKE model: the reflector for optimizer calls, the addition target otherwise.
    `optimizer_calls` counts the requests the reflector answered."""

    def __init__(self, proposes: bool) -> None:
        self.proposes, self.optimizer_calls = proposes, 0
        self._target = obedient_chat_model(addition_policy)
        self._lock = threading.Lock()

    def __call__(self, messages: list[dict[str, str]]) -> str:
        reply = fake_reflector(messages, self.proposes)
        if reply is None:
            return self._target(messages)
        with self._lock:
            self.optimizer_calls += 1
        return reply


def exact(gold: Any, pred: Any, trace: Any = None, pred_name: Any = None,
          pred_trace: Any = None) -> float:  # fmt: skip
    """Exact match (the test's metric, in the five-argument form dspy.GEPA requires)."""
    return float(str(pred.answer).strip().lower() == str(gold.answer).lower())


@dataclass(frozen=True)
class Splits:
    train: list[Any]
    val: list[Any]
    test: list[Any]


Compile = Callable[[FakeOpenAIServer, Splits], tuple[Any, dict[str, Any]]]
"""Compile the program against the server; returns (compiled program, figures)."""


@dataclass(frozen=True)
class Method:
    name: str
    reflector: str  # "rule" or "none"
    compile: Compile


def compile_ours(budget: int) -> Compile:
    def run(server: FakeOpenAIServer, splits: Splits) -> tuple[Any, dict[str, Any]]:
        tele = SkillOptimizer(exact, lm=LM(MODEL, api_base=server.url, max_retries=0),
                              budget=Budget(max_calls=budget), threads=1)  # fmt: skip
        compiled = tele.compile(dspy.ChainOfThought("question -> answer"), trainset=splits.train,
                                valset=splits.val)  # fmt: skip
        result = compiled.skillopt.predictors["predict"].result
        return compiled, {
            "setting": f"Budget(max_calls={budget})",
            "decisions": len(result.gate_log),
            "accepted": sum(1 for d in result.gate_log if d.accepted),
            "val": result.val_score, "seed_val": result.seed_val_score,
            "stop": result.stop_reason, "ledger_calls": compiled.skillopt.usage.calls,
            "warnings": list(compiled.skillopt.warnings),
        }  # fmt: skip

    return run


def compile_gepa(metric_calls: int) -> Compile:
    def run(server: FakeOpenAIServer, splits: Splits) -> tuple[Any, dict[str, Any]]:
        def dspy_lm() -> dspy.LM:
            return dspy.LM(MODEL, api_base=server.url, api_key="sk-fake", cache=False,
                           num_retries=0)  # fmt: skip

        with dspy.context(lm=dspy_lm()):
            tele = dspy.GEPA(metric=exact, max_metric_calls=metric_calls,
                             reflection_lm=dspy_lm(), num_threads=1, seed=0, track_stats=True)  # fmt: skip
            compiled = tele.compile(dspy.ChainOfThought("question -> answer"),
                                    trainset=splits.train, valset=splits.val)  # fmt: skip
        results = compiled.detailed_results
        return compiled, {
            "setting": f"max_metric_calls={metric_calls}",
            "candidates": len(results.candidates),
            "val": results.val_aggregate_scores[results.best_idx],
            "seed_val": results.val_aggregate_scores[0],
            "metric_calls": results.total_metric_calls,
        }  # fmt: skip

    return run


def instructions(program: dspy.Module) -> dict[str, str]:
    return {name: p.signature.instructions for name, p in program.named_predictors()}


def test_score(program: dspy.Module, splits: Splits, proposes: bool) -> dict[str, Any]:
    """Our evaluation of `program` on the test rows, through its own fresh fake server."""
    with FakeOpenAIServer(FakeModel(proposes), latency_s=0.0) as server:
        report = evaluate_program(program, splits.test, exact, threads=1,
                                  lm=LM(MODEL, api_base=server.url, max_retries=0))  # fmt: skip
        requests = server.requests
    correct = int(sum(r.score for r in report.records))
    return {"test": report.mean, "test_correct": correct, "test_requests": requests,
            "test_errors": report.n_errors}  # fmt: skip


def run_method(method: Method, splits: Splits) -> dict[str, Any]:
    proposes = method.reflector == "rule"
    row: dict[str, Any] = {"method": method.name, "reflector": method.reflector}
    model = FakeModel(proposes)
    with FakeOpenAIServer(model, latency_s=0.0) as server:
        started = time.perf_counter()
        try:
            quiet = io.StringIO()  # dspy's and GEPA's progress bars
            with contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet):
                program, figures = method.compile(server, splits)
        except Exception as exc:  # a method that cannot run is a result to report
            row["error"] = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
            row["requests"] = server.requests
            return row
        row["seconds"] = round(time.perf_counter() - started, 2)
        row["requests"] = server.requests
    row["optimizer_requests"] = model.optimizer_calls
    row.update(figures)
    row["instructions"] = instructions(program)
    row.update(test_score(program, splits, proposes))
    return row


def methods(budgets: Sequence[int], gepa_calls: Sequence[int]) -> list[Method]:
    """The student, ours at each budget, dspy.GEPA at each setting, then both at their largest
    setting with a reflector that proposes nothing."""
    return [
        Method("student (no search)", "rule", lambda server, splits: (
            dspy.ChainOfThought("question -> answer"), {"setting": "-"})),
        *(Method("SkillOptimizer", "rule", compile_ours(b)) for b in budgets),
        *(Method("dspy.GEPA", "rule", compile_gepa(n)) for n in gepa_calls),
        Method("SkillOptimizer", "none", compile_ours(max(budgets))),
        Method("dspy.GEPA", "none", compile_gepa(max(gepa_calls))),
    ]  # fmt: skip


def table_row(row: dict[str, Any], test_size: int) -> list[Any]:
    gate = f"{row['accepted']}/{row['decisions']}" if "decisions" in row else "-"
    test = f"{row['test_correct']}/{test_size}" if "test_correct" in row else "-"
    text = " | ".join(row.get("instructions", {}).values())
    shown = re.sub(r"\s+", " ", text)[-60:] if text else row.get("error", "")
    return [row["method"], row["reflector"], row.get("setting"), row["requests"],
            row.get("optimizer_requests"), gate,
            row.get("val"), test, row.get("seconds"), shown]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budgets", type=int, nargs="+", default=[28, 32, 40],
                        help="SkillOptimizer Budget(max_calls=...) settings")  # fmt: skip
    parser.add_argument("--gepa-metric-calls", type=int, nargs="+", default=[20, 30, 38, 40, 44],
                        help="dspy.GEPA max_metric_calls settings (reflection calls are extra)")  # fmt: skip
    parser.add_argument("--out", default="dspy_fake_qa")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    dspy.disable_logging()
    splits = Splits(rows(0, 10), rows(100, 12), rows(200, 20))
    results = [run_method(m, splits) for m in methods(args.budgets, args.gepa_metric_calls)]
    headers = ["method", "reflector", "setting", "requests", "of which optimizer",
               "gate acc/dec", "val", "test", "compile s", "instructions (end)"]  # fmt: skip
    for row in results:
        if row["method"] != "student (no search)" and not row.get("optimizer_requests"):
            logging.warning("%s %s: the fake reflector answered none of its requests (it never "
                            "reflected, or the reflector no longer recognizes its prompt: then the "
                            "row is not a fair comparison)", row["method"], row.get("setting"))  # fmt: skip
    print_table("ChainOfThought QA on a counting fake server (train 10, val 12, test 20; "
                "requests = server-counted during compile)", headers,
                [table_row(r, len(splits.test)) for r in results])  # fmt: skip
    write_results(args.out, {
        "git_commit": git_commit(), "dspy": dspy.__version__, "rule": RULE,
        "splits": {"train": "n=0..9", "val": "n=100..111", "test": "n=200..219"},
        "budgets": args.budgets, "gepa_metric_calls": args.gepa_metric_calls,
        "runs": results,
    })  # fmt: skip


if __name__ == "__main__":
    main()
