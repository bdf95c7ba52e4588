"""Test setup: fully offline, and no unit test may reach a real model provider."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import pytest


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
