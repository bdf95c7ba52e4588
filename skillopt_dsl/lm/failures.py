"""Classifying model-call failures: transient or not, Retry-After, and scrubbing secrets.

Kept apart from the client so the rules are easy to read and to test. litellm is never imported
here: if it was not imported yet, no litellm exception can have been raised.
"""

from __future__ import annotations

import email.utils
import os
import sys
import time
from collections.abc import Iterable, Mapping

_TRANSIENT_LITELLM = (
    "Timeout",
    "RateLimitError",
    "APIConnectionError",
    "InternalServerError",
    "ServiceUnavailableError",
    "BadGatewayError",
)
_TRANSIENT_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
_SECRET_SUFFIXES = ("_API_KEY", "_TOKEN", "_SECRET")
_MIN_SECRET_LEN = 4  # shorter values ("1", "no") would scrub ordinary words


def is_transient(exc: BaseException) -> bool:
    """True for failures worth retrying: timeouts, rate limits, 5xx and connection errors."""
    if isinstance(exc, TimeoutError | ConnectionError):
        return True
    litellm_exceptions = getattr(sys.modules.get("litellm"), "exceptions", None)
    if litellm_exceptions is not None:
        kinds = tuple(
            getattr(litellm_exceptions, n)
            for n in _TRANSIENT_LITELLM
            if hasattr(litellm_exceptions, n)
        )
        if isinstance(exc, kinds):
            return True
    status = status_code(exc)
    return status is not None and status in _TRANSIENT_STATUS


def status_code(exc: BaseException) -> int | None:
    """The HTTP status an exception carries (`status_code`, or `response.status_code`), if any."""
    for candidate in (exc, getattr(exc, "response", None)):
        value = getattr(candidate, "status_code", None)
        if isinstance(value, int):
            return value
        if isinstance(value, str) and value.isdigit():
            return int(value)
    return None


def retry_after_s(exc: BaseException) -> float | None:
    """Seconds a provider asked us to wait: `exc.retry_after`, or a `Retry-After` header."""
    direct = getattr(exc, "retry_after", None)
    if direct is not None:
        return _parse_retry_after(direct)
    for headers in (
        getattr(exc, "headers", None),
        getattr(getattr(exc, "response", None), "headers", None),
    ):
        value = _header(headers, "retry-after")
        if value is not None:
            return _parse_retry_after(value)
    return None


def _header(headers: object, name: str) -> str | None:
    if headers is None:
        return None
    getter = getattr(headers, "get", None)
    if getter is None:
        return None
    value = getter(name)
    if value is None and isinstance(headers, Mapping):
        value = next((v for k, v in headers.items() if str(k).lower() == name), None)
    return None if value is None else str(value)


def _parse_retry_after(value: object) -> float | None:
    """Parse delta-seconds or an HTTP date; None when unparseable."""
    try:
        return max(0.0, float(value))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        pass
    try:
        when = email.utils.parsedate_to_datetime(str(value))
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def secret_values(extra: Iterable[str] = ()) -> list[str]:
    """Values of env vars named *_API_KEY / *_TOKEN / *_SECRET, plus `extra`, longest first."""
    found = [v for k, v in os.environ.items() if k.upper().endswith(_SECRET_SUFFIXES)]
    found.extend(extra)
    return sorted({v for v in found if len(v) >= _MIN_SECRET_LEN}, key=len, reverse=True)


def scrub(text: str, extra: Iterable[str] = ()) -> str:
    """`text` with every secret value (see `secret_values`) replaced by `***`."""
    for secret in secret_values(extra):
        text = text.replace(secret, "***")
    return text
