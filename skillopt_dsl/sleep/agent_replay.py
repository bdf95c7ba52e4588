"""Replays through the user's own coding agent (`claude -p`, `codex exec`) in a copy of the project.

`AgentReplay` is the night's module when replays run through an agent CLI instead of a model;
which command each agent runs is its source's `replay_command` (`skillopt_dsl.sleep.sources`),
so every registered source that declares one can run the replays.
Each task runs the library's `CommandAgent` once: a fresh temporary workspace holds a copy of
the project's text files (`.git`, `.skillopt`, virtual environments, `node_modules` and files
over 64 KB left out) with the *candidate* memory file (and skill file) written in, the agent
gets the task's request as its prompt (opened by the replay marker), and its final answer is
judged like any replay (`TaskJudge`). The candidate memory file is also installed as
`AGENTS.md`, where `CommandAgent` puts a skill: for Codex that is its memory file; for Claude
Code (which reads `CLAUDE.md`) a project's own `AGENTS.md` is replaced in the copy by the
candidate `CLAUDE.md` text.

The child runs with its own `HOME` and `TMPDIR` inside the temporary root, so its transcript is
never written into the user's agent history, and only allow-listed environment variables reach
it (add the agent's API key variable with `env` in `sleep.json`'s `replay`). Each run is one
call on the night's ledger (its reported tokens and cost included) and is killed at its
timeout. The model passed to `compile` for these runs is `AgentRunsOnly`, which refuses to be
called: every reply comes from the agent CLI.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from skillopt_dsl.agents.command import DEFAULT_ENV_ALLOWLIST, CommandAgent, OutputFormat
from skillopt_dsl.errors import ModelError
from skillopt_dsl.lm.base import Completion, Message, SamplingParams
from skillopt_dsl.module import RunOutcome
from skillopt_dsl.skill import Skill
from skillopt_dsl.sleep.harvest import REPLAY_MARKER
from skillopt_dsl.sleep.judge import ScoreBook, TaskJudge
from skillopt_dsl.sleep.replay import Replay
from skillopt_dsl.sleep.sources.registry import SOURCES, check_replay_agent, replay_command
from skillopt_dsl.sleep.transcript import AgentName
from skillopt_dsl.types import Example

if TYPE_CHECKING:
    from skillopt_dsl.lm import LM
    from skillopt_dsl.sleep.live import LiveFiles

__all__ = ["AgentReplay", "AgentRunsOnly", "AgentSettings", "project_files"]

_SKIP_DIRS = frozenset(
    {
        ".git",
        ".skillopt",
        ".venv",
        "venv",
        "node_modules",
        "__pycache__",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        "dist",
        "build",
        ".tox",
    }
)
MAX_FILE_BYTES = 64_000
MAX_TOTAL_BYTES = 4_000_000


@dataclass(frozen=True)
class AgentSettings:
    """How replays run through an agent CLI (from `sleep.json`'s `replay`, or `--replay-agent`).

    Attributes:
        agent: the agent whose CLI runs the replays: a registered source with a
            `replay_command` (`claude` runs `claude -p`, `codex` runs `codex exec`); another
            name is a `SleepError` listing them.
        argv: a command template instead of the default (`{prompt}` is the task).
        timeout_s: each run's wall-clock limit; the process group is killed past it.
        env: names of environment variables passed to the agent besides the defaults and the
            agent's API key variables.
        max_usd_per_run: the declared worst-case price of one run, in USD; required when the
            night has a dollar budget (an agent run cannot be priced before it runs), and
            charged for a run that reports no cost.
    """

    agent: AgentName
    argv: tuple[str, ...] | None = None
    timeout_s: float = 600.0
    env: tuple[str, ...] = ()
    max_usd_per_run: float | None = None

    def __post_init__(self) -> None:
        check_replay_agent(self.agent)

    def command_agent(self, judge: TaskJudge) -> CommandAgent:
        """The `CommandAgent` that runs one replay (a missing CLI is an error before any spend)."""
        command = replay_command(self.agent)
        return CommandAgent(
            argv=self.argv or command.argv,
            metric=judge,
            output=command.output,
            layout="agents-md",
            timeout_s=self.timeout_s,
            env_allowlist=(*DEFAULT_ENV_ALLOWLIST, *command.key_env, *self.env),
            max_usd_per_run=self.max_usd_per_run,
        )


def project_files(root: Path) -> dict[str, str]:
    """The project's text files (relative path -> text) for a replay's workspace copy."""
    files: dict[str, str] = {}
    total = 0
    for folder, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS)
        for name in sorted(names):
            path = Path(folder) / name
            if path.is_symlink() or not path.is_file() or path.stat().st_size > MAX_FILE_BYTES:
                continue
            try:
                text = path.read_text(encoding="utf-8")
            except (UnicodeDecodeError, OSError):
                continue
            total += len(text)
            if total > MAX_TOTAL_BYTES:
                return files
            files[path.relative_to(root).as_posix()] = text
    return files


class AgentRunsOnly:
    """The model `compile` is given when replays run through an agent CLI: calling it is a bug."""

    @property
    def model(self) -> str:
        """The name shown in reports."""
        return "agent-cli/replay"

    def generate(self, messages: list[Message], params: SamplingParams) -> Completion:
        """Refuse: every replay's answer comes from the agent CLI, never from this model."""
        raise ModelError("replays run through the agent CLI; nothing may call this model")


class AgentReplay(Replay):
    """Replay each task through the user's agent CLI in a copy of the project (module docstring)."""

    def __init__(
        self,
        *,
        skill: Skill,
        judge: TaskJudge,
        book: ScoreBook,
        live: LiveFiles,
        settings: AgentSettings,
        files: Mapping[str, str] | None = None,
        contrastive: bool = False,
    ) -> None:
        super().__init__(skill=skill, judge=judge, book=book, contrastive=contrastive)
        self.live = live
        self.settings = settings
        self.agent = settings.command_agent(judge)
        self._files = dict(files if files is not None else project_files(live.project.path))

    def workspace(self, skill: Skill) -> tuple[dict[str, str], Skill]:
        """The workspace files under `skill` (candidate live files written in) and the
        memory file's text, installed as `AGENTS.md` by `CommandAgent`."""
        files = dict(self._files)
        for rel, data in self.live.proposals(skill).items():
            files[rel] = data.decode("utf-8")
        memory = files.get(self.live.memory_rel, "")
        return files, Skill(memory)

    def run(self, skill: Skill, example: Example, lm: LM, *, seed: int) -> RunOutcome:
        """One agent run on the task; the answer is judged like a model's reply."""
        self.judge.bind(lm.ledger)
        files, memory = self.workspace(skill)
        task = _request(example)
        inputs = {"task": f"{REPLAY_MARKER}\n{task}", "files": files}
        outcome = self.agent.run(memory, Example(example.id, inputs, example.labels), lm, seed=seed)
        prediction, trace = self.parse(outcome.output), {"skill_hash": skill.hash}
        return replace(outcome, prediction=prediction, cached=False, calls=1, trace=trace)


def _request(example: Example) -> str:
    context = str(example.inputs.get("context") or "").strip()
    request = str(example.inputs.get("request") or "").strip()
    return f"{request}\n\nContext: {context}" if context else request


def settings_from(
    agent: AgentName,
    *,
    argv: Sequence[str] | None = None,
    timeout_s: float = 600.0,
    env: Sequence[str] = (),
    max_usd_per_run: float | None = None,
) -> AgentSettings:
    """`AgentSettings` from plain values (the CLI and `sleep.json` build them this way)."""
    return AgentSettings(
        agent, tuple(argv) if argv else None, timeout_s, tuple(env), max_usd_per_run
    )


def __getattr__(name: str) -> object:
    """`AGENT_COMMANDS`, deprecated: each source's `replay_command` is the one place now."""
    if name != "AGENT_COMMANDS":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    warnings.warn(
        "skillopt_dsl.sleep.agent_replay.AGENT_COMMANDS is deprecated; use "
        "skillopt_dsl.sleep.sources.replay_command(agent)",
        DeprecationWarning,
        stacklevel=2,
    )
    commands: dict[str, tuple[tuple[str, ...], OutputFormat, tuple[str, ...]]] = {}
    for agent, cls in SOURCES.items():
        if cls.replay_command is not None:
            command = cls.replay_command
            commands[agent] = (command.argv, command.output, command.key_env)
    return commands
