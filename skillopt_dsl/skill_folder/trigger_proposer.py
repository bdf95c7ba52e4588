"""`TriggerWordsProposer`: description edits from the words of missed requests, no model call.

A small router matches a request against descriptions largely by the words they share. When
should-trigger requests of a batch were missed, this proposer appends to the description the
words that set those requests apart (`Use for: w1, w2, w3.`); when the skill was loaded for
should-not-trigger requests, the words that set those apart (`Not for: w1, w2.`). A word is
chosen by how many more of the failed requests use it than of the training requests with the
other label (a word that near misses use as often as the missed requests, such as "write" or
"version", tells the router nothing), never a stopword or a word the description has. A
description that has such a clause already gets the words added to it. Each proposal is one
`Replace` of the whole description line inside the one-part folder document, so it stays one
line, and a proposal the module's door would refuse (over the agent's description limit) is
not made.

Two proposals made on the same line and composed onto one candidate would stack two clauses
(the second's `old`, the line before either, is found inside the line the first grew), so the
proposer's `tidy` merges repeated clauses into one when the optimizer composes proposals
(`Proposer.tidy`): the candidate the gate scores says `Use for:` once.
It is a proposer for models too weak to reflect; a capable optimizer model's
`ReflectiveProposer` writes better descriptions.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from skillopt_dsl.errors import UserInputError
from skillopt_dsl.optimizers.proposers import EditGroup, ProposalRequest, Proposer
from skillopt_dsl.skill import Replace, Skill
from skillopt_dsl.skill_folder.document import DESCRIPTION, FolderDocument
from skillopt_dsl.types import Example

__all__ = ["TriggerWordsProposer", "distinctive_words", "merge_clauses", "with_clause"]

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
        "below",
        "above",
        "here",
        "pasted",
        "each",
        "every",
        "only",
        "like",
        "after",
        "before",
        "today",
        "does",
        "ours",
        "can't",
        "it's",
        "we're",
        "let's",
    ]
)
_LEADS = ("Use for", "Not for")


@dataclass(kw_only=True)
class TriggerWordsProposer(Proposer):
    """Append the failed requests' distinctive words to the description (see the module
    docstring).

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
            others = [e for e in request.trainset if e.labels.get("should_trigger") is not wanted]
            words = distinctive_words(failed, others, description, self.words)
            if not words:
                continue
            new = with_clause(description, lead, words)
            if request.module.skill_refusal(_with_description(document, new)) is not None:
                continue  # over the agent's limit: the door would refuse it
            why = f"{len(failed)} {'missed' if wanted else 'wrongly loaded'} request(s) use {words}"
            edit = Replace(old=description, new=new, rationale=why)
            groups.append(
                EditGroup((edit,), self.name, True, why, addresses=tuple(e.id for e in failed))
            )
        return groups

    def tidy(self, skill: Skill) -> Skill:
        """The composed candidate with each clause said once (`merge_clauses`)."""
        try:
            document = FolderDocument.from_skill(skill)
        except UserInputError:
            return skill  # not a folder document: nothing of ours to merge
        if DESCRIPTION not in document.names:
            return skill
        description = document.text_of(DESCRIPTION)
        merged = merge_clauses(description)
        return skill if merged == description else _with_description(document, merged)


def with_clause(description: str, lead: str, words: Sequence[str]) -> str:
    """`description` with `words` in its `lead: ...` clause: added to the clause when there is
    one (`Use for: a, b.` + c -> `Use for: a, b, c.`; a word it lists already is not repeated),
    else appended as a new clause."""
    found = _clause(lead).search(description)
    if found is None:
        return f"{description.rstrip()} {lead}: {', '.join(dict.fromkeys(words))}."
    merged = ", ".join(_listed(found.group("words"), words))
    return f"{description[: found.start()]}{lead}: {merged}.{description[found.end() :]}"


def merge_clauses(description: str) -> str:
    """`description` with every repeated `Use for: ...` / `Not for: ...` clause merged into the
    first of its kind (`X. Use for: c. Use for: a, b.` -> `X. Use for: c, a, b.`)."""
    for lead in _LEADS:
        clauses = list(_clause(lead).finditer(description))
        if len(clauses) < 2:
            continue
        words = _listed("", [w for c in clauses for w in _listed(c.group("words"), ())])
        first, rest = clauses[0], clauses[1:]
        text = description
        for clause in reversed(rest):
            text = text[: clause.start()].rstrip() + " " + text[clause.end() :].lstrip()
        description = f"{text[: first.start()]}{lead}: {', '.join(words)}.{text[first.end() :]}"
        description = " ".join(description.split())
    return description


def distinctive_words(
    failed: Sequence[Example], others: Sequence[Example], description: str, limit: int
) -> list[str]:
    """The `limit` words that set the `failed` requests apart from the `others` (training
    requests with the other label): by the share of failed requests that use a word less the
    share of others that do, highest first (ties: first seen); only words with a positive
    margin, never a stopword or a word the description has."""
    known = set(_WORD.findall(description.casefold()))
    used, against = _document_counts(failed), _document_counts(others)
    margins = {
        word: count / len(failed) - against[word] / max(len(others), 1)
        for word, count in used.items()
        if word not in known and word not in _COMMON
    }
    ranked = sorted(margins, key=lambda word: -margins[word])  # stable: ties keep first seen
    return [word for word in ranked if margins[word] > 0][:limit]


def _document_counts(examples: Sequence[Example]) -> Counter[str]:
    """In how many of `examples`' requests each word occurs (in first-seen order)."""
    counts: Counter[str] = Counter()
    for example in examples:
        request = str(example.inputs.get("request", "")).casefold()
        counts.update(list(dict.fromkeys(_WORD.findall(request))))
    return counts


def _clause(lead: str) -> re.Pattern[str]:
    return re.compile(rf"\b{re.escape(lead)}:\s*(?P<words>[^.]*)\.", re.IGNORECASE)


def _listed(listed: str, words: Sequence[str]) -> list[str]:
    """The clause's words (`"a, b"`) then `words`, each once, in order."""
    items = [w.strip() for w in listed.split(",") if w.strip()]
    return list(dict.fromkeys([*items, *words]))


def _with_description(document: FolderDocument, description: str) -> Skill:
    parts = tuple((n, description if n == DESCRIPTION else t) for n, t in document.parts)
    return FolderDocument(parts).to_skill()
