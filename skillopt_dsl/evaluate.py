"""Run a module under a skill over examples, in parallel, and score every prediction.

`evaluate` never crashes on a model failure: a call that still fails after the model layer's
retries is recorded as a failed rollout (score 0, its error kept) and counts toward `max_errors`.
Two things do stop it, on purpose: a `BudgetExceeded` (the run's budget is spent) and a
`MetricError` (the user's metric is broken, and a silent zero would corrupt every decision).
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypedDict, Unpack

from skillopt_dsl.errors import (
    BudgetExceeded,
    MetricError,
    ModelError,
    TooManyErrors,
    UserInputError,
)
from skillopt_dsl.lm import LM, Backend, resolve_lm
from skillopt_dsl.metrics.score import call_metric
from skillopt_dsl.module import SkillModule
from skillopt_dsl.options import settings_from, takes_options
from skillopt_dsl.skill import Skill
from skillopt_dsl.types import Example, Prediction

__all__ = [
    "EvaluateOptions",
    "EvaluateSettings",
    "EvaluationCache",
    "EvaluationReport",
    "Rollout",
    "evaluate",
]

logger = logging.getLogger(__name__)

DEFAULT_THREADS = 4
"""Parallel model calls during evaluation, unless a caller says otherwise (every front door:
`compile`, `evaluate`, the DSPy optimizer, Sleep, the command line)."""


@dataclass(frozen=True)
class Rollout:
    """One example run under one skill: what was sent back, how it parsed, how it scored."""

    example_id: str
    output: str
    prediction: Prediction
    score: float
    feedback: str | None = None
    error: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    cached: bool = False
    extra_scores: Mapping[str, float] = field(default_factory=dict)
    trace: Any = field(default=None, compare=False, repr=False)

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready summary (the parsed prediction as its outputs and error)."""
        return {
            "example_id": self.example_id,
            "output": self.output,
            "outputs": {k: _jsonable(v) for k, v in self.prediction.outputs.items()},
            "score": self.score,
            "feedback": self.feedback,
            "error": self.error,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "latency_s": round(self.latency_s, 4),
            "cached": self.cached,
            "extra_scores": dict(self.extra_scores),
        }


@dataclass(frozen=True)
class EvaluationReport:
    """Every rollout of one evaluation, in the order of the examples, and their mean score."""

    records: tuple[Rollout, ...]
    skill_hash: str
    model: str

    @property
    def mean(self) -> float:
        """Mean score over all records (failed calls count as 0); 0.0 for no records."""
        return sum(r.score for r in self.records) / len(self.records) if self.records else 0.0

    @property
    def example_ids(self) -> tuple[str, ...]:
        """The ids of the evaluated examples, in order."""
        return tuple(r.example_id for r in self.records)

    @property
    def scores(self) -> dict[str, float]:
        """Per-example scores by example id."""
        return {r.example_id: r.score for r in self.records}

    def restricted_to(self, example_ids: Sequence[str]) -> EvaluationReport:
        """This report on the examples `example_ids` only (in this report's order)."""
        wanted = set(example_ids)
        kept = tuple(r for r in self.records if r.example_id in wanted)
        return EvaluationReport(kept, self.skill_hash, self.model)

    @property
    def n_errors(self) -> int:
        """How many rollouts failed at the model call (not parse failures)."""
        return sum(1 for r in self.records if r.error is not None)

    def summary(self) -> dict[str, object]:
        """Mean, counts and token totals, for logs and run files."""
        return {
            "skill_hash": self.skill_hash,
            "model": self.model,
            "mean": self.mean,
            "n": len(self.records),
            "errors": self.n_errors,
            "parse_failures": sum(
                1 for r in self.records if not r.prediction.ok and r.error is None
            ),
            "prompt_tokens": sum(r.prompt_tokens for r in self.records),
            "completion_tokens": sum(r.completion_tokens for r in self.records),
            "cached": sum(1 for r in self.records if r.cached),
        }


class EvaluationCache:
    """Rollouts keyed by (skill hash, example id, model, sampling params, seed); thread-safe.

    A skill already scored on an example is never run again in the same process; across
    processes the model layer's persistent response cache makes a rerun free.
    """

    def __init__(self) -> None:
        self._items: dict[tuple[str, ...], Rollout] = {}
        self._lock = threading.Lock()

    def get(self, key: tuple[str, ...]) -> Rollout | None:
        """The cached rollout for `key`, or None."""
        with self._lock:
            return self._items.get(key)

    def put(self, key: tuple[str, ...], rollout: Rollout) -> None:
        """Store a rollout."""
        with self._lock:
            self._items[key] = rollout

    def __len__(self) -> int:
        return len(self._items)


@dataclass(frozen=True, kw_only=True)
class EvaluateSettings:
    """The optional keywords of `evaluate(...)`, with their defaults (see `evaluate`)."""

    skill: Skill | str | None = None
    lm: str | Backend | LM | None = None
    threads: int = DEFAULT_THREADS
    max_errors: int | None = None
    cache: EvaluationCache | None = None
    seed: int = 0
    extra_metrics: Mapping[str, Callable[..., Any]] | None = None
    progress: bool | None = None


class EvaluateOptions(TypedDict, total=False):
    """`EvaluateSettings` as keywords: what `evaluate(module, examples, **options)` accepts."""

    skill: Skill | str | None
    lm: str | Backend | LM | None
    threads: int
    max_errors: int | None
    cache: EvaluationCache | None
    seed: int
    extra_metrics: Mapping[str, Callable[..., Any]] | None
    progress: bool | None


@takes_options(EvaluateSettings)
def evaluate(
    module: SkillModule, examples: Sequence[Example], **options: Unpack[EvaluateOptions]
) -> EvaluationReport:
    """Score `module` under `skill` (default: its seed skill) on `examples`.

    Args:
        module: the task.
        examples: the examples to run, each with a unique id.
        skill: the skill to evaluate; the module's seed skill when None.
        lm: the target model (litellm string, backend or `LM`); the embedded model when None.
        threads: parallel calls (default `DEFAULT_THREADS`, 4).
        max_errors: stop with `TooManyErrors` once more calls than this have failed.
        cache: reuse rollouts already computed for the same skill, example and model.
        seed: the rollout seed (part of every cache key; default 0).
        extra_metrics: more metrics to record per example (e.g. for gate guards).
        progress: show a progress bar; None shows one when stderr is a terminal.

    The keywords are `EvaluateSettings`' fields; an unknown one is a `TypeError`.

    Returns:
        An `EvaluationReport` with one `Rollout` per example, in order.
    """
    settings = settings_from("evaluate", EvaluateSettings, options)
    chosen = _as_skill(settings.skill, module)
    client = resolve_lm(settings.lm)
    _check_ids(examples)
    if settings.threads < 1:
        raise UserInputError(f"threads must be >= 1, got {settings.threads}")
    run = _Evaluation(module, chosen, client, settings)
    show = sys.stderr.isatty() if settings.progress is None else settings.progress
    with _progress_bar(len(examples), show, f"eval {chosen.hash[:8]}") as advance:
        records = run.run_all(examples, settings.threads, advance)
    report = EvaluationReport(tuple(records), chosen.hash, client.model)
    logger.info(
        "evaluated skill %s on %d examples: mean %.4f", chosen.hash[:12], len(records), report.mean
    )
    return report


def _as_skill(skill: Skill | str | None, module: SkillModule) -> Skill:
    if skill is None:
        return module.seed_skill
    return skill if isinstance(skill, Skill) else Skill(skill)


def _check_ids(examples: Sequence[Example]) -> None:
    seen: set[str] = set()
    dupes = [e.id for e in examples if e.id in seen or seen.add(e.id)]  # type: ignore[func-returns-value]
    if dupes:
        raise UserInputError(f"example ids must be unique; repeated: {dupes[:5]}")


class _Evaluation:
    """One evaluation's shared state: the error count and the stop flag."""

    def __init__(
        self, module: SkillModule, skill: Skill, lm: LM, settings: EvaluateSettings
    ) -> None:
        self.module, self.skill, self.lm, self.cache = module, skill, lm, settings.cache
        self.seed, self.max_errors = settings.seed, settings.max_errors
        self.extra_metrics = dict(settings.extra_metrics or {})
        self.refusal = module.skill_refusal(skill)
        self._errors = 0
        self._lock = threading.Lock()

    def run_all(
        self, examples: Sequence[Example], threads: int, advance: Callable[[], None]
    ) -> list[Rollout]:
        def task(example: Example) -> Rollout:
            rollout = self.run_one(example)
            advance()
            return rollout

        if threads == 1 or len(examples) <= 1:
            return [task(e) for e in examples]
        with ThreadPoolExecutor(max_workers=min(threads, len(examples))) as pool:
            futures = [pool.submit(task, e) for e in examples]
            try:
                return [f.result() for f in futures]
            except BaseException:
                for future in futures:
                    future.cancel()
                raise

    def _key(self, example: Example) -> tuple[str, ...]:
        return (self.skill.hash, example.id, self.lm.identity_hash(), str(self.seed))

    def run_one(self, example: Example) -> Rollout:
        key = self._key(example)
        if self.cache is not None and (hit := self.cache.get(key)) is not None:
            return hit
        rollout = self._rollout(example)
        if self.cache is not None and rollout.error is None:
            self.cache.put(key, rollout)
        return rollout

    def _rollout(self, example: Example) -> Rollout:
        if self.refusal is not None:  # a text the module cannot run: no call, a score of 0
            return self._refused(example, self.refusal)
        started = time.perf_counter()
        try:
            outcome = self.module.run(self.skill, example, self.lm, seed=self.seed)
        except (BudgetExceeded, MetricError):
            raise
        except ModelError as exc:
            self._count_error(example, exc)
            return self._failed(example, exc, latency=time.perf_counter() - started)
        score = self.module.score(example, outcome)
        extra = {
            name: call_metric(m, example, outcome.prediction).value
            for name, m in self.extra_metrics.items()
        }
        return Rollout(
            example_id=example.id,
            output=outcome.output,
            prediction=outcome.prediction,
            score=score.value,
            feedback=score.feedback,
            prompt_tokens=outcome.prompt_tokens,
            completion_tokens=outcome.completion_tokens,
            latency_s=outcome.latency_s,
            cached=outcome.cached,
            extra_scores=extra,
            trace=outcome.trace,
        )

    def _failed(self, example: Example, exc: ModelError, *, latency: float) -> Rollout:
        """A failed call scores 0 for the metric and every extra metric; none of them is called."""
        prediction = self.module.failed_prediction(f"model call failed: {exc}")
        return self._zero(example, prediction, f"the model call failed: {exc}", str(exc), latency)

    def _refused(self, example: Example, refusal: str) -> Rollout:
        """A skill text the module cannot run (`SkillModule.skill_refusal`, e.g. a candidate's
        description over an agent's limit, met on training data before the door refuses it)
        scores 0 like a failed call, with no call made and no error counted."""
        why = f"the module cannot run this skill: {refusal}"
        return self._zero(example, self.module.failed_prediction(why), why, why, 0.0)

    def _zero(
        self, example: Example, prediction: Prediction, feedback: str, error: str, latency: float
    ) -> Rollout:
        return Rollout(
            example_id=example.id,
            output="",
            prediction=prediction,
            score=0.0,
            feedback=feedback,
            error=error,
            latency_s=latency,
            extra_scores=dict.fromkeys(self.extra_metrics, 0.0),
        )

    def _count_error(self, example: Example, exc: Exception) -> None:
        with self._lock:
            self._errors += 1
            count = self._errors
        logger.warning("model call failed on example %s: %s", example.id, exc)
        if self.max_errors is not None and count > self.max_errors:
            raise TooManyErrors(
                f"{count} model calls failed (max_errors={self.max_errors}); last on example "
                f"{example.id!r}: {exc}. Check the model name, key and provider status, or raise max_errors."
            )


@contextmanager
def _progress_bar(total: int, show: bool, label: str) -> Iterator[Callable[[], None]]:
    if not show or total == 0:
        yield lambda: None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    bar = Progress(
        "{task.description}", BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), transient=True
    )
    with bar:
        task_id = bar.add_task(label, total=total)
        yield lambda: bar.advance(task_id)


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return str(value)
