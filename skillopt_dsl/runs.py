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
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from skillopt_dsl.errors import RunDirError
from skillopt_dsl.export import atomic_write_text, export_skill
from skillopt_dsl.skill import Skill

__all__ = ["RunDirectory", "config_changes"]

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


class RunDirectory:
    """Reads and writes one run directory. `path=None` keeps everything in memory."""

    def __init__(self, path: str | Path | None) -> None:
        self.path = Path(path) if path is not None else None
        self._lock = threading.Lock()
        self.events: list[dict[str, Any]] = []
        if self.path is not None:
            (self.path / "skills").mkdir(parents=True, exist_ok=True)

    # -- config ------------------------------------------------------------------------------
    def write_config(self, config: Mapping[str, Any], *, resume: bool) -> None:
        """Write config.json; on resume, refuse a config that differs from the one on disk."""
        if self.path is None:
            return
        target = self.path / "config.json"
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
        if not resume and (self.path / "checkpoint.json").exists():
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
                with (self.path / "events.jsonl").open("a", encoding="utf-8") as handle:
                    handle.write(line + "\n")
                    handle.flush()

    def load_events(self) -> list[dict[str, Any]]:
        """Read events.jsonl, cutting a torn last line; a corrupt complete line is refused."""
        if self.path is None or not (self.path / "events.jsonl").exists():
            return []
        target = self.path / "events.jsonl"
        raw = target.read_bytes()
        if raw and not raw.endswith(b"\n"):
            cut = raw.rfind(b"\n") + 1
            logger.warning(
                "events.jsonl: cutting a torn last line (%d bytes) left by a kill", len(raw) - cut
            )
            with target.open("r+b") as handle:
                handle.truncate(cut)
            raw = raw[:cut]
        events: list[dict[str, Any]] = []
        for number, line in enumerate(raw.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                events.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise RunDirError(
                    f"{target} line {number} is corrupt ({exc}); the run cannot be trusted. Start a new run_dir."
                ) from exc
        self.events = events
        return events

    # -- skills ------------------------------------------------------------------------------
    def save_version(self, version: int, skill: Skill) -> None:
        """Write skills/vNNNN.md (the exact text)."""
        if self.path is not None:
            atomic_write_text(self.path / "skills" / f"v{version:04d}.md", skill.text)

    def save_best(self, skill: Skill, metadata: Mapping[str, Any]) -> Path | None:
        """Export best_skill.md."""
        if self.path is None:
            return None
        return export_skill(skill, self.path / "best_skill.md", metadata)

    # -- checkpoint and summary ---------------------------------------------------------------
    def save_checkpoint(self, state: Mapping[str, Any]) -> None:
        """Write checkpoint.json atomically."""
        if self.path is not None:
            atomic_write_text(self.path / "checkpoint.json", _dumps(state))

    def load_checkpoint(self) -> dict[str, Any] | None:
        """The last checkpoint, or None when the run never reached a gate decision."""
        if self.path is None or not (self.path / "checkpoint.json").exists():
            return None
        target = self.path / "checkpoint.json"
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

    def save_summary(self, summary: Mapping[str, Any]) -> None:
        """Write summary.json."""
        if self.path is not None:
            atomic_write_text(
                self.path / "summary.json", json.dumps(json.loads(_dumps(summary)), indent=2) + "\n"
            )

    @property
    def cache_path(self) -> Path | None:
        """Where the run's response cache lives."""
        return None if self.path is None else self.path / "cache.sqlite"
