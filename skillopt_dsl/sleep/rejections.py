"""Rejected edits remembered across nights (`SleepConfig.remember_rejected`, off by default).

Within one run an optimizer already remembers the edits its gate rejected. With this memory,
the edits of every candidate a night's gate rejected are kept in
`.skillopt/sleep/rejected-edits.jsonl` (one line per candidate: night, edits, validation delta;
the newest `MAX_REMEMBERED` candidates), and the next night's optimizer starts from them: its
proposers are wrapped (`RememberingProposer`) so that their request lists the remembered
candidates as already rejected (the reflection prompt says "do not propose again") and any edit
equal to a remembered one (`edit_key`) is dropped before it reaches the door. The gate is not
involved: a remembered edit is never re-proposed, so it cannot be accepted on a lucky night.

An optimizer without `proposers` (not `GradientText` or `Beam`) runs without the memory, with a
warning that says so.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pydantic

from skillopt_dsl.optimizers.proposers import (
    EditGroup,
    ProposalRequest,
    Proposer,
    RejectedCandidate,
    edit_key,
)
from skillopt_dsl.skill import parse_edits
from skillopt_dsl.sleep.errors import SleepError

if TYPE_CHECKING:
    from skillopt_dsl.compile import CompileResult
    from skillopt_dsl.optimizers.base import Optimizer
    from skillopt_dsl.sleep.project import SleepProject

__all__ = [
    "MAX_REMEMBERED",
    "REJECTED_FILE",
    "RememberingProposer",
    "load_rejected",
    "rejected_in",
    "remember_rejected",
    "with_memory",
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


class RememberingProposer(Proposer):
    """A proposer that also knows the edits earlier nights rejected (see the module docstring)."""

    def __init__(self, inner: Proposer, remembered: Sequence[RejectedCandidate]) -> None:
        self.inner = inner
        self.name = inner.name
        self.remembered = list(remembered)
        self._keys = {edit_key(e) for c in self.remembered for e in c.edits}

    def max_calls(self, batch_size: int) -> int:
        return self.inner.max_calls(batch_size)

    def propose(self, request: ProposalRequest) -> list[EditGroup]:
        """The inner proposer's groups for a request that lists the remembered candidates as
        rejected, without any remembered edit."""
        told = dataclasses.replace(request, rejected=[*self.remembered, *request.rejected])
        groups = []
        for group in self.inner.propose(told):
            edits = tuple(e for e in group.edits if edit_key(e) not in self._keys)
            dropped = len(group.edits) - len(edits)
            if dropped:
                request.note("remembered_rejection", proposer=self.name, dropped=dropped)
            if edits:
                groups.append(dataclasses.replace(group, edits=edits))
        return groups


def with_memory(optimizer: Optimizer, remembered: Sequence[RejectedCandidate]) -> Optimizer:
    """`optimizer` with its proposers wrapped in `RememberingProposer` (unchanged, with a
    warning, when it has no proposers; unchanged when nothing is remembered)."""
    if not remembered:
        return optimizer
    proposers = getattr(optimizer, "proposers", None)
    if not dataclasses.is_dataclass(optimizer) or proposers is None:
        logger.warning(
            "rejected edits of earlier nights are not used: %s has no proposers to tell",
            type(optimizer).__name__,
        )
        return optimizer
    wrapped = [RememberingProposer(p, remembered) for p in proposers]
    return dataclasses.replace(optimizer, proposers=wrapped)  # type: ignore[type-var]
