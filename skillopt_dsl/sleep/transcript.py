"""The records a transcript source reads: turns, tool calls and outputs, sessions and counts.

These are the floor under both the sources (`skillopt_dsl.sleep.sources`, which produce them)
and the harvest (`skillopt_dsl.sleep.harvest`, which filters them); the harvest re-exports them.
A session's `Timeline` of `Step`s (each with the transcript line it came from) is what a source's
`timeline` reads for the evidence (`skillopt_dsl.sleep.timeline`).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Literal, TypedDict

from skillopt_dsl.agent_kinds import AgentName

__all__ = [
    "TOOL_INPUT_CHARS",
    "TOOL_OUTPUT_CHARS",
    "AgentName",
    "CountsRecord",
    "HarvestRecord",
    "HarvestStats",
    "HomeCountsRecord",
    "ReadCounts",
    "Session",
    "SessionRecord",
    "SessionRow",
    "Step",
    "StepKind",
    "Timeline",
    "ToolCall",
    "ToolOutput",
    "Turn",
    "attach_outputs",
    "cut",
    "merge_turns",
    "parse_timestamp",
]

logger = logging.getLogger(__name__)


TOOL_INPUT_CHARS = 500
"""How much of a tool call's input is kept (redacted, then cut)."""

TOOL_OUTPUT_CHARS = 600
"""How much of a tool call's output is kept (redacted, then cut to its head and its tail)."""


def cut(text: str, limit: int, *, keep_tail: bool = False) -> str:
    r"""`text` cut to at most `limit` characters: its head (`...` at the cut), or its head and
    tail around a `...` line when `keep_tail` (an error is usually at the end of an output).

    Always applied to text that is already redacted: a secret cut first would leave its
    prefix, too short to be recognised, in the kept text.

    >>> cut("abcdefghij", 7)
    'abcd...'
    >>> cut("abcdefghij", 9, keep_tail=True)
    'ab\n...\nij'
    """
    if len(text) <= limit:
        return text
    if not keep_tail:
        return text[: limit - 3] + "..."
    head = (limit - 5) // 2
    return text[:head] + "\n...\n" + text[len(text) - (limit - 5 - head) :]


@dataclass(frozen=True)
class ToolCall:
    """One tool call of a reply: the tool's name, its input (redacted, at most 500 chars) and,
    when the transcript holds it, what it returned.

    Attributes:
        name: the tool's name (`Bash`, `shell_command`, `apply_patch`, ...).
        input: the call's input as one line (redacted, then cut).
        output: the tool's output (redacted, then cut to its head and tail); "" when the
            transcript has none.
        failed: True when the tool reported an error (Claude `is_error`, a non-zero exit
            code), False when it reported success, None when the transcript does not say.
        exit_code: the command's exit code when the transcript states one.
        call_id: the transcript's id of the call (pairs it with its output).
    """

    name: str
    input: str = ""
    output: str = ""
    failed: bool | None = None
    exit_code: int | None = None
    call_id: str = ""


@dataclass(frozen=True)
class Turn:
    """One user prompt or one assistant reply (with the tool calls the reply made, each with
    its output when the transcript holds one)."""

    role: Literal["user", "assistant"]
    text: str
    timestamp: datetime
    calls: tuple[ToolCall, ...] = ()

    @property
    def tools(self) -> tuple[str, ...]:
        """The names of the tools the reply called, in order."""
        return tuple(c.name for c in self.calls)


@dataclass(frozen=True)
class ToolOutput:
    """What one tool call returned, as read (redacted) before it is paired with its call."""

    text: str
    failed: bool | None = None
    exit_code: int | None = None


def attach_outputs(turns: Iterable[Turn], outputs: Mapping[str, ToolOutput]) -> list[Turn]:
    """`turns` with each tool call given the output of the same `call_id` (when there is one)."""
    paired: list[Turn] = []
    for turn in turns:
        calls = tuple(
            replace(c, output=o.text, failed=o.failed, exit_code=o.exit_code)
            if (o := outputs.get(c.call_id)) is not None and c.call_id
            else c
            for c in turn.calls
        )
        paired.append(replace(turn, calls=calls) if calls != turn.calls else turn)
    return paired


class CountsRecord(TypedDict):
    """`ReadCounts.to_dict()`: what reading transcripts found, as a night's report stores it."""

    malformed_lines: int
    meta_prompts: int
    compact_summaries: int
    notices: int
    slash_commands: int
    queued_prompts: int
    tool_results: int
    injected_blocks: int
    mirrored_records: int
    sidechain_records: int
    malformed_examples: list[str]
    unknown_records: int
    unknown_types: dict[str, int]
    known_records: dict[str, int]
    redactions: dict[str, int]
    redactions_total: int


class HomeCountsRecord(TypedDict):
    """The home directory's figures in `HarvestRecord.home_wide`."""

    files_read: int
    sessions_read: int
    skipped: dict[str, int]
    malformed_lines: int
    unknown_records: int
    unknown_types: dict[str, int]
    redactions_total: int


class HarvestRecord(CountsRecord):
    """`HarvestStats.to_dict()`: the project's counts at the top level, the home's under
    `home_wide` (the `harvest` event and the night's report)."""

    sessions: int
    skipped: dict[str, int]
    home_wide: HomeCountsRecord


class SessionRecord(TypedDict):
    """`Session.to_dict()`: a session's ids and times (no text)."""

    id: str
    agent: str
    cwd: str
    path: str
    branch: str | None
    started: str
    ended: str
    turns: int


class SessionRow(TypedDict):
    """`Session.review_row()`: one line of `sessions.jsonl`."""

    id: str
    agent: str
    cwd: str
    started: str
    prompts: list[str]
    tool_calls: int
    assistant_chars: int


@dataclass
class ReadCounts:
    """What reading transcripts found, all counts (one file's, one session's, or a sum).

    Attributes:
        records: known record types read, by type name (`user`, `progress`, `event_msg`, ...).
        unknown: record types this version of Sleep does not know, by type name.
        malformed_lines: lines that are not JSON objects, or lack a usable timestamp.
        meta_prompts: user records that are not requests: `isMeta`, local-command output,
            caveats, interrupts, settings commands (`/model`, `/clear`, ...).
        compact_summaries: compaction summaries (Claude `isCompactSummary`, Codex `compacted`).
        notices: background-task notices (`<task-notification>`).
        slash_commands: requests given as slash commands, read from `<command-args>`.
        queued_prompts: prompts typed while the agent worked (Claude `queued_command`).
        tool_results: tool outputs read (each kept, redacted, with the call it answers).
        injected_blocks: harness-injected blocks dropped (Codex environment, AGENTS.md).
        mirrored_records: Codex `response_item` messages that mirror an `event_msg` turn.
        sidechain_records: sub-agent records inside a main transcript.
        redactions: secrets redacted, by kind.
    """

    records: Counter[str] = field(default_factory=Counter)
    unknown: Counter[str] = field(default_factory=Counter)
    malformed_lines: int = 0
    malformed_examples: list[str] = field(default_factory=list)
    meta_prompts: int = 0
    compact_summaries: int = 0
    notices: int = 0
    slash_commands: int = 0
    queued_prompts: int = 0
    tool_results: int = 0
    injected_blocks: int = 0
    mirrored_records: int = 0
    sidechain_records: int = 0
    redactions: Counter[str] = field(default_factory=Counter)

    def malformed(self, path: Path, line_no: int, why: str) -> None:
        """Count a malformed line (the first few are kept for the report)."""
        self.malformed_lines += 1
        if len(self.malformed_examples) < 5:
            self.malformed_examples.append(f"{path.name}:{line_no}: {why}")
        logger.warning("skipping malformed line %s:%d (%s)", path, line_no, why)

    def add(self, other: ReadCounts) -> None:
        """Add `other`'s counts to these."""
        for name in _INT_COUNTS:
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.records.update(other.records)
        self.unknown.update(other.unknown)
        self.redactions.update(other.redactions)
        room = 5 - len(self.malformed_examples)
        self.malformed_examples += other.malformed_examples[: max(room, 0)]

    @property
    def redactions_total(self) -> int:
        """Secrets redacted, all kinds."""
        return sum(self.redactions.values())

    @property
    def unknown_records(self) -> int:
        """Records of unknown types."""
        return sum(self.unknown.values())

    def to_dict(self) -> CountsRecord:
        """JSON-ready counts."""
        return {
            "malformed_lines": self.malformed_lines,
            "meta_prompts": self.meta_prompts,
            "compact_summaries": self.compact_summaries,
            "notices": self.notices,
            "slash_commands": self.slash_commands,
            "queued_prompts": self.queued_prompts,
            "tool_results": self.tool_results,
            "injected_blocks": self.injected_blocks,
            "mirrored_records": self.mirrored_records,
            "sidechain_records": self.sidechain_records,
            "malformed_examples": list(self.malformed_examples),
            "unknown_records": self.unknown_records,
            "unknown_types": dict(sorted(self.unknown.items())),
            "known_records": dict(sorted(self.records.items())),
            "redactions": dict(sorted(self.redactions.items())),
            "redactions_total": self.redactions_total,
        }


_INT_COUNTS = (
    "malformed_lines",
    "meta_prompts",
    "compact_summaries",
    "notices",
    "slash_commands",
    "queued_prompts",
    "tool_results",
    "injected_blocks",
    "mirrored_records",
    "sidechain_records",
)


@dataclass(frozen=True)
class Session:
    """One harvested, redacted session of one agent in one working directory.

    `counts` holds what reading its file found; `subagent` names the kind of sub-agent that
    ran it (a Codex `session_meta.source` of `{"subagent": ...}`), None for the user's own;
    `summaries` holds the session's compaction summaries (redacted), oldest first: what the
    agent said had been done when its context was compacted (they are not requests).
    """

    id: str
    agent: AgentName
    cwd: str
    path: Path
    turns: tuple[Turn, ...]
    branch: str | None = None
    counts: ReadCounts = field(default_factory=ReadCounts, compare=False, repr=False)
    subagent: str | None = None
    summaries: tuple[str, ...] = ()

    @property
    def started(self) -> datetime:
        """Time of the first turn."""
        return self.turns[0].timestamp

    @property
    def ended(self) -> datetime:
        """Time of the last turn."""
        return self.turns[-1].timestamp

    @property
    def prompts(self) -> list[str]:
        """The user's prompts, in order."""
        return [t.text for t in self.turns if t.role == "user"]

    @property
    def tool_calls(self) -> int:
        """How many tool calls the agent made."""
        return sum(len(t.calls) for t in self.turns)

    @property
    def assistant_chars(self) -> int:
        """How many characters of reply text the agent wrote."""
        return sum(len(t.text) for t in self.turns if t.role == "assistant")

    def to_dict(self) -> SessionRecord:
        """A JSON-ready summary (ids and times, no text)."""
        return {
            "id": self.id,
            "agent": self.agent,
            "cwd": self.cwd,
            "path": str(self.path),
            "branch": self.branch,
            "started": self.started.isoformat(),
            "ended": self.ended.isoformat(),
            "turns": len(self.turns),
        }

    def review_row(self) -> SessionRow:
        """One line of `sessions.jsonl`: what was read, prompts redacted and in order."""
        return {
            "id": self.id,
            "agent": self.agent,
            "cwd": self.cwd,
            "started": self.started.isoformat(),
            "prompts": self.prompts,
            "tool_calls": self.tool_calls,
            "assistant_chars": self.assistant_chars,
        }


StepKind = Literal[
    "prompt", "reply", "command", "edit", "result", "interrupt", "rejection", "hook", "compaction"
]
"""What one step of a timeline is (see `Step`)."""


@dataclass(frozen=True)
class Step:
    """One event of a session, with the transcript line it came from.

    Kinds: `prompt` (a request the user typed, as the harvest reads it), `reply` (assistant
    text), `command` (a shell command the agent ran; `call_id` links its result), `edit` (a file
    the agent wrote or patched; the text is the path relative to the session's folder), `result`
    (a shell command's outcome: `failed` and `exit_code` when known), `interrupt` (the user
    stopped the agent), `rejection` (the user refused a tool call; the text is what they said
    instead), `hook` (a hook of the user's that blocked the agent from stopping and said why)
    and `compaction` (a compaction summary's text). Every text is redacted.
    """

    kind: StepKind
    line: int
    text: str = ""
    call_id: str = ""
    failed: bool = False
    exit_code: int | None = None


@dataclass(frozen=True)
class Timeline:
    """A session's steps in file order; `cwd` is the session's working directory.

    `numbered` says what a step's `line` counts: the transcript file's lines (`line`, what the
    shipped sources read) or the session's turns (`turn`, the default timeline a source without
    a line-numbered reader gets from its turns)."""

    path: Path
    cwd: str
    steps: tuple[Step, ...]
    numbered: Literal["line", "turn"] = "line"

    def cite(self, line: int) -> str:
        """`path:line` of a transcript line (how evidence names its source); `path#turn-N`
        when the steps are numbered by turn."""
        return f"{self.path}:{line}" if self.numbered == "line" else f"{self.path}#turn-{line}"

    def results(self) -> dict[str, Step]:
        """Each command's result by call id (the first that says whether it failed)."""
        found: dict[str, Step] = {}
        for step in self.steps:
            if step.kind == "result" and step.call_id and step.call_id not in found:
                found[step.call_id] = step
        return found


@dataclass
class HarvestStats:
    """What a harvest read and skipped. Every figure is for the project's sessions, except
    those under `home`, which are for everything read under the home directory."""

    sessions: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    project: ReadCounts = field(default_factory=ReadCounts)
    files_read: int = 0
    home_sessions: int = 0
    home_skipped: Counter[str] = field(default_factory=Counter)
    home: ReadCounts = field(default_factory=ReadCounts)

    def to_dict(self) -> HarvestRecord:
        """JSON-ready figures: the project's at the top level, the home's under `home_wide`."""
        return {
            "sessions": self.sessions,
            "skipped": dict(sorted(self.skipped.items())),
            **self.project.to_dict(),
            "home_wide": {
                "files_read": self.files_read,
                "sessions_read": self.home_sessions,
                "skipped": dict(sorted(self.home_skipped.items())),
                "malformed_lines": self.home.malformed_lines,
                "unknown_records": self.home.unknown_records,
                "unknown_types": dict(sorted(self.home.unknown.items())),
                "redactions_total": self.home.redactions_total,
            },
        }


def parse_timestamp(value: object) -> datetime:
    """An ISO-8601 time with a zone (`Z` or an offset) as an aware datetime; else ValueError."""
    if not isinstance(value, str) or not value:
        raise ValueError(f"no timestamp ({value!r})")
    parsed = datetime.fromisoformat(value)
    if parsed.tzinfo is None:
        raise ValueError(f"timestamp {value!r} has no time zone")
    return parsed


def merge_turns(turns: Iterable[Turn]) -> tuple[Turn, ...]:
    """Consecutive assistant turns (one record per content block) merged into one reply."""
    merged: list[Turn] = []
    for turn in turns:
        if merged and turn.role == "assistant" and merged[-1].role == "assistant":
            last = merged[-1]
            text = "\n".join(t for t in (last.text, turn.text) if t)
            merged[-1] = Turn("assistant", text, last.timestamp, last.calls + turn.calls)
        else:
            merged.append(turn)
    return tuple(merged)
