"""The usage ledger: thread-safe call, token and dollar accounting for one run (its `Budget`
and `UsageSnapshot` records are `spend.py`'s, re-exported here).

Several `LM` clients of one run (target and optimizer models) share one `UsageLedger`. Every
call reserves its worst case *before* it is sent (`reserve`): one call, its prompt tokens (counted
with the model's tokenizer) plus its `max_tokens`, and the price of exactly that many tokens. It
settles the reservation with what it really used afterwards (`settle`). Because reservations are
counted while calls are in flight, a `Budget` is never exceeded however many threads call at once:
a call that could overrun it is refused before it is sent.

Unit conventions: `calls` counts logical calls that reached a backend (successful or failed
after retries; retries are counted separately in `retries`), tokens are the backend's own
counts, and `cost_usd` sums the calls whose price is known (see `UsageSnapshot.cost_usd`).

**Durable across a kill.** With a journal (`UsageLedger.open_journal(path)`, which `compile`
does in every run directory as `ledger.jsonl`), every reservation is appended to the file
*before* `reserve` returns, so before the call can be sent, and every settlement after it. A
process killed with calls in flight (SIGKILL: no `finally`, no flush) leaves reservations
without a settlement; the resumed run replays the journal (`replay=True`) and counts each of
them as a lost call at its reserved worst case (one call, its prompt estimate plus `max_tokens`,
its reserved price), so calls sent before a kill and after a resume together never exceed the
`Budget`. Lines are written with one `os.write` to an append-only file: they survive a killed
process (the kernel holds them), not a power failure (there is no `fsync` per call).
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from types import MappingProxyType
from typing import Any

from skillopt_dsl.errors import BudgetExceeded, RunDirError, UserInputError
from skillopt_dsl.json_types import JSONObject, JSONValue, json_float, json_int
from skillopt_dsl.lm.base import Completion
from skillopt_dsl.lm.spend import Budget, UsageRecord, UsageSnapshot

__all__ = ["INTERRUPTED", "Budget", "Reservation", "UsageLedger", "UsageRecord", "UsageSnapshot"]

logger = logging.getLogger(__name__)

INTERRUPTED = "interrupted"
"""The error type of a call settled while its process was being interrupted (counted lost)."""


@dataclass(frozen=True)
class Reservation:
    """A call's reserved share of the budget, returned by `UsageLedger.reserve`.

    `usd` is the call's worst-case cost, or None when the caller could not bound it;
    `prompt_tokens` is the share of `tokens` that is the prompt estimate.
    """

    id: int
    tokens: int
    usd: float | None = None
    prompt_tokens: int = 0


class UsageLedger:
    """Thread-safe accounting shared by the LM clients of one run; enforces an optional `Budget`."""

    def __init__(self, budget: Budget | None = None) -> None:
        self._budget = budget or Budget()
        self._lock = threading.Lock()
        self._state = UsageSnapshot()
        self._error_types: dict[str, int] = {}
        self._open: dict[int, Reservation] = {}
        self._next_id = 0
        self._warned_unpriced = False
        self._warned_overrun = False
        self._journal_path: Path | None = None

    @property
    def budget(self) -> Budget:
        """The limits this ledger enforces."""
        return self._budget

    def reserve(
        self,
        max_new_tokens: int,
        prompt_tokens_estimate: int,
        *,
        max_cost_usd: float | None = None,
    ) -> Reservation:
        """Claim room for one call, or raise `BudgetExceeded` (nothing is sent then).

        `max_cost_usd` is the call's worst-case price (`LM` computes it from the model's price,
        the counted prompt and `max_new_tokens`; `CommandAgent` takes a declared price per run).
        None means the caller cannot bound it: under `Budget.max_usd` such a call is refused
        with a `UserInputError` saying how to declare a price (never counted as free).
        """
        prompt = max(0, prompt_tokens_estimate)
        tokens = max(0, max_new_tokens) + prompt
        usd = None if max_cost_usd is None else max(0.0, max_cost_usd)
        with self._lock:
            self._check_budget(tokens, usd)
            self._next_id += 1
            reservation = Reservation(
                id=self._next_id, tokens=tokens, usd=usd, prompt_tokens=prompt
            )
            # Durable before the call can be sent: a kill from here on is counted on resume.
            self._write(
                {
                    "op": "reserve",
                    "id": reservation.id,
                    "tokens": tokens,
                    "prompt": prompt,
                    "usd": usd,
                }
            )
            self._open[reservation.id] = reservation
            return reservation

    def settle(
        self,
        reservation: Reservation,
        completion: Completion | None,
        *,
        error_type: str | None = None,
    ) -> None:
        """Release `reservation`; record its usage, or a failure when `completion` is None."""
        with self._lock:
            if self._open.pop(reservation.id, None) is None:
                raise ValueError(f"Reservation {reservation.id} is not open (settled twice?).")
            if completion is None:
                self._write(
                    {"op": "settle", "id": reservation.id, "error": error_type or "unknown"}
                )
                if error_type == INTERRUPTED:
                    self._record_lost(_reserved(reservation), INTERRUPTED)
                else:
                    self._record_failure(error_type or "unknown")
            else:
                self._write({"op": "settle", "id": reservation.id, **_completion_dict(completion)})
                self._check_overrun(reservation, completion)
                self._record_success(completion)

    def add_paid(self, completions: Iterable[Completion]) -> None:
        """Record calls already paid for outside this ledger (e.g. after a run's last checkpoint).

        They count like settled calls (calls, tokens, cost) without a reservation, and may push
        the ledger past its budget: they were already spent, so the next `reserve` refuses.
        """
        with self._lock:
            for completion in completions:
                self._write({"op": "paid", **_completion_dict(completion)})
                self._record_success(completion)

    def record_retry(self, error_type: str) -> None:
        """Count one failed attempt that will be retried."""
        with self._lock:
            self._write({"op": "retry", "error": error_type})
            self._record_retry(error_type)

    def record_cache_hit(self) -> None:
        """Count a call answered from the response cache (free, not a budgeted call)."""
        with self._lock:
            self._write({"op": "cache_hit"})
            self._replace(cache_hits=self._state.cache_hits + 1)

    def snapshot(self) -> UsageSnapshot:
        """The counters now (in-flight calls are not included until settled)."""
        with self._lock:
            return self._replace()

    def restore(self, snapshot: UsageSnapshot) -> None:
        """Replace the counters with `snapshot`, so a resumed run keeps its spent budget."""
        with self._lock:
            if self._open:
                raise RuntimeError("Cannot restore a ledger while calls are in flight.")
            self._write({"op": "restore", "snapshot": snapshot.to_dict()})
            self._restore(snapshot)

    @property
    def journal_path(self) -> Path | None:
        """The journal file this ledger appends to (None: not journaled)."""
        return self._journal_path

    def open_journal(self, path: str | Path, *, replay: bool) -> bool:
        """Journal every reservation and settlement to `path` (see the module docstring).

        With `replay=True` the counters are first rebuilt from the file, if it exists: every
        settled call as it was recorded, and every reservation without a settlement (a call in
        flight when the process was killed) as a lost call at its reserved worst case. With
        `replay=False` the file is started afresh. Returns True when a journal was replayed
        (the ledger then holds every call made under it; nothing else needs restoring).

        Raises:
            RunDirError: the file holds a damaged line before its last one.
            RuntimeError: calls are in flight, or a journal is already open.
        """
        target = Path(path)
        with self._lock:
            if self._open or self._journal_path is not None:
                raise RuntimeError("open_journal must be called once, before any call is made")
            replayed = replay and target.is_file()
            lines = _read_journal(target) if replayed else []
            target.parent.mkdir(parents=True, exist_ok=True)
            flags = os.O_WRONLY | os.O_CREAT | (0 if replayed else os.O_TRUNC)
            os.close(os.open(target, flags, 0o644))
            self._journal_path = target
            if replayed:
                self._replay(lines)
        if replayed:
            snap = self.snapshot()
            logger.info(
                "usage journal %s replayed: %d calls (%d lost in flight at a kill), %d tokens",
                target,
                snap.calls,
                snap.lost_calls,
                snap.total_tokens,
            )
        return replayed

    @property
    def in_flight(self) -> int:
        """Number of reserved calls not yet settled."""
        with self._lock:
            return len(self._open)

    def _write(self, record: Mapping[str, object]) -> None:
        """Append one journal line (caller holds the lock). The file is opened per line (no
        descriptor outlives the call); once this returns the line survives a kill."""
        if self._journal_path is None:
            return
        data = (json.dumps(record, separators=(",", ":")) + "\n").encode("utf-8")
        handle = os.open(self._journal_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            while data:
                data = data[os.write(handle, data) :]
        finally:
            os.close(handle)

    def _replay(self, lines: list[JSONObject]) -> None:
        """Fold journal records into the counters (caller holds the lock)."""
        pending: dict[int, JSONObject] = {}
        for record in lines:
            op = record.get("op")
            if op == "reserve":
                pending[json_int(record["id"])] = record
                self._next_id = max(self._next_id, json_int(record["id"]))
            elif op == "settle":
                reserved = pending.pop(json_int(record["id"]), None)
                if record.get("error") == INTERRUPTED:
                    self._record_lost(reserved or {}, INTERRUPTED)
                elif "error" in record:
                    self._record_failure(str(record["error"]))
                else:
                    self._record_success(_completion_from(record))
            elif op == "paid":
                self._record_success(_completion_from(record))
            elif op == "retry":
                self._record_retry(str(record["error"]))
            elif op == "cache_hit":
                self._replace(cache_hits=self._state.cache_hits + 1)
            elif op == "restore":
                self._restore(UsageSnapshot.from_dict(_json_object(record["snapshot"])))
        for record in pending.values():
            self._record_lost(record, "lost")

    def _record_lost(self, record: Mapping[str, object], kind: str) -> None:
        """A call in flight when its process was killed (`"lost"`: never settled) or
        interrupted (`"interrupted"`): it may have been served, so count its worst case."""
        s = self._state
        prompt = json_int(record.get("prompt", 0))
        completion = max(0, json_int(record.get("tokens", 0)) - prompt)
        usd = record.get("usd")
        self._error_types[kind] = self._error_types.get(kind, 0) + 1
        self._replace(
            calls=s.calls + 1,
            errors=s.errors + 1,
            lost_calls=s.lost_calls + 1,
            prompt_tokens=s.prompt_tokens + prompt,
            completion_tokens=s.completion_tokens + completion,
            priced_cost_usd=s.priced_cost_usd + (json_float(usd) if usd is not None else 0.0),
        )

    def _record_retry(self, error_type: str) -> None:
        self._error_types[error_type] = self._error_types.get(error_type, 0) + 1
        self._replace(retries=self._state.retries + 1)

    def _restore(self, snapshot: UsageSnapshot) -> None:
        self._error_types = dict(snapshot.error_types)
        self._state = snapshot
        self._replace()

    def _check_budget(self, tokens: int, usd: float | None) -> None:
        budget, used = self._budget, self._state
        if budget.max_calls is not None and used.calls + len(self._open) + 1 > budget.max_calls:
            raise BudgetExceeded(
                f"Call budget exhausted: {used.calls} calls made and {len(self._open)} in flight "
                f"of max_calls={budget.max_calls}. Raise Budget.max_calls to continue."
            )
        reserved = sum(r.tokens for r in self._open.values())
        if (
            budget.max_tokens is not None
            and used.total_tokens + reserved + tokens > budget.max_tokens
        ):
            raise BudgetExceeded(
                f"Token budget exhausted: {used.total_tokens} tokens used, {reserved} reserved by "
                f"calls in flight, and this call may use up to {tokens}, over "
                f"max_tokens={budget.max_tokens}. "
                "Raise Budget.max_tokens or lower max_tokens in SamplingParams."
            )
        if budget.max_usd is not None:
            self._check_dollars(budget.max_usd, usd)

    def _check_dollars(self, max_usd: float, usd: float | None) -> None:
        if usd is None:
            # A call nobody can price could spend without bound: a dollar budget refuses it
            # before anything starts, rather than count it as free.
            raise UserInputError(
                f"This call has no known price, so Budget(max_usd={max_usd}) cannot bound it "
                "(an agent CLI run, or a backend that reports no cost). Declare its worst-case "
                "price (CommandAgent(max_usd_per_run=...), LM(price=...)) or drop max_usd."
            )
        spent = self._state.priced_cost_usd
        reserved = sum(r.usd or 0.0 for r in self._open.values())
        committed = spent + reserved
        if committed + usd > max_usd:
            raise BudgetExceeded(
                f"Dollar budget exhausted: ${spent:.4f} spent, ${reserved:.4f} reserved by calls "
                f"in flight, and this call may cost up to ${usd:.4f}, over max_usd={max_usd}. "
                "Raise Budget.max_usd, or lower max_tokens in SamplingParams (a call reserves "
                "the price of its prompt plus max_tokens)."
            )

    def _check_overrun(self, reservation: Reservation, completion: Completion) -> None:
        """Warn (once) when a call used more than it reserved under a token or dollar limit:
        the provider counts or prices differently from the tokenizer and price table used."""
        budget = self._budget
        over_tokens = budget.max_tokens is not None and (
            completion.prompt_tokens + completion.completion_tokens > reservation.tokens
        )
        over_usd = (
            budget.max_usd is not None
            and reservation.usd is not None
            and (completion.cost_usd or 0.0) > reservation.usd * (1 + 1e-9) + 1e-12
        )
        if (over_tokens or over_usd) and not self._warned_overrun:
            self._warned_overrun = True
            logger.warning(
                "A call used more than it reserved (%d tokens for %d reserved, $%s for $%s): "
                "its provider counts or prices differently from the tokenizer or price used; "
                "set LM(price=...) or leave headroom in the Budget.",
                completion.prompt_tokens + completion.completion_tokens,
                reservation.tokens,
                completion.cost_usd,
                reservation.usd,
            )

    def _record_success(self, completion: Completion) -> None:
        s = self._state
        priced = completion.cost_usd is not None
        if not priced:
            self._warn_unpriced()
        self._replace(
            calls=s.calls + 1,
            prompt_tokens=s.prompt_tokens + completion.prompt_tokens,
            completion_tokens=s.completion_tokens + completion.completion_tokens,
            priced_cost_usd=s.priced_cost_usd + (completion.cost_usd or 0.0),
            unpriced_calls=s.unpriced_calls + (0 if priced else 1),
            estimated_usage_calls=s.estimated_usage_calls + int(completion.usage_estimated),
        )

    def _record_failure(self, error_type: str) -> None:
        self._error_types[error_type] = self._error_types.get(error_type, 0) + 1
        self._replace(calls=self._state.calls + 1, errors=self._state.errors + 1)

    def _warn_unpriced(self) -> None:
        if self._budget.max_usd is not None and not self._warned_unpriced:
            self._warned_unpriced = True
            logger.warning(
                "A call with no known price was recorded under Budget.max_usd (an agent CLI or "
                "a backend that reports no cost); the dollar budget cannot bound such calls."
            )

    def _replace(self, **changes: Any) -> UsageSnapshot:
        """Swap in a new immutable state (caller holds the lock) and return it."""
        values = {f.name: getattr(self._state, f.name) for f in fields(UsageSnapshot)}
        values.update(changes)
        values["error_types"] = MappingProxyType(dict(self._error_types))
        self._state = UsageSnapshot(**values)
        return self._state


def _reserved(reservation: Reservation) -> JSONObject:
    return {
        "prompt": reservation.prompt_tokens,
        "tokens": reservation.tokens,
        "usd": reservation.usd,
    }


def _completion_dict(completion: Completion) -> JSONObject:
    return {
        "prompt_tokens": completion.prompt_tokens,
        "completion_tokens": completion.completion_tokens,
        "cost_usd": completion.cost_usd,
        "estimated": completion.usage_estimated,
    }


def _completion_from(record: Mapping[str, object]) -> Completion:
    return Completion(
        text="",
        prompt_tokens=json_int(record["prompt_tokens"]),
        completion_tokens=json_int(record["completion_tokens"]),
        cost_usd=None if record.get("cost_usd") is None else json_float(record["cost_usd"]),
        usage_estimated=bool(record.get("estimated", False)),
    )


def _read_journal(path: Path) -> list[JSONObject]:
    """The journal's records. A torn last line (a kill mid-write) is cut from the file, so new
    lines start clean; a damaged line before it is an error."""
    raw = path.read_bytes()
    complete, _, torn = raw.rpartition(b"\n")
    if torn:
        logger.warning("usage journal %s: cutting a torn last line (%d bytes)", path, len(torn))
        with path.open("r+b") as handle:
            handle.truncate(len(complete) + 1 if complete or raw.startswith(b"\n") else 0)
    records: list[JSONObject] = []
    for number, line in enumerate(complete.split(b"\n") if complete else [], start=1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except ValueError as exc:
            raise RunDirError(
                f"usage journal {path} line {number} is damaged ({exc}); the spent budget "
                "cannot be known, so the run cannot resume: start a new run_dir"
            ) from exc
    return records


def _json_object(value: JSONValue) -> JSONObject:
    """A nested journal object (a restored snapshot); anything else is a damaged journal."""
    if not isinstance(value, dict):
        raise RunDirError(f"usage journal: expected an object, got {value!r}")
    return value
