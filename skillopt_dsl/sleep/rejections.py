"""Rejected edits remembered across nights (`SleepConfig.remember_rejected`, off by default).

Within one run an optimizer already remembers the edits its gate rejected. With this memory,
the edits of every candidate a night's gate rejected are kept in
`.skillopt/sleep/rejected-edits.jsonl` (one line per candidate: night, edits, validation delta;
the newest `MAX_REMEMBERED` candidates), and the next night's run starts from them: they seed
the run's search memory (`CompileSettings.remembered`, `SearchMemory.remembered`), so every
proposer of every search the night runs (each part of compile's default `HandOff` alike) reads
them as already rejected (the reflection prompt says "do not propose again"), and any edit equal
to a remembered one (`edit_key`) is dropped before it is screened
(`proposer_runs.ProposerRuns`). The gate is not involved: a remembered edit is never
re-proposed, so it cannot be accepted on a lucky night.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pydantic

from skillopt_dsl.optimizers.proposers import (
    RejectedCandidate,
    edit_key,
)
from skillopt_dsl.skill import parse_edits
from skillopt_dsl.sleep.errors import SleepError

if TYPE_CHECKING:
    from skillopt_dsl.compile import CompileResult
    from skillopt_dsl.sleep.project import SleepProject

__all__ = [
    "MAX_REMEMBERED",
    "REJECTED_FILE",
    "load_rejected",
    "rejected_in",
    "remember_rejected",
]

logger = logging.getLogger(__name__)

REJECTED_FILE = "rejected-edits.jsonl"
MAX_REMEMBERED = 50


def rejected_in(result: CompileResult) -> list[RejectedCandidate]:
    """The proposals `result`'s run rejected: the candidates its gate judged and rejected, with
    the edits they applied, and the optimizer's memory of proposals screened out on training
    data (`CompileResult.rejected`), each edit set once."""
    found: list[RejectedCandidate] = []
    for step in result.history:
        if step.accepted or step.candidate_hash is None or step.val_score is None:
            continue
        applied = [o["edit"] for o in step.edit_report if o.get("status") == "applied"]
        if not applied:
            continue
        delta = step.val_score - (step.incumbent_score or 0.0)
        found.append(RejectedCandidate(tuple(parse_edits(applied)), delta, step.step, step.epoch))
    seen = {tuple(edit_key(e) for e in c.edits) for c in found}
    for memory in result.rejected:
        key = tuple(edit_key(e) for e in memory.edits)
        if key not in seen:
            seen.add(key)
            found.append(memory)
    return found


def _path(project: SleepProject) -> Path:
    return project.sleep_dir / REJECTED_FILE


def load_rejected(project: SleepProject) -> list[RejectedCandidate]:
    """The remembered rejected candidates, oldest first (none when the file does not exist).

    A line that does not parse is an error naming the file and line (delete the line, or the
    file to forget everything)."""
    path = _path(project)
    if not path.is_file():
        return []
    found = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
            found.append(RejectedCandidate.from_dict(data))
        except (json.JSONDecodeError, KeyError, TypeError, pydantic.ValidationError) as exc:
            raise SleepError(
                f"{path}:{number} is not a remembered rejected edit ({exc}); delete that line "
                "(or the file, to forget every rejected edit)"
            ) from None
    return found


def remember_rejected(
    project: SleepProject, night_id: str, rejected: Sequence[RejectedCandidate]
) -> int:
    """Append `rejected` (from night `night_id`) to the memory, keeping the newest
    `MAX_REMEMBERED`; returns how many candidates the memory holds."""
    load_rejected(project)  # refuses a damaged file before anything is appended
    path = _path(project)
    old = path.read_text(encoding="utf-8").splitlines() if path.is_file() else []
    new = [json.dumps({**c.to_dict(), "night": night_id}, ensure_ascii=False) for c in rejected]
    kept = [line for line in old if line.strip()] + new
    kept = kept[-MAX_REMEMBERED:]
    from skillopt_dsl.sleep.project import atomic_write

    project.sleep_dir.mkdir(parents=True, exist_ok=True)
    atomic_write(path, "".join(line + "\n" for line in kept).encode("utf-8"))
    return len(kept)
