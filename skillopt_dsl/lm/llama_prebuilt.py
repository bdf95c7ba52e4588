"""The prebuilt llama.cpp runtime: the CPU library of the `llama-cpp-cffi==0.4.20` wheel, driven
through llama.cpp's C API with `ctypes`, so the embedded model runs without a C compiler.

The library is located, checked and loaded by `skillopt_dsl.lm.llama_library`.

`PrebuiltLlama.create_chat_completion` reproduces what llama-cpp-python 0.3.36's
`Llama.create_chat_completion` does for the arguments `skillopt_dsl.lm.local` passes:

- the prompt is the GGUF's `tokenizer.chat_template` rendered with jinja2 the way its
  `Jinja2ChatFormatter` does (sandboxed, `trim_blocks`, `lstrip_blocks`, the generation-tag and
  loop-control extensions, `add_generation_prompt=True`, `bos_token`/`eos_token` as the vocab's
  texts), tokenized with special tokens parsed and no BOS added (the formatter says the template
  adds its own);
- the KV cache keeps the longest common prefix with the previous call and evaluates the rest in
  batches of 512 (the same prefix reuse, so the same batches reach the same kernels);
- temperature 0 samples greedily behind a no-op penalties sampler; temperature > 0 uses the same
  chain (top-k 40, typical 1.0, top-p 0.95, min-p 0.05, temperature, a distribution seeded with
  `seed`), but this January 2025 llama.cpp may draw a different token than llama-cpp-python's
  newer one for the same seed;
- generation stops at an end-of-generation token, at the EOS text, or after `max_tokens`
  (exceeded only to finish a multi-byte character, as there); `finish_reason` and the token
  counts in `usage` follow the same rules.
"""

from __future__ import annotations

import ctypes
import json
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from skillopt_dsl.lm.llama_library import Batch, load_library

__all__ = ["PrebuiltLlama"]

N_BATCH = 512
"""llama-cpp-python's default `n_batch` and `n_ubatch`: prompt tokens per `llama_decode`."""
PENALTY_LAST_N = 64
"""llama-cpp-python's `last_n_tokens_size` (the penalties sampler is a no-op at its defaults)."""
TOP_K, TOP_P, MIN_P, TYPICAL_P = 40, 0.95, 0.05, 1.0
"""llama-cpp-python's `create_chat_completion` defaults, used when temperature > 0."""


def _render_template(template: str) -> Callable[..., str]:
    """The chat template compiled as llama-cpp-python's `Jinja2ChatFormatter` compiles it."""
    import jinja2
    import jinja2.ext
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class IgnoreGenerationTags(jinja2.ext.Extension):
        """Pass-through for Hugging Face's `{% generation %}` chat-template tag."""

        tags = {"generation"}  # noqa: RUF012 (jinja2 declares it an instance attribute)

        def parse(self, parser: Any) -> Any:
            parser.stream.skip(1)
            return parser.parse_statements(("name:endgeneration",), drop_needle=True)

    def tojson(
        value: Any,
        ensure_ascii: bool = False,
        indent: int | None = None,
        separators: tuple[str, str] | None = None,
        sort_keys: bool = False,
    ) -> str:
        return json.dumps(
            value,
            ensure_ascii=ensure_ascii,
            indent=indent,
            separators=separators,
            sort_keys=sort_keys,
        )

    environment = ImmutableSandboxedEnvironment(
        loader=jinja2.BaseLoader(),
        trim_blocks=True,
        lstrip_blocks=True,
        extensions=[IgnoreGenerationTags, jinja2.ext.loopcontrols],
    )
    environment.filters["tojson"] = tojson
    return environment.from_string(template).render


def _raise_exception(message: str) -> None:
    raise ValueError(message)


def _strftime_now(fmt: str) -> str:
    return datetime.now().strftime(fmt)


class PrebuiltLlama:
    """One GGUF model in one llama.cpp context, loaded from the prebuilt library.

    Not thread-safe (one KV cache); `skillopt_dsl.lm.local` serialises calls with its lock.

    Raises:
        RuntimeError: the library cannot be loaded (see `load_library`).
        ValueError: llama.cpp cannot load `model_path`, or it has no chat template.
    """

    def __init__(
        self,
        *,
        model_path: str,
        n_ctx: int,
        n_threads: int,
        n_threads_batch: int,
    ):
        self._lib = lib = load_library()
        self._model: int | None = None
        self._ctx: int | None = None
        self._batch: Batch | None = None
        model = lib.llama_model_load_from_file(
            model_path.encode("utf-8"), lib.llama_model_default_params()
        )
        if not model:
            raise ValueError(f"Failed to load model from file: {model_path}")
        self._model = model
        self.metadata: dict[str, str] = self._read_metadata()
        template = self.metadata.get("tokenizer.chat_template")
        if template is None:
            self.close()
            raise ValueError(
                f"{model_path} has no tokenizer.chat_template metadata, which the prebuilt "
                "runtime needs (llama-cpp-python falls back to its own default format)"
            )
        params = lib.llama_context_default_params()
        params.n_ctx = n_ctx
        params.n_batch = min(n_ctx, N_BATCH)
        params.n_ubatch = min(n_ctx, N_BATCH)
        params.n_threads = n_threads
        params.n_threads_batch = n_threads_batch
        params.flash_attn = False
        ctx = lib.llama_init_from_model(model, params)
        if not ctx:
            self.close()
            raise ValueError(f"Failed to create a llama.cpp context for {model_path}")
        self._ctx = ctx
        self._batch = lib.llama_batch_init(params.n_batch, 0, 1)
        self.model_path = model_path
        self.n_ctx = n_ctx
        self._n_batch = int(params.n_batch)
        self._vocab = lib.llama_model_get_vocab(model)
        self._n_ctx_train = int(lib.llama_model_n_ctx_train(model))
        self._bos = int(lib.llama_vocab_bos(self._vocab))
        self._eos = int(lib.llama_vocab_eos(self._vocab))
        self._bos_text = self._token_text(self._bos)
        self._eos_text = self._token_text(self._eos)
        self._render = _render_template(template)
        self._input_ids: list[int] = []
        self._requires_eval = True
        self._decode_seconds, self._decode_steps = 0.0, 0

    # --- the OpenAI-style call -----------------------------------------------------------

    def create_chat_completion(
        self,
        *,
        messages: Sequence[Mapping[str, Any]],
        temperature: float,
        max_tokens: int | None,
        seed: int,
    ) -> dict[str, Any]:
        """One chat completion, shaped as llama-cpp-python's (`choices[0].message.content`,
        `choices[0].finish_reason`, `usage`).

        Raises:
            ValueError: the prompt does not fit the context window (the message names it).
            RuntimeError: `llama_decode` failed.
        """
        prompt = self._render(
            messages=list(messages),
            eos_token=self._eos_text,
            bos_token=self._bos_text,
            raise_exception=_raise_exception,
            add_generation_prompt=True,
            functions=None,
            function_call=None,
            tools=None,
            tool_choice=None,
            strftime_now=_strftime_now,
        )
        prompt_tokens = self.tokenize(prompt.encode("utf-8"), add_bos=False, special=True)
        if len(prompt_tokens) >= self.n_ctx:
            raise ValueError(
                f"Requested tokens ({len(prompt_tokens)}) exceed context window of {self.n_ctx}"
            )
        if max_tokens is None or max_tokens <= 0:
            max_tokens = self.n_ctx - len(prompt_tokens)
        max_tokens = min(max_tokens, self.n_ctx - len(prompt_tokens))
        text, finish_reason, completion_tokens = self._generate(
            prompt_tokens, temperature=temperature, max_tokens=max_tokens, seed=seed
        )
        return {
            "id": f"chat{uuid.uuid4()}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model_path,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "logprobs": None,
                    "finish_reason": finish_reason,
                }
            ],
            "usage": {
                "prompt_tokens": len(prompt_tokens),
                "completion_tokens": len(completion_tokens),
                "total_tokens": len(prompt_tokens) + len(completion_tokens),
            },
        }

    def _generate(
        self, prompt_tokens: list[int], *, temperature: float, max_tokens: int, seed: int
    ) -> tuple[str, str, list[int]]:
        """Decode after `prompt_tokens`; returns (text, finish_reason, completion tokens), with
        llama-cpp-python's stopping rules (its `_create_completion` loop over `generate`)."""
        stop_sequences = [self._eos_text.encode("utf-8")]
        sampler = self._sampler(temperature, seed)
        try:
            self._evaluate_prompt(prompt_tokens)
            completion: list[int] = []
            text, finish_reason, multibyte_fix = b"", "length", 0
            while True:
                token = int(self._lib.llama_sampler_sample(sampler, self._ctx, -1))
                if self._input_ids and self._input_ids[-1] == self._eos:
                    break  # llama-cpp-python's stop_token_ids criterion (on the last evaluated)
                if self._lib.llama_vocab_is_eog(self._vocab, token):
                    text, finish_reason = self.detokenize(completion), "stop"
                    break
                completion.append(token)
                all_text = self.detokenize(completion)
                for k, char in enumerate(all_text[-3:]):
                    k = 3 - k
                    for num, pattern in ((2, 192), (3, 224), (4, 240)):
                        if num > k and pattern & char == pattern:
                            multibyte_fix = num - k
                if multibyte_fix > 0:  # an incomplete character: no stop or length check yet
                    multibyte_fix -= 1
                    self._decode(token)
                    continue
                stops = [stop for stop in stop_sequences if stop in all_text]
                if stops:
                    text, finish_reason = all_text[: all_text.index(stops[0])], "stop"
                    break
                if len(completion) >= max_tokens:
                    text, finish_reason = self.detokenize(completion), "length"
                    break
                self._decode(token)
            if self._input_ids and self._input_ids[-1] == self._eos:
                text, finish_reason = self.detokenize(completion), "stop"
        finally:
            self._lib.llama_sampler_free(sampler)
        return text.decode("utf-8", errors="ignore"), finish_reason, completion

    # --- threads ---------------------------------------------------------------------------

    def set_threads(self, threads: int) -> None:
        """Run later calls on `threads` threads (prompt and generation alike)."""
        self._lib.llama_set_n_threads(self._ctx, threads, threads)

    def decode_counters(self) -> tuple[float, int]:
        """Seconds spent decoding generated tokens one at a time, and how many, since loading
        (what llama.cpp's `llama_perf_context` counts as `t_eval_ms` and `n_eval`)."""
        return self._decode_seconds, self._decode_steps

    def _decode(self, token: int) -> None:
        """Evaluate one generated token, counting its time (`decode_counters`)."""
        started = time.perf_counter()
        self._eval([token])
        self._decode_seconds += time.perf_counter() - started
        self._decode_steps += 1

    def _sampler(self, temperature: float, seed: int) -> int:
        """llama-cpp-python's sampler chain for these arguments (`Llama._init_sampler`)."""
        lib = self._lib
        chain = lib.llama_sampler_chain_init(lib.llama_sampler_chain_default_params())
        links = [lib.llama_sampler_init_penalties(PENALTY_LAST_N, 1.0, 0.0, 0.0)]
        if temperature < 0.0:
            links.append(lib.llama_sampler_init_dist(seed & 0xFFFFFFFF))
        elif temperature == 0.0:
            links.append(lib.llama_sampler_init_greedy())
        else:
            links += [
                lib.llama_sampler_init_top_k(TOP_K),
                lib.llama_sampler_init_typical(TYPICAL_P, 1),
                lib.llama_sampler_init_top_p(TOP_P, 1),
                lib.llama_sampler_init_min_p(MIN_P, 1),
                lib.llama_sampler_init_temp(temperature),
                lib.llama_sampler_init_dist(seed & 0xFFFFFFFF),
            ]
        for link in links:
            lib.llama_sampler_chain_add(chain, link)
        return int(chain)

    # --- the KV cache, as llama-cpp-python's `Llama.generate` and `Llama.eval` keep it -------

    def _evaluate_prompt(self, tokens: list[int]) -> None:
        """Evaluate `tokens`, reusing the longest prefix the KV cache already holds."""
        reset = True
        if self._input_ids:
            longest = 0
            for held, wanted in zip(self._input_ids, tokens, strict=False):
                if held != wanted:
                    break
                longest += 1
            consumed = longest == len(tokens)
            reuse = longest - 1 if consumed else longest
            if consumed and len(self._input_ids) == len(tokens) and not self._requires_eval:
                reset, tokens, reuse = False, [], 0  # the logits of this prompt are current
            if reuse > 0 and self._lib.llama_kv_cache_seq_rm(self._ctx, -1, reuse, -1):
                reset, tokens = False, tokens[reuse:]
                del self._input_ids[reuse:]
                self._requires_eval = True
        if reset:
            self._input_ids = []
            self._requires_eval = True
        self._eval(tokens)

    def _eval(self, tokens: Sequence[int]) -> None:
        """Decode `tokens` after the cached ones, `N_BATCH` at a time, logits for the last."""
        assert self._batch is not None
        lib, batch = self._lib, self._batch
        lib.llama_kv_cache_seq_rm(self._ctx, -1, len(self._input_ids), -1)
        for start in range(0, len(tokens), self._n_batch):
            chunk = tokens[start : start + self._n_batch]
            n_past = len(self._input_ids)
            batch.n_tokens = len(chunk)
            for i, token in enumerate(chunk):
                batch.token[i] = token
                batch.pos[i] = n_past + i
                batch.seq_id[i][0] = 0
                batch.n_seq_id[i] = 1
                batch.logits[i] = 0
            batch.logits[len(chunk) - 1] = 1
            code = lib.llama_decode(self._ctx, batch)
            if code != 0:
                raise RuntimeError(f"llama_decode returned {code}")
            self._input_ids.extend(chunk)
            self._requires_eval = False

    # --- vocabulary ------------------------------------------------------------------------

    def tokenize(self, text: bytes, *, add_bos: bool, special: bool) -> list[int]:
        """`text` as tokens (llama-cpp-python's `LlamaModel.tokenize`)."""
        capacity = self._n_ctx_train
        tokens = (ctypes.c_int32 * capacity)()
        count = self._lib.llama_tokenize(
            self._vocab, text, len(text), tokens, capacity, add_bos, special
        )
        if count < 0:
            capacity = -count
            tokens = (ctypes.c_int32 * capacity)()
            count = self._lib.llama_tokenize(
                self._vocab, text, len(text), tokens, capacity, add_bos, special
            )
            if count < 0:
                raise RuntimeError(f'Failed to tokenize: text="{text!r}" n_tokens={count}')
        return list(tokens[:count])

    def detokenize(self, tokens: Sequence[int]) -> bytes:
        """The bytes of `tokens`, special tokens left out (llama-cpp-python's
        `LlamaModel.detokenize`, 32-byte pieces and the leading-space rule included)."""
        size = 32
        buffer = ctypes.create_string_buffer(size)
        output = b""
        for token in tokens:
            count = self._lib.llama_token_to_piece(self._vocab, token, buffer, size, 0, False)
            output += buffer.raw[:count]
        if tokens and tokens[0] == self._bos and output[:1] == b" ":
            return output[1:]
        return output

    def _token_text(self, token: int) -> str:
        if token == -1:
            return ""
        raw = self._lib.llama_vocab_get_text(self._vocab, token)
        return raw.decode("utf-8", errors="ignore") if raw else ""

    def _read_metadata(self) -> dict[str, str]:
        """Every GGUF metadata key and value as text (llama-cpp-python's `Llama.metadata`)."""
        lib, metadata = self._lib, {}
        for index in range(lib.llama_model_meta_count(self._model)):
            key = self._meta_text(lib.llama_model_meta_key_by_index, index)
            metadata[key] = self._meta_text(lib.llama_model_meta_val_str_by_index, index)
        return metadata

    def _meta_text(self, read: Any, index: int) -> str:
        size = 1024
        while True:
            buffer = ctypes.create_string_buffer(size)
            needed = int(read(self._model, index, buffer, size))
            if needed < size:
                return buffer.value.decode("utf-8", errors="ignore")
            size = needed + 1

    # --- lifetime --------------------------------------------------------------------------

    def close(self) -> None:
        """Free the context, the batch and the model (idempotent)."""
        lib = self._lib
        if self._batch is not None:
            lib.llama_batch_free(self._batch)
            self._batch = None
        if self._ctx is not None:
            lib.llama_free(self._ctx)
            self._ctx = None
        if self._model is not None:
            lib.llama_model_free(self._model)
            self._model = None
