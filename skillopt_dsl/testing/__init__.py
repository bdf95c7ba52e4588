"""Fakes and reusable test helpers shipped with the library (no real model is ever called)."""

from skillopt_dsl.testing.fake_server import FakeOpenAIServer
from skillopt_dsl.testing.faults import FaultyBackend
from skillopt_dsl.testing.scripted import ScriptedLM

__all__ = ["FakeOpenAIServer", "FaultyBackend", "ScriptedLM"]
