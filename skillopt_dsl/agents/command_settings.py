"""The keywords of `CommandAgent(argv=..., ...)`, as one frozen record (see `CommandAgent`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, TypedDict

from skillopt_dsl.export import SkillLayout

__all__ = ["DEFAULT_ENV_ALLOWLIST", "CommandAgentOptions", "CommandAgentSettings", "OutputFormat"]

OutputFormat = Literal["json", "jsonl", "text"]

DEFAULT_ENV_ALLOWLIST: tuple[str, ...] = ("PATH", "LANG", "LC_ALL", "TZ", "TERM")
"""Environment variables passed to the child by default; nothing else leaks (add the agent's
own key, e.g. `ANTHROPIC_API_KEY`, explicitly)."""


@dataclass(frozen=True, kw_only=True)
class CommandAgentSettings:
    """The optional keywords of `CommandAgent(argv=..., ...)` with their defaults (see
    `CommandAgent` for each one)."""

    output: OutputFormat = "json"
    layout: SkillLayout = "claude"
    skill_name: str = "skill"
    timeout_s: float = 600.0
    env_allowlist: Sequence[str] = DEFAULT_ENV_ALLOWLIST
    env: Mapping[str, str] | None = None
    check: Sequence[str] | None = None
    check_timeout_s: float = 120.0
    max_usd_per_run: float | None = None


class CommandAgentOptions(TypedDict, total=False):
    """`CommandAgentSettings` as keywords: what `CommandAgent(argv=..., **options)` accepts."""

    output: OutputFormat
    layout: SkillLayout
    skill_name: str
    timeout_s: float
    env_allowlist: Sequence[str]
    env: Mapping[str, str] | None
    check: Sequence[str] | None
    check_timeout_s: float
    max_usd_per_run: float | None
