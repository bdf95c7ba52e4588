"""The trainable state: `Skill` (immutable markdown text) and the typed edits applied to it.

A `Skill` is the exact text the target model receives. Optimizers change it only through typed
edits (`Add`, `Replace`, `Delete`); `Skill.apply` returns the new skill and an `ApplyReport` that
says, for every edit, whether it was applied, how its anchor matched, or why it was not applied.
Nothing is silently converted: a `Replace` whose `old` text is not found is reported as
`not_matched`, never turned into an `Add`.

Anchor matching (for `Replace.old`, `Delete.old` and a non-heading `Add.after`) tries, in order:

1. ``exact``: the anchor occurs verbatim exactly once (several occurrences: "ambiguous").
2. ``whitespace``: equal after collapsing every run of whitespace to one space on both sides.
3. ``fuzzy``: the most similar window of the document by the normalised InDel similarity
   ``2 * LCS / (len(a) + len(b))`` (rapidfuzz's `fuzz.ratio` / 100; whitespace collapsed on both
   sides), accepted only if the similarity is at least
   `FUZZY_THRESHOLD`. The search is bounded: windows start and end on word boundaries (on line
   boundaries for anchors over `FUZZY_WORD_UNITS_MAX_CHARS`), their length is within
   `FUZZY_LENGTH_TOLERANCE` of the anchor's, a vectorised upper bound (``quick_ratio``) ranks
   them, and at most `FUZZY_MAX_RATIO_CALLS` full ratios are computed. Anchors longer than
   `FUZZY_MAX_CHARS` are not fuzzy-matched. Two equally good disjoint windows: "ambiguous".

Text between ``<!-- protected -->`` and ``<!-- /protected -->`` (markers included; an unterminated
opening marker protects to the end of the document) is never changed: an edit touching it is
reported as ``refused``, and so is an edit whose new text contains a marker (only the author
protects text).

Example:
    >>> skill = Skill("# Task\\n\\n## Rules\\n\\n- Be brief.\\n")
    >>> new, report = skill.apply([Add(after="Rules", text="- Answer in English.")])
    >>> new.text
    '# Task\\n\\n## Rules\\n\\n- Be brief.\\n- Answer in English.\\n'
    >>> report.all_applied
    True
"""

from __future__ import annotations

import difflib
import hashlib
import logging
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

from rapidfuzz.distance import Levenshtein

from skillopt_dsl.errors import UserInputError
from skillopt_dsl.skill.anchors import (
    FUZZY_LENGTH_TOLERANCE,
    FUZZY_MAX_CHARS,
    FUZZY_MAX_RATIO_CALLS,
    FUZZY_THRESHOLD,
    FUZZY_WORD_UNITS_MAX_CHARS,
    Miss,
    Span,
    locate,
)
from skillopt_dsl.skill.edits import (
    Add,
    ApplyReport,
    Delete,
    Edit,
    EditList,
    EditOutcome,
    MatchKind,
    Replace,
    Status,
    parse_edits,
)
from skillopt_dsl.skill.sections import (
    PROTECTED_CLOSE,
    PROTECTED_OPEN,
    Heading,
    Section,
    find_headings,
    protected_regions,
    protected_texts,
    split_sections,
)

__all__ = [
    "FUZZY_LENGTH_TOLERANCE",
    "FUZZY_MAX_CHARS",
    "FUZZY_MAX_RATIO_CALLS",
    "FUZZY_THRESHOLD",
    "FUZZY_WORD_UNITS_MAX_CHARS",
    "PROTECTED_CLOSE",
    "PROTECTED_OPEN",
    "Add",
    "ApplyReport",
    "Delete",
    "Edit",
    "EditList",
    "EditOutcome",
    "MatchKind",
    "Replace",
    "Section",
    "Skill",
    "Status",
    "diff",
    "measure_change",
    "parse_edits",
    "token_distance",
    "tokenize",
]

logger = logging.getLogger(__name__)

_TOKEN_RE = re.compile(r"\w+|[^\w\s]")
_LIST_ITEM_RE = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s")


# --------------------------------------------------------------------------- tokens and change


def tokenize(text: str) -> list[str]:
    """Split text into word and punctuation tokens (regex ``\\w+|[^\\w\\s]``); deterministic."""
    return _TOKEN_RE.findall(text)


def _as_text(value: Skill | str) -> str:
    return value.text if isinstance(value, Skill) else value


def measure_change(before: Skill | str, after: Skill | str) -> float:
    """Relative token-level edit distance between two texts, in [0, 1].

    `token_distance` (the Levenshtein distance over token sequences) divided by the token count
    of the longer text; two empty texts give 0.0 and a complete rewrite gives 1.0.
    """
    a, b = tokenize(_as_text(before)), tokenize(_as_text(after))
    longest = max(len(a), len(b))
    if longest == 0:
        return 0.0
    return _token_distance(a, b) / longest


def token_distance(before: Skill | str, after: Skill | str) -> int:
    """The Levenshtein distance between the two texts' token sequences (see `tokenize`).

    The least number of token insertions, deletions and substitutions that turn `before` into
    `after` (rapidfuzz's C++ implementation). It is a true metric, so it obeys the triangle
    inequality: two steps of at most `a` and `b` tokens are at most `a + b` tokens apart. The
    textual learning rate bounds this number for every optimizer step.
    """
    return _token_distance(tokenize(_as_text(before)), tokenize(_as_text(after)))


def _token_distance(a: list[str], b: list[str]) -> int:
    codes: dict[str, int] = {}
    a_codes = [codes.setdefault(token, len(codes)) for token in a]
    b_codes = [codes.setdefault(token, len(codes)) for token in b]
    return int(Levenshtein.distance(a_codes, b_codes))


def diff(before: Skill | str, after: Skill | str) -> str:
    """A unified diff (``before`` -> ``after``) of two skill texts, for reports and logs."""
    lines = difflib.unified_diff(
        _as_text(before).splitlines(keepends=True),
        _as_text(after).splitlines(keepends=True),
        fromfile="before",
        tofile="after",
    )
    return "".join(
        line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines
    )


# --------------------------------------------------------------------------- the skill


@dataclass(frozen=True)
class Skill:
    """Immutable markdown text: the exact system prompt the target model receives.

    Attributes:
        text: the document, byte for byte (no newline or whitespace normalisation).
    """

    text: str

    def __post_init__(self) -> None:
        if not isinstance(self.text, str):
            raise UserInputError(
                f"Skill text must be a str, got {type(self.text).__name__}; "
                "use Skill.from_file(path) to read a .md file"
            )

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> Skill:
        """Read a skill from a UTF-8 file exactly as stored (line endings kept)."""
        try:
            with open(path, encoding="utf-8", newline="") as handle:
                return cls(handle.read())
        except FileNotFoundError as err:
            raise UserInputError(
                f"skill file {os.fspath(path)!r} does not exist; "
                "pass the path of an existing .md file"
            ) from err
        except UnicodeDecodeError as err:
            raise UserInputError(
                f"skill file {os.fspath(path)!r} is not valid UTF-8; re-save it as UTF-8"
            ) from err

    def __str__(self) -> str:
        return self.text

    @cached_property
    def hash(self) -> str:
        """The sha256 hex digest (64 characters) of the UTF-8 encoded text."""
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()

    @property
    def token_count(self) -> int:
        """The number of tokens `tokenize` finds in the text."""
        return len(tokenize(self.text))

    def sections(self) -> list[Section]:
        """The sections delimited by ATX headings (headings inside code fences are ignored).

        Text before the first heading is a section with heading `None`, present only when it
        contains something other than whitespace.
        """
        return split_sections(self.text)

    def apply(self, edits: Sequence[Edit]) -> tuple[Skill, ApplyReport]:
        """Apply `edits` in order, each to the text left by the previous ones.

        Never raises for an edit that cannot be applied: it is reported instead. `self` is not
        modified; the returned skill is a new object.
        """
        text, outcomes = self.text, []
        for edit in edits:
            text, outcome = _apply_one(text, edit)
            logger.debug("edit %s: %s (%s)", edit.kind, outcome.status, outcome.reason)
            outcomes.append(outcome)
        return Skill(text), ApplyReport(tuple(outcomes))


# --------------------------------------------------------------------------- applying


def _outcome(
    edit: Edit, status: Status, reason: str, span: Span | Miss | None = None
) -> EditOutcome:
    match = span.match if isinstance(span, Span) else None
    similarity = span.similarity if span is not None else None
    return EditOutcome(edit, status, reason, match, similarity)


def _first_line(text: str) -> str:
    return text.split("\n", 1)[0]


def _last_line(text: str) -> str:
    return text.rstrip("\n").rsplit("\n", 1)[-1]


def _continues_list(line: str, next_line: str) -> bool:
    return bool(_LIST_ITEM_RE.match(line) and _LIST_ITEM_RE.match(next_line))


def _insert_block(text: str, pos: int, block: str) -> str:
    """Insert `block` as whole lines at `pos` (a line start or the end of the text).

    Blocks are separated by a blank line, except consecutive list items.
    """
    body, before, after = block.strip("\n"), text[:pos], text[pos:]
    lead = "" if not before or before.endswith("\n") else "\n"
    if before.strip() and not (before + lead).endswith("\n\n"):
        lead += "" if _continues_list(_last_line(before), _first_line(body)) else "\n"
    trail = ""
    if _first_line(after).strip() and not _continues_list(_last_line(body), _first_line(after)):
        trail = "\n"
    return before + lead + body + "\n" + trail + after


def _line_end_after(text: str, pos: int) -> int:
    """Offset just after the line break of the line holding offset `pos` (or the text end)."""
    newline = text.find("\n", pos)
    return len(text) if newline == -1 else newline + 1


def _section_insert_point(text: str, headings: list[Heading], index: int) -> int:
    heading = headings[index]
    end = next((h.start for h in headings[index + 1 :] if h.level <= heading.level), len(text))
    content_end = heading.line_end + len(text[heading.line_end : end].rstrip())
    return _line_end_after(text, content_end)


def _heading_point(text: str, after: str) -> tuple[int, str] | Miss | None:
    headings = find_headings(text)
    wanted = after.strip()
    hits = [i for i, h in enumerate(headings) if wanted in (h.title, h.line)]
    if len(hits) > 1:
        return Miss(f"ambiguous: {len(hits)} headings match {wanted!r}")
    if hits:
        return _section_insert_point(text, headings, hits[0]), "heading"
    return None


def _add_point(text: str, after: str | None) -> tuple[int, Span] | Miss:
    if after is None:
        return len(text), Span(len(text), len(text), "end")
    heading = _heading_point(text, after)
    if isinstance(heading, tuple):
        return heading[0], Span(heading[0], heading[0], "heading")
    if heading is not None:
        return heading
    found = locate(text, after)
    if isinstance(found, Miss):
        return found
    return _line_end_after(text, found.end - 1), found


def _refusal(edit: Edit) -> str | None:
    """Why `edit` is refused whatever the text, or `None`."""
    if isinstance(edit, Add):
        if not edit.text.strip():
            return "no-op: empty text"
        if edit.after is not None and not edit.after.strip():
            return "empty anchor"
    elif not edit.old.strip():
        return "empty anchor"
    elif isinstance(edit, Replace) and edit.old == edit.new:
        return "no-op"
    new = edit.text if isinstance(edit, Add) else edit.new if isinstance(edit, Replace) else ""
    if PROTECTED_OPEN in new or PROTECTED_CLOSE in new:
        return "new text contains a protected-region marker; only the author may protect text"
    return None


def _protected_reason(text: str, start: int, end: int) -> str | None:
    for region in protected_regions(text):
        if start == end and region.contains_point(start):
            return f"insertion point {start} is inside a protected region"
        if start < end and region.overlaps(start, end):
            return f"matched text [{start}:{end}] overlaps a protected region"
    return None


def _edit_span(text: str, edit: Replace | Delete, span: Span) -> tuple[int, int, str]:
    start, end = span.start, span.end
    if isinstance(edit, Replace):
        return start, end, edit.new
    whole_line = (start == 0 or text[start - 1] == "\n") and text[end : end + 1] == "\n"
    return start, end + 1 if whole_line else end, ""


def _section_merge(text: str, block: str) -> tuple[int, str] | None:
    """For an end-of-document `Add` that opens a section `text` already has (one heading of
    that title and level): where its body goes (the end of that section) and the body. Two
    proposals composed into one candidate that each open `## Output format` give one section."""
    first, _, body = block.strip("\n").partition("\n")
    opened = find_headings(first + "\n")
    if len(opened) != 1 or not body.strip():
        return None
    wanted = opened[0]
    headings = find_headings(text)
    hits = [i for i, h in enumerate(headings) if (h.title, h.level) == (wanted.title, wanted.level)]
    if len(hits) != 1:
        return None
    return _section_insert_point(text, headings, hits[0]), body.strip("\n")


def _locate_change(text: str, edit: Edit) -> tuple[int, int, str, Span] | Miss:
    if isinstance(edit, Add) and edit.after is None:
        merged = _section_merge(text, edit.text)
        if merged is not None:
            return merged[0], merged[0], merged[1], Span(merged[0], merged[0], "heading")
    if isinstance(edit, Add):
        point = _add_point(text, edit.after)
        if isinstance(point, Miss):
            return point
        return point[0], point[0], edit.text, point[1]
    found = locate(text, edit.old)
    if isinstance(found, Miss):
        return found
    return (*_edit_span(text, edit, found), found)


def _apply_one(text: str, edit: Edit) -> tuple[str, EditOutcome]:
    refusal = _refusal(edit)
    if refusal is not None:
        return text, _outcome(edit, "refused", refusal)
    located = _locate_change(text, edit)
    if isinstance(located, Miss):
        return text, _outcome(edit, "not_matched", located.reason, located)
    start, end, new, span = located
    blocked = _protected_reason(text, start, end)
    if blocked is not None:
        return text, _outcome(edit, "refused", blocked, span)
    if isinstance(edit, Add):
        result = _insert_block(text, start, new)
    else:
        result = text[:start] + new + text[end:]
    if protected_texts(result) != protected_texts(text):
        return text, _outcome(edit, "refused", "would change the protected regions", span)
    reason = "" if span.match == "exact" else f"matched by {span.match}"
    return result, _outcome(edit, "applied", reason, span)
