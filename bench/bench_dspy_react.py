"""SkillOptimizer vs dspy.GEPA vs dspy.MIPROv2 on `dspy.ReAct` with two Python tools, calls
counted at a FAKE server (issue 36, item 1), in seconds and offline.

The program: `dspy.ReAct("question -> answer", tools=[lookup, cities_in_country])` on the
invented city table of `skillopt_dsl.benchmarks.table_lookup`, DSPy's default `ChatAdapter`.
Two kinds of question, by position in each split:

- every fourth: "Which country is <city> in?" — the agent calls `lookup`, then `finish`, then
  ReAct's extract step answers: 3 model calls a rollout;
- the others: "How many people live in <city>, <country>?" — `cities_in_country`, `lookup`,
  `finish`, extract: 4 model calls a rollout.

The FAKE target (`obedient_chat_model` of tests/test_dspy_proposals.py) plays every step and
always knows the right value; it writes a population as a sentence ("About 12,345 people live
in ...") unless an instruction says the answer is a "bare number" (`--trigger`) — in the
extract step's own instructions, or in the agent step's (its last thought then says so, and
the extract step reads the trajectory). The metric is exact match, so the untouched program
answers only the country questions (4 of 15 test rows: 27 %) and one rule takes it to 100 %.
With `--trigger "one word"` our label-derived format rule ("The answer is one word, ...") is
enough too, without a model call.

The FAKE reflector answers each method's optimizer calls with the same knowledge: the rule
"Answer with one word: the bare number." in the form each method parses (ours: an `Add` edit,
or the plain rule; dspy.GEPA: `{"new_instruction": ...}`), nothing once the instructions state
it. MIPROv2's grounded proposer gets the rule appended to the instruction it is shown
(`proposed_instruction`), and bland text for its program, module and data summaries.

Methods, each on its own fresh counting `FakeOpenAIServer` (latency 0), at every budget B of
`--budgets` (server-counted calls: target rollouts, reflection, proposals, adapter retries):

- `SkillOptimizer(exact, budget=Budget(max_calls=B), threads=1)` — the checkout's defaults;
- `SkillOptimizer(Bundle)`: the same with `optimizer=Bundle()` (`--methods`);
- `dspy.GEPA`: `max_metric_calls` = `--gepa-share` x B / (server calls a rollout, measured on
  the student's test pass), reflection by the same fake, seed 0;
- `dspy.MIPROv2`: auto=None, 2 instruction candidates, 1 bootstrapped + 2 labelled demos,
  minibatch=False, trials scaled to B (at least 1); it cannot be given a call budget;
- `SkillOptimizer` on `dspy.Parallel` (`--parallel`): one `ChainOfThought` predictor called
  twice a rollout through `dspy.Parallel` (the addition QA of bench_dspy_fake_qa).

Reported: test accuracy (our `evaluate_program` through a second fresh server, outside the
budget), gate decisions (ours), server requests during compile and whether they exceeded B,
our pre-flight warnings. Run from the repository root:

    python bench/bench_dspy_react.py --budgets 40 100 200 --parallel

Writes bench/results/dspy_react.json (`--name`).
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
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import dspy
from _common import git_commit, print_table, write_results
from bench_dspy_fake_qa import (
    _CURRENT,
    GEPA_REFLECTION,
    OUR_PLAIN_RULE,
    OUR_REFLECTION,
    RULE,
    exact,
)

from skillopt_dsl.benchmarks.table_lookup import CITIES, lookup
from skillopt_dsl.dspy import SkillOptimizer, evaluate_program
from skillopt_dsl.lm import LM, Budget
from skillopt_dsl.optimizers import Bundle, Optimizer
from skillopt_dsl.testing.fake_server import FakeOpenAIServer
from tests.test_dspy_proposals import obedient_chat_model
from tests.test_dspy_search import OPTIMIZER_SYSTEMS
from tests.test_dspy_search import rows as addition_rows

MODEL = "openai/fake-target"
TRIGGER = "bare number"
"""What an instruction must say for the fake target to write bare values (`--trigger`): "bare
number" is said by the reflector's rule alone; "one word" also by our label-derived format rule
("The answer is one word, ...", no model call), as in bench_dspy_fake_qa."""
MAX_ITERS = 4
Row = dict[str, Any]


def cities_in_country(country: str) -> list[str]:
    """List the cities of a country in the table.

    Args:
        country: the country's name, e.g. "Velland".
    """
    wanted = country.strip().lower()
    return [c for c in CITIES if str(lookup(c)["country"]).lower() == wanted]


def react_program() -> dspy.Module:
    return dspy.ReAct("question -> answer", tools=[lookup, cities_in_country],
                      max_iters=MAX_ITERS)  # fmt: skip


class Twice(dspy.Module):
    """One `ChainOfThought` predictor called twice a rollout through `dspy.Parallel`."""

    def __init__(self) -> None:
        super().__init__()
        self.answer = dspy.ChainOfThought("question -> answer")

    def forward(self, question: str) -> Any:
        ask = dspy.Example(question=question).with_inputs("question")
        first, second = dspy.Parallel(num_threads=1)([(self.answer, ask), (self.answer, ask)])
        return first if first.answer == second.answer else second


# -- the task and the FAKE target ----------------------------------------------------------------

_COUNTRY_Q = re.compile(r"Which country is (\w+) in\?")
_PEOPLE_Q = re.compile(r"How many people live in (\w+), (\w+)\?")


def question_rows(start: int, count: int) -> list[dspy.Example]:
    """Rows about cities `start..start+count-1` of the table: every fourth a country question."""
    out = []
    for i, city in enumerate(CITIES[start : start + count]):
        row = lookup(city)
        if i % 4 == 0:
            question, answer = f"Which country is {city} in?", str(row["country"])
        else:
            question, answer = (
                f"How many people live in {city}, {row['country']}?",
                str(row["population"]),
            )
        out.append(dspy.Example(question=question, answer=answer).with_inputs("question"))
    return out


def plan(question: str) -> list[tuple[str, dict[str, str]]]:
    """The tool calls the fake agent makes before `finish`."""
    if found := _COUNTRY_Q.search(question):
        return [("lookup", {"city": found.group(1)})]
    if found := _PEOPLE_Q.search(question):
        city, country = found.groups()
        return [("cities_in_country", {"country": country}), ("lookup", {"city": city})]
    return []


def react_policy(system: str, inputs: dict[str, str], wanted: list[str]) -> dict[str, Any]:
    """The FAKE ReAct target: the agent step, the extract step, MIPROv2's proposer steps."""
    body, question = inputs["_body"], inputs.get("question", "")
    if "next_tool_name" in wanted:
        steps, done = plan(question), len(re.findall(r"\[\[ ## observation_\d+ ## \]\]", body))
        if done < len(steps):
            tool, args = steps[done]
            return {"next_thought": f"I call {tool}.", "next_tool_name": tool,
                    "next_tool_args": args}  # fmt: skip
        thought = "I have what I need."
        if states_the_rule(system):
            thought += f" The answer is a {TRIGGER}."
        return {"next_thought": thought, "next_tool_name": "finish", "next_tool_args": {}}
    if "answer" in wanted:
        return {"reasoning": "From the tool results.",
                "answer": answer_for(question, bare=states_the_rule(system + body))}  # fmt: skip
    return mipro_values(inputs, wanted)


def answer_for(question: str, *, bare: bool) -> str:
    if found := _COUNTRY_Q.search(question):
        return str(lookup(found.group(1))["country"])
    if found := _PEOPLE_Q.search(question):
        people = int(lookup(found.group(1))["population"])  # type: ignore[call-overload]
        return str(people) if bare else f"About {people:,} people live in {found.group(1)}."
    return "unknown"


def mipro_values(inputs: dict[str, str], wanted: list[str]) -> dict[str, Any]:
    """MIPROv2's grounded proposer: the rule appended to the instruction it shows; bland text
    for its summaries (and "COMPLETE" to end its dataset observations)."""
    values: dict[str, Any] = {}
    for name in wanted:
        if name == "proposed_instruction":
            basic = inputs.get("basic_instruction", "").strip()
            values[name] = basic if states_the_rule(basic) else f"{basic}\n\n{RULE}"
        elif name == "observations":
            values[name] = "COMPLETE"
        else:
            values[name] = "Questions about cities, answered with a table lookup tool."
    return values


def addition_policy(system: str, inputs: dict[str, str], wanted: list[str]) -> dict[str, str]:
    """The FAKE addition target (bench_dspy_fake_qa's), with `TRIGGER` as its rule test."""
    a, b = map(int, re.findall(r"\d+", inputs["question"]))
    answer = str(a + b) if states_the_rule(system) else f"The sum is {a + b}."
    return {"reasoning": f"{a} plus {b}.", "answer": answer}


def states_the_rule(document: str) -> bool:
    return TRIGGER in document.lower()


def fake_reflector(messages: list[dict[str, str]]) -> str | None:
    """The FAKE reflector's reply to an optimizer call of ours or dspy.GEPA (None: not one):
    `RULE`, in the form each parses, unless the instructions already state it."""
    system, user = messages[0]["content"], messages[-1]["content"]
    if GEPA_REFLECTION in system:
        found = _CURRENT.search(user)
        if found is None:
            raise ValueError("dspy.GEPA's reflection request has no current_instruction field")
        current = found.group(1).strip()
        new = current if states_the_rule(current) else f"{current}\n\n{RULE}"
        return json.dumps({"new_instruction": new})
    if not system.startswith(OPTIMIZER_SYSTEMS):
        return None
    document = user.partition("# Document\n")[2].split("\n# ", 1)[0]
    if states_the_rule(document):
        return '{"edits": []}'
    if system.startswith(OUR_PLAIN_RULE):
        return RULE
    if system.startswith(OUR_REFLECTION):
        edit = {"kind": "add", "after": None, "text": RULE, "rationale": "answers are bare values"}
        return json.dumps({"edits": [edit]})
    return '{"edits": []}'  # consolidation: nothing to merge


class FakeModel:
    """The FAKE server's model: the reflector for optimizer calls, the target otherwise."""

    def __init__(self, policy: Callable[..., dict[str, Any]]) -> None:
        self._target = obedient_chat_model(policy)
        self._lock = threading.Lock()
        self.optimizer_calls = 0

    def __call__(self, messages: list[dict[str, str]]) -> str:
        reply = fake_reflector(messages)
        if reply is None and "proposed_instruction" in messages[-1]["content"]:
            reply = self._target(messages)
        elif reply is None:
            return self._target(messages)
        with self._lock:
            self.optimizer_calls += 1
        return reply


# -- the methods ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Shape:
    name: str
    make: Callable[[], dspy.Module]
    policy: Callable[..., dict[str, Any]]
    train: list[dspy.Example]
    val: list[dspy.Example]
    test: list[dspy.Example]


@dataclass(frozen=True)
class Context:
    shape: Shape
    budget: int
    calls_per_rollout: float
    gepa_share: float


def dspy_lm(server: FakeOpenAIServer) -> dspy.LM:
    return dspy.LM(MODEL, api_base=server.url, api_key="sk-fake", cache=False, num_retries=0)


def run_ours(
    ctx: Context, server: FakeOpenAIServer, optimizer: Optimizer | None = None
) -> tuple[dspy.Module, Row]:
    tele = SkillOptimizer(exact, lm=LM(MODEL, api_base=server.url, max_retries=0),
                          budget=Budget(max_calls=ctx.budget), threads=1,
                          optimizer=optimizer)  # fmt: skip
    compiled = tele.compile(ctx.shape.make(), trainset=ctx.shape.train, valset=ctx.shape.val)
    out = compiled.skillopt
    per = {}
    for name, p in out.predictors.items():
        per[name] = {"decisions": len(p.result.gate_log),
                     "accepted": sum(1 for d in p.result.gate_log if d.accepted),
                     "calls": p.result.usage.calls, "stop": p.result.stop_reason,
                     "preflight": None if p.result.preflight is None
                     else p.result.preflight.statement()}  # fmt: skip
    return compiled, {
        "setting": f"Budget(max_calls={ctx.budget})",
        "decisions": sum(v["decisions"] for v in per.values()),
        "accepted": sum(v["accepted"] for v in per.values()),
        "val": out.val_score, "seed_val": out.seed_val_score, "stop": out.stop_reason,
        "ledger_calls": out.usage.calls, "untrained": list(out.untrained),
        "warnings": list(out.warnings), "predictors": per,
    }  # fmt: skip


def run_gepa(ctx: Context, server: FakeOpenAIServer) -> tuple[dspy.Module, Row]:
    metric_calls = max(1, int(ctx.gepa_share * ctx.budget / ctx.calls_per_rollout))
    with dspy.context(lm=dspy_lm(server)):
        tele = dspy.GEPA(metric=exact, max_metric_calls=metric_calls,
                         reflection_lm=dspy_lm(server), num_threads=1, seed=0, track_stats=True)  # fmt: skip
        compiled = tele.compile(ctx.shape.make(), trainset=ctx.shape.train,
                                valset=ctx.shape.val)  # fmt: skip
    results = compiled.detailed_results
    return compiled, {
        "setting": f"max_metric_calls={metric_calls}",
        "candidates": len(results.candidates),
        "val": results.val_aggregate_scores[results.best_idx],
        "seed_val": results.val_aggregate_scores[0],
        "metric_calls": results.total_metric_calls,
    }  # fmt: skip


def run_mipro(ctx: Context, server: FakeOpenAIServer) -> tuple[dspy.Module, Row]:
    val_cost = ctx.calls_per_rollout * len(ctx.shape.val)
    trials = max(1, int(ctx.gepa_share * ctx.budget / val_cost) - 1)
    with dspy.context(lm=dspy_lm(server)):
        tele = dspy.MIPROv2(metric=exact, prompt_model=dspy_lm(server), task_model=dspy_lm(server),
                            auto=None, num_candidates=2, num_threads=1, max_bootstrapped_demos=1,
                            max_labeled_demos=2, verbose=False, seed=0)  # fmt: skip
        compiled = tele.compile(ctx.shape.make(), trainset=ctx.shape.train, valset=ctx.shape.val,
                                num_trials=trials, minibatch=False,
                                requires_permission_to_run=False)  # fmt: skip
    score = getattr(compiled, "score", None)  # DSPy's Evaluate reports a percentage
    return compiled, {"setting": f"num_trials={trials}, num_candidates=2",
                      "val": None if score is None else score / 100}  # fmt: skip


METHODS: dict[str, Callable[[Context, FakeOpenAIServer], tuple[dspy.Module, Row]]] = {
    "SkillOptimizer": run_ours,
    "SkillOptimizer(Bundle)": lambda ctx, server: run_ours(ctx, server, Bundle()),
    "dspy.GEPA": run_gepa,
    "dspy.MIPROv2": run_mipro,
}


def program_state(program: dspy.Module) -> dict[str, Any]:
    return {name: {"instructions": p.signature.instructions, "demos": len(p.demos)}
            for name, p in program.named_predictors()}  # fmt: skip


def test_score(program: dspy.Module, shape: Shape) -> Row:
    """Our evaluation of `program` on the test rows, through its own fresh fake server."""
    quiet = io.StringIO()  # dspy.Parallel's progress bars
    with (
        FakeOpenAIServer(FakeModel(shape.policy), latency_s=0.0) as server,
        contextlib.redirect_stdout(quiet),
        contextlib.redirect_stderr(quiet),
    ):
        report = evaluate_program(program, shape.test, exact, threads=1,
                                  lm=LM(MODEL, api_base=server.url, max_retries=0))  # fmt: skip
        requests = server.requests
    return {"test": report.mean, "test_correct": int(sum(r.score for r in report.records)),
            "test_requests": requests, "test_errors": report.n_errors}  # fmt: skip


def run_method(method: str, ctx: Context) -> Row:
    row: Row = {"shape": ctx.shape.name, "method": method, "budget": ctx.budget}
    model = FakeModel(ctx.shape.policy)
    with FakeOpenAIServer(model, latency_s=0.0) as server:
        started = time.perf_counter()
        try:
            quiet = io.StringIO()  # dspy's and GEPA's progress bars
            with contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet):
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


def available(method: str) -> bool:
    return method.startswith("SkillOptimizer") or hasattr(dspy, method.removeprefix("dspy."))


def student_row(shape: Shape) -> Row:
    row: Row = {"shape": shape.name, "method": "student (no search)", "budget": None,
                "requests": 0, "over_budget": False}  # fmt: skip
    row.update(test_score(shape.make(), shape))
    row["calls_per_rollout"] = row["test_requests"] / len(shape.test)
    return row


def table_row(row: Row, test_size: int) -> list[Any]:
    gate = f"{row['accepted']}/{row['decisions']}" if "decisions" in row else "-"
    test = f"{row['test_correct']}/{test_size}" if "test_correct" in row else "-"
    note = row.get("error") or row.get("stop") or row.get("setting") or ""
    if row.get("warnings"):
        note += f"; warned: {row['warnings'][0][:60]}"
    return [row["shape"], row["method"], row["budget"], test, row.get("test"), gate,
            row["requests"], "YES" if row["over_budget"] else "no", row.get("seconds"),
            note[:110]]  # fmt: skip


def shapes(args: argparse.Namespace) -> list[Shape]:
    n_train, n_val, n_test = args.sizes
    out = [Shape("react", react_program, react_policy, question_rows(0, n_train),
                 question_rows(n_train, n_val), question_rows(n_train + n_val, n_test))]  # fmt: skip
    if args.parallel:
        out.append(Shape("parallel", Twice, addition_policy, addition_rows(0, n_train),
                         addition_rows(100, n_val), addition_rows(200, n_test)))  # fmt: skip
    return out


def main() -> None:
    global TRIGGER
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budgets", type=int, nargs="+", default=[40, 100, 200])
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS))
    parser.add_argument("--sizes", type=int, nargs=3, default=(10, 12, 15),
                        metavar=("TRAIN", "VAL", "TEST"))  # fmt: skip
    parser.add_argument("--gepa-share", type=float, default=0.8,
                        help="GEPA max_metric_calls = share x budget / calls a rollout")  # fmt: skip
    parser.add_argument("--parallel", action="store_true",
                        help="also SkillOptimizer on a dspy.Parallel program (one predictor twice)")  # fmt: skip
    parser.add_argument("--trigger", choices=["bare number", "one word"], default="bare number",
                        help="what an instruction must say for bare answers (see TRIGGER)")  # fmt: skip
    parser.add_argument("--name", default="dspy_react")
    parser.add_argument("--note", default="", help="a line kept with the results")
    args = parser.parse_args()
    TRIGGER = args.trigger
    logging.basicConfig(level=logging.WARNING)
    dspy.disable_logging()
    started = time.perf_counter()
    results: list[Row] = []
    for shape in shapes(args):
        student = student_row(shape)
        results.append(student)
        methods = args.methods if shape.name == "react" else ["SkillOptimizer"]
        for budget in args.budgets:
            for method in methods:
                if not available(method):
                    results.append({"shape": shape.name, "method": method, "budget": budget,
                                    "requests": 0, "over_budget": False,
                                    "error": "not available in this dspy"})  # fmt: skip
                    continue
                ctx = Context(shape, budget, student["calls_per_rollout"], args.gepa_share)
                results.append(run_method(method, ctx))
    seconds = time.perf_counter() - started
    for row in results:
        if row.get("budget") and "error" not in row and not row.get("optimizer_requests"):
            logging.warning("%s %s at %s: the fake reflector answered none of its requests (it "
                            "never reflected, or no longer recognizes its prompt: then the row "
                            "is not a fair comparison)", row["shape"], row["method"],
                            row["budget"])  # fmt: skip
    n_test = args.sizes[2]
    print_table(
        f"DSPy ReAct (two tools) and Parallel on a counting fake server (train/val/test "
        f"{'/'.join(map(str, args.sizes))}; requests = server-counted during compile)",
        ["shape", "method", "budget", "test", "acc", "gate acc/dec", "requests", "over budget",
         "compile s", "stop / setting / error"],
        [table_row(r, n_test) for r in results],
    )  # fmt: skip
    print(f"\n{seconds:.0f} s")
    write_results(args.name, {
        "git_commit": git_commit(), "note": args.note, "dspy": dspy.__version__, "rule": RULE,
        "trigger": TRIGGER,
        "sizes": args.sizes, "budgets": args.budgets, "gepa_share": args.gepa_share,
        "seconds": round(seconds, 1), "runs": results,
    })  # fmt: skip


if __name__ == "__main__":
    main()
