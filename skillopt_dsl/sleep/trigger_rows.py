"""Trigger rows: honest should-trigger labels for one skill, from the skill loads transcripts record.

A request is labelled only when the transcript shows the agent loading a skill for it
(`Source.skill_turns`; Claude Code's `Skill` tool call, see
`skillopt_dsl.sleep.sources.claude_code`): `should_trigger: true` when it loaded this skill,
`false` when it loaded another skill and not this one (a near miss another skill won). A request
with no skill load gets no row: nothing says whether the skill was needed there. Requests are
redacted as every harvest redacts them (the sources redact on reading), rows are deduplicated
by request, and a request seen with both labels is dropped and counted.

Read-only contract: the home is only read, through the sources (`harvest`'s contract). The rows
are written as the JSONL `skillopt_dsl.skill_folder.load_trigger_splits` reads.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypedDict

from skillopt_dsl.data import Splits, load_splits
from skillopt_dsl.errors import DataError
from skillopt_dsl.file_transaction import atomic_write_text
from skillopt_dsl.skill_folder import TRIGGER_SIZES, TriggerSizes
from skillopt_dsl.sleep.errors import SleepError
from skillopt_dsl.sleep.harvest import ProjectMatcher, is_own_replay
from skillopt_dsl.sleep.sources.base import SkillTurn, Source
from skillopt_dsl.sleep.transcript import HarvestStats, ReadCounts, Session

__all__ = [
    "TriggerRow",
    "TriggerRows",
    "TriggerRowsRecord",
    "names_skill",
    "trigger_rows",
    "trigger_splits",
    "write_trigger_rows",
]


class TriggerRowsRecord(TypedDict):
    """`TriggerRows.to_dict()`: what `sleep trigger-rows --json` prints besides the path."""

    skill: str
    rows: int
    should_trigger: int
    should_not_trigger: int
    sessions: int
    requests: int
    unlabelled: int
    duplicates: int
    conflicts: int
    redactions: int
    sources_read: list[str]
    sources_without_loads: list[str]


@dataclass(frozen=True)
class TriggerRow:
    """One labelled request (`{"request", "should_trigger"}` in the JSONL)."""

    request: str
    should_trigger: bool

    def to_dict(self) -> dict[str, str | bool]:
        """The JSONL row."""
        return {"request": self.request, "should_trigger": self.should_trigger}


@dataclass
class TriggerRows:
    """The rows for one skill and what reading found (every request read is counted once:
    labelled, a duplicate, a conflict, or unlabelled for want of a load)."""

    skill: str
    rows: list[TriggerRow] = field(default_factory=list)
    sessions: int = 0
    requests: int = 0
    unlabelled: int = 0
    duplicates: int = 0
    conflicts: int = 0
    redactions: int = 0
    sources_read: list[str] = field(default_factory=list)
    sources_without_loads: list[str] = field(default_factory=list)

    @property
    def positives(self) -> int:
        """Rows labelled `should_trigger: true`."""
        return sum(row.should_trigger for row in self.rows)

    def to_dict(self) -> TriggerRowsRecord:
        """The counts as one JSON object."""
        return {
            "skill": self.skill,
            "rows": len(self.rows),
            "should_trigger": self.positives,
            "should_not_trigger": len(self.rows) - self.positives,
            "sessions": self.sessions,
            "requests": self.requests,
            "unlabelled": self.unlabelled,
            "duplicates": self.duplicates,
            "conflicts": self.conflicts,
            "redactions": self.redactions,
            "sources_read": list(self.sources_read),
            "sources_without_loads": list(self.sources_without_loads),
        }


def names_skill(loaded: str, skill: str) -> bool:
    """True when a loaded skill's name is `skill`, bare or as a plugin's (`plugin:skill`).

    >>> names_skill("docs:pdf", "pdf"), names_skill("pdf-forms", "pdf")
    (True, False)
    """
    return loaded == skill or loaded.endswith(":" + skill)


def _label(turn: SkillTurn, skill: str) -> bool | None:
    """True when `skill` was loaded, False when only others were, None when none was."""
    if not turn.skills:
        return None
    return any(names_skill(loaded, skill) for loaded in turn.skills)


def _own_sessions(
    source: Source, project: ProjectMatcher | None, found: TriggerRows
) -> list[Session]:
    """The user's own sessions of one source (no sub-agent, no Sleep replay), oldest first."""
    sessions: list[Session] = []
    for path in source.files(HarvestStats()):
        counts = ReadCounts()
        for session in source.read(path, counts):
            if session.subagent is not None or is_own_replay(session):
                continue
            if project is None or project.matches(session.cwd):
                sessions.append(session)
        found.redactions += sum(counts.redactions.values())
    return sorted(sessions, key=lambda s: (s.started, s.id))


def trigger_rows(
    sources: Sequence[Source], skill: str, *, project: ProjectMatcher | None = None
) -> TriggerRows:
    """The trigger rows for `skill` from every session of `sources` (of `project` when given);
    see the module docstring. Raises `SleepError` when `skill` is blank or no source records
    skill loads."""
    if not skill.strip():
        raise SleepError("--skill needs a skill name (the `name` in its SKILL.md front matter)")
    found = TriggerRows(skill.strip())
    readers = [s for s in sources if s.records_skill_loads]
    found.sources_without_loads = [s.name for s in sources if not s.records_skill_loads]
    if not readers:
        raise SleepError(
            f"{', '.join(found.sources_without_loads)} transcripts do not record which skill "
            "the agent loaded; read a source that does (--source claude)"
        )
    labels: dict[str, bool | None] = {}
    for source in readers:
        found.sources_read.append(source.name)
        for session in _own_sessions(source, project, found):
            found.sessions += 1
            for turn in source.skill_turns(session):
                _count(found, labels, turn)
    found.rows = [TriggerRow(r, label) for r, label in labels.items() if label is not None]
    return found


def _count(found: TriggerRows, labels: dict[str, bool | None], turn: SkillTurn) -> None:
    """Add one request's label to `labels` (None marks a conflict, dropped)."""
    found.requests += 1
    label = _label(turn, found.skill)
    request = turn.request.strip()
    if label is None or not request:
        found.unlabelled += 1
        return
    if request not in labels:
        labels[request] = label
    elif labels[request] == label:
        found.duplicates += 1
    elif labels[request] is not None:
        labels[request] = None
        found.conflicts += 1
    else:
        found.duplicates += 1


def write_trigger_rows(rows: Sequence[TriggerRow], path: Path) -> None:
    """Write `rows` as JSONL to `path`, atomically (a temporary file renamed over it)."""
    text = "".join(json.dumps(row.to_dict(), ensure_ascii=False) + "\n" for row in rows)
    atomic_write_text(path, text)


MORE_ROWS = (
    "to get more rows, use the skill (and its neighbours) in more sessions, read more of them "
    "(drop --project, --source auto, another --home), or write rows by hand and run "
    "skillopt-dsl compile --skill-folder PATH --trigger-data FILE"
)
"""What `trigger_splits` tells a user whose rows are refused, by default (a command's advice)."""


def trigger_splits(
    found: TriggerRows,
    *,
    seed: int = 0,
    sizes: TriggerSizes = TRIGGER_SIZES,
    advice: str = MORE_ROWS,
) -> Splits:
    """`found`'s rows cut into the seeded train/val/test splits `load_trigger_splits` makes of
    them once written. Raises `SleepError` (a `UserInputError`), with the counts and `advice`
    (what to do), when the rows hold only one label or are too few for non-empty train and
    val."""
    positives = found.positives
    counts = (
        f"{len(found.rows)} trigger row(s) for skill {found.skill!r} ({positives} should "
        f"trigger, {len(found.rows) - positives} should not)"
    )
    if positives in (0, len(found.rows)):
        raise SleepError(
            f"{counts} hold only one label, so no description can be measured against the "
            f"constant answers: {advice}"
        )
    try:
        return load_splits(
            [row.to_dict() for row in found.rows],
            input_fields=["request"],
            label_fields=["should_trigger"],
            seed=seed,
            sizes=sizes,
        )
    except DataError as error:
        reason = str(error).split("; ", 1)[0]  # what is empty, less the advice to edit sizes
        raise SleepError(
            f"{counts} are too few to split into train, validation and test ({reason}): {advice}"
        ) from error
