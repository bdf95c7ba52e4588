"""Test setup: fully offline, and no unit test may reach a real model provider."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import pytest


@pytest.fixture(autouse=True)
def _package_logging_as_a_fresh_process_has_it() -> Iterator[None]:
    """Each test starts with the `skillopt_dsl` logger at NOTSET, as a fresh process has it: a
    CLI test earlier in the same worker sets it (`--debug` to DEBUG), and `caplog` must see a
    library warning whatever ran before."""
    package = logging.getLogger("skillopt_dsl")
    level = package.level
    package.setLevel(logging.NOTSET)
    yield
    package.setLevel(level)


@pytest.fixture(autouse=True)
def _no_real_providers(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Unit tests use ScriptedLM; only tests marked `integration` may call litellm (locally)."""
    if request.node.get_closest_marker("integration") is not None:
        return
    import litellm

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"a unit test tried to call a real model: {kwargs.get('model')!r}")

    monkeypatch.setattr(litellm, "completion", refuse)
    monkeypatch.setattr(litellm, "acompletion", refuse)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Say in every run's summary which promises went unchecked because their tests skipped
    with an "UNGUARDED" reason (the PostgreSQL tests where no server binaries exist), so a
    green run on such a machine is not read as those promises holding."""
    reasons: dict[str, int] = {}
    for report in terminalreporter.stats.get("skipped", []):
        longrepr = getattr(report, "longrepr", None)
        reason = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else ""
        if "UNGUARDED" in reason:
            reason = reason.removeprefix("Skipped: ")
            reasons[reason] = reasons.get(reason, 0) + 1
    for reason, count in reasons.items():
        terminalreporter.write_line(f"{count} test(s) skipped, {reason}", yellow=True, bold=True)
