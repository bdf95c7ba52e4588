"""One night: harvest → mine → replay and judge → consolidate → stage (→ adopt, if asked).

`run_night(SleepConfig(...))` holds the project's lock for the whole night, undoes any interrupted
adoption first, removes half-written stages of killed runs, and advances the watermark only after
the night's folder is complete. Nothing here writes a live file: only `adopt` does, and only when
`auto_adopt=True` and the gate accepted a candidate.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Literal

from skillopt_dsl.compile import ModelSpec, default_optimizer
from skillopt_dsl.data import Splits
from skillopt_dsl.evaluate import DEFAULT_THREADS
from skillopt_dsl.gate import Gate
from skillopt_dsl.lm import (
    DEFAULT_MODEL,
    LM,
    Budget,
    SamplingParams,
    UsageLedger,
    resolve_lm,
)
from skillopt_dsl.optimizers.base import Optimizer
from skillopt_dsl.settings import CompileSettings, EventListener
from skillopt_dsl.sleep.adopt import adopt, recover
from skillopt_dsl.sleep.agent_replay import AgentReplay, AgentRunsOnly, AgentSettings, settings_from
from skillopt_dsl.sleep.consolidate import (
    consolidate,
)
from skillopt_dsl.sleep.describe_stage import (
    DescribePlan,
    FolderDescribed,
    describe_folders,
)
from skillopt_dsl.sleep.dreams import dream_variants
from skillopt_dsl.sleep.errors import SleepError
from skillopt_dsl.sleep.harvest import AgentName, HarvestResult, harvest
from skillopt_dsl.sleep.judge import ScoreBook, TaskJudge, no_regression_guard
from skillopt_dsl.sleep.live import LiveFiles
from skillopt_dsl.sleep.mine import MineStats, mine_sessions
from skillopt_dsl.sleep.night_report import (
    Gathered,
    NightFacts,
    Searched,
    gate_statement,
    night_report,
)
from skillopt_dsl.sleep.project import ProjectConfig, SleepProject
from skillopt_dsl.sleep.rejections import (
    load_rejected,
    rejected_in,
    remember_rejected,
)
from skillopt_dsl.sleep.replay import Replay
from skillopt_dsl.sleep.sources import check_agent, make_sources, memory_files
from skillopt_dsl.sleep.stage import (
    NightReport,
    evidence_rows,
    mark_failed,
    remove_partials,
    write_report,
    write_stage,
)
from skillopt_dsl.sleep.tasks import (
    DEFAULT_FRACTIONS,
    SplitFractions,
    Task,
    load_tasks,
    to_splits,
)

__all__ = [
    "NightResult",
    "SleepConfig",
    "gate_statement",
    "harvest_tasks",
    "replay_target",
    "run_night",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class SleepConfig:
    """Everything one night needs (typed; the CLI builds one from its flags).

    Attributes:
        project: the project folder (its sessions are those recorded in it, see `ProjectConfig`).
        source: `claude`, `codex`, `jsonl` or `auto` (every source found under `home`).
        home: where the agents keep their transcripts (default: the user's home).
        agent: whose memory file to train (a registered source with a `memory_file`:
            `skillopt_dsl.sleep.sources.agent_choices`); default from the project config, else
            the one memory file that exists, else the agent with the most sessions (ties: the
            first registered).
        skill_file: a skill document (relative to the project) trained with the learned block.
        lm: the model the replays run on; default `sleep.json`'s `replay`, else the embedded
            `local/smollm2-135m`.
        replay_agent: run the replays through the user's agent CLI instead (its source's
            `replay_command`: `claude -p`, `codex exec`; see `skillopt_dsl.sleep.agent_replay`);
            overrides `lm`.
        optimizer_lm: the model that mines tasks, proposes edits and judges rubrics.
        budget: hard limits for the whole night (mining, replays, proposals, judging).
        optimizer: default compile's (`compile.default_optimizer()`: `HandOff`).
        gate: default `Gate()`; `no_regression` adds a guard to it.
        auto_adopt: adopt the proposal right after the gate accepts it.
        judge_mode: rule checks scored as the share passed (`soft`) or all-or-nothing (`hard`).
        rubric_judge: grade tasks' rubrics with `optimizer_lm`.
        mine_with_model: ask `optimizer_lm` for tasks (else heuristic tasks only).
        fractions: train / val / test shares of the hashed splits (the tasks a reply can fail
            are then shared between train and val: `skillopt_dsl.sleep.splits`).
        tasks: use these reviewed tasks (a saved night's `tasks/` or a `tasks.jsonl`) instead of
            harvesting; `reviewed_only` keeps only rows marked `reviewed: true`.
        dream_variants: reworded copies of each training task (0 = off; training only, see
            `skillopt_dsl.sleep.dreams`); reworded by `optimizer_lm` when one is given.
        contrastive: feedback of a reply below the task's best pairs it with the GOOD reply.
        remember_rejected: keep the edits the gate rejected and never propose them again on
            later nights (`skillopt_dsl.sleep.rejections`).
        describe: skill folders whose descriptions the night trains after its own work
            (default: `sleep.json`'s `describe`; `skillopt_dsl.sleep.describe_stage`), each on
            an equal share of `budget`; staged under the night, never auto-adopted.
    """

    project: Path
    source: str = "auto"
    home: Path = field(default_factory=Path.home)
    agent: AgentName | None = None
    skill_file: str | None = None
    lm: ModelSpec = None
    replay_agent: AgentSettings | None = None
    optimizer_lm: ModelSpec = None
    budget: Budget | None = None
    optimizer: Optimizer | None = None
    gate: Gate | None = None
    no_regression: bool = False
    auto_adopt: bool = False
    judge_mode: Literal["soft", "hard"] = "soft"
    rubric_judge: bool = True
    mine_with_model: bool = True
    fractions: SplitFractions = DEFAULT_FRACTIONS
    tasks: Path | None = None
    reviewed_only: bool = False
    seed: int = 0
    threads: int = DEFAULT_THREADS
    dream_variants: int = 0
    contrastive: bool = False
    remember_rejected: bool = False
    describe: tuple[Path, ...] = ()

    def __post_init__(self) -> None:
        if self.agent is not None:
            check_agent(self.agent)
        if self.dream_variants < 0:
            raise SleepError(f"dream_variants must be >= 0, got {self.dream_variants}")


@dataclass(frozen=True)
class NightResult:
    """A staged night: its folder, its report and its described skill folders (if any)."""

    path: Path
    report: NightReport
    described: tuple[FolderDescribed, ...] = ()


def _choose_agent(
    project: SleepProject, config: SleepConfig, sessions: HarvestResult | None
) -> AgentName:
    chosen = config.agent or project.config().agent
    if chosen is not None:
        return chosen
    files = memory_files()
    present = [a for a, f in files.items() if (project.path / f).exists()]
    if len(present) == 1:
        return present[0]
    counts = dict.fromkeys(files, 0)
    for session in sessions.sessions if sessions else []:
        if session.agent in counts:
            counts[session.agent] += 1
    return max(counts, key=lambda agent: counts[agent])


def harvest_tasks(
    project: SleepProject,
    config: SleepConfig,
    ledger: UsageLedger,
    *,
    on_event: EventListener | None = None,
    since: datetime | None = None,
    read_all: bool = False,
) -> tuple[HarvestResult, list[Task], MineStats]:
    """Harvest the project's new sessions and mine them into tasks (model calls on `ledger`).

    New means after the project's watermark; `since` reads from that time instead, `read_all`
    reads every session (`sleep harvest --since/--all`)."""
    settings = project.config()
    sources = make_sources(config.source, config.home.expanduser())
    watermark = None if read_all else since or project.watermark()
    harvested = harvest(sources, project.matcher(settings), watermark=watermark)
    _emit(on_event, "harvest", harvested.stats.to_dict())
    miner = resolve_lm(config.optimizer_lm, ledger=ledger) if config.mine_with_model else None

    def mined(done: int, total: int) -> None:
        _emit(on_event, "mine", {"done": done, "total": total})

    tasks, stats = mine_sessions(
        harvested.sessions,
        project=str(project.path),
        lm=miner,
        fractions=config.fractions,
        seed=config.seed,
        on_session=mined,
    )
    logger.info("harvested %d session(s), mined %d task(s)", len(harvested.sessions), len(tasks))
    return harvested, tasks, stats


def _emit(
    on_event: EventListener | None,
    event: str,
    payload: Mapping[str, object],
) -> None:
    if on_event is not None:
        on_event(event, payload)


EMBEDDED_REPLY_TOKENS = 128
"""Replies of the embedded model are cut at 128 tokens: past that the 135M model repeats
itself, and generation is most of a demo night's time on two cores."""


def embedded_replay_lm() -> LM:
    """The embedded model as the replays' default, its replies cut at `EMBEDDED_REPLY_TOKENS`."""
    return LM(DEFAULT_MODEL, params=SamplingParams(max_tokens=EMBEDDED_REPLY_TOKENS))


def replay_target(config: SleepConfig, settings: ProjectConfig) -> AgentSettings | ModelSpec:
    """What the replays run on: `--replay-agent`, else `--model`, else `sleep.json`'s `replay`,
    else None (the embedded model)."""
    if config.replay_agent is not None:
        return config.replay_agent
    if config.lm is not None or settings.replay is None:
        return config.lm
    replay = settings.replay
    if replay.agent is not None:
        return settings_from(
            replay.agent,
            argv=replay.argv,
            timeout_s=replay.timeout_s,
            env=replay.env,
            max_usd_per_run=replay.max_usd_per_run,
        )
    return replay.model


def run_night(
    config: SleepConfig,
    *,
    on_event: EventListener | None = None,
) -> NightResult:
    """Run one night on `config.project` and stage it (see the module docstring)."""
    project = SleepProject.open(config.project)
    with project.lock("sleep run"):
        recover(project)
        for what in remove_partials(project):
            logger.warning("removed %s", what)
        night = _Night(project, config, on_event)
        try:
            return night.run()
        except BaseException as exc:
            mark_failed(night.partial, exc)
            raise


class _Night:
    """The state of one night while it runs (one method per stage)."""

    def __init__(
        self,
        project: SleepProject,
        config: SleepConfig,
        on_event: EventListener | None,
    ) -> None:
        self.project, self.config, self.on_event = project, config, on_event
        self.started = time.perf_counter()
        self.night_id = project.new_night_id()
        self.partial = project.night_dir(self.night_id + ".partial")
        self.folders = config.describe or tuple(project.path / p for p in project.config().describe)
        # the night's own work and each described folder: fixed, equal shares of the budget
        budget, folders = config.budget, len(self.folders)
        shares = budget.split(folders + 1) if budget is not None and folders else None
        self.own_budget: Budget | None = budget if shares is None else shares[0]
        self.share: Budget | None = None if shares is None else shares[1]
        self.mine_ledger = UsageLedger(self.own_budget)
        self.book = ScoreBook()

    def run(self) -> NightResult:
        """The night as a pipeline of named stages; its report is built once, from their
        records (`skillopt_dsl.sleep.night_report`)."""
        target = self._checked_target()
        self.partial.mkdir(parents=True)
        gathered = self._gather()
        module, replay_lm = self._replay(gathered, target)
        searched = self._consolidate(gathered, module, replay_lm)
        report = night_report(self._facts(target), gathered, searched)
        path = self._stage(gathered, searched, report, module)
        self._remember(gathered, searched)
        if self.config.auto_adopt:
            report = self._auto_adopt(path, report)
        return NightResult(path, report, self._describe(path, target))

    def _checked_target(self) -> AgentSettings | ModelSpec:
        """What the replays run on; an agent CLI is checked before any spend."""
        target = replay_target(self.config, self.project.config())
        if isinstance(target, AgentSettings):
            _check_agent(target, self.config.budget)
        return target

    def _gather(self) -> Gathered:
        """Harvest and mine (or load the reviewed tasks), choose the agent, read the live files."""
        watermark_before = self.project.watermark()
        harvested, tasks, mine_stats = self._tasks()
        agent = _choose_agent(self.project, self.config, harvested)
        skill_rel = self.config.skill_file or self.project.config().skill_file
        live = LiveFiles.read(self.project, memory_files()[agent], skill_rel)
        return Gathered(harvested, mine_stats, tasks, agent, live, watermark_before)

    def _replay(
        self, gathered: Gathered, target: AgentSettings | ModelSpec
    ) -> tuple[Replay, ModelSpec]:
        """The replay module (through the agent CLI, or on a model) and the model it runs on."""
        judge = TaskJudge(
            mode=self.config.judge_mode,
            rubric_lm=resolve_lm(self.config.optimizer_lm) if self.config.rubric_judge else None,
        )
        skill, live = gathered.live.document(), gathered.live
        if isinstance(target, AgentSettings):
            module = AgentReplay(
                skill=skill,
                judge=judge,
                book=self.book,
                live=live,
                settings=target,
                contrastive=self.config.contrastive,
            )
            return module, AgentRunsOnly()
        replay = Replay(
            skill=skill, judge=judge, book=self.book, contrastive=self.config.contrastive
        )
        return replay, target if target is not None else embedded_replay_lm()

    def _consolidate(self, gathered: Gathered, module: Replay, replay_lm: ModelSpec) -> Searched:
        """The one gated search over the tasks the night can judge (and their dream variants),
        seeded with earlier nights' rejected edits."""
        usable = [t for t in gathered.tasks if t.checks or module.judge.judges_rubrics]
        gate = self._gate(module.seed_skill.hash)
        _emit(self.on_event, "consolidate", {"tasks": len(usable)})
        mined = to_splits(usable)
        splits = self._dreamed(mined)
        remembered = load_rejected(self.project) if self.config.remember_rejected else []
        settings = CompileSettings(
            lm=replay_lm,
            optimizer_lm=self.config.optimizer_lm,
            gate=gate,
            budget=None
            if self.own_budget is None
            else self.own_budget.left_after(self.mine_ledger.snapshot()),
            run_dir=self.partial / "run",
            seed=self.config.seed,
            threads=self.config.threads,
            on_event=self.on_event,
            remembered=tuple(remembered),
        )
        optimizer = self._optimizer(module)
        consolidation = consolidate(module, splits, optimizer=optimizer, settings=settings)
        result = consolidation.result
        proposals = gathered.live.proposals(result.best_skill) if result and result.improved else {}
        dreamed = len(splits.train) - len(mined.train)
        return Searched(consolidation, gate, usable, proposals, dreamed, len(remembered))

    def _facts(self, target: AgentSettings | ModelSpec) -> NightFacts:
        config = self.config
        return NightFacts(
            night_id=self.night_id,
            project=str(self.project.path),
            home=str(config.home) if config.tasks is None else f"tasks: {config.tasks}",
            replay=_describe(target),
            budget=config.budget,
            no_regression=config.no_regression,
            auto_adopt=config.auto_adopt,
            mining=self.mine_ledger.snapshot(),
            wall_s=time.perf_counter() - self.started,
        )

    def _stage(
        self, gathered: Gathered, searched: Searched, report: NightReport, module: Replay
    ) -> Path:
        """Write the night under its partial folder and make it the staged night."""
        result = searched.consolidation.result
        seed_hash = module.seed_skill.hash
        best_hash = result.best_skill.hash if result else seed_hash
        harvested = gathered.harvested
        return write_stage(
            self.project,
            self.partial,
            report,
            live=gathered.live.raw,
            proposals=searched.proposals,
            tasks=searched.tasks,
            evidence=evidence_rows(searched.tasks, self.book, seed_hash, best_hash),
            sessions=[s.review_row() for s in harvested.sessions] if harvested else [],
        )

    def _remember(self, gathered: Gathered, searched: Searched) -> None:
        """Advance the watermark past the sessions read; keep the edits the gate rejected."""
        self._advance_watermark(gathered.harvested)
        result = searched.consolidation.result
        if self.config.remember_rejected and result is not None:
            held = remember_rejected(self.project, self.night_id, rejected_in(result))
            logger.info("the rejected-edit memory holds %d candidate(s)", held)

    def _describe(
        self, path: Path, target: AgentSettings | ModelSpec
    ) -> tuple[FolderDescribed, ...]:
        """The listed folders' descriptions, trained and staged under `path` (none: nothing)."""
        if not self.folders:
            return ()
        plan = DescribePlan(
            folders=self.folders,
            source=self.config.source,
            home=self.config.home.expanduser(),
            project=self.project.matcher(self.project.config()),
            lm=None if isinstance(target, AgentSettings) else target,
            optimizer_lm=self.config.optimizer_lm,
            share=self.share,
            seed=self.config.seed,
            threads=self.config.threads,
        )
        return describe_folders(plan, path, self.on_event)

    def _tasks(self) -> tuple[HarvestResult | None, list[Task], MineStats]:
        if self.config.tasks is not None:
            tasks = load_tasks(self.config.tasks, reviewed_only=self.config.reviewed_only)
            return None, tasks, MineStats(tasks=len(tasks))
        return harvest_tasks(self.project, self.config, self.mine_ledger, on_event=self.on_event)

    def _dreamed(self, splits: Splits) -> Splits:
        """`splits` with the dream variants added to training (validation and test as mined)."""
        if self.config.dream_variants <= 0:
            return splits
        lm = (
            resolve_lm(self.config.optimizer_lm, ledger=self.mine_ledger)
            if self.config.optimizer_lm is not None
            else None
        )
        variants = dream_variants(
            splits.train, self.config.dream_variants, seed=self.config.seed, lm=lm
        )
        logger.info("%d dream variant(s) join the training tasks", len(variants))
        return Splits([*splits.train, *variants], splits.val, splits.test)

    def _optimizer(self, module: Replay) -> Optimizer:
        """The night's search: the configured one, else compile's default for the night's
        replay `module` (`compile.default_optimizer(module)`; it searches in the run's memory,
        seeded with earlier nights' rejections: `CompileSettings.remembered`)."""
        if self.config.optimizer is not None:
            return self.config.optimizer
        return default_optimizer(module)

    def _gate(self, seed_hash: str) -> Gate:
        """The night's one gate. GATE WIRING POINT: the gate every candidate of the night is
        decided by is built here (and only here); a shared significance budget across the
        night's candidates belongs in this method, and its "smallest certifiable gain"
        statement in `gate_statement` below."""
        gate = self.config.gate or Gate()
        if not self.config.no_regression:
            return gate
        return replace(gate, guards=(*gate.guards, no_regression_guard(self.book, seed_hash)))

    def _advance_watermark(self, harvested: HarvestResult | None) -> None:
        if harvested is None or harvested.newest is None:
            return
        current = self.project.watermark()
        if current is None or harvested.newest > current:
            self.project.save_watermark(harvested.newest)

    def _auto_adopt(self, path: Path, report: NightReport) -> NightReport:
        if not report.accepted:
            note = "nothing passed the gate, so nothing was adopted"
            updated = report.model_copy(update={"adopt_note": note})
        else:
            adopt(self.project, report.night_id)
            updated = report.model_copy(
                update={"adopted": True, "adopt_note": "auto-adopted after the gate passed"}
            )
        write_report(path, updated)
        return updated


def _check_agent(settings: AgentSettings, budget: Budget | None) -> None:
    """Refuse, before any spend, an agent CLI that is not installed, or a dollar budget the
    agent runs cannot be held to (no declared price per run)."""
    settings.command_agent(TaskJudge())
    if budget is not None and budget.max_usd is not None and settings.max_usd_per_run is None:
        raise SleepError(
            f"the night has a dollar budget (${budget.max_usd:g}) but an {settings.agent} run "
            "cannot be priced before it runs: declare its worst case with --agent-usd-per-run "
            '(or "max_usd_per_run" in sleep.json\'s replay), or drop --max-usd'
        )


def _describe(target: AgentSettings | ModelSpec) -> str:
    if isinstance(target, AgentSettings):
        return f"agent CLI: {target.agent} (timeout {target.timeout_s:g} s)"
    if target is None:
        return (
            f"model: the embedded {DEFAULT_MODEL} (replies cut at {EMBEDDED_REPLY_TOKENS} tokens)"
        )
    if isinstance(target, str):
        return f"model: {target}"
    return f"model: {getattr(target, 'model', type(target).__name__)}"
