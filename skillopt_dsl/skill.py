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
from typing import Annotated, Any, Final, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter
from rapidfuzz.distance import Indel, Levenshtein

from skillopt_dsl.errors import UserInputError

logger = logging.getLogger(__name__)

FUZZY_THRESHOLD: Final[float] = 0.9
"""Minimum similarity (rapidfuzz `Indel.normalized_similarity`) for a fuzzy anchor match."""

FUZZY_LENGTH_TOLERANCE: Final[float] = 0.2
"""Fuzzy candidate windows have a length within this fraction of the anchor's length."""

FUZZY_MAX_RATIO_CALLS: Final[int] = 16
"""At most this many candidate windows (the best by a cheap upper bound) get a full ratio."""

FUZZY_MAX_CHARS: Final[int] = 2000
"""Longer anchors are matched exactly or ignoring whitespace only (fuzzy would be too slow)."""

FUZZY_WORD_UNITS_MAX_CHARS: Final[int] = 240
"""Anchors up to this length are matched on word boundaries; longer ones on line boundaries."""

PROTECTED_OPEN: Final[str] = "<!-- protected -->"
PROTECTED_CLOSE: Final[str] = "<!-- /protected -->"

_TOKEN_RE = re.compile(r"\w+|[^\w\s]")
_HEADING_RE = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*$")
_CLOSING_HASHES_RE = re.compile(r"(?:^|[ \t]+)#+$")
_FENCE_RE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_LIST_ITEM_RE = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s")

Status = Literal["applied", "not_matched", "refused"]
MatchKind = Literal["exact", "whitespace", "fuzzy", "heading", "end"]


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


# --------------------------------------------------------------------------- edits


class _EditBase(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    rationale: str = ""
    """Why the proposer wants this edit; kept in the run log, never applied to the text."""


class Add(_EditBase):
    """Insert `text` as new lines.

    `after` is a heading (its title ``"Rules"`` or its full line ``"## Rules"``: the text goes at
    the end of that section, before the next heading of the same or a higher level) or else an
    anchor text (the text goes on a new line after the line where the anchor ends). `None`
    appends at the end of the document.
    """

    kind: Literal["add"] = "add"
    text: str
    after: str | None = None


class Replace(_EditBase):
    """Replace the text matching `old` with `new`."""

    kind: Literal["replace"] = "replace"
    old: str
    new: str


class Delete(_EditBase):
    """Delete the text matching `old` (with its line break when it is a whole line)."""

    kind: Literal["delete"] = "delete"
    old: str


Edit = Annotated[Add | Replace | Delete, Field(discriminator="kind")]
EditList: TypeAdapter[list[Edit]] = TypeAdapter(list[Edit])


def parse_edits(data: object) -> list[Edit]:
    """Validate a list of edits from JSON text/bytes or from Python objects (dicts or edits).

    Raises:
        pydantic.ValidationError: an item has an unknown ``kind``, a missing or extra field.
    """
    if isinstance(data, str | bytes | bytearray):
        return EditList.validate_json(data)
    return EditList.validate_python(data)


# --------------------------------------------------------------------------- reports


@dataclass(frozen=True)
class EditOutcome:
    """What happened to one edit.

    Attributes:
        edit: the edit as proposed.
        status: ``applied``, ``not_matched`` (its anchor was not found or was ambiguous) or
            ``refused`` (found, but not allowed: protected region, no-op, empty anchor).
        reason: a human-readable explanation (empty only for a plain exact application).
        match: how the anchor was located, or `None` when it was not.
        similarity: the fuzzy similarity (for fuzzy matches and fuzzy misses), else `None`.
    """

    edit: Edit
    status: Status
    reason: str
    match: MatchKind | None = None
    similarity: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of this outcome."""
        return {
            "edit": self.edit.model_dump(mode="json"),
            "status": self.status,
            "reason": self.reason,
            "match": self.match,
            "similarity": self.similarity,
        }


@dataclass(frozen=True)
class ApplyReport:
    """The outcomes of `Skill.apply`, one per edit, in the order the edits were given."""

    outcomes: tuple[EditOutcome, ...]

    def _with(self, status: Status) -> list[EditOutcome]:
        return [outcome for outcome in self.outcomes if outcome.status == status]

    @property
    def applied(self) -> list[EditOutcome]:
        """Outcomes of edits that changed the text."""
        return self._with("applied")

    @property
    def not_matched(self) -> list[EditOutcome]:
        """Outcomes of edits whose anchor was not found (or was ambiguous)."""
        return self._with("not_matched")

    @property
    def refused(self) -> list[EditOutcome]:
        """Outcomes of edits that were found but not allowed."""
        return self._with("refused")

    @property
    def all_applied(self) -> bool:
        """True when every edit was applied (vacuously true for no edits)."""
        return all(outcome.status == "applied" for outcome in self.outcomes)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: counts and every outcome."""
        return {
            "applied": len(self.applied),
            "not_matched": len(self.not_matched),
            "refused": len(self.refused),
            "outcomes": [outcome.to_dict() for outcome in self.outcomes],
        }


# --------------------------------------------------------------------------- structure


@dataclass(frozen=True)
class Section:
    """A slice of the document from one ATX heading to the next (of any level).

    Attributes:
        heading: the heading's title without the ``#`` marks, or `None` for the text before
            the first heading.
        level: 1..6 for a heading, 0 for the text before the first heading.
        start: offset of the section's first character (the heading line) in the text.
        end: offset one past its last character.
        text: ``skill.text[start:end]``.
    """

    heading: str | None
    level: int
    start: int
    end: int
    text: str


@dataclass(frozen=True)
class _Heading:
    level: int
    title: str
    line: str
    start: int
    line_end: int


def _lines_with_offsets(text: str) -> list[tuple[int, str]]:
    """Each line (split on "\\n", without its line break or a trailing "\\r") and its offset."""
    offsets, start = [], 0
    for line in text.split("\n"):
        offsets.append((start, line.rstrip("\r")))
        start += len(line) + 1
    return offsets


def _fence_state(line: str, fence: str | None) -> tuple[str | None, bool]:
    """Return the fence open after `line` and whether `line` is a fence line."""
    found = _FENCE_RE.match(line)
    if found is None:
        return fence, False
    marker = found.group(1)
    if fence is None:
        return marker, True
    if marker[0] == fence[0] and len(marker) >= len(fence) and not line.strip()[len(marker) :]:
        return None, True
    return fence, False


def _headings(text: str) -> list[_Heading]:
    headings, fence = [], None
    for start, line in _lines_with_offsets(text):
        fence, is_fence = _fence_state(line, fence)
        if is_fence or fence is not None:
            continue
        found = _HEADING_RE.match(line)
        if found is None:
            continue
        title = _CLOSING_HASHES_RE.sub("", found.group(2) or "").strip()
        level = len(found.group(1))
        headings.append(_Heading(level, title, line.strip(), start, start + len(line)))
    return headings


def _sections(text: str) -> list[Section]:
    headings = _headings(text)
    sections = []
    first = headings[0].start if headings else len(text)
    if text[:first].strip():
        sections.append(Section(None, 0, 0, first, text[:first]))
    for index, heading in enumerate(headings):
        end = headings[index + 1].start if index + 1 < len(headings) else len(text)
        sections.append(
            Section(heading.title, heading.level, heading.start, end, text[heading.start : end])
        )
    return sections


@dataclass(frozen=True)
class _Region:
    start: int
    end: int
    terminated: bool

    def contains_point(self, pos: int) -> bool:
        return self.start < pos < self.end or (not self.terminated and pos > self.start)

    def overlaps(self, start: int, end: int) -> bool:
        return start < self.end and self.start < end


def _protected_regions(text: str) -> list[_Region]:
    regions, pos = [], 0
    while (start := text.find(PROTECTED_OPEN, pos)) != -1:
        close = text.find(PROTECTED_CLOSE, start + len(PROTECTED_OPEN))
        if close == -1:
            regions.append(_Region(start, len(text), terminated=False))
            break
        end = close + len(PROTECTED_CLOSE)
        regions.append(_Region(start, end, terminated=True))
        pos = end
    return regions


def _protected_texts(text: str) -> list[str]:
    return [text[region.start : region.end] for region in _protected_regions(text)]


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
        return _sections(self.text)

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


# --------------------------------------------------------------------------- anchor matching


@dataclass(frozen=True)
class _Span:
    start: int
    end: int
    match: MatchKind
    similarity: float | None = None


@dataclass(frozen=True)
class _Miss:
    reason: str
    similarity: float | None = None


def _occurrences(haystack: str, needle: str) -> list[int]:
    found, pos = [], haystack.find(needle)
    while pos != -1:
        found.append(pos)
        pos = haystack.find(needle, pos + 1)
    return found


def _exact(text: str, target: str) -> _Span | _Miss | None:
    found = _occurrences(text, target)
    if len(found) > 1:
        return _Miss(f"ambiguous: {len(found)} occurrences")
    if found:
        return _Span(found[0], found[0] + len(target), "exact")
    return None


def _collapse(text: str) -> tuple[str, list[int]]:
    """Collapse whitespace runs to one space; map each output index to its input offset."""
    chars, offsets, in_space = [], [], False
    for index, char in enumerate(text):
        if char.isspace():
            if not in_space:
                chars.append(" ")
                offsets.append(index)
            in_space = True
        else:
            chars.append(char)
            offsets.append(index)
            in_space = False
    return "".join(chars), offsets


def _whitespace(text: str, target: str) -> _Span | _Miss | None:
    needle = " ".join(target.split())
    collapsed, offsets = _collapse(text)
    found = _occurrences(collapsed, needle)
    if len(found) > 1:
        return _Miss(f"ambiguous: {len(found)} occurrences (whitespace-insensitive)")
    if found:
        start, last = found[0], found[0] + len(needle) - 1
        return _Span(offsets[start], offsets[last] + 1, "whitespace")
    return None


@dataclass(frozen=True)
class _Unit:
    start: int
    end: int
    norm: str


def _units(text: str, by_line: bool) -> list[_Unit]:
    units = []
    for found in re.finditer(r"[^\n]*\S[^\n]*" if by_line else r"\S+", text):
        raw = found.group()
        start = found.start() + len(raw) - len(raw.lstrip())
        end = found.end() - (len(raw) - len(raw.rstrip()))
        units.append(_Unit(start, end, " ".join(raw.split())))
    return units


def _window_pairs(
    starts: np.ndarray, ends: np.ndarray, low: float, high: float
) -> tuple[np.ndarray, np.ndarray]:
    """All (first, last) unit index pairs whose joined length lies in [low, high]."""
    first_last = np.searchsorted(ends, starts + low, side="left")
    first_last = np.maximum(first_last, np.arange(len(starts)))
    stop = np.searchsorted(ends, starts + high, side="right")
    counts = np.maximum(stop - first_last, 0)
    first = np.repeat(np.arange(len(starts)), counts)
    step = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
    return first, np.repeat(first_last, counts) + step


def _upper_bounds(joined: str, needle: str, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """An upper bound of each window's similarity to the needle, vectorised.

    It counts the characters the window shares with the needle (as multisets; difflib calls
    this `quick_ratio`), which bounds the LCS and so the real similarity from above, so windows below the threshold never need a full ratio.
    """
    alphabet = {char: index for index, char in enumerate(sorted(set(needle)))}
    codes = np.fromiter((alphabet.get(c, -1) for c in joined), dtype=np.int64, count=len(joined))
    hits = np.nonzero(codes >= 0)[0]
    cumulative = np.zeros((len(alphabet), len(joined) + 1), dtype=np.int32)
    cumulative[codes[hits], hits + 1] = 1
    cumulative = cumulative.cumsum(axis=1)
    wanted = np.array([needle.count(char) for char in alphabet])[:, None]
    bounds = np.empty(len(lo))
    chunk = max(1, 4_000_000 // len(alphabet))
    for at in range(0, len(lo), chunk):
        window_lo, window_hi = lo[at : at + chunk], hi[at : at + chunk]
        shared = cumulative[:, window_hi] - cumulative[:, window_lo]
        common = np.minimum(shared, wanted).sum(axis=0)
        bounds[at : at + chunk] = 2 * common / (window_hi - window_lo + len(needle))
    return bounds


def _best_windows(units: list[_Unit], needle: str) -> tuple[float, list[tuple[int, int]]]:
    """The best similarity found and every window reaching it, as (first, last) unit indexes.

    Windows are tried best upper bound first, only while their bound can still reach both the
    threshold and the best ratio so far, and never more than `FUZZY_MAX_RATIO_CALLS` of them.
    When no window's bound reaches the threshold, no ratio is computed: the similarity
    returned is then the best upper bound (the real similarity is at most that) and no window.
    """
    joined = " ".join(unit.norm for unit in units)
    lengths = np.array([len(unit.norm) for unit in units], dtype=np.int64)
    starts = np.cumsum(lengths + 1) - lengths - 1
    ends = starts + lengths
    low = len(needle) * (1 - FUZZY_LENGTH_TOLERANCE)
    first, last = _window_pairs(starts, ends, low, len(needle) * (1 + FUZZY_LENGTH_TOLERANCE))
    if not len(first):
        return 0.0, []
    bounds = _upper_bounds(joined, needle, starts[first], ends[last])
    order = np.lexsort((last, first, -bounds))
    if bounds[order[0]] < FUZZY_THRESHOLD:
        return float(bounds[order[0]]), []
    best, ties = 0.0, []
    for k in order[:FUZZY_MAX_RATIO_CALLS]:
        if bounds[k] < max(best, FUZZY_THRESHOLD):
            break
        window_text = joined[starts[first[k]] : ends[last[k]]]
        ratio = Indel.normalized_similarity(window_text, needle)
        window = (int(first[k]), int(last[k]))
        if ratio > best:
            best, ties = ratio, [window]
        elif ratio == best:
            ties.append(window)
    return best, ties


def _disjoint_count(units: list[_Unit], windows: list[tuple[int, int]]) -> int:
    """The largest number of pairwise non-overlapping windows (greedy by end offset)."""
    spans = sorted(((units[a].start, units[b].end) for a, b in windows), key=lambda s: s[1])
    count, reach = 0, -1
    for start, end in spans:
        if start >= reach:
            count, reach = count + 1, end
    return count


def _fuzzy(text: str, target: str) -> _Span | _Miss:
    needle = " ".join(target.split())
    if len(needle) > FUZZY_MAX_CHARS:
        return _Miss(
            f"no match: not found exactly or ignoring whitespace, and anchors longer than "
            f"{FUZZY_MAX_CHARS} characters are not fuzzy-matched; quote the text exactly"
        )
    units = _units(text, by_line=len(needle) > FUZZY_WORD_UNITS_MAX_CHARS)
    best, ties = _best_windows(units, needle)
    if not ties:
        return _Miss(f"no match: fuzzy similarity at most {best:.3f} < {FUZZY_THRESHOLD}", best)
    if best < FUZZY_THRESHOLD:
        return _Miss(f"no match: best fuzzy similarity {best:.3f} < {FUZZY_THRESHOLD}", best)
    if (count := _disjoint_count(units, ties)) > 1:
        return _Miss(f"ambiguous: {count} fuzzy matches with similarity {best:.3f}", best)
    first, last = ties[0]
    return _Span(units[first].start, units[last].end, "fuzzy", best)


def _locate(text: str, target: str) -> _Span | _Miss:
    """Find `target` in `text`: exact, then whitespace-insensitive, then fuzzy."""
    for stage in (_exact, _whitespace):
        found = stage(text, target)
        if found is not None:
            return found
    return _fuzzy(text, target)


# --------------------------------------------------------------------------- applying


def _outcome(
    edit: Edit, status: Status, reason: str, span: _Span | _Miss | None = None
) -> EditOutcome:
    match = span.match if isinstance(span, _Span) else None
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


def _section_insert_point(text: str, headings: list[_Heading], index: int) -> int:
    heading = headings[index]
    end = next((h.start for h in headings[index + 1 :] if h.level <= heading.level), len(text))
    content_end = heading.line_end + len(text[heading.line_end : end].rstrip())
    return _line_end_after(text, content_end)


def _heading_point(text: str, after: str) -> tuple[int, str] | _Miss | None:
    headings = _headings(text)
    wanted = after.strip()
    hits = [i for i, h in enumerate(headings) if wanted in (h.title, h.line)]
    if len(hits) > 1:
        return _Miss(f"ambiguous: {len(hits)} headings match {wanted!r}")
    if hits:
        return _section_insert_point(text, headings, hits[0]), "heading"
    return None


def _add_point(text: str, after: str | None) -> tuple[int, _Span] | _Miss:
    if after is None:
        return len(text), _Span(len(text), len(text), "end")
    heading = _heading_point(text, after)
    if isinstance(heading, tuple):
        return heading[0], _Span(heading[0], heading[0], "heading")
    if heading is not None:
        return heading
    found = _locate(text, after)
    if isinstance(found, _Miss):
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
    for region in _protected_regions(text):
        if start == end and region.contains_point(start):
            return f"insertion point {start} is inside a protected region"
        if start < end and region.overlaps(start, end):
            return f"matched text [{start}:{end}] overlaps a protected region"
    return None


def _edit_span(text: str, edit: Replace | Delete, span: _Span) -> tuple[int, int, str]:
    start, end = span.start, span.end
    if isinstance(edit, Replace):
        return start, end, edit.new
    whole_line = (start == 0 or text[start - 1] == "\n") and text[end : end + 1] == "\n"
    return start, end + 1 if whole_line else end, ""


def _locate_change(text: str, edit: Edit) -> tuple[int, int, str, _Span] | _Miss:
    if isinstance(edit, Add):
        point = _add_point(text, edit.after)
        if isinstance(point, _Miss):
            return point
        return point[0], point[0], edit.text, point[1]
    found = _locate(text, edit.old)
    if isinstance(found, _Miss):
        return found
    return (*_edit_span(text, edit, found), found)


def _apply_one(text: str, edit: Edit) -> tuple[str, EditOutcome]:
    refusal = _refusal(edit)
    if refusal is not None:
        return text, _outcome(edit, "refused", refusal)
    located = _locate_change(text, edit)
    if isinstance(located, _Miss):
        return text, _outcome(edit, "not_matched", located.reason, located)
    start, end, new, span = located
    blocked = _protected_reason(text, start, end)
    if blocked is not None:
        return text, _outcome(edit, "refused", blocked, span)
    if isinstance(edit, Add):
        result = _insert_block(text, start, new)
    else:
        result = text[:start] + new + text[end:]
    if _protected_texts(result) != _protected_texts(text):
        return text, _outcome(edit, "refused", "would change the protected regions", span)
    reason = "" if span.match == "exact" else f"matched by {span.match}"
    return result, _outcome(edit, "applied", reason, span)
