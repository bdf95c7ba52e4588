"""Anchor matching: where an edit's anchor text lies in a document (exact, whitespace-insensitive,
then bounded fuzzy; see `skillopt_dsl.skill`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

import numpy as np
from rapidfuzz.distance import Indel

from skillopt_dsl.skill.edits import MatchKind

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


@dataclass(frozen=True)
class Span:
    start: int
    end: int
    match: MatchKind
    similarity: float | None = None


@dataclass(frozen=True)
class Miss:
    reason: str
    similarity: float | None = None


def _occurrences(haystack: str, needle: str) -> list[int]:
    found, pos = [], haystack.find(needle)
    while pos != -1:
        found.append(pos)
        pos = haystack.find(needle, pos + 1)
    return found


def _exact(text: str, target: str) -> Span | Miss | None:
    found = _occurrences(text, target)
    if len(found) > 1:
        return Miss(f"ambiguous: {len(found)} occurrences")
    if found:
        return Span(found[0], found[0] + len(target), "exact")
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


def _whitespace(text: str, target: str) -> Span | Miss | None:
    needle = " ".join(target.split())
    collapsed, offsets = _collapse(text)
    found = _occurrences(collapsed, needle)
    if len(found) > 1:
        return Miss(f"ambiguous: {len(found)} occurrences (whitespace-insensitive)")
    if found:
        start, last = found[0], found[0] + len(needle) - 1
        return Span(offsets[start], offsets[last] + 1, "whitespace")
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


def _fuzzy(text: str, target: str) -> Span | Miss:
    needle = " ".join(target.split())
    if len(needle) > FUZZY_MAX_CHARS:
        return Miss(
            f"no match: not found exactly or ignoring whitespace, and anchors longer than "
            f"{FUZZY_MAX_CHARS} characters are not fuzzy-matched; quote the text exactly"
        )
    units = _units(text, by_line=len(needle) > FUZZY_WORD_UNITS_MAX_CHARS)
    best, ties = _best_windows(units, needle)
    if not ties:
        return Miss(f"no match: fuzzy similarity at most {best:.3f} < {FUZZY_THRESHOLD}", best)
    if best < FUZZY_THRESHOLD:
        return Miss(f"no match: best fuzzy similarity {best:.3f} < {FUZZY_THRESHOLD}", best)
    if (count := _disjoint_count(units, ties)) > 1:
        return Miss(f"ambiguous: {count} fuzzy matches with similarity {best:.3f}", best)
    first, last = ties[0]
    return Span(units[first].start, units[last].end, "fuzzy", best)


def locate(text: str, target: str) -> Span | Miss:
    """Find `target` in `text`: exact, then whitespace-insensitive, then fuzzy."""
    for stage in (_exact, _whitespace):
        found = stage(text, target)
        if found is not None:
            return found
    return _fuzzy(text, target)
