"""Trigger data and what a trigger evaluation measured.

Trigger data is JSONL, one `{"request": "...", "should_trigger": true | false}` a line, or
skill-creator's eval set as it is (a JSON array of `{"query": ..., "should_trigger": ...}`).
`load_trigger_splits` reads it (`read_trigger_rows`), refuses what no run could learn from
before any model call (a request labelled both ways, one label only, too few rows for the gate
to accept anything on validation, with how many are needed) and cuts seeded splits. `TriggerSummary` counts an
evaluation's picks (true and false positives and negatives) into precision, recall and accuracy;
`measure_trigger` evaluates a description on examples and summarises it, and
`constant_trigger_summary` is what "always trigger" or "never trigger" would score.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from statistics import NormalDist
from typing import TypedDict

from skillopt_dsl.data import Splits, load_splits
from skillopt_dsl.errors import DataError, UserInputError
from skillopt_dsl.evaluate import Rollout, evaluate
from skillopt_dsl.evidence import GateLevels, preflight
from skillopt_dsl.gate import Gate
from skillopt_dsl.lm import LM
from skillopt_dsl.skill import Skill
from skillopt_dsl.skill_folder.trigger import TriggerModule
from skillopt_dsl.types import Example

__all__ = [
    "REALISTIC_GAIN",
    "TRIGGER_SIZES",
    "TriggerDataRow",
    "TriggerPreflight",
    "TriggerSizes",
    "TriggerSummary",
    "check_trigger_examples",
    "constant_trigger_summary",
    "load_trigger_splits",
    "measure_trigger",
    "minimum_val_rows",
    "read_trigger_rows",
    "split_trigger_rows",
    "trigger_preflight",
]

logger = logging.getLogger(__name__)


class TriggerDataRow(TypedDict):
    """One trigger row as read: the request and whether this skill should load for it."""

    request: str
    should_trigger: bool


TriggerSizes = tuple[float, float, float] | tuple[int, int, int]
"""Train/val/test sizes: three fractions, or three counts (as `load_splits` takes them)."""

TRIGGER_SIZES: TriggerSizes = (0.4, 0.3, 0.3)
"""The default train/val/test fractions of a trigger dataset."""


def load_trigger_splits(
    path: str | Path,
    *,
    seed: int = 0,
    sizes: TriggerSizes = TRIGGER_SIZES,
    gate: GateLevels | None = None,
) -> Splits:
    """Load trigger data and cut it into seeded train/val/test splits, refusing before any
    model call data no run could learn from (see `read_trigger_rows` and `split_trigger_rows`).

    Raises `UserInputError` naming the file and the problem: a row without a request or a
    boolean label, the same request labelled both ways, rows that hold one label, or too few
    rows for `gate` (default `Gate()`) to accept anything on the validation split (with how
    many are needed)."""
    file = Path(path)
    return split_trigger_rows(read_trigger_rows(file), str(file), seed=seed, sizes=sizes, gate=gate)


def read_trigger_rows(path: Path) -> list[TriggerDataRow]:
    """The rows of a trigger data file: JSONL, one `{"request": ..., "should_trigger": ...}` a
    line, or skill-creator's eval set as it is, a JSON array of `{"query": ...,
    "should_trigger": ...}` objects (other keys are ignored). An exact repeat of a row is
    dropped with a warning; the same request labelled both ways is a `UserInputError`."""
    if not path.is_file():
        raise UserInputError(f"trigger data {str(path)!r} does not exist")
    text = path.read_text(encoding="utf-8-sig")
    if text.lstrip().startswith("["):
        try:
            loaded = json.loads(text)
        except json.JSONDecodeError as exc:
            raise UserInputError(f"{path}: not a JSON array of rows ({exc})") from exc
        raw = [(f"{path} item {n}", row) for n, row in enumerate(loaded, start=1)]
    else:
        raw = []
        for number, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                try:
                    raw.append((f"{path}:{number}", json.loads(line)))
                except json.JSONDecodeError as exc:
                    raise UserInputError(f"{path}:{number}: not a JSON object ({exc})") from exc
    return _distinct([_row(where, row) for where, row in raw], path)


def _row(where: str, row: object) -> TriggerDataRow:
    if not isinstance(row, dict):
        raise UserInputError(f"{where}: a trigger row is a JSON object, got {row!r}")
    request = row.get("request", row.get("query"))
    label = row.get("should_trigger")
    if not isinstance(request, str) or not request.strip():
        raise UserInputError(
            f"{where}: a trigger row needs a non-empty `request` (or skill-creator's `query`), "
            f"got {request!r}"
        )
    if not isinstance(label, bool):
        raise UserInputError(f"{where}: `should_trigger` must be true or false, got {label!r}")
    return {"request": request, "should_trigger": label}


def _distinct(rows: list[TriggerDataRow], path: Path) -> list[TriggerDataRow]:
    seen: dict[str, bool] = {}
    kept: list[TriggerDataRow] = []
    for row in rows:
        key = " ".join(row["request"].split()).casefold()
        if key not in seen:
            seen[key] = row["should_trigger"]
            kept.append(row)
        elif seen[key] != row["should_trigger"]:
            raise UserInputError(
                f"{path}: the request {row['request'][:80]!r} is labelled both should trigger "
                "and should not; keep the one label it deserves"
            )
    if len(kept) < len(rows):
        logger.warning("%s: %d repeated row(s) dropped", path, len(rows) - len(kept))
    return kept


def minimum_val_rows(gate: GateLevels | None = None, limit: int = 500) -> int | None:
    """The fewest validation requests on which `gate` (default `Gate()`) can accept anything
    at its first decision: a description that fixes every one of them (None: none up to
    `limit`). Pure arithmetic, no model call."""
    chosen = gate if gate is not None else Gate()
    return next(
        (n for n in range(1, limit + 1) if preflight(chosen, n, None).clean_fix is not None), None
    )


REALISTIC_GAIN = 0.10
"""The gain in mean trigger rate `trigger_preflight` sizes a run for by default."""


@dataclass(frozen=True)
class TriggerPreflight:
    """How many requests a trigger run needs, said before any call: on `val_requests`
    validation requests with `samples` samples each, the requests a gain of `gain` in mean
    trigger rate needs for an even chance to pass the gate's first decision (`needed_val`), and
    the rows in all at the validation share of the split (`needed_rows`). `rate_sd` is the
    standard deviation of one request's paired difference in trigger rate that the arithmetic
    assumed."""

    val_requests: int
    samples: int
    gain: float
    rate_sd: float
    level: float
    needed_val: int
    needed_rows: int

    @property
    def enough(self) -> bool:
        """Whether the run has the validation requests the gain needs."""
        return self.val_requests >= self.needed_val

    @property
    def even_chance_gain(self) -> float:
        """The gain in mean trigger rate with an even chance to pass on this run's
        `val_requests` (the same arithmetic solved for the gain)."""
        z = NormalDist().inv_cdf(1 - self.level)
        return z * self.rate_sd / math.sqrt(max(self.val_requests, 1))

    def line(self) -> str:
        """One line for the command line, printed before the first call."""
        verdict = (
            "this run has enough"
            if self.enough
            else f"this run's {self.val_requests} give an even chance only to a gain of "
            f"{self.even_chance_gain:+.2f} or more"
        )
        return (
            f"pre-flight: {self.val_requests} validation requests x {self.samples} sample(s); a "
            f"gain of {self.gain:+.2f} in trigger rate needs about {self.needed_val} for an "
            f"even chance to pass ({self.needed_rows} rows in all); {verdict}"
        )


def trigger_preflight(
    val_requests: int,
    samples: int,
    *,
    gain: float = REALISTIC_GAIN,
    rate_sd: float | None = None,
    gate: GateLevels | None = None,
    val_share: float = float(TRIGGER_SIZES[1]),
) -> TriggerPreflight:
    """How many requests a trigger run at `samples` samples per request needs for a gain of
    `gain` in mean trigger rate to have an even chance at the gate's first decision (default
    `Gate()`); pure arithmetic, no model call.

    The paired test on graded scores is approximated by the one-sided paired z-test at the
    first decision's level: n = (z * sd / gain)^2. `rate_sd` is the standard deviation of one
    request's paired difference of trigger rates when measured (a bench's figure); by default
    the sampling noise of two rates of `samples` samples each at p = 1/2, the noisiest case:
    sqrt(2 * 0.25 / samples). More samples per request shrink it, so fewer requests do."""
    if samples < 1 or gain <= 0:
        raise UserInputError(f"samples must be at least 1 and gain above 0, got {samples}, {gain}")
    chosen = gate if gate is not None else Gate()
    check = preflight(chosen, max(val_requests, 1), None)
    level = check.first_level if check.first_level is not None else chosen.alpha
    sd = rate_sd if rate_sd is not None else math.sqrt(0.5 / samples)
    needed = math.ceil((NormalDist().inv_cdf(1 - level) * sd / gain) ** 2)
    return TriggerPreflight(
        val_requests, samples, gain, sd, level, needed, math.ceil(needed / val_share)
    )


def split_trigger_rows(
    rows: Sequence[TriggerDataRow],
    source: str,
    *,
    seed: int = 0,
    sizes: TriggerSizes = TRIGGER_SIZES,
    gate: GateLevels | None = None,
) -> Splits:
    """`rows` cut into seeded train/val/test splits, after refusing (a `UserInputError` naming
    `source` and the counts) rows that hold one label, or too few rows for the validation split
    to let `gate` accept anything (it says how many are needed)."""
    positives = sum(1 for row in rows if row["should_trigger"])
    counts = f"{source} has {len(rows)} row(s), {positives} should trigger and {len(rows) - positives} should not"
    if positives in (0, len(rows)):
        raise UserInputError(
            f"{counts}: one label only, so no description can beat the constant answer; add "
            "requests of the other kind"
        )
    needed = minimum_val_rows(gate)
    try:
        splits = load_splits(
            list(rows),
            input_fields=["request"],
            label_fields=["should_trigger"],
            seed=seed,
            sizes=sizes,
        )
    except DataError as exc:
        raise UserInputError(f"{counts}: too few to split ({exc})") from exc
    if not splits.train or (needed is not None and len(splits.val) < needed):
        share = sizes[1] if isinstance(sizes[1], float) else None
        total = (
            ""
            if share is None or needed is None
            else f" (about {math.ceil(needed / share)} rows in all)"
        )
        raise UserInputError(
            f"{counts}: the validation split holds {len(splits.val)}, and the gate cannot accept "
            f"any change on fewer than {needed} validation requests{total}; add requests"
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
    rate_score: float | None = None
    """The mean trigger rate against the label (the task's mean score over k samples per
    request); None for a constant answer, whose rate score is its accuracy."""

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
        """One aligned row: `label  accuracy  precision  recall  rate  (tp fp tn fn)`; the
        rate is the mean trigger rate against the label (the task's score)."""
        rate = self.accuracy if self.rate_score is None else self.rate_score
        return (
            f"{label:<20} accuracy {self.accuracy:.3f}  precision {_fraction(self.precision)}  "
            f"recall {_fraction(self.recall)}  rate {rate:.3f}  (tp {self.true_positives}, fp "
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
        mean = sum(r.score for r in rollouts) / len(rollouts) if rollouts else None
        return cls(counts["tp"], counts["fp"], counts["tn"], counts["fn"], counts["failed"], mean)


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
