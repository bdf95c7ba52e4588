"""Quick exploration over the family of worlds: variants of the default beside it, on draws
that are neither the development draw nor a reported fresh one.

    python bench/family_explore.py --draws 101 102 103 --runs 10 --calls 100 200 400 \
        --variants default gate-first-half gate-no-early split-50 --out /tmp/explore.json

For screening ideas before the record (`bench_search_family.py`, dev and fresh draws at 20
seeds, beside gepa and another revision): every non-null member of each draw
(`skillopt_dsl.testing.world_family`, fakes: no model is called), `--runs` seeds, each
variant under `Budget(max_calls=N)` with the family's proposer. Printed per budget: each
variant's mean gain over members, its difference from the first variant, the members it
moves by more than 0.02 either way, and harmful rules kept a run. A variant is compile's
default with one thing changed: the gate (`Gate` settings; the search untouched), the
hand-off's plan, GradientText's settings, or when GradientText hands the run to Bundle
(bench-only subclasses, never the product's); the variants of `family_ablation.ABLATIONS`
run too. Measured in bench/README §9n.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
from collections.abc import Callable, Sequence
from multiprocessing import Pool
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import bench_search_family as family  # noqa: E402
from _common import print_table  # noqa: E402
from family_ablation import ABLATIONS  # noqa: E402
from family_ablation import build as build_ablation  # noqa: E402

Make = Callable[[Any, Sequence[Any], Any], tuple[Any, Any]]
"""(optimizers module, proposers, Gate class) -> (search, gate or None)."""


def _default(opt: Any, proposers: Sequence[Any], gate_cls: Any) -> tuple[Any, Any]:
    return opt.HandOff.with_proposers(proposers), None


def _gate(**settings: Any) -> Make:
    def make(opt: Any, proposers: Sequence[Any], gate_cls: Any) -> tuple[Any, Any]:
        return opt.HandOff.with_proposers(proposers), gate_cls(**settings)

    return make


def _first(**settings: Any) -> Make:
    def make(opt: Any, proposers: Sequence[Any], gate_cls: Any) -> tuple[Any, Any]:
        first = opt.GradientText(proposers=proposers, **settings)
        return opt.HandOff(first=first, then=opt.Bundle(proposers=proposers)), None

    return make


def _plan_plus_one(opt: Any, proposers: Sequence[Any], gate_cls: Any) -> tuple[Any, Any]:
    """The run's significance planned over GradientText's decisions and one more (Bundle's)."""

    class PlanOneMore(opt.HandOff):  # type: ignore[name-defined,misc]
        def planned_decisions(self, n_train: int, **kwargs: Any) -> int | None:
            planned = super().planned_decisions(n_train, **kwargs)
            return None if planned is None else planned + 1

    return PlanOneMore.with_proposers(proposers), None


def _split(share: float) -> Make:
    """GradientText hands the run to Bundle once `share` of the call budget is spent with its
    working candidate empty (as well as where its probe finds nothing)."""

    def make(opt: Any, proposers: Sequence[Any], gate_cls: Any) -> tuple[Any, Any]:
        class SplitAt(opt.GradientText):  # type: ignore[name-defined,misc]
            def _hands_off(self, view: Any, state: Any) -> bool:
                if super()._hands_off(view, state):
                    return True
                left = view.calls_left()
                if left is None:
                    return False
                spent = view.usage().calls
                return spent >= share * (spent + left) and not state.pending

        first = SplitAt(proposers=proposers)
        return opt.HandOff(first=first, then=opt.Bundle(proposers=proposers)), None

    return make


def _after_accept(probe: bool) -> Make:
    """GradientText hands the run to Bundle also after an acceptance, once its working
    candidate is empty and nothing is on trial (`probe`: only after a step on the new
    incumbent confirmed nothing)."""

    def make(opt: Any, proposers: Sequence[Any], gate_cls: Any) -> tuple[Any, Any]:
        class AfterAccept(opt.GradientText):  # type: ignore[name-defined,misc]
            def _hands_off(self, view: Any, state: Any) -> bool:
                if super()._hands_off(view, state):
                    return True
                after = self.hand_off_after
                if after is None or view.version == 1 or state.pending or state.trials:
                    return False
                return not probe or state.steps_since_accept >= after

        first = AfterAccept(proposers=proposers)
        return opt.HandOff(first=first, then=opt.Bundle(proposers=proposers)), None

    return make


def _back_on_plateau(opt: Any, proposers: Sequence[Any], gate_cls: Any) -> tuple[Any, Any]:
    """Where Bundle stops because its proposers were asked nothing new (`plateau`) with calls
    left, GradientText resumes for the rest of the run (its own requests differ)."""
    from dataclasses import replace

    class BackOnPlateau(opt.HandOff):  # type: ignore[name-defined,misc]
        def optimize(self, view: Any) -> Any:
            stop = super().optimize(view)
            reason = getattr(stop, "reason", stop)
            if reason != "plateau" or view.version != 1:
                return stop
            return replace(self.first, hand_off_after=None).optimize(view.within("first"))

    return BackOnPlateau.with_proposers(proposers), None


def _tail_first_member(opt: Any, proposers: Sequence[Any], gate_cls: Any) -> tuple[Any, Any]:
    """A bundle collecting in the budget's tail goes to the gate with its first member (the
    calls it would spend collecting more shorten the prefix its decision can look at)."""

    class TailFirst(opt.Bundle):  # type: ignore[name-defined,misc]
        _due = False

        def _step(self, view: Any, state: Any, pool: Any, open_: Any) -> None:
            super()._step(view, state, pool, open_)
            self._due = bool(state.tail and state.members)

        def _affords_step(self, view: Any, *, first_look: bool) -> bool:
            if self._due:
                self._due = False
                return False
            return super()._affords_step(view, first_look=first_look)

    first = opt.GradientText(proposers=proposers)
    return opt.HandOff(first=first, then=TailFirst(proposers=proposers)), None


def _back_at_tail(opt: Any, proposers: Sequence[Any], gate_cls: Any) -> tuple[Any, Any]:
    """Where Bundle, its bundle empty, can no longer pay for a step and a whole decision (it
    would collect in the budget's tail for a decision cut to a first look), GradientText
    resumes the run instead (its decisions judge one large effect)."""
    from dataclasses import replace

    class TailBack(opt.Bundle):  # type: ignore[name-defined,misc]
        def _affords_step(self, view: Any, *, first_look: bool) -> bool:
            affords = super()._affords_step(view, first_look=first_look)
            if not affords and not first_look and not self._holding:
                raise _TailReached
            return affords

        def _collect(self, view: Any, state: Any) -> Any:
            self._holding = bool(state.members)
            try:
                return super()._collect(view, state)
            except _TailReached:
                return "tail"

        def _step(self, view: Any, state: Any, pool: Any, open_: Any) -> None:
            super()._step(view, state, pool, open_)
            self._holding = bool(state.members)

    class BackAtTail(opt.HandOff):  # type: ignore[name-defined,misc]
        def optimize(self, view: Any) -> Any:
            stop = super().optimize(view)
            if getattr(stop, "reason", stop) != "tail":
                return stop
            return replace(self.first, hand_off_after=None).optimize(view.within("first"))

    first = opt.GradientText(proposers=proposers)
    return BackAtTail(first=first, then=TailBack(proposers=proposers)), None


def _submit_waiting(best_only: bool) -> Make:
    """Where Bundle's collecting ends with its bundle empty and survivors waiting (struck by
    the empty bundle's audit, waiting for a member to be audited again within the bundle),
    the waiting survivors go to the gate as the bundle (`best_only`: the one with the most
    lasting fixes per repeated break)."""

    def make(opt: Any, proposers: Sequence[Any], gate_cls: Any) -> tuple[Any, Any]:
        from skillopt_dsl.optimizers.bundle_state import BundleMember

        class SubmitWaiting(opt.Bundle):  # type: ignore[name-defined,misc]
            def _collect(self, view: Any, state: Any) -> Any:
                reason = super()._collect(view, state)
                if state.members or not state.waiting:
                    return reason
                waiting = list(state.waiting)
                if best_only:
                    waiting = [max(waiting, key=lambda w: len(w.fixes) / (1 + len(w.breaks)))]
                state.members = [BundleMember(w.edits, w.fixes) for w in waiting]
                state.waiting = []
                return reason

        first = opt.GradientText(proposers=proposers)
        return opt.HandOff(first=first, then=SubmitWaiting(proposers=proposers)), None

    return make


def _hand_off_also(
    when: Callable[[Any, Any], bool], *, drop: bool, bundle_decisions: int | None = 6
) -> Make:
    """GradientText's probe also hands the run to Bundle where `when(view, state)` holds,
    nothing is accepted and the calls left pay for a whole decision (`drop`: the proposals on
    trial and the working candidate are dropped at the hand-off; kept, the working candidate
    goes to the gate as GradientText stops); `bundle_decisions`: HandOff's (§9t)."""

    def make(opt: Any, proposers: Sequence[Any], gate_cls: Any) -> tuple[Any, Any]:
        class AlsoHandsOff(opt.GradientText):  # type: ignore[name-defined,misc]
            def _hands_off(self, view: Any, state: Any) -> bool:
                if super()._hands_off(view, state):
                    return True
                after = self.hand_off_after
                if after is None or view.memory.step < after or view.version != 1:
                    return False
                left = view.calls_left()
                if not when(view, state) or (
                    left is not None and left < view.decision_calls(first_look=False)
                ):
                    return False
                if drop:
                    state.trials.clear()
                    state.pending.clear()
                return True

        first, then = AlsoHandsOff(proposers=proposers), opt.Bundle(proposers=proposers)
        return opt.HandOff(first=first, then=then, bundle_decisions=bundle_decisions), None

    return make


def _below_certifiable(view: Any, state: Any) -> bool:
    """What is joined or on trial sums to less training gain (each proposal's net over the
    examples it was scored on) than the gate certifies about half the time
    (`RunView.certifiable_gain`): GradientText's decision would not pass, and Bundle sums more
    fixes first."""
    needed = view.certifiable_gain()
    gain = sum(p.net / max(p.scored, 1) for p in [*state.pending, *state.trials])
    return needed is not None and gain < needed


def _small_validation(size: int) -> Callable[[Any, Any], bool]:
    """Diagnostic, not a rule: the validation set holds fewer than `size` examples (where
    it is small, GradientText's decisions split a significance one bundle spends whole)."""
    return lambda view, state: view.validation_size < size


def _many_decisions(count: int) -> Callable[[Any, Any], bool]:
    """The calls left pay for at least `count` whole gate decisions (a budget large beside the
    validation set: GradientText would split the significance over many decisions, Bundle
    spends it on one bundle at a time)."""

    def when(view: Any, state: Any) -> bool:
        left = view.calls_left()
        return left is not None and left >= count * view.decision_calls(first_look=False)

    return when


def _bundle_decisions(count: int | None) -> Make:
    """Compile's default with another `HandOff.bundle_decisions` (6 by default; None: off,
    the default before bench/README §9t)."""

    def make(opt: Any, proposers: Sequence[Any], gate_cls: Any) -> tuple[Any, Any]:
        first, then = opt.GradientText(proposers=proposers), opt.Bundle(proposers=proposers)
        return opt.HandOff(first=first, then=then, bundle_decisions=count), None

    return make


def _start_many_decisions(count: int) -> Make:
    """HandOff gives the whole run to Bundle at its start where the call budget pays for at
    least `count` whole gate decisions (no probe step), and probes as before §9t elsewhere."""

    def make(opt: Any, proposers: Sequence[Any], gate_cls: Any) -> tuple[Any, Any]:
        from skillopt_dsl.driver.state_parts import PHASE

        class BundleWhenMany(opt.HandOff):  # type: ignore[name-defined,misc]
            def optimize(self, view: Any) -> Any:
                left = view.calls_left()
                fresh = view.optimizer_state.get(PHASE) is None and view.memory.step == 0
                many = left is not None and left >= count * view.decision_calls()
                if fresh and many:
                    self._hand_off(view)
                return super().optimize(view)

        first, then = opt.GradientText(proposers=proposers), opt.Bundle(proposers=proposers)
        return BundleWhenMany(first=first, then=then, bundle_decisions=None), None

    return make


def _many_decisions_unless_joined(count: int) -> Make:
    """The default's hand-off where the calls left pay for `count` decisions (bench/README
    §9t), except where a proposal joined GradientText's working candidate (a clear fix, the
    evidence of an effect a mini-batch confirms): there GradientText keeps the run; proposals
    on trial are dropped at the hand-off."""
    many = _many_decisions(count)
    return _hand_off_also(
        lambda view, state: not state.pending and many(view, state),
        drop=True,
        bundle_decisions=None,
    )


def _trials_hand_off_needs(count: int) -> Make:
    """The probe also hands off a run whose working candidate is empty, with proposals only on
    trial (no clear fix joined: the evidence of small effects), where the calls left pay for
    `count` whole decisions (Bundle's one and the collecting before it); the trials are
    dropped at the hand-off."""
    return _hand_off_also(
        lambda view, state: not state.pending and _many_decisions(count)(view, state), drop=True
    )


def _probe_steps(steps: int) -> Make:
    """The hand-off's probe after `steps` quiet steps (`HandOff.probe_steps`; one by default)."""

    def make(opt: Any, proposers: Sequence[Any], gate_cls: Any) -> tuple[Any, Any]:
        return opt.HandOff.with_proposers(proposers, probe_steps=steps), None

    return make


def _quiet_hand_off_needs(count: int) -> Make:
    """The probe hands a quiet run to Bundle only where the calls left pay for `count` whole
    decisions (one since §9r): a small budget stays with GradientText."""

    def make(opt: Any, proposers: Sequence[Any], gate_cls: Any) -> tuple[Any, Any]:
        class NeedsMore(opt.GradientText):  # type: ignore[name-defined,misc]
            def _hands_off(self, view: Any, state: Any) -> bool:
                left = view.calls_left()
                if left is not None and left < count * view.decision_calls(first_look=False):
                    return False
                return bool(super()._hands_off(view, state))

        first, then = NeedsMore(proposers=proposers), opt.Bundle(proposers=proposers)
        return opt.HandOff(first=first, then=then), None

    return make


def _rejected(view: Any, state: Any) -> bool:
    """GradientText had a decision rejected: the gate's own verdict that what it composed
    was not enough."""
    return bool(state.rejected_hashes)


def _after_rejection(opt: Any, proposers: Sequence[Any], gate_cls: Any) -> tuple[Any, Any]:
    """After a rejected bundle Bundle collects a new one while the run's calls and
    significance allow (its members told to the proposers, not blocked), instead of ending
    the run."""

    class AgainAfterRejection(opt.Bundle):  # type: ignore[name-defined,misc]
        def _submit(self, view: Any, state: Any) -> bool:
            super()._submit(view, state)
            return True  # accepted or not, the loop collects again

    first = opt.GradientText(proposers=proposers)
    return opt.HandOff(first=first, then=AgainAfterRejection(proposers=proposers)), None


class _TailReached(Exception):
    """Bundle's bench-only signal: an empty bundle reached the budget's tail."""


def _min_audit(size: int) -> Make:
    """Bundle collects a survivor only where its audit scores at least `size` examples, when
    the pool holds that many the incumbent gets right: an audit the calls cut shorter (one or
    two examples in the budget's tail) leaves the survivor uncollected, as an audit the calls
    pay nothing for does (proposed again, it is tried again)."""

    def make(opt: Any, proposers: Sequence[Any], gate_cls: Any) -> tuple[Any, Any]:
        class MinAudit(opt.Bundle):  # type: ignore[name-defined,misc]
            def _audit(self, view: Any, state: Any, fitted: Any, pool: Any) -> Any:
                scored = self._scored(view, state, pool)
                short = self.audit_size - sum(r.score >= 1.0 for _, r in scored)
                if short > 0 and self._score_more(view, state, pool, short):
                    scored = self._scored(view, state, pool)
                right = sum(r.score >= 1.0 for _, r in scored)
                left, reserve = view.calls_left(), self._reserve(view, first_look=state.tail)
                paid = (
                    right
                    if left is None
                    else int((left - reserve) / (3 * view.calls_per_rollout()))
                )
                if right >= size and min(paid, self.audit_size) < size:
                    return None
                return super()._audit(view, state, fitted, pool)

        first = opt.GradientText(proposers=proposers)
        return opt.HandOff(first=first, then=MinAudit(proposers=proposers)), None

    return make


def _audit_weighs_fixes(min_fixes: int | None) -> Make:
    """Bundle's audit weighs a survivor's repeated breaks against its lasting fixes: a
    survivor whose breaks repeated is still collected where its fixes outweigh them. With
    `min_fixes` None, where the net it shows is positive: its share of the step's failures
    fixed, times the pool's share of failures, above its share of audited right answers that
    broke, times the pool's share right. With a count, where it kept at least `min_fixes`
    fixes and only one break repeated (one repeated break forgiven for two fixes that
    persisted under changed texts)."""

    def make(opt: Any, proposers: Sequence[Any], gate_cls: Any) -> tuple[Any, Any]:
        from skillopt_dsl.optimizers.bundle import Audit

        class WeighsFixes(opt.Bundle):  # type: ignore[name-defined,misc]
            def _lasting_fixes(
                self, view: Any, state: Any, fitted: Any, batch: Any, rollouts: Any
            ) -> Any:
                kept = super()._lasting_fixes(view, state, fitted, batch, rollouts)
                self._seen = (len(kept), max(len(batch), 1))
                return kept

            def _audit(self, view: Any, state: Any, fitted: Any, pool: Any) -> Any:
                audit = super()._audit(view, state, fitted, pool)
                if audit is None or not audit.repeated:
                    return audit
                fixes, batch = self._seen
                if min_fixes is not None:
                    forgiven = fixes >= min_fixes and len(audit.repeated) == 1
                else:
                    scored = self._scored(view, state, pool)
                    wrong = sum(r.score < 1.0 for _, r in scored) / max(len(scored), 1)
                    broke = len(audit.repeated) / max(audit.scored, 1)
                    forgiven = wrong * fixes / batch > (1 - wrong) * broke
                return Audit([], audit.scored) if forgiven else audit

        first = opt.GradientText(proposers=proposers)
        return opt.HandOff(first=first, then=WeighsFixes(proposers=proposers)), None

    return make


def _bundle_no_futility(opt: Any, proposers: Sequence[Any], gate_cls: Any) -> tuple[Any, Any]:
    """Bundle's decisions are not stopped for futility (they go on to the whole set, or the
    prefix the calls pay for): a rejected bundle ends the run, so the calls a futility stop
    saves go unused, and a bundle tied at a first look of ten examples loses the run's whole
    significance there (fresh 2134201965 m07, bench/README §9y). The default's behaviour under
    a call budget since 48f2938: run at 3681798 to reproduce the screen."""
    judging = {"bundle": False}

    class Judged(gate_cls):  # type: ignore[misc,valid-type]
        def is_futile(self, candidate: Any, incumbent: Any) -> bool:
            return False if judging["bundle"] else bool(super().is_futile(candidate, incumbent))

    class Flagged(opt.Bundle):  # type: ignore[name-defined,misc]
        def _submit(self, view: Any, state: Any) -> bool:
            judging["bundle"] = True
            try:
                return bool(super()._submit(view, state))
            finally:
                judging["bundle"] = False

    first = opt.GradientText(proposers=proposers)
    return opt.HandOff(first=first, then=Flagged(proposers=proposers)), Judged()


def _final_no_futility(opt: Any, proposers: Sequence[Any], gate_cls: Any) -> tuple[Any, Any]:
    """GradientText's `final` decision (the run's end, whatever the verdict) is not stopped for
    futility under a call budget either, as Bundle's is since 2026-12-07 (bench/README §9y)."""
    judging = {"final": False}

    class Judged(gate_cls):  # type: ignore[misc,valid-type]
        def is_futile(self, candidate: Any, incumbent: Any) -> bool:
            return False if judging["final"] else bool(super().is_futile(candidate, incumbent))

    class Final(opt.GradientText):  # type: ignore[name-defined,misc]
        def _submit_working(self, view: Any, state: Any, *, kind: str, step: Any = None) -> None:
            judging["final"] = kind == "final" and view.calls_left() is not None
            try:
                super()._submit_working(view, state, kind=kind, step=step)
            finally:
                judging["final"] = False

    return opt.HandOff(
        first=Final(proposers=proposers), then=opt.Bundle(proposers=proposers)
    ), Judged()


def _tail_waits(opt: Any, proposers: Sequence[Any], gate_cls: Any) -> tuple[Any, Any]:
    """Where a whole decision no longer fits after a step, GradientText does not send its
    working candidate to the gate at once: it searches on, keeping a first look's calls, and
    the candidate goes to the gate at the run's end (its `final` decision), tested on the
    prefix the calls left pay for."""

    class TailWaits(opt.GradientText):  # type: ignore[name-defined,misc]
        def _affordable(self, view: Any, state: Any) -> int:
            left = view.calls_left()
            if left is None:
                return int(self.batch_size)
            state.reserve = view.decision_calls()
            rate = view.calls_per_rollout()
            if not state.batch_cap:
                state.batch_cap = self._planned_batch(left - state.reserve, rate)
            size = self._batch_within(state, left - state.reserve, rate)
            if size:
                return int(size)
            state.reserve = view.decision_calls(first_look=True)
            return int(self._batch_within(state, left - state.reserve, rate))

    return opt.HandOff(
        first=TailWaits(proposers=proposers), then=opt.Bundle(proposers=proposers)
    ), None


def _plan_at_least(count: int) -> Make:
    """Under a call budget the run's significance is planned over at least `count` decisions
    (GradientText plans the whole decisions the budget pays for: one at 100 calls on 75
    validation examples, so a first decision stopped for futility at its first look, on a
    candidate no better than the seed, spends the whole run's significance)."""

    def make(opt: Any, proposers: Sequence[Any], gate_cls: Any) -> tuple[Any, Any]:
        class PlanAtLeast(opt.HandOff):  # type: ignore[name-defined,misc]
            def planned_decisions(self, n_train: int, **kwargs: Any) -> int | None:
                planned = super().planned_decisions(n_train, **kwargs)
                if kwargs.get("max_calls") is None or planned is None:
                    return planned
                return max(count, int(planned))

        return PlanAtLeast.with_proposers(proposers), None

    return make


VARIANTS: dict[str, Make] = {
    "plan-at-least-2": _plan_at_least(2),
    "plan-at-least-3": _plan_at_least(3),
    "tail-waits": _tail_waits,
    "hand-off-after-rejection": _hand_off_also(_rejected, drop=True),
    "bundle-after-rejection": _after_rejection,
    "small-validation-40": _hand_off_also(_small_validation(40), drop=True),
    "probe-certifiable": _hand_off_also(_below_certifiable, drop=False),
    "bundle-decisions-3": _bundle_decisions(3),
    "bundle-decisions-4": _bundle_decisions(4),
    "bundle-decisions-10": _bundle_decisions(10),
    "bundle-decisions-off": _bundle_decisions(None),
    "many-decisions-6-unless-joined": _many_decisions_unless_joined(6),
    "quiet-needs-2": _quiet_hand_off_needs(2),
    "probe-2": _probe_steps(2),
    "min-audit-4": _min_audit(4),
    "min-audit-8": _min_audit(8),
    "audit-net": _audit_weighs_fixes(None),
    "audit-forgive-2-fixes": _audit_weighs_fixes(2),
    "bundle-no-futility": _bundle_no_futility,
    "final-no-futility": _final_no_futility,
    "probe-3": _probe_steps(3),
    "trials-needs-2": _trials_hand_off_needs(2),
    "trials-needs-3": _trials_hand_off_needs(3),
    "quiet-needs-3": _quiet_hand_off_needs(3),
    "start-many-decisions-4": _start_many_decisions(4),
    "start-many-decisions-6": _start_many_decisions(6),
    "submit-waiting": _submit_waiting(False),
    "submit-waiting-best": _submit_waiting(True),
    "back-at-tail": _back_at_tail,
    "tail-first-member": _tail_first_member,
    "back-on-plateau": _back_on_plateau,
    "after-accept": _after_accept(False),
    "after-accept-probe": _after_accept(True),
    "default": _default,
    "gate-first-half": _gate(first_share=0.5),
    "gate-no-early": _gate(early_share=0.0),
    "gate-min-look-20": _gate(min_look=20),
    "gate-looks-half": _gate(looks=(0.5, 0.75)),
    "plan-plus-one": _plan_plus_one,
    "batch-4": _first(batch_size=4),
    "batch-6": _first(batch_size=6),
    "batch-12": _first(batch_size=12),
    "compose-2": _first(compose=2),
    "split-30": _split(0.3),
    "split-50": _split(0.5),
    "split-70": _split(0.7),
}


def _search(name: str, proposers: Sequence[Any]) -> tuple[Any, Any]:
    from skillopt_dsl import optimizers as opt
    from skillopt_dsl.gate import Gate

    if name in VARIANTS:
        return VARIANTS[name](opt, proposers, Gate)
    if name == "bundle":
        return opt.Bundle(proposers=proposers), None
    if name == "gradient-text":
        return opt.GradientText(proposers=proposers), None
    return build_ablation(name, opt, proposers), None


def run_cell(cell: tuple[str, int, str, int, int]) -> tuple[tuple[Any, ...], list[float]]:
    """One variant on one member at one budget over `runs` seeds: (gain, harmful kept) pairs."""
    import skillopt_dsl as sd
    from skillopt_dsl.lm import LM

    logging.disable(logging.WARNING)
    name, draw_seed, member_name, calls, runs = cell
    rw, wf = family.world_modules()
    member = next(m for m in wf.WorldFamily().draw(draw_seed, 24) if m.name == member_name)
    outcomes = []
    for seed in range(runs):
        world = member.seeded(seed)
        sizes = (member.train, member.val, member.test)
        train, val, test = (
            world.items(s, n) for s, n in zip(("train", "val", "test"), sizes, strict=True)
        )
        search, gate = _search(name, [rw.RuleWorldProposer(reads=family.PROPOSER_READS)])
        result = sd.compile(world.task(), train, val, optimizer=search, gate=gate,
                            lm=LM(world.target()), optimizer_lm=LM(world.reflector()),
                            budget=sd.Budget(max_calls=calls), seed=seed, threads=1)  # fmt: skip
        text = result.best_skill.text
        gain = world.accuracy(text, test) - world.accuracy(world.seed_skill, test)
        outcomes.append([gain, float(len(rw.rules_in(text)[1]))])
    return cell[:4], [x for pair in outcomes for x in pair]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, nargs="+", default=[101, 102, 103])
    parser.add_argument("--variants", nargs="+", default=["default", *VARIANTS])
    parser.add_argument("--calls", type=int, nargs="+", default=[100, 200, 400])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", type=Path, default=None, help="write every run's figures here")
    args = parser.parse_args()
    known = {*VARIANTS, *ABLATIONS, "bundle", "gradient-text"}
    unknown = [v for v in args.variants if v not in known]
    if unknown:
        parser.error(f"unknown variants {unknown}; known: {sorted(known)}")
    family_module = family.world_modules()[1]
    members = [(d, m.name) for d in args.draws
               for m in family_module.WorldFamily().draw(d, 24) if not m.null]  # fmt: skip
    cells = [(v, d, n, c, args.runs) for v in args.variants for d, n in members for c in args.calls]
    with Pool(args.workers) as pool:
        found = dict(pool.imap_unordered(run_cell, cells))
    for calls in args.calls:
        rows, base = [], None
        for variant in args.variants:
            per_member = [found[(variant, d, n, calls)] for d, n in members]
            gains = [statistics.mean(f[0::2]) for f in per_member]
            harm = statistics.mean(x for f in per_member for x in f[1::2])
            base = base or gains
            pairs = list(zip(gains, base, strict=True))
            rows.append([variant, f"{statistics.mean(gains):+.4f}",
                         f"{statistics.mean(g - b for g, b in pairs):+.4f}",
                         f"{sum(g > b + 0.02 for g, b in pairs)}/{sum(g < b - 0.02 for g, b in pairs)}",
                         f"{harm:.3f}"])  # fmt: skip
        print_table(
            f"{calls} calls: draws {args.draws}, {len(members)} non-null members, {args.runs} seeds",
            ["variant", "mean gain", f"vs {args.variants[0]}", "members +/-", "harmful kept"],
            rows,
        )
    if args.out:
        args.out.write_text(json.dumps({"|".join(map(str, k)): v for k, v in found.items()}))


if __name__ == "__main__":
    main()
