"""Secret redaction: applied to every transcript text as it is read, before anything reaches
disk or a model.

Each pattern is anchored on word boundaries (a key must not be glued to the letters around it),
so ordinary text such as ``task-management-system``, ``risk-averse`` or ``token-bucket`` is never
touched. Every redaction is counted by kind; the counts go into the night's report.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

__all__ = ["REDACTION_KINDS", "Redactor"]

# Not preceded by a character that could belong to the same token.
_START = r"(?<![A-Za-z0-9_\-])"
# Not followed by one.
_END = r"(?![A-Za-z0-9_\-])"

_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "pem_private_key",
        re.compile(
            r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----.*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----",
            re.DOTALL,
        ),
    ),
    ("anthropic_key", re.compile(_START + r"sk-ant-[a-z]+\d{0,3}-[A-Za-z0-9_\-]{20,}" + _END)),
    (
        "openai_key",
        re.compile(
            _START
            + r"sk-(?:proj-|svcacct-|admin-)?(?=[A-Za-z0-9_\-]*\d)(?=[A-Za-z0-9_\-]*[A-Za-z])"
            + r"[A-Za-z0-9_\-]{20,}"
            + _END
        ),
    ),
    ("aws_access_key", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
    (
        "github_token",
        re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})\b"),
    ),
    ("slack_token", re.compile(_START + r"xox[abposr]-[A-Za-z0-9\-]{10,}" + _END)),
    ("google_api_key", re.compile(_START + r"AIza[0-9A-Za-z_\-]{35}" + _END)),
    (
        "jwt",
        re.compile(
            _START + r"eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}" + _END
        ),
    ),
)

# `Authorization: Bearer <value>`: the header name is kept, the credential replaced.
_AUTH_HEADER = re.compile(
    r"(?i)(?<![A-Za-z0-9])(authorization\s*:\s*(?:bearer|basic|token|digest)?\s*)"
    r"(?!\[REDACTED|(?:bearer|basic|token|digest)\b)([^\s\"',;]{6,})"
)
# `password=...`, `API_TOKEN: "..."`: the name is kept, the value replaced. A value counts when
# it is quoted or contains a digit, so `def f(token: str)` is left alone.
_ASSIGNMENT = re.compile(
    r"(?i)(?<![A-Za-z0-9])("
    r"password|passwd|pwd|passphrase|secret|client[_-]?secret|token|auth[_-]?token|"
    r"access[_-]?token|refresh[_-]?token|api[_-]?key|secret[_-]?key|private[_-]?key"
    r")(\s*[=:]\s*)(?!\[REDACTED)(?:(['\"])([^'\"\s]{4,})\3|([^\s'\",;)]*\d[^\s'\",;)]*))"
)

REDACTION_KINDS: tuple[str, ...] = (
    *(kind for kind, _ in _PATTERNS),
    "authorization_header",
    "secret_assignment",
)
"""Every kind of secret the redactor counts, in the order the patterns run."""


def _marker(kind: str) -> str:
    return f"[REDACTED:{kind}]"


@dataclass
class Redactor:
    """Replaces secrets with `[REDACTED:<kind>]` and counts each replacement in `counts`.

    >>> r = Redactor()
    >>> r.redact("key sk-proj-abc123DEF456ghi789JKL0 in task-management-system")
    'key [REDACTED:openai_key] in task-management-system'
    >>> dict(r.counts)
    {'openai_key': 1}
    """

    counts: Counter[str] = field(default_factory=Counter)

    @property
    def total(self) -> int:
        """How many secrets were replaced so far."""
        return sum(self.counts.values())

    def redact(self, text: str) -> str:
        """`text` with every secret replaced (counted)."""
        for kind, pattern in _PATTERNS:
            text, n = pattern.subn(_marker(kind), text)
            self.counts[kind] += n
        text, n = _AUTH_HEADER.subn(lambda m: m.group(1) + _marker("authorization_header"), text)
        self.counts["authorization_header"] += n
        text, n = _ASSIGNMENT.subn(
            lambda m: m.group(1) + m.group(2) + _marker("secret_assignment"), text
        )
        self.counts["secret_assignment"] += n
        for kind in [k for k, v in self.counts.items() if v == 0]:
            del self.counts[kind]
        return text
