"""Bench 3: quality per model call on two shipped tasks with the embedded model.

Every method gets the same search budget of target+optimizer model calls (`--budget`), the same
embedded model (`local/smollm2-135m`, max 16 new tokens) as target and as reflection model, and
the same splits. The test split is scored afterwards for the chosen skill, outside the budget.
Methods: the seed skill, GradientText, Beam, Bundle, OptunaLR (skillopt_dsl); `gepa.optimize` with its
default adapter; microsoft/SkillOpt (`skillopt==0.2.0`) is probed and reported as runnable or not.

DSPy table (`--dspy`, needs the `[dspy]` extra): the two-predictor program of
recipes/dspy_local.py (ChainOfThought then Predict, `RawSkillAdapter`) on `sports_understanding`,
the same embedded model (max 48 new tokens), every call through our bridge and counted by our
ledger: `SkillOptimizer` (GradientText, Beam) under a hard `--dspy-budget` vs `dspy.GEPA`
(`max_metric_calls` = budget / 2 calls per rollout) and `dspy.MIPROv2` (small settings), which
cannot be given a hard call budget: the calls they actually made are reported, and flagged when
they exceed it. Test accuracy is our evaluation of each compiled program, after the search.

Run: `python bench/bench_quality.py [--budget 60] [--tasks navigate sports_understanding]
[--methods seed GradientText ...]`, or `python bench/bench_quality.py --dspy [methods]
[--dspy-budget 80]`. Slow: minutes per method.

Server mode (`--model openai/NAME --api-base http://127.0.0.1:8811/v1`): any OpenAI-compatible
server, e.g. the Qwen2.5-Coder-0.5B benchmark instrument started by `bench/qwen_model.sh serve`.
Every request goes through an in-process counting proxy (`bench/qwen_proxy.py`), so the calls
each method made are counted AT the server, reflection and proposal calls included. Our
optimizers run with their default proposers (reflection by the same model, `--optimizer-max-tokens`
new tokens); `gepa.optimize` gets the same model as target and reflector, temperature 0. The
seed skill's test score and the best constant answer (chosen on val, `skillopt_dsl.baselines`)
are reported beside each method; test is scored after the search, outside the budget.
"""

from __future__ import annotations

import argparse
import importlib
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from _common import optional, print_table, timer, write_results
from qwen_proxy import CountingProxy

import skillopt_dsl as sd
from skillopt_dsl.baselines import constant_baseline
from skillopt_dsl.benchmarks import load_benchmark
from skillopt_dsl.benchmarks.tasks import module_for
from skillopt_dsl.lm import LM, Budget, SamplingParams
from skillopt_dsl.optimizers import (
    Bundle,
    DemonstrationsProposer,
    FormatRuleProposer,
    GradientText,
    HandOff,
)
from skillopt_dsl.optimizers.proposers import default_proposers

MODEL = "local/smollm2-135m"
PARAMS = SamplingParams(max_tokens=16)
SIZES = (12, 12, 20)

Row = dict[str, Any]


@dataclass(frozen=True)
class Setup:
    """Which model every method runs on, and how (one per run of this script)."""

    model: str = MODEL
    api_base: str | None = None
    params: SamplingParams = PARAMS
    optimizer_params: SamplingParams = PARAMS
    threads: int = 2
    timeout_s: float | None = None
    """Per-request timeout (None: the LM default, 120 s). A 1-thread server on a loaded machine
    can take minutes for a 512-token reflection; a client timeout there makes the server do the
    abandoned work and then the retry, both counted."""
    default_proposers: bool = False
    """True: our optimizers use their default proposers (reflection included); False: the two
    that need no optimizer model (a 135M model cannot reflect)."""


SETUP = Setup()
PROXY: CountingProxy | None = None
RUNS_DIR: Path | None = None
"""`--runs-dir`: where our optimizers' run directories (event logs, gate records) are kept."""


def proposers() -> list[Any]:
    if SETUP.default_proposers:
        return default_proposers()
    return [FormatRuleProposer(), DemonstrationsProposer(per_step=2, max_demos=4)]


def target_lm() -> LM:
    return LM(SETUP.model, params=SETUP.params, max_concurrency=SETUP.threads,
              api_base=SETUP.api_base, timeout_s=SETUP.timeout_s)  # fmt: skip


def optimizer_lm() -> LM:
    return LM(SETUP.model, params=SETUP.optimizer_params, max_concurrency=SETUP.threads,
              api_base=SETUP.api_base, timeout_s=SETUP.timeout_s)  # fmt: skip


def server_calls() -> int | None:
    """Chat completions that reached the server so far (None without a counting proxy)."""
    return None if PROXY is None else int(PROXY.count()["chat_completions"])


@contextmanager
def counted_at_server(row: Row, key: str) -> Iterator[None]:
    """Store in `row[key]` the server-counted calls made inside the block."""
    before = server_calls()
    try:
        yield
    finally:
        after = server_calls()
        if before is not None and after is not None:
            row[key] = after - before


_TEST_SCORES: dict[tuple[str, str], float] = {}


def test_mean(module: sd.SkillModule, skill: str, test: list[Any]) -> float:
    """Test accuracy of `skill`, computed once per (task, skill text) and reused."""
    key = (type(module).__name__ + ":" + ",".join(e.id for e in test), skill)
    if key not in _TEST_SCORES:
        report = sd.evaluate(module, test, skill=skill, lm=target_lm(), threads=SETUP.threads,
                             progress=False)  # fmt: skip
        _TEST_SCORES[key] = report.mean
    return _TEST_SCORES[key]


def ours(optimizer_factory: Callable[[], Any]) -> Callable[..., Row]:
    def run(module: sd.SkillModule, splits: Any, budget: int) -> Row:
        run_dir = None if RUNS_DIR is None else RUNS_DIR / f"{type(module).__name__}-{budget}"
        result = sd.compile(
            module, splits.train, splits.val, optimizer=optimizer_factory(), lm=target_lm(),
            optimizer_lm=optimizer_lm(), budget=Budget(max_calls=budget), threads=SETUP.threads,
            run_dir=run_dir,
        )  # fmt: skip
        return {
            "gate_log": [_decision_summary(d) for d in result.gate_log],
            "run_dir": None if run_dir is None else str(run_dir),
            "val": result.val_score,
            "seed_val": result.seed_val_score,
            "skill": result.best_skill.text,
            "calls": result.usage.calls,
            "tokens": result.usage.total_tokens,
            "stop": result.stop_reason,
            "decisions": len(result.gate_log),
            "accepted": sum(1 for d in result.gate_log if d.accepted),
        }

    return run


def _decision_summary(decision: Any) -> Row:
    """What a gate decision saw: scores, examples, the look it stopped or was accepted at."""
    return {
        "accepted": decision.accepted, "candidate": decision.candidate_score,
        "incumbent": decision.incumbent_score, "examples": decision.examples_scored,
        "stopped_at_look": decision.stopped_at_look, "accepted_at_look": decision.accepted_at_look,
        "p_value": decision.p_value, "reason": decision.reason,
    }  # fmt: skip


def seed_only(module: sd.SkillModule, splits: Any, budget: int) -> Row:
    lm = target_lm()
    report = sd.evaluate(module, splits.val, lm=lm, threads=SETUP.threads, progress=False)
    usage = lm.ledger.snapshot()
    skill = module.seed_skill.text
    return {"val": report.mean, "skill": skill, "calls": usage.calls, "tokens": usage.total_tokens}


def optuna_lr() -> Any:
    module = importlib.import_module("skillopt_dsl.optimizers.optuna_lr")
    inner = GradientText(lr=0.3, epochs=1, batch_size=8, proposers=proposers())
    return module.OptunaLR(inner=inner, n_trials=3, plots=False, seed=0)


def beam() -> Any:
    module = importlib.import_module("skillopt_dsl.optimizers.beam")
    return module.Beam(width=2, expansions=2, depth=2, proposers=proposers())


def hand_off() -> Any:
    """`compile`'s default: GradientText (as the GradientText row runs it), handing the run to
    Bundle where its screens show only small effects."""
    first = GradientText(lr=0.3, epochs=2, batch_size=8, proposers=proposers())
    return HandOff(first=first, then=Bundle(proposers=proposers()))


def bundle() -> Any:
    module = importlib.import_module("skillopt_dsl.optimizers.bundle")
    return module.Bundle(proposers=proposers())


def gepa_run(module: sd.SkillModule, splits: Any, budget: int) -> Row:
    gepa = optional("gepa")
    if gepa is None:
        raise RuntimeError("gepa is not installed")
    from gepa.adapters.default_adapter.default_adapter import DefaultAdapter, EvaluationResult

    from skillopt_dsl.lm.local import register_local_provider

    register_local_provider()
    lm = target_lm()
    reflector = optimizer_lm().with_ledger(lm.ledger)

    def rollout(messages: list[dict[str, str]]) -> str:
        return lm.complete(messages).text  # counted in our ledger, same model and params

    def evaluator(data: dict[str, Any], response: str) -> Any:
        example = data["additional_context"]["example"]
        score = sd.metrics.call_metric(module.metric_fn, example, module.parse(response))
        return EvaluationResult(score=score.value, feedback=score.feedback, objective_scores=None)

    def reflect(prompt: str) -> str:
        return reflector.complete([{"role": "user", "content": prompt}]).text

    def data(examples: list[Any]) -> list[dict[str, Any]]:
        rendered = [module.render(module.seed_skill, e)[-1]["content"] for e in examples]
        return [{"input": r, "answer": "", "additional_context": {"example": e}}
                for r, e in zip(rendered, examples, strict=True)]  # fmt: skip

    adapter = DefaultAdapter(model=rollout, evaluator=evaluator)
    metric_calls = GEPA_METRIC_SHARE(budget)
    result = gepa.optimize(
        seed_candidate={"system_prompt": module.seed_skill.text},
        trainset=data(splits.train), valset=data(splits.val), adapter=adapter,
        reflection_lm=reflect, max_metric_calls=metric_calls, seed=0, display_progress_bar=False,
    )  # fmt: skip
    best = result.best_candidate["system_prompt"]
    usage = lm.ledger.snapshot()
    val_score = result.val_aggregate_scores[result.best_idx]
    return {"val": val_score, "skill": best, "calls": usage.calls, "tokens": usage.total_tokens,
            "note": f"max_metric_calls={metric_calls} (reflection calls are extra); val is "
                    "gepa's own score of its best candidate"}  # fmt: skip


GEPA_METRIC_SHARE: Callable[[int], int] = lambda budget: budget  # noqa: E731
"""gepa's `max_metric_calls` for a budget: the whole budget by default (its reflection calls
come on top); server mode sets a share so that its server-counted calls match the budget."""


# -- DSPy: one two-predictor DSPy program, four optimizers, one call budget on our ledger -------

DSPY_TASK = "sports_understanding"
DSPY_PARAMS = SamplingParams(max_tokens=48)
DSPY_SIZES = (10, 12, 20)


def dspy_recipe() -> Any:
    """recipes/dspy_local.py as a module: the same program and metric the recipe trains."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "recipes" / "dspy_local.py"
    spec = importlib.util.spec_from_file_location("dspy_local_recipe", path)
    assert spec is not None and spec.loader is not None
    recipe = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = recipe  # its annotations resolve in its own namespace
    spec.loader.exec_module(recipe)
    return recipe


def dspy_lm(ledger: Any = None) -> LM:
    return LM(MODEL, params=DSPY_PARAMS, max_concurrency=2, ledger=ledger)


def dspy_ours(factory: Callable[[], Any]) -> Callable[..., Row]:
    def run(recipe: Any, splits: Any, budget: int) -> Row:
        from skillopt_dsl.dspy import RawSkillAdapter, SkillOptimizer

        tele = SkillOptimizer(recipe.exact_answer, optimizer=factory(), lm=dspy_lm(),
                              budget=Budget(max_calls=budget), adapter=RawSkillAdapter(),
                              predictors=["decide", "assess.predict"], threads=2)  # fmt: skip
        compiled = tele.compile(recipe.SportsProgram(), trainset=splits.train, valset=splits.val)
        result = compiled.skillopt
        return {"program": compiled, "val": result.val_score, "calls": result.usage.calls,
                "tokens": result.usage.total_tokens, "stop": result.stop_reason}  # fmt: skip

    return run


def dspy_native(kind: str) -> Callable[..., Row]:
    """dspy.GEPA / dspy.MIPROv2 on the same program and model, every call through our bridge
    into one unlimited ledger (a budget stop inside them would be scored as a failure), given
    the budget in their own units; the calls they actually made are reported."""

    def run(recipe: Any, splits: Any, budget: int) -> Row:
        import dspy

        from skillopt_dsl.dspy import RawSkillAdapter, bridge_lm
        from skillopt_dsl.lm import UsageLedger

        ledger = UsageLedger()
        lm = bridge_lm(dspy_lm(ledger))
        train = [dspy.Example(**e.inputs, **e.labels).with_inputs(*e.inputs) for e in splits.train]
        val = [dspy.Example(**e.inputs, **e.labels).with_inputs(*e.inputs) for e in splits.val]
        calls_per_rollout = 2  # ChainOfThought then Predict
        with dspy.context(lm=lm, adapter=RawSkillAdapter()):
            if kind == "GEPA":

                def metric(gold: Any, pred: Any, trace: Any = None, *rest: Any) -> float:
                    return recipe.exact_answer(gold, pred)

                tele = dspy.GEPA(metric=metric, max_metric_calls=budget // calls_per_rollout,
                                 reflection_lm=lm, num_threads=2, seed=0)  # fmt: skip
                compiled = tele.compile(recipe.SportsProgram(), trainset=train, valset=val)
                note = f"max_metric_calls={budget // calls_per_rollout} (reflection calls extra)"
            else:
                tele = dspy.MIPROv2(metric=recipe.exact_answer, auto=None, num_candidates=2,
                                    num_threads=2, max_bootstrapped_demos=1,
                                    max_labeled_demos=2, verbose=False, seed=0)  # fmt: skip
                compiled = tele.compile(recipe.SportsProgram(), trainset=train, valset=val,
                                        num_trials=2, minibatch=False)  # fmt: skip
                note = "num_candidates=2, num_trials=2, 1 bootstrapped + 2 labelled demos"
        usage = ledger.snapshot()
        over = f"; EXCEEDS the {budget}-call budget" if usage.calls > budget else ""
        return {"program": compiled, "val": None, "calls": usage.calls,
                "tokens": usage.total_tokens, "note": note + over}  # fmt: skip

    return run


DSPY_METHODS: dict[str, Callable[..., Row]] = {
    "SkillOptimizer(GradientText)": dspy_ours(
        lambda: GradientText(lr=0.3, epochs=1, batch_size=6, proposers=proposers())
    ),
    "SkillOptimizer(Beam)": dspy_ours(beam),
    "dspy.GEPA": dspy_native("GEPA"),
    "dspy.MIPROv2": dspy_native("MIPROv2"),
}


def dspy_comparison(budget: int, methods: list[str]) -> list[Row]:
    """The DSPy table: test accuracy (our evaluation, after the search) and calls made."""
    from skillopt_dsl.dspy import RawSkillAdapter, evaluate_program

    recipe = dspy_recipe()
    splits = load_benchmark(DSPY_TASK, seed=0, sizes=DSPY_SIZES)
    rows: list[Row] = []
    for name in ["student", *methods]:
        started = time.perf_counter()
        try:
            row = ({"program": recipe.SportsProgram(), "calls": 0} if name == "student"
                   else DSPY_METHODS[name](recipe, splits, budget))  # fmt: skip
            program = row.pop("program")
            row["test"] = evaluate_program(program, splits.test, recipe.exact_answer,
                                           lm=dspy_lm(), adapter=RawSkillAdapter(),
                                           threads=2).mean  # fmt: skip
            row["instructions"] = {n: p.signature.instructions
                                   for n, p in program.named_predictors()}  # fmt: skip
        except Exception as exc:  # a competitor failing is a result to report, not a crash
            row = {"error": f"{type(exc).__name__}: {exc}".splitlines()[0]}
        row["seconds"] = time.perf_counter() - started
        row["method"] = name
        rows.append(row)
        print(f"dspy {name}: {row}", flush=True)
    return rows


def skillopt_probe() -> str:
    """Install microsoft/SkillOpt in a throwaway venv and import its model router."""
    import shutil
    import tempfile

    venv = tempfile.mkdtemp(prefix="skillopt-probe-")
    try:
        steps = [[sys.executable, "-m", "venv", venv],
                 [f"{venv}/bin/pip", "install", "-q", "skillopt==0.2.0"],
                 [f"{venv}/bin/python", "-c", "import skillopt.model.router as r; "
                  "print([m.__name__ for m in r._all_backend_modules()])"]]  # fmt: skip
        for step in steps:
            proc = subprocess.run(step, capture_output=True, text=True, timeout=600)
            if proc.returncode != 0:
                tail = (proc.stderr or proc.stdout).strip().splitlines()[-2:]
                return f"failed at {step[-1]!r}: {' | '.join(tail)}"
        return f"installs and imports; model backends: {proc.stdout.strip()[:300]}"
    finally:
        shutil.rmtree(venv, ignore_errors=True)


METHODS: dict[str, Callable[..., Row]] = {
    "seed": seed_only,
    "GradientText": ours(
        lambda: GradientText(lr=0.3, epochs=2, batch_size=8, proposers=proposers())
    ),
    "Beam": ours(beam),
    "Bundle": ours(bundle),
    "HandOff": ours(hand_off),
    "OptunaLR": ours(optuna_lr),
    "gepa.optimize": gepa_run,
}
DEFAULT_METHODS = list(METHODS)


def main() -> None:
    global SETUP, PROXY, GEPA_METRIC_SHARE, RUNS_DIR
    parser = argparse.ArgumentParser()
    parser.add_argument("--budget", type=int, nargs="+", default=[60],
                        help="search budget(s) in calls; several run one after another per "
                             "task, sharing the seed's test score")  # fmt: skip
    parser.add_argument("--tasks", nargs="+", default=["navigate", "sports_understanding"])
    parser.add_argument("--methods", nargs="+", default=DEFAULT_METHODS, choices=list(METHODS))
    parser.add_argument("--skip-skillopt-probe", action="store_true")
    parser.add_argument("--dspy", nargs="*", default=None, choices=list(DSPY_METHODS),
                        help="run only the DSPy-program table (all four methods when empty)")  # fmt: skip
    parser.add_argument("--dspy-budget", type=int, default=80)
    parser.add_argument("--model", default=MODEL,
                        help="litellm model string, e.g. openai/qwen2.5-coder-0.5b-instruct")  # fmt: skip
    parser.add_argument("--api-base", default=None,
                        help="the server's URL (e.g. http://127.0.0.1:8811/v1): server mode")  # fmt: skip
    parser.add_argument("--sizes", type=int, nargs=3, default=None, metavar=("TRAIN", "VAL", "TEST"),
                        help=f"split sizes (default {SIZES}; server mode 30 30 60)")  # fmt: skip
    parser.add_argument("--max-tokens", type=int, default=None,
                        help="target model's max new tokens (default 16; server mode 24)")  # fmt: skip
    parser.add_argument("--optimizer-max-tokens", type=int, default=512)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--timeout-s", type=float, default=1800.0,
                        help="server mode: per-request timeout (a slow server must not be retried)")  # fmt: skip
    parser.add_argument("--gepa-metric-share", type=float, default=1.0,
                        help="gepa max_metric_calls = share x budget (its reflection calls are "
                             "on top; pick the share that makes server-counted calls equal)")  # fmt: skip
    parser.add_argument("--runs-dir", type=Path, default=None,
                        help="keep each of our runs' run directory (events.jsonl, gate log) "
                             "under this folder")  # fmt: skip
    parser.add_argument(
        "--out", default=None, help="results name (default quality / quality_server)"
    )
    args = parser.parse_args()
    RUNS_DIR = args.runs_dir
    if args.dspy is not None:
        main_dspy(args.dspy_budget, args.dspy or list(DSPY_METHODS))
        return
    server = args.api_base is not None
    sizes = tuple(args.sizes) if args.sizes else ((30, 30, 60) if server else SIZES)
    target = SamplingParams(max_tokens=args.max_tokens or (24 if server else PARAMS.max_tokens))
    share = args.gepa_metric_share
    GEPA_METRIC_SHARE = lambda budget: max(1, int(budget * share))  # noqa: E731
    if server:
        PROXY = CountingProxy(args.api_base, timeout_s=args.timeout_s).start()
        SETUP = Setup(model=args.model, api_base=f"{PROXY.url}/v1", params=target,
                      optimizer_params=replace(target, max_tokens=args.optimizer_max_tokens),
                      threads=args.threads, timeout_s=args.timeout_s,
                      default_proposers=True)  # fmt: skip
    else:
        SETUP = Setup(model=args.model, params=target, optimizer_params=target,
                      threads=args.threads)  # fmt: skip
    name = args.out or ("quality_server" if server else "quality")
    rows: list[list[Any]] = []
    figures: dict[str, Any] = {
        "budget_calls": args.budget[0] if len(args.budget) == 1 else args.budget, "model": args.model, "api_base": args.api_base,
        "sizes": sizes, "max_tokens": target.max_tokens, "git_commit": git_commit(), "uncommitted": uncommitted_files(),
        "optimizer_max_tokens": SETUP.optimizer_params.max_tokens, "runs": [],
    }  # fmt: skip
    for task in args.tasks:
        splits = load_benchmark(task, seed=0, sizes=sizes)  # type: ignore[arg-type]
        module = module_for(task)
        constant = constant_baseline(module, splits.val, splits.test)
        seed_test = test_mean(module, module.seed_skill.text, splits.test)
        figures.setdefault("baselines", {})[task] = {
            "seed_test": seed_test, "constant": None if constant is None else constant.to_dict(),
        }  # fmt: skip
        label = "none (no label set)" if constant is None else repr(constant.label)
        const_test = None if constant is None else constant.test_score
        rows.append([task, f"constant {label}", None if constant is None else constant.val_score,
                     const_test, 0, 0, "", "", ""])  # fmt: skip
        for budget, method in ((b, m) for b in args.budget for m in args.methods):
            row = run_method(method, module_for(task), splits, budget)
            row["seed_test"], row["constant_test"] = seed_test, const_test
            figures["runs"].append({"task": task, "method": method, "budget": budget, **row})
            write_results(name, figures)  # after every method: a killed run keeps what it measured
            rows.append([task, method, row.get("val"), row.get("test"),
                         row.get("server_calls", row.get("calls")), row.get("tokens"),
                         _decisions(row), row.get("seconds"), row.get("error", "")[:60]])  # fmt: skip
            print(f"{task} {method}: {row}", flush=True)
    if not args.skip_skillopt_probe and not server:
        figures["skillopt_0_2_0"] = skillopt_probe()
    calls = "server-counted calls" if server else "calls"
    print_table(
        f"Quality per call: {args.model}, search budget {args.budget} calls, splits {sizes}",
        ["task", "method", "val", "test", calls, "tokens", "accepted/decisions", "wall s", "error"],
        rows,
    )
    if not server:
        print(f"microsoft/SkillOpt 0.2.0: {figures.get('skillopt_0_2_0', 'not probed')}")
    write_results(name, figures)
    if PROXY is not None:
        PROXY.stop()


def _decisions(row: Row) -> str:
    return "" if "decisions" not in row else f"{row['accepted']}/{row['decisions']}"


def uncommitted_files() -> list[str]:
    """Tracked files that differ from the commit measured (a shared working tree)."""
    try:
        out = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                             capture_output=True, text=True).stdout  # fmt: skip
    except OSError:
        return []
    return [line[3:] for line in out.splitlines() if line.strip()]


def git_commit() -> str:
    """The commit measured (with `+dirty` when the working tree differs from it)."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()  # fmt: skip
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True).stdout.strip()  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")


def main_dspy(budget: int, methods: list[str]) -> None:
    rows = dspy_comparison(budget, methods)
    print_table(
        f"DSPy program ({DSPY_TASK}, ChainOfThought then Predict, RawSkillAdapter): {MODEL}, "
        f"max {DSPY_PARAMS.max_tokens} new tokens, budget {budget} calls, splits {DSPY_SIZES}",
        ["method", "val", "test", "calls", "tokens", "wall s", "note / error"],
        [[r["method"], r.get("val"), r.get("test"), r.get("calls"), r.get("tokens"),
          r.get("seconds"), (r.get("note") or r.get("error") or r.get("stop") or "")[:70]]
         for r in rows],
    )  # fmt: skip
    write_results("quality_dspy", {"budget_calls": budget, "model": MODEL, "task": DSPY_TASK,
                                   "sizes": DSPY_SIZES, "runs": rows})  # fmt: skip


def run_method(name: str, module: sd.SkillModule, splits: Any, budget: int) -> Row:
    """One method's search (its server-counted calls in `server_calls`), then its test score
    (outside the budget; server-counted in `test_server_calls`)."""
    started = time.perf_counter()
    counts: Row = {}
    try:
        with timer() as elapsed, counted_at_server(counts, "server_calls"):
            row = METHODS[name](module, splits, budget)
        row["seconds"] = elapsed()
    except Exception as exc:  # a competitor failing is a result to report, not a crash
        return {"error": f"{type(exc).__name__}: {exc}".splitlines()[0],
                "seconds": time.perf_counter() - started, **counts}  # fmt: skip
    row.update(counts)
    if row.get("skill") is not None:
        with counted_at_server(row, "test_server_calls"):
            row["test"] = test_mean(module, row["skill"], splits.test)
    return row


if __name__ == "__main__":
    main()
