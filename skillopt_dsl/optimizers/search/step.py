"""The shared search step: propose, fit, try alone, confirm (docs/concepts.md, "Search").

`SearchStep` is the step every screened search holds (GradientText through
`screened.ScreenedSteps`, Bundle, Beam), over the run's one memory (`RunView.memory`,
`skillopt_dsl.search_memory.SearchMemory`):

- `propose` runs the proposers (`proposer_runs.ProposerRuns`: their counters; a request
  unchanged since a proposer's last paid call is not asked again; earlier runs' rejected edits
  dropped), merges copies (`screening.merge_duplicates`) and emits the request's notes;
- `fit` fits each proposal to the room the learning rate leaves, `keeps_reserve` says whether
  screening it still leaves the calls a gate decision needs (priced at the measured calls per
  rollout, `RunView.calls_per_rollout`);
- `try_alone` tries it alone on the mini-batch that produced it (`screening.screen`), adds the
  result to the evidence of every earlier proposal of the same edit (the same text, or the same
  edit after normalisation: a small but repeated effect is seen), and strikes it when it gained
  nothing there, whether or not it names failures, or its evidence rules out the gain the gate
  certifies (blocked at its `screen_strikes`-th failure once the evidence rules it out: a
  failed screen alone does not block it);
- `confirm` scores a proposal on trial against the working candidate on a fresh mini-batch,
  counts the screen and adds it to the proposal's evidence.

Nothing here knows any optimizer's state: a new search keeps its own state, holds a
`SearchStep`, searches in `view.memory` with it, and runs the contract suite
(`skillopt_dsl.testing.search_contract`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from skillopt_dsl.driver import RunView
from skillopt_dsl.evaluate import Rollout
from skillopt_dsl.optimizers.proposers import EditGroup, ProposalRequest, Proposer
from skillopt_dsl.optimizers.search.clipping import clip_to_budget
from skillopt_dsl.optimizers.search.proposal import Fitted, Tried
from skillopt_dsl.optimizers.search.proposer_runs import ProposerRuns, new_stats
from skillopt_dsl.optimizers.search.screening import ScreenResult, merge_duplicates, screen
from skillopt_dsl.search_memory import EditEvidence, group_key
from skillopt_dsl.skill import ApplyReport, Skill
from skillopt_dsl.types import Example

__all__ = ["SearchStep", "keeps_reserve", "record_screen"]


@dataclass(frozen=True)
class SearchStep:
    """One search's step (module docstring), with the two settings it reads: `max_edits` (a
    cap on the edits kept of a proposal; None: only the room limits) and `screen_strikes` (the
    screen failures at which a proposal proposed again is no longer screened)."""

    max_edits: int | None
    screen_strikes: int

    def propose(
        self,
        view: RunView,
        runs: ProposerRuns,
        proposers: Sequence[Proposer],
        request: ProposalRequest,
    ) -> list[EditGroup]:
        """Run each of `proposers` on `request` (`ProposerRuns.run`), merge the copies
        (`merge_duplicates`) and emit the notes the request gathered, as the step's events."""
        groups = merge_duplicates([g for p in proposers for g in runs.run(view, p, request)])
        for kind, payload in request.note_events():
            view.emit(kind, step=view.memory.step - 1, **payload)
        return groups

    def fit(
        self, view: RunView, base: Skill, group: EditGroup, room: int
    ) -> tuple[Fitted | None, ApplyReport]:
        """Fit `group` to the `room` (tokens) a step may move from `base` and emit what became of
        each edit (`edit_report`, also returned); None when nothing of it applies or the text
        does not change."""
        candidate, kept, report = clip_to_budget(base, group.edits, room, self.max_edits)
        outcomes = [o.to_dict() for o in report.outcomes]
        view.emit("edit_report", step=view.memory.step - 1, outcomes=outcomes)
        if not kept or candidate.text == base.text:
            return None, report
        return Fitted(group, tuple(kept), group_key(kept), candidate), report

    def try_alone(
        self,
        view: RunView,
        fitted: Fitted,
        batch: Sequence[Example],
        rollouts: Sequence[Rollout],
        *,
        epoch: int,
    ) -> Tried:
        """Screen a fitted proposal alone against the base whose `rollouts` on `batch` produced
        it (`screening.screen`), count and emit the screen (`record_screen`), add it to the
        proposal's evidence, and strike it (`SearchMemory.strike`) when it gained nothing on
        that batch (net <= 0) or its evidence rules out the gain the gate certifies; a survivor
        is counted for its proposer (`survived`). Whether a proposal names failures does not
        decide its fate: the names are the proposer's claim (a real reflector names the
        failures it read, and its rules fix unread failures as often as read ones, bench/README
        §14), and worked examples or a consolidation name none. A failed screen strikes it for
        this step and tells the proposers; only evidence blocks it (at its `screen_strikes`-th
        failure), and a re-proposal is screened again (bench/README §9q)."""
        memory, group = view.memory, fitted.group
        result = screen(view, fitted.candidate, batch, rollouts, addresses=group.addresses)
        record_screen(view, group, result)
        evidence = memory.add_evidence(fitted.key, result)
        ruled_out = evidence.rules_out(view.certifiable_gain())
        struck = not result.passed or ruled_out
        if struck:
            rate, limit = evidence.rate, self.screen_strikes
            memory.strike(fitted.kept, rate, epoch=epoch, limit=limit, block=ruled_out)
        else:
            memory.proposer_stats.setdefault(group.source, new_stats())["survived"] += 1
        return Tried(fitted, result, evidence, struck)

    def confirm(
        self,
        view: RunView,
        group: EditGroup,
        key: str,
        candidate: Skill,
        batch: Sequence[Example],
        rollouts: Sequence[Rollout],
    ) -> tuple[ScreenResult, EditEvidence]:
        """Score `candidate` (the working candidate with a proposal on trial) against the
        working candidate's `rollouts` on a fresh `batch` (`screening.screen`, stage "confirm":
        all of it at once, passing when it does not lose), count and emit the screen, and add it
        to the evidence of the proposal's `key`; returns the screen and the summed evidence."""
        result = screen(view, candidate, batch, rollouts, stage="confirm")
        record_screen(view, group, result)
        return result, view.memory.add_evidence(key, result)


def keeps_reserve(view: RunView, calls: int, reserve: int) -> bool:
    """Whether `calls` more screening calls still leave `reserve` calls (a gate decision, or its
    first look) in the call budget (always, without one)."""
    left = view.calls_left()
    return left is None or left - calls >= reserve


def pays_for_decisions(view: RunView, decisions: int | None) -> bool:
    """Whether a call budget's calls left pay for `decisions` whole gate decisions, each at
    `RunView.decision_calls` (False without a call budget, or where `decisions` is None)."""
    left = view.calls_left()
    return left is not None and decisions is not None and left >= decisions * view.decision_calls()


def record_screen(view: RunView, group: EditGroup, result: ScreenResult) -> None:
    """Count one screen in the memory's summary and emit it as a `screen` event."""
    memory = view.memory
    memory.count(f"{result.stage}_screened")
    memory.count(f"{result.stage}_passed", int(result.passed))
    memory.count("calls", result.calls)
    view.emit(
        "screen", step=memory.step - 1, source=group.source, rationale=group.rationale[:200],
        **result.to_dict(),
    )  # fmt: skip
