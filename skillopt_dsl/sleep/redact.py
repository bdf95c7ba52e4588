"""Secret redaction: applied to every transcript text as it is read, before anything reaches
disk or a model.

Two families of rules run in order:

- **Key shapes** (`KEY_SHAPES`): a provider's token recognised by its own prefix and length
  (OpenAI `sk-`/`sk-proj-`, Anthropic `sk-ant-`, GitHub `ghp_`/`gho_`/`ghu_`/`ghs_`/`ghr_`/
  `github_pat_`, AWS `AKIA`/`ASIA`, Google `AIza`, Slack `xox*`, Stripe `sk_live_`/`rk_live_`,
  Hugging Face `hf_`, ...), PEM private-key blocks and JWTs. Each is anchored on word
  boundaries (a key must not be glued to the letters around it), so ordinary text such as
  ``task-management-system``, ``risk-averse`` or ``token-bucket`` is never touched.
- **Named values**: the value after a name that says it is secret, the name kept:
  `aws_secret_access_key = ...` / `AWS_SECRET_ACCESS_KEY=...` / `"SecretAccessKey": "..."`,
  `Authorization: Bearer ...` (and `X-Api-Key:`), credentials in a URL
  (`https://user:pw@host`, `?password=...`), and `password=` / `token:` / `api_key=` style
  assignments. An assignment's value counts only when it looks like data, not code: quoted
  (unless the whole value is a placeholder such as `"${DB_PASSWORD}"` or `"<token>"`), or
  a bare run of at least 6 characters with a digit that is not a call, an attribute path or a
  placeholder — so `token = Base.url_encode64(...)`, `def f(token: str)` and
  `password=os.environ["PW"]` are left alone (and not counted).

Every redaction is counted by kind; the counts go into the night's report, and they count
only text that was replaced.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["KEY_SHAPES", "REDACTION_KINDS", "Redactor"]

# Not preceded by a character that could belong to the same token.
_START = r"(?<![A-Za-z0-9_\-])"
# Not followed by one.
_END = r"(?![A-Za-z0-9_\-])"


def _shape(body: str) -> re.Pattern[str]:
    return re.compile(_START + body + _END)


_PEM = (
    r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
    r"(?:.*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|[A-Za-z0-9+/=:\s\-]*)"
)

KEY_SHAPES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("pem_private_key", re.compile(_PEM, re.DOTALL)),
    ("anthropic_key", _shape(r"sk-ant-[a-z]+\d{0,3}-[A-Za-z0-9_\-]{20,}")),
    (
        "openai_key",
        _shape(
            r"sk-(?:proj-|svcacct-|admin-)?(?=[A-Za-z0-9_\-]*\d)(?=[A-Za-z0-9_\-]*[A-Za-z])"
            r"[A-Za-z0-9_\-]{20,}"
        ),
    ),
    ("stripe_key", _shape(r"(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}")),
    ("stripe_webhook_secret", _shape(r"whsec_[A-Za-z0-9]{24,}")),
    ("aws_access_key", _shape(r"(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}")),
    ("github_token", _shape(r"(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})")),
    ("gitlab_token", _shape(r"glpat-[A-Za-z0-9_\-]{20,}")),
    ("slack_token", _shape(r"xox[abposre]-[A-Za-z0-9\-]{10,}")),
    (
        "slack_webhook",
        re.compile(r"https://hooks\.slack\.com/services/T[A-Z0-9]+/B[A-Z0-9]+/[A-Za-z0-9]{16,}"),
    ),
    ("google_api_key", _shape(r"AIza[0-9A-Za-z_\-]{35}")),
    ("huggingface_token", _shape(r"hf_(?=[A-Za-z0-9]*[A-Z0-9])[A-Za-z0-9]{30,}")),
    ("npm_token", _shape(r"npm_[A-Za-z0-9]{36}")),
    ("pypi_token", _shape(r"pypi-AgE[A-Za-z0-9_\-]{50,}")),
    ("sendgrid_key", _shape(r"SG\.[A-Za-z0-9_\-]{22}\.[A-Za-z0-9_\-]{43}")),
    ("digitalocean_token", _shape(r"do[por]_v1_[a-f0-9]{64}")),
    ("shopify_token", _shape(r"shp(?:at|ss|ca|pa)_[a-fA-F0-9]{32}")),
    ("jwt", _shape(r"eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}")),
)
"""Provider key shapes, each `(kind, pattern)`, in the order they run."""

_NOT_REDACTED = r"(?!\[REDACTED)"

# `aws_secret_access_key = ...`, `AWS_SECRET_ACCESS_KEY=...`, `"SecretAccessKey": "..."`,
# `--aws-secret-access-key ...`: the name kept, the value replaced.
_AWS_SECRET = re.compile(
    r"(?i)(?<![A-Za-z0-9])((?:aws[_\-]?secret[_\-]?(?:access[_\-]?)?|secret[_\-]?access[_\-]?)key"
    r"['\"]?"
    r"(?:\s*[=:]\s*|\s+)['\"]?)" + _NOT_REDACTED + r"([A-Za-z0-9/+=]{16,})(?![A-Za-z0-9/+=])"
)
# `Authorization: Bearer <value>`, `X-Api-Key: <value>`: the header name kept.
_AUTH_HEADER = re.compile(
    r"(?i)(?<![A-Za-z0-9\-])((?:authorization|proxy-authorization|x-api-key|api-key|x-auth-token)"
    r"['\"]?\s*:\s*['\"]?(?:bearer|basic|token|digest)?\s*)"
    + _NOT_REDACTED
    + r"(?!(?:bearer|basic|token|digest)\b)(?![$%{<])([^\s\"',;]{6,})"
)
# `scheme://user:password@host`: the password replaced.
_URL_CREDENTIALS = re.compile(
    r"(?<![A-Za-z0-9+.\-])([a-zA-Z][a-zA-Z0-9+.\-]*://[^\s/:@'\"<>]*:)"
    + _NOT_REDACTED
    + r"(?![$%{<])([^\s/@'\"<>]+)(?=@[^\s/@'\"<>])"
)
# `?password=...&`, `&token=...`: any value in a URL's query.
_QUERY_SECRET = re.compile(
    r"(?i)([?&](?:password|passwd|pwd|pass|secret|token|access_token|api_key|apikey|"
    r"client_secret)=)" + _NOT_REDACTED + r"([^\s&#'\"<>]{3,})"
)
_SECRET_NAME = (
    r"password|passwd|pwd|passphrase|secret|client[_-]?secret|token|auth[_-]?token|"
    r"access[_-]?token|refresh[_-]?token|api[_-]?key|secret[_-]?key|private[_-]?key"
)
# `password=...`, `API_TOKEN: "..."`, `"password": "..."`: the name kept, the value replaced
# when `_assignment` finds that it looks like data (see the module docstring).
_ASSIGNMENT = re.compile(
    r"(?i)(?<![A-Za-z0-9])("
    + _SECRET_NAME
    + r")(['\"]?\s*[=:]\s*)"
    + _NOT_REDACTED
    + r"(?:(['\"])([^'\"\s]{4,})\3|([^\s'\",;()\[\]{}<>]+))"
)
_ATTRIBUTE_PATH = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")
_PLACEHOLDER = re.compile(r"[$%{<*]|x{4,}$|\.\.\.", re.IGNORECASE)
# A quoted value that is a placeholder as a whole (`"${DB_PASSWORD}"`, `"<your-token>"`,
# `"****"`); a real password that merely contains `$`, `*`, `{`, `<` or `...` is a secret.
_WHOLE_PLACEHOLDER = re.compile(
    r"\$[A-Za-z_]\w*|\$\{[^{}]*\}|%\w+%|\{\{?[^{}]*\}?\}|<[^<>]+>|\*+|x{4,}|\.{3,}", re.IGNORECASE
)
_BARE_MIN_CHARS = 6

REDACTION_KINDS: tuple[str, ...] = (
    *(kind for kind, _ in KEY_SHAPES),
    "aws_secret_key",
    "authorization_header",
    "url_credentials",
    "secret_assignment",
)
"""Every kind of secret the redactor counts, in the order the rules run."""


def _marker(kind: str) -> str:
    return f"[REDACTED:{kind}]"


def _keep_name(kind: str) -> Callable[[re.Match[str]], str]:
    """A replacement keeping group 1 (the name) and replacing the value."""
    return lambda m: m.group(1) + _marker(kind)


def _assignment(match: re.Match[str]) -> str:
    """The assignment with its value replaced, or unchanged when the value looks like code."""
    name, separator, quote, quoted, bare = match.groups()
    unchanged = match.group(0)
    if quote is not None:
        if _WHOLE_PLACEHOLDER.fullmatch(quoted):
            return unchanged
        return f"{name}{separator}{_marker('secret_assignment')}"
    value = bare.rstrip(".:")
    tail = bare[len(value) :]
    rest = match.string[match.end() :]
    if (
        len(value) < _BARE_MIN_CHARS
        or not any(c.isdigit() for c in value)
        or rest.startswith(("(", "["))
        or _ATTRIBUTE_PATH.fullmatch(value)
        or _PLACEHOLDER.match(value)
    ):
        return unchanged
    return f"{name}{separator}{_marker('secret_assignment')}{tail}"


_NAMED_RULES: tuple[tuple[str, re.Pattern[str], Callable[[re.Match[str]], str]], ...] = (
    ("aws_secret_key", _AWS_SECRET, _keep_name("aws_secret_key")),
    ("authorization_header", _AUTH_HEADER, _keep_name("authorization_header")),
    ("url_credentials", _URL_CREDENTIALS, _keep_name("url_credentials")),
    ("url_credentials", _QUERY_SECRET, _keep_name("url_credentials")),
    ("secret_assignment", _ASSIGNMENT, _assignment),
)


@dataclass
class Redactor:
    """Replaces secrets with `[REDACTED:<kind>]` and counts each replacement in `counts`.

    >>> r = Redactor()
    >>> r.redact("key sk-proj-abc123DEF456ghi789JKL0 in task-management-system")
    'key [REDACTED:openai_key] in task-management-system'
    >>> r.redact("token = Base.url_encode64(raw)")
    'token = Base.url_encode64(raw)'
    >>> dict(r.counts)
    {'openai_key': 1}
    """

    counts: Counter[str] = field(default_factory=Counter)

    @property
    def total(self) -> int:
        """How many secrets were replaced so far."""
        return sum(self.counts.values())

    def redact(self, text: str) -> str:
        """`text` with every secret replaced (each replacement counted)."""
        for kind, pattern in KEY_SHAPES:
            text, n = pattern.subn(_marker(kind), text)
            self._count(kind, n)
        for kind, pattern, replace in _NAMED_RULES:
            text = self._replace(kind, pattern, replace, text)
        return text

    def _replace(
        self,
        kind: str,
        pattern: re.Pattern[str],
        replace: Callable[[re.Match[str]], str],
        text: str,
    ) -> str:
        """Apply one named rule, counting only matches whose text actually changed."""
        changed = 0

        def counted(match: re.Match[str]) -> str:
            nonlocal changed
            out = replace(match)
            changed += out != match.group(0)
            return out

        text = pattern.sub(counted, text)
        self._count(kind, changed)
        return text

    def _count(self, kind: str, n: int) -> None:
        if n:
            self.counts[kind] += n
