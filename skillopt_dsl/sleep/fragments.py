"""Fragments: what a user's message names, read without a model.

Sleep's evidence (`skillopt_dsl.sleep.evidence`) turns a correction, a hook's feedback or a
compaction summary into checks by what the text names: backticked text, `KEY=value`
assignments, `--flags`, paths and (in a user's own words) "use X". `fragments` lists those
names longest first, `negated_names` the ones the text turns down ("not X", "instead of X",
"don't use X"), and `meaningful` tells a name worth a check from a stopword, a number or a
fragment too short to tell two replies apart.
"""

from __future__ import annotations

import re

__all__ = ["fragments", "meaningful", "negated_names"]

_BACKTICK = re.compile(r"`([^`\n]{2,80})`")
_ENV = re.compile(r"(?<![\w$])[A-Z][A-Z0-9_]{1,40}=[^\s`'\",;)]+")
_FLAG = re.compile(r"(?<![\w-])--[a-zA-Z][\w-]*(?:=[^\s`'\",;)]+)?")
_PATH = re.compile(
    r"(?<![\w/.~-])(?:\.{1,2}/)?(?:[\w.-]+/)+[\w.-]*\w"
    r"|(?<![\w/.-])[\w-]+\.(?:py|pyi|ts|tsx|js|jsx|mjs|rs|go|rb|ex|exs|erl|java|kt|scala|md|json"
    r"|toml|ya?ml|sh|sql|c|h|cc|cpp|hpp|cs|php|swift|vue|svelte|css|scss|html|cfg|ini|lock"
    r"|gradle|tf|proto|txt)\b"
)
_USE = re.compile(r"(?i)\b(?:use|using|with|via|try|run)\s+([a-z][\w.:+-]{1,40})")
_NEGATED = re.compile(
    r"(?i)\b(?:not|instead of|rather than|don'?t use|do not use|never use|stop using|without)"
    r"\s+`?([\w.:/=+-]{2,60})`?"
)
_STOPWORDS = frozenset(
    re.findall(
        r"\S+",
        "a an the it its this that these those them they there here me my you your we our is are "
        "was be been to of in on at for and or but so if then than with without from by as all "
        "any some one two more less just only also again still now yet what which who how why "
        "when where do does did done make made use used run running try please can could should "
        "would will not no yes ok okay sure thing things way file files code test tests work "
        "working fix fixed change changes changed good bad right wrong new old same other "
        "another like",
    )
)


def fragments(text: str, *, plain_words: bool = True) -> list[str]:
    """What a message names: backticked text, `KEY=value`, `--flags`, paths and (with
    `plain_words`) "use X" (longest first; one that is part of another is dropped).

    >>> fragments("no, run it with MIX_ENV=test and use `mix test --trace`")
    ['mix test --trace', 'MIX_ENV=test']
    """
    found: list[str] = []
    for pattern in (_BACKTICK, _ENV, _FLAG, _PATH):
        found += [m.group(1) if m.groups() else m.group(0) for m in pattern.finditer(text)]
    if plain_words:
        found += [m.group(1) for m in _USE.finditer(text)]
    cleaned = [f.strip().strip(".,:;") for f in found]
    kept = [f for f in cleaned if meaningful(f)]
    ordered = sorted(dict.fromkeys(kept), key=len, reverse=True)
    result: list[str] = []
    for item in ordered:
        if not any(item.casefold() in longer.casefold() for longer in result):
            result.append(item)
    return result


def meaningful(fragment: str) -> bool:
    """Whether `fragment` can be a check: three characters or more, not a stopword ("use",
    "file", "wrong", ...) and not a bare number."""
    word = fragment.casefold()
    return len(word) >= 3 and word not in _STOPWORDS and not word.isdigit()


def negated_names(text: str) -> list[str]:
    """The names `text` turns down ("not X", "instead of X", "don't use X", "without X")."""
    return [m.group(1).strip(".,:;") for m in _NEGATED.finditer(text) if meaningful(m.group(1))]
