"""Skill trigger rates on Qwen2.5-Coder-0.5B: a skill folder's description, seed -> trained.

Issue 40's and 53's bench rows. The router is Qwen2.5-Coder-0.5B-Instruct (Q4_K_M, the benchmark
instrument `bench/qwen_model.sh`, never a dependency) behind an OpenAI-compatible server; it sees
`TriggerModule`'s agent prompt (ordinary tools beside a `Skill` tool whose listing holds this
skill's description among 4 of the 10 shipped distractor cards, sampled per request, and the
request as the user message) and either calls a tool or answers. Each request runs `--samples`
times (default 3) at `--temperature` (default 0.7); its score is its trigger rate against the
label, and a test row's picks are each request's majority.
The data is `examples/skill_folders/release-notes.trigger.jsonl` (200 requests), split
train/val/test with a fixed seed by `load_trigger_splits`; the test split is never seen by either
method and is scored afterwards, outside the budget.

Rows, all on the test split:

- seed: the shipped description ("Writes text about software changes.");
- preflight: `trigger_preflight(val, samples)`, the validation requests (and rows) a +0.10 gain
  in mean trigger rate needs for an even chance at the gate's first decision, printed before any
  call; where a method's description differs from the seed, the same figure from the measured
  standard deviation of the paired per-request rate difference on test;
- always trigger / never trigger: the constant answers (no model call);
- ours: `compile(TriggerModule, ...)` with the CLI's description search (`trigger_optimizer()`:
  `TriggerWordsProposer` and `ReflectiveProposer`, GradientText; `--proposer words` drops the
  reflection, as the CLI's default does), `Budget(max_calls=N)` over router
  and reflection calls, the same Qwen server as router and reflection model;
- gepa: `gepa.optimize` training the description alone (seed candidate `{"description": seed}`)
  through `TriggerAdapter`, which routes with `TriggerModule.run` and scores with
  `TriggerModule.score` (the same prompt, samples, parse and metric as ours; its feedback is
  gepa's reflective dataset), the same server as reflection model, `max_metric_calls=N` and a stop
  callback once router calls (k a request) + reflection calls reach N (checked between iterations, so the last one may
  run over: its total is reported). gepa has no description door: a multi-line proposal is joined
  into one line (counted in `joined_lines`), which only helps it.

Calls are counted at the server by a counting proxy per server (`bench/qwen_proxy.py`) and by
each method's own count. Usage (two servers, one thread each, run the two methods at once)::

    bench/qwen_model.sh serve 8831 && bench/qwen_model.sh serve 8832
    python bench/bench_skill_trigger.py --api-base http://127.0.0.1:8831/v1 \\
        --gepa-api-base http://127.0.0.1:8832/v1 --calls 200 --sizes 14 30 30
    bench/qwen_model.sh stop 8831 && bench/qwen_model.sh stop 8832

With one server, leave out `--gepa-api-base`: the methods then run one after the other on it.
"""

from __future__ import annotations

import argparse
import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from _common import git_commit, print_table, write_results
from qwen_proxy import CountingProxy

import skillopt_dsl as sd
from skillopt_dsl.cli.skill_folder import ProposerChoice, trigger_optimizer
from skillopt_dsl.evaluate import evaluate
from skillopt_dsl.lm import LM, Budget, SamplingParams
from skillopt_dsl.skill import Skill
from skillopt_dsl.skill_folder import (
    SkillFolder,
    TriggerModule,
    TriggerPreflight,
    TriggerSampling,
    TriggerSummary,
    constant_trigger_summary,
    load_skill_cards,
    load_trigger_splits,
    trigger_preflight,
)
from skillopt_dsl.skill_folder.document import DESCRIPTION, FolderDocument
from skillopt_dsl.types import Example

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "skill_folders"
MODEL = "openai/qwen2.5-coder-0.5b-instruct"
LOG = logging.getLogger("bench_skill_trigger")


@dataclass(frozen=True)
class Setup:
    """What every method shares: the task, the split, the model settings and the budget."""

    module: TriggerModule
    train: Sequence[Example]
    val: Sequence[Example]
    test: Sequence[Example]
    calls: int
    router_tokens: int
    reflection_tokens: int
    timeout_s: float
    proposer: ProposerChoice = ProposerChoice.both


@dataclass
class MethodRow:
    """One method's figures: the description it ends with, its test summary and its costs."""

    method: str
    description: str
    summary: TriggerSummary | None = None
    calls: int = 0
    server_calls: int | None = None
    val: float | None = None
    seed_val: float | None = None
    decisions: int | None = None
    accepted: int | None = None
    seconds: float = 0.0
    extra: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON row, with the test summary's counts and rates."""
        row = {k: v for k, v in asdict(self).items() if k != "summary"}
        if self.summary is not None:
            row["test"] = {
                **asdict(self.summary),
                "accuracy": self.summary.accuracy,
                "precision": self.summary.precision,
                "recall": self.summary.recall,
            }
        return row


def description_skill(description: str) -> Skill:
    """The one-part folder document `TriggerModule` trains, holding `description`."""
    return FolderDocument(((DESCRIPTION, description),)).to_skill()


def models(setup: Setup, proxy: CountingProxy) -> tuple[LM, LM]:
    """The router and the reflection model: the same server (through `proxy`), temperature 0."""
    base = f"{proxy.url}/v1"

    def lm(tokens: int) -> LM:
        params = SamplingParams(temperature=0.0, max_tokens=tokens)
        return LM(MODEL, api_base=base, params=params, timeout_s=setup.timeout_s, max_concurrency=1)

    return lm(setup.router_tokens), lm(setup.reflection_tokens)


def server_count(proxy: CountingProxy) -> int:
    """Chat completions that reached the server through `proxy` so far."""
    return int(proxy.count()["chat_completions"])


def run_ours(setup: Setup, proxy: CountingProxy, run_dir: Path) -> MethodRow:
    """compile() with the CLI's description search under `Budget(max_calls=calls)`."""
    router, reflector = models(setup, proxy)
    before, started = server_count(proxy), time.perf_counter()
    result = sd.compile(
        setup.module,
        setup.train,
        setup.val,
        optimizer=trigger_optimizer(setup.proposer),
        lm=router,
        optimizer_lm=reflector,
        budget=Budget(max_calls=setup.calls),
        run_dir=run_dir,
        threads=1,
    )
    gate = [
        {"accepted": d.accepted, "candidate": d.candidate_score, "incumbent": d.incumbent_score,
         "examples": d.examples_scored, "p_value": d.p_value, "reason": d.reason}
        for d in result.gate_log
    ]  # fmt: skip
    return MethodRow(
        method=f"ours (GradientText, trigger_optimizer({setup.proposer.value}))",
        description=setup.module.description_of(result.best_skill),
        calls=result.usage.calls,
        server_calls=server_count(proxy) - before,
        val=result.val_score,
        seed_val=result.seed_val_score,
        decisions=len(result.gate_log),
        accepted=sum(d.accepted for d in result.gate_log),
        seconds=time.perf_counter() - started,
        extra={"stop": result.stop_reason, "gate_log": gate, "run_dir": str(run_dir)},
    )


class TriggerAdapter:
    """gepa's adapter for the description: route with `TriggerModule.run`, score with
    `TriggerModule.score`, and hand its feedback to gepa's reflection (component `description`)."""

    def __init__(self, module: TriggerModule, router: LM, on_call: Callable[[int], None]) -> None:
        self.module = module
        self.router = router
        self.on_call = on_call
        self.joined_lines = 0
        self.propose_new_texts = None

    def one_line(self, description: str) -> str:
        """gepa has no description door: a multi-line proposal is joined into one line."""
        joined = " ".join(description.split())
        if joined != description.strip():
            self.joined_lines += 1
        return joined

    def evaluate(
        self, batch: list[Example], candidate: dict[str, str], capture_traces: bool = False
    ) -> Any:
        """Route `batch` under the candidate's description; traces for reflection on request."""
        from gepa.core.adapter import EvaluationBatch

        skill = description_skill(self.one_line(candidate[DESCRIPTION]))
        outputs, scores, traces = [], [], []
        for example in batch:
            self.on_call(self.module.samples)
            outcome = self.module.run(skill, example, self.router, seed=0)
            score = self.module.score(example, outcome)
            outputs.append(outcome.output)
            scores.append(score.value)
            traces.append({"request": example.request, "reply": outcome.output,
                           "feedback": score.feedback or _right(example)})  # fmt: skip
        return EvaluationBatch(outputs=outputs, scores=scores,
                               trajectories=traces if capture_traces else None)  # fmt: skip

    def make_reflective_dataset(
        self, candidate: dict[str, str], eval_batch: Any, components_to_update: list[str]
    ) -> dict[str, list[dict[str, Any]]]:
        """Each routed request, the router's reply and `TriggerModule.score`'s feedback."""
        records = [
            {"Inputs": t["request"], "Generated Outputs": t["reply"], "Feedback": t["feedback"]}
            for t in eval_batch.trajectories or []
        ]
        return {name: records for name in components_to_update}


def _right(example: Example) -> str:
    wanted = "loaded this skill" if example.labels["should_trigger"] else "did not load this skill"
    return f"correct: the router {wanted}, as it should for this request"


def run_gepa(setup: Setup, proxy: CountingProxy) -> MethodRow:
    """gepa.optimize on the description alone, at the same router+reflection call budget."""
    import gepa

    router, reflector = models(setup, proxy)
    counts = {"router": 0, "reflection": 0}

    def count_router(calls: int) -> None:
        counts["router"] += calls

    adapter = TriggerAdapter(setup.module, router, count_router)

    def reflect(prompt: str) -> str:
        counts["reflection"] += 1
        return reflector.complete([{"role": "user", "content": prompt}]).text

    seed = setup.module.description_of(setup.module.seed_skill)
    before, started = server_count(proxy), time.perf_counter()
    result = gepa.optimize(
        seed_candidate={DESCRIPTION: seed}, trainset=list(setup.train), valset=list(setup.val),
        adapter=adapter, reflection_lm=reflect, max_metric_calls=setup.calls,
        stop_callbacks=[lambda _state: counts["router"] + counts["reflection"] >= setup.calls],
        seed=0, display_progress_bar=False, logger=_Silent(), raise_on_exception=True,
    )  # fmt: skip
    best = adapter.one_line(result.best_candidate[DESCRIPTION])
    return MethodRow(
        method="gepa.optimize (TriggerAdapter)",
        description=best,
        calls=counts["router"] + counts["reflection"],
        server_calls=server_count(proxy) - before,
        val=result.val_aggregate_scores[result.best_idx],
        seed_val=result.val_aggregate_scores[0],
        accepted=len(result.candidates) - 1,
        seconds=time.perf_counter() - started,
        extra={
            "router_calls": counts["router"],
            "reflection_calls": counts["reflection"],
            "candidates": [adapter.one_line(c[DESCRIPTION]) for c in result.candidates],
            "joined_lines": adapter.joined_lines,
        },
    )


class _Silent:
    """gepa's logger protocol, discarding its per-iteration lines."""

    def log(self, message: str) -> None:
        del message


def score_test(setup: Setup, proxy: CountingProxy, row: MethodRow) -> MethodRow:
    """Route the test split under `row.description` (outside the budget); each request's score
    (its trigger rate against the label) is kept for the paired noise."""
    router, _ = models(setup, proxy)
    skill = description_skill(row.description)
    report = evaluate(setup.module, setup.test, skill=skill, lm=router, threads=1, progress=False)
    row.summary = TriggerSummary.from_rollouts(setup.test, report.records)
    row.extra = {**(row.extra or {}), "test_scores": report.scores}
    return row


def paired_preflight(setup: Setup, seed: MethodRow, row: MethodRow) -> dict[str, Any] | None:
    """The pre-flight from the measured noise: the standard deviation of the per-request
    difference of `row`'s and the seed's test scores (None when the descriptions agree)."""
    if row.description == seed.description or not (seed.extra and row.extra):
        return None
    ours, base = row.extra["test_scores"], seed.extra["test_scores"]
    diffs = [ours[key] - base[key] for key in base]
    mean = sum(diffs) / len(diffs)
    sd = (sum((d - mean) ** 2 for d in diffs) / (len(diffs) - 1)) ** 0.5
    check = trigger_preflight(len(setup.val), setup.module.samples, rate_sd=max(sd, 1e-9))
    return {"rate_sd": sd, "needed_val": check.needed_val, "needed_rows": check.needed_rows}


def lane_ours(setup: Setup, proxy: CountingProxy, run_dir: Path) -> list[MethodRow]:
    """Seed on test, then ours and its test score (one server)."""
    seed = setup.module.description_of(setup.module.seed_skill)
    seed_row = score_test(setup, proxy, MethodRow("seed description", seed))
    LOG.info("seed test: %s", seed_row.summary)
    ours = run_ours(setup, proxy, run_dir)
    LOG.info("ours done: %s calls, description %r", ours.calls, ours.description)
    if ours.description == seed:
        ours.summary = seed_row.summary  # the same description, the same seeded samples
    else:
        score_test(setup, proxy, ours)
    return [seed_row, ours]


def lane_gepa(setup: Setup, proxy: CountingProxy) -> list[MethodRow]:
    """gepa and its test score (its own server when given)."""
    row = run_gepa(setup, proxy)
    LOG.info("gepa done: %s calls, description %r", row.calls, row.description)
    return [score_test(setup, proxy, row)]


def table_rows(rows: Sequence[MethodRow]) -> list[list[Any]]:
    """The printed table: one line per method."""
    lines = []
    for row in rows:
        s = row.summary
        if s is None:
            raise RuntimeError(f"{row.method}: the test split was not scored")
        lines.append([row.method, s.accuracy, s.rate_score, s.precision, s.recall,
                      f"{s.true_positives}/{s.false_positives}/{s.true_negatives}/{s.false_negatives}",
                      row.seed_val, row.val, row.calls, row.server_calls,
                      "" if row.decisions is None else f"{row.accepted}/{row.decisions}"])  # fmt: skip
    return lines


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line (see the module docstring); `argv` instead of `sys.argv` when given."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add = parser.add_argument
    add("--api-base", required=True, help="the Qwen server (seed, ours)")
    add("--gepa-api-base", default=None, help="a second server for gepa (default: the same)")
    add("--calls", type=int, default=200, help="router+reflection calls per method")
    add("--sizes", type=int, nargs=3, default=[14, 30, 30], metavar=("TRAIN", "VAL", "TEST"))
    add("--seed", type=int, default=0, help="the split's seed")
    add("--shown-others", type=int, default=4, help="distractor cards shown per request")
    add("--samples", type=int, default=3, help="samples per request (its trigger rate)")
    add("--temperature", type=float, default=0.7, help="the samples' temperature")
    add("--router-max-tokens", type=int, default=32)
    add("--reflection-max-tokens", type=int, default=200)
    add("--timeout-s", type=float, default=900.0, help="per request (a 1-thread server is slow)")
    add(
        "--proposer",
        type=ProposerChoice,
        default=ProposerChoice.both,
        choices=list(ProposerChoice),
        help="ours' proposers (the CLI's --proposer; default both)",
    )
    add("--runs-dir", type=Path, default=Path("runs/bench_skill_trigger"))
    add("--out", default="skill_trigger_qwen", help="bench/results/<out>.json")
    return parser.parse_args(argv)


def build_setup(args: argparse.Namespace) -> Setup:
    """The shipped folder among the shipped distractors, and the seeded split."""
    module = TriggerModule(
        SkillFolder.read(EXAMPLE / "release-notes"),
        load_skill_cards(EXAMPLE / "distractors.jsonl"),
        shown_others=args.shown_others,
        sampling=TriggerSampling(args.samples, args.temperature),
    )
    path = EXAMPLE / "release-notes.trigger.jsonl"
    splits = load_trigger_splits(path, seed=args.seed, sizes=tuple(args.sizes))
    return Setup(
        module, splits.train, splits.val, splits.test, args.calls,
        args.router_max_tokens, args.reflection_max_tokens, args.timeout_s, args.proposer,
    )  # fmt: skip


def run_lanes(setup: Setup, args: argparse.Namespace) -> list[MethodRow]:
    """Seed and ours on one server, gepa on the other (at once), then the constant answers."""
    ours_proxy = CountingProxy(args.api_base, timeout_s=args.timeout_s).start()
    gepa_proxy = ours_proxy
    if args.gepa_api_base:
        gepa_proxy = CountingProxy(args.gepa_api_base, timeout_s=args.timeout_s).start()
    run_dir = args.runs_dir / time.strftime("%Y%m%dT%H%M%S")
    with ThreadPoolExecutor(max_workers=2 if args.gepa_api_base else 1) as pool:
        ours_lane = pool.submit(lane_ours, setup, ours_proxy, run_dir)
        gepa_lane = pool.submit(lane_gepa, setup, gepa_proxy)
        seed_row, ours_row = ours_lane.result()
        (gepa_row,) = gepa_lane.result()
    always = MethodRow("always trigger", "(constant)", constant_trigger_summary(setup.test, True))
    never = MethodRow("never trigger", "(constant)", constant_trigger_summary(setup.test, False))
    return [seed_row, always, never, ours_row, gepa_row]


def preflight_of(setup: Setup) -> TriggerPreflight:
    """What the run's validation split can certify, before any call (default `Gate()`)."""
    return trigger_preflight(len(setup.val), setup.module.samples)


def positives(split: Sequence[Example]) -> int:
    """How many requests of `split` should trigger the skill."""
    return sum(bool(example.labels["should_trigger"]) for example in split)


def report(
    setup: Setup, args: argparse.Namespace, rows: list[MethodRow], wall_s: float, commit: str
) -> None:
    """Print the table and each description, and write the results file (`commit`: the code
    the run imported, read when it started)."""
    splits = {"train": setup.train, "val": setup.val, "test": setup.test}
    figures = {
        "model": MODEL, "api_base": args.api_base, "gepa_api_base": args.gepa_api_base,
        "calls": args.calls, "proposer": args.proposer.value, "split_seed": args.seed, "shown_others": args.shown_others,
        "sizes": {name: {"n": len(split), "should_trigger": positives(split)}
                  for name, split in splits.items()},
        "router_max_tokens": args.router_max_tokens,
        "reflection_max_tokens": args.reflection_max_tokens,
        "samples": setup.module.samples, "temperature": setup.module.temperature,
        "preflight": asdict(preflight_of(setup)),
        "measured_preflight": {row.method: paired_preflight(setup, rows[0], row) for row in rows[3:]},
        "git_commit": commit, "wall_s": wall_s, "rows": [row.to_dict() for row in rows],
    }  # fmt: skip
    print_table(
        f"trigger on {len(setup.test)} held-out requests ({positives(setup.test)} should "
        f"trigger), router Qwen2.5-Coder-0.5B, k={setup.module.samples} at "
        f"{setup.module.temperature}, {args.calls} calls",
        ["method", "test acc", "rate", "precision", "recall", "tp/fp/tn/fn", "seed val", "val",
         "calls", "server calls", "accepted/decisions"],
        table_rows(rows),
    )  # fmt: skip
    for row in rows:
        print(f"{row.method}: {row.description!r}")
    print(preflight_of(setup).line())
    for method, measured in figures["measured_preflight"].items():
        print(f"measured pre-flight, {method}: {measured}")
    write_results(args.out, figures)


def main() -> None:
    args = parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    setup = build_setup(args)
    LOG.info("%s", preflight_of(setup).line())
    commit, started = git_commit(), time.perf_counter()
    rows = run_lanes(setup, args)
    report(setup, args, rows, time.perf_counter() - started, commit)


if __name__ == "__main__":
    main()
