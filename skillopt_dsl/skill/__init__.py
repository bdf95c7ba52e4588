"""The trainable state: `Skill` (immutable markdown text) and the typed edits applied to it.

- `document`: `Skill`, `Skill.apply` and its `ApplyReport`, the token measures of a change
  (`tokenize`, `token_distance`, `measure_change`, `diff`), parsing a model's edit list;
- `edits`: the typed edits (`Add`, `Replace`, `Delete`) and each edit's reported outcome;
- `anchors`: how an edit's anchor is found in the text (exact, whitespace, fuzzy);
- `sections`: the document's markdown structure (headings, protected regions).

Every public name is importable from `skillopt_dsl.skill` itself.
"""

from __future__ import annotations

from skillopt_dsl.skill.document import (
    FUZZY_LENGTH_TOLERANCE,
    FUZZY_MAX_CHARS,
    FUZZY_MAX_RATIO_CALLS,
    FUZZY_THRESHOLD,
    FUZZY_WORD_UNITS_MAX_CHARS,
    PROTECTED_CLOSE,
    PROTECTED_OPEN,
    Add,
    ApplyReport,
    Delete,
    Edit,
    EditList,
    EditOutcome,
    MatchKind,
    Replace,
    Section,
    Skill,
    Status,
    diff,
    measure_change,
    parse_edits,
    token_distance,
    tokenize,
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
