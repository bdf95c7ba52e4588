"""Bench 3c: SkillOptimizer vs dspy.GEPA vs dspy.MIPROv2 on four DSPy program shapes, calls
counted at the server.

The four programs are written the way DSPy's tutorials write them, all run with DSPy's default
`ChatAdapter` (the same shapes as tests/test_dspy_proposals.py, here on real shipped data):

1. `classify`: a typed classifier, `dspy.Predict` on a Signature class with a `Literal` output
   (`customer_feedback`: positive / negative);
2. `cot`: `dspy.ChainOfThought("question -> answer")` QA (`arithmetic_2_digit_addition`);
3. `multihop`: two `ChainOfThought` predictors (`generate_query`: question -> query;
   `generate_answer`: context, question -> answer) and a Python search step over the
   `table_lookup` table between them;
4. `react`: `dspy.ReAct("question -> answer", tools=[lookup, cities_in_country])` on
   `table_lookup`.

Every request (target, reflection, instruction proposal, test) goes through our `LM` (via
`bridge_lm` for DSPy's optimizers) pointed at an in-process counting proxy (`bench/qwen_proxy.py`)
in front of the server, so the calls each method made are counted AT the server. Methods:

- `student`: the untouched program (no search);
- `SkillOptimizer`: `SkillOptimizer(metric, optimizer=GradientText(), budget=Budget(max_calls=B),
  threads=1)`, reflection by the same model, the program's own ChatAdapter;
- `SkillOptimizer(default)`: the same without `optimizer=`: compile's default search for each
  predictor's module kind (issue 55: a ReAct predictor gets the agent's proposers);
- `SkillOptimizer+demos`: the same with `demos=True` (each predictor's demos trained and gated
  with its instructions, compiled into `predictor.demos`);
- `dspy.GEPA`: `max_metric_calls` = share x B / (server calls per rollout, measured on the
  student's test run), reflection_lm = the same model, seed 0; its actual calls are reported;
- `dspy.MIPROv2`: auto=None, num_candidates=2, num_trials=2, 1 bootstrapped + 2 labelled demos,
  prompt_model = the same model; its actual calls are reported and flagged above B.

Each program is then scored on test with our `evaluate_program`, outside the budget (those calls
are counted separately). A compiled program whose state (instructions and demos) equals the
student's reuses the student's test score (temperature 0: the same calls would be repeated).

Run (server started by `bench/qwen_model.sh serve 8812`):

    python bench/bench_dspy_shapes.py --api-base http://127.0.0.1:8812/v1 \
        --model openai/qwen2.5-coder-0.5b-instruct --budget 50 --sizes 10 12 20 \
        --shapes classify cot multihop react \
        --methods student SkillOptimizer SkillOptimizer+demos dspy.GEPA dspy.MIPROv2 \
        --out dspy_shapes_qwen
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import re
import signal
import subprocess
import time
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import dspy
from _common import print_table, write_results
from qwen_proxy import CountingProxy

from skillopt_dsl.benchmarks import load_benchmark
from skillopt_dsl.benchmarks.table_lookup import CITIES, lookup
from skillopt_dsl.dspy import SkillOptimizer, bridge_lm, evaluate_program
from skillopt_dsl.lm import LM, Budget, SamplingParams
from skillopt_dsl.metrics import Score, exact_match, numeric
from skillopt_dsl.optimizers import GradientText
from skillopt_dsl.types import Example, Prediction

Row = dict[str, Any]

# -- the four program shapes -------------------------------------------------------------------


class FeedbackKind(dspy.Signature):
    """Classify the customer feedback as positive or negative."""

    question: str = dspy.InputField()
    answer: Literal["positive", "negative"] = dspy.OutputField()


def classifier() -> dspy.Module:
    return dspy.Predict(FeedbackKind)


def chain_of_thought() -> dspy.Module:
    return dspy.ChainOfThought("question -> answer")


def _row_text(city: str) -> str:
    row = lookup(city)
    return (f"{row['city']}: country {row['country']}, population {row['population']}, "
            f"founded {row['founded']}")  # fmt: skip


def search(query: str, k: int = 2) -> str:
    """The multi-hop search step: the `k` table rows whose city name best matches a word of the
    query (difflib ratio), one row a line."""
    words = [w.lower() for w in re.findall(r"[A-Za-z]+", str(query))]

    def closeness(city: str) -> float:
        return max((difflib.SequenceMatcher(None, w, city.lower()).ratio() for w in words),
                   default=0.0)  # fmt: skip

    best = sorted(CITIES, key=lambda c: -closeness(c))[:k]
    return "\n".join(_row_text(c) for c in best)


class MultiHop(dspy.Module):
    def __init__(self) -> None:
        super().__init__()
        self.generate_query = dspy.ChainOfThought("question -> query")
        self.generate_answer = dspy.ChainOfThought("context, question -> answer")

    def forward(self, question: str) -> Any:
        query = self.generate_query(question=question).query
        context = search(query)
        return self.generate_answer(context=context, question=question)


def cities_in_country(country: str) -> list[str]:
    """List the cities of a country in the table.

    Args:
        country: the country's name, e.g. "Velland".
    """
    wanted = country.strip().lower()
    return [c for c in CITIES if lookup(c)["country"].lower() == wanted]


REACT_MAX_ITERS = 4


def react() -> dspy.Module:
    return dspy.ReAct("question -> answer", tools=[lookup, cities_in_country],
                      max_iters=REACT_MAX_ITERS)  # fmt: skip


# -- metrics: the benchmark's own comparison, with its feedback ---------------------------------


def make_metric(field_metric: Any) -> tuple[Callable[..., Any], Callable[..., float]]:
    """(feedback metric for SkillOptimizer and GEPA, float metric for MIPROv2), both from one of
    our field metrics (exact_match: casefold/strip/trailing period; numeric: first number)."""

    def score(gold: Any, pred: Any) -> Any:
        value = getattr(pred, "answer", None)
        example = Example("x", {}, {"answer": gold.answer})
        if value is None:
            return Score(0.0, "The program gave no answer.")
        return field_metric(example, Prediction({"answer": str(value)}))

    def with_feedback(gold: Any, pred: Any, trace: Any = None, pred_name: Any = None,
                      pred_trace: Any = None) -> Any:  # fmt: skip
        s = score(gold, pred)
        return dspy.Prediction(score=float(s.value), feedback=s.feedback)

    def plain(gold: Any, pred: Any, trace: Any = None) -> float:
        return float(score(gold, pred).value)

    return with_feedback, plain


@dataclass(frozen=True)
class Shape:
    name: str
    task: str
    make: Callable[[], dspy.Module]
    field_metric: Any
    description: str
    constant_choices: tuple[str, ...] | None = None


SHAPES: dict[str, Shape] = {
    "classify": Shape("classify", "customer_feedback", classifier, exact_match("answer"),
                      "dspy.Predict(Signature with Literal['positive','negative'] output)",
                      ("positive", "negative")),
    "cot": Shape("cot", "arithmetic_2_digit_addition", chain_of_thought, numeric("answer"),
                 'dspy.ChainOfThought("question -> answer")'),
    "multihop": Shape("multihop", "table_lookup", MultiHop, exact_match("answer"),
                      "ChainOfThought(question -> query), Python search, "
                      "ChainOfThought(context, question -> answer)"),
    "react": Shape("react", "table_lookup", react, exact_match("answer"),
                   f'dspy.ReAct("question -> answer", tools=[lookup, cities_in_country], '
                   f"max_iters={REACT_MAX_ITERS})"),
}  # fmt: skip


def to_dspy(examples: list[Example]) -> list[dspy.Example]:
    return [dspy.Example(**e.inputs, answer=e.labels["answer"]).with_inputs(*e.inputs)
            for e in examples]  # fmt: skip


# -- models, all through the counting proxy ------------------------------------------------------


@dataclass(frozen=True)
class Setup:
    model: str
    api_base: str
    max_tokens: int
    reflection_max_tokens: int
    timeout_s: float


SETUP: Setup
PROXY: CountingProxy


def target_lm() -> LM:
    return LM(SETUP.model, params=SamplingParams(temperature=0.0, max_tokens=SETUP.max_tokens),
              max_concurrency=1, api_base=SETUP.api_base, timeout_s=SETUP.timeout_s)  # fmt: skip


def reflection_lm() -> LM:
    params = SamplingParams(temperature=0.0, max_tokens=SETUP.reflection_max_tokens)
    return LM(SETUP.model, params=params, max_concurrency=1, api_base=SETUP.api_base,
              timeout_s=SETUP.timeout_s)  # fmt: skip


def server_calls() -> int:
    return int(PROXY.count()["chat_completions"])


def server_errors() -> int:
    return int(PROXY.count()["errors"])


# -- the methods ---------------------------------------------------------------------------------


@dataclass
class Context:
    shape: Shape
    train: list[dspy.Example]
    val: list[dspy.Example]
    test: list[dspy.Example]
    budget: int
    calls_per_rollout: float | None = None


def run_student(ctx: Context) -> Row:
    return {"program": ctx.shape.make(), "ledger_calls": 0}


def run_ours(ctx: Context, *, demos: bool = False, default: bool = False) -> Row:
    metric, _ = make_metric(ctx.shape.field_metric)
    suffix = ("-demos" if demos else "") + ("-default" if default else "")
    run_dir = None if RUN_DIR is None else f"{RUN_DIR}/{ctx.shape.name}{suffix}"
    tele = SkillOptimizer(metric, optimizer=None if default else GradientText(), lm=target_lm(),
                          optimizer_lm=reflection_lm(), budget=Budget(max_calls=ctx.budget),
                          threads=1, run_dir=run_dir, demos=demos)  # fmt: skip
    compiled = tele.compile(ctx.shape.make(), trainset=ctx.train, valset=ctx.val)
    out = compiled.skillopt
    per = {name: {"seed_val": p.result.seed_val_score, "val": p.result.val_score,
                  "accepted": sum(1 for d in p.result.gate_log if d.accepted),
                  "decisions": len(p.result.gate_log), "calls": p.result.usage.calls,
                  "stop": p.result.stop_reason}
           for name, p in out.predictors.items()}  # fmt: skip
    accepted = sum(v["accepted"] for v in per.values())
    decisions = sum(v["decisions"] for v in per.values())
    return {"program": compiled, "val": out.val_score, "seed_val": out.seed_val_score,
            "ledger_calls": out.usage.calls, "tokens": out.usage.total_tokens,
            "stop": out.stop_reason, "untrained": list(out.untrained), "predictors": per,
            "accepted": accepted, "decisions": decisions,
            "note": f"{'default search' if default else 'GradientText() defaults'}"
                    f"{'; demos=True' if demos else ''}; "
                    f"gate {accepted}/{decisions}; stop {out.stop_reason}"
                    + (f"; untrained {', '.join(out.untrained)}" if out.untrained else "")}  # fmt: skip


GEPA_SHARE = 0.8
RUN_DIR: str | None = None
"""Where SkillOptimizer records its runs (events, candidates); None: not recorded."""


def run_gepa(ctx: Context) -> Row:
    metric, _ = make_metric(ctx.shape.field_metric)
    target, reflector = target_lm(), reflection_lm()
    reflector = reflector.with_ledger(target.ledger)
    per_rollout = ctx.calls_per_rollout or 1.0
    metric_calls = max(1, int(GEPA_SHARE * ctx.budget / per_rollout))
    with dspy.context(lm=bridge_lm(target)):
        tele = dspy.GEPA(metric=metric, max_metric_calls=metric_calls,
                         reflection_lm=bridge_lm(reflector), num_threads=1, seed=0,
                         track_stats=True)  # fmt: skip
        compiled = tele.compile(ctx.shape.make(), trainset=ctx.train, valset=ctx.val)
    results = getattr(compiled, "detailed_results", None)
    val = None
    if results is not None:
        val = results.val_aggregate_scores[results.best_idx]
    usage = target.ledger.snapshot()
    return {"program": compiled, "val": val, "ledger_calls": usage.calls,
            "tokens": usage.total_tokens, "max_metric_calls": metric_calls,
            "note": f"max_metric_calls={metric_calls} ({GEPA_SHARE} x budget / "
                    f"{per_rollout:.2f} calls per rollout); val = GEPA's own"}  # fmt: skip


def run_mipro(ctx: Context) -> Row:
    _, metric = make_metric(ctx.shape.field_metric)
    target, prompter = target_lm(), reflection_lm()
    prompter = prompter.with_ledger(target.ledger)
    with dspy.context(lm=bridge_lm(target)):
        tele = dspy.MIPROv2(metric=metric, prompt_model=bridge_lm(prompter),
                            task_model=bridge_lm(target), auto=None, num_candidates=2,
                            num_threads=1, max_bootstrapped_demos=1, max_labeled_demos=2,
                            verbose=False, seed=0)  # fmt: skip
        compiled = tele.compile(ctx.shape.make(), trainset=ctx.train, valset=ctx.val,
                                num_trials=2, minibatch=False,
                                requires_permission_to_run=False)  # fmt: skip
    usage = target.ledger.snapshot()
    score = getattr(compiled, "score", None)  # DSPy's Evaluate reports a percentage
    return {"program": compiled, "val": None if score is None else score / 100,
            "ledger_calls": usage.calls, "tokens": usage.total_tokens,
            "note": "auto=None, num_candidates=2, num_trials=2, 1 bootstrapped + 2 labelled "
                    "demos, minibatch=False; val = MIPRO's own"}  # fmt: skip


METHODS: dict[str, Callable[[Context], Row]] = {
    "student": run_student,
    "SkillOptimizer": run_ours,
    "SkillOptimizer(default)": lambda ctx: run_ours(ctx, default=True),
    "SkillOptimizer+demos": lambda ctx: run_ours(ctx, demos=True),
    "dspy.GEPA": run_gepa,
    "dspy.MIPROv2": run_mipro,
}

# -- scoring -------------------------------------------------------------------------------------


def program_state(program: dspy.Module) -> dict[str, Any]:
    """Each predictor's instructions and demos (what an optimizer may change)."""
    state: dict[str, Any] = {}
    for name, predictor in program.named_predictors():
        demos = [{k: str(v) for k, v in dict(d).items()} for d in predictor.demos]
        state[name] = {"instructions": predictor.signature.instructions, "demos": demos}
    return state


def constant_row(shape: Shape, val: list[dspy.Example], test: list[dspy.Example]) -> Row | None:
    """The best constant answer, chosen on val, scored on test (no model call)."""
    if not shape.constant_choices:
        return None
    _, plain = make_metric(shape.field_metric)

    def mean(label: str, rows: list[dspy.Example]) -> float:
        return sum(plain(g, dspy.Prediction(answer=label)) for g in rows) / len(rows)

    counts = Counter(str(e.answer) for e in val)
    label = max(shape.constant_choices, key=lambda c: (mean(c, val), counts[c]))
    return {"label": label, "val": mean(label, val), "test": mean(label, test),
            "test_correct": round(mean(label, test) * len(test))}  # fmt: skip


def score_on_test(program: dspy.Module, ctx: Context) -> dict[str, Any]:
    _, plain = make_metric(ctx.shape.field_metric)
    report = evaluate_program(program, ctx.test, plain, lm=target_lm(), threads=1)
    return {"test": report.mean, "test_correct": int(sum(r.score for r in report.records)),
            "test_errors": report.n_errors}  # fmt: skip


class WallLimit(Exception):
    """A method (or its test pass) ran past `--method-timeout-s`: stopped by us."""


METHOD_TIMEOUT_S = 0


def _cut(signum: int, frame: Any) -> None:
    raise WallLimit(f"stopped by us after {METHOD_TIMEOUT_S} s (--method-timeout-s)")


def run_method(name: str, ctx: Context, student_state: dict[str, Any] | None,
               student_score: dict[str, Any] | None) -> Row:  # fmt: skip
    row: Row = {"shape": ctx.shape.name, "task": ctx.shape.task, "method": name}
    before, errors_before = server_calls(), server_errors()
    started = time.perf_counter()
    signal.signal(signal.SIGALRM, _cut)
    signal.alarm(METHOD_TIMEOUT_S)  # 0: no limit
    try:
        row.update(METHODS[name](ctx))
    except Exception as exc:  # a method failing is a result to report, not a crash
        row["error"] = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
        row["traceback"] = traceback.format_exc()[-4000:]
    finally:
        signal.alarm(0)
    row["seconds"] = round(time.perf_counter() - started, 1)
    row["server_calls"] = server_calls() - before if name != "student" else 0
    row["server_errors"] = server_errors() - errors_before
    if name != "student" and row["server_calls"] > ctx.budget:
        row["over_budget"] = True
        row["note"] = row.get("note", "") + f"; EXCEEDS the {ctx.budget}-call budget"
    program = row.pop("program", None)
    if program is None:
        return row
    state = program_state(program)
    row["state"] = state
    if student_state is not None and student_score is not None and state == student_state:
        row.update(student_score)
        row["test_server_calls"] = 0
        row["test_note"] = "program identical to the student: its test score reused"
        return row
    before = server_calls()
    started = time.perf_counter()
    try:
        row.update(score_on_test(program, ctx))
    except Exception as exc:
        row["test_error"] = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
        row["test_traceback"] = traceback.format_exc()[-4000:]
    row["test_server_calls"] = server_calls() - before
    row["test_seconds"] = round(time.perf_counter() - started, 1)
    return row


def shell(*command: str) -> str:
    try:
        return subprocess.run(command, capture_output=True, text=True).stdout.strip()
    except OSError:
        return "unknown"


def git_commit() -> str:
    head = shell("git", "rev-parse", "--short", "HEAD")
    dirty = shell("git", "status", "--porcelain", "--untracked-files=no")
    return head + ("+dirty" if dirty else "")


def _students(path: str | None) -> dict[str, Row]:
    """The student rows of an earlier results file, by shape ({} without one)."""
    if path is None:
        return {}
    runs = json.loads(Path(path).read_text())["runs"]
    return {r["shape"]: r for r in runs if r["method"] == "student" and "test" in r}


def main() -> None:
    global SETUP, PROXY, GEPA_SHARE, RUN_DIR, METHOD_TIMEOUT_S
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--api-base", required=True, help="e.g. http://127.0.0.1:8812/v1")
    parser.add_argument("--model", default="openai/qwen2.5-coder-0.5b-instruct")
    parser.add_argument("--budget", type=int, default=50, help="server calls per search")
    parser.add_argument("--sizes", type=int, nargs=3, default=(10, 12, 20),
                        metavar=("TRAIN", "VAL", "TEST"))  # fmt: skip
    parser.add_argument("--sizes-for", nargs=4, action="append", default=[],
                        metavar=("SHAPE", "TRAIN", "VAL", "TEST"),
                        help="other split sizes for one shape (ReAct costs ~7 calls a rollout)")  # fmt: skip
    parser.add_argument("--shapes", nargs="+", default=list(SHAPES), choices=list(SHAPES))
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS))
    parser.add_argument("--max-tokens", type=int, default=256, help="target calls")
    parser.add_argument("--reflection-max-tokens", type=int, default=384)
    parser.add_argument("--timeout-s", type=float, default=1800.0)
    parser.add_argument("--gepa-share", type=float, default=GEPA_SHARE,
                        help="GEPA max_metric_calls = share x budget / calls per rollout")  # fmt: skip
    parser.add_argument("--run-dir", default=None,
                        help="record SkillOptimizer's runs here (one folder per shape)")  # fmt: skip
    parser.add_argument("--method-timeout-s", type=int, default=0,
                        help="stop a method's search after this many seconds (0: never)")  # fmt: skip
    parser.add_argument("--student-from", default=None,
                        help="a results file whose student rows (state, test score) to reuse: "
                        "same shapes, sizes, model and server settings")  # fmt: skip
    parser.add_argument("--out", default="dspy_shapes")
    args = parser.parse_args()
    GEPA_SHARE, RUN_DIR = args.gepa_share, args.run_dir
    METHOD_TIMEOUT_S = args.method_timeout_s
    reused = _students(args.student_from)
    PROXY = CountingProxy(args.api_base, timeout_s=args.timeout_s).start()
    SETUP = Setup(args.model, f"{PROXY.url}/v1", args.max_tokens, args.reflection_max_tokens,
                  args.timeout_s)  # fmt: skip
    sizes = tuple(args.sizes)
    shape_sizes = {s: sizes for s in args.shapes}
    for shape_name, *numbers in args.sizes_for:
        if shape_name not in SHAPES:
            parser.error(f"--sizes-for: unknown shape {shape_name!r}")
        shape_sizes[shape_name] = tuple(int(n) for n in numbers)
    figures: dict[str, Any] = {
        "started_utc": shell("date", "-u"), "git_commit": git_commit(),
        "uncommitted": [line[3:] for line in shell("git", "status", "--porcelain",
                                                   "--untracked-files=no").splitlines()],
        "model": args.model, "api_base": args.api_base, "budget_calls": args.budget,
        "sizes": sizes, "max_tokens": args.max_tokens,
        "reflection_max_tokens": args.reflection_max_tokens, "temperature": 0.0,
        "timeout_s": args.timeout_s, "gepa_share": args.gepa_share, "threads": 1,
        "dspy": dspy.__version__, "adapter": "ChatAdapter (DSPy default)",
        "shapes": {s: {"task": SHAPES[s].task, "program": SHAPES[s].description,
                       "sizes": shape_sizes[s]} for s in args.shapes},
        "constants": {}, "runs": [],
    }  # fmt: skip
    table: list[list[Any]] = []
    for shape_name in args.shapes:
        shape = SHAPES[shape_name]
        splits = load_benchmark(shape.task, seed=0, sizes=shape_sizes[shape_name])  # type: ignore[arg-type]
        ctx = Context(shape, to_dspy(splits.train), to_dspy(splits.val), to_dspy(splits.test),
                      args.budget)  # fmt: skip
        constant = constant_row(shape, ctx.val, ctx.test)
        if constant is not None:
            figures["constants"][shape_name] = constant
            table.append([shape_name, f"constant {constant['label']!r}", constant["val"],
                          constant["test"], f"{constant['test_correct']}/{len(ctx.test)}", 0,
                          0, "", ""])  # fmt: skip
        student_state: dict[str, Any] | None = None
        student_score: dict[str, Any] | None = None
        if shape_name in reused:
            row = reused[shape_name]
            student_state = row["state"]
            student_score = {k: row[k] for k in ("test", "test_correct", "test_errors")}
            ctx.calls_per_rollout = row["calls_per_rollout"]
            figures["runs"].append({**row, "reused_from": args.student_from})
        for method in args.methods:
            print(f"[{time.strftime('%H:%M:%S')}] {shape_name} {method} ...", flush=True)
            row = run_method(method, ctx, student_state, student_score)
            if method == "student" and "test" in row:
                student_state = row["state"]
                student_score = {k: row[k] for k in ("test", "test_correct", "test_errors")}
                ctx.calls_per_rollout = row["test_server_calls"] / len(ctx.test)
                row["calls_per_rollout"] = ctx.calls_per_rollout
            figures["runs"].append(row)
            figures["finished_utc"] = shell("date", "-u")
            figures.setdefault("load_average", []).append(os.getloadavg())
            write_results(args.out, figures)  # after every method: a killed run keeps its rows
            printable = {k: v for k, v in row.items() if k not in ("state", "traceback")}
            print(f"{shape_name} {method}: {json.dumps(printable, default=str)[:1500]}",
                  flush=True)  # fmt: skip
            if "traceback" in row:
                print(row["traceback"], flush=True)
            correct = row.get("test_correct")
            table.append([shape_name, method, row.get("val"), row.get("test"),
                          None if correct is None else f"{correct}/{len(ctx.test)}",
                          row.get("server_calls"), row.get("test_server_calls"),
                          row.get("seconds"),
                          (row.get("error") or row.get("test_error") or row.get("note")
                           or "")[:90]])  # fmt: skip
    print_table(
        f"DSPy program shapes (ChatAdapter): {args.model}, budget {args.budget} server calls, "
        f"splits {shape_sizes}",
        ["shape", "method", "val", "test", "correct", "search calls", "test calls", "wall s",
         "note / error"],
        table,
    )  # fmt: skip
    figures["finished_utc"] = shell("date", "-u")
    write_results(args.out, figures)
    PROXY.stop()


if __name__ == "__main__":
    main()
