"""OptunaLR: an Optuna sweep over an inner optimizer's hyperparameters (the learning rate first).

Each trial copies the inner optimizer with the sampled settings (`dataclasses.replace`) and
runs it from the seed skill in a trial run of its own (`RunView.trial_driver`): its own run
directory (`<run_dir>/trials/<number>` when the outer run has one), the same models, ledger,
response cache and evaluation cache, so the budget is global and no skill is scored twice.

Trials never see the gate's validation examples. A seeded selection split
(`selection_fraction` of the trainset, `RunView.selection_split`) is carved off the training
set: each trial learns on the rest, and its own gate decides on the selection split. The trial's
value is its gated selection score. Only the sweep's single best skill goes to the real gate, on
validation, against the seed, declaring the learning rates of the trial's accepted steps (the
door composes their budgets and measures the change itself). Intermediate values are reported
at the end of every epoch (the inner optimizer's `epoch`, a round for Beam) so a pruner can stop
bad settings early:

- `MedianPruner` (or any pruner): the mean selection score, at step = epoch;
- `WilcoxonPruner`: the per-example selection scores, at step = epoch * len(select) + index,
  as Optuna's documentation asks (one step per instance), checked after each report.

The first trial is the inner optimizer's own configuration (enqueued). Each trial's skill text,
run directory and cost are stored as JSON user attributes.

`storage` ("sqlite:///sweep.db", "postgresql://...", or a JournalFile path ending in .log or
.journal) makes the study resumable (`load_if_exists=True`) and shareable by several worker
processes (see `skillopt_dsl.sweeps.run_sweep_worker`). A sweep ends with `n_trials` finished
(COMPLETE or PRUNED) trials in the study, counting earlier runs and other workers: a resumed
sweep runs only the remainder. A trial left RUNNING by a killed worker is failed and re-run with
the same settings: RDB storages (SQLite, PostgreSQL, MySQL) record a heartbeat and fail trials
whose heartbeat stopped (`RetryFailedTrialCallback` re-enqueues them); on every storage a
resumed run also fails the trials its own run directory left RUNNING. Workers started at the
same moment create the storage's tables, the study and its first trial once, under a lock
(`creation_lock`: a PostgreSQL advisory lock, a lock file beside an SQLite database). The
study's storage, locks, trial claims and records live in `skillopt_dsl.studies` (their names
are re-exported here).
"""

from __future__ import annotations

import dataclasses
import logging
import shutil
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from skillopt_dsl.driver import CompileContext, LearningRateBound, RunView, SelectionSplit
from skillopt_dsl.errors import BudgetExceeded, UserInputError
from skillopt_dsl.json_types import JSONObject
from skillopt_dsl.optimizers.base import Optimizer, StudyPlots
from skillopt_dsl.optimizers.gradient_text import GradientText
from skillopt_dsl.optimizers.state import as_json
from skillopt_dsl.runs import RunDirectory
from skillopt_dsl.skill import Skill
from skillopt_dsl.studies.claims import (
    CLAIM_POLL_S,
    FINISHED,
    SurplusTrial,
    all_claimed,
    fail_orphaned_trials,
    finished_trials,
    is_surplus,
)
from skillopt_dsl.studies.records import SweepResult, TrialRecord
from skillopt_dsl.studies.storage import (
    GRACE_PERIOD_S,
    HEARTBEAT_INTERVAL_S,
    POSTGRES_LOCK_KEY,
    creation_lock,
    open_storage,
    open_study,
    optuna_module,
    plot_folder,
)
from skillopt_dsl.types import json_float, json_int

if TYPE_CHECKING:
    import optuna

__all__ = [  # the study's storage, claims and records live in skillopt_dsl.studies (re-exported)
    "CLAIM_POLL_S",
    "FINISHED",
    "GRACE_PERIOD_S",
    "HEARTBEAT_INTERVAL_S",
    "POSTGRES_LOCK_KEY",
    "OptunaLR",
    "SearchSpace",
    "SurplusTrial",
    "SweepResult",
    "TrialRecord",
    "creation_lock",
    "fail_orphaned_trials",
    "finished_trials",
    "open_storage",
    "open_study",
    "plot_folder",
]

logger = logging.getLogger(__name__)

FloatRange = tuple[float, float, Literal["log", "linear"]]
IntRange = tuple[int, int, Literal["int"]]
Choices = Sequence[str | int | float | bool | None]
SearchSpace = Mapping[str, FloatRange | IntRange | Choices]
"""`{"lr": (0.02, 0.5, "log"), "batch_size": (4, 16, "int"), "schedule": ["constant", "cosine"]}`."""


@dataclass(kw_only=True)
class OptunaLR(Optimizer):
    """Sweep the inner optimizer's hyperparameters with Optuna (see the module docstring).

    Args:
        inner: the optimizer each trial runs (a dataclass: GradientText, Beam, ...).
        search_space: name -> (low, high, "log"|"linear"), (low, high, "int") or a list of choices;
            every name must be a field of `inner`.
        n_trials: finished (COMPLETE or PRUNED) trials the study ends with, counting earlier
            runs and other workers: a resumed sweep runs only the remainder.
        storage: None (in memory), "sqlite:///...", "postgresql://...", or a .log/.journal path.
        study_name: default "skillopt-<module name>".
        sampler: default `TPESampler(seed=seed)`.
        pruner: default none (every trial runs to the end); `MedianPruner()`, `WilcoxonPruner()`.
        seed: the default sampler's seed.
        plots: ask the caller for sweep plots next to the study, in `plot_folder`: `compile`
            returns the request (`CompileResult.study_plots`), the CLI and
            `skillopt_dsl.report.draw_study_plots(result)` draw it; the optimizer plots nothing.
        selection_fraction: share of the trainset carved off (seeded by the run's seed) for the
            trials' gates; trials learn on the rest. The validation set is for the final gate.
        heartbeat_interval, grace_period: seconds between a running trial's heartbeats, and the
            silence after which any worker fails the trial and re-runs its settings (RDB storages).
    """

    inner: Optimizer = field(default_factory=GradientText)
    search_space: SearchSpace = field(default_factory=lambda: {"lr": (0.02, 0.5, "log")})
    n_trials: int = 20
    storage: str | None = None
    study_name: str | None = None
    sampler: optuna.samplers.BaseSampler | None = None
    pruner: optuna.pruners.BasePruner | None = None
    seed: int = 0
    plots: bool = True
    selection_fraction: float = 0.3
    heartbeat_interval: int = HEARTBEAT_INTERVAL_S
    grace_period: int = GRACE_PERIOD_S
    name: str = "optuna-lr"
    last_study: optuna.study.Study | None = field(
        default=None, init=False, repr=False, compare=False
    )
    """The study of the last `optimize` call (None before one), for the caller's plots."""

    def __post_init__(self) -> None:
        if not dataclasses.is_dataclass(self.inner):
            raise UserInputError(
                "OptunaLR's inner optimizer must be a dataclass (GradientText, Beam)"
            )
        if self.n_trials < 1:
            raise UserInputError(f"n_trials must be >= 1, got {self.n_trials}")
        if not 0 < self.selection_fraction < 1:
            raise UserInputError(
                f"selection_fraction must be in (0, 1), got {self.selection_fraction}"
            )
        names = {f.name for f in dataclasses.fields(self.inner)}
        unknown = sorted(set(self.search_space) - names)
        if unknown:
            raise UserInputError(
                f"search_space names {unknown} are not settings of {type(self.inner).__name__}; "
                f"choose from {sorted(names - {'name', 'proposers'})}"
            )
        for name, spec in self.search_space.items():
            _distribution(name, spec)

    def study_plots(self, context: CompileContext) -> StudyPlots | None:
        """The sweep's study and the folder next to it, for the caller to plot (`plots=True`)."""
        study = self.last_study
        if not self.plots or study is None:  # None: a resumed run whose sweep had already ended
            return None
        folder = plot_folder(self.storage, study.study_name, context.run.path)
        return None if folder is None else StudyPlots(study, folder)

    def planned_decisions(
        self, n_train: int, *, max_calls: int | None = None, validation_size: int | None = None
    ) -> int | None:
        """Only the sweep's best reaches the run's gate (trials gate on a selection split)."""
        return 1

    def config(self) -> JSONObject:
        return {
            "optimizer": self.name,
            "inner": self.inner.config(),
            "search_space": {k: list(v) for k, v in self.search_space.items()},
            "n_trials": self.n_trials,
            "selection_fraction": self.selection_fraction,
            "storage": self.storage,
            "study_name": self.study_name,
            "sampler": type(self.sampler).__name__ if self.sampler else "TPESampler",
            "pruner": type(self.pruner).__name__ if self.pruner else None,
            "seed": self.seed,
        }

    def lr_bound(self) -> LearningRateBound:
        """The door's bound for the sweep's result: the largest `lr` and floor any trial may use
        (a trial's steps each declare their own rate; the door composes them)."""
        inner = self.inner.lr_bound()
        return LearningRateBound(
            max_lr=max(inner.max_lr, _top_of(self.search_space.get("lr"), 0.0)),
            floor_tokens=max(
                inner.floor_tokens, int(_top_of(self.search_space.get("lr_floor_tokens"), 0))
            ),
        )

    # -- the sweep -------------------------------------------------------------------------
    def create_study(self, view: RunView) -> optuna.study.Study:
        """Create (or load, when it exists in `storage`) this sweep's study."""
        optuna = optuna_module()
        return open_study(
            self.storage,
            self.study_name or f"skillopt-{view.module.name}",
            sampler=self.sampler or optuna.samplers.TPESampler(seed=self.seed),
            pruner=self.pruner or optuna.pruners.NopPruner(),
            first_trial=self._seed_params(),
            heartbeat_interval=self.heartbeat_interval,
            grace_period=self.grace_period,
        )

    def optimize(self, view: RunView) -> None:
        self.last_study = None
        if view.optimizer_state.get("submitted"):
            return
        study = self.last_study = self.create_study(view)
        owner = _owner(view)
        fail_orphaned_trials(study, owner)
        sweep = _Sweep(self, view, view.selection_split(self.selection_fraction), owner)
        while not sweep.budget_hit and (finished := finished_trials(study)) < self.n_trials:
            if all_claimed(study, finished, self.n_trials):
                # Every remaining trial is running in another worker: wait for them (a killed
                # worker's trial is failed by its heartbeat and re-queued, then run here).
                fail_orphaned_trials(study, None)
                time.sleep(CLAIM_POLL_S)
                continue
            study.optimize(sweep.objective, n_trials=1, catch=(SurplusTrial,))
        result = self._record(view, study)
        self._submit(view, study, result)
        if sweep.budget_hit:
            raise BudgetExceeded("the budget ran out during the sweep; the best trial was kept")

    def _seed_params(self) -> JSONObject:
        """The inner optimizer's own settings, where the search space can represent them."""
        params: JSONObject = {}
        for name, spec in self.search_space.items():
            value = getattr(self.inner, name)
            if _contains(spec, value):
                params[name] = value
            else:
                logger.warning(
                    "the inner optimizer's %s=%r is outside the search space", name, value
                )
        return params

    def _record(self, view: RunView, study: optuna.study.Study) -> SweepResult:
        result = SweepResult.from_study(study, self.storage)
        view.emit("sweep", **result.to_dict())
        return result

    def _submit(self, view: RunView, study: optuna.study.Study, result: SweepResult) -> None:
        best = result.best
        if best is None:
            logger.warning("no trial of study %r completed; keeping the seed", study.study_name)
            return
        attrs = _attrs(study, best.number)
        text, step_lrs = attrs["skill_text"], attrs.get("step_lrs", [])
        if not isinstance(text, str) or not isinstance(step_lrs, list):
            raise TypeError(f"trial {best.number} lacks a skill or its rates: {attrs!r:.200}")
        candidate = Skill(text)
        state: JSONObject = {"submitted": True, "sweep": as_json(result.to_dict())}
        lrs = [json_float(x) for x in step_lrs]
        if candidate.hash == view.incumbent.hash or not lrs:
            view.record_empty_step(
                step=0,
                epoch=0,
                kind="sweep",
                lr=view.bound.max_lr,
                note=f"the best trial ({best.number}) did not change the skill",
            )
            return
        view.submit(candidate, lr=lrs, step=0, epoch=0, kind="sweep")
        view.commit(state)


def _owner(view: RunView) -> str | None:
    """This run's identity in a shared study: its run directory (None without one)."""
    return None if view.run_path is None else str(view.run_path.resolve())


def _top_of(spec: Any, default: float) -> float:
    """The largest value a search-space entry can take (`default` when absent)."""
    if spec is None:
        return default
    if isinstance(spec, tuple) and len(spec) == 3 and spec[2] in ("log", "linear", "int"):
        return float(spec[1])
    return max(float(v) for v in spec if isinstance(v, int | float))


def _attrs(study: optuna.study.Study, number: int) -> JSONObject:
    trial = next(t for t in study.get_trials(deepcopy=False) if t.number == number)
    return dict(trial.user_attrs)


class _Sweep:
    """One process's share of a sweep: runs trials as separate trial runs of the outer view."""

    def __init__(
        self, owner: OptunaLR, view: RunView, split: SelectionSplit, run_owner: str | None
    ) -> None:
        self.owner, self.view, self.split, self.run_owner = owner, view, split, run_owner
        self.budget_hit = False

    def objective(self, trial: optuna.trial.Trial) -> float:
        """Run the inner optimizer with the trial's settings; the value is its gated score on
        the selection split. A trial started after `n_trials` others were already claimed (two
        workers starting at once) is failed as surplus before it runs anything."""
        if is_surplus(trial, self.owner.n_trials):
            raise SurplusTrial(f"trial {trial.number}: {self.owner.n_trials} trials are claimed")
        if self.run_owner is not None:
            trial.set_user_attr("owner", self.run_owner)
        params = {n: _suggest(trial, n, s) for n, s in self.owner.search_space.items()}
        if "until_budget" in {f.name for f in dataclasses.fields(self.owner.inner)}:  # type: ignore[arg-type]
            params["until_budget"] = False  # a trial runs its epochs, not the whole sweep's budget
        inner = dataclasses.replace(self.owner.inner, **params)  # type: ignore[type-var]
        reporter = _Reporter(trial, self.owner.pruner, [e.id for e in self.split.select])
        child = self.view.trial_driver(
            self.split, self._trial_run(trial.number), on_event=reporter.on_event
        )
        reporter.context = child
        _start(child)
        before = self.view.usage()
        stop_reason = "pruned"
        try:
            stop_reason = inner.compile(child.module, child.trainset, child.valset, context=child)
            reporter.finish()
        finally:
            _store(trial, child, before, stop_reason)
        if stop_reason == "budget":
            self.budget_hit = True
            trial.study.stop()
        return child.incumbent_report.mean

    def _trial_run(self, number: int) -> RunDirectory:
        root = self.view.run_path
        if root is None:
            return RunDirectory(None)
        folder = root / "trials" / f"{number:04d}"
        if folder.exists():
            logger.info("replacing %s, left by an interrupted run of the same sweep", folder)
            shutil.rmtree(folder)
        return RunDirectory(folder)


def _start(child: CompileContext) -> None:
    """What compile() does before an optimizer runs: score the seed, save version 1."""
    seed = child.module.seed_skill
    report = child.book.seed_report = child.evaluate(seed, child.valset, label="selection")
    child.run.save_version(1, seed)
    child.emit("seed", skill_hash=seed.hash, val_score=report.mean)


def _store(trial: optuna.trial.Trial, child: CompileContext, before: Any, stop_reason: str) -> None:
    after = child.ledger.snapshot()
    accepted = [h for h in child.history if h.accepted]
    cost = (
        None
        if after.cost_usd is None or before.cost_usd is None
        else after.cost_usd - before.cost_usd
    )
    attrs: JSONObject = {
        "skill_text": child.incumbent.text,
        "run_dir": None if child.run.path is None else str(child.run.path),
        "calls": after.calls - before.calls,
        "cost_usd": cost,
        "stop_reason": stop_reason,
        "step_lrs": [h.lr_budget for h in accepted],
        "accepted_steps": len(accepted),
    }
    for key, value in attrs.items():
        trial.set_user_attr(key, value)
    if child.run.path is not None:
        child.publish_best(child.incumbent)


class _Reporter:
    """Reports a trial's validation score at each epoch end and raises TrialPruned when told."""

    def __init__(self, trial: optuna.trial.Trial, pruner: Any, val_ids: Sequence[str]) -> None:
        self.trial, self.val_ids = trial, list(val_ids)
        self.per_example = type(pruner).__name__ == "WilcoxonPruner"
        self.context: CompileContext | None = None
        self.epoch = 0
        self.scores: dict[str, float] = {}

    def on_event(self, event: str, payload: Mapping[str, object]) -> None:
        """Listener for the child's events: an epoch ends when a later epoch's step appears."""
        if event != "step" or self.context is None:
            return
        epoch = json_int(payload["epoch"])
        if epoch > self.epoch:
            self._report(self.epoch, check=True)
            self.epoch = epoch
        self.scores = self.context.incumbent_report.scores

    def finish(self) -> None:
        """Report the last epoch (no pruning: the trial is already complete)."""
        if self.context is not None:
            self.scores = self.context.incumbent_report.scores
        self._report(self.epoch, check=False)

    def _report(self, epoch: int, *, check: bool) -> None:
        if not self.scores:
            return
        if not self.per_example:
            self.trial.report(sum(self.scores.values()) / len(self.scores), epoch)
            self._maybe_prune(check)
            return
        base = epoch * len(self.val_ids)
        for index, example_id in enumerate(self.val_ids):
            self.trial.report(self.scores[example_id], base + index)
            self._maybe_prune(check)

    def _maybe_prune(self, check: bool) -> None:
        if check and self.trial.should_prune():
            raise optuna_module().TrialPruned(f"pruned after epoch {self.epoch}")


def _distribution(name: str, spec: Any) -> None:
    """Validate one search-space entry (raises UserInputError naming the entry)."""
    if isinstance(spec, tuple) and len(spec) == 3 and spec[2] in ("log", "linear", "int"):
        low, high, kind = spec
        if not low < high or (kind == "log" and low <= 0):
            raise UserInputError(
                f"search_space[{name!r}]: need 0 < low < high for log, low < high otherwise"
            )
        if kind == "int" and not (isinstance(low, int) and isinstance(high, int)):
            raise UserInputError(f"search_space[{name!r}]: int ranges need int bounds, got {spec}")
        return
    if isinstance(spec, (list, tuple)) and spec:
        return
    raise UserInputError(
        f"search_space[{name!r}] = {spec!r}: use (low, high, 'log'|'linear'), (low, high, 'int') "
        "or a non-empty list of choices"
    )


def _contains(spec: Any, value: Any) -> bool:
    if isinstance(spec, tuple) and len(spec) == 3 and spec[2] in ("log", "linear", "int"):
        return isinstance(value, (int, float)) and spec[0] <= value <= spec[1]
    return value in list(spec)


def _suggest(trial: optuna.trial.Trial, name: str, spec: Any) -> Any:
    if isinstance(spec, tuple) and len(spec) == 3 and spec[2] in ("log", "linear", "int"):
        low, high, kind = spec
        if kind == "int":
            return trial.suggest_int(name, low, high)
        return trial.suggest_float(name, low, high, log=kind == "log")
    return trial.suggest_categorical(name, list(spec))
