"""The shared search step: propose, fit, try alone, confirm (docs/concepts.md, "Search").

The pieces every screened search shares (GradientText, Beam; OptunaLR trials, `SkillOptimizer`
and Sleep nights run compile's default search), over the run's one memory
(`skillopt_dsl.search_memory.SearchMemory`, `RunView.memory`):

- `proposer_runs.ProposerRuns` runs the proposers (their counters; a request unchanged since a
  proposer's last paid call is not asked again; earlier runs' rejected edits dropped),
  `screening.merge_duplicates` merges copies;
- `fit_proposal` fits each proposal to the room the learning rate leaves, `keeps_reserve` says
  whether screening it still leaves the calls a gate decision needs (priced at the measured calls
  per rollout, `RunView.calls_per_rollout`);
- `try_alone` tries it alone on the mini-batch that produced it (`screening.screen`), adds the
  result to the evidence of every earlier proposal of the same edit (the same text, or the same
  edit after normalisation: a small but repeated effect is seen), and strikes it when it fixed
  none of the failures it named or its evidence rules out the gain the gate certifies (blocked
  at its `screen_strikes`-th failure);
- `confirm_once` scores a proposal on trial against the working candidate on a fresh
  mini-batch, counts the screen and adds it to the proposal's evidence.

GradientText's use of them is `screened_steps.ScreenedSteps`; Beam scores each survivor on its
selection split instead (`beam.py`). Nothing here knows any optimizer's state: a new search
keeps its own state, searches in `view.memory` with these functions, and runs the contract suite
(`skillopt_dsl.testing.search_contract`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from skillopt_dsl.driver import RunView
from skillopt_dsl.evaluate import Rollout
from skillopt_dsl.optimizers.clipping import clip_to_budget
from skillopt_dsl.optimizers.proposer_runs import new_stats
from skillopt_dsl.optimizers.proposers import EditGroup
from skillopt_dsl.optimizers.screening import ScreenResult, screen
from skillopt_dsl.search_memory import EditEvidence, SearchMemory, group_key
from skillopt_dsl.skill import ApplyReport, Edit, Skill
from skillopt_dsl.types import Example

__all__ = [
    "Fitted",
    "Tried",
    "confirm_once",
    "fit_proposal",
    "keeps_reserve",
    "record_screen",
    "try_alone",
]


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


def confirm_once(
    view: RunView,
    memory: SearchMemory,
    group: EditGroup,
    key: str,
    candidate: Skill,
    batch: Sequence[Example],
    rollouts: Sequence[Rollout],
) -> tuple[ScreenResult, EditEvidence]:
    """Score `candidate` (the working candidate with a proposal on trial) against the working
    candidate's `rollouts` on a fresh `batch` (`screening.screen`, stage "confirm": all of it
    at once, passing when it does not lose), count and emit the screen, and add it to the
    evidence of the proposal's `key`; returns the screen and the summed evidence."""
    result = screen(view, candidate, batch, rollouts, stage="confirm")
    record_screen(view, memory, group, result)
    return result, memory.add_evidence(key, result)


def record_screen(
    view: RunView, memory: SearchMemory, group: EditGroup, result: ScreenResult
) -> None:
    """Count one screen in the memory's summary and emit it as a `screen` event."""
    counts = memory.screen_stats
    counts[f"{result.stage}_screened"] = counts.get(f"{result.stage}_screened", 0) + 1
    counts[f"{result.stage}_passed"] = counts.get(f"{result.stage}_passed", 0) + int(result.passed)
    counts["calls"] = counts.get("calls", 0) + result.calls
    view.emit(
        "screen", step=memory.step - 1, source=group.source, rationale=group.rationale[:200],
        **result.to_dict(),
    )  # fmt: skip
