"""Judging: the metric for mined tasks and the book of every judged reply.

Judges are metric functions returning `Score` with feedback: the rule judge (hard = every check
passes, soft = the share that pass) and, for tasks with a rubric, the library's LLM judge
(`skillopt_dsl.metrics.llm_judge`, the optimizer model grading 1-5, scaled to 0-1), whose calls
go through the same client, ledger, budget, cache and retries as every other call of the night.
A rubric passes at a score of at least `RUBRIC_PASS` (0.8, SkillOpt-Sleep's hard pass: on the
1-5 scale only a 5); hard mode scores the rubric as passed or not, soft mode by its score.

The `ScoreBook` keeps every judged reply by skill and task: the contrastive feedback's best
replies (`skillopt_dsl.sleep.dreams`), the stage's per-task scores and the gate's
`no_regression_guard`.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import pydantic

from skillopt_dsl.evaluate import EvaluationReport
from skillopt_dsl.gate import Guard
from skillopt_dsl.metrics import Score, llm_judge
from skillopt_dsl.metrics.judge import LLMJudge
from skillopt_dsl.sleep.errors import SleepError
from skillopt_dsl.sleep.tasks import Check, check_passes
from skillopt_dsl.types import Example, Prediction

if TYPE_CHECKING:
    from skillopt_dsl.lm import LM, UsageLedger

__all__ = [
    "RUBRIC_PASS",
    "Entry",
    "ScoreBook",
    "TaskJudge",
    "checks_of",
    "no_regression_guard",
]

_CHECKS = pydantic.TypeAdapter(list[Check])
RUBRIC_PASS = 0.8
"""A rubric passes when its judge's score (0-1) is at least this."""


@dataclass(frozen=True)
class Entry:
    """One judged reply."""

    score: float
    feedback: str | None
    output: str


class ScoreBook:
    """Every judged reply by (skill hash, task id): the evidence and the no-regression guard."""

    def __init__(self) -> None:
        self._entries: dict[tuple[str, str], Entry] = {}
        self._lock = threading.Lock()

    def record(self, skill_hash: str, example_id: str, entry: Entry) -> None:
        """Keep one judged reply."""
        with self._lock:
            self._entries[(skill_hash, example_id)] = entry

    def get(self, skill_hash: str, example_id: str) -> Entry | None:
        """The judged reply of one task under one skill, if it ran."""
        with self._lock:
            return self._entries.get((skill_hash, example_id))

    def best(self, example_id: str) -> Entry | None:
        """The best-scoring reply to a task under any skill (its copies and dream variants,
        `<id>~...`, count as the task)."""
        base = example_id.split("~", 1)[0]
        with self._lock:
            found = [e for (_, eid), e in self._entries.items() if eid.split("~", 1)[0] == base]
        return max(found, key=lambda e: e.score, default=None)

    def scores(self, skill_hash: str) -> dict[str, float]:
        """Per-task scores of one skill."""
        with self._lock:
            return {eid: e.score for (h, eid), e in self._entries.items() if h == skill_hash}


class TaskJudge:
    """The metric for mined tasks: rule checks (soft or hard) and, with a rubric, an LLM judge.

    A task with both is scored by the mean of the two. `rubric_lm=None` disables rubric judging
    (tasks with only a rubric must then be left out of the night). A rubric passes at a score
    of at least `rubric_pass` (hard mode: 1 or 0; soft mode: the score itself). The rubric
    judge's calls are re-pointed at the ledger of the run that scores them (`bind`), so the
    night's budget counts them and stops them like any other call.
    """

    __name__ = "sleep_task_judge"

    def __init__(
        self,
        *,
        mode: Literal["soft", "hard"] = "soft",
        rubric_lm: LM | None = None,
        rubric_pass: float = RUBRIC_PASS,
    ) -> None:
        if not 0.0 < rubric_pass <= 1.0:
            raise SleepError(f"rubric_pass must be in (0, 1], got {rubric_pass!r}")
        self.mode = mode
        self.rubric_pass = rubric_pass
        self._rubric_lm = rubric_lm
        self._bound: LM | None = rubric_lm
        self._judges: dict[str, LLMJudge] = {}
        self._lock = threading.Lock()

    @property
    def judges_rubrics(self) -> bool:
        """True when tasks with a rubric are graded by a model."""
        return self._rubric_lm is not None

    def bind(self, ledger: UsageLedger) -> None:
        """Count rubric-judge calls on `ledger` (the run's)."""
        if self._rubric_lm is None:
            return
        with self._lock:
            if self._bound is None or self._bound.ledger is not ledger:
                self._bound = self._rubric_lm.with_ledger(ledger)
                self._judges = {}

    def __call__(self, example: Example, prediction: Prediction) -> Score:
        if prediction.error is not None:
            return Score(0.0, f"no usable reply: {prediction.error}")
        reply = str(prediction.outputs.get("response") or prediction.raw)
        parts: list[Score] = []
        checks = _CHECKS.validate_json(example.labels.get("checks") or "[]")
        if checks:
            parts.append(self._rules(checks, reply))
        rubric = str(example.labels.get("rubric") or "")
        if rubric and self._bound is not None:
            parts.append(self._rubric(rubric, example, prediction))
        if not parts:
            raise SleepError(
                f"task {example.id} has no rule checks and rubric judging is off; "
                "drop the task or give it a check"
            )
        value = sum(p.value for p in parts) / len(parts)
        return Score(value, " | ".join(p.feedback or "" for p in parts))

    def rules_score(self, example: Example, reply: str) -> float:
        """The rule checks' score of `reply` for `example` (1.0 when it has no checks)."""
        checks = _CHECKS.validate_json(example.labels.get("checks") or "[]")
        return self._rules(checks, reply).value if checks else 1.0

    def _rules(self, checks: list[Any], reply: str) -> Score:
        failed = [c.describe() for c in checks if not check_passes(c, reply)]
        share = 1 - len(failed) / len(checks)
        value = share if self.mode == "soft" else float(not failed)
        if not failed:
            return Score(value, f"all {len(checks)} checks passed")
        return Score(
            value,
            f"{len(checks) - len(failed)}/{len(checks)} checks passed; failed: "
            + "; ".join(failed),
        )

    def _rubric(self, rubric: str, example: Example, prediction: Prediction) -> Score:
        with self._lock:
            judge = self._judges.get(rubric)
            if judge is None:
                assert self._bound is not None  # checked by the caller
                judge = llm_judge(rubric, lm=self._bound, fields=["response"])
                self._judges[rubric] = judge
        graded = Example(example.id, example.inputs, {"reference": example.labels.get("response")})
        score = judge(graded, prediction)
        passed = score.value >= self.rubric_pass - 1e-9
        verdict = f"rubric {score.value:.2f} {'>=' if passed else '<'} {self.rubric_pass:g}"
        value = score.value if self.mode == "soft" else float(passed)
        return Score(value, f"{verdict} ({'passed' if passed else 'failed'}): {score.feedback}")


def no_regression_guard(book: ScoreBook, seed_hash: str) -> Guard:
    """A gate guard: a candidate that scores below the live files on any val task is rejected.

    It counts the val tasks on which a report scores below the seed (the live files); the seed
    counts 0, and any count above 0 is a regression beyond the tolerance of 0.
    """

    def measure(report: EvaluationReport) -> float:
        seed = book.scores(seed_hash)
        return float(sum(1 for r in report.records if r.score < seed.get(r.example_id, 0.0) - 1e-9))

    return Guard(name="no_regression", measure=measure, tolerance=0.0, higher_is_better=False)


def checks_of(example: Example) -> list[dict[str, object]]:
    """The example's checks as plain dicts (for reports)."""
    return list(json.loads(example.labels.get("checks") or "[]"))
