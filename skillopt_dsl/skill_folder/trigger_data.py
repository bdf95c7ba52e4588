"""Trigger data and what a trigger evaluation measured.

Trigger data is JSONL, one `{"request": "...", "should_trigger": true | false}` a line, loaded
and split like any dataset (`load_trigger_splits` is `load_splits("json", ...)` with the two
columns named, plus a check that every label is a real boolean). `TriggerSummary` counts an
evaluation's picks (true and false positives and negatives) into precision, recall and accuracy;
`measure_trigger` evaluates a description on examples and summarises it, and
`constant_trigger_summary` is what "always trigger" or "never trigger" would score.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from skillopt_dsl.data import Splits, load_splits
from skillopt_dsl.errors import UserInputError
from skillopt_dsl.evaluate import Rollout, evaluate
from skillopt_dsl.lm import LM
from skillopt_dsl.skill import Skill
from skillopt_dsl.skill_folder.trigger import TriggerModule
from skillopt_dsl.types import Example

__all__ = [
    "TRIGGER_SIZES",
    "TriggerSizes",
    "TriggerSummary",
    "check_trigger_examples",
    "constant_trigger_summary",
    "load_trigger_splits",
    "measure_trigger",
]

TriggerSizes = tuple[float, float, float] | tuple[int, int, int]
"""Train/val/test sizes: three fractions, or three counts (as `load_splits` takes them)."""

TRIGGER_SIZES: TriggerSizes = (0.4, 0.3, 0.3)
"""The default train/val/test fractions of a trigger dataset."""


def load_trigger_splits(
    path: str | Path, *, seed: int = 0, sizes: TriggerSizes = TRIGGER_SIZES
) -> Splits:
    """Load a trigger JSONL file and cut it into seeded train/val/test splits.

    Raises `DataError` (a `UserInputError`) naming the problem when a row lacks `request` or
    `should_trigger`, and `UserInputError` when a label is not a JSON boolean."""
    file = Path(path)
    if not file.is_file():
        raise UserInputError(f"trigger data {str(file)!r} does not exist")
    splits = load_splits(
        "json",
        data_files=str(file),
        input_fields=["request"],
        label_fields=["should_trigger"],
        seed=seed,
        sizes=sizes,
    )
    for split in (splits.train, splits.val, splits.test):
        check_trigger_examples(split)
    return splits


def check_trigger_examples(examples: Sequence[Example]) -> None:
    """Raise `UserInputError` naming the first example whose `request` is not a non-empty
    string or whose `should_trigger` is not a boolean."""
    for example in examples:
        request = example.inputs.get("request")
        label = example.labels.get("should_trigger")
        if not isinstance(request, str) or not request.strip():
            raise UserInputError(
                f"trigger example {example.id!r}: `request` must be non-empty text, got {request!r}"
            )
        if not isinstance(label, bool):
            raise UserInputError(
                f"trigger example {example.id!r} ({request[:60]!r}): `should_trigger` must be "
                f"true or false, got {label!r}"
            )


@dataclass(frozen=True)
class TriggerSummary:
    """How often a router picked the skill when it should (true positives), when it should not
    (false positives), missed it (false negatives) or rightly left it (true negatives).

    A rollout whose model call failed is never right (a failed call scores 0): on a
    should-trigger request it is a miss (`false_negatives`), on a should-not-trigger request it
    is counted in `failed_negatives` (neither right nor a load)."""

    true_positives: int
    false_positives: int
    true_negatives: int
    false_negatives: int
    failed_negatives: int = 0

    @property
    def n(self) -> int:
        """How many requests were routed."""
        picks = self.true_positives + self.false_positives + self.true_negatives
        return picks + self.false_negatives + self.failed_negatives

    @property
    def accuracy(self) -> float:
        """The share of requests routed right (the trigger task's mean score)."""
        return (self.true_positives + self.true_negatives) / self.n if self.n else 0.0

    @property
    def precision(self) -> float | None:
        """Of the requests that loaded the skill, the share that should have; None when the
        skill was never loaded."""
        loaded = self.true_positives + self.false_positives
        return self.true_positives / loaded if loaded else None

    @property
    def recall(self) -> float | None:
        """Of the requests that should load the skill, the share that did; None when there
        were none."""
        wanted = self.true_positives + self.false_negatives
        return self.true_positives / wanted if wanted else None

    def line(self, label: str) -> str:
        """One aligned row: `label  accuracy  precision  recall  (tp fp tn fn)`."""
        return (
            f"{label:<20} accuracy {self.accuracy:.3f}  precision {_fraction(self.precision)}  "
            f"recall {_fraction(self.recall)}  (tp {self.true_positives}, fp "
            f"{self.false_positives}, tn {self.true_negatives}, fn {self.false_negatives}"
            f"{f', failed negatives {self.failed_negatives}' if self.failed_negatives else ''})"
        )

    @classmethod
    def from_rollouts(
        cls, examples: Sequence[Example], rollouts: Sequence[Rollout]
    ) -> TriggerSummary:
        """Count the picks of `rollouts` (matched to `examples` by id)."""
        check_trigger_examples(examples)
        wanted = {example.id: example.labels.get("should_trigger") for example in examples}
        missing = [r.example_id for r in rollouts if r.example_id not in wanted]
        if missing:
            raise UserInputError(f"rollouts of examples not given: {missing[:5]}")
        counts = {"tp": 0, "fp": 0, "tn": 0, "fn": 0, "failed": 0}
        for rollout in rollouts:
            counts[_cell(wanted[rollout.example_id] is True, rollout)] += 1
        return cls(counts["tp"], counts["fp"], counts["tn"], counts["fn"], counts["failed"])


def _cell(should: bool, rollout: Rollout) -> str:
    picked = rollout.error is None and rollout.prediction.outputs.get("should_trigger") is True
    if rollout.error is not None and not should:
        return "failed"
    if should:
        return "tp" if picked else "fn"
    return "fp" if picked else "tn"


def _fraction(value: float | None) -> str:
    return "  n/a" if value is None else f"{value:.3f}"


def constant_trigger_summary(examples: Sequence[Example], answer: bool) -> TriggerSummary:
    """What answering `answer` to every request scores ("always trigger" is True, "never
    trigger" False); no model call."""
    check_trigger_examples(examples)
    positives = sum(1 for example in examples if example.labels["should_trigger"])
    negatives = len(examples) - positives
    if answer:
        return TriggerSummary(positives, negatives, 0, 0)
    return TriggerSummary(0, 0, negatives, positives)


def measure_trigger(
    module: TriggerModule,
    examples: Sequence[Example],
    *,
    skill: Skill | None = None,
    lm: str | LM | None = None,
    threads: int = 4,
    seed: int = 0,
) -> TriggerSummary:
    """Route `examples` under `skill` (default: the module's seed description) with `lm` (the
    embedded model when None) and count the picks. `seed` is the rollout seed (a compile's
    `seed`, so its response cache answers the calls it already made)."""
    check_trigger_examples(examples)
    report = evaluate(
        module, examples, skill=skill, lm=lm, threads=threads, seed=seed, progress=False
    )
    return TriggerSummary.from_rollouts(examples, report.records)
