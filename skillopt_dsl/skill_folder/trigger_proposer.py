"""`TriggerWordsProposer`: description edits from the words of missed requests, no model call.

A small router matches a request against descriptions largely by the words they share. When
should-trigger requests of a batch were missed, this proposer appends to the description the
words those requests use most that the description lacks (`Use for: w1, w2, w3.`); when the
skill was loaded for should-not-trigger requests, it appends their most frequent words the
description lacks (`Not for: w1, w2.`). A description that has such a clause already (a proposal
joined before) gets the words added to that clause, so a proposal never makes it say `Use for:`
twice. Each proposal is one `Replace` of the whole description line inside the one-part folder
document, so it stays one line (the door refuses anything else).

Two proposals made on the same line and composed onto one candidate can still stack two clauses:
the second's `old` (the line before either) is found in the line the first grew (exactly, or by
the edit matcher's whitespace and fuzzy stages), so no `old` the proposer could choose prevents
it; keeping one clause there is the composing optimizer's job, not this proposer's.
It is a proposer for models too weak to reflect; a capable optimizer model's
`ReflectiveProposer` writes better descriptions.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from skillopt_dsl.optimizers.proposers import EditGroup, ProposalRequest, Proposer
from skillopt_dsl.skill import Replace
from skillopt_dsl.skill_folder.document import DESCRIPTION, FolderDocument
from skillopt_dsl.types import Example

__all__ = ["TriggerWordsProposer", "with_clause"]

_WORD = re.compile(r"[a-z][a-z'-]{3,}")
_COMMON = frozenset(
    [
        "this",
        "that",
        "with",
        "from",
        "what",
        "which",
        "have",
        "need",
        "these",
        "those",
        "your",
        "into",
        "please",
        "there",
        "their",
        "them",
        "they",
        "will",
        "would",
        "could",
        "should",
        "about",
        "been",
        "were",
        "when",
        "then",
        "than",
        "also",
        "just",
        "make",
        "write",
        "draft",
        "give",
        "turn",
        "help",
        "want",
        "some",
        "more",
        "tell",
    ]
)


@dataclass(kw_only=True)
class TriggerWordsProposer(Proposer):
    """Append the missed requests' words to the description (see the module docstring).

    `words`: how many words one proposal adds."""

    words: int = 3
    name: str = "trigger-words"

    def propose(self, request: ProposalRequest) -> list[EditGroup]:
        document = FolderDocument.from_skill(request.skill)
        if DESCRIPTION not in document.names:
            return []
        description = document.text_of(DESCRIPTION).strip()
        groups = []
        for wanted, lead in ((True, "Use for"), (False, "Not for")):
            failed = [e for e, _ in request.failures() if e.labels.get("should_trigger") is wanted]
            words = _new_words(failed, description, self.words)
            if not words:
                continue
            new = with_clause(description, lead, words)
            why = f"{len(failed)} {'missed' if wanted else 'wrongly loaded'} request(s) use {words}"
            edit = Replace(old=description, new=new, rationale=why)
            groups.append(
                EditGroup((edit,), self.name, True, why, addresses=tuple(e.id for e in failed))
            )
        return groups


def with_clause(description: str, lead: str, words: Sequence[str]) -> str:
    """`description` with `words` in its `lead: ...` clause: added to the clause when there is
    one (`Use for: a, b.` + c -> `Use for: a, b, c.`), else appended as a new clause."""
    clause = re.compile(rf"\b{re.escape(lead)}:\s*(?P<words>[^.]*)\.", re.IGNORECASE)
    found = clause.search(description)
    if found is None:
        return f"{description.rstrip()} {lead}: {', '.join(words)}."
    listed = found.group("words").strip()
    merged = ", ".join([listed, *words] if listed else words)
    return f"{description[: found.start()]}{lead}: {merged}.{description[found.end() :]}"


def _new_words(examples: Sequence[Example], description: str, limit: int) -> list[str]:
    """The `limit` words the requests use most (ties: first seen) that the description lacks."""
    known = set(_WORD.findall(description.casefold()))
    counts: Counter[str] = Counter()
    for example in examples:
        words = dict.fromkeys(_WORD.findall(str(example.inputs.get("request", "")).casefold()))
        counts.update(w for w in words if w not in known and w not in _COMMON)
    return [word for word, _ in counts.most_common(limit)]
