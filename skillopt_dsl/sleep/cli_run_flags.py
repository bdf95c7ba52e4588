"""`skillopt-dsl sleep run`'s flags as typed records (`skillopt_dsl.flags.FlagRecord`): what the
night reads, what the replays run on, its models and limits, and how it searches. The command
takes the four records and builds one `SleepConfig` from them (`night_config`)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import typer

from skillopt_dsl.flags import (
    FlagRecord,
    HomeOpt,
    MaxCallsOpt,
    MaxTokensOpt,
    MaxUsdOpt,
    OptimizerApiBaseOpt,
    OptimizerModelOpt,
)
from skillopt_dsl.gate import Gate
from skillopt_dsl.lm import Budget
from skillopt_dsl.lm.endpoint import API_BASE_ENV, OPTIMIZER_API_BASE_ENV, at_api_base
from skillopt_dsl.sleep.agent_replay import AgentSettings, settings_from
from skillopt_dsl.sleep.cli_options import (
    AgentOpt,
    HeuristicOpt,
    ProjectOpt,
    ReplayAgentOpt,
    SourceOpt,
)
from skillopt_dsl.sleep.errors import SleepError
from skillopt_dsl.sleep.night import SleepConfig
from skillopt_dsl.sleep.sources import check_agent, check_replay_agent

if TYPE_CHECKING:
    from skillopt_dsl.optimizers import Optimizer

__all__ = [
    "NightLimits",
    "NightReads",
    "NightReplay",
    "NightSearch",
    "night_budget",
    "night_config",
    "optimizer_lm",
]


def night_budget(calls: int | None, tokens: int | None, usd: float | None) -> Budget | None:
    """The limits given (None: no limit at all)."""
    if calls is None and tokens is None and usd is None:
        return None
    return Budget(max_calls=calls, max_tokens=tokens, max_usd=usd)


def optimizer_lm(model: str | None, api_base: str | None) -> Any:
    """`--optimizer-model` served at `--optimizer-api-base` (when given)."""
    return at_api_base(
        model,
        api_base,
        flag="--optimizer-api-base",
        model_flag="--optimizer-model",
        env=OPTIMIZER_API_BASE_ENV,
    )


@dataclass(frozen=True)
class NightReads(FlagRecord):
    """What the night reads and trains: the project, the transcripts (or reviewed tasks), the
    agent whose memory file it trains and a skill document trained too."""

    project: ProjectOpt = Path(".")
    source: SourceOpt = "auto"
    home: HomeOpt = None
    agent: AgentOpt = None
    skill_file: Annotated[
        str | None, typer.Option("--skill-file", help="A skill document to train too.")
    ] = None
    heuristic_only: HeuristicOpt = False
    tasks: Annotated[
        Path | None, typer.Option("--tasks", help="Use these (reviewed) tasks instead.")
    ] = None
    reviewed_only: Annotated[
        bool, typer.Option("--reviewed-only", help="Only tasks marked reviewed: true.")
    ] = False


@dataclass(frozen=True)
class NightReplay(FlagRecord):
    """What the replays run on: a model (at an API base) or the user's agent CLI."""

    model: Annotated[
        str | None,
        typer.Option(
            "--model",
            help="Replay on this model (default: sleep.json's replay, else local/smollm2-135m).",
        ),
    ] = None
    replay_agent: ReplayAgentOpt = None
    agent_timeout: Annotated[
        float, typer.Option("--agent-timeout", min=1.0, help="Seconds per agent replay.")
    ] = 600.0
    agent_usd_per_run: Annotated[
        float | None,
        typer.Option(
            "--agent-usd-per-run",
            min=0.0,
            help="Declared worst-case USD of one agent replay (needed with --max-usd).",
        ),
    ] = None
    api_base: Annotated[
        str | None,
        typer.Option(
            "--api-base",
            envvar=API_BASE_ENV,
            help="URL of the server the replay model runs on (with --model openai/<name>).",
        ),
    ] = None

    def agent_settings(self) -> AgentSettings | None:
        """`--replay-agent` with its timeout and declared price (None: replay on a model)."""
        if self.replay_agent is None:
            return None
        return settings_from(
            check_replay_agent(self.replay_agent, "--replay-agent"),
            timeout_s=self.agent_timeout,
            max_usd_per_run=self.agent_usd_per_run,
        )


@dataclass(frozen=True)
class NightLimits(FlagRecord):
    """The optimizer model (mining, proposing, judging rubrics) and the night's limits."""

    optimizer_model: OptimizerModelOpt = None
    optimizer_api_base: OptimizerApiBaseOpt = None
    max_calls: MaxCallsOpt = None
    max_tokens: MaxTokensOpt = None
    max_usd: MaxUsdOpt = None

    def budget(self) -> Budget | None:
        """The night's budget (None: no limit given)."""
        return night_budget(self.max_calls, self.max_tokens, self.max_usd)


@dataclass(frozen=True)
class NightSearch(FlagRecord):
    """How the night searches and judges: the optimizer's epochs and batch, the gate, the
    judge, the seed and threads, dreams and the cross-night memory."""

    no_regression: Annotated[
        bool, typer.Option("--no-regression", help="Reject a candidate worse on any val task.")
    ] = False
    judge: Annotated[str, typer.Option("--judge", help="soft (share of checks) or hard.")] = "soft"
    no_rubric: Annotated[bool, typer.Option("--no-rubric", help="Do not judge rubrics.")] = False
    epochs: Annotated[int, typer.Option("--epochs", min=1, help="Optimizer epochs.")] = 1
    batch_size: Annotated[
        int,
        typer.Option(
            "--batch-size",
            min=1,
            help="Training tasks per optimizer step; larger means fewer gate decisions, each "
            "tested with more of the night's significance.",
        ),
    ] = 8
    gate_kind: Annotated[
        str,
        typer.Option(
            "--gate",
            help="paired (default: a paired significance test, noise-safe) or mean-only "
            "(any strict mean gain passes: on few val tasks a useless edit passes often).",
        ),
    ] = "paired"
    seed: Annotated[int, typer.Option("--seed")] = 0
    threads: Annotated[int, typer.Option("--threads", min=1)] = 4
    # -- dreams and cross-night memory (issue 26; skillopt_dsl.sleep.dreams / .rejections) --
    dream_variants: Annotated[
        int,
        typer.Option(
            "--dream-variants",
            min=0,
            help="Reworded copies of each training task (training only; 0 = off).",
        ),
    ] = 0
    contrastive: Annotated[
        bool,
        typer.Option("--contrastive", help="Show the optimizer GOOD/BAD reply pairs per task."),
    ] = False
    remember_rejected: Annotated[
        bool,
        typer.Option(
            "--remember-rejected",
            help="Never propose again an edit an earlier night's gate rejected.",
        ),
    ] = False

    def gate(self) -> Gate | None:
        """`--gate`: None for the default gate (paired test), `Gate.mean_only()` for mean-only."""
        if self.gate_kind == "paired":
            return None
        if self.gate_kind == "mean-only":
            return Gate.mean_only()
        raise SleepError(f"--gate must be paired or mean-only, got {self.gate_kind!r}")

    def optimizer(self) -> Optimizer:
        """The night's search: compile's default (`compile.default_optimizer()`, the module's
        own default: the night's replay modules declare no proposers of their own) with
        `--epochs` and `--batch-size` set on its GradientText."""
        from skillopt_dsl.compile import default_optimizer
        from skillopt_dsl.optimizers import GradientText, HandOff

        chosen = default_optimizer()
        first = chosen.first if isinstance(chosen, HandOff) else chosen
        if not isinstance(first, GradientText):
            raise SleepError(f"--epochs and --batch-size do not apply to {type(chosen).__name__}")
        first = replace(first, epochs=self.epochs, batch_size=self.batch_size)
        return replace(chosen, first=first) if isinstance(chosen, HandOff) else first

    def judge_mode(self) -> Literal["soft", "hard"]:
        """`--judge`: soft or hard (anything else is refused)."""
        if self.judge == "soft":
            return "soft"
        if self.judge == "hard":
            return "hard"
        raise SleepError(f"--judge must be soft or hard, got {self.judge!r}")


def night_config(
    reads: NightReads,
    replay: NightReplay,
    limits: NightLimits,
    search: NightSearch,
    *,
    auto_adopt: bool,
    describe: tuple[Path, ...],
) -> SleepConfig:
    """The night `sleep run` asked for, from its flag records."""
    return SleepConfig(
        project=reads.project,
        source=reads.source,
        home=reads.home or Path.home(),
        agent=None if reads.agent is None else check_agent(reads.agent, "--agent"),
        skill_file=reads.skill_file,
        lm=at_api_base(replay.model, replay.api_base),
        replay_agent=replay.agent_settings(),
        optimizer_lm=optimizer_lm(limits.optimizer_model, limits.optimizer_api_base),
        budget=limits.budget(),
        optimizer=search.optimizer(),
        gate=search.gate(),
        no_regression=search.no_regression,
        auto_adopt=auto_adopt,
        judge_mode=search.judge_mode(),
        rubric_judge=not search.no_rubric,
        mine_with_model=not reads.heuristic_only,
        tasks=reads.tasks,
        reviewed_only=reads.reviewed_only,
        seed=search.seed,
        threads=search.threads,
        dream_variants=search.dream_variants,
        contrastive=search.contrastive,
        remember_rejected=search.remember_rejected,
        describe=describe,
    )
