"""The agent formats: one file per format, one small base, one registry.

- `base.Source`: the contract (`name`, `folders`, `files`, `read`; optional `timeline`,
  `memory_file`, `replay_command`); `base.ReplayCommand`: an agent CLI that runs replays;
- `claude_code.ClaudeCodeSource`, `codex.CodexSource`, `generic_jsonl.GenericJsonlSource`: each
  owns its transcript reader, its timeline reader, its memory file and its replay command;
- `registry`: `SOURCES`, `register_source` and what is looked up by name (`source_choices`,
  `agent_choices`, `replay_choices`, `memory_files`, `make_sources`, ...); registering a source
  once puts it in `--source`'s choices (and, with a memory file or a replay command, in
  `--agent`'s and `--replay-agent`'s) and in every message that lists them;
- `reading`: what the JSONL transcript readers share; `steps`: what the timeline readers share.

The shipped contract suite is `skillopt_dsl.testing.SourceContract`.
"""

from skillopt_dsl.sleep.sources.base import ReplayCommand, SkillTurn, Source
from skillopt_dsl.sleep.sources.claude_code import ClaudeCodeSource, slash_command
from skillopt_dsl.sleep.sources.codex import CodexSource
from skillopt_dsl.sleep.sources.generic_jsonl import GenericJsonlSource
from skillopt_dsl.sleep.sources.registry import (
    AUTO,
    SOURCES,
    agent_choices,
    check_agent,
    check_replay_agent,
    make_sources,
    memory_files,
    register_source,
    replay_choices,
    replay_command,
    source_choices,
    source_for,
)

__all__ = [
    "AUTO",
    "SOURCES",
    "ClaudeCodeSource",
    "CodexSource",
    "GenericJsonlSource",
    "ReplayCommand",
    "SkillTurn",
    "Source",
    "agent_choices",
    "check_agent",
    "check_replay_agent",
    "make_sources",
    "memory_files",
    "register_source",
    "replay_choices",
    "replay_command",
    "slash_command",
    "source_choices",
    "source_for",
]
