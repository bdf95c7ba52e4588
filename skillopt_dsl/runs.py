"""The run directory: the durable record of a compile, and what `resume=True` reads back.

Layout::

    config.json        what was asked for (models, optimizer settings, seed, data ids)
    events.jsonl       one JSON object per line: proposals, edit reports, evaluations, gate decisions
    skills/v0001.md    every accepted version, v0001 being the seed
    best_skill.md      the incumbent, exported after every accepted step
    checkpoint.json    written atomically after every gate decision
    summary.json       written when the run ends
    cache.sqlite       the run's model-response cache (makes a resumed run free to replay)

A torn `events.jsonl` (a half-written last line after a kill) is cut back to its last complete
line and the repair is logged; an unreadable `checkpoint.json` is refused with a message, never
silently ignored.
"""

from __future__ import annotations

import json
import logging
import random
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skillopt_dsl.errors import RunDirError
from skillopt_dsl.events import RunEvent, read_event
from skillopt_dsl.export import atomic_write_text, export_skill
from skillopt_dsl.json_types import JSONObject, JSONValue
from skillopt_dsl.skill import Skill

__all__ = ["RunDirectory", "RunFiles", "config_changes"]

logger = logging.getLogger(__name__)


def _dumps(data: Any) -> str:
    return json.dumps(data, ensure_ascii=False, sort_keys=True, default=str)


RESUMABLE_SETTINGS = frozenset({"budget"})
"""Config keys a resume may change: a budget can be raised to continue a run that ran out
(it changes how far the run goes, never what any answer or score is)."""


def config_changes(old: Any, new: Any, path: str = "") -> list[str]:
    """Every difference between two JSON configs, as `"lm.api_base: 'http://a' -> 'http://b'"`.

    Nested objects are compared key by key (dotted paths); other values, lists included, whole.
    A key present on one side only shows `<absent>` on the other.
    """
    if isinstance(old, dict) and isinstance(new, dict):
        changes: list[str] = []
        for key in sorted(set(old) | set(new), key=str):
            where = f"{path}.{key}" if path else str(key)
            changes += config_changes(old.get(key, _ABSENT), new.get(key, _ABSENT), where)
        return changes
    if old == new:
        return []
    return [f"{path or '(config)'}: {_shown(old)} -> {_shown(new)}"]


_ABSENT = object()
_SHOWN_CHARS = 120


def _shown(value: Any) -> str:
    text = "<absent>" if value is _ABSENT else repr(value)
    return text if len(text) <= _SHOWN_CHARS else text[: _SHOWN_CHARS - 3] + "..."


@dataclass(frozen=True)
class RunFiles:
    """Where each file of a run directory lives: the one place their names are spelled."""

    folder: Path

    @property
    def config(self) -> Path:
        """config.json: what was asked for."""
        return self.folder / "config.json"

    @property
    def events(self) -> Path:
        """events.jsonl: one event per line (`skillopt_dsl.events`)."""
        return self.folder / "events.jsonl"

    @property
    def skills(self) -> Path:
        """skills/: every accepted version."""
        return self.folder / "skills"

    def version(self, number: int) -> Path:
        """skills/vNNNN.md: version `number` (1 is the seed)."""
        return self.skills / f"v{number:04d}.md"

    @property
    def best(self) -> Path:
        """best_skill.md: the incumbent, exported."""
        return self.folder / "best_skill.md"

    @property
    def checkpoint(self) -> Path:
        """checkpoint.json: what `resume=True` reads back."""
        return self.folder / "checkpoint.json"

    @property
    def summary(self) -> Path:
        """summary.json: written when the run ends."""
        return self.folder / "summary.json"

    @property
    def cache(self) -> Path:
        """cache.sqlite: the run's model-response cache."""
        return self.folder / "cache.sqlite"

    @property
    def ledger(self) -> Path:
        """ledger.jsonl: the journal of every model call reserved."""
        return self.folder / "ledger.jsonl"

    def required(self) -> tuple[Path, ...]:
        """What a complete run directory holds (config.json is optional: a sweep trial's run
        has none)."""
        return (self.events, self.version(1), self.best)

    def is_complete(self) -> bool:
        """True when every required file is there (a report can be written for the run)."""
        return all(path.is_file() for path in self.required())


class RunDirectory:
    """Reads and writes one run directory; the only code that does. `path=None` keeps
    everything in memory; `create=False` opens an existing run read-only (nothing is made)."""

    def __init__(self, path: str | Path | None, *, create: bool = True) -> None:
        self.path = Path(path) if path is not None else None
        self._lock = threading.Lock()
        self.events: list[JSONObject] = []
        if self.path is not None and create:
            self.files.skills.mkdir(parents=True, exist_ok=True)

    @property
    def files(self) -> RunFiles:
        """The run's file paths (refused for an in-memory run)."""
        if self.path is None:
            raise RunDirError("an in-memory run (run_dir=None) has no files")
        return RunFiles(self.path)

    # -- config ------------------------------------------------------------------------------
    def write_config(self, config: Mapping[str, object], *, resume: bool) -> None:
        """Write config.json; on resume, refuse a config that differs from the one on disk."""
        if self.path is None:
            return
        target = self.files.config
        if resume and target.exists():
            on_disk = json.loads(target.read_text(encoding="utf-8"))
            current = json.loads(_dumps(config))
            changes = config_changes(
                {k: v for k, v in on_disk.items() if k not in RESUMABLE_SETTINGS},
                {k: v for k, v in current.items() if k not in RESUMABLE_SETTINGS},
            )
            if changes:
                raise RunDirError(
                    f"cannot resume {self.path}: the settings differ from the original run "
                    f"({'; '.join(changes)}). A changed model configuration changes the answers "
                    "the run's cache and scores hold, so resume with the original settings "
                    "(restore each one above to its old value) or start a new run_dir."
                )
            raised = config_changes(on_disk, current)
            if raised:  # only resumable settings (the budget) changed: record the new ones
                logger.info("resuming %s with new settings: %s", self.path, "; ".join(raised))
                atomic_write_text(target, json.dumps(current, indent=2) + "\n")
            return
        if not resume and self.files.checkpoint.exists():
            raise RunDirError(
                f"{self.path} already holds a run; pass resume=True to continue it or choose a new run_dir"
            )
        atomic_write_text(target, json.dumps(json.loads(_dumps(config)), indent=2) + "\n")

    # -- events ------------------------------------------------------------------------------
    def event(self, event: str, /, **payload: Any) -> None:
        """Append one event, `{"event": event, ...payload}`, flushed to disk at once."""
        record = {"event": event, **payload}
        line = _dumps(record)
        with self._lock:
            self.events.append(json.loads(line))
            if self.path is not None:
                with self.files.events.open("a", encoding="utf-8") as handle:
                    handle.write(line + "\n")
                    handle.flush()

    def load_events(self, *, repair: bool = True) -> list[JSONObject]:
        """Read events.jsonl. A torn last line (a kill mid-write) is cut from the file, or with
        `repair=False` (a reader that must change nothing) skipped; a corrupt complete line, or
        one that is not an event object, is refused."""
        if self.path is None or not self.files.events.exists():
            return []
        target = self.files.events
        raw = target.read_bytes()
        if raw and not raw.endswith(b"\n"):
            cut = raw.rfind(b"\n") + 1
            if repair:
                logger.warning(
                    "events.jsonl: cutting a torn last line (%d bytes) left by a kill",
                    len(raw) - cut,
                )
                with target.open("r+b") as handle:
                    handle.truncate(cut)
            else:
                logger.warning(
                    "%s: ignoring a torn last line (the run was killed mid-write)", target
                )
            raw = raw[:cut]
        events = [_event_line(target, number, line) for number, line in _lines(raw)]
        self.events = events
        return events

    def records(self) -> list[RunEvent]:
        """The events read or written so far, typed (`skillopt_dsl.events`); kinds it does not
        know are left out."""
        typed = (read_event(event) for event in self.events)
        return [event for event in typed if event is not None]

    def load_config(self) -> JSONObject | None:
        """config.json, or None when the run has none (a sweep trial's run)."""
        return None if self.path is None else _json_object(self.files.config)

    def load_summary(self) -> JSONObject | None:
        """summary.json, or None when the run has not ended (killed or still running)."""
        return None if self.path is None else _json_object(self.files.summary)

    def missing_files(self) -> list[str]:
        """The files a complete run holds that this one lacks, relative to the run folder."""
        if self.path is None:
            return []
        path = self.path
        return [p.relative_to(path).as_posix() for p in self.files.required() if not p.is_file()]

    # -- skills ------------------------------------------------------------------------------
    def save_version(self, version: int, skill: Skill) -> None:
        """Write skills/vNNNN.md (the exact text)."""
        if self.path is not None:
            atomic_write_text(self.files.version(version), skill.text)

    def save_best(self, skill: Skill, metadata: Mapping[str, JSONValue]) -> Path | None:
        """Export best_skill.md."""
        if self.path is None:
            return None
        return export_skill(skill, self.files.best, metadata)

    # -- checkpoint and summary ---------------------------------------------------------------
    def save_checkpoint(self, state: Mapping[str, object]) -> None:
        """Write checkpoint.json atomically."""
        if self.path is not None:
            atomic_write_text(self.files.checkpoint, _dumps(state))

    def load_checkpoint(self) -> JSONObject | None:
        """The last checkpoint, or None when the run never reached a gate decision."""
        if self.path is None or not self.files.checkpoint.exists():
            return None
        target = self.files.checkpoint
        try:
            data = json.loads(target.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise RunDirError(
                f"{target} is unreadable ({exc}); it is written atomically, so something else changed it. "
                "Restore it or start a new run_dir."
            ) from exc
        if not isinstance(data, dict) or "driver" not in data:
            raise RunDirError(f"{target} is not a skillopt-dsl checkpoint")
        return data

    def save_summary(self, summary: Mapping[str, object]) -> None:
        """Write summary.json."""
        if self.path is not None:
            atomic_write_text(
                self.files.summary, json.dumps(json.loads(_dumps(summary)), indent=2) + "\n"
            )

    @property
    def cache_path(self) -> Path | None:
        """Where the run's response cache lives."""
        return None if self.path is None else self.files.cache

    @property
    def ledger_path(self) -> Path | None:
        """Where the run's journal of reserved model calls lives."""
        return None if self.path is None else self.files.ledger


def _json_object(path: Path) -> JSONObject | None:
    """A JSON object file (None when absent); unreadable or not an object is a `RunDirError`."""
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise RunDirError(f"{path} is not valid JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise RunDirError(f"{path} must hold a JSON object, found {type(data).__name__}")
    return data


def _lines(raw: bytes) -> list[tuple[int, bytes]]:
    return [(n, line) for n, line in enumerate(raw.splitlines(), start=1) if line.strip()]


def _event_line(target: Path, number: int, line: bytes) -> JSONObject:
    try:
        event = json.loads(line)
    except json.JSONDecodeError as exc:
        raise RunDirError(
            f"{target} line {number} is corrupt ({exc}); the run cannot be trusted. Start a new run_dir."
        ) from exc
    if not isinstance(event, dict) or "event" not in event:
        raise RunDirError(f"{target} line {number} is not an event object")
    return event


def rng_to_json(rng: random.Random) -> list[Any]:
    """A `random.Random`'s state as JSON (the checkpoint's `driver.rng`)."""
    version, internal, gauss = rng.getstate()
    return [version, list(internal), gauss]


def rng_from_json(data: Sequence[Any]) -> tuple[Any, ...]:
    """The state `rng_to_json` wrote, for `random.Random.setstate`."""
    return (data[0], tuple(data[1]), data[2])
