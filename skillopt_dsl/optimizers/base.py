"""The optimizer contract: one base class, one `compile` signature, proposals only.

To write an optimizer, subclass `Optimizer` and implement two methods:

- `optimize(view)`: propose candidate skills and hand each to `view.submit(candidate, lr=...,
  ...)`, the single door to the incumbent (`skillopt_dsl.driver.RunView`). The view is
  read-only: `view.incumbent`, `view.trainset`, the models, `view.rng` (the only source of
  randomness), `view.optimizer_state`. The door measures the change itself against the step's
  learning rate you declare, refuses duplicates as duplicates (`Verdict.duplicate`), and asks
  the gate; treat every verdict but `accepted` as no progress. To choose among candidates,
  score them with `view.evaluate` on training examples (a mini-batch or
  `view.selection_split(fraction)`); the gate's validation examples are refused there. Keep
  run state in a JSON-serialisable object, not on `self`: after each verdict hand it to the
  door with `view.commit(state)` (it is checkpointed with the verdict; nothing else reaches the
  door until it is); on resume `view.optimizer_state` holds the last one.
- `config()`: the optimizer's settings as a JSON-ready dict (written to config.json).

Optionally `study_plots(context)`, asked once the search has ended (OptunaLR names its study;
`compile` returns the request as `CompileResult.study_plots` and the CLI or
`skillopt_dsl.report.draw_study_plots` draws it: optimizers and compile never plot), and `planned_decisions(n_train)`: the most gate decisions a run will ask for, over which
the run's significance is planned (default None: the open-ended schedule).

The door's bound comes from `lr_bound()`: by default the optimizer's `lr` (the most a step may
declare) and `lr_floor_tokens` (the least a step may change), fixed when the run starts.

`optimize` returns why it stopped: a `StopReason`, or a `Stop` that also says where (None:
"finished"). It writes no `stop` event itself: `Optimizer.compile` writes the run's one `stop`
event from it (so a composite optimizer, whose parts stop one after another, logs one).

`BudgetExceeded` raised anywhere inside `optimize` ends the run cleanly: the best skill so far
is kept and exported. Any other exception propagates, with the last checkpoint intact.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal

from skillopt_dsl.driver import LearningRateBound, RunView
from skillopt_dsl.errors import BudgetExceeded, UserInputError
from skillopt_dsl.json_types import JSONObject

if TYPE_CHECKING:
    from skillopt_dsl.driver import CompileContext
    from skillopt_dsl.module import SkillModule
    from skillopt_dsl.types import Example

__all__ = ["SMALL_EFFECTS", "Optimizer", "Stop", "StopReason", "StudyPlots", "check_step_settings"]

logger = logging.getLogger(__name__)

StopReason = Literal[
    "finished",
    "budget",
    "perfect",
    "significance",
    "train_solved",
    "patience",
    "patience_steps",
    "plateau",
    "small_effects",
    "pruned",
]
"""Why a search stopped (`CompileResult.stop_reason`, the `stop` event's `reason`):
`finished` (its planned steps done), `budget` (the call budget pays for no further step and
decision, or ran out), `perfect` (the incumbent is perfect on the whole validation set),
`significance` (no decision could accept any more), `train_solved` (the incumbent fails no
training example), `patience` /
`patience_steps` (so many epochs or steps without an accepted candidate), `plateau` (nothing new
proposed or passing), `small_effects` (GradientText's screens confirm nothing: `HandOff` hands
the run on), `pruned` (an OptunaLR trial cut short)."""

SMALL_EFFECTS: Final = "small_effects"
"""GradientText's stop when its screens show only small effects (`hand_off_after`): `HandOff`
then hands the rest of the run to Bundle."""


@dataclass(frozen=True)
class Stop:
    """Why a search stopped, and where (the fields its optimizer counts in), as the run's one
    `stop` event records it (`Optimizer.compile`)."""

    reason: StopReason
    epoch: int | None = None
    round: int | None = None
    idle_rounds: int | None = None
    detail: str | None = None

    def fields(self) -> dict[str, int | str]:
        """The event's fields besides the reason (those set)."""
        return {k: v for k, v in asdict(self).items() if k != "reason" and v is not None}


@dataclass(frozen=True)
class StudyPlots:
    """An optimizer's request that its caller draw an Optuna `study`'s plots into `folder`."""

    study: Any
    folder: Path


class Optimizer(ABC):
    """Base class of every optimizer (see the module docstring for the contract)."""

    name: str = "optimizer"

    def compile(
        self,
        module: SkillModule,
        trainset: Sequence[Example],
        valset: Sequence[Example],
        *,
        context: CompileContext,
    ) -> StopReason:
        """Run `optimize` on a read-only view of `context`, write the run's one `stop` event
        (its reason, where the search stopped, its step and the calls left), and return why it
        stopped.

        `module`, `trainset` and `valset` must be the ones `context` was built with (the
        signature is shared by all optimizers, so callers never depend on which one runs).
        """
        sizes = (len(trainset), len(valset))
        if module is not context.module or sizes != (len(context.trainset), len(context.valset)):
            raise ValueError("compile() must be called with the module and splits of its context")
        view = RunView(context, self.lr_bound())
        try:
            returned = self.optimize(view)
            context.verdict_committed()  # the state after its last verdict was handed over
            stop = returned if isinstance(returned, Stop) else Stop(returned or "finished")
        except BudgetExceeded as exc:
            logger.info("budget reached, keeping the best skill so far: %s", exc)
            stop = Stop("budget", detail=str(exc))
        stop = _perfect_checked(stop, context)
        context.stop_detail = stop.detail
        context.emit(
            "stop", reason=stop.reason, step=view.memory.step, calls_left=view.calls_left(),
            **stop.fields(),
        )  # fmt: skip
        return stop.reason

    @abstractmethod
    def optimize(self, view: RunView) -> Stop | StopReason | None:
        """Propose candidates and submit them through `view.submit`; optionally return why
        the search stopped (a `StopReason` such as "budget" or "plateau", or a `Stop` that
        also says where; None: "finished"). Write no `stop` event: `compile` writes it."""

    def lr_bound(self) -> LearningRateBound:
        """The door's learning-rate bound: `lr` and `lr_floor_tokens` of this optimizer.

        Override it when the settings have other names (OptunaLR: the search space's top)."""
        lr, floor = getattr(self, "lr", None), getattr(self, "lr_floor_tokens", None)
        if not isinstance(lr, int | float) or not isinstance(floor, int):
            raise TypeError(
                f"{type(self).__name__} needs `lr` and `lr_floor_tokens` settings, or an "
                "lr_bound() override, so that the door can bound its steps"
            )
        return LearningRateBound(max_lr=float(lr), floor_tokens=floor)

    def planned_decisions(
        self, n_train: int, *, max_calls: int | None = None, validation_size: int | None = None
    ) -> int | None:
        """The most gate decisions a run on `n_train` training examples will ask for (None:
        unknown), given the run's call budget `max_calls` and `validation_size` when known.
        The run's significance is planned over them (`SignificanceBudget`): a smaller, honest
        plan gives each decision more evidence to work with."""
        return None

    def study_plots(self, context: CompileContext) -> StudyPlots | None:
        """Asked by `compile` once the search has ended: a study whose plots the caller should
        draw (OptunaLR: its sweep). Optimizers never draw themselves. Default: None."""
        del context
        return None

    @abstractmethod
    def config(self) -> JSONObject:
        """This optimizer's settings, JSON-ready."""


def _perfect_checked(stop: Stop, context: CompileContext) -> Stop:
    """`stop`, unless it says `perfect` of an incumbent scored on a part of validation only
    (the seed on the gate's first look, a candidate accepted at an early look: perfect there,
    and the calls left did not pay for the rest, `RunView.incumbent_is_perfect`). The search
    rightly ended, since no decision the calls pay for could beat it, but the incumbent is not
    known to be perfect: the stop says `budget`, and its detail says how much was scored."""
    scored, size = len(context.incumbent_report.records), len(context.valset)
    if stop.reason != "perfect" or scored >= size:
        return stop
    detail = (
        f"perfect on the {scored} of {size} validation examples scored; "
        "the calls left did not pay for the rest"
    )
    return replace(stop, reason="budget", detail=detail)


def check_step_settings(
    settings: object, *, lr: float, max_edits: int | None, at_least_one: Sequence[str]
) -> None:
    """Validate the settings optimizers share: `lr` in (0, 1], `max_edits` >= 1 or None, and
    every field named in `at_least_one` >= 1. Raises `UserInputError` naming the field."""
    if not 0 < lr <= 1:
        raise UserInputError(f"lr must be in (0, 1], got {lr}")
    for name in at_least_one:
        if getattr(settings, name) < 1:
            raise UserInputError(f"{name} must be >= 1, got {getattr(settings, name)}")
    if max_edits is not None and max_edits < 1:
        raise UserInputError(f"max_edits must be >= 1 or None, got {max_edits}")
