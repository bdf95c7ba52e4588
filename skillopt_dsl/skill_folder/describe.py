"""Train a skill folder's description on trigger rows and stage the change: the path
`compile --skill-folder`, `sleep describe` and a Sleep night's `--describe` share (issue 40).

`train_description(task, settings, optimizer)` builds the `TriggerModule` (the folder's card
among the distractors), compiles it on the rows' seeded splits, measures precision and recall
on the held-out requests for the seed, the compiled description and the constant answers
"always" and "never trigger" (the compiled skill's rollouts come from the run's response cache,
so measuring costs no new call), and stages the change in the run directory (`stage_folder`).
Nothing under the folder is written. It prints nothing: the result is a `DescriptionOutcome`,
whose `to_dict()` is the machine-readable record (`sleep describe --json`) and whose fields the
command line prints as tables.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from skillopt_dsl.compile import CompileResult, compile_with, default_optimizer_on
from skillopt_dsl.data import Splits
from skillopt_dsl.errors import UserInputError
from skillopt_dsl.json_types import JSONObject
from skillopt_dsl.lm import LM, ResponseCache, resolve_lm
from skillopt_dsl.optimizers import ConsolidationProposer
from skillopt_dsl.optimizers.base import Optimizer
from skillopt_dsl.runs import RunFiles
from skillopt_dsl.settings import CompileSettings
from skillopt_dsl.skill import Skill
from skillopt_dsl.skill_folder.adopt import recover_folder
from skillopt_dsl.skill_folder.cards import SkillCard, load_skill_cards, read_skill_cards
from skillopt_dsl.skill_folder.document import DescriptionAgent
from skillopt_dsl.skill_folder.folder import SkillFolder
from skillopt_dsl.skill_folder.stage import StagedFolder, stage_folder
from skillopt_dsl.skill_folder.trigger import (
    DEFAULT_SAMPLES,
    DEFAULT_TEMPERATURE,
    TriggerModule,
    TriggerSampling,
    trigger_parts,
)
from skillopt_dsl.skill_folder.trigger_data import (
    TriggerPreflight,
    TriggerSummary,
    constant_trigger_summary,
    load_trigger_splits,
    measure_trigger,
    trigger_preflight,
)
from skillopt_dsl.skill_folder.trigger_proposer import TriggerWordsProposer, copied_words
from skillopt_dsl.types import Example

__all__ = [
    "DEFAULT_REPLY_TOKENS",
    "DescriptionOutcome",
    "DescriptionPlan",
    "DescriptionTask",
    "TriggerRow",
    "plan_description",
    "train_description",
    "words_optimizer",
]

DEFAULT_REPLY_TOKENS = 48
"""The most tokens a trigger reply may use by default (a `Skill` tool call needs a few dozen)."""

TriggerRow = tuple[str, TriggerSummary]
"""One line of the held-out trigger table: its label (`seed`, `compiled`, `always trigger`,
`never trigger`) and what it measured."""


@dataclass(frozen=True, kw_only=True)
class DescriptionTask:
    """What a description run trains: the folder, its trigger rows (JSONL), the other skills
    the router sees (None: the skill folders beside it; a JSONL file of cards or a folder of
    skill folders), whose description limits apply, how many other skills a request's list
    shows (None: all) and the router's reply cap in tokens."""

    skill_folder: Path
    trigger_data: Path
    distractors: Path | None = None
    agent: DescriptionAgent = "claude"
    shown_others: int | None = None
    reply_tokens: int = DEFAULT_REPLY_TOKENS
    samples: int = DEFAULT_SAMPLES
    temperature: float = DEFAULT_TEMPERATURE


@dataclass(frozen=True)
class DescriptionPlan:
    """What a description run is, before any call: the folder as read, the trigger module,
    the seeded splits and the pre-flight (how many requests a realistic gain needs)."""

    folder: SkillFolder
    module: TriggerModule
    splits: Splits
    preflight: TriggerPreflight


def plan_description(task: DescriptionTask, settings: CompileSettings) -> DescriptionPlan:
    """Read and check everything a description run needs, refusing before any model call what
    could not be trained or staged (`SkillFolder.check_trainable`, `load_trigger_splits`); an
    interrupted adopt of the folder is undone first."""
    recover_folder(task.skill_folder)
    folder = SkillFolder.read(task.skill_folder)
    folder.check_trainable(trigger_parts(folder), task.agent)
    splits = load_trigger_splits(task.trigger_data, seed=settings.seed, gate=settings.gate)
    module = TriggerModule(
        folder,
        distractor_cards(task, folder),
        agent=task.agent,
        order_seed=settings.seed,
        shown_others=task.shown_others,
        reply_tokens=task.reply_tokens,
        sampling=TriggerSampling(task.samples, task.temperature),
    )
    check = trigger_preflight(len(splits.val), task.samples, gate=settings.gate)
    return DescriptionPlan(folder, module, splits, check)


@dataclass(frozen=True)
class DescriptionOutcome:
    """What one description run measured and staged.

    `result` is the compile's own record; `trigger` the held-out table (seed, compiled, always
    and never trigger) on `held_out` requests (the test split, else validation); `staged` what
    was staged (`staged.accepted` False: nothing, the folder stays as it is); `compile_wall_s`
    the compile's wall time (measuring and staging left out, as the printed table shows it)."""

    result: CompileResult
    trigger: tuple[TriggerRow, ...]
    held_out: int
    staged: StagedFolder
    compile_wall_s: float
    preflight: TriggerPreflight | None = None

    def to_dict(self) -> JSONObject:
        """The measured figures as one JSON object (what `sleep describe --json` prints)."""
        r, staged = self.result, self.staged
        return {
            "run_dir": str(staged.run_dir),
            "scores": {
                "seed_val": r.seed_val_score,
                "val": r.val_score,
                "seed_test": r.seed_test_score,
                "test": r.test_score,
                "constant": None if r.baseline is None else r.baseline.label,
                "constant_val": None if r.baseline is None else r.baseline.val_score,
                "constant_test": None if r.baseline is None else r.baseline.test_score,
            },
            "held_out": self.held_out,
            "preflight": None if self.preflight is None else _preflight_record(self.preflight),
            "trigger": {label: _trigger_record(summary) for label, summary in self.trigger},
            "gate": {
                "decisions": len(r.gate_log),
                "accepted": sum(1 for d in r.gate_log if d.accepted),
            },
            "stop_reason": r.stop_reason,
            "calls": {
                "search": r.usage.calls,
                "test": None if r.test_usage is None else r.test_usage.calls,
            },
            "wall_s": round(self.compile_wall_s, 3),
            "staged": _staged_record(staged),
        }


def _preflight_record(check: TriggerPreflight) -> JSONObject:
    return {
        "val_requests": check.val_requests,
        "samples": check.samples,
        "gain": check.gain,
        "needed_val": check.needed_val,
        "needed_rows": check.needed_rows,
        "even_chance_gain": round(check.even_chance_gain, 4),
    }


def _trigger_record(summary: TriggerSummary) -> JSONObject:
    return {
        "rate_score": summary.rate_score,
        "accuracy": summary.accuracy,
        "precision": summary.precision,
        "recall": summary.recall,
        "tp": summary.true_positives,
        "fp": summary.false_positives,
        "tn": summary.true_negatives,
        "fn": summary.false_negatives,
        "failed_negatives": summary.failed_negatives,
    }


def _staged_record(staged: StagedFolder) -> JSONObject:
    if not staged.accepted:
        return {"accepted": False, "files": [], "diff": None, "adopt": None}
    return {
        "accepted": True,
        "files": [change.path for change in staged.changes],
        "diff": None if staged.diff_path is None else str(staged.diff_path),
        "adopt": staged.adopt_command,
    }


def words_optimizer() -> Optimizer:
    """Compile's default search (`compile.default_optimizer()`: `HandOff`, GradientText then
    Bundle where its screens show only small effects) on the proposer that needs no optimizer
    model: one-line edits from the missed requests' words (`TriggerWordsProposer`),
    consolidated without a model call (`compile.default_optimizer_on`)."""
    return default_optimizer_on(
        [TriggerWordsProposer()], consolidation=ConsolidationProposer(use_model=False)
    )


def distractor_cards(task: DescriptionTask, folder: SkillFolder) -> tuple[SkillCard, ...]:
    """The other skills' cards: `task.distractors` (a JSONL file or a folder of skill
    folders), else the skill folders beside `folder`; an error when there are none."""
    where = task.distractors if task.distractors is not None else folder.root.resolve().parent
    if where.is_file():
        return load_skill_cards(where)
    cards = read_skill_cards(where, exclude=(folder.name,))
    if not cards:
        raise UserInputError(
            f"no other skills to choose among in {where}: pass --distractors FILE.jsonl (one "
            '{"name": ..., "description": ...} a line) or a folder of skill folders'
        )
    return cards


def train_description(
    task: DescriptionTask,
    settings: CompileSettings,
    optimizer: Optimizer | None,
    plan: DescriptionPlan | None = None,
) -> DescriptionOutcome:
    """Compile `task`'s description under `settings` (which must name a `run_dir`), measure
    it on the held-out requests and stage it there; see the module docstring. `plan` is
    `plan_description(task, settings)` when the caller made it already (to print its
    pre-flight before the first call)."""
    if settings.run_dir is None:
        raise UserInputError("train_description needs settings.run_dir (where to stage)")
    chosen = plan if plan is not None else plan_description(task, settings)
    folder, module, splits = chosen.folder, chosen.module, chosen.splits
    started = time.perf_counter()
    result = compile_with(
        module,
        splits.train,
        splits.val,
        replace(settings, testset=splits.test or None),
        optimizer,
    )
    wall_s = time.perf_counter() - started
    held_out = splits.test or splits.val
    directory = Path(settings.run_dir)
    replies = ResponseCache(RunFiles(directory).cache)
    try:
        rows = _trigger_rows(
            module, held_out, result, resolve_lm(settings.lm).with_cache(replies), settings
        )
    finally:
        replies.close()
    staged = stage_folder(result, folder, directory, flags=_copied_flags(module, result, splits))
    return DescriptionOutcome(result, tuple(rows), len(held_out), staged, wall_s, chosen.preflight)


def _copied_flags(module: TriggerModule, result: CompileResult, splits: Splits) -> list[str]:
    """The staged diff's warning when the compiled description adds words that training
    requests hold and no validation request does (pasted, not generalised)."""
    old = module.description_of(result.seed_skill)
    words = copied_words(old, module.description_of(result.best_skill), splits.train, splits.val)
    if not words:
        return []
    return [
        f"the description adds words that training requests hold and no validation request "
        f"does: {', '.join(words)}; they may fit the training requests, not the category "
        "(rewrite them as the kind of request they stand for)"
    ]


def _trigger_rows(
    module: TriggerModule,
    examples: Sequence[Example],
    result: CompileResult,
    replay: LM,
    settings: CompileSettings,
) -> list[TriggerRow]:
    """Precision and recall on the held-out requests: seed and compiled (the compile's own
    calls, answered by `replay`'s cache when it scored them), and the constant answers (no
    call)."""

    def measured(skill: Skill) -> TriggerSummary:
        return measure_trigger(
            module, examples, skill=skill, lm=replay, threads=settings.threads, seed=settings.seed
        )

    seed = measured(result.seed_skill)
    best = seed if result.best_skill == result.seed_skill else measured(result.best_skill)
    return [
        ("seed", seed),
        ("compiled", best),
        ("always trigger", constant_trigger_summary(examples, True)),
        ("never trigger", constant_trigger_summary(examples, False)),
    ]
