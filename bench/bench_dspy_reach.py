"""DSPy programs as they are written (issue 52), on a counting FAKE server: SkillOptimizer,
dspy.GEPA and dspy.MIPROv2 on the shapes that reach a model by another path than the LM they
are given, or that sample, or that run async, or a ChainOfThought at 0 %.

Shapes (the programs and FAKE targets of tests/test_dspy_reach_calls.py):

- `context`: a second step under `dspy.context(lm=other)` inside `forward`;
- `keyword`: the second step given `lm=other` on its call;
- `two-step`: `dspy.TwoStepAdapter(extraction_model=other)`;
- `judge`: the metric asks a judge model (`dspy.context(lm=judge)` inside the metric);
- `best-of-n`: `dspy.BestOfN(N=3)` over a target whose first answer to a prompt is wrong;
- `acall`: `forward` runs two sub-calls with `acall` and `asyncio.gather`;
- `cot-demos`: `dspy.ChainOfThought` on a code-word task the target learns from demos only
  (0 % at the seed; ours with `demos=True`).

Every method gets budget B (`--budget`): ours as `Budget(max_calls=B)`; GEPA as
`max_metric_calls = 0.8 B / calls a rollout` (the student's test pass measures it); MIPROv2
auto=None, 2 candidates, 2 trials (it has no call budget). The other LMs are plain `dspy.LM`s
at the same server; every request any of them sends is counted there. Reported: requests at
the server during compile (and whether they exceed B), validation (each method's own), test
accuracy (our `evaluate_program` at the same server, after the compile's requests were
counted). The FAKE does not play `TwoStepAdapter`'s free-form first stage (its extraction
reads no answer): that row shows the budget only. Run from the repository root:

    python bench/bench_dspy_reach.py --budget 60

Writes bench/results/dspy_reach.json.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import dspy
from _common import git_commit, print_table, write_results

from skillopt_dsl.dspy import SkillOptimizer, evaluate_program
from skillopt_dsl.lm import LM, Budget
from skillopt_dsl.optimizers import DemonstrationsProposer, GradientText
from skillopt_dsl.testing.fake_server import FakeOpenAIServer
from tests.test_dspy_demos import reviews
from tests.test_dspy_proposals import obedient_chat_model
from tests.test_dspy_reach_calls import (
    Gathered,
    TwoModels,
    add_one,
    cot_demo_follower,
    exact,
    second_try_right,
    sums,
)

Row = dict[str, Any]
OPTIMIZER_SYSTEMS = ("You improve a skill document", "You edit a skill document", "You write")


def serve(target: Callable[[list[dict[str, str]]], str]) -> FakeOpenAIServer:
    def respond(messages: list[dict[str, str]]) -> str:
        if messages[0]["content"].startswith(OPTIMIZER_SYSTEMS):
            return '{"edits": []}'
        return target(messages)

    return FakeOpenAIServer(respond, latency_s=0.0)


def plain(server: FakeOpenAIServer, name: str) -> dspy.LM:
    return dspy.LM(f"openai/{name}", api_base=server.url, api_key="fake", cache=False,
                   num_retries=0)  # fmt: skip


class Verdict(dspy.Signature):
    """Is the answer the gold answer?"""

    question: str = dspy.InputField()
    answer: str = dspy.InputField()
    gold: str = dspy.InputField()
    verdict: bool = dspy.OutputField()


JUDGE: list[Any] = []  # the judge model of the server in use


def judged(gold: Any, pred: Any, trace: Any = None, *rest: Any) -> float:
    with dspy.context(lm=JUDGE[0]):
        verdict = dspy.Predict(Verdict)(question=gold.question, answer=pred.answer,
                                        gold=gold.answer).verdict  # fmt: skip
    return float(verdict)


def lenient(gold: Any, pred: Any, trace: Any = None, *rest: Any) -> float:
    return exact(gold, pred)


def cot_exact(gold: Any, pred: Any, trace: Any = None, *rest: Any) -> float:
    return float(pred.answer == gold.answer)


def best_of_n() -> dspy.Module:
    return dspy.BestOfN(dspy.Predict("question -> answer"), N=3,
                        reward_fn=lambda args, pred: float(pred.answer != "wrong"),
                        threshold=1.0)  # fmt: skip


def shapes() -> dict[str, tuple[Callable[[FakeOpenAIServer], dspy.Module], Any, Any, str]]:
    """name -> (program at a server, target, metric, data)."""
    chat = obedient_chat_model
    return {
        "context": (lambda s: TwoModels(plain(s, "other"), "context"), chat(add_one), lenient,
                    "sums"),
        "keyword": (lambda s: TwoModels(plain(s, "other"), "keyword"), chat(add_one), lenient,
                    "sums"),
        "two-step": (lambda s: dspy.Predict("question -> answer"), chat(add_one), lenient,
                     "sums"),
        "judge": (lambda s: dspy.Predict("question -> answer"), chat(add_one), judged, "sums"),
        "best-of-n": (lambda s: best_of_n(), None, lenient, "sums"),
        "acall": (lambda s: Gathered(), chat(add_one), lenient, "sums"),
        "cot-demos": (lambda s: dspy.ChainOfThought("review -> answer"), cot_demo_follower,
                      cot_exact, "reviews"),
    }  # fmt: skip


def data(kind: str) -> tuple[list[Any], list[Any], list[Any]]:
    if kind == "reviews":
        return reviews(0, 8), reviews(8, 16), reviews(30, 16)
    return sums(1, 8), sums(21, 8), sums(41, 8)


def target_of(name: str, target: Any) -> Any:
    return obedient_chat_model(second_try_right()) if target is None else target


def run(name: str, method: str, budget: int) -> Row:
    make, target, metric, kind = shapes()[name]
    train, val, test = data(kind)
    row: Row = {"shape": name, "method": method, "budget": budget}
    with serve(target_of(name, target)) as server:
        JUDGE[:] = [plain(server, "judge")]
        lm = plain(server, "target")
        adapter = dspy.TwoStepAdapter(plain(server, "extractor")) if name == "two-step" else None
        started = time.perf_counter()
        try:
            quiet = io.StringIO()
            with contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet):
                program, val_score = METHODS[method](make(server), lm, adapter, metric,
                                                     (train, val), budget)  # fmt: skip
        except Exception as exc:  # a method that cannot run is a row too
            row.update(error=f"{type(exc).__name__}: {exc}".splitlines()[0][:160],
                       requests=server.requests)  # fmt: skip
            return row
        row.update(requests=server.requests, val=val_score,
                   seconds=round(time.perf_counter() - started, 2))  # fmt: skip
        # the test pass at the same server (the program's own extra LMs point at it),
        # after the compile's requests were counted, outside any budget
        with dspy.context(adapter=adapter):
            report = evaluate_program(program, test, metric, threads=1,
                                      lm=LM("openai/target", api_base=server.url, max_retries=0))  # fmt: skip
        row["test"] = report.mean
    return row


def ours(program: Any, lm: Any, adapter: Any, metric: Any, rows: Any, budget: int) -> Any:
    optimizer = GradientText(lr=1.0, epochs=1, batch_size=8,
                             proposers=[DemonstrationsProposer(per_step=2)]) if isinstance(
        program, dspy.ChainOfThought) else None  # fmt: skip
    tele = SkillOptimizer(metric, lm=lm, budget=Budget(max_calls=budget), threads=1,
                          adapter=adapter, optimizer=optimizer,
                          demos=isinstance(program, dspy.ChainOfThought))  # fmt: skip
    compiled = tele.compile(program, trainset=rows[0], valset=rows[1])
    return compiled, compiled.skillopt.val_score


def gepa(program: Any, lm: Any, adapter: Any, metric: Any, rows: Any, budget: int) -> Any:
    def feedback(gold: Any, pred: Any, trace: Any = None, *rest: Any) -> Any:
        return dspy.Prediction(score=metric(gold, pred), feedback="compared with the gold answer")

    with dspy.context(lm=lm, adapter=adapter):
        tele = dspy.GEPA(metric=feedback, max_metric_calls=max(1, int(0.8 * budget / 2)),
                         reflection_lm=lm, num_threads=1, seed=0, track_stats=True)  # fmt: skip
        compiled = tele.compile(program, trainset=rows[0], valset=rows[1])
    results = getattr(compiled, "detailed_results", None)
    return compiled, None if results is None else results.val_aggregate_scores[results.best_idx]


def mipro(program: Any, lm: Any, adapter: Any, metric: Any, rows: Any, budget: int) -> Any:
    with dspy.context(lm=lm, adapter=adapter):
        tele = dspy.MIPROv2(metric=metric, prompt_model=lm, task_model=lm, auto=None,
                            num_candidates=2, num_threads=1, max_bootstrapped_demos=1,
                            max_labeled_demos=2, verbose=False, seed=0)  # fmt: skip
        compiled = tele.compile(program, trainset=rows[0], valset=rows[1], num_trials=2,
                                minibatch=False, requires_permission_to_run=False)  # fmt: skip
    score = getattr(compiled, "score", None)
    return compiled, None if score is None else score / 100


METHODS = {"SkillOptimizer": ours, "dspy.GEPA": gepa, "dspy.MIPROv2": mipro}


def react_rows(budgets: list[int], methods: list[str]) -> list[Row]:
    """`bench_dspy_react`'s ReAct (two tools) with costlier population questions: the agent
    calls `cities_in_country` three times first (6 requests a run where a country question
    takes 3; tests/test_dspy_react_share.py), each method at each budget."""
    import bench_dspy_react as react

    simple = react.plan

    def plan(question: str) -> list[tuple[str, dict[str, str]]]:
        steps = simple(question)
        return steps[:1] * 3 + steps[1:] if react._PEOPLE_Q.search(question) else steps

    react.plan, react.MAX_ITERS = plan, 10
    shape = react.Shape("react", react.react_program, react.react_policy,
                        react.question_rows(0, 10), react.question_rows(10, 12),
                        react.question_rows(22, 15))  # fmt: skip
    per = react.student_row(shape)["calls_per_rollout"]
    rows = []
    for budget in budgets:
        for method in methods:
            ctx = react.Context(shape, budget, per, 0.8)
            row = react.run_method(method, ctx)
            rows.append({"shape": "react (costly)", "method": method, "budget": budget,
                         "requests": row.get("requests"), "val": row.get("val"),
                         "test": row.get("test"), "error": row.get("error", ""),
                         "decisions": row.get("decisions")})  # fmt: skip
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=int, default=60)
    parser.add_argument("--shapes", nargs="+", default=list(shapes()))
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS))
    parser.add_argument("--react-budgets", type=int, nargs="*", default=[100, 150, 200, 250])
    parser.add_argument("--name", default="dspy_reach")
    args = parser.parse_args()
    rows = [run(s, m, args.budget) for s in args.shapes for m in args.methods]
    rows += react_rows(args.react_budgets, args.methods)
    table = [[r["shape"], r["method"], r["budget"], r.get("requests"),
              "YES" if (r.get("requests") or 0) > r["budget"] else "no",
              r.get("val"), r.get("test"), r.get("error", "")[:70]] for r in rows]  # fmt: skip
    print_table(
        f"DSPy shapes of issue 52 on a counting fake server (B = {args.budget})",
        ["shape", "method", "B", "requests", "over B", "val", "test", "error"],
        table,
    )
    write_results(args.name, {"commit": git_commit(), "budget": args.budget, "rows": rows})


if __name__ == "__main__":
    main()
