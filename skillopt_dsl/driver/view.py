"""`RunView`: what an optimizer sees of a run (read-only), with the one door (`submit`).

`Optimizer.compile` builds one on the driver (`run.CompileContext`) for each optimizer run. A
composite optimizer (`HandOff`) gives each of its parts a view `within` its own part of the
checkpointed state (`state_parts`).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from skillopt_dsl.driver.door import (
    RESERVED_EVENTS,
    LearningRateBound,
    SelectionSplit,
    Step,
    Verdict,
)
from skillopt_dsl.driver.run import CompileContext
from skillopt_dsl.driver.state_parts import nest_part, read_part
from skillopt_dsl.errors import UserInputError
from skillopt_dsl.evaluate import EvaluationReport
from skillopt_dsl.json_types import JSONObject
from skillopt_dsl.lm import LM, UsageSnapshot
from skillopt_dsl.module import SkillModule
from skillopt_dsl.runs import RunDirectory
from skillopt_dsl.search_memory import SearchMemory
from skillopt_dsl.settings import EventListener
from skillopt_dsl.skill import ApplyReport, Skill
from skillopt_dsl.types import Example

__all__ = ["RunView"]


class RunView:
    """What an optimizer sees of a run: read-only, plus one door (`submit`).

    Read: `module`, `trainset`, `seed`, `threads`, `target_lm`, `optimizer_lm`, `rng` (the only
    source of randomness), `incumbent`, `version`, `bound`, `run_path`, `optimizer_state` (a copy of the
    state committed with the last verdict; {} on a fresh run), `usage()`. Search in: `memory` (the
    run's search memory, the same object for every part of a composite optimizer). Use: `evaluate` (never on
    the gate's validation examples), `selection_split`, `submit` and `commit`, `record_empty_step`, `emit`, `replan`,
    and for sweeps `trial_driver`. The gate's validation examples, the gate log, the history
    and the scored set are not reachable from here.
    """

    __slots__ = ("__driver", "_bound", "_part", "_val_ids")

    def __init__(
        self, driver: CompileContext, bound: LearningRateBound, part: Sequence[str] = ()
    ) -> None:
        if not 0 < bound.max_lr <= 1 or bound.floor_tokens < 0:
            raise UserInputError(
                f"a learning-rate bound needs 0 < max_lr <= 1, floor >= 0: {bound}"
            )
        self.__driver = driver
        self._bound = bound
        self._part = tuple(part)
        self._val_ids = frozenset(e.id for e in driver.valset)

    def within(self, name: str) -> RunView:
        """The same run as seen by the part `name` of a composite optimizer (`HandOff`): its
        `optimizer_state` is that part's ({} until it saves one), and the states it saves
        (`commit`'s, `record_empty_step`'s `state`) are saved as that part's,
        the other parts' kept beside it (`state_parts`)."""
        return RunView(self.__driver, self._bound, (*self._part, name))

    # -- read-only -------------------------------------------------------------------------
    @property
    def module(self) -> SkillModule:
        """The task."""
        return self.__driver.module

    @property
    def trainset(self) -> tuple[Example, ...]:
        """The examples the optimizer learns (and chooses) from."""
        return self.__driver.trainset

    @property
    def seed(self) -> int:
        """The run's seed."""
        return self.__driver.seed

    @property
    def threads(self) -> int:
        """Parallel model calls during evaluation."""
        return self.__driver.threads

    @property
    def target_lm(self) -> LM:
        """The model the skill is written for."""
        return self.__driver.target_lm

    @property
    def optimizer_lm(self) -> LM:
        """The model that proposes edits."""
        return self.__driver.optimizer_lm

    @property
    def rng(self) -> random.Random:
        """The run's only source of randomness (checkpointed with every verdict)."""
        return self.__driver.rng

    @property
    def incumbent(self) -> Skill:
        """The best skill so far (immutable)."""
        return self.__driver.incumbent

    @property
    def version(self) -> int:
        """The incumbent's version (1 = the seed)."""
        return self.__driver.version

    @property
    def run_path(self) -> Path | None:
        """The run directory (None for a run without one), to place an optimizer's own files."""
        return self.__driver.run.path

    @property
    def bound(self) -> LearningRateBound:
        """The door's learning-rate bound for this run."""
        return self._bound

    @property
    def optimizer_state(self) -> JSONObject:
        """A copy of the state committed with the last verdict ({} on a fresh run); this
        part's state in a view `within` a part."""
        return read_part(self.__driver.optimizer_state, self._part)

    @property
    def memory(self) -> SearchMemory:
        """The run's search memory (rejected and struck proposals, their evidence, the step
        counter): owned by the run, checkpointed with every verdict, and the same object in
        every view of the run (each part of a composite optimizer searches in it)."""
        return self.__driver.memory

    def _saved(self, state: JSONObject) -> JSONObject:
        """The run's whole optimizer state once this view's part has saved `state`."""
        return nest_part(self.__driver.optimizer_state, self._part, state)

    def usage(self) -> UsageSnapshot:
        """What the run has spent so far."""
        return self.__driver.ledger.snapshot()

    def calls_left(self) -> int | None:
        """Model calls the run's `Budget.max_calls` still allows (None: no call limit)."""
        return self.__driver.calls_left()

    @property
    def validation_size(self) -> int:
        """How many examples a gate decision scores at most (the validation set's size)."""
        return len(self._val_ids)

    def decision_calls(self, *, first_look: bool = False) -> int:
        """The most model calls the next gate decision spends on a new candidate: the candidate
        on the whole validation set (`first_look`: up to the first look at which the gate could
        accept it, the first look where it accepts early there, else the whole set; a reserve
        of fewer calls would only pay for a decision stopped for lack of them) and the
        incumbent where it has not been scored yet, each rollout at the measured
        `calls_per_rollout`."""
        return self.__driver.decision_calls(first_look=first_look)

    def calls_per_rollout(self) -> float:
        """The model calls one rollout of the module costs, as measured on this run (an agent
        episode or a DSPy program makes several; 1.0 until measured)."""
        return self.__driver.call_rate.per_rollout

    def certifiable_gain(self) -> float | None:
        """The gain in mean validation score that passes the next gate decision about half the
        time when rewording also moves some answers at random (`evidence.Preflight`); None when
        the gate runs no test (any gain passes) or no gain up to +1.0 would."""
        return self.__driver.certifiable_gain()

    def replan(self, decisions: int) -> None:
        """Plan the significance left over `decisions` more gate decisions, in place of those
        the run planned at its start and has not made (`SignificanceBudget.replan`): for a
        composite optimizer that hands the rest of the run to a search planning fewer (or
        more), so that its decisions get the shares the plan leaves them. Decided on training
        data and calls only, before any of those decisions sees a score, so the run's bound of
        `alpha` holds. A budget shared with other runs (`compile(significance=)`: a DSPy
        program's predictors) keeps its owner's plan; a Sleep night is one run, and replans."""
        self.__driver.replan(decisions)

    def can_accept(self) -> bool:
        """Whether the run's significance is not spent (False: what is left of it would not
        pass even a fix of every validation answer; the door then refuses candidates unscored,
        and a search stops with "significance")."""
        return self.__driver.can_accept()

    def incumbent_is_perfect(self) -> bool:
        """Whether the incumbent scores the best possible on every validation example (then
        no candidate can beat it, and a search stops). Where it was scored on a part and is
        perfect there, the driver scores the rest first when the budget pays for it. One bit
        of the gate's data, and only this one, reaches the optimizer."""
        return self.__driver.incumbent_is_perfect()

    def step_budget(self, lr: float) -> int:
        """The tokens one step at `lr` may move from the current incumbent (as the door counts)."""
        return self._bound.budget([lr], self.__driver.incumbent.token_count)

    # -- training-facing actions -----------------------------------------------------------
    def evaluate(
        self, skill: Skill, examples: Sequence[Example], *, label: str = "train"
    ) -> EvaluationReport:
        """Score `skill` on training examples (cached). The gate's examples are refused."""
        leaked = sorted(e.id for e in examples if e.id in self._val_ids)
        if leaked:
            raise UserInputError(
                f"optimizers may not evaluate on the gate's validation examples {leaked[:5]}: "
                "choose on a training mini-batch or on view.selection_split(...)"
            )
        return self.__driver.evaluate(skill, examples, label=label)

    def selection_split(self, fraction: float) -> SelectionSplit:
        """Carve a seeded selection split (`fraction` of the trainset, at least 1 example) off
        the training set; the same for a given seed and trainset. Needs 2+ training examples."""
        if not 0 < fraction < 1:
            raise UserInputError(f"selection fraction must be in (0, 1), got {fraction}")
        ordered = sorted(self.trainset, key=lambda e: e.id)
        if len(ordered) < 2:
            raise UserInputError(
                f"a selection split needs at least 2 training examples, got {len(ordered)}"
            )
        random.Random(f"selection-split:{self.seed}").shuffle(ordered)
        size = min(max(1, round(fraction * len(ordered))), len(ordered) - 1)
        split = SelectionSplit(tuple(ordered[size:]), tuple(ordered[:size]), fraction)
        self.__driver.emit(
            "selection_split", fraction=fraction, select_ids=[e.id for e in split.select]
        )
        return split

    def emit(self, event: str, /, **payload: Any) -> None:
        """Append an optimizer event to the run (the driver's own event names are refused)."""
        if event in RESERVED_EVENTS:
            raise UserInputError(f"event {event!r} is written by the driver only")
        self.__driver.emit(event, **payload)

    # -- the door --------------------------------------------------------------------------
    def submit(
        self,
        candidate: Skill,
        *,
        lr: float | Sequence[float],
        step: int,
        epoch: int,
        kind: str,
        report: ApplyReport | None = None,
        ends_on_rejection: bool = False,
    ) -> Verdict:
        """Hand a candidate to the door; see the module docstring.

        `lr` is the step's learning rate (its schedule's value), or, for a candidate reached by
        several consecutive steps (a sweep trial's result), the learning rate of each step. The
        door measures the change from the incumbent itself. Hand it the optimizer's state after
        the verdict with `commit` before anything else reaches the door.

        `ends_on_rejection`: the search ends if the gate rejects this candidate (Bundle's
        decision). Under a call budget its decision is then not stopped for futility at an
        interim look, since the calls that would save go unused: it goes on to the whole set,
        or to the prefix the calls left pay for (`driver.looks`), and is charged as any
        decision is. Without a call limit the stop still saves the calls it saves.

        Raises:
            UncommittedVerdict: the state after the last verdict was not committed.
        """
        lrs = (float(lr),) if isinstance(lr, int | float) else tuple(float(x) for x in lr)
        at_door = Step(candidate, lrs, step, epoch, kind, report, ends_on_rejection)
        return self.__driver._submit(at_door, self._bound)

    def commit(self, state: JSONObject) -> None:
        """Hand the door the optimizer's JSON `state` after the last verdict (this part's, in a
        view `within` a part): it is checkpointed with the verdict, and `optimizer_state`
        holds it on resume. Once per `submit`.

        Raises:
            UncommittedVerdict: no verdict is open.
        """
        self.__driver._commit(self._saved(state))

    def record_empty_step(
        self,
        *,
        step: int,
        epoch: int,
        kind: str,
        lr: float,
        note: str,
        report: ApplyReport | None = None,
        state: JSONObject | None = None,
    ) -> None:
        """Record a step that produced no candidate (nothing reached the door), with the
        report of the edits it tried (clipped ones among them), if any."""
        self.__driver._record_empty_step(
            step=step,
            epoch=epoch,
            kind=kind,
            lr=lr,
            budget_tokens=self.step_budget(lr),
            note=note,
            report=report,
            state=None if state is None else self._saved(state),
        )

    def trial_driver(
        self,
        split: SelectionSplit,
        run: RunDirectory,
        *,
        on_event: EventListener | None = None,
    ) -> CompileContext:
        """A separate driver for a sweep trial: it learns on `split.fit` and its gate decides
        on `split.select` (training examples only). Its incumbent is not this run's."""
        train_ids = {e.id for e in self.trainset}
        outside = [e.id for e in (*split.fit, *split.select) if e.id not in train_ids]
        if outside:
            raise UserInputError(f"a trial may only use training examples; not: {outside[:5]}")
        return self.__driver.child(run, trainset=split.fit, valset=split.select, on_event=on_event)
