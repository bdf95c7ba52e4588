"""HandOff: GradientText first; Bundle for the rest of the run where effects prove small.

Which search finds more depends on the ground, and the ground is not known before the run:

- where one edit is worth much (a convention that fixes most failures, a tool-use rule for an
  agent, a real edit on a few noisy training examples), GradientText's screen sees its gain on
  a mini-batch at once, its working candidate builds on it step by step, and its first gate
  decision comes early;
- where each useful edit is small (a rule for one rare kind of input, worth a few points), a
  mini-batch rarely holds its kind of input, no screen can confirm it, and GradientText finds
  nothing; Bundle collects such fixes one by one and lets one decision judge their sum
  (docs/concepts.md, "Small effects").

HandOff runs GradientText, told to stop once `probe_steps` steps have run with nothing
accepted, nothing joined to its working candidate and nothing on trial (its
`hand_off_after`): its screens showed no effect a mini-batch can confirm. The rest of the run
(the calls left, the significance left) then goes to Bundle, provided the calls left still pay
for a whole gate decision (Bundle's one decision, cut to the gate's first look, rarely
certifies a sum of small fixes; bench/README §9r). Where any proposal passes a screen in those
steps, or the calls left are too few, GradientText keeps the run to its end, exactly as it runs
alone, with one exception: while nothing is accepted, a run whose calls left pay for
`bundle_decisions` whole gate decisions goes to Bundle whatever the screens showed (what is
joined or on trial is dropped; the memory keeps its evidence). There GradientText would spread
the significance over many small decisions, each at a stricter level than the last, where
Bundle has the calls to collect and audit before one decision at the next share
(bench/README §9t).

Both search in the run's one memory (`RunView.memory`, `skillopt_dsl.search_memory`): a
proposal rejected or struck before the hand-off stays so for Bundle, its screens' evidence goes
on summing, and step numbers go on. Each part keeps its own checkpointed state
(`RunView.within`, `driver.state_parts`): a run resumed after the hand-off resumes Bundle.
The run's significance is planned over GradientText's decisions; at the hand-off it is planned
again over Bundle's (`RunView.replan`): Bundle's one decision is tested at all that is left,
as when Bundle runs alone (bench/README §9u). `compile`'s default. Measured in
bench/bench_search_yield.py, bench_search_power.py and bench_dspy_react.py (bench/README.md).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from skillopt_dsl.driver import LearningRateBound, RunView
from skillopt_dsl.driver.state_parts import PHASE
from skillopt_dsl.errors import UserInputError
from skillopt_dsl.json_types import JSONObject
from skillopt_dsl.optimizers.base import SMALL_EFFECTS, Optimizer, Stop, StopReason
from skillopt_dsl.optimizers.bundle import Bundle
from skillopt_dsl.optimizers.gradient_text import GradientText
from skillopt_dsl.optimizers.proposers import Proposer
from skillopt_dsl.optimizers.search import pays_for_decisions

__all__ = ["BUNDLE_DECISIONS", "PROBE_STEPS", "HandOff"]

logger = logging.getLogger(__name__)

PROBE_STEPS = 1
"""The default `probe_steps`: one step whose screens confirm nothing hands the run off (a
second costs Bundle a step where effects are small; measured in bench/README.md §9g)."""

BUNDLE_DECISIONS = 6
"""The default `bundle_decisions`: calls left for six whole gate decisions hand a run with
nothing accepted to Bundle (4 and 10 screened beside it in bench/README §9t)."""

_FIRST, _THEN = "first", "then"


@dataclass(kw_only=True)
class HandOff(Optimizer):
    """GradientText, then Bundle where GradientText's screens show only small effects (module
    docstring).

    Args:
        first: the search that starts the run (its `hand_off_after` is set to `probe_steps`).
        then: the search the run is handed to.
        probe_steps: GradientText's steps with nothing accepted, joined or on trial after which
            it hands the run off.
        bundle_decisions: past the probe, with nothing accepted, the run is handed off where
            the calls left pay for this many whole gate decisions (None: never; a run begun
            before this setting existed, on 2026-12-07, resumes with None).
    """

    first: GradientText = field(default_factory=GradientText)
    then: Bundle = field(default_factory=Bundle)
    probe_steps: int = PROBE_STEPS
    bundle_decisions: int | None = BUNDLE_DECISIONS
    name: str = "hand-off"

    def __post_init__(self) -> None:
        if self.probe_steps < 1:
            raise UserInputError(f"probe_steps must be >= 1, got {self.probe_steps}")
        if self.bundle_decisions is not None and self.bundle_decisions < 1:
            raise UserInputError(f"bundle_decisions must be >= 1, got {self.bundle_decisions}")

    @property
    def screen_strikes(self) -> int | None:
        """The screen failures that block a proposal, where both searches agree (the memory
        goes from one to the other); None where they differ."""
        strikes = self.first.screen_strikes
        return strikes if strikes == self.then.screen_strikes else None

    @classmethod
    def with_proposers(
        cls, proposers: Sequence[Proposer], *, probe_steps: int = PROBE_STEPS
    ) -> HandOff:
        """Both searches, at their defaults, with the same `proposers` (a task's own, a
        bench's fake)."""
        first, then = GradientText(proposers=proposers), Bundle(proposers=proposers)
        return cls(first=first, then=then, probe_steps=probe_steps)

    def lr_bound(self) -> LearningRateBound:
        """The larger of the two searches' learning rates and floors: each declares its own
        steps', and the door checks each against them."""
        bounds = (self.first.lr_bound(), self.then.lr_bound())
        max_lr, floor = max(b.max_lr for b in bounds), max(b.floor_tokens for b in bounds)
        return LearningRateBound(max_lr=max_lr, floor_tokens=floor)

    def planned_decisions(
        self, n_train: int, *, max_calls: int | None = None, validation_size: int | None = None
    ) -> int | None:
        """GradientText's plan (at the hand-off the run plans Bundle's decisions instead:
        `RunView.replan`)."""
        return self.first.planned_decisions(
            n_train, max_calls=max_calls, validation_size=validation_size
        )

    def config(self) -> JSONObject:
        # bundle_decisions is absent where None, as runs before it wrote it: they still resume
        many = {} if self.bundle_decisions is None else {"bundle_decisions": self.bundle_decisions}
        parts = {_FIRST: self.first.config(), _THEN: self.then.config()}
        return {"optimizer": self.name, "probe_steps": self.probe_steps, **many, **parts}

    def optimize(self, view: RunView) -> Stop | StopReason | None:
        """GradientText's stop, or Bundle's after the hand-off (the run's one `stop` event is
        written by `Optimizer.compile`: a hand-off is no stop)."""
        if view.optimizer_state.get(PHASE) != _THEN:
            decisions = self.bundle_decisions
            first = replace(
                self.first, hand_off_after=self.probe_steps, hand_off_decisions=decisions
            )
            stop = first.optimize(view.within(_FIRST))
            if stop.reason != SMALL_EFFECTS:
                return stop
            self._hand_off(view)
        return self.then.optimize(view.within(_THEN))

    def _plan_then(self, view: RunView) -> None:
        """Plan the run's significance over the decisions Bundle plans for the rest of the run
        (its one), so that Bundle's decision is tested at all that is left, as when it runs
        alone (under GradientText's plan it got the share of GradientText's next decision: two
        thirds of alpha where GradientText planned several and made none)."""
        planned = self.then.planned_decisions(
            len(view.trainset), max_calls=view.calls_left(), validation_size=view.validation_size
        )
        view.replan(1 if planned is None else planned)

    def _hand_off(self, view: RunView) -> None:
        """Hand the rest of the run to Bundle, recorded as a step of the run (Bundle's state
        starts empty; the memory both search in is the run's)."""
        step, left = view.memory.step, view.calls_left()
        view.emit("hand_off", to=self.then.name, step=step, calls_left=left)
        self._plan_then(view)
        if pays_for_decisions(view, self.bundle_decisions):
            why = f"the calls left pay for {self.bundle_decisions} gate decisions"
        else:
            why = f"{step} steps confirmed no effect on a mini-batch"
        note = f"{why}: handed to {self.then.name}"
        logger.info("%s (calls left: %s)", note, "no limit" if left is None else left)
        view.within(_THEN).record_empty_step(
            step=step, epoch=0, kind="hand_off", lr=self.then.lr, note=note, state={}
        )
