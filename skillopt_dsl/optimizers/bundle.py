"""Bundle: many small fixes, each screened and audited alone, judged together by one decision.

Where each useful edit is small (a rule for one rare kind of input, worth a few points), no
edit alone can be certified on a validation set of a few dozen examples, and confirming one on
a fresh mini-batch shows nothing: the batch rarely holds its kind of input. What each edit
can show is narrow: it fixes the failures it was written for, and it breaks nothing else.
Bundle asks exactly that of each proposal, and lets the gate judge their sum once:

1. Its training pool (`pool_size` examples, drawn with the run's seed) is scored under
   the incumbent as the search needs it (an agent's episodes are costly); the pool's failures
   no collected edit has fixed are *open*. A step that collects nothing widens the pool
   scored; a pool wholly scored with no open failure left grows by `pool_size` more
   training examples (`_grow_pool`): a solved pool is not a solved training set, and only
   the latter stops the run `train_solved`.
2. Each step shows the proposers `failures_per_step` open failures (`search.proposal_request`,
   `ProposerRuns`), and the search step it holds (`search.SearchStep`) fits each proposal to the
   learning rate's room (`fit`) and tries it alone on those failures (`try_alone`: the failures it names
   first, then the others; it must fix more than it breaks; its evidence is summed across
   re-proposals and it is struck at `screen_strikes`).
3. Any change of the skill moves a few answers at random, so a useless or harmful edit now
   and then fixes its failure by that noise alone. A survivor's fixes are scored again under
   its changed texts (`_changed`: reworded, one more trailing newline; and, where the bundle
   holds members, the bundle so far with the survivor, a change of what the skill says): a fix
   the edit makes persists, and the survivor is struck when none does. A fix of an example
   the edit quotes verbatim (`quotes`: a worked example of that very input) does not count.
4. It is then audited for harm on up to `audit_size` pool examples the incumbent gets right.
   A break the edit causes persists when the skill around it changes, one the change causes
   does not: each break is scored again under both changed texts, and the edit is struck when
   `audit_strikes` breaks repeat (one more where `FIXES_OUTWEIGH_A_BREAK` of its fixes
   persisted: a right rule may break one hard answer, a harmful one breaks many); it joins the
   bundle otherwise. On a model whose answers a
   rewording does not move (Qwen2.5-0.5B, bench/README §14) only the change of content can
   tell them apart, so a survivor struck while the bundle is empty waits (`MAX_WAITING`) and
   is audited again within the bundle when a member joins (`_readmit`). Where the collecting
   ends with the bundle still empty, the waiting survivors become the bundle
   (`_admit_waiting`): no member came to tell their breaks from a change's, and the gate
   judges them on validation.
5. The bundle (the incumbent with every collected edit) goes to the gate once: when the call
   budget pays for no further step beside a whole gate decision (or, for a first bundle begun
   past that point, beside the decision's first look), when no open failure is left in the
   whole training set (the pool grown to all of it), after
   `STALE_STEPS_PER_PATIENCE * patience` steps in a row that asked the proposers nothing new
   (no model call: every answer came from the response cache, every proposal was tried), or,
   without a call budget, after `patience` steps that collect nothing or `max_steps` steps.
   Under a budget a step that collects nothing does not end the collecting while it asked
   something new: where each fix is rare, most steps collect nothing, and a bundle sent to
   the gate early holds too few fixes to pass it (bench/README.md §9k).
   The run plans that one decision, so it is tested at the run's whole significance, and under
   a call budget it is not stopped for futility at an interim look (`ends_on_rejection`: a
   rejected bundle ends the run, so the calls a stop saves would go unused). After an
   accepted bundle the search goes on from the new incumbent while the budget pays; a rejected
   bundle's edits are told to the proposers (not blocked: each may join a later bundle), and
   the run ends (`_after_rejection`: never `train_solved`, since the skill kept still fails
   what the rejected members fixed).

Use it where failures fall into many small kinds and the budget is 200 calls or more
(docs/concepts.md, "Small effects"; bench figures in bench/README.md); at 100 calls, or where
single edits are large and few, GradientText (the default) certifies its first edit sooner.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import TypeAlias

from skillopt_dsl.driver import RunView
from skillopt_dsl.errors import UserInputError
from skillopt_dsl.evaluate import Rollout
from skillopt_dsl.json_types import JSONObject
from skillopt_dsl.optimizers.base import Optimizer, StopReason, check_step_settings
from skillopt_dsl.optimizers.bundle_state import BundleMember, BundleState
from skillopt_dsl.optimizers.proposers import Proposer, default_proposers
from skillopt_dsl.optimizers.search import (
    Fitted,
    ProposerRuns,
    SearchStep,
    draw_examples,
    keeps_reserve,
    proposal_request,
)
from skillopt_dsl.search_memory import group_key
from skillopt_dsl.skill import Edit, Skill
from skillopt_dsl.types import Example

__all__ = [
    "AUDIT_STRIKES",
    "FIXES_OUTWEIGH_A_BREAK",
    "STALE_STEPS_PER_PATIENCE",
    "Bundle",
    "BundleMember",
    "BundleState",
    "quotes",
]

AUDIT_STRIKES = 1
"""The breaks that repeat under changed texts at which the audit strikes a survivor: one.
Forgiving one (2) was measured (bench/README §9m): +0.000 to +0.007 over the family of rule
worlds, but more harmful rules kept, and where the audit scores few answers (10 in the rare
world) a harmful edit often breaks only one of them; joined to a bundle, it sinks the bundle's
one decision (`tests/test_hand_off.py::test_a_run_whose_screens_confirm_nothing_is_handed_to_bundle`
fails with 2)."""

STALE_STEPS_PER_PATIENCE = 4
"""Steps in a row that ask nothing new, per step of `patience`, after which a bundle stops
collecting. They cost no call (a step's draw of failures repeated an earlier one, so every
answer is a cached one), so they are allowed more than steps that ask and collect nothing: the
next draw may still show the proposers failures they have not read together."""

_PERTURBATIONS = 2
"""Changed texts (`Bundle._changed`) under which an audit's break must repeat, and a fix
persist, to count as the edit's: a break or fix by chance survives one with the noise's odds
(a tenth or so), two with its square. An empty bundle's fix check uses only the first."""

FIXES_OUTWEIGH_A_BREAK = 2
"""Lasting fixes at which a survivor's audit forgives one repeated break more than
`audit_strikes`: two of its step's failures fixed, each fix persisting under the changed texts,
outweigh one break that persisted. A harmful rule breaks many answers; a right rule may break
one hard answer that any change of the skill moves (measured over the family of rule worlds in
bench/README §9za)."""

MAX_WAITING = 4
"""Survivors struck by an empty bundle's audit that wait for a member to be audited again
within the bundle (`BundleState.waiting`)."""

_PROPOSAL_CALLS = 4
"""Model calls one step's proposers are assumed to spend (as Beam's expansion) when the step
is priced against the gate's reserve."""


_NOT_PLAIN = frozenset({"name", "proposers", "search_step"})
"""Fields `config` writes by name (proposers) or not at all (the optimizer's name is its own
key; the search step it holds is built from the others)."""

_Scored: TypeAlias = tuple[Example, Rollout]  # a pool example and its incumbent's rollout

QUOTE_MIN_CHARS = 8
"""The shortest input value that counts as quoted when an edit's text contains it."""


def quotes(incumbent: Skill, candidate: Skill, example: Example) -> bool:
    """Whether `candidate` quotes one of the example's input values (of `QUOTE_MIN_CHARS` or
    more) that `incumbent` does not: an edit that adds a worked example of this very input
    fixes it by memory, which says nothing about the failures it does not quote."""
    values = (v for v in example.inputs.values() if isinstance(v, str))
    quoted = (v for v in values if len(v) >= QUOTE_MIN_CHARS and v in candidate.text)
    return any(v not in incumbent.text for v in quoted)


@dataclass(frozen=True)
class Audit:
    """A survivor's audit: the breaks that repeated under its changed texts, of `scored`
    pool examples the incumbent gets right."""

    repeated: list[Example]
    scored: int


@dataclass(kw_only=True)
class Bundle(Optimizer):
    """Collect small fixes, each screened on its failures and audited for harm, and let one
    gate decision judge their sum (module docstring).

    Args:
        proposers: where edits come from (default: format rules, worked examples, reflection).
        lr: the share of the incumbent one step may change; the bundle may change the sum of
            its steps' shares (the door checks it).
        lr_floor_tokens: the least a step may change, so short or empty seeds can grow.
        max_edits: cap on edits per proposal (None: only the learning rate limits).
        failures_per_step: open failures the proposers read each step.
        pool_size: training examples drawn into the pool at a time, scored under the
            incumbent as the search needs them (the failures come from them, and the audit's
            examples); once scored with no open failure left, the pool grows by as many more.
        audit_size: pool examples the incumbent gets right on which a survivor is audited.
        audit_strikes: breaks that repeat under a changed text at which a survivor is struck
            (`AUDIT_STRIKES`; one more for a survivor with `FIXES_OUTWEIGH_A_BREAK` lasting
            fixes).
        screen_strikes: screen failures after which a proposal proposed again is no longer
            screened.
        max_steps: steps per bundle without a call budget (with one, the budget ends them).
        patience: without a call budget, steps in a row that collect nothing after which the
            bundle goes to the gate (with one, it collects while the budget pays for a step
            beside its decision); `STALE_STEPS_PER_PATIENCE` times as many steps in a row that
            ask nothing new end its collecting either way.
    """

    proposers: Sequence[Proposer] = field(default_factory=default_proposers)
    lr: float = 0.3
    lr_floor_tokens: int = 128
    max_edits: int | None = None
    failures_per_step: int = 3
    pool_size: int = 48
    audit_size: int = 24
    audit_strikes: int = AUDIT_STRIKES
    screen_strikes: int = 2
    max_steps: int = 16
    patience: int = 12
    name: str = "bundle"
    search_step: SearchStep = field(init=False, repr=False, compare=False)
    """The search step it holds, built from `max_edits` and `screen_strikes`."""

    def __post_init__(self) -> None:
        counts = (
            "failures_per_step", "pool_size", "audit_size", "audit_strikes", "screen_strikes",
            "max_steps", "patience",
        )  # fmt: skip
        check_step_settings(self, lr=self.lr, max_edits=self.max_edits, at_least_one=counts)
        if self.audit_strikes > self.audit_size:
            raise UserInputError(
                f"audit_strikes ({self.audit_strikes}) must not exceed audit_size "
                f"({self.audit_size}): no survivor could ever be struck"
            )
        self.search_step = SearchStep(max_edits=self.max_edits, screen_strikes=self.screen_strikes)

    def planned_decisions(
        self, n_train: int, *, max_calls: int | None = None, validation_size: int | None = None
    ) -> int | None:
        """One decision: the bundle's (later ones, after an accepted bundle, get what the run's
        significance has left)."""
        return 1

    def config(self) -> JSONObject:
        plain = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in _NOT_PLAIN}
        return {"optimizer": self.name, **plain, "proposers": [p.name for p in self.proposers]}

    # -- the loop --------------------------------------------------------------------------
    def optimize(self, view: RunView) -> StopReason:
        state = BundleState.from_dict(view.optimizer_state)  # {} on a fresh run
        if not state.pool:
            state.pool = [e.id for e in draw_examples(view, view.trainset, self.pool_size)]
        while True:
            if view.incumbent_is_perfect():
                return "perfect"
            if not view.can_accept():
                return "significance"
            reason = self._collect(view, state)
            self._admit_waiting(view, state)
            if not state.members:
                return reason
            if not self._submit(view, state):
                return self._after_rejection(view, reason)

    @staticmethod
    def _after_rejection(view: RunView, reason: StopReason) -> StopReason:
        """Why the run ends after a rejected bundle: why its collecting ended, except
        `train_solved`. There no failure was left open because the bundle's members fixed the
        rest, and the incumbent still fails them: the run ends because its decision is spent
        (`significance`), or, where the significance left could still accept, because Bundle
        ends a run at a rejected bundle (`finished`)."""
        if reason != "train_solved":
            return reason
        return "finished" if view.can_accept() else "significance"

    def _collect(self, view: RunView, state: BundleState) -> StopReason:
        """Run steps until the bundle is due; returns why ("budget": the calls left pay for no
        further step beside a decision; "train_solved": no open failure in the whole training
        set; "patience": steps collected nothing; "finished": `max_steps` without a call
        budget)."""
        by_id = {e.id: e for e in view.trainset}
        if state.steps_this_bundle == 0:
            state.tail = not self._affords_step(view, first_look=False)
        while True:
            pool = [by_id[i] for i in state.pool]  # grown when it holds no open failure
            scored = self._scored(view, state, pool)
            fixed = state.fixed()
            open_ = [(e, r) for e, r in scored if r.score < 1.0 and e.id not in fixed]
            # a step that collected nothing widens the failures the next one draws from
            short = len(open_) < self.failures_per_step * (1 + state.idle_steps)
            if short and self._score_more(view, state, pool, self.failures_per_step):
                continue
            if not open_ and state.scored == len(pool) and self._grow_pool(view, state):
                continue
            if not open_:
                return "train_solved" if state.scored == len(pool) else "budget"
            if state.stale_steps >= STALE_STEPS_PER_PATIENCE * self.patience:
                return "plateau"  # the proposers were asked nothing new for many steps
            if view.calls_left() is None and state.idle_steps >= self.patience:
                return "patience"
            if view.calls_left() is None and state.steps_this_bundle >= self.max_steps:
                return "finished"
            if not self._affords_step(view, first_look=state.tail):
                if state.members or state.tail:
                    return "budget"
                state.tail = True  # an empty bundle goes on in the tail: the first look's reserve
                continue
            self._step(view, state, pool, open_)

    def _grow_pool(self, view: RunView, state: BundleState) -> bool:
        """Draw up to `pool_size` more training examples into the pool (with the run's seed)
        once it is wholly scored and holds no open failure; whether any were left to draw. A
        pool solved is not a training set solved: without it a run on 300 examples stopped
        `train_solved` once its first 48 were. Only then: growing it whenever a step found
        too few open failures scored the training set at the cost of the steps (bench/README
        §9x)."""
        drawn = set(state.pool)
        rest = [e for e in view.trainset if e.id not in drawn]
        if not rest:
            return False
        state.pool += [e.id for e in draw_examples(view, rest, self.pool_size)]
        view.emit("pool_grown", step=view.memory.step, pool=len(state.pool))
        return True

    @staticmethod
    def _scored(view: RunView, state: BundleState, pool: Sequence[Example]) -> list[_Scored]:
        """The pool examples scored so far under the incumbent, with their rollouts (cached,
        so asking again is free)."""
        part = list(pool[: state.scored])
        if not part:
            return []
        records = view.evaluate(view.incumbent, part, label="train").records
        return list(zip(part, records, strict=True))

    def _score_more(
        self, view: RunView, state: BundleState, pool: Sequence[Example], count: int
    ) -> bool:
        """Score up to `count` more pool examples under the incumbent (the pool is scored as
        the search needs it, so that an agent's costly episodes are not spent on a whole pool
        at once) when the gate's reserve allows; whether any were."""
        more = min(count, len(pool) - state.scored)
        if more <= 0 or not self._keeps_reserve(view, state, more):
            return False
        state.scored += more
        self._scored(view, state, pool)
        return True

    def _affords_step(self, view: RunView, *, first_look: bool) -> bool:
        """Whether the calls left pay for a step (its proposers, one screen) and still for the
        gate decision after it (`first_look`: its first look only), every rollout at its
        measured cost (an agent episode or a DSPy program makes several calls)."""
        price = _PROPOSAL_CALLS + math.ceil(self.failures_per_step * view.calls_per_rollout())
        return keeps_reserve(view, price, self._reserve(view, first_look=first_look))

    def _keeps_reserve(self, view: RunView, state: BundleState, rollouts: int) -> bool:
        """Whether `rollouts` more rollouts (at their measured cost) still leave the gate's
        reserve (`_reserve`, the first look's in the budget's tail) in the call budget."""
        price = math.ceil(rollouts * view.calls_per_rollout())
        return keeps_reserve(view, price, self._reserve(view, first_look=state.tail))

    @staticmethod
    def _reserve(view: RunView, *, first_look: bool) -> int:
        """The calls kept for the gate: a whole decision, or in the budget's tail its first
        look (the gate accepts at a look the calls pay for, and stops at one they do not)."""
        return 0 if view.calls_left() is None else view.decision_calls(first_look=first_look)

    def _step(
        self, view: RunView, state: BundleState, pool: Sequence[Example], open_: Sequence[_Scored]
    ) -> None:
        """One step: propose from open failures, try each proposal alone on them, audit the
        survivors, collect the clean ones; checkpointed as a step with no candidate."""
        chosen = view.rng.sample(list(open_), min(self.failures_per_step, len(open_)))
        batch, rollouts = [e for e, _ in chosen], [r for _, r in chosen]
        memory, room, incumbent = view.memory, view.step_budget(self.lr), view.incumbent
        step, memory.step = memory.step, memory.step + 1
        state.steps_this_bundle += 1
        request = proposal_request(view, memory, incumbent, batch, rollouts, room, epoch=0)
        calls_before = view.usage().calls
        runs = ProposerRuns(bench_after=None, retry_every=1)
        collected = 0
        for group in self.search_step.propose(view, runs, self.proposers, request):
            fitted, _ = self.search_step.fit(view, incumbent, group, room)
            held = {group_key(m.edits) for m in [*state.members, *state.waiting]}
            if fitted is None or fitted.key in memory.blocked_keys() | held:
                continue
            if not self._keeps_reserve(view, state, len(batch)):
                break
            if self.search_step.try_alone(view, fitted, batch, rollouts, epoch=0).struck:
                continue
            fixes = self._lasting_fixes(view, state, fitted, batch, rollouts)
            audit = self._audit(view, state, fitted, pool) if fixes else None
            if audit is None:
                continue
            if len(audit.repeated) < self._strikes(fixes):
                state.members.append(BundleMember(fitted.kept, fixes))
                collected += 1 + self._readmit(view, state)
            elif not state.members and len(state.waiting) < MAX_WAITING:
                breaks = tuple(e.id for e in audit.repeated)
                state.waiting.append(BundleMember(fitted.kept, fixes, breaks))
            else:
                self._strike_audited(view, fitted.kept, len(audit.repeated), audit.scored)
        state.idle_steps = 0 if collected else state.idle_steps + 1
        asked = view.usage().calls > calls_before
        state.stale_steps = 0 if collected or asked else state.stale_steps + 1
        view.emit("bundle_step", step=step, collected=collected, members=len(state.members))
        note = f"collected {collected}; the bundle holds {len(state.members)}"
        view.record_empty_step(
            step=step, epoch=0, kind="bundle", lr=self.lr, note=note, state=state.to_dict()
        )

    def _lasting_fixes(
        self,
        view: RunView,
        state: BundleState,
        fitted: Fitted,
        batch: Sequence[Example],
        rollouts: Sequence[Rollout],
    ) -> tuple[str, ...]:
        """The failures a survivor fixed whose fix persists under each of its changed texts
        (`_changed`: its wording, then its content where the bundle holds members): a fix
        the edit makes does; one the change made by chance does not. A failure the edit
        quotes (a worked example of that very input, `quotes`) is no evidence and does not
        count. None persisting (a useless or harmful edit lucky on its failures, or one that
        only answers the examples it quotes): the survivor is struck. The screen's own
        rollouts come from the cache (a passing screen scored the whole batch); only the
        fixes are scored again, when the gate's reserve allows."""
        before = {r.example_id: r.score for r in rollouts}
        records = view.evaluate(fitted.candidate, batch, label="screen").records
        fixed = [e for e, r in zip(batch, records, strict=True) if r.score > before[e.id]]
        fixed = [e for e in fixed if not quotes(view.incumbent, fitted.candidate, e)]
        kept = list(fixed)
        changes = _PERTURBATIONS if state.members else 1  # no content to change yet: one
        for change in range(1, changes + 1):
            if not self._keeps_reserve(view, state, len(kept)):
                return ()  # proposed again, it is tried again
            again = view.evaluate(self._changed(view, state, fitted, change), kept, label="audit")
            kept = [e for e, r in zip(kept, again.records, strict=True) if r.score > before[e.id]]
        view.emit("fix_check", step=view.memory.step - 1, fixes=len(fixed), fixes_kept=len(kept))
        if not kept:
            view.memory.count("fix_gone")
            view.memory.strike(fitted.kept, 0.0, epoch=0, limit=self.screen_strikes)
        return tuple(e.id for e in kept)

    def _audit(
        self, view: RunView, state: BundleState, fitted: Fitted, pool: Sequence[Example]
    ) -> Audit | None:
        """A survivor's audit for harm: scored on `audit_size` pool examples the incumbent
        gets right, its breaks that repeat under both of its changed texts (`_repeats`: a
        break the edit causes persists; one the change causes does not); the caller collects
        it when fewer than `audit_strikes` repeat. The audit is cut to the examples the calls
        beside the gate's reserve pay for (each scored at most three times); without any, None:
        the survivor is not collected (proposed again, it is tried again). A pool the
        incumbent gets wholly wrong has nothing to break."""
        scored = self._scored(view, state, pool)
        short = self.audit_size - sum(r.score >= 1.0 for _, r in scored)
        if short > 0 and self._score_more(view, state, pool, short):
            scored = self._scored(view, state, pool)
        right = sorted((e for e, r in scored if r.score >= 1.0), key=lambda e: e.id)
        left, reserve = view.calls_left(), self._reserve(view, first_look=state.tail)
        each = (1 + _PERTURBATIONS) * view.calls_per_rollout()  # scored, its breaks again
        paid = len(right) if left is None else max(0, int((left - reserve) / each))
        if right and paid < 1:
            return None  # no call for an audit: proposed again, it is tried again
        audited = view.rng.sample(right, min(self.audit_size, len(right), paid))
        records = view.evaluate(fitted.candidate, audited, label="audit").records
        broken = [e for e, r in zip(audited, records, strict=True) if r.score < 1.0]
        repeated = self._repeats(view, state, fitted, broken)
        view.memory.count("audited")
        step = view.memory.step - 1
        view.emit(
            "audit", step=step, scored=len(audited), broken=len(broken), repeats=len(repeated)
        )
        return Audit(repeated, len(audited))

    def _strikes(self, fixes: Sequence[str]) -> int:
        """The repeated breaks at which the audit strikes a survivor with these lasting
        `fixes`: `audit_strikes`, one more from `FIXES_OUTWEIGH_A_BREAK` fixes on."""
        return self.audit_strikes + int(len(fixes) >= FIXES_OUTWEIGH_A_BREAK)

    @staticmethod
    def _strike_audited(view: RunView, edits: Sequence[Edit], repeats: int, scored: int) -> None:
        """Strike a survivor whose audit's breaks repeated (`audit_strikes` or more)."""
        view.memory.count("audit_struck")
        view.memory.strike(tuple(edits), -repeats / max(scored, 1), epoch=0, limit=1)

    def _repeats(
        self, view: RunView, state: BundleState, fitted: Fitted, broken: Sequence[Example]
    ) -> list[Example]:
        """Those of `broken` (examples the candidate got wrong and the incumbent right) that
        stay wrong under each of `_PERTURBATIONS` changed texts (`_changed`); none when
        fewer than `audit_strikes` broke at all (nothing to score again)."""
        if len(broken) < self.audit_strikes:
            return []
        repeated = list(broken)
        for change in range(1, _PERTURBATIONS + 1):
            if len(repeated) < self.audit_strikes:
                break
            changed = self._changed(view, state, fitted, change)
            again = view.evaluate(changed, repeated, label="audit").records
            repeated = [e for e, r in zip(repeated, again, strict=True) if r.score < 1.0]
        return repeated

    def _changed(self, view: RunView, state: BundleState, fitted: Fitted, change: int) -> Skill:
        """A survivor's candidate changed, as a break or a fix by chance would not survive:
        the first change rewords it (one more trailing newline), the second changes what it
        says (the bundle so far with the survivor) where the bundle holds members and rewords
        it again (two more newlines) where it does not. On a model whose answers a rewording
        does not move (bench/README §14), only a change of content tells a break or a fix the
        edit makes from one any change would."""
        if change > 1 and state.members:
            return self._in_bundle(view, state, fitted.kept)
        return Skill(fitted.candidate.text + "\n" * change)

    @staticmethod
    def _in_bundle(view: RunView, state: BundleState, edits: Sequence[Edit]) -> Skill:
        """The incumbent with the bundle's members and `edits`."""
        return view.incumbent.apply([*(e for m in state.members for e in m.edits), *edits])[0]

    def _readmit(self, view: RunView, state: BundleState) -> int:
        """Audit the waiting survivors again within the bundle (its members now give a change
        of content): each joins when fewer than `audit_strikes` of its breaks repeat there and
        one of its fixes persists, and is struck otherwise; how many joined. One left waiting
        where the gate's reserve pays for no call."""
        by_id, joined = {e.id: e for e in view.trainset}, 0
        for waiting in list(state.waiting):
            examples = [by_id[i] for i in (*waiting.breaks, *waiting.fixes)]
            if not self._keeps_reserve(view, state, len(examples)):
                break
            state.waiting.remove(waiting)
            changed = self._in_bundle(view, state, waiting.edits)
            now = view.evaluate(changed, examples, label="audit").records
            before = view.evaluate(view.incumbent, examples, label="train").records
            moved = {e.id: r.score - b.score for e, r, b in zip(examples, now, before, strict=True)}
            repeats = sum(moved[i] < 0 for i in waiting.breaks)
            fixes = tuple(i for i in waiting.fixes if moved[i] > 0)
            rejoined = bool(fixes) and repeats < self.audit_strikes
            view.emit("readmit", step=view.memory.step - 1, repeats=repeats, joined=rejoined)
            if rejoined:
                state.members.append(BundleMember(waiting.edits, fixes))
                joined += 1
            else:
                self._strike_audited(view, waiting.edits, repeats, len(waiting.breaks))
        return joined

    @staticmethod
    def _admit_waiting(view: RunView, state: BundleState) -> None:
        """Where the collecting ends with the bundle empty, the survivors still waiting become
        the bundle. Their breaks repeated under rewordings, the only change an empty bundle
        offers, and no member came to tell those from breaks any change of content causes; the
        bundle's one decision is theirs or no one's, and the gate judges them on validation."""
        if state.members or not state.waiting:
            return
        view.emit("admit_waiting", step=view.memory.step - 1, waiting=len(state.waiting))
        state.members = [BundleMember(w.edits, w.fixes) for w in state.waiting]
        state.waiting = []

    def _submit(self, view: RunView, state: BundleState) -> bool:
        """Send the bundle to the door, declaring one step's learning rate per member; returns
        whether it was accepted. A rejected bundle's edits are told to the proposers."""
        members, step = list(state.members), view.memory.step
        candidate, report = view.incumbent.apply([e for m in members for e in m.edits])
        view.memory.step += 1
        state.members, state.waiting, state.steps_this_bundle = [], [], 0
        state.idle_steps = state.stale_steps = 0
        view.emit("compose", step=step, groups=len(members), candidate_hash=candidate.hash)
        verdict = view.submit(
            candidate, lr=[self.lr] * len(members), step=step, epoch=0, kind="bundle", report=report,
            ends_on_rejection=True,  # a rejected bundle ends the run: no futility stop
        )  # fmt: skip
        if verdict.accepted:
            state.scored = 0  # a new incumbent: its pool scores are new
        else:
            for member in members:
                view.memory.remember(member.edits, verdict.delta, epoch=0, block=False)
        view.commit(state.to_dict())
        return verdict.accepted
