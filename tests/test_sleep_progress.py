"""A night's progress: bars on a terminal, log lines elsewhere."""

from __future__ import annotations

import io
import logging

import pytest
from rich.console import Console

from skillopt_dsl.sleep.progress import NightProgress

EVENTS = [
    ("harvest", {"sessions": 3, "redactions_total": 1}),
    ("mine", {"done": 1, "total": 3}),
    ("mine", {"done": 3, "total": 3}),
    ("consolidate", {"tasks": 3}),
    ("seed", {"val_score": 0.5}),
    ("gate", {"accepted": False, "reason": "tie"}),
    ("step", {"step": 0, "calls": 7}),
    ("finish", {"usage": {"calls": 9}}),
]


def test_a_terminal_gets_progress_bars() -> None:
    """Kills: a night with no progress bar on a terminal (issue 18: a silent 45-minute night),
    or bars that never advance past their start."""
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=120)
    with NightProgress(console, max_calls=10, live=True) as progress:
        for event, payload in EVENTS:
            progress(event, payload)
    text = out.getvalue()
    assert "mining" in text and "3/3" in text
    assert "replays" in text and "9/10" in text


def test_elsewhere_each_stage_is_a_log_line(caplog: pytest.LogCaptureFixture) -> None:
    """Kills: progress drawn (or printed) into a pipe or CI log instead of logged."""
    out = io.StringIO()
    with (
        caplog.at_level(logging.INFO, logger="skillopt_dsl.sleep.progress"),
        NightProgress(Console(file=out), live=False) as progress,
    ):
        for event, payload in EVENTS:
            progress(event, payload)
    assert out.getvalue() == ""
    messages = [r.getMessage() for r in caplog.records]
    assert "harvested 3 session(s) of this project (1 redaction(s))" in messages
    assert "gate rejected: tie" in messages


def test_a_terminal_shows_each_described_folder() -> None:
    """Kills: a night with `--describe` whose bar never says what the describe stage did (the
    `describe` event dropped: the bar ends on the night's last gate note)."""
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=160)
    described = ("describe", {"folder": "/home/me/.claude/skills/pdf", "status": "staged"})
    with NightProgress(console, max_calls=10, live=True) as progress:
        for event, payload in [*EVENTS, described]:
            progress(event, payload)
    assert "described pdf: staged" in out.getvalue()
