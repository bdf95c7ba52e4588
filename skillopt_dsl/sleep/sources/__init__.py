"""The transcript sources: one file per agent format, one small base, one registry.

- `base.Source`: the contract (`name`, `folders`, `files`, `read`);
- `claude_code.ClaudeCodeSource`, `codex.CodexSource`, `generic_jsonl.GenericJsonlSource`;
- `registry`: `SOURCES`, `register_source`, `source_choices` and `make_sources`; registering a
  source once puts it in `--source`'s choices and in every message that lists sources;
- `reading`: what the JSONL readers share (lines, times, tool inputs and outputs).

The shipped contract suite is `skillopt_dsl.testing.SourceContract`.
"""

from skillopt_dsl.sleep.sources.base import Source
from skillopt_dsl.sleep.sources.claude_code import (  # the prefixes: as before the split
    _CLAUDE_COMMAND_PREFIXES as _CLAUDE_COMMAND_PREFIXES,
)
from skillopt_dsl.sleep.sources.claude_code import (
    _CLAUDE_META_PREFIXES as _CLAUDE_META_PREFIXES,
)
from skillopt_dsl.sleep.sources.claude_code import (
    _CLAUDE_NOTICE_PREFIXES as _CLAUDE_NOTICE_PREFIXES,
)
from skillopt_dsl.sleep.sources.claude_code import ClaudeCodeSource, slash_command
from skillopt_dsl.sleep.sources.codex import _CODEX_INJECTED as _CODEX_INJECTED
from skillopt_dsl.sleep.sources.codex import CodexSource
from skillopt_dsl.sleep.sources.generic_jsonl import GenericJsonlSource
from skillopt_dsl.sleep.sources.registry import (
    AUTO,
    SOURCES,
    make_sources,
    register_source,
    source_choices,
)

__all__ = [
    "AUTO",
    "SOURCES",
    "ClaudeCodeSource",
    "CodexSource",
    "GenericJsonlSource",
    "Source",
    "make_sources",
    "register_source",
    "slash_command",
    "source_choices",
]
