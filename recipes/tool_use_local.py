"""Tool use on the embedded model: answer questions about invented cities with a `lookup` tool.

Run it with `skillopt-dsl compile recipes/tool_use_local.py`, or `python recipes/tool_use_local.py`
for the figures the closing note asks for (seed vs compiled val and test, turns per example,
calls, wall time). Offline: the target is SmolLM2-135M over the text tool protocol (a fenced
JSON call), and no optimizer model is needed: `ToolDemonstrationsProposer` writes the tool-call
rule and worked tool-use examples (the reference `lookup` call, its real result, the answer) into
a seed skill that never mentions the tool; `FormatRuleProposer` adds an answer-format rule.

The table is invented, so no model can answer from memory: a right answer means the agent called
the tool and read the result. Expect little from a 135M model; any litellm model string replaces
it (`--model openai/gpt-4o-mini`; wrap it in `NativeToolBackend` for native tool calling).
"""

import logging
import sys
import time
from pathlib import Path

import skillopt_dsl as sd
from skillopt_dsl.agents import ToolDemonstrationsProposer, Trajectory
from skillopt_dsl.benchmarks import load_benchmark
from skillopt_dsl.benchmarks.table_lookup import TableLookup
from skillopt_dsl.lm import LM, ResponseCache, SamplingParams
from skillopt_dsl.optimizers import FormatRuleProposer, GradientText

module = TableLookup(max_turns=2)
splits = load_benchmark("table_lookup", seed=0, sizes=(8, 12, 12))
# A call or a short answer needs few tokens: cap the target's output where it runs.
lm = LM("local/smollm2-135m", params=SamplingParams(max_tokens=48))
optimizer = GradientText(
    lr=0.5,
    lr_floor_tokens=256,
    epochs=1,
    batch_size=4,
    proposers=[ToolDemonstrationsProposer(per_step=1, max_demos=3), FormatRuleProposer()],
)


def _turns(report: sd.EvaluationReport) -> float:
    turns = [r.trace.n_turns for r in report.records if isinstance(r.trace, Trajectory)]
    return sum(turns) / len(turns) if turns else 0.0


def main(run_dir: Path) -> None:
    """Compile, then re-score val and test from the run's response cache to count turns."""
    started = time.perf_counter()
    result = sd.compile(
        module,
        splits.train,
        splits.val,
        optimizer=optimizer,
        lm=lm,
        testset=splits.test,
        run_dir=run_dir,
        threads=2,
    )
    wall = time.perf_counter() - started
    replay = lm.with_cache(ResponseCache(run_dir / "cache.sqlite"))
    lines = [
        f"seed val {result.seed_val_score:.3f} -> compiled val {result.val_score:.3f}",
        f"seed test {result.seed_test_score} -> compiled test {result.test_score}",
        f"accepted steps {sum(d.accepted for d in result.gate_log)} of {len(result.gate_log)}",
        f"search calls {result.usage.calls}, test calls "
        f"{result.test_usage.calls if result.test_usage else 0}, wall {wall:.0f} s",
    ]
    for label, skill in (("seed", result.seed_skill), ("compiled", result.best_skill)):
        report = sd.evaluate(module, splits.test, skill=skill, lm=replay, threads=2)
        lines.append(f"{label} skill: {_turns(report):.2f} turns per test example (replayed)")
    lines.append("compiled skill:\n" + result.best_skill.text)
    sys.stdout.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("runs/tool_use_local"))
