"""`ConsolidationProposer`: the slow update, a concise and coherent document."""

from __future__ import annotations

from dataclasses import dataclass

from skillopt_dsl.optimizers.proposers.base import (
    EditGroup,
    ProposalRequest,
    Proposer,
)
from skillopt_dsl.optimizers.proposers.reflective import ask_for_edits
from skillopt_dsl.skill import Add, Delete, Edit, Skill

_CONSOLIDATE = """You edit a skill document: the instructions a model reads before doing a task.
Make it more concise and coherent without changing what it asks for: merge repeated rules,
delete redundant sentences, fix contradictions. Keep every worked example that is still useful.
Reply with JSON only: {"edits": [{"kind": "replace", "old": "<exact text>", "new": "<text>", "rationale": "<why>"},
{"kind": "delete", "old": "<exact text>", "rationale": "<why>"}]}"""


@dataclass(kw_only=True)
class ConsolidationProposer(Proposer):
    """The slow update: make the document concise and coherent.

    Deterministically deletes paragraphs that repeat an earlier one (whitespace- and
    case-insensitively); with `use_model=True` also asks the optimizer model for Replace/Delete
    edits (Adds are not consolidation and are dropped, with a note). The edits are clipped to
    the learning rate and gated like any other candidate.
    """

    use_model: bool = True
    name: str = "consolidation"

    def max_calls(self, batch_size: int) -> int:
        return 2  # one reply and its one retry

    def propose(self, request: ProposalRequest) -> list[EditGroup]:
        groups = (
            [EditGroup(tuple(edits), self.name, False, "repeated paragraphs")]
            if (edits := repeated_paragraph_deletes(request.skill))
            else []
        )
        if self.use_model and request.skill.text.strip():
            groups += self._model_edits(request)
        return groups

    def _model_edits(self, request: ProposalRequest) -> list[EditGroup]:
        prompt = f"# Document\n{request.skill.text}\n\n# Limit\nChange at most {request.budget_tokens} tokens."
        messages = [
            {"role": "system", "content": _CONSOLIDATE},
            {"role": "user", "content": prompt},
        ]
        edits = ask_for_edits(request.optimizer_lm, messages, seed=request.step * 100 + 99)
        if isinstance(edits, str):
            reason, _, reply = edits.partition("\n")
            request.note("consolidation_dropped", reason=reason, reply=reply[:500])
            return []
        kept = [e for e in edits if not isinstance(e, Add)]
        if len(kept) < len(edits):
            request.note("consolidation_adds_dropped", count=len(edits) - len(kept))
        return [EditGroup(tuple(kept), self.name, False, "consolidation")] if kept else []


def repeated_paragraphs(skill: Skill) -> list[str]:
    """Paragraphs that repeat an earlier one (compared whitespace- and case-insensitively)."""
    seen: set[str] = set()
    repeats: list[str] = []
    for block in skill.text.split("\n\n"):
        norm = " ".join(block.split()).casefold()
        if norm and norm in seen:
            repeats.append(block)
        seen.add(norm)
    return repeats


def repeated_paragraph_deletes(skill: Skill) -> list[Edit]:
    """Delete edits for repeated paragraphs that can be anchored unambiguously."""
    return [
        Delete(old=block, rationale="repeats an earlier paragraph")
        for block in repeated_paragraphs(skill)
        if skill.text.count(block) == 1
    ]
