"""Running an optimizer's proposers for one step: their counters, benching the ones whose
proposals never survive while another's do, and dropping the edits of earlier runs'
rejections (`SearchMemory.remembered`: a Sleep night's earlier nights)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, replace

from skillopt_dsl.driver import RunView
from skillopt_dsl.evaluate import Rollout
from skillopt_dsl.optimizers.proposers import EditGroup, ProposalRequest, Proposer
from skillopt_dsl.search_memory import SearchMemory, edit_key
from skillopt_dsl.skill import Skill
from skillopt_dsl.types import Example

__all__ = ["ProposerRuns", "new_stats", "proposal_request", "request_fingerprint"]


@dataclass(frozen=True)
class ProposerRuns:
    """How a step runs its proposers (`GradientText.bench_after`, `retry_every`)."""

    bench_after: int | None
    retry_every: int
    spend_budget: bool = False
    """A call budget is to be spent: no proposer sits out while none has had a survivor."""

    def run(self, view: RunView, proposer: Proposer, request: ProposalRequest) -> list[EditGroup]:
        """Run one proposer (unless benched), recording the model calls it spent and what it
        gave. A proposer that called a model is not asked again while its request is
        unchanged (`request_fingerprint`): the same reflection would buy the same answer,
        whose edits the step before already tried; the skip is counted (`unchanged`) and
        emitted. Edits equal to an earlier run's rejection (`SearchMemory.remembered`) are
        dropped from its groups (noted as `remembered_rejection`)."""
        memory, name = view.memory, proposer.name
        step, stats = memory.step - 1, memory.proposer_stats.setdefault(name, new_stats())
        if self.benched(memory.proposer_stats, name, step):
            stats["skipped"] += 1
            view.emit("proposer", step=step, name=name, benched=True)
            return []
        fingerprint = request_fingerprint(request)
        if memory.proposer_asked.get(name) == fingerprint:
            stats["unchanged"] = stats.get("unchanged", 0) + 1
            view.emit("proposer", step=step, name=name, benched=False, unchanged=True, calls=0)
            return []
        before = view.usage()
        remembered = memory.remembered_keys()
        groups = _without_remembered(proposer.propose(request), remembered, name, request)
        after = view.usage()
        calls = after.calls - before.calls
        # a resumed run replays model calls from its cache: they count as asked, not paid
        replayed = after.cache_hits - before.cache_hits
        edits = sum(len(g.edits) for g in groups)
        stats["runs"] += 1
        stats["calls"] += calls
        stats["edits"] += edits
        if calls or replayed:
            stats["paid_runs"] += 1
            memory.proposer_asked[name] = fingerprint
        view.emit(
            "proposer", step=step, name=name, calls=calls, cache_hits=replayed, groups=len(groups),
            edits=edits, benched=False,
        )  # fmt: skip
        return groups

    def benched(self, all_stats: dict[str, dict[str, int]], name: str, step: int) -> bool:
        """A proposer that paid for `bench_after` steps and never had a proposal pass the
        screen sits out (except on every `retry_every`-th step) while another proposer's
        proposals do pass, or while none has any and there is no call budget to spend: its
        calls go where edits survive, or are saved. Under a call budget to spend, none sits out
        while none has passed (benching would leave the budget unspent, not spent better)."""
        stats = all_stats[name]
        if self.bench_after is None or stats["survived"] > 0 or stats["accepted"] > 0:
            return False
        others = any(s["survived"] or s["accepted"] for n, s in all_stats.items() if n != name)
        if self.spend_budget and not others:
            return False
        return stats["paid_runs"] >= self.bench_after and step % self.retry_every != 0


def _without_remembered(
    groups: list[EditGroup], remembered: set[str], name: str, request: ProposalRequest
) -> list[EditGroup]:
    """`groups` without any edit an earlier run rejected (`edit_key`); a group left without
    edits is dropped, and what was dropped is noted on the request."""
    if not remembered:
        return groups
    kept = []
    for group in groups:
        edits = tuple(e for e in group.edits if edit_key(e) not in remembered)
        dropped = len(group.edits) - len(edits)
        if dropped:
            request.note("remembered_rejection", proposer=name, dropped=dropped)
        if edits:
            kept.append(replace(group, edits=edits))
    return kept


def new_stats() -> dict[str, int]:
    """A proposer's counters: runs, steps benched, model calls, steps that paid for calls,
    edits proposed, proposals that passed the screen, candidates its proposals were submitted
    in, accepted ones, and steps not asked because the request was unchanged."""
    keys = ("runs", "skipped", "calls", "paid_runs", "edits", "survived", "submitted", "accepted",
            "unchanged")  # fmt: skip
    return dict.fromkeys(keys, 0)


def request_fingerprint(request: ProposalRequest) -> str:
    """What a proposer's answer depends on: the skill text, the failing examples (ids and
    outputs) and the rejected edits it is told about, hashed."""
    failing = sorted((example.id, rollout.output) for example, rollout in request.failures())
    rejected = [([e.model_dump() for e in c.edits], c.delta) for c in request.rejected]
    blob = json.dumps([request.skill.hash, failing, rejected], sort_keys=True, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]


def proposal_request(
    view: RunView,
    memory: SearchMemory,
    skill: Skill,
    batch: list[Example],
    rollouts: Sequence[Rollout],
    budget: int,
    *,
    epoch: int,
) -> ProposalRequest:
    """What the proposers read for the step just begun (of `epoch`, or a Beam's round): the
    skill `skill` it expands, its rollouts on `batch`, the memory, and the tokens it may
    change."""
    return ProposalRequest(
        module=view.module,
        skill=skill,
        batch=batch,
        rollouts=rollouts,
        trainset=view.trainset,
        rejected=memory.told(),
        optimizer_lm=view.optimizer_lm,
        rng=view.rng,
        budget_tokens=budget,
        step=memory.step - 1,
        epoch=epoch,
    )
