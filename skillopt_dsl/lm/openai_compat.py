"""`OpenAICompatBackend`: the lean request path for OpenAI-compatible chat-completions endpoints.

OpenAI itself, vLLM, the llama.cpp server, LM Studio, Ollama's `/v1`: anything that speaks
`POST {api_base}/chat/completions` is reached with one shared `httpx.Client` (connection pooling,
keep-alive) instead of `litellm.completion`, which costs ~3.5 ms of client CPU per call
(`bench/bench_litellm_cpu.py`) and so caps throughput at high concurrency. `LM` adds the cache,
budget reservation, retries and error hints on top of this backend exactly as for litellm.

What stays litellm's: prices come from litellm's price table (`litellm.model_cost`, the same
map `litellm.completion` prices with, read once per call as a dict lookup); every other provider
goes through `LiteLLMBackend`; and `backend="litellm"` picks litellm for these models too.

Errors are mapped to what `skillopt_dsl.lm.failures` classifies: a timeout is a `TimeoutError`,
a refused or dropped connection a `ConnectionError` (both retried), an HTTP error an
`EndpointHTTPError` carrying `status_code` and the `Retry-After` header (429 and 5xx retried,
other 4xx not). No message carries the API key.
"""

from __future__ import annotations

import functools
import json
import os
import socket
import ssl
import threading
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Literal

import httpx

from skillopt_dsl.errors import UserInputError
from skillopt_dsl.lm.base import Backend, Completion, Message, SamplingParams
from skillopt_dsl.lm.failures import scrub
from skillopt_dsl.lm.litellm_backend import (
    ExtraValue,
    LiteLLMBackend,
    is_secret_name,
    normalised_base,
)
from skillopt_dsl.lm.pricing import Price, table_price

__all__ = [
    "LEAN_PREFIXES",
    "BackendChoice",
    "EndpointHTTPError",
    "EndpointResponseError",
    "OpenAICompatBackend",
    "backend_for",
]

BackendChoice = Literal["auto", "lean", "litellm"]
"""How a model string is reached: `auto` (lean for OpenAI-compatible strings given an
`api_base`, or spelled `openai-compat/...`; litellm otherwise), `lean`, or `litellm`."""

OPENAI_API_BASE = "https://api.openai.com/v1"
LEAN_PREFIXES = ("openai/", "openai-compat/")
"""Model-string prefixes the lean path serves; `openai-compat/NAME` is spelled `openai/NAME`
in cache keys and price lookups, as litellm would see it."""

_RESERVED = frozenset({"model", "messages", "temperature", "max_tokens", "seed", "stream"})
_MAX_BODY_CHARS = 300
_PRICE_KEYS = frozenset({"input_cost_per_token", "output_cost_per_token"})


class EndpointHTTPError(Exception):
    """The endpoint answered with an HTTP error status. 429 and 5xx are retried by `LM`.

    `retry_after` is the raw `Retry-After` header (or None); `failures.retry_after_s` parses it.
    """

    def __init__(self, message: str, *, status_code: int, retry_after: str | None) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.retry_after = retry_after


class EndpointResponseError(Exception):
    """A 2xx answer that is not a chat completion (not retried: the endpoint is not compatible)."""


class EndpointTimeout(TimeoutError):
    """The request timed out (retried)."""


class EndpointConnectionError(ConnectionError):
    """The connection was refused, reset or dropped (retried)."""


class OpenAICompatBackend:
    """A `Backend` that posts chat completions to an OpenAI-compatible `api_base` itself.

    Args:
        model: `openai/NAME` or `openai-compat/NAME`; `NAME` is sent as the request's `model`.
        api_base: the endpoint's base URL (`http://localhost:8000/v1`); default, as litellm:
            `OPENAI_API_BASE` or `OPENAI_BASE_URL` from the environment, else OpenAI's.
        api_key: sent as `Authorization: Bearer ...`; default the `OPENAI_API_KEY` environment
            variable (as litellm does), and no header when neither is set (local servers).
        extra: additional provider request fields (`user`, `logit_bias`, ...); sampling
            parameters belong in `SamplingParams`. Part of `identity()` unless secret-looking.
        timeout_s: per-request connect/read/write timeout.
        max_connections: the pooled connection limit (keep-alive connections are reused).

    `generate` is thread-safe: all threads share one `httpx.Client`. Call `close()` to release
    its pooled connections early; otherwise they live as long as the backend.
    """

    def __init__(
        self,
        model: str,
        *,
        api_base: str | None = None,
        api_key: str | None = None,
        extra: Mapping[str, ExtraValue] | None = None,
        timeout_s: float = 120.0,
        max_connections: int = 512,
    ) -> None:
        self._model, self._wire_name = _names(model)
        chosen_base = api_base or _environment_base()
        self._given_base = normalised_base(chosen_base)
        chosen_base = chosen_base or OPENAI_API_BASE
        _check_settings(chosen_base, extra, timeout_s, max_connections)
        self._api_base = chosen_base.rstrip("/")
        self._url = f"{self._api_base}/chat/completions"
        self._api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        self._extra: Mapping[str, ExtraValue] = MappingProxyType(dict(extra or {}))
        self._timeout_s = timeout_s
        self._client = _client(self._api_key, timeout_s, max_connections)
        self._price_lock = threading.Lock()
        self._prices: tuple[float, float] | Literal["slow"] | None = None
        self._priced = False

    @property
    def model(self) -> str:
        """The model as litellm spells it (`openai/NAME`): the cache key's and price's name."""
        return self._model

    @property
    def api_base(self) -> str:
        """The endpoint's base URL."""
        return self._api_base

    def identity(self) -> dict[str, Any]:
        """What besides sampling parameters changes an answer (no secrets): the same record
        `LiteLLMBackend` gives for this model, endpoint and extras, so both share cache entries."""
        return {
            "model": self._model,
            "api_base": self._given_base,
            "provider_params": {
                k: v for k, v in sorted(self._extra.items()) if not is_secret_name(k)
            },
        }

    def price(self) -> Price | None:
        """The model's price from litellm's table (for budget reservations), None when unknown."""
        return table_price(self._model)

    def secrets(self) -> list[str]:
        """The API key (for scrubbing error messages); empty when none is sent."""
        return [self._api_key] if self._api_key else []

    def generate(self, messages: list[Message], params: SamplingParams) -> Completion:
        """Post one chat completion and read text, usage and price from the answer."""
        optional = params.provider_kwargs()
        clash = sorted(set(optional) & set(self._extra))
        if clash:
            raise UserInputError(
                f"{clash} set both in SamplingParams and in OpenAICompatBackend(extra=...); "
                "set each in one place only."
            )
        body = {
            "model": self._wire_name,
            "messages": messages,
            "temperature": params.temperature,
            "max_tokens": params.max_tokens,
            "seed": params.seed,
            **optional,
            **self._extra,
        }
        payload = self._post(body)
        text, usage = _read_completion(payload)
        prompt_tokens = int(usage.get("prompt_tokens") or 0)
        completion_tokens = int(usage.get("completion_tokens") or 0)
        return Completion(
            text=text,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            cost_usd=self._cost(payload, usage, prompt_tokens, completion_tokens),
        )

    def close(self) -> None:
        """Close the pooled connections (the backend is unusable afterwards)."""
        self._client.close()

    def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        try:
            response = self._client.post(self._url, content=_dumps(body))
        except httpx.TimeoutException as exc:
            raise EndpointTimeout(
                f"{type(exc).__name__}: no answer from {self._url} within {self._timeout_s} s"
            ) from None
        except httpx.TransportError as exc:
            raise EndpointConnectionError(
                f"{type(exc).__name__} reaching {self._url}: {self._scrub(str(exc))}"
            ) from None
        if response.status_code >= 400:
            raise self._http_error(response)
        try:
            payload = response.json()
        except ValueError:
            payload = None
        if not isinstance(payload, dict):
            raise EndpointResponseError(
                f"{self._url} answered HTTP {response.status_code} with a body that is not a JSON "
                f"object: {self._scrub(response.text[:_MAX_BODY_CHARS])!r}. Is api_base an "
                "OpenAI-compatible endpoint (it usually ends in /v1)?"
            )
        return payload

    def _http_error(self, response: httpx.Response) -> EndpointHTTPError:
        detail = _error_detail(response)
        return EndpointHTTPError(
            f"HTTP {response.status_code} from {self._url}: {self._scrub(detail)}",
            status_code=response.status_code,
            retry_after=response.headers.get("retry-after"),
        )

    def _scrub(self, text: str) -> str:
        return scrub(text, self.secrets())

    def _cost(
        self, payload: dict[str, Any], usage: dict[str, Any], prompt: int, completion: int
    ) -> float | None:
        """The call's price from litellm's price table, or None when litellm has no price.

        Plain per-token prices (the common case) are a dict lookup and two products, computed
        as litellm computes them; tiered or cached-token pricing asks `litellm.completion_cost`.
        """
        prices = self._per_token_prices()
        if prices is None:
            return None
        if prices == "slow" or _has_token_details(usage):
            return self._litellm_cost(payload)
        input_cost, output_cost = prices
        return prompt * input_cost + completion * output_cost

    def _per_token_prices(self) -> tuple[float, float] | Literal["slow"] | None:
        with self._price_lock:
            if not self._priced:
                self._prices = _price_entry(self._model)
                self._priced = True
            return self._prices

    def _litellm_cost(self, payload: dict[str, Any]) -> float | None:
        from skillopt_dsl.lm._litellm import litellm

        try:
            return float(litellm.completion_cost(completion_response=payload, model=self._model))
        except litellm.exceptions.ModelNotMappedError:
            return None

    def __repr__(self) -> str:
        return f"OpenAICompatBackend({self._model!r}, api_base={self._api_base!r})"


def backend_for(
    model: str,
    *,
    api_base: str | None = None,
    api_key: str | None = None,
    backend: BackendChoice = "auto",
    timeout_s: float = 120.0,
) -> Backend:
    """The backend a model string is reached through (see `BackendChoice`).

    `auto` takes the lean path for `openai-compat/NAME`, and for `openai/NAME` given an
    `api_base`; every other string (and `openai/NAME` without `api_base`, which reads litellm's
    own settings such as `OPENAI_API_BASE`) goes through litellm, as does any string with
    `backend="litellm"`.
    """
    if backend not in ("auto", "lean", "litellm"):
        raise UserInputError(f"backend must be 'auto', 'lean' or 'litellm', got {backend!r}.")
    lean_able = model.startswith(LEAN_PREFIXES)
    if backend == "lean" and not lean_able:
        raise UserInputError(
            f"backend='lean' serves OpenAI-compatible model strings ({', '.join(LEAN_PREFIXES)}"
            f"...), not {model!r}; use backend='litellm' or 'auto' for other providers."
        )
    lean = backend == "lean" or (
        backend == "auto"
        and lean_able
        and (api_base is not None or model.startswith("openai-compat/"))
    )
    if lean:
        if model.startswith("openai-compat/") and api_base is None:
            raise UserInputError(
                f"{model!r} needs api_base=... (the endpoint's URL, e.g. http://localhost:8000/v1)."
            )
        return OpenAICompatBackend(model, api_base=api_base, api_key=api_key, timeout_s=timeout_s)
    litellm_model = model.replace("openai-compat/", "openai/", 1)
    extra = {"api_key": api_key} if api_key is not None else None
    return LiteLLMBackend(litellm_model, api_base=api_base, extra=extra, timeout_s=timeout_s)


def _names(model: str) -> tuple[str, str]:
    """(the litellm spelling `openai/NAME`, the wire name `NAME`) of a lean model string."""
    if not isinstance(model, str) or not model.startswith(LEAN_PREFIXES):
        raise UserInputError(
            f"OpenAICompatBackend takes 'openai/NAME' or 'openai-compat/NAME', got {model!r}."
        )
    name = model.split("/", 1)[1]
    if not name.strip():
        raise UserInputError(f"Model {model!r} has no name after the provider prefix.")
    return f"openai/{name}", name


def _check_settings(
    api_base: str, extra: Mapping[str, ExtraValue] | None, timeout_s: float, max_connections: int
) -> None:
    if not isinstance(api_base, str) or not api_base.startswith(("http://", "https://")):
        raise UserInputError(
            f"api_base must be an http(s) URL such as http://localhost:8000/v1, got {api_base!r}."
        )
    clash = sorted(_RESERVED & set(extra or {}))
    if clash:
        raise UserInputError(
            f"OpenAICompatBackend(extra=...) may not set {clash}; use SamplingParams instead."
        )
    if timeout_s <= 0:
        raise UserInputError(f"timeout_s must be > 0, got {timeout_s!r}.")
    if max_connections < 1:
        raise UserInputError(f"max_connections must be >= 1, got {max_connections!r}.")


def _client(api_key: str | None, timeout_s: float, max_connections: int) -> httpx.Client:
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    limits = httpx.Limits(
        max_connections=max_connections, max_keepalive_connections=max_connections
    )
    # httpcore writes headers and body separately: without TCP_NODELAY, Nagle's algorithm can
    # hold the body back until the headers are acknowledged (a delayed ACK costs up to 40 ms).
    transport = httpx.HTTPTransport(
        verify=_ssl_context(),
        limits=limits,
        socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)],
    )
    return httpx.Client(headers=headers, timeout=httpx.Timeout(timeout_s), transport=transport)


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    """httpx's default TLS context, built once: building one loads the CA bundle (~50-250 ms)."""
    return httpx.create_ssl_context()


def _environment_base() -> str | None:
    """The OpenAI endpoint litellm reads from the environment, if one is set."""
    return os.environ.get("OPENAI_API_BASE") or os.environ.get("OPENAI_BASE_URL") or None


def _dumps(body: dict[str, Any]) -> bytes:
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _read_completion(payload: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """(text, usage) of a chat-completions answer; `EndpointResponseError` when it is none."""
    try:
        message = payload["choices"][0]["message"]
        text = message.get("content") or ""
    except (KeyError, IndexError, TypeError, AttributeError):
        raise EndpointResponseError(
            "The endpoint's answer has no choices[0].message: "
            f"{json.dumps(payload)[:_MAX_BODY_CHARS]}. Is it a chat-completions endpoint?"
        ) from None
    usage = payload.get("usage")
    return str(text), usage if isinstance(usage, dict) else {}


def _error_detail(response: httpx.Response) -> str:
    """The provider's error message (`{"error": {"message": ...}}`), else the body's start."""
    try:
        error = response.json().get("error")
    except (ValueError, AttributeError):
        error = None
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return str(error["message"])[:_MAX_BODY_CHARS]
    if isinstance(error, str):
        return error[:_MAX_BODY_CHARS]
    return response.text[:_MAX_BODY_CHARS] or response.reason_phrase


def _has_token_details(usage: dict[str, Any]) -> bool:
    """True when the usage splits tokens into kinds priced differently (cached, audio, ...)."""
    for key in ("prompt_tokens_details", "completion_tokens_details"):
        details = usage.get(key)
        if isinstance(details, dict) and any(
            isinstance(v, int) and v > 0 for v in details.values()
        ):
            return True
    return False


def _price_entry(model: str) -> tuple[float, float] | Literal["slow"] | None:
    """Per-token (input, output) USD for `openai/NAME` from litellm's price table.

    None: litellm has no price (unpriced, never a made-up 0). "slow": litellm prices the model
    some other way (tiers, a name it normalises such as fine-tunes), so each call is priced by
    `litellm.completion_cost`. Asked once per backend.
    """
    from skillopt_dsl.lm._litellm import litellm

    name = model.split("/", 1)[1]
    entry = litellm.model_cost.get(model) or litellm.model_cost.get(name)
    if isinstance(entry, dict) and set(entry) >= _PRICE_KEYS:
        if any("_above_" in key for key in entry):
            return "slow"
        return float(entry["input_cost_per_token"]), float(entry["output_cost_per_token"])
    try:
        litellm.cost_per_token(model=model, prompt_tokens=1, completion_tokens=1)
    except litellm.exceptions.ModelNotMappedError:
        return None
    return "slow"
