"""A persistent response cache: identical requests are answered once and then for free.

The key is the SHA-256 of the canonical JSON of (model, messages, temperature, max_tokens,
seed): nothing else enters it, so API keys and other credentials are never part of the key nor
stored. Entries live in one SQLite file (WAL mode, so several processes of a sweep can share
it), or in memory when `path` is None. One connection is shared by all threads behind a lock.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from pathlib import Path

from skillopt_dsl.errors import UserInputError
from skillopt_dsl.lm.base import Completion, Message, SamplingParams

_SCHEMA = "CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, completion TEXT NOT NULL)"


def cache_key(model: str, messages: list[Message], params: SamplingParams) -> str:
    """The hex SHA-256 identifying one request (model, messages and sampling parameters)."""
    material = {
        "model": model,
        "messages": messages,
        "temperature": params.temperature,
        "max_tokens": params.max_tokens,
        "seed": params.seed,
    }
    canonical = json.dumps(material, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


class ResponseCache:
    """Thread-safe `Completion` store keyed by `cache_key`; `path=None` keeps it in memory."""

    def __init__(self, path: str | Path | None = None) -> None:
        self._path = Path(path) if path is not None else None
        self._lock = threading.Lock()
        self._conn = self._connect()

    @property
    def path(self) -> Path | None:
        """The SQLite file, or None for an in-memory cache."""
        return self._path

    def get(self, model: str, messages: list[Message], params: SamplingParams) -> Completion | None:
        """The stored completion for this request, or None."""
        key = cache_key(model, messages, params)
        with self._lock:
            row = self._conn.execute(
                "SELECT completion FROM responses WHERE key = ?", (key,)
            ).fetchone()
        return None if row is None else _decode(row[0])

    def put(
        self, model: str, messages: list[Message], params: SamplingParams, completion: Completion
    ) -> None:
        """Store `completion` for this request (replacing any earlier entry)."""
        key = cache_key(model, messages, params)
        with self._lock, self._conn:
            self._conn.execute(
                "INSERT OR REPLACE INTO responses (key, completion) VALUES (?, ?)",
                (key, _encode(completion)),
            )

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
        }
    )


def _decode(raw: str) -> Completion:
    data = json.loads(raw)
    return Completion(
        text=data["text"],
        prompt_tokens=data["prompt_tokens"],
        completion_tokens=data["completion_tokens"],
        cost_usd=data["cost_usd"],
    )
