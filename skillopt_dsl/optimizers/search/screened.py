"""GradientText's screened step: screen, confirm, compose (docs/concepts.md, "Search").

`ScreenedSteps` is GradientText's use of the shared search step (`step.SearchStep`), held by
the optimizer, so that the loop in `gradient_text.py` reads as the loop: a proposal with a clear
gain joins the working candidate at once (`join_at_net`) or after a confirmation on a fresh
mini-batch (`min_net`); confirmations are never run on a batch the working candidate solves
(there they could only show breaks); small effects add up (`compose_small_effects`: proposals on
trial whose summed training gain reaches what the gate can certify join the working candidate
together); the working candidate goes to the gate once its training gain reaches `submit_gain`.
It reads and writes only the part of a search's state a `TrialState` names.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from skillopt_dsl.driver import RunView
from skillopt_dsl.evaluate import Rollout
from skillopt_dsl.optimizers.proposers import EditGroup
from skillopt_dsl.optimizers.search.clipping import clip_to_budget
from skillopt_dsl.optimizers.search.proposal import ScreenedProposal
from skillopt_dsl.optimizers.search.screening import ScreenResult
from skillopt_dsl.optimizers.search.step import SearchStep, keeps_reserve
from skillopt_dsl.skill import EditOutcome, Skill
from skillopt_dsl.types import Example

__all__ = ["SUBMIT_MARGIN", "ScreenedSteps", "TrialState", "luck_free_rate", "submit_gain"]

SUBMIT_MARGIN = 2.0
"""How much more training gain than the gate's even-chance gain a working candidate shows before
it goes to the gate (`submit_gain`): the gain a screen measures on the few examples it scores is
that of the proposals that survived it, so it overstates what validation will show. Measured in
bench/bench_search_yield.py (margin 1: +0.240 / +0.318 at 200 / 400 calls; 2: see bench/README)."""


def submit_gain(view: RunView) -> float | None:
    """The training gain per example at which a working candidate goes to the gate: the gain
    the gate certifies about half the time, times `SUBMIT_MARGIN` (None: the gate runs no test,
    so any gain goes)."""
    needed = view.certifiable_gain()
    return None if needed is None else SUBMIT_MARGIN * needed


class TrialState(Protocol):
    """What `ScreenedSteps` reads and writes of a search's checkpointed state: the proposals
    on `trials` and those `pending` (joined to the working candidate), what became of the
    step's edits, the epoch, and the calls the step leaves for the gate (`reserve`)."""

    epoch: int
    reserve: int
    trials: list[ScreenedProposal]
    pending: list[ScreenedProposal]
    step_outcomes: list[EditOutcome]


@dataclass(frozen=True, kw_only=True)
class ScreenedSteps:
    """Screening, confirmation and composition of one step's proposals (module docstring):
    the `SearchStep` they run (its `max_edits` and `screen_strikes`) and the settings they
    read (`GradientText`'s of the same names)."""

    step: SearchStep
    screen: bool
    min_net: float
    confirm_steps: int
    join_at_net: float | None
    submit_at_net: float | None

    def screen_all(
        self,
        view: RunView,
        state: TrialState,
        working: Skill,
        batch: list[Example],
        rollouts: Sequence[Rollout],
        groups: Sequence[EditGroup],
        room: int,
        *,
        untried: bool = False,
    ) -> int:
        """Confirm the proposals on trial on this mini-batch (unless the working candidate
        solves all of it: there a confirmation could only show breaks), then try each new
        proposal alone on it (it produced them); returns how many passed their first screen.
        `untried` (a lean step, or `screen=False`): no confirmation and no screen, every new
        proposal joins the working candidate for the gate to judge."""
        price = math.ceil(len(batch) * view.calls_per_rollout())
        failures = sum(r.score < 1.0 for r in rollouts)
        failing, untried = failures > 0, untried or not self.screen
        for trial in list(state.trials) if failing and not untried else []:
            if keeps_reserve(view, price, state.reserve):
                self.confirm(view, state, working, batch, rollouts, trial, room)
        blocked = view.memory.blocked_keys() | {g.key for g in (*state.trials, *state.pending)}
        passed, screened = 0, 0
        survivors: list[tuple[ScreenedProposal, bool]] = []  # and whether it joins at once
        for group in groups:
            fitted, report = self.step.fit(view, working, group, room)
            state.step_outcomes += report.outcomes
            if fitted is None or fitted.key in blocked:
                continue
            if not untried and not keeps_reserve(view, price, state.reserve):
                break  # the calls left are the gate's: a proposal proposed again is tried again
            blocked.add(fitted.key)
            kept, key = fitted.kept, fitted.key
            if untried:  # every proposal goes to the gate
                state.pending.append(ScreenedProposal.of(group, kept, key=key, net=0.0, scored=0))
                continue
            tried = self.step.try_alone(view, fitted, batch, rollouts, epoch=state.epoch)
            screened += 1
            if tried.struck:
                continue
            passed += int(tried.result.passed)
            net, scored = tried.evidence.net, tried.evidence.scored
            trial = ScreenedProposal.of(group, kept, key=key, net=net, scored=scored)
            clean = _clean_sweep(tried.result, failures, self.min_net)
            sweep = self.join_at_net is not None and clean
            survivors.append((trial, net >= self.join_at() or sweep))
        for trial, joins in survivors:  # with how many it was chosen among (`luck_free_rate`)
            survivor = replace(trial, screens=1, rivals=screened)
            (state.pending if joins else state.trials).append(survivor)
        return passed

    def join_at(self) -> float:
        """The net gain on its own mini-batch with which a proposal joins unconfirmed."""
        if self.confirm_steps == 0:
            return self.min_net
        return math.inf if self.join_at_net is None else max(self.join_at_net, self.min_net)

    @staticmethod
    def first_look_paid(view: RunView) -> bool:
        """Whether the calls left (if limited) pay for the next decision's first look, and
        that decision could accept anything (`RunView.can_accept`)."""
        left = view.calls_left()
        return (left is None or left >= view.decision_calls(first_look=True)) and view.can_accept()

    def confirm(
        self,
        view: RunView,
        state: TrialState,
        working: Skill,
        batch: list[Example],
        rollouts: Sequence[Rollout],
        trial: ScreenedProposal,
        room: int,
    ) -> None:
        """Score a proposal on trial against the working candidate on a fresh mini-batch; it
        joins the working candidate once its net gain reaches `min_net`, and is remembered
        as rejected when it stops gaining or runs out of `confirm_steps`."""
        state.trials.remove(trial)
        edits, search = trial.edits, self.step
        candidate, kept, _ = clip_to_budget(working, edits, room, search.max_edits)
        if len(kept) != len(edits) or candidate.text == working.text:
            return  # no longer fits the working candidate: proposed again, it is tried again
        result, evidence = search.confirm(view, trial.group, trial.key, candidate, batch, rollouts)
        screens = (trial.screens or 0) + 1
        joined = replace(trial, net=evidence.net, scored=evidence.scored, screens=screens)
        # back from a rejected bundle (`gated`: its gate strikes), it is confirmed at least once
        done = screens > max(self.confirm_steps, trial.gated or 0)
        if evidence.rules_out(view.certifiable_gain()) or (done and evidence.net <= 0):
            view.memory.strike(edits, evidence.rate, epoch=state.epoch, limit=search.screen_strikes)
        elif (result.passed and evidence.net >= self.min_net) or done:
            state.pending.append(joined)  # clear enough, or the evidence cannot tell: the gate
        else:
            state.trials.append(joined)

    def last_chance(self, state: TrialState) -> None:
        """No step is left to confirm them: proposals on trial that gained on training data
        join the working candidate, so that the last gate decision the budget pays for is not
        left unused."""
        for trial in [t for t in state.trials if t.net > 0]:
            state.trials.remove(trial)
            state.pending.append(trial)

    def compose_small_effects(self, view: RunView, state: TrialState) -> None:
        """Small effects add up: when the proposals on trial that have gained on training data
        (best first) and the working candidate's together show the gain the gate certifies
        about half the time (`RunView.certifiable_gain`), they join the working candidate now,
        so that one decision judges their sum (none of them alone could pass). Not where the
        working candidate's own proposals already show that gain: the decision is theirs, and
        a passenger riding on it unconfirmed (a harmful rule that passed one screen by noise)
        would be accepted with them; passengers are confirmed first (bench/README §9v). Only
        under the default `submit_at_net=None`; a bundle the gate rejects sends each back on
        trial."""
        needed = submit_gain(view)
        if self.submit_at_net is not None or needed is None or not self.screen:
            return
        chosen = [t for t in state.trials if t.net > 0 and (t.screens or 0) > 0]
        joined = sum(luck_free_rate(g) for g in state.pending)
        gain = joined + sum(luck_free_rate(g) for g in chosen)
        if gain < needed or not chosen or len(state.pending) + len(chosen) < 2:
            return  # one proposal alone is confirmed first (`min_net`, `confirm_steps`)
        if joined >= needed:
            return  # the decision is the working candidate's: passengers are confirmed first
        for trial in chosen:
            state.trials.remove(trial)
            state.pending.append(trial)
        view.emit("compose_small", groups=len(chosen), gain=gain, needed=needed)


def luck_free_rate(group: ScreenedProposal) -> float:
    """A proposal's training gain per example, less the luck of being chosen: a survivor of a
    screen that tried `rivals` proposals on one batch is the luckiest of them, by up to an
    example (none when it was tried alone: nothing was chosen)."""
    luck = min(1.0, ((group.rivals or 1) - 1) / 2)
    return max(0.0, group.net - luck) / max(group.scored, 1)


def _clean_sweep(result: ScreenResult, failing: int, least: float) -> bool:
    """A clear fix on a batch of any size: it fixed every failure of its batch (at least
    `least` of them) and broke nothing. `join_at_net` asks more fixes than a small batch has."""
    return result.breaks == 0 and result.fixes >= max(failing, least)
