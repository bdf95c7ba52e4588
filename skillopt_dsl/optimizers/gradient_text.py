"""GradientText: SkillOpt's reflective loop with a real textual learning rate and a screen.

Each step: roll out the *working candidate* (the incumbent plus the proposals joined since the
last gate decision) on a training mini-batch, let the proposers read the rollouts and propose
typed edit groups, and try each group *alone* on that mini-batch (`screening.screen`: first the
failures it says it was written for, then the other failing examples, then the rest). What each
screen shows is summed per proposal across the steps that propose it again (`EditEvidence`); a
proposal is dropped only when that evidence rules out the gain the gate can certify, stays on
trial (confirmed on fresh batches) while it cannot tell, and joins the working candidate on a
clear gain (`search.ScreenedSteps`, the search step it holds). The working candidate goes to the door
(`RunView.submit`), which measures the change itself and asks the gate, once its training gain
reaches what the gate certifies (`search.submit_gain`), once it solves a whole batch, when
it holds `compose` proposals, or when the budget is about to run out: one decision, one share of
significance, for several screened proposals; small effects on trial are composed into it when
their sum can be certified. A batch the working candidate solves is not screened on. Screening
never touches validation, and the calls it may spend leave a whole gate decision's worth in the
budget, priced at the calls a rollout was measured to cost (`RunView.decision_calls`,
`RunView.calls_per_rollout`); in the budget's tail, where a whole decision no longer fits after a
step, only the gate's first look, and a decision there is tested on the validation examples the
calls left pay for (`driver.looks`). A small budget plans smaller batches (`budget_steps`); a ready candidate whose decision would be the budget's
last waits while a step still fits before it; where no screened step fits before the gate's first
look, a lean step (a small batch, its proposers, no screen) sends its proposals to the gate
(docs/concepts.md, "Small budgets"). A search ends early when the incumbent is perfect on
validation (`perfect`), an epoch had no training failure (`train_solved`), or the run's
significance is spent so that no decision could accept (`significance`, `RunView.can_accept`).

Memory is per proposal (edit group). A proposal that fails a screen is shown to the proposers as
rejected and is screened again only if proposed again, until its `screen_strikes`-th failure
at which its evidence rules it out (one unlucky mini-batch does not end a good edit, nor does
a failed claim: the failures it names not fixed, others it may fix). A proposal that gains
nothing on its batch fails its screen whether or not it names failures. The groups of a rejected
bundle go back on trial alone: confirmed again on training data, they rejoin a working
candidate, which is not sent to the gate again until a new proposal has joined it (the gate
never judges one text twice); a group rejected `gate_strikes` times, or alone, is remembered
as rejected. With a call budget the search goes on past `epochs` until the budget (less a
gate decision's reserve), `patience` or a `plateau` ends it, and the stop event says which and
how many calls were left.

The learning rate: a step may change at most `max(ceil(lr_t * tokens(skill)), lr_floor_tokens)`
tokens of the document (token-level edit distance), where `lr_t` follows the schedule; the floor
lets a short or empty seed grow. A working candidate built over several steps declares the
learning rate of each (a path), and the door checks its change against their summed budget.
`max_edits` optionally caps the number of edits per proposal. At the end of each epoch a slow
update proposes a consolidation of the document (screened and gated like any proposal).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, fields, replace

from skillopt_dsl.driver import RunView
from skillopt_dsl.errors import UserInputError
from skillopt_dsl.json_types import JSONObject
from skillopt_dsl.optimizers.base import (
    SMALL_EFFECTS,
    Optimizer,
    Stop,
    StopReason,
    check_step_settings,
)
from skillopt_dsl.optimizers.gradient_text_state import GradientTextState, group_json
from skillopt_dsl.optimizers.proposers import ConsolidationProposer, Proposer, default_proposers
from skillopt_dsl.optimizers.schedules import SCHEDULES, ScheduleName, lr_at
from skillopt_dsl.optimizers.search import (
    ProposerRuns,
    ScreenedSteps,
    SearchStep,
    clip_to_budget,
    draw_examples,
    new_stats,
    pays_for_decisions,
    proposal_request,
    submit_gain,
)
from skillopt_dsl.search_memory import group_key
from skillopt_dsl.skill import ApplyReport, Skill, token_distance
from skillopt_dsl.types import Example

__all__ = ["GradientText", "GradientTextState", "clip_to_budget"]

_NOT_PLAIN = frozenset({"name", "proposers", "consolidation", "screened"})
"""Settings `config` writes by name (proposers) or not at all (the optimizer's name is its own
key; the search step it holds is built from the others)."""
_COUNTS = ("epochs", "batch_size", "retry_every", "compose", "screen_strikes", "gate_strikes")
_COUNTS_OR_NONE = ("bench_after", "plateau", "budget_steps", "hand_off_after", "hand_off_decisions")


@dataclass(kw_only=True)
class GradientText(Optimizer):
    """Reflective edits, screened on training data, composed, gated on validation.

    Args:
        lr: base learning rate — the share of the document one step may change.
        max_edits: cap on edits per proposal (None: only the learning rate limits).
        schedule: "constant", "linear", "cosine", "warmup-cosine" or "step".
        epochs: passes over the training set. With a call budget (`Budget.max_calls`) and
            `until_budget`, the search goes on past them until the budget is spent.
        until_budget: keep searching (new batches, new epochs) while the call budget can still
            pay for a step and a gate decision; `patience`, `plateau` or the budget end it.
        batch_size: training examples per step.
        confirm_steps: a proposal that passed the screen on its own mini-batch is confirmed on
            the next mini-batches (against the working candidate, whose rollouts there are
            paid anyway), at most this many; 0: a proposal joins as soon as it passes its
            own mini-batch with `min_net`.
        min_net: the net gain (examples fixed minus broken, summed over every screen of the
            proposal, re-proposals included) with which a proposal joins the working
            candidate after one confirmation. One with less, but still a positive net gain,
            joins once its `confirm_steps` confirmations are done: where small or noisy
            batches cannot tell, the gate decides. A net gain of zero or less at any screen
            drops it (it hurts or cannot help).
        join_at_net: a proposal whose own mini-batch shows at least this net gain (a clear
            fix, scored on the whole batch) joins at once, unconfirmed, so a clear fix reaches
            the gate a step earlier (None: every proposal is confirmed; a value below
            `min_net` acts as `min_net`, so no proposal joins on less than a confirmed one).
        screen: False sends every proposal to the working candidate untried (with
            `compose=1`, every proposal to the gate: SkillOpt's loop, for measuring the gate
            alone); the default screens.
        compose: submit the working candidate once it holds this many confirmed proposals.
        submit_at_net: ... or once the net gain its proposals showed on training data,
            scaled to the validation set, reaches this many examples. None (the default):
            once that gain reaches what the gate certifies about half the time at this
            validation size and level (`RunView.certifiable_gain`): a clear winner goes to the
            gate at once, small effects are composed until their sum can be certified.
        patience: stop after this many epochs without an accepted candidate (None: never).
        patience_steps: stop after this many steps without an accepted candidate (None: never).
        plateau: stop after this many consecutive epochs in which no proposal passed the
            screen (None, the default: a call budget is spent to its end).
        slow_update: screen a consolidation of the document at the end of each epoch.
        lr_floor_tokens: the least a step may change, so short or empty seeds can grow.
        proposers: where edits come from (default: format rules, worked examples, reflection).
        consolidation: the slow update's proposer (default: repeated-paragraph removal plus
            the optimizer model's Replace/Delete edits for concision).
        bench_after: spend the budget on the proposers whose edits survive. A proposer that
            has spent model calls on `bench_after` steps without any of its proposals passing
            the screen is benched: it runs again only every `retry_every`-th step. Proposers
            that call no model are never benched; None: every proposer runs every step.
        retry_every: how often (in steps) a benched proposer is given another chance.
        screen_strikes: the screen failures after which a proposal proposed again is no
            longer screened (1: the first failure ends it).
        gate_strikes: the gate rejections (in bundles) after which a proposal is remembered
            as rejected; until then it goes back on trial after each.
        budget_steps: with a call budget, the run's first step plans a batch smaller than
            `batch_size` (at least 2) when the calls left after a gate decision would pay for
            fewer than this many steps of `batch_size`: a small budget gets more, smaller
            steps (None: always `batch_size`). Measured in bench/bench_search_yield.py.
        hand_off_after: stop with `SMALL_EFFECTS` once this many steps have run with nothing
            accepted, nothing joined to the working candidate and nothing on trial: the
            screens showed no effect a mini-batch can confirm (`HandOff` then hands the rest
            of the run to `Bundle`), while the calls left still pay for a whole gate decision
            (Bundle's one decision, cut to a first look, rarely certifies a sum of small
            fixes). None (the default): never.
        hand_off_decisions: past `hand_off_after` steps with nothing accepted, also stop with
            `SMALL_EFFECTS` where the calls left pay for this many whole gate decisions (the
            working candidate and proposals on trial dropped). None (the default): never.
    """

    lr: float = 0.3
    max_edits: int | None = None
    schedule: ScheduleName = "constant"
    epochs: int = 2
    until_budget: bool = True
    batch_size: int = 8
    confirm_steps: int = 2
    min_net: float = 2.0
    join_at_net: float | None = 4.0
    screen: bool = True
    compose: int = 3
    submit_at_net: float | None = None
    patience: int | None = None
    patience_steps: int | None = None
    plateau: int | None = None
    slow_update: bool = True
    lr_floor_tokens: int = 128
    proposers: Sequence[Proposer] = field(default_factory=default_proposers)
    consolidation: Proposer = field(default_factory=ConsolidationProposer)
    bench_after: int | None = 2
    retry_every: int = 4
    screen_strikes: int = 2
    gate_strikes: int = 2
    budget_steps: int | None = 3
    hand_off_after: int | None = None
    hand_off_decisions: int | None = None
    name: str = "gradient-text"
    screened: ScreenedSteps = field(init=False, repr=False, compare=False)
    """The search step it holds, built from the settings above (`search.ScreenedSteps`)."""

    def __post_init__(self) -> None:
        check_step_settings(self, lr=self.lr, max_edits=self.max_edits, at_least_one=_COUNTS)
        for name in _COUNTS_OR_NONE:
            value = getattr(self, name)
            if value is not None and value < 1:
                raise UserInputError(f"{name} must be >= 1 or None, got {value}")
        if self.confirm_steps < 0:
            raise UserInputError(f"confirm_steps must be >= 0, got {self.confirm_steps}")
        if self.schedule not in SCHEDULES:
            choices = ", ".join(SCHEDULES)
            raise UserInputError(f"unknown schedule {self.schedule!r}; choose one of {choices}")
        # the search step it holds: its settings are ours, by name
        same = {f.name: getattr(self, f.name) for f in fields(ScreenedSteps) if f.name != "step"}
        self.screened = ScreenedSteps(step=SearchStep(self.max_edits, self.screen_strikes), **same)

    def planned_decisions(
        self, n_train: int, *, max_calls: int | None = None, validation_size: int | None = None
    ) -> int | None:
        """At most one submission per step; under a call budget, at most what the budget pays
        for (each decision scores the validation set after at least one step's rollouts)."""
        steps = self.epochs * (math.ceil(n_train / self.batch_size) + int(self.slow_update))
        if max_calls is None or not validation_size:
            return steps
        per_decision = validation_size + self.compose * self._step_cost_guess(1.0)
        affordable = (max_calls - validation_size) // per_decision
        return max(1, affordable if self.until_budget else min(steps, affordable))

    def config(self) -> JSONObject:
        plain = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in _NOT_PLAIN}
        if self.hand_off_decisions is None:  # as runs before it wrote it: they still resume
            del plain["hand_off_decisions"]
        plain["proposers"] = [p.name for p in self.proposers]
        plain["consolidation"] = self.consolidation.name
        return {"optimizer": self.name, **plain}

    # -- the loop --------------------------------------------------------------------------
    def optimize(self, view: RunView) -> Stop:
        state = GradientTextState.from_dict(view.optimizer_state)  # {} on a fresh run
        stop: StopReason = "perfect" if view.incumbent_is_perfect() else self._search(view, state)
        self.screened.last_chance(state)
        if state.pending and stop != "perfect" and self.screened.first_look_paid(view):
            self._submit_working(view, state, kind="final")
            stop = state.stop_reason or stop
        return Stop(stop, epoch=state.epoch)

    def _search(self, view: RunView, state: GradientTextState) -> StopReason:
        """Run epochs of steps until a stop condition; returns the stop reason."""
        by_id = {e.id: e for e in view.trainset}
        while state.epoch < self.epochs or self._budget_left(view):
            if not state.order:
                state.order = sorted(by_id)
                view.rng.shuffle(state.order)
                state.cursor, state.slow_done = 0, False
                state.epoch_start_calls = view.usage().calls
                state.accepted_this_epoch = state.survived_this_epoch = False
                state.failures_this_epoch = False
            while state.cursor < len(state.order):
                if not view.can_accept():
                    return "significance"  # no decision could accept: steps only spend calls
                if self._hands_off(view, state):
                    state.pending.clear()  # the rest of the run is Bundle's: nothing to the gate
                    state.trials.clear()
                    return SMALL_EFFECTS
                size, kind = self._affordable(view, state), "step"
                if not size:
                    size, kind = self._lean_batch(view, state), "lean"
                if not size:  # `_affordable` may have sent the working candidate to the gate
                    return "budget" if view.can_accept() else "significance"
                ids = state.order[state.cursor : state.cursor + size]
                state.cursor += len(ids)
                self._step(view, state, [by_id[i] for i in ids], kind)
                if state.stop_reason is not None:
                    return state.stop_reason
                patience = self.patience_steps
                if patience is not None and state.steps_since_accept >= patience:
                    return "patience_steps"
            size = self._affordable(view, state) if self.slow_update and not state.slow_done else 0
            if size:
                state.slow_done = True
                self._step(view, state, draw_examples(view, view.trainset, size), "slow_update")
                if state.stop_reason is not None:
                    return state.stop_reason
            if not state.failures_this_epoch and not state.pending:
                return "train_solved"  # the incumbent solves every training example
            reason = self._end_epoch(state)
            if reason is not None:
                return reason
            if state.epoch >= self.epochs and view.usage().calls == state.epoch_start_calls:
                return "plateau"  # an epoch that asked nothing new: the next would not either
        return "budget" if self._budget_left(view) else "finished"

    def _hands_off(self, view: RunView, state: GradientTextState) -> bool:
        """Whether `hand_off_after` steps ran with nothing accepted, and the calls left pay for
        `hand_off_decisions` gate decisions (§9t), or one while nothing is joined or on trial (§9r)."""
        after, many = self.hand_off_after, self.hand_off_decisions
        if after is None or view.memory.step < after or view.version != 1:
            return False
        if pays_for_decisions(view, many):
            return True
        quiet = not state.pending and not state.trials
        return quiet and (view.calls_left() is None or pays_for_decisions(view, 1))

    def _end_epoch(self, state: GradientTextState) -> StopReason | None:
        """Close an epoch; the stop reason when patience or the plateau ends the search."""
        since, without = state.epochs_since_accept + 1, state.epochs_without_survivor + 1
        state.epochs_since_accept = 0 if state.accepted_this_epoch else since
        state.epochs_without_survivor = 0 if state.survived_this_epoch else without
        state.epoch, state.order = state.epoch + 1, []
        if self.patience is not None and state.epochs_since_accept >= self.patience:
            return "patience"
        if self.plateau is not None and state.epochs_without_survivor >= self.plateau:
            return "plateau"
        return None

    def _budget_left(self, view: RunView) -> bool:
        """Whether the search may go on past its epochs: a call budget, still room in it."""
        return self.until_budget and view.calls_left() is not None

    def _affordable(self, view: RunView, state: GradientTextState) -> int:
        """How many training examples the next step may take so that the calls left still
        pay for it and for a gate decision after it (`batch_size` without a call budget; a
        smaller batch when the budget is tight; 0: no step is affordable). When a whole
        decision no longer fits after a step, the working candidate (if any) goes to the gate
        while its first look can be paid, and the budget's tail is searched keeping only a
        first look's calls: a decision there is tested on the examples the calls left pay
        for (`RunView.decision_calls`, `driver.looks`)."""
        left = view.calls_left()
        if left is None:
            return self.batch_size
        state.reserve = view.decision_calls()
        rate = view.calls_per_rollout()
        if not state.batch_cap:  # planned once, at the run's first step
            state.batch_cap = self._planned_batch(left - state.reserve, rate)
        size = self._batch_within(state, left - state.reserve, rate)
        if size:
            return size
        if self.screened.first_look_paid(view):
            self.screened.last_chance(state)
            if state.pending:
                self._submit_working(view, state, kind="step")
                left = view.calls_left() or 0
        state.reserve = view.decision_calls(first_look=True)
        return self._batch_within(state, left - state.reserve, rate)

    def _batch_within(self, state: GradientTextState, calls: int, rate: float) -> int:
        """The largest batch (at most `batch_size`, at least 2) whose step costs at most
        `calls`, at the costliest rate per example a step has shown (or a first guess)."""
        per_example = state.max_step_rate or self._step_cost_guess(rate) / self.batch_size
        size = min(state.batch_cap or self.batch_size, math.floor(calls / per_example))
        return size if size >= min(2, self.batch_size) else 0

    def _lean_batch(self, view: RunView, state: GradientTextState) -> int:
        """The batch of a lean step, taken where no screened step fits before the gate's first
        look but a smaller one without a screen does: its rollouts and its proposers' calls
        (`Proposer.max_calls`) fit, and its proposals go to the gate untried (where training
        evidence cannot be bought, the gate decides). 0: none fits, or a candidate is waiting
        for the gate."""
        left = view.calls_left()
        if left is None or state.pending or not self.screen:
            return 0
        calls = left - view.decision_calls(first_look=True)
        rate = view.calls_per_rollout()
        for size in range(min(self.batch_size, math.floor(calls / rate)), 0, -1):
            if size * rate + sum(p.max_calls(size) for p in self.proposers) <= calls:
                return size
        return 0

    def _planned_batch(self, calls: int, rate: float) -> int:
        """The batch a run plans for its steps: `batch_size`, or smaller (at least 2) when the
        `calls` a budget leaves for training would pay for fewer than `budget_steps` steps of
        it (at the first guess of a step's cost): a small budget takes more, smaller steps."""
        if self.budget_steps is None:
            return self.batch_size
        per_example = self._step_cost_guess(rate) / self.batch_size
        fits = math.floor(calls / (self.budget_steps * per_example))
        return max(min(2, self.batch_size), min(self.batch_size, fits))

    def _step_cost_guess(self, calls_per_rollout: float) -> int:
        """A first guess of a step's calls: its rollouts, a proposer call, about three
        proposals screened on the failing half of the batch, one confirmation, each rollout
        at the measured `calls_per_rollout` (`RunView.calls_per_rollout`)."""
        return math.ceil(3 * self.batch_size * calls_per_rollout) + 2

    def _step(
        self, view: RunView, state: GradientTextState, batch: list[Example], kind: str
    ) -> None:
        """Propose on the working candidate's rollouts (the consolidation's, for a
        `slow_update`), screen each proposal alone, confirm the survivors, add them to the
        working candidate, and submit it when it is ready."""
        before = view.usage().calls
        memory = view.memory
        step, epoch = memory.step, state.epoch
        state.step_outcomes = []
        total = self.epochs * math.ceil(len({e.id for e in view.trainset}) / self.batch_size)
        lr_t = lr_at(self.schedule, self.lr, step, total)  # the step's scheduled rate
        memory.step += 1
        working, _ = self._working(view, state)
        room = self._room(view, state, working, lr_t)
        rollouts = view.evaluate(working, batch, label="train").records
        failing = any(r.score < 1.0 for r in rollouts)
        # a batch the working candidate solves is solved by the incumbent only where nothing
        # is pending: proposals the gate then rejects leave the incumbent's failures there
        state.failures_this_epoch = state.failures_this_epoch or failing or bool(state.pending)
        request = proposal_request(view, memory, working, batch, rollouts, room, epoch=epoch)
        spend = self._budget_left(view)
        runs = ProposerRuns(self.bench_after, self.retry_every, spend_budget=spend)
        # a slow update asks the consolidation; a solved batch has nothing to fix
        asked = [self.consolidation] if kind == "slow_update" else self.proposers if failing else []
        groups = self.screened.step.propose(view, runs, asked, request)
        view.emit("proposal", step=step, kind=kind, groups=[group_json(g) for g in groups])
        pending = len(state.pending)
        lean = kind == "lean"
        passed = self.screened.screen_all(
            view, state, working, batch, rollouts, groups, room, untried=lean
        )
        added = len(state.pending) - pending
        if added:
            state.pending_lrs.append(lr_t)
        state.survived_this_epoch = state.survived_this_epoch or bool(passed or added)
        spent = view.usage().calls - before  # the gate's calls are not a step's
        if not lean:  # a lean step screens nothing: its cost says nothing of a step's
            state.step_calls += spent
            state.steps_measured += 1
            state.max_step_rate = max(state.max_step_rate, spent / max(len(batch), 1))
            self.screened.compose_small_effects(view, state)
        solved = not failing and kind == "step"
        if (lean and state.pending) or self._ready(view, state, solved=solved):
            self._submit_working(view, state, kind=kind, step=step)
        else:
            state.steps_since_accept += 1
            note = f"screen: {len(groups)} proposed, {passed} passed, {added} confirmed"
            view.record_empty_step(
                step=step, epoch=epoch, kind=kind, lr=lr_t, note=note,
                report=ApplyReport(tuple(state.step_outcomes)), state=state.to_dict(),
            )  # fmt: skip

    def _room(self, view: RunView, state: GradientTextState, working: Skill, lr_t: float) -> int:
        """Tokens a proposal may move from the working candidate: the path budget of the
        steps it holds plus this one, less what it already moved from the incumbent."""
        incumbent = view.incumbent
        path = view.bound.budget([*state.pending_lrs, lr_t], incumbent.token_count)
        return max(0, path - token_distance(incumbent.text, working.text))

    def _ready(self, view: RunView, state: GradientTextState, *, solved: bool = False) -> bool:
        """Whether the working candidate goes to the gate now: enough confirmed proposals, or
        enough net gain shown on training data to expect the gate to see it (`submit_gain`;
        once it has `solved` a whole batch, training data can show no more, and the gain the
        gate certifies about half the time is enough)."""
        if not state.pending or self._last_decision_waits(view, state):
            return False
        if len(state.pending) > 1 and self._working(view, state)[0].hash in state.rejected_hashes:
            return False  # a bundle the gate has judged: it waits for a new proposal
        if len(state.pending) >= self.compose:
            return True
        rate = sum(g.net / max(g.scored, 1) for g in state.pending)
        if self.submit_at_net is not None:
            return rate * view.validation_size >= self.submit_at_net
        needed = view.certifiable_gain() if solved else submit_gain(view)
        return needed is None or rate >= needed  # None: a gate without a test takes any gain

    def _last_decision_waits(self, view: RunView, state: GradientTextState) -> bool:
        """Whether a ready working candidate waits: the decision it would get is the last the
        call budget pays for (after it, no step and decision would fit), and a step still fits
        before it. Submitted now, the calls after it would go unused; spent on steps first,
        they may add proposals to the one candidate the gate will judge (which goes to the
        gate in the budget's tail, `_affordable`)."""
        left = view.calls_left()
        if left is None:
            return False
        decision, rate = view.decision_calls(), view.calls_per_rollout()
        spare = left - decision
        after = self._batch_within(state, spare - decision, rate)
        return not after and bool(self._batch_within(state, spare, rate))

    def _working(self, view: RunView, state: GradientTextState) -> tuple[Skill, ApplyReport]:
        """The incumbent with every pending proposal applied, in the order they joined, then
        tidied by each proposer (`Proposer.tidy`: what stacked when composed is merged)."""
        working, report = view.incumbent.apply([e for g in state.pending for e in g.edits])
        for proposer in self.proposers:
            working = proposer.tidy(working)
        return working, report

    def _submit_working(
        self, view: RunView, state: GradientTextState, *, kind: str, step: int | None = None
    ) -> None:
        """Send the working candidate to the door (as `step`, default a step of its own). On a
        rejection, each of its proposals goes back on trial (confirmed again on training data
        before it may rejoin a candidate with new company) until the gate has rejected it
        `gate_strikes` times; then it is remembered as rejected. A working candidate the gate
        has already judged is not sent again: its proposals go to the gate one by one."""
        self._fit_path(view, state)
        candidate, report = self._working(view, state)
        if candidate.hash in state.rejected_hashes and len(state.pending) > 1:
            self._submit_each(view, state, kind=kind)
            return
        refused = tuple(o for o in state.step_outcomes if o.status != "applied")
        report = ApplyReport(report.outcomes + refused)
        state.step_outcomes = []
        pending, lrs = list(state.pending), list(state.pending_lrs)
        state.pending, state.pending_lrs = [], []
        memory = view.memory
        if step is None:
            step, memory.step = memory.step, memory.step + 1
        view.emit("compose", step=step, groups=len(pending), candidate_hash=candidate.hash)
        verdict = view.submit(
            candidate, lr=lrs or [self.lr], step=step, epoch=state.epoch, kind=kind, report=report
        )
        sources = list(dict.fromkeys(g.source for g in pending))  # each proposer's counts
        for name in sources:
            stats = memory.proposer_stats.setdefault(name, new_stats())
            stats["submitted"] += 1
            stats["accepted"] += int(verdict.accepted)
        view.emit("candidate_sources", step=step, sources=sources, status=verdict.status)
        if verdict.accepted:  # its proposals are forgotten
            state.steps_since_accept, state.accepted_this_epoch = 0, True
            memory.forget({group_key(g.edits) for g in pending})
            if view.incumbent_is_perfect():
                state.stop_reason = "perfect"  # no candidate can beat it on validation
        else:  # each back on trial until its `gate_strikes`-th, then remembered as rejected
            state.steps_since_accept += 1
            state.rejected_hashes.append(verdict.candidate_hash)
            for group in pending:
                key = group_key(group.edits)
                strikes = state.gate_strikes[key] = state.gate_strikes.get(key, 0) + 1
                if len(pending) == 1 or not self.screen or strikes >= self.gate_strikes:
                    memory.remember(group.edits, verdict.delta, epoch=state.epoch)
                else:
                    state.trials.append(replace(group, screens=0, gated=strikes))
        view.commit(state.to_dict())

    def _fit_path(self, view: RunView, state: GradientTextState) -> None:
        """Proposals that joined in one step were each fitted to that step's room alone; the
        door measures the working candidate whole, so the last-joined proposals go back on
        trial until it fits its path budget (sent over it, the door would refuse it whole)."""
        while len(state.pending) > 1:
            candidate, _ = self._working(view, state)
            budget = view.bound.budget(state.pending_lrs or [self.lr], view.incumbent.token_count)
            if token_distance(view.incumbent.text, candidate.text) <= budget:
                return
            state.trials.append(replace(state.pending.pop(), screens=0))

    def _submit_each(self, view: RunView, state: GradientTextState, *, kind: str) -> None:
        """The working candidate was judged already: send each of its proposals alone (while
        the call budget pays for a decision); the rest go back on trial."""
        pending, lrs = list(state.pending), list(state.pending_lrs)
        state.pending, state.pending_lrs = [], []
        for group in pending:
            if not self.screened.first_look_paid(view):
                state.trials.append(replace(group, screens=0))
                continue
            state.pending, state.pending_lrs = [group], lrs
            self._submit_working(view, state, kind=kind)  # a judged text: the door refuses it
