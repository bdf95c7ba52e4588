"""Commands: what a shell command of an agent's does, and what a fix changed, read as text.

Sleep's evidence (`skillopt_dsl.sleep.evidence`) compares the commands an agent ran: a failed
one with the similar one that then succeeded, the attempt a user or a hook turned down with
the one after it. `command_core` strips a command to the part that does the work (no `cd`,
wrappers, secret assignments, pipes into `tail` or redirections); `program_name`,
`is_exploratory` (`ls`, `grep`, `git status`, ... are never evidence), `is_verification`
(tests, build, lint) and `command_similarity` read that core; `fix_check` turns the difference
between a failed command and its fix into a `contains` / `not_contains` check that the failed
command fails and the fix passes.
"""

from __future__ import annotations

import re

from rapidfuzz import fuzz

from skillopt_dsl.sleep.tasks import Check, Contains, NotContains, check_passes

__all__ = [
    "MAX_SPAN_CHARS",
    "command_core",
    "command_similarity",
    "fix_check",
    "is_exploratory",
    "is_verification",
    "program_name",
]

MAX_SPAN_CHARS = 80

_SECRET_ENV = re.compile(
    r"^(?:[A-Z_][A-Z0-9_]*=\S*\[REDACTED|[A-Z0-9_]*(?:KEY|SECRET|TOKEN|PASSW|AUTH|CREDENTIAL)"
    r"[A-Z0-9_]*=)"
)
"""A leading `NAME=value` that holds a secret (redacted, or named like one): never kept."""
_EXPLORE = frozenset(
    re.findall(
        r"\S+",
        "ls cat head tail grep rg ag find fd which echo pwd wc test [ diff file stat tree sed awk "
        "less more true false sleep type whoami env printenv date open",
    )
)
_GIT_READ = frozenset(
    re.findall(r"\S+", "status diff log show branch rev-parse remote fetch blame ls-files")
)
_VERIFY = re.compile(
    r"(?i)\b(?:test|tests|pytest|jest|vitest|mocha|rspec|cargo|go|mix|make|npm|pnpm|yarn|bun"
    r"|tox|nox|ruff|mypy|pyright|tsc|eslint|prettier|lint|build|gradle|mvn|dotnet|phpunit"
    r"|swift|bazel|just|uv|poetry|rake|bundle|deno|check)\b"
)


def command_core(command: str) -> str:
    """The part of a shell command that does the work: the last `&&` / `;` segment, without
    leading `cd`, wrappers (`time`, `sudo`), leading secret assignments (`API_KEY=...`), pipes
    into `tail`/`head`/`grep` and redirections.

    >>> command_core("cd /work/app && pytest tests -q 2>&1 | tail -20")
    'pytest tests -q'
    """
    segments = [s.strip() for s in re.split(r"&&|;|\n", command) if s.strip()]
    work = [s for s in segments if not re.match(r"^(?:cd|export|source|\.)\s", s)]
    core = (work or segments or [""])[-1]
    core = re.split(r"\s\|\s*(?:tail|head|grep|less|tee|cat|sed|awk)\b", core)[0]
    core = re.sub(r"\s*\d?>&?\d?\s*\S*$", "", core) if re.search(r"\d?>", core) else core
    core = re.sub(r"^(?:time|sudo|timeout\s+\d+\w?)\s+", "", core.strip())
    tokens = core.split()
    while tokens and _SECRET_ENV.match(tokens[0]):
        tokens = tokens[1:]
    return " ".join(tokens)


def program_name(command: str) -> str:
    """The program the command's core runs (`pytest`, `git`), without its directory or the
    `NAME=value` assignments before it; "" for an empty command."""
    tokens = [t for t in command_core(command).split() if not re.match(r"^[A-Z_][A-Z0-9_]*=", t)]
    return tokens[0].rsplit("/", 1)[-1] if tokens else ""


def is_exploratory(command: str) -> bool:
    """Whether the command only looks around (`ls`, `cat`, `grep`, `git status`, ...)."""
    tokens = command_core(command).split()
    program = program_name(command)
    if program == "git":
        return len(tokens) < 2 or tokens[1] in _GIT_READ
    return program in _EXPLORE or not program


def is_verification(command: str) -> bool:
    """Whether the command's core verifies the work (tests, a build, a linter, a type check)."""
    return bool(_VERIFY.search(command_core(command)))


def command_similarity(a: str, b: str) -> float:
    """How alike two commands' cores are, 0 to 100 (`rapidfuzz.fuzz.ratio`)."""
    return float(fuzz.ratio(command_core(a), command_core(b)))


def fix_check(failed: str, fixed: str) -> Check | None:
    """`contains` the part of `fixed` that is new, or `not_contains` what was dropped; None
    when neither tells the two commands apart."""
    old, new = command_core(failed).split(), command_core(fixed).split()
    added = [i for i, token in enumerate(new) if token not in set(old)]
    check: Check | None = None
    if added:
        span = _span(new, added[0], added[-1])
        check = Contains(value=span) if span else None
    else:
        dropped = [i for i, token in enumerate(old) if token not in set(new)]
        span = _span(old, dropped[0], dropped[-1]) if dropped else None
        if span and span.casefold() not in fixed.casefold():
            check = NotContains(value=span)
    if check is None or check_passes(check, failed) or not check_passes(check, fixed):
        return None
    return check


def _span(tokens: list[str], first: int, last: int) -> str | None:
    span = " ".join(tokens[first : last + 1])
    if len(span) < 4:
        span = " ".join(tokens[max(first - 1, 0) : last + 2])
    if len(span) > MAX_SPAN_CHARS:
        span = tokens[first] if len(tokens[first]) >= 4 else ""
    return span if len(span) >= 3 and len(span) <= MAX_SPAN_CHARS else None
