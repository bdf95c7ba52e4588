"""A skill document's markdown structure: its sections (ATX headings outside code fences) and its
protected regions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

PROTECTED_OPEN: Final[str] = "<!-- protected -->"
PROTECTED_CLOSE: Final[str] = "<!-- /protected -->"

_HEADING_RE = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*$")
_CLOSING_HASHES_RE = re.compile(r"(?:^|[ \t]+)#+$")
_FENCE_RE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


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
class Heading:
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


def find_headings(text: str) -> list[Heading]:
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
        headings.append(Heading(level, title, line.strip(), start, start + len(line)))
    return headings


def split_sections(text: str) -> list[Section]:
    headings = find_headings(text)
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


def protected_regions(text: str) -> list[_Region]:
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


def protected_texts(text: str) -> list[str]:
    return [text[region.start : region.end] for region in protected_regions(text)]
