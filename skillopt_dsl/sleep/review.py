"""The review folder, `<project>/.skillopt/sleep/review/`: the tasks a person checks before a
night trains on them, and the sessions they came from.

`sleep harvest` *merges* what it mines into the folder (`ReviewFolder.merge`): every row already
there is kept as it is (reviewed, edited or not), newly mined tasks are added, and a task the
user dropped is not added again; sessions already listed stay listed. `sleep review` lists the
tasks with their checks and accepts, drops or edits one (`accept`, `drop`, `edit`).

`tasks.jsonl` holds one task a line with its `checks` as plain JSON objects
(`{"kind": "max_chars", "limit": 120}`); the older form, `checks` as a JSON string inside the
line, is read too and rewritten as objects at the next change. `dropped.jsonl` lists the ids
of dropped tasks (with their intent, so a person can read it).
"""

from __future__ import annotations

import json
import typing
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pydantic

from skillopt_dsl.json_types import JSONObject
from skillopt_dsl.sleep.errors import SleepError
from skillopt_dsl.sleep.splits import balance_splits
from skillopt_dsl.sleep.tasks import (
    DEFAULT_FRACTIONS,
    Check,
    SplitFractions,
    Task,
    load_tasks,
    save_tasks,
)
from skillopt_dsl.sleep.transcript import SessionRow

__all__ = [
    "CHECK_FIELDS",
    "MergeReport",
    "ReviewFolder",
    "check_error",
    "parse_checks",
    "validate_task_rows",
]


def _check_models() -> list[type[pydantic.BaseModel]]:
    union = typing.get_args(Check)[0]
    return list(typing.get_args(union))


def _field_line(name: str, info: Any) -> str:
    kind = getattr(info.annotation, "__name__", str(info.annotation))
    limits = " > 0" if any(getattr(m, "gt", None) == 0 for m in info.metadata) else ""
    default = "required" if info.is_required() else f"default {info.default!r}"
    return f"{name} ({kind}{limits}, {default})"


_COMMON_FIELDS = ("kind", "source")
"""Fields every check has: its kind, and where it was mined from (never judged)."""

CHECK_FIELDS: dict[str, list[str]] = {
    str(model.model_fields["kind"].default): [
        _field_line(name, info)
        for name, info in model.model_fields.items()
        if name not in _COMMON_FIELDS
    ]
    for model in _check_models()
}
"""Each check kind and its own fields, as `name (type, required | default)` (docs and errors);
every kind also takes `source`."""

_CHECK = pydantic.TypeAdapter(Check)


def check_error(raw: object) -> str | None:
    """Why `raw` is not a valid check, naming the fields its kind takes; None when valid.

    >>> print(check_error({"kind": "max_chars", "value": "120"}))
    check {"kind": "max_chars", "value": "120"}: max_chars takes limit (int > 0, required); not value
    """
    try:
        _CHECK.validate_python(raw)
    except pydantic.ValidationError:
        pass
    else:
        return None
    shown = json.dumps(raw, ensure_ascii=False)
    given = raw if isinstance(raw, dict) else {}
    kind = given.get("kind")
    if kind not in CHECK_FIELDS:
        return f"check {shown}: unknown kind {kind!r}; the kinds are {', '.join(CHECK_FIELDS)}"
    fields = CHECK_FIELDS[str(kind)]
    takes = "; ".join(fields) if fields else "no other field"
    names = {line.split(" ", 1)[0] for line in fields}
    extra = sorted(str(k) for k in given if k not in _COMMON_FIELDS and k not in names)
    problem = f"; not {', '.join(extra)}" if extra else " (a value has the wrong type)"
    return f"check {shown}: {kind} takes {takes}{problem}"


def parse_checks(text: str) -> list[Check]:
    """Checks from JSON text: one object or a list of them; errors name the fields."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SleepError(f"checks must be JSON ({exc}): {text!r}") from None
    items = data if isinstance(data, list) else [data]
    errors = [e for e in (check_error(item) for item in items) if e is not None]
    if errors:
        raise SleepError("; ".join(errors))
    return [_CHECK.validate_python(item) for item in items]


def validate_task_rows(path: Path) -> None:
    """Raise a `SleepError` naming the row, the check and its fields for the first invalid
    check in a tasks.jsonl file (other row errors are left to `load_tasks`)."""
    if not path.is_file():
        return
    for index, line in enumerate(path.read_text(encoding="utf-8").splitlines()):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            checks = row.get("checks", []) if isinstance(row, dict) else []
            if isinstance(checks, str):
                checks = json.loads(checks)
        except json.JSONDecodeError:
            continue
        for check in checks if isinstance(checks, list) else []:
            problem = check_error(check)
            if problem is not None:
                raise SleepError(f"{path}: task row {index}: {problem}")


@dataclass(frozen=True)
class MergeReport:
    """What a merge did: rows kept as they were, how many of them reviewed, tasks added,
    mined tasks not re-added because the user dropped them, and sessions added."""

    kept: int
    reviewed: int
    added: int
    skipped_dropped: int
    sessions_added: int

    def to_dict(self) -> dict[str, int]:
        """JSON-ready counts."""
        return dict(vars(self))


class ReviewFolder:
    """One review folder (see the module docstring)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    @property
    def tasks_path(self) -> Path:
        """`tasks.jsonl`: the tasks, one a line."""
        return self.folder / "tasks.jsonl"

    @property
    def sessions_path(self) -> Path:
        """`sessions.jsonl`: the sessions the tasks came from (redacted prompts)."""
        return self.folder / "sessions.jsonl"

    @property
    def dropped_path(self) -> Path:
        """`dropped.jsonl`: tasks the user dropped (never re-added by a harvest)."""
        return self.folder / "dropped.jsonl"

    def tasks(self) -> list[Task]:
        """The tasks (none when the folder has no tasks.jsonl yet)."""
        if not self.tasks_path.exists():
            return []
        validate_task_rows(self.tasks_path)
        return load_tasks(self.tasks_path)

    def dropped(self) -> set[str]:
        """Ids of the tasks the user dropped."""
        return {str(row["id"]) for row in _read_jsonl(self.dropped_path)}

    def merge(
        self,
        mined: Sequence[Task],
        sessions: Sequence[SessionRow],
        *,
        fractions: SplitFractions = DEFAULT_FRACTIONS,
    ) -> MergeReport:
        """Add newly mined tasks and sessions; keep every existing row as it is.

        The added tasks' splits are balanced against the kept rows (`balance_splits` with the
        kept rows fixed): when the folder's informative tasks would all sit outside train or
        val, an added one moves there; a kept row never changes split."""
        existing = self.tasks()
        known = {t.id for t in existing}
        dropped = self.dropped()
        added = [t for t in mined if t.id not in known and t.id not in dropped]
        self._save(balance_splits([*existing, *added], fractions, fixed=known))
        old_sessions = _read_jsonl(self.sessions_path)
        listed = {(r.get("agent"), r.get("id")) for r in old_sessions}
        new_sessions = [r for r in sessions if (r.get("agent"), r.get("id")) not in listed]
        _write_jsonl(self.sessions_path, [*old_sessions, *new_sessions])
        return MergeReport(
            kept=len(existing),
            reviewed=sum(1 for t in existing if t.reviewed),
            added=len(added),
            skipped_dropped=sum(1 for t in mined if t.id in dropped and t.id not in known),
            sessions_added=len(new_sessions),
        )

    def find(self, task_id: str) -> Task:
        """The task whose id is `task_id` or starts with it (a unique prefix)."""
        tasks = self.tasks()
        found = [t for t in tasks if t.id == task_id] or [
            t for t in tasks if t.id.startswith(task_id)
        ]
        if len(found) != 1:
            what = "no task" if not found else f"{len(found)} tasks"
            raise SleepError(
                f"{what} in {self.tasks_path} with id {task_id!r}; "
                "list them with `skillopt-dsl sleep review`"
            )
        return found[0]

    def accept(self, task_id: str) -> Task:
        """Mark one task reviewed."""
        return self._update(self.find(task_id).model_copy(update={"reviewed": True}))

    def drop(self, task_id: str) -> Task:
        """Remove one task; later harvests do not add it again."""
        task = self.find(task_id)
        self._save([t for t in self.tasks() if t.id != task.id])
        rows = _read_jsonl(self.dropped_path)
        _write_jsonl(self.dropped_path, [*rows, {"id": task.id, "intent": task.intent}])
        return task

    def edit(
        self,
        task_id: str,
        *,
        intent: str | None = None,
        rubric: str | None = None,
        checks: Sequence[Check] | None = None,
        add_checks: Iterable[Check] = (),
    ) -> Task:
        """Change one task (it becomes `origin: edited` and reviewed: the user wrote it)."""
        task = self.find(task_id)
        data = task.model_dump()
        data["checks"] = [
            *(list(checks) if checks is not None else task.checks),
            *add_checks,
        ]
        if intent is not None:
            data["intent"] = intent
        if rubric is not None:
            data["rubric"] = rubric or None
        data.update(origin="edited", reviewed=True)
        try:
            edited = Task.model_validate(data)
        except pydantic.ValidationError as exc:
            raise SleepError(f"task {task.id} cannot be edited so: {exc}") from None
        return self._update(edited)

    def _update(self, task: Task) -> Task:
        self._save([task if t.id == task.id else t for t in self.tasks()])
        return task

    def _save(self, tasks: Sequence[Task]) -> None:
        from datasets.utils import (
            are_progress_bars_disabled,
            disable_progress_bars,
            enable_progress_bars,
        )

        self.folder.mkdir(parents=True, exist_ok=True)
        was_disabled = are_progress_bars_disabled()
        disable_progress_bars()  # a saving bar per change would bury the CLI's answer
        try:
            save_tasks(tasks, self.folder)
        finally:
            if not was_disabled:
                enable_progress_bars()


def _read_jsonl(path: Path) -> list[JSONObject]:
    if not path.exists():
        return []
    rows: list[JSONObject] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise SleepError(
                f"{path}:{number} is not JSON ({exc}); fix or delete the line"
            ) from None
        if not isinstance(row, dict):
            raise SleepError(f"{path}:{number} is not a JSON object; fix or delete the line")
        rows.append(row)
    return rows


def _write_jsonl(path: Path, rows: Sequence[Mapping[str, object]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    path.write_text(text, encoding="utf-8")
