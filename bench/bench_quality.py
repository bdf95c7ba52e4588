"""Bench 3: quality per model call on two shipped tasks with the embedded model.

Every method gets the same search budget of target+optimizer model calls (`--budget`), the same
embedded model (`local/smollm2-135m`, max 16 new tokens) as target and as reflection model, and
the same splits. The test split is scored afterwards for the chosen skill, outside the budget.
Methods: the seed skill, GradientText, Beam, OptunaLR (skillopt_dsl); `gepa.optimize` with its
default adapter; DSPy MIPROv2 / GEPA where they run with this model; microsoft/SkillOpt
(`skillopt==0.2.0`) is probed and reported as runnable or not.

Run: `python bench/bench_quality.py [--budget 60] [--tasks navigate sports_understanding]
[--methods seed GradientText ... dspy.GEPA]`
(gepa/dspy columns need them installed, e.g. /work/bench-venv). Slow: minutes per method.
"""

from __future__ import annotations

import argparse
import importlib
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

from _common import optional, print_table, timer, write_results

import skillopt_dsl as sd
from skillopt_dsl.benchmarks import load_benchmark
from skillopt_dsl.benchmarks.tasks import module_for
from skillopt_dsl.lm import LM, Budget, SamplingParams
from skillopt_dsl.optimizers import DemonstrationsProposer, FormatRuleProposer, GradientText

MODEL = "local/smollm2-135m"
PARAMS = SamplingParams(max_tokens=16)
SIZES = (12, 12, 20)

Row = dict[str, Any]


def proposers() -> list[Any]:
    return [FormatRuleProposer(), DemonstrationsProposer(per_step=2, max_demos=4)]


def target_lm() -> LM:
    return LM(MODEL, params=PARAMS, max_concurrency=2)


def test_mean(module: sd.SkillModule, skill: str, test: list[Any]) -> float:
    return sd.evaluate(module, test, skill=skill, lm=target_lm(), threads=2, progress=False).mean


def ours(optimizer_factory: Callable[[], Any]) -> Callable[..., Row]:
    def run(module: sd.SkillModule, splits: Any, budget: int) -> Row:
        result = sd.compile(
            module, splits.train, splits.val, optimizer=optimizer_factory(), lm=target_lm(),
            optimizer_lm=target_lm(), budget=Budget(max_calls=budget), threads=2,
        )  # fmt: skip
        return {
            "val": result.val_score,
            "skill": result.best_skill.text,
            "calls": result.usage.calls,
            "tokens": result.usage.total_tokens,
            "stop": result.stop_reason,
        }

    return run


def seed_only(module: sd.SkillModule, splits: Any, budget: int) -> Row:
    lm = target_lm()
    report = sd.evaluate(module, splits.val, lm=lm, threads=2, progress=False)
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


def gepa_run(module: sd.SkillModule, splits: Any, budget: int) -> Row:
    gepa = optional("gepa")
    if gepa is None:
        raise RuntimeError("gepa is not installed")
    from gepa.adapters.default_adapter.default_adapter import DefaultAdapter, EvaluationResult

    from skillopt_dsl.lm.local import register_local_provider

    register_local_provider()
    lm = target_lm()

    def rollout(messages: list[dict[str, str]]) -> str:
        return lm.complete(messages).text  # counted in our ledger, same model and params

    def evaluator(data: dict[str, Any], response: str) -> Any:
        example = data["additional_context"]["example"]
        score = sd.metrics.call_metric(module.metric_fn, example, module.parse(response))
        return EvaluationResult(score=score.value, feedback=score.feedback, objective_scores=None)

    def reflect(prompt: str) -> str:
        return lm.complete([{"role": "user", "content": prompt}]).text

    def data(examples: list[Any]) -> list[dict[str, Any]]:
        rendered = [module.render(module.seed_skill, e)[-1]["content"] for e in examples]
        return [{"input": r, "answer": "", "additional_context": {"example": e}}
                for r, e in zip(rendered, examples, strict=True)]  # fmt: skip

    adapter = DefaultAdapter(model=rollout, evaluator=evaluator)
    result = gepa.optimize(
        seed_candidate={"system_prompt": module.seed_skill.text},
        trainset=data(splits.train), valset=data(splits.val), adapter=adapter,
        reflection_lm=reflect, max_metric_calls=budget, seed=0, display_progress_bar=False,
    )  # fmt: skip
    best = result.best_candidate["system_prompt"]
    usage = lm.ledger.snapshot()
    val = sd.evaluate(module, splits.val, skill=best, lm=target_lm(), threads=2, progress=False)
    return {"val": val.mean, "skill": best, "calls": usage.calls, "tokens": usage.total_tokens,
            "note": "max_metric_calls=budget (reflection calls are extra)"}  # fmt: skip


def dspy_run(kind: str) -> Callable[..., Row]:
    def run(module: sd.SkillModule, splits: Any, budget: int) -> Row:
        dspy = optional("dspy")
        if dspy is None:
            raise RuntimeError("dspy is not installed")
        from skillopt_dsl.lm.local import register_local_provider

        register_local_provider()
        dspy.configure_cache(enable_disk_cache=False, enable_memory_cache=False)
        lm = dspy.LM(MODEL, max_tokens=64, cache=False, num_retries=0)
        dspy.configure(lm=lm)
        (in_name,) = list(module.input_fields)[:1]
        signature = f"{in_name} -> answer"

        def as_dspy(examples: list[Any]) -> list[Any]:
            return [dspy.Example(**{in_name: str(e.inputs[in_name])},
                                 answer=str(e.labels["answer"])).with_inputs(in_name)
                    for e in examples]  # fmt: skip

        def metric(gold: Any, pred: Any, trace: Any = None, *rest: Any) -> float:
            return float(str(getattr(pred, "answer", "")).strip() == gold.answer)

        program = dspy.Predict(signature)
        if kind == "MIPROv2":
            tele = dspy.MIPROv2(metric=metric, auto=None, num_candidates=2, num_threads=2,
                                max_bootstrapped_demos=1, max_labeled_demos=2, verbose=False)  # fmt: skip
            compiled = tele.compile(program, trainset=as_dspy(splits.train), num_trials=2,
                                    valset=as_dspy(splits.val), minibatch=False)  # fmt: skip
        else:
            tele = dspy.GEPA(metric=metric, max_metric_calls=budget, reflection_lm=lm)
            compiled = tele.compile(program, trainset=as_dspy(splits.train),
                                    valset=as_dspy(splits.val))  # fmt: skip
        evaluate = dspy.Evaluate(devset=as_dspy(splits.val), metric=metric, num_threads=2,
                                 display_progress=False)  # fmt: skip
        val = float(getattr(evaluate(compiled), "score", 0.0)) / 100
        calls = len(getattr(lm, "history", []))
        return {"val": val, "skill": None, "calls": calls, "tokens": None,
                "note": "test not scored (DSPy program, not a skill document)"}  # fmt: skip

    return run


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
    "OptunaLR": ours(optuna_lr),
    "gepa.optimize": gepa_run,
    "dspy.MIPROv2": dspy_run("MIPROv2"),
    "dspy.GEPA": dspy_run("GEPA"),
}
# dspy.GEPA takes ~200 s per task here (its calls are not bounded by max_metric_calls); run it
# with `--methods ... dspy.GEPA` (figures in bench/README.md).
DEFAULT_METHODS = [m for m in METHODS if m != "dspy.GEPA"]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--budget", type=int, default=60)
    parser.add_argument("--tasks", nargs="+", default=["navigate", "sports_understanding"])
    parser.add_argument("--methods", nargs="+", default=DEFAULT_METHODS, choices=list(METHODS))
    parser.add_argument("--skip-skillopt-probe", action="store_true")
    args = parser.parse_args()
    rows: list[list[Any]] = []
    figures: dict[str, Any] = {"budget_calls": args.budget, "model": MODEL, "sizes": SIZES,
                               "runs": []}  # fmt: skip
    for task in args.tasks:
        splits = load_benchmark(task, seed=0, sizes=SIZES)
        for name in args.methods:
            module = module_for(task)
            row = run_method(name, module, splits, args.budget)
            figures["runs"].append({"task": task, "method": name, **row})
            rows.append([task, name, row.get("val"), row.get("test"), row.get("calls"),
                         row.get("tokens"), row.get("seconds"), row.get("error", "")[:60]])  # fmt: skip
            print(f"{task} {name}: {row}", flush=True)
    if not args.skip_skillopt_probe:
        figures["skillopt_0_2_0"] = skillopt_probe()
    print_table(
        f"Quality per call: {MODEL}, search budget {args.budget} calls, splits {SIZES}",
        ["task", "method", "val", "test", "calls", "tokens", "wall s", "error"],
        rows,
    )
    print(f"microsoft/SkillOpt 0.2.0: {figures.get('skillopt_0_2_0', 'not probed')}")
    write_results("quality", figures)


def run_method(name: str, module: sd.SkillModule, splits: Any, budget: int) -> Row:
    started = time.perf_counter()
    try:
        with timer() as elapsed:
            row = METHODS[name](module, splits, budget)
        row["seconds"] = elapsed()
    except Exception as exc:  # a competitor failing is a result to report, not a crash
        return {"error": f"{type(exc).__name__}: {exc}".splitlines()[0],
                "seconds": time.perf_counter() - started}  # fmt: skip
    if row.get("skill") is not None:
        row["test"] = test_mean(module, row["skill"], splits.test)
    return row


if __name__ == "__main__":
    main()
