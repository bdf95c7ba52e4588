"""A persistent response cache: identical requests are answered once and then for free.

The key is the SHA-256 of the canonical JSON of the request's identity and its messages: the
identity (`LM.request_identity`) holds everything that changes an answer (model, endpoint,
provider parameters and every sampling parameter, seed included) and never an API key, so
credentials are neither part of the key nor stored. Entries live in one SQLite file (WAL mode, so several processes of a sweep can share
it), or in memory when `path` is None. One connection is shared by all threads behind a lock.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from skillopt_dsl.errors import UserInputError
from skillopt_dsl.lm.base import Completion, Message

_SCHEMA = "CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, completion TEXT NOT NULL)"


def canonical_json(value: Any) -> str:
    """Compact JSON with sorted keys: equal records give equal text."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def cache_key(identity: Mapping[str, object], messages: Sequence[Message]) -> str:
    """The hex SHA-256 identifying one request: its identity (see `LM.request_identity`) and
    messages."""
    material = {"identity": identity, "messages": list(messages)}
    return hashlib.sha256(canonical_json(material).encode("utf-8")).hexdigest()


class ResponseCache:
    """Thread-safe `Completion` store keyed by `cache_key`; `path=None` keeps it in memory.

    `shared` is a cache several runs hold in common (a DSPy program's predictors, trained one
    after another on the same examples): a key this cache lacks is looked up there, and every
    completion this cache stores or answers with is also stored there. A completion answered
    from `shared` is not copied into this cache, so a resumed run never counts it as paid.
    """

    def __init__(
        self, path: str | Path | None = None, *, shared: ResponseCache | None = None
    ) -> None:
        self._path = Path(path) if path is not None else None
        self._lock = threading.Lock()
        self._conn = self._connect()
        self._shared = shared

    @property
    def path(self) -> Path | None:
        """The SQLite file, or None for an in-memory cache."""
        return self._path

    def get(self, key: str) -> Completion | None:
        """The stored completion for the request `key` (see `cache_key`), or the shared
        cache's, or None."""
        with self._lock:
            row = self._conn.execute(
                "SELECT completion FROM responses WHERE key = ?", (key,)
            ).fetchone()
        if row is None:
            return None if self._shared is None else self._shared.get(key)
        completion = _decode(row[0])
        if self._shared is not None:
            self._shared.put(key, completion)  # a resumed run's replies reach the others too
        return completion

    def put(self, key: str, completion: Completion) -> None:
        """Store `completion` for the request `key` (replacing any earlier entry), here and in
        the shared cache."""
        with self._lock, self._conn:
            self._conn.execute(
                "INSERT OR REPLACE INTO responses (key, completion) VALUES (?, ?)",
                (key, _encode(completion)),
            )
        if self._shared is not None:
            self._shared.put(key, completion)

    @property
    def max_rowid(self) -> int:
        """The newest entry's row id (0 when empty); entries only ever get larger ids."""
        with self._lock:
            row = self._conn.execute("SELECT MAX(rowid) FROM responses").fetchone()
        return int(row[0] or 0)

    def completions_after(self, rowid: int) -> list[Completion]:
        """Completions stored after row `rowid`, oldest first.

        A resumed run uses this with the `max_rowid` saved in its checkpoint: calls made after
        the checkpoint were paid for, and the resumed run will see them as free cache hits, so
        their usage must be added back to the ledger (`UsageLedger.add_paid`). With a cache file
        shared by several concurrent runs, this also returns the other runs' entries.
        """
        with self._lock:
            rows = self._conn.execute(
                "SELECT completion FROM responses WHERE rowid > ? ORDER BY rowid", (rowid,)
            ).fetchall()
        return [_decode(row[0]) for row in rows]

    def __len__(self) -> int:
        with self._lock:
            return int(self._conn.execute("SELECT COUNT(*) FROM responses").fetchone()[0])

    def flush(self) -> None:
        """Fold the write-ahead log into the main file, so copying `cache.sqlite` alone keeps
        every entry (no-op for an in-memory cache)."""
        if self._path is None:
            return
        with self._lock:
            self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def close(self) -> None:
        """Close the database connection; the cache is unusable afterwards."""
        with self._lock:
            self._conn.close()

    def _connect(self) -> sqlite3.Connection:
        if self._path is None:
            conn = sqlite3.connect(":memory:", check_same_thread=False)
        else:
            if self._path.exists() and not self._path.is_file():
                raise UserInputError(
                    f"Response cache path {self._path} is not a file; pass a file path."
                )
            self._path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self._path, check_same_thread=False, timeout=30.0)
            conn.execute("PRAGMA journal_mode=WAL")
        with conn:
            conn.execute(_SCHEMA)
        return conn


def _encode(completion: Completion) -> str:
    return json.dumps(
        {
            "text": completion.text,
            "prompt_tokens": completion.prompt_tokens,
            "completion_tokens": completion.completion_tokens,
            "cost_usd": completion.cost_usd,
            "usage_estimated": completion.usage_estimated,
        }
    )


def _decode(raw: str) -> Completion:
    data = json.loads(raw)
    return Completion(
        text=data["text"],
        prompt_tokens=data["prompt_tokens"],
        completion_tokens=data["completion_tokens"],
        cost_usd=data["cost_usd"],
        usage_estimated=bool(data.get("usage_estimated", False)),
    )
