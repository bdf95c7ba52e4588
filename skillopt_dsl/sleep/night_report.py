"""A night's report, built once from what its stages gave (see `skillopt_dsl.sleep.night`).

The night runs as named stages, each returning a frozen record: `Gathered` (the tasks and the
live files they train), `Searched` (the consolidation, its gate and what it proposes), and the
night's own facts (`NightFacts`). `night_report` turns them into the one `NightReport`; nothing
patches it afterwards except adopting it (`auto_adopt`), which is a later fact.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TypedDict

from skillopt_dsl.compile import CompileResult
from skillopt_dsl.evidence import Preflight, preflight
from skillopt_dsl.gate import Gate
from skillopt_dsl.lm import Budget, UsageSnapshot
from skillopt_dsl.sleep.consolidate import Consolidation, gate_minimum_val
from skillopt_dsl.sleep.harvest import AgentName, HarvestResult, HarvestStats, utc_now
from skillopt_dsl.sleep.live import LiveFiles
from skillopt_dsl.sleep.mine import MineStats
from skillopt_dsl.sleep.stage import NightReport
from skillopt_dsl.sleep.tasks import Task

__all__ = [
    "Gathered",
    "NightFacts",
    "Searched",
    "SpendRecord",
    "gate_statement",
    "night_report",
    "spend",
]


@dataclass(frozen=True)
class Gathered:
    """The gathering stage's output: the sessions harvested (None: reviewed tasks were given),
    the mining figures, the tasks mined or loaded, whose memory file it trains, the live
    files, and the watermark before the night."""

    harvested: HarvestResult | None
    stats: MineStats
    tasks: list[Task]
    agent: AgentName
    live: LiveFiles
    watermark_before: datetime | None


@dataclass(frozen=True)
class Searched:
    """The consolidation stage's output: what the run gave, the night's gate, the tasks it
    searched on (those the night can judge), the changed live files (empty: nothing passed),
    the dream variants added to training and the earlier nights' rejected edits the search was
    seeded with."""

    consolidation: Consolidation
    gate: Gate
    tasks: list[Task]
    proposals: Mapping[str, bytes]
    dreamed: int
    remembered: int


@dataclass(frozen=True)
class NightFacts:
    """The night's own facts: its id, project, where its tasks came from, what the replays ran
    on, its limits and switches, what mining spent and how long it ran."""

    night_id: str
    project: str
    home: str
    replay: str
    budget: Budget | None
    no_regression: bool
    auto_adopt: bool
    mining: UsageSnapshot
    wall_s: float


def night_report(facts: NightFacts, gathered: Gathered, searched: Searched) -> NightReport:
    """The night's report, built once from its stages' records."""
    result, harvested = searched.consolidation.result, gathered.harvested
    val_tasks = sum(1 for t in searched.tasks if t.split == "val")
    return NightReport(
        night_id=facts.night_id,
        project=facts.project,
        created=utc_now().isoformat(),
        agent=gathered.agent,
        sources=[] if harvested is None else sorted({s.agent for s in harvested.sessions}),
        home=facts.home,
        memory_file=gathered.live.memory_rel,
        skill_file=gathered.live.skill_rel,
        watermark_before=gathered.watermark_before.isoformat()
        if gathered.watermark_before
        else None,
        watermark_after=harvested.newest.isoformat() if harvested and harvested.newest else None,
        harvest=dict((harvested.stats if harvested else HarvestStats()).to_dict()),
        mining=dict(gathered.stats.to_dict()),
        tasks=_task_counts(searched),
        replay=facts.replay,
        blocked=searched.consolidation.blocked or _nothing_passed(result),
        stop_reason=result.stop_reason if result else None,
        seed_val=result.seed_val_score if result else None,
        candidate_val=result.val_score if result else None,
        seed_test=result.seed_test_score if result else None,
        candidate_test=result.test_score if result else None,
        gate_minimum_val=gate_minimum_val(searched.gate),
        gate_statement=gate_statement(
            searched.gate, val_tasks, result.preflight if result else None
        ),
        gate_decisions=[dict(d.to_dict()) for d in result.gate_log] if result else [],
        accepted=bool(searched.proposals),
        proposed_files=sorted(searched.proposals),
        no_regression=facts.no_regression,
        budget=None if facts.budget is None else vars(facts.budget),
        spend=dict(spend(facts.mining, result.usage if result else None)),
        wall_s=facts.wall_s,
        auto_adopt=facts.auto_adopt,
    )


def _task_counts(searched: Searched) -> dict[str, int]:
    tasks = searched.tasks
    return {
        "total": len(tasks),
        "train": sum(1 for t in tasks if t.split == "train"),
        "val": sum(1 for t in tasks if t.split == "val"),
        "test": sum(1 for t in tasks if t.split == "test"),
        "recurring": sum(1 for t in tasks if t.weight > 1),
        "dream_variants": searched.dreamed,
        "remembered_rejected": searched.remembered,
    }


def gate_statement(gate: Gate, val_tasks: int, check: Preflight | None = None) -> str | None:
    """What the night's gate could certify on `val_tasks` val tasks, in words: the clean fix
    its first decision needs and the gain with an even chance to pass, with the pre-flight
    warning when the night has too few val tasks (None: no val task).

    `check` is the pre-flight of the night's run (its plan known); without it, the night's
    decisions are taken as open-ended. All candidates of a night are decided in one run, so
    they share one significance budget.
    """
    if val_tasks <= 0:
        return None
    check = check if check is not None else preflight(gate, val_tasks, None)
    return check.statement()


def _nothing_passed(result: CompileResult | None) -> str | None:
    if result is None or result.improved:
        return None
    return f"no candidate passed the gate ({len(result.gate_log)} decision(s))"


class SpendRecord(TypedDict):
    """What a night spent (`NightReport.spend`): calls, tokens and dollars in all, and the
    calls of mining and of the compile."""

    calls: int
    tokens: int
    usd: float | None
    mining_calls: int
    compile_calls: int
    cache_hits: int


def spend(mining: UsageSnapshot, compiled: UsageSnapshot | None) -> SpendRecord:
    """What a night spent, mining and compile together (`SpendRecord`)."""
    parts = [mining] + ([compiled] if compiled is not None else [])
    usd = [p.cost_usd for p in parts if p.cost_usd is not None]
    return {
        "calls": sum(p.calls for p in parts),
        "tokens": sum(p.total_tokens for p in parts),
        "usd": round(sum(usd), 6) if usd else None,
        "mining_calls": mining.calls,
        "compile_calls": compiled.calls if compiled is not None else 0,
        "cache_hits": sum(p.cache_hits for p in parts),
    }
