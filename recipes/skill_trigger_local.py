"""Train a skill folder's description on when it should trigger, on the embedded model, offline.

Run it with `python recipes/skill_trigger_local.py` for the figures the docs quote (seed vs
compiled trigger accuracy, precision and recall on the test split, beside the constant answers
"always trigger" and "never trigger"), or `skillopt-dsl compile recipes/skill_trigger_local.py`
for the usual compile screen. Any litellm model string replaces the router:
`skillopt-dsl compile recipes/skill_trigger_local.py --model openai/gpt-4o-mini`.

The skill is the shipped `examples/skill_folders/release-notes` folder, whose description
("Writes text about software changes.") is deliberately mediocre; the agent sees it in its
`Skill` tool's listing, beside ordinary tools, among four of ten shipped near-neighbour cards (`distractors.jsonl`: commit messages, PR descriptions,
version bumps...) and 200 requests (`release-notes.trigger.jsonl`, 100 should trigger, 100
should not, most of them near misses). The trained document holds the description alone, and
the door refuses a description an agent could not read (several lines, or over Claude's 1,024 characters).

`TriggerWordsProposer` needs no optimizer model: it appends the words of missed requests to the
description. Each request runs 3 times (its score is the trigger rate). SmolLM2-135M rarely
calls a tool at all, so expect no certified gain here; the docs' table shows what it printed. Use a capable `--model` and
`ReflectiveProposer()` with a capable `--optimizer-model` for a real one.
"""

import logging
import sys
from pathlib import Path

import skillopt_dsl as sd
from skillopt_dsl.lm import LM, ResponseCache, SamplingParams
from skillopt_dsl.optimizers import GradientText
from skillopt_dsl.skill_folder import (
    SkillFolder,
    TriggerModule,
    constant_trigger_summary,
    load_skill_cards,
    load_trigger_splits,
    measure_trigger,
)
from skillopt_dsl.skill_folder.trigger_proposer import TriggerWordsProposer

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "skill_folders"

module = TriggerModule(
    SkillFolder.read(EXAMPLE / "release-notes"),
    load_skill_cards(EXAMPLE / "distractors.jsonl"),
    shown_others=4,
)
splits = load_trigger_splits(EXAMPLE / "release-notes.trigger.jsonl", seed=0)
# The agent answers with a tool call (or with no call): cap its output where the model runs.
lm = LM("local/smollm2-135m", params=SamplingParams(max_tokens=48))
optimizer = GradientText(
    lr=1.0, lr_floor_tokens=48, epochs=2, batch_size=8, proposers=[TriggerWordsProposer()]
)


def main(run_dir: Path) -> None:
    """Compile, then measure seed and compiled descriptions on the test split (replayed from
    the run's response cache) beside the two constant answers."""
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
    replay = lm.with_cache(ResponseCache(run_dir / "cache.sqlite"))
    test = splits.test
    rows = [
        measure_trigger(module, test, skill=result.seed_skill, lm=replay).line("seed"),
        measure_trigger(module, test, skill=result.best_skill, lm=replay).line("compiled"),
        constant_trigger_summary(test, True).line("always trigger"),
        constant_trigger_summary(test, False).line("never trigger"),
    ]
    accepted = sum(decision.accepted for decision in result.gate_log)
    lines = [
        f"test split: {len(test)} requests, "
        f"{sum(e.labels['should_trigger'] for e in test)} should trigger",
        *rows,
        f"validation: seed {result.seed_val_score:.3f} -> compiled {result.val_score:.3f}; "
        f"accepted {accepted} of {len(result.gate_log)} gate decisions; "
        f"{result.usage.calls} search calls",
        "compiled description: " + module.description_of(result.best_skill),
    ]
    sys.stdout.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("runs/skill_trigger_local"))
