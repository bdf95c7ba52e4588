"""GradientText: SkillOpt's reflective loop with a real textual learning rate.

Each step: roll out the incumbent on a training mini-batch, let the proposers read the rollouts
and propose typed edits, aggregate them (merge duplicates, resolve conflicts, failure-driven edits
first, drop edits already rejected), clip them greedily to the step's learning-rate budget, and
hand the one resulting candidate to the door (`RunView.submit`), which measures the change
itself and asks the gate. At the end of each epoch a slow update
proposes a consolidation of the document (also clipped, also gated).

The learning rate: a step may change at most `max(ceil(lr_t * tokens(skill)), lr_floor_tokens)`
tokens of the document (token-level edit distance), where `lr_t` follows the schedule; the floor
lets a short or empty seed grow. `max_edits` optionally caps the number of edits per step. The
optimizer declares `lr_t` to the door, which computes the same budget and refuses a candidate
over it. A duplicate verdict counts as no progress (patience, rejected-edit memory).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from skillopt_dsl.driver import RunView, Verdict
from skillopt_dsl.errors import UserInputError
from skillopt_dsl.optimizers.base import Optimizer, check_step_settings
from skillopt_dsl.optimizers.proposers import (
    ConsolidationProposer,
    EditGroup,
    ProposalRequest,
    Proposer,
    RejectedCandidate,
    ask_for_edits,
    default_proposers,
    edit_key,
)
from skillopt_dsl.optimizers.schedules import SCHEDULES, ScheduleName, lr_at
from skillopt_dsl.optimizers.state import CheckpointedState
from skillopt_dsl.skill import (
    ApplyReport,
    Delete,
    Edit,
    EditOutcome,
    Replace,
    Skill,
    token_distance,
)

__all__ = ["GradientText", "GradientTextState", "clip_to_budget", "rank_edits"]

AGGREGATE_SYSTEM = """You merge proposed edits to a skill document into one coherent, small set.
Reply with JSON only: {"edits": [ ...edits in the same form as given... ]}"""

logger = logging.getLogger(__name__)


@dataclass
class GradientTextState(CheckpointedState):
    """Checkpointed run state of GradientText (JSON-serialisable)."""

    epoch: int = 0
    step: int = 0
    order: list[str] = field(default_factory=list)
    cursor: int = 0
    slow_done: bool = False
    rejected: list[dict[str, Any]] = field(default_factory=list)
    steps_since_accept: int = 0
    epochs_since_accept: int = 0
    accepted_this_epoch: bool = False
    proposer_stats: dict[str, dict[str, int]] = field(default_factory=dict)


@dataclass(frozen=True)
class _Ranked:
    edit: Edit
    failure_driven: bool
    support: int
    order: int


def rank_edits(groups: Sequence[EditGroup], rejected_keys: set[str]) -> list[_Ranked]:
    """Merge duplicate edits, drop rejected ones, resolve conflicts, and rank the rest.

    Rank: failure-driven first, then by how many groups proposed the edit, then proposal order.
    Two edits that rewrite or delete overlapping text conflict; the higher-ranked one wins.
    """
    merged: dict[str, _Ranked] = {}
    for group in groups:
        for edit in group.edits:
            key = edit_key(edit)
            if key in rejected_keys:
                continue
            seen = merged.get(key)
            if seen is None:
                merged[key] = _Ranked(edit, group.failure_driven, 1, len(merged))
            else:
                merged[key] = _Ranked(
                    seen.edit,
                    seen.failure_driven or group.failure_driven,
                    seen.support + 1,
                    seen.order,
                )
    ranked = sorted(merged.values(), key=lambda r: (not r.failure_driven, -r.support, r.order))
    kept: list[_Ranked] = []
    for item in ranked:
        if not any(_conflict(item.edit, other.edit) for other in kept):
            kept.append(item)
    return kept


def _conflict(a: Edit, b: Edit) -> bool:
    targets = [e.old for e in (a, b) if isinstance(e, (Replace, Delete))]
    if len(targets) < 2:
        return False
    x, y = (" ".join(t.split()) for t in targets)
    return x in y or y in x


def clip_to_budget(
    skill: Skill, ranked: Sequence[Edit], budget_tokens: int, max_edits: int | None
) -> tuple[Skill, list[Edit], ApplyReport]:
    """Apply edits greedily, keeping each only if the total change stays within `budget_tokens`.

    Returns the candidate, the edits kept, and a report of every edit (clipped ones are reported
    as refused with the reason "over the learning-rate budget").
    """
    current: Skill = skill
    kept: list[Edit] = []
    outcomes: list[EditOutcome] = []
    for edit in ranked:
        if max_edits is not None and len(kept) >= max_edits:
            outcomes.append(
                EditOutcome(edit, "refused", f"max_edits={max_edits} reached", None, None)
            )
            continue
        trial, report = current.apply([edit])
        outcome = report.outcomes[0]
        if outcome.status != "applied":
            outcomes.append(outcome)
            continue
        change = token_distance(skill.text, trial.text)
        if change > budget_tokens:
            reason = f"over the learning-rate budget ({change} > {budget_tokens} tokens)"
            outcomes.append(EditOutcome(edit, "refused", reason, outcome.match, outcome.similarity))
            continue
        current, kept = trial, [*kept, edit]
        outcomes.append(outcome)
    return current, kept, ApplyReport(tuple(outcomes))


@dataclass(kw_only=True)
class GradientText(Optimizer):
    """Reflective edits under a textual learning rate, gated on validation.

    Args:
        lr: base learning rate — the share of the document one step may change.
        max_edits: cap on edits per step (None: only the learning rate limits).
        schedule: "constant", "linear", "cosine", "warmup-cosine" or "step".
        epochs: passes over the training set.
        batch_size: training examples per step.
        patience: stop after this many epochs without an accepted candidate (None: never).
        patience_steps: stop after this many steps without an accepted candidate (None: never).
        slow_update: run a consolidation step at the end of each epoch.
        lr_floor_tokens: the least a step may change, so short or empty seeds can grow.
        proposers: where edits come from (default: format rules, worked examples, reflection).
        consolidation: the slow update's proposer (default: repeated-paragraph removal plus
            the optimizer model's Replace/Delete edits for concision).
        aggregate_with_model_above: when more edits than this survive deterministic merging,
            the optimizer model picks and merges them (its invalid reply is recorded and the
            deterministic ranking is used); None: always deterministic.
        bench_after: spend the budget on the proposers whose edits pass. A proposer that has
            spent model calls on `bench_after` steps without any of its edits reaching an
            accepted candidate is benched: it runs again only every `retry_every`-th step.
            Proposers that call no model are never benched; None: every proposer runs every
            step. Each step's `proposer` events record what every proposer cost and gave.
        retry_every: how often (in steps) a benched proposer is given another chance.
    """

    lr: float = 0.3
    max_edits: int | None = None
    schedule: ScheduleName = "constant"
    epochs: int = 2
    batch_size: int = 8
    patience: int | None = None
    patience_steps: int | None = None
    slow_update: bool = True
    lr_floor_tokens: int = 128
    proposers: Sequence[Proposer] = field(default_factory=default_proposers)
    consolidation: Proposer = field(default_factory=ConsolidationProposer)
    aggregate_with_model_above: int | None = 8
    bench_after: int | None = 2
    retry_every: int = 4
    name: str = "gradient-text"

    def __post_init__(self) -> None:
        check_step_settings(
            self,
            lr=self.lr,
            max_edits=self.max_edits,
            at_least_one=("epochs", "batch_size", "retry_every"),
        )
        if self.bench_after is not None and self.bench_after < 1:
            raise UserInputError(f"bench_after must be >= 1 or None, got {self.bench_after}")
        if self.schedule not in SCHEDULES:
            raise UserInputError(
                f"unknown schedule {self.schedule!r}; choose one of {', '.join(SCHEDULES)}"
            )

    def planned_decisions(self, n_train: int) -> int | None:
        """One submission per step, plus the slow update of each epoch."""
        steps = math.ceil(n_train / self.batch_size) + (1 if self.slow_update else 0)
        return self.epochs * steps

    def config(self) -> dict[str, Any]:
        return {
            "optimizer": self.name,
            "lr": self.lr,
            "max_edits": self.max_edits,
            "schedule": self.schedule,
            "epochs": self.epochs,
            "batch_size": self.batch_size,
            "patience": self.patience,
            "patience_steps": self.patience_steps,
            "slow_update": self.slow_update,
            "lr_floor_tokens": self.lr_floor_tokens,
            "proposers": [p.name for p in self.proposers],
            "consolidation": self.consolidation.name,
            "aggregate_with_model_above": self.aggregate_with_model_above,
            "bench_after": self.bench_after,
            "retry_every": self.retry_every,
        }

    # -- the loop --------------------------------------------------------------------------
    def optimize(self, view: RunView) -> None:
        saved = view.optimizer_state
        state = GradientTextState.from_dict(saved) if saved else GradientTextState()
        by_id = {e.id: e for e in view.trainset}
        steps_per_epoch = math.ceil(len(by_id) / self.batch_size)
        total = self.epochs * steps_per_epoch
        while state.epoch < self.epochs:
            if not state.order:
                state.order = sorted(by_id)
                view.rng.shuffle(state.order)
                state.cursor, state.slow_done, state.accepted_this_epoch = 0, False, False
            while state.cursor < len(state.order):
                ids = state.order[state.cursor : state.cursor + self.batch_size]
                state.cursor += len(ids)
                self._step(view, state, [by_id[i] for i in ids], total)
                if (
                    self.patience_steps is not None
                    and state.steps_since_accept >= self.patience_steps
                ):
                    view.emit("stop", reason="patience_steps", step=state.step)
                    return
            if self.slow_update and not state.slow_done:
                state.slow_done = True
                self._slow_update(view, state, total)
            state.epochs_since_accept = (
                0 if state.accepted_this_epoch else state.epochs_since_accept + 1
            )
            state.epoch, state.order = state.epoch + 1, []
            if self.patience is not None and state.epochs_since_accept >= self.patience:
                view.emit("stop", reason="patience", epoch=state.epoch)
                return

    def _budget(self, view: RunView, step: int, total: int) -> tuple[float, int]:
        """The step's scheduled learning rate and the tokens the door allows for it."""
        lr_t = lr_at(self.schedule, self.lr, step, total)
        return lr_t, view.step_budget(lr_t)

    def _step(self, view: RunView, state: GradientTextState, batch: list[Any], total: int) -> None:
        skill = view.incumbent
        lr_t, budget = self._budget(view, state.step, total)
        rollouts = view.evaluate(skill, batch, label="train").records
        request = self._request(view, state, skill, batch, rollouts, budget)
        groups: list[EditGroup] = []
        for proposer in self.proposers:
            groups += self._run_proposer(view, state, proposer, request)
        self._emit_notes(view, request, state.step)
        self._submit(view, state, skill, groups, kind="step", lr_t=lr_t, budget=budget)

    def _run_proposer(
        self, view: RunView, state: GradientTextState, proposer: Proposer, request: ProposalRequest
    ) -> list[EditGroup]:
        """Run one proposer (unless benched), recording the model calls it spent and what it gave."""
        stats = state.proposer_stats.setdefault(proposer.name, _new_stats())
        if self._benched(stats, state.step):
            stats["skipped"] += 1
            view.emit("proposer", step=state.step, name=proposer.name, benched=True)
            return []
        before = view.usage()
        groups = proposer.propose(request)
        after = view.usage()
        calls = after.calls - before.calls
        # a resumed run replays model calls from its cache: they count as asked, not paid
        replayed = after.cache_hits - before.cache_hits
        edits = sum(len(g.edits) for g in groups)
        stats["runs"] += 1
        stats["calls"] += calls
        stats["edits"] += edits
        if calls or replayed:
            stats["paid_runs"] += 1
        view.emit(
            "proposer", step=state.step, name=proposer.name, calls=calls, cache_hits=replayed,
            groups=len(groups), edits=edits, benched=False,
        )  # fmt: skip
        return groups

    def _benched(self, stats: dict[str, int], step: int) -> bool:
        """A proposer that paid for `bench_after` steps and never reached an accepted
        candidate sits out, except on every `retry_every`-th step."""
        if self.bench_after is None or stats["accepted"] > 0:
            return False
        return stats["paid_runs"] >= self.bench_after and step % self.retry_every != 0

    def _submit(
        self,
        view: RunView,
        state: GradientTextState,
        skill: Skill,
        groups: list[EditGroup],
        *,
        kind: str,
        lr_t: float,
        budget: int,
    ) -> None:
        step, epoch = state.step, state.epoch
        state.step += 1
        view.emit("proposal", step=step, kind=kind, groups=[_group_json(g) for g in groups])
        rejected_keys = {edit_key(e) for c in state.memory() for e in c.edits}
        ranked = [r.edit for r in rank_edits(groups, rejected_keys)]
        if (
            self.aggregate_with_model_above is not None
            and len(ranked) > self.aggregate_with_model_above
        ):
            ranked = self._aggregate_with_model(view, skill, ranked, budget, step)
        candidate, kept, report = clip_to_budget(skill, ranked, budget, self.max_edits)
        view.emit("edit_report", step=step, outcomes=[o.to_dict() for o in report.outcomes])
        if not kept:
            state.steps_since_accept += 1
            note = "no applicable edit" if groups else "no proposal"
            view.record_empty_step(step=step, epoch=epoch, kind=kind, lr=lr_t, note=note)
            return
        sources = _sources(groups, kept)

        def state_after(verdict: Verdict) -> dict[str, Any]:
            for name in sources:
                stats = state.proposer_stats.setdefault(name, _new_stats())
                stats["submitted"] += 1
                stats["accepted"] += int(verdict.accepted)
            view.emit("candidate_sources", step=step, sources=sources, status=verdict.status)
            if verdict.accepted:
                state.steps_since_accept, state.accepted_this_epoch = 0, True
            else:  # rejected, duplicate or refused: no progress, never proposed again
                state.steps_since_accept += 1
                memory = RejectedCandidate(tuple(kept), verdict.delta, step, epoch)
                state.rejected.append(memory.to_dict())
            return state.to_dict()

        view.submit(
            candidate,
            lr=lr_t,
            step=step,
            epoch=epoch,
            kind=kind,
            report=report,
            state_after=state_after,
        )

    def _aggregate_with_model(
        self, view: RunView, skill: Skill, ranked: list[Edit], budget: int, step: int
    ) -> list[Edit]:
        listing = "\n".join(f"{i}. {e.model_dump_json()}" for i, e in enumerate(ranked))
        prompt = (
            f"# Document\n{skill.text}\n\n# Proposed edits, best first\n{listing}\n\n"
            f"Merge duplicates, resolve conflicts, keep the most useful edits; together they may "
            f"change at most {budget} tokens. Reply with the final edits as JSON only."
        )
        messages = [
            {"role": "system", "content": AGGREGATE_SYSTEM},
            {"role": "user", "content": prompt},
        ]
        merged = ask_for_edits(view.optimizer_lm, messages, seed=step * 100 + 98)
        if isinstance(merged, str):
            reason, _, reply = merged.partition("\n")
            view.emit(
                "aggregation_dropped",
                step=step,
                reason=reason,
                reply=reply[:500],
                using="deterministic ranking",
            )
            return ranked
        view.emit("aggregated", step=step, before=len(ranked), after=len(merged))
        return merged

    @staticmethod
    def _request(
        view: RunView,
        state: GradientTextState,
        skill: Skill,
        batch: list[Any],
        rollouts: Sequence[Any],
        budget: int,
    ) -> ProposalRequest:
        return ProposalRequest(
            module=view.module,
            skill=skill,
            batch=batch,
            rollouts=rollouts,
            trainset=view.trainset,
            rejected=state.memory(),
            optimizer_lm=view.optimizer_lm,
            rng=view.rng,
            budget_tokens=budget,
            step=state.step,
            epoch=state.epoch,
        )

    @staticmethod
    def _emit_notes(view: RunView, request: ProposalRequest, step: int) -> None:
        for note in request.notes:
            view.emit(note.pop("kind"), step=step, **note)

    def _slow_update(self, view: RunView, state: GradientTextState, total: int) -> None:
        skill = view.incumbent
        lr_t, budget = self._budget(view, state.step, total)
        request = self._request(view, state, skill, [], [], budget)
        groups = self.consolidation.propose(request)
        self._emit_notes(view, request, state.step)
        self._submit(view, state, skill, groups, kind="slow_update", lr_t=lr_t, budget=budget)


def _new_stats() -> dict[str, int]:
    """A proposer's counters: runs, steps benched, model calls, steps that paid for calls,
    edits proposed, candidates its edits were submitted in, and accepted ones."""
    return dict.fromkeys(
        ("runs", "skipped", "calls", "paid_runs", "edits", "submitted", "accepted"), 0
    )


def _sources(groups: Sequence[EditGroup], kept: Sequence[Edit]) -> list[str]:
    """The proposers whose edits are among `kept`, in proposal order."""
    keys = {edit_key(e) for e in kept}
    names: list[str] = []
    for group in groups:
        if group.source not in names and any(edit_key(e) in keys for e in group.edits):
            names.append(group.source)
    return names


def _group_json(group: EditGroup) -> dict[str, Any]:
    return {
        "source": group.source,
        "failure_driven": group.failure_driven,
        "rationale": group.rationale,
        "edits": [e.model_dump() for e in group.edits],
    }
