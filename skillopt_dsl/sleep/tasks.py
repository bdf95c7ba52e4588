"""Mined tasks: typed records with rule checks and/or a rubric, stable hashed splits, and their
storage as a Hugging Face `Dataset` (plus a `tasks.jsonl` copy to review and edit).

A rule check is one of `contains`, `not_contains`, `regex`, `max_chars`, `section_present`,
`no_refusal`; any other `kind` (or a stray field, or a regex that does not compile) is a
validation error, never a check that passes. Every check may carry `source`: where it was mined
from, as `transcript-path:line` (checks mined from a session's evidence always do; see
`skillopt_dsl.sleep.evidence`). A task's `evidence` lists what was seen there (`Evidence`).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Annotated, Literal

import pydantic
from pydantic import BaseModel, ConfigDict, Field

from skillopt_dsl.data import Splits
from skillopt_dsl.json_types import JSONObject
from skillopt_dsl.sleep.errors import SleepError
from skillopt_dsl.types import Example

__all__ = [
    "DEFAULT_FRACTIONS",
    "Check",
    "Evidence",
    "EvidenceKind",
    "SplitFractions",
    "SplitName",
    "Task",
    "assign_split",
    "check_passes",
    "load_tasks",
    "save_tasks",
    "split_bucket",
    "task_id",
    "to_splits",
]

SplitName = Literal["train", "val", "test"]


class _CheckBase(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    source: str | None = None
    """Where the check was mined from: `transcript-path:line` (None: written by a model or a
    person). Never part of what is judged."""

    def describe(self) -> str:
        """One line naming the check, for feedback and reports (without its source)."""
        shown = self.model_dump(exclude_defaults=True, exclude={"source"})
        fields = " ".join(f"{k}={v!r}" if k != "value" else repr(v) for k, v in shown.items())
        return f"{self.model_dump()['kind']} {fields}".strip()


class Contains(_CheckBase):
    """The reply contains `value` (case-insensitive unless `case_sensitive`)."""

    kind: Literal["contains"] = "contains"
    value: str = Field(min_length=1)
    case_sensitive: bool = False


class NotContains(_CheckBase):
    """The reply does not contain `value` (case-insensitive unless `case_sensitive`)."""

    kind: Literal["not_contains"] = "not_contains"
    value: str = Field(min_length=1)
    case_sensitive: bool = False


class Regex(_CheckBase):
    """The reply matches `pattern` (Python `re.search`, multiline)."""

    kind: Literal["regex"] = "regex"
    pattern: str = Field(min_length=1)

    @pydantic.field_validator("pattern")
    @classmethod
    def _compiles(cls, value: str) -> str:
        try:
            re.compile(value)
        except re.error as exc:
            raise ValueError(f"the regex does not compile: {exc}") from exc
        return value


class MaxChars(_CheckBase):
    """The reply is at most `limit` characters long."""

    kind: Literal["max_chars"] = "max_chars"
    limit: int = Field(gt=0)


class SectionPresent(_CheckBase):
    """The reply has a section titled `heading` (a markdown heading or a `Heading:` line)."""

    kind: Literal["section_present"] = "section_present"
    heading: str = Field(min_length=1)


class NoRefusal(_CheckBase):
    """The reply does not refuse the task."""

    kind: Literal["no_refusal"] = "no_refusal"


Check = Annotated[
    Contains | NotContains | Regex | MaxChars | SectionPresent | NoRefusal,
    Field(discriminator="kind"),
]
"""One rule check; the `kind` field picks the type."""

_REFUSAL = re.compile(
    r"(?i)\b(?:i\s+(?:can(?:no|')t|cannot|am\s+unable\s+to|won't)\s+(?:help|assist|do|comply)"
    r"|i'?m\s+(?:sorry|unable)[^.\n]{0,40}\b(?:can(?:no|')t|cannot|unable)"
    r"|as\s+an\s+ai\b)"
)


def check_key(check: Check) -> str:
    """What a check tests, without its source (two sessions' same check are one check)."""
    return json.dumps(check.model_dump(exclude={"source"}), sort_keys=True).casefold()


EvidenceKind = Literal[
    "correction",
    "interrupt",
    "rejection",
    "revert",
    "hook",
    "quoted",
    "failed_then_fixed",
    "end_state",
    "compaction",
]


class Evidence(BaseModel):
    """What a session showed, behind one or more of a task's checks.

    `source` is the transcript line it was read from (`path:line`); `quote` the redacted text
    there; `rejected` and `accepted` the lines of the agent's attempt the user turned down (it
    fails the checks mined from this evidence) and of the attempt that followed (it passes them),
    when the session has them.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: EvidenceKind
    source: str = Field(min_length=1)
    quote: str = ""
    rejected: str | None = None
    accepted: str | None = None


def check_passes(check: Check, reply: str) -> bool:
    """Whether `reply` satisfies one rule check."""
    if isinstance(check, Contains | NotContains):
        hay, needle = (
            (reply, check.value)
            if check.case_sensitive
            else (reply.casefold(), check.value.casefold())
        )
        return (needle in hay) == isinstance(check, Contains)
    if isinstance(check, Regex):
        return re.search(check.pattern, reply, re.MULTILINE) is not None
    if isinstance(check, MaxChars):
        return len(reply) <= check.limit
    if isinstance(check, SectionPresent):
        title = re.escape(check.heading.strip().strip("#").strip())
        pattern = rf"(?im)^\s*(?:#{{1,6}}\s*{title}\s*$|\**{title}\**\s*:)"
        return re.search(pattern, reply) is not None
    return _REFUSAL.search(reply) is None


class Task(BaseModel):
    """One checkable task mined from the user's sessions.

    `checks` and `rubric` say what a good reply is (at least one of them is required); `weight`
    is how many sessions asked for it (recurring tasks weigh more); `reviewed` is set by a
    person who checked the task; `reference` is the reply the user accepted, when there was one;
    `evidence` is what the session showed behind its mined checks (each check's `source` names
    the same transcript line).
    """

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1)
    project: str
    intent: str = Field(min_length=1)
    context: str = ""
    checks: list[Check] = Field(default_factory=list)
    rubric: str | None = None
    outcome: Literal["resolved", "unresolved", "unknown"] = "unknown"
    reference: str | None = None
    source_sessions: list[str] = Field(default_factory=list)
    split: SplitName = "train"
    weight: int = Field(default=1, ge=1)
    origin: Literal["model", "heuristic", "edited"] = "heuristic"
    reviewed: bool = False
    evidence: list[Evidence] = Field(default_factory=list)

    @pydantic.model_validator(mode="after")
    def _checkable(self) -> Task:
        if not self.checks and not (self.rubric and self.rubric.strip()):
            raise ValueError("a task needs at least one rule check or a rubric")
        return self

    def to_row(self) -> JSONObject:
        """A flat row for the dataset (checks as a JSON string, so every row has one schema)."""
        row = self.model_dump(mode="json")
        row["checks"] = json.dumps(row["checks"], ensure_ascii=False)
        row["evidence"] = json.dumps(row["evidence"], ensure_ascii=False)
        return row

    @classmethod
    def from_row(cls, row: JSONObject) -> Task:
        """Rebuild a task from `to_row` output (or a hand-edited tasks.jsonl line)."""
        data = dict(row)
        for name in ("checks", "evidence"):
            value = data.get(name)
            if isinstance(value, str):
                data[name] = json.loads(value)
        return cls.model_validate(data)


def task_id(project: str, intent: str) -> str:
    """A stable id from the project's folder name and the whitespace/case-normalised intent
    (the same on every machine the project is checked out on)."""
    name = project.rstrip("/").rsplit("/", 1)[-1]
    norm = " ".join(intent.split()).casefold()
    return hashlib.sha256(f"{name}\n{norm}".encode()).hexdigest()[:16]


SplitFractions = tuple[float, float, float]
DEFAULT_FRACTIONS: SplitFractions = (0.4, 0.4, 0.2)
"""train / val / test shares of the hashed splits unless a night says otherwise."""


def split_bucket(identifier: str) -> float:
    """Where the id's hash falls in [0, 1): train below the train share, then val, then test."""
    return int(hashlib.sha256(identifier.encode()).hexdigest()[:8], 16) / 16**8


def assign_split(identifier: str, fractions: SplitFractions = DEFAULT_FRACTIONS) -> SplitName:
    """train / val / test from the id's hash alone: a task never changes split between nights
    (`skillopt_dsl.sleep.splits.balance_splits` then spreads the tasks a reply can fail)."""
    if any(f < 0 for f in fractions) or abs(sum(fractions) - 1.0) > 1e-9:
        raise SleepError(f"split fractions must be >= 0 and sum to 1, got {fractions}")
    bucket = split_bucket(identifier)
    if bucket < fractions[0]:
        return "train"
    return "val" if bucket < fractions[0] + fractions[1] else "test"


def to_example(task: Task) -> Example:
    """The task as an `Example`: inputs `context` and `request`; labels: `response` (the
    accepted reply, else what a good reply satisfies), the checks, the rubric and `accepted`
    (the reply the user accepted, "" when none)."""
    return Example(
        id=task.id,
        inputs={"context": task.context, "request": task.intent},
        labels={
            "response": task.reference or _expected(task),
            "checks": json.dumps(
                [c.model_dump(exclude={"source"}) for c in task.checks], ensure_ascii=False
            ),
            "rubric": task.rubric or "",
            "accepted": task.reference or "",
        },
    )


def _expected(task: Task) -> str:
    parts = [c.describe() for c in task.checks]
    if task.rubric:
        parts.append(f"rubric: {task.rubric}")
    return "A reply that satisfies: " + "; ".join(parts)


def to_splits(tasks: Sequence[Task]) -> Splits:
    """Examples by each task's split; recurring tasks repeat in train (up to 3 times)."""
    train: list[Example] = []
    for task in (t for t in tasks if t.split == "train"):
        base = to_example(task)
        train.append(base)
        for copy in range(2, min(task.weight, 3) + 1):
            train.append(Example(f"{task.id}~{copy}", base.inputs, base.labels))
    val = [to_example(t) for t in tasks if t.split == "val"]
    test = [to_example(t) for t in tasks if t.split == "test"]
    return Splits(train, val, test)


def save_tasks(tasks: Iterable[Task], folder: Path) -> Path:
    """Write the tasks as a Hugging Face `Dataset` at `folder/tasks` (checks as a JSON string,
    one schema for every row) and as `folder/tasks.jsonl` (checks as JSON objects)."""
    from datasets import Dataset

    tasks = list(tasks)
    rows = [t.to_row() for t in tasks]
    columns = list(Task.model_fields)
    dataset = Dataset.from_list(rows) if rows else Dataset.from_dict({c: [] for c in columns})
    dataset.save_to_disk(str(folder / "tasks"))
    with (folder / "tasks.jsonl").open("w", encoding="utf-8") as handle:
        for task in tasks:  # checks as plain JSON objects, for a person to read and edit
            handle.write(json.dumps(task.model_dump(mode="json"), ensure_ascii=False) + "\n")
    return folder / "tasks"


def load_tasks(path: Path, *, reviewed_only: bool = False) -> list[Task]:
    """Tasks from a saved dataset folder or a tasks.jsonl file (edited by hand, say).

    An invalid row (an unknown check kind, say) is an error naming the row, never skipped.
    """
    rows = _rows(path)
    tasks: list[Task] = []
    for index, row in enumerate(rows):
        try:
            tasks.append(Task.from_row(row))
        except (pydantic.ValidationError, json.JSONDecodeError) as exc:
            raise SleepError(f"{path}: task row {index} is invalid: {exc}") from None
    return [t for t in tasks if t.reviewed] if reviewed_only else tasks


def _rows(path: Path) -> list[JSONObject]:
    if path.is_file():
        lines = path.read_text(encoding="utf-8").splitlines()
        try:
            return [json.loads(line) for line in lines if line.strip()]
        except json.JSONDecodeError as exc:
            raise SleepError(f"{path} is not JSON lines: {exc}") from None
    if path.is_dir():
        from datasets import load_from_disk

        return [dict(row) for row in load_from_disk(str(path))]
    raise SleepError(f"no tasks at {path}; pass a night's tasks folder or a tasks.jsonl file")
