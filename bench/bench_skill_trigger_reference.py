"""A hand-written description through the same gate: can the gate certify a better description
on Qwen2.5-Coder-0.5B at all? (issue 40, bench/README.md section 13)

Not a method row: a person wrote the candidate (`--description`), chosen before this run on
the training split only. It goes through `compile(TriggerModule, ...)` exactly as ours does —
the same split, router, validation set, gate and `Budget(max_calls=N)` — proposed once by a
proposer that calls no model, so the gate's decision on it says whether a clearly better
description is certifiable on this validation set with this router. The test split is scored
afterwards (outside the budget); the seed's test row is `bench_skill_trigger.py`'s (the same
router at temperature 0 on the same test split). With `--stage-copy DIR`, the example folder is copied to
`DIR/release-notes` and the result is staged against the copy (`stage_folder`), ready for
`skillopt-dsl skill-folder diff|adopt|rollback RUN_DIR`; the shipped example is never written.

    python bench/bench_skill_trigger_reference.py --api-base http://127.0.0.1:8831/v1 \\
        --sizes 70 60 70 --stage-copy /tmp/skills-copy --description "..."
"""

from __future__ import annotations

import argparse
import logging
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from _common import git_commit, print_table, write_results
from bench_skill_trigger import EXAMPLE, MODEL, description_skill
from qwen_proxy import CountingProxy

import skillopt_dsl as sd
from skillopt_dsl.lm import LM, Budget, SamplingParams
from skillopt_dsl.optimizers import GradientText
from skillopt_dsl.optimizers.proposers import EditGroup, ProposalRequest, Proposer
from skillopt_dsl.skill import Replace
from skillopt_dsl.skill_folder import (
    SkillFolder,
    TriggerModule,
    constant_trigger_summary,
    load_skill_cards,
    load_trigger_splits,
    measure_trigger,
    stage_folder,
)
from skillopt_dsl.skill_folder.document import DESCRIPTION, FolderDocument

LOG = logging.getLogger("bench_skill_trigger_reference")


@dataclass(kw_only=True)
class WrittenDescription(Proposer):
    """Proposes one fixed description in place of the seed's, once; no model call."""

    description: str
    name: str = "hand-written"

    def propose(self, request: ProposalRequest) -> list[EditGroup]:
        current = FolderDocument.from_skill(request.skill).text_of(DESCRIPTION).strip()
        if current == self.description:
            return []
        edit = Replace(old=current, new=self.description, rationale="written by a person")
        return [EditGroup((edit,), self.name, True, "a hand-written description")]


def parse_args() -> argparse.Namespace:
    """The command line (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add = parser.add_argument
    add("--api-base", required=True, help="the Qwen server")
    add("--description", required=True, help="the hand-written candidate")
    add("--calls", type=int, default=200)
    add("--sizes", type=int, nargs=3, default=[70, 60, 70], metavar=("TRAIN", "VAL", "TEST"))
    add("--seed", type=int, default=0, help="the split's seed")
    add("--stage-copy", type=Path, default=None, help="copy the example here and stage onto it")
    add("--runs-dir", type=Path, default=Path("runs/bench_skill_trigger_reference"))
    add("--out", default="skill_trigger_qwen_reference")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    folder = SkillFolder.read(EXAMPLE / "release-notes")
    module = TriggerModule(folder, load_skill_cards(EXAMPLE / "distractors.jsonl"), shown_others=4)
    path = EXAMPLE / "release-notes.trigger.jsonl"
    splits = load_trigger_splits(path, seed=args.seed, sizes=tuple(args.sizes))
    proxy = CountingProxy(args.api_base, timeout_s=900.0).start()
    params = SamplingParams(temperature=0.0, max_tokens=16)
    router = LM(
        MODEL, api_base=f"{proxy.url}/v1", params=params, timeout_s=900.0, max_concurrency=1
    )
    commit, started, run_dir = (
        git_commit(),
        time.perf_counter(),
        args.runs_dir / time.strftime("%Y%m%dT%H%M%S"),
    )
    optimizer = GradientText(
        proposers=[WrittenDescription(description=args.description)],
        screen=False,
        epochs=1,
        compose=1,
    )
    result = sd.compile(module, splits.train, splits.val, optimizer=optimizer, lm=router,
                        optimizer_lm=router, budget=Budget(max_calls=args.calls), run_dir=run_dir, threads=1)  # fmt: skip
    search_calls = int(proxy.count()["chat_completions"])
    final = module.description_of(result.best_skill)
    rows = [
        ("hand-written, through the gate", measure_trigger(module, splits.test, skill=description_skill(final), lm=router, threads=1)),
        ("always trigger", constant_trigger_summary(splits.test, True)),
        ("never trigger", constant_trigger_summary(splits.test, False)),
    ]  # fmt: skip
    gate = [{"accepted": d.accepted, "candidate": d.candidate_score, "incumbent": d.incumbent_score,
             "examples": d.examples_scored, "p_value": d.p_value, "reason": d.reason}
            for d in result.gate_log]  # fmt: skip
    staged = None
    if args.stage_copy is not None:
        shutil.copytree(EXAMPLE / "release-notes", args.stage_copy / "release-notes")
        staged = stage_folder(result, SkillFolder.read(args.stage_copy / "release-notes"))
        LOG.info("staged: %s (%s)", staged.manifest.note, staged.diff_path)
    print_table(
        f"hand-written description through the gate: {len(splits.test)} test requests",
        ["row", "test acc", "precision", "recall", "tp/fp/tn/fn"],
        [[label, s.accuracy, s.precision, s.recall,
          f"{s.true_positives}/{s.false_positives}/{s.true_negatives}/{s.false_negatives}"]
         for label, s in rows],
    )  # fmt: skip
    print(f"validation {result.seed_val_score} -> {result.val_score}; gate: {gate}")
    print(
        f"final description: {final!r}; search calls {result.usage.calls} (server {search_calls})"
    )
    write_results(args.out, {
        "model": MODEL, "git_commit": commit, "wall_s": time.perf_counter() - started,
        "description": args.description, "final_description": final, "run_dir": str(run_dir),
        "sizes": args.sizes, "split_seed": args.seed, "calls": args.calls,
        "search_calls": result.usage.calls, "server_calls": int(proxy.count()["chat_completions"]),
        "seed_val": result.seed_val_score, "val": result.val_score, "gate_log": gate,
        "staged": None if staged is None else {"accepted": staged.manifest.accepted,
                                               "note": staged.manifest.note,
                                               "diff": str(staged.diff_path)},
        "test": {label: {"accuracy": s.accuracy, "precision": s.precision, "recall": s.recall,
                         "tp": s.true_positives, "fp": s.false_positives,
                         "tn": s.true_negatives, "fn": s.false_negatives} for label, s in rows},
    })  # fmt: skip


if __name__ == "__main__":
    main()
