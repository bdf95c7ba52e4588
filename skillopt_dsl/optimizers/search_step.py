"""The screened search step: propose, try alone, confirm, compose (docs/concepts.md, "Search").

The pieces every screened search shares (GradientText, Beam; OptunaLR trials, `SkillOptimizer`
and Sleep nights run GradientText), over one memory (`search_memory.SearchMemory`):

- `proposer_runs.ProposerRuns` runs the proposers (their counters; a request unchanged since a
  proposer's last paid call is not asked again), `screening.merge_duplicates` merges copies;
- `fit_proposal` fits each proposal to the room the learning rate leaves, `keeps_reserve` says
  whether screening it still leaves the calls a gate decision needs (priced at the measured calls
  per rollout, `RunView.calls_per_rollout`);
- `try_alone` tries it alone on the mini-batch that produced it (`screening.screen`), adds the
  result to the evidence of every earlier proposal of the same edit (the same text, or the same
  edit after normalisation: a small but repeated effect is seen), and strikes it when it fixed
  none of the failures it named or its evidence rules out the gain the gate certifies (blocked
  at its `screen_strikes`-th failure).

`ScreenedSteps` is GradientText's use of them, so that the loop in `gradient_text.py` reads as
the loop: a proposal with a clear gain joins the working candidate at once (`join_at_net`) or
after a confirmation on a fresh mini-batch (`min_net`); confirmations are never run on a batch
the working candidate solves (there they could only show breaks); small effects add up
(`_compose_small_effects`: proposals on trial whose summed training gain reaches what the gate
can certify join the working candidate together). Beam scores each survivor on its selection
split instead (`beam.py`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

from skillopt_dsl.driver import RunView
from skillopt_dsl.evaluate import Rollout
from skillopt_dsl.optimizers.clipping import clip_to_budget
from skillopt_dsl.optimizers.gradient_text_state import GradientTextState, ScreenedProposal
from skillopt_dsl.optimizers.proposers import EditGroup
from skillopt_dsl.optimizers.screening import EditEvidence, ScreenResult, screen
from skillopt_dsl.optimizers.search_memory import (
    SearchMemory,
    group_key,
    new_stats,
    record_screen,
)
from skillopt_dsl.skill import ApplyReport, Edit, Skill
from skillopt_dsl.types import Example

__all__ = [
    "SUBMIT_MARGIN",
    "Fitted",
    "ScreenedSteps",
    "Tried",
    "fit_proposal",
    "keeps_reserve",
    "luck_free_rate",
    "submit_gain",
    "try_alone",
]

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


@dataclass(frozen=True)
class Fitted:
    """A proposal fitted to a step's room: the edits kept (`clip_to_budget`), their memory
    `key`, and the base skill with them applied."""

    group: EditGroup
    kept: tuple[Edit, ...]
    key: str
    candidate: Skill


@dataclass(frozen=True)
class Tried:
    """A fitted proposal tried alone on the batch that produced it: the screen's `result`, its
    `evidence` summed with every earlier screen of the same edit, and whether it was `struck`
    (its claim failed, or its evidence rules out the gain the gate certifies)."""

    fitted: Fitted
    result: ScreenResult
    evidence: EditEvidence
    struck: bool


def fit_proposal(
    view: RunView,
    memory: SearchMemory,
    base: Skill,
    group: EditGroup,
    room: int,
    max_edits: int | None,
) -> tuple[Fitted | None, ApplyReport]:
    """Fit `group` to the `room` (tokens) a step may move from `base` and emit what became of
    each edit (`edit_report`, also returned); None when nothing of it applies or the text
    does not change."""
    candidate, kept, report = clip_to_budget(base, group.edits, room, max_edits)
    outcomes = [o.to_dict() for o in report.outcomes]
    view.emit("edit_report", step=memory.step - 1, outcomes=outcomes)
    if not kept or candidate.text == base.text:
        return None, report
    return Fitted(group, tuple(kept), group_key(kept), candidate), report


def try_alone(
    view: RunView,
    memory: SearchMemory,
    fitted: Fitted,
    batch: Sequence[Example],
    rollouts: Sequence[Rollout],
    strikes: int,
    *,
    epoch: int,
) -> Tried:
    """Screen a fitted proposal alone against the base whose `rollouts` on `batch` produced it
    (`screening.screen`), count and emit the screen (`record_screen`), add it to the
    proposal's evidence, and strike it (`SearchMemory.strike`, blocked at its `strikes`-th
    failure) when it fixed none of the failures it named or its evidence rules out the gain
    the gate certifies; a survivor is counted for its proposer (`survived`)."""
    group = fitted.group
    result = screen(view, fitted.candidate, batch, rollouts, addresses=group.addresses)
    record_screen(view, memory, group, result)
    evidence = memory.add_evidence(fitted.key, result)
    claim_failed = bool(group.addresses) and not result.passed
    struck = claim_failed or evidence.rules_out(view.certifiable_gain())
    if struck:
        memory.strike(fitted.kept, evidence.rate, epoch=epoch, limit=strikes)
    else:
        memory.proposer_stats.setdefault(group.source, new_stats())["survived"] += 1
    return Tried(fitted, result, evidence, struck)


def keeps_reserve(view: RunView, calls: int, reserve: int) -> bool:
    """Whether `calls` more screening calls still leave `reserve` calls (a gate decision, or its
    first look) in the call budget (always, without one)."""
    left = view.calls_left()
    return left is None or left - calls >= reserve


class ScreenedSteps:
    """Mixin of `GradientText`: screening, confirmation and composition of one step's
    proposals (module docstring). Reads the optimizer's settings below."""

    screen: bool
    max_edits: int | None
    min_net: float
    confirm_steps: int
    join_at_net: float | None
    submit_at_net: float | None
    screen_strikes: int

    def _screen_all(
        self,
        view: RunView,
        state: GradientTextState,
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
            if self._keeps_reserve(view, state, price):
                self._confirm(view, state, working, batch, rollouts, trial, room)
        blocked = state.blocked_keys() | {g.key for g in (*state.trials, *state.pending)}
        passed, screened = 0, 0
        survivors: list[tuple[ScreenedProposal, bool]] = []  # and whether it joins at once
        for group in groups:
            fitted, report = fit_proposal(view, state, working, group, room, self.max_edits)
            state.step_outcomes += report.outcomes
            if fitted is None or fitted.key in blocked:
                continue
            if not untried and not self._keeps_reserve(view, state, price):
                break  # the calls left are the gate's: a proposal proposed again is tried again
            blocked.add(fitted.key)
            kept, key = fitted.kept, fitted.key
            if untried:  # every proposal goes to the gate
                state.pending.append(ScreenedProposal.of(group, kept, key=key, net=0.0, scored=0))
                continue
            tried = try_alone(
                view, state, fitted, batch, rollouts, self.screen_strikes, epoch=state.epoch
            )
            screened += 1
            if tried.struck:
                continue
            passed += int(tried.result.passed)
            evidence = tried.evidence
            trial = ScreenedProposal.of(
                group, kept, key=key, net=evidence.net, scored=evidence.scored
            )
            clean = _clean_sweep(tried.result, failures, self.min_net)
            sweep = self.join_at_net is not None and clean
            survivors.append((trial, evidence.net >= self._join_at() or sweep))
        for trial, joins in survivors:  # with how many it was chosen among (`luck_free_rate`)
            survivor = dataclasses.replace(trial, screens=1, rivals=screened)
            (state.pending if joins else state.trials).append(survivor)
        return passed

    def _join_at(self) -> float:
        """The net gain on its own mini-batch with which a proposal joins unconfirmed."""
        if self.confirm_steps == 0:
            return self.min_net
        return math.inf if self.join_at_net is None else max(self.join_at_net, self.min_net)

    @staticmethod
    def _first_look_paid(view: RunView) -> bool:
        """Whether the calls left (if limited) pay for the next decision's first look, and
        that decision could accept anything (`RunView.can_accept`)."""
        left = view.calls_left()
        paid = left is None or left >= view.decision_calls(first_look=True)
        return paid and view.can_accept()

    @staticmethod
    def _keeps_reserve(view: RunView, state: GradientTextState, calls: int) -> bool:
        """Whether `calls` more screening calls still leave the step's reserve for the gate
        (`GradientTextState.reserve`) in the call budget (always, without one)."""
        return keeps_reserve(view, calls, state.reserve)

    def _confirm(
        self,
        view: RunView,
        state: GradientTextState,
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
        edits = trial.edits
        candidate, kept, _ = clip_to_budget(working, edits, room, self.max_edits)
        if len(kept) != len(edits) or candidate.text == working.text:
            return  # no longer fits the working candidate: proposed again, it is tried again
        result = screen(view, candidate, batch, rollouts, stage="confirm")
        record_screen(view, state, trial.group, result)
        evidence = state.add_evidence(trial.key, result)
        screens = (trial.screens or 0) + 1
        joined = dataclasses.replace(
            trial, net=evidence.net, scored=evidence.scored, screens=screens
        )
        # back from a rejected bundle (`gated`: its gate strikes), it is confirmed at least once
        done = screens > max(self.confirm_steps, trial.gated or 0)
        if evidence.rules_out(view.certifiable_gain()) or (done and evidence.net <= 0):
            state.strike(edits, evidence.rate, epoch=state.epoch, limit=self.screen_strikes)
        elif (result.passed and evidence.net >= self.min_net) or done:
            state.pending.append(joined)  # clear enough, or the evidence cannot tell: the gate
        else:
            state.trials.append(joined)

    def _last_chance(self, state: GradientTextState) -> None:
        """No step is left to confirm them: proposals on trial that gained on training data
        join the working candidate, so that the last gate decision the budget pays for is not
        left unused."""
        for trial in [t for t in state.trials if t.net > 0]:
            state.trials.remove(trial)
            state.pending.append(trial)

    def _compose_small_effects(self, view: RunView, state: GradientTextState) -> None:
        """Small effects add up: when the proposals on trial that have gained on training data
        (best first) and the working candidate's together show the gain the gate certifies
        about half the time (`RunView.certifiable_gain`), they join the working candidate now,
        so that one decision judges their sum (none of them alone could pass). Only under the
        default `submit_at_net=None`; a bundle the gate rejects sends each back on trial."""
        needed = submit_gain(view)
        if self.submit_at_net is not None or needed is None or not self.screen:
            return
        chosen = [t for t in state.trials if t.net > 0 and (t.screens or 0) > 0]
        gain = sum(luck_free_rate(g) for g in (*state.pending, *chosen))
        if gain < needed or not chosen or len(state.pending) + len(chosen) < 2:
            return  # one proposal alone is confirmed first (`min_net`, `confirm_steps`)
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
