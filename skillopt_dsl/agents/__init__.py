"""Agent targets: tool-using multi-turn modules, environments, and agent-CLI harness targets.

- `AgentModule`: a `SkillModule` whose examples run as a loop of model calls and tool calls
  (tools are typed Python functions; see `Tool`), over the text protocol or native tool calling
  (`NativeToolBackend`); its trace is a `Trajectory`.
- `Environment`: per example a fresh state, the tools bound to it, and a check of the final state.
- `CommandAgent`: each example runs an external agent CLI (Claude Code, Codex) in a temporary
  workspace with the skill installed where it reads it; its trace is a `HarnessRun`.
- `ToolDemonstrationsProposer`: worked examples that show the tool-call format.

All of them plug into the same seam (`SkillModule.run` / `score`): every optimizer, the gate, the
budget and the run directory treat them like any other module.
"""

from skillopt_dsl.agents.command import (
    DEFAULT_ENV_ALLOWLIST,
    CheckResult,
    CommandAgent,
    CommandAgentOptions,
    CommandAgentSettings,
    HarnessRun,
    WorkspaceDiff,
)
from skillopt_dsl.agents.demos import ToolDemonstrationsProposer
from skillopt_dsl.agents.environment import Environment
from skillopt_dsl.agents.module import AgentModule
from skillopt_dsl.agents.native import NativeToolBackend
from skillopt_dsl.agents.protocol import ToolRequest, parse_tool_calls
from skillopt_dsl.agents.tools import Tool, ToolResult, tool
from skillopt_dsl.agents.trajectory import ToolCall, Trajectory, Turn

__all__ = [
    "DEFAULT_ENV_ALLOWLIST",
    "AgentModule",
    "CheckResult",
    "CommandAgent",
    "CommandAgentOptions",
    "CommandAgentSettings",
    "Environment",
    "HarnessRun",
    "NativeToolBackend",
    "Tool",
    "ToolCall",
    "ToolDemonstrationsProposer",
    "ToolRequest",
    "ToolResult",
    "Trajectory",
    "Turn",
    "WorkspaceDiff",
    "parse_tool_calls",
    "tool",
]
