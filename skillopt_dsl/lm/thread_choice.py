"""Choosing llama.cpp's thread count from measured speed, call by call.

llama.cpp's threads wait for each other on a spinning barrier after every operation. On a
2-core machine that makes the right count depend on what else runs: measured with the embedded
model (2026-12-06), two threads decode a token in 11 ms against one thread's 18.5 ms when the
machine is idle, but a call ran four times slower on two threads than on one while another
process kept the second core busy. No fixed count is right for both, so `ThreadChooser`
measures: it keeps a running estimate of seconds per decoded token for each count, runs the
faster one, and now and then re-measures the other, less often each time that count is
confirmed slower. A machine that turns busy (or idle) mid-run is followed within a few calls.

The count changes only the speed, never an answer: llama.cpp computes each output value in one
thread, so the same prompt gives the same tokens on one thread or two
(`tests/test_local_runtimes.py` checks it on the embedded model).
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["MAX_PROBE_EVERY", "MIN_DECODE_STEPS", "PROBE_EVERY", "SMOOTHING", "ThreadChooser"]

PROBE_EVERY = 16
"""Measured calls between re-measurements of a slower count, at first."""
MAX_PROBE_EVERY = 256
"""The longest wait: each re-measurement that finds the count still slower doubles the wait."""
SMOOTHING = 0.3
"""Weight of a new measurement in a count's running estimate (recent calls count most)."""
MIN_DECODE_STEPS = 2
"""Calls that decode fewer tokens measure too little to count."""


class ThreadChooser:
    """The thread count for the next call, from the seconds per decoded token each count took.

    Call `choose()` before a call and `record(...)` after it. Not thread-safe: the caller
    serialises calls (one llama.cpp context runs one call at a time).

    Args:
        counts: the thread counts to choose among, the one to try first first.
    """

    def __init__(self, counts: Sequence[int]) -> None:
        if not counts or len(set(counts)) != len(counts) or min(counts) < 1:
            raise ValueError(f"thread counts must be distinct and >= 1, got {list(counts)}")
        self.counts = tuple(counts)
        self.estimates: dict[int, float] = {}
        """Seconds per decoded token, a running estimate per measured count."""
        self._since = dict.fromkeys(self.counts, 0)
        self._probe_every = PROBE_EVERY

    def best(self) -> int:
        """The count with the lowest estimate (the first count until all are measured)."""
        if len(self.estimates) < len(self.counts):
            return self.counts[0]
        return min(self.counts, key=lambda count: self.estimates[count])

    def choose(self) -> int:
        """The count for the next call: an unmeasured count, else a slower count whose
        re-measurement is due, else the fastest."""
        for count in self.counts:
            if count not in self.estimates:
                return count
        best = self.best()
        due = [c for c in self.counts if c != best and self._since[c] >= self._probe_every]
        return due[0] if due else best

    def record(self, count: int, seconds: float, decode_steps: int) -> None:
        """Count one call: `decode_steps` tokens decoded in `seconds` on `count` threads."""
        if decode_steps < MIN_DECODE_STEPS:
            return
        probing = count in self.estimates and count != self.best()
        per_token = seconds / decode_steps
        previous = self.estimates.get(count)
        if previous is None or self._since[count] >= PROBE_EVERY:  # absent or stale
            self.estimates[count] = per_token
        else:
            self.estimates[count] = previous + SMOOTHING * (per_token - previous)
        for other in self.counts:
            self._since[other] += 1
        self._since[count] = 0
        if probing:
            confirmed_slower = self.best() != count
            self._probe_every = (
                min(2 * self._probe_every, MAX_PROBE_EVERY) if confirmed_slower else PROBE_EVERY
            )
