"""`TriggerWordsProposer`: description edits from the words of missed requests, no model call.

A small router matches a request against descriptions largely by the words they share. When
should-trigger requests of a batch were missed, this proposer appends to the description the
words that set those requests apart (`Use for: w1, w2, w3.`); when the skill was loaded for
should-not-trigger requests, the words that set those apart (`Not for: w1, w2.`). A word is
chosen by how many more of the failed requests use it than of the training requests with the
other label (a word that near misses use as often as the missed requests, such as "write" or
"version", tells the router nothing), never a stopword or a word the description has. A
description that has such a clause already gets the words added to it. Each proposal is one
`Replace` inside the one-part folder document's description line, so it stays one line,
anchored on as little as it changes (the clause it extends, or the text before the clauses),
so that it still applies after other proposals were composed onto the line; a proposal the
module's door would refuse (over the agent's description limit) is not made.

Two proposals that each add a new clause of the same kind, made on the same line and composed
onto one candidate, stack two clauses (the second's `old` is found in the line the first
grew), so the proposer's `tidy` merges repeated clauses into one when the optimizer composes
proposals (`Proposer.tidy`): the candidate the gate scores says `Use for:` once.
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

__all__ = [
    "SHARED_BY",
    "TriggerWordsProposer",
    "copied_words",
    "distinctive_words",
    "merge_clauses",
    "with_clause",
]

_WORD = re.compile(r"[a-z][a-z'-]{2,}[a-z]")
SHARED_BY = 2
"""The fewest training requests of a label that must use a word before it is proposed."""
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

    def max_calls(self, batch_size: int) -> int:
        return 0  # no model call

    def propose(self, request: ProposalRequest) -> list[EditGroup]:
        document = FolderDocument.from_skill(request.skill)
        if DESCRIPTION not in document.names:
            return []
        description = document.text_of(DESCRIPTION).strip()
        groups = []
        for wanted, lead in ((True, "Use for"), (False, "Not for")):
            failed = [e for e, _ in request.failures() if e.labels.get("should_trigger") is wanted]
            alike = [e for e in request.trainset if e.labels.get("should_trigger") is wanted]
            others = [e for e in request.trainset if e.labels.get("should_trigger") is not wanted]
            words = distinctive_words(failed, alike, others, description, self.words)
            if not words:
                continue
            new = with_clause(description, lead, words)
            if request.module.skill_refusal(_with_description(document, new)) is not None:
                continue  # over the agent's limit: the door would refuse it
            why = f"{len(failed)} {'missed' if wanted else 'wrongly loaded'} request(s) use {words}"
            old, changed = _anchored(description, new, lead)
            edit = Replace(old=old, new=changed, rationale=why)
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
    failed: Sequence[Example],
    alike: Sequence[Example],
    others: Sequence[Example],
    description: str,
    limit: int,
) -> list[str]:
    """The `limit` words of the `failed` requests that set them apart from the `others`
    (training requests with the other label), highest margin first (ties: first seen): the
    share of failed requests that use a word, plus the share of `alike` (training requests
    with the failed ones' label) that do, less twice the share of others that do, so that of
    the words a small batch's failures use once each, those its whole label uses win. Only
    words with a positive margin that at least `SHARED_BY` training requests of the label use
    (a word of the group, not one request's own: the category, not the failures' words), never
    a stopword or a word the description has."""
    known = set(_WORD.findall(description.casefold()))
    used, common, against = (_document_counts(e) for e in (failed, alike, others))
    margins = {
        word: count / len(failed)
        + common[word] / max(len(alike), 1)
        - 2 * against[word] / max(len(others), 1)
        for word, count in used.items()
        if word not in known and word not in _COMMON and common[word] >= SHARED_BY
    }
    ranked = sorted(margins, key=lambda word: -margins[word])  # stable: ties keep first seen
    return [word for word in ranked if margins[word] > 0][:limit]


def copied_words(
    old: str, new: str, trainset: Sequence[Example], valset: Sequence[Example]
) -> tuple[str, ...]:
    """The words `new` (a trained description) adds to `old` that some training request holds
    and no validation request does: words pasted from the training requests, which the
    validation split cannot have rewarded (a sign of overfitting the staged diff flags)."""
    before = set(_WORD.findall(old.casefold()))
    added = [w for w in dict.fromkeys(_WORD.findall(new.casefold())) if w not in before]
    train, val = _document_counts(trainset), _document_counts(valset)
    return tuple(w for w in added if w not in _COMMON and train[w] and not val[w])


def _document_counts(examples: Sequence[Example]) -> Counter[str]:
    """In how many of `examples`' requests each word occurs (in first-seen order)."""
    counts: Counter[str] = Counter()
    for example in examples:
        request = str(example.inputs.get("request", "")).casefold()
        words = (word.removesuffix("'s") for word in _WORD.findall(request))
        counts.update(list(dict.fromkeys(words)))
    return counts


def _anchored(description: str, new: str, lead: str) -> tuple[str, str]:
    """The smallest `old` -> `new` pair that makes `description` into `new` (`with_clause`'s
    result), so that the edit still applies after other proposals were composed onto the
    line: the `lead` clause when the description has one, else the text before its first
    clause with the new clause right after it (the whole line when it has no clause)."""
    clause, grown = _clause(lead).search(description), _clause(lead).search(new)
    if clause is not None and grown is not None:
        return clause.group(), grown.group()
    added = new[len(description.rstrip()) :]  # " Lead: words.", appended by with_clause
    starts = [m.start() for other in _LEADS for m in _clause(other).finditer(description)]
    base = description[: min(starts)].rstrip() if starts else description
    if base and description.count(base) == 1:
        return base, base + added
    return description, new


def _clause(lead: str) -> re.Pattern[str]:
    return re.compile(rf"\b{re.escape(lead)}:\s*(?P<words>[^.]*)\.", re.IGNORECASE)


def _listed(listed: str, words: Sequence[str]) -> list[str]:
    """The clause's words (`"a, b"`) then `words`, each once, in order."""
    items = [w.strip() for w in listed.split(",") if w.strip()]
    return list(dict.fromkeys([*items, *words]))


def _with_description(document: FolderDocument, description: str) -> Skill:
    parts = tuple((n, description if n == DESCRIPTION else t) for n, t in document.parts)
    return FolderDocument(parts).to_skill()
