"""`LM`: the one door to models. Cache, budget, concurrency limit and retries around a `Backend`.

Flow of `LM.complete`: cache lookup (keyed on the request identity and messages; a hit is free
and counted as a hit) -> budget reservation (prompt tokens counted with the model's tokenizer
plus `max_tokens`, and the price of that worst case; `BudgetExceeded` propagates, nothing is
sent) -> concurrency semaphore -> `backend.generate` with retries (exponential backoff with full
jitter, at least the provider's `Retry-After`; only transient failures are retried) -> usage
check (a reply without usage is estimated with the tokenizer and flagged) -> ledger settlement
-> cache store.
"""

from __future__ import annotations

import copy
import hashlib
import logging
import random
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Unpack

from skillopt_dsl.errors import ModelError, UserInputError
from skillopt_dsl.json_types import JSONObject
from skillopt_dsl.lm.base import Backend, Completion, Message, SamplingParams
from skillopt_dsl.lm.cache import ResponseCache, cache_key, canonical_json
from skillopt_dsl.lm.failures import is_transient, retry_after_s, scrub, status_code
from skillopt_dsl.lm.litellm_backend import normalised_base
from skillopt_dsl.lm.openai_compat import backend_for
from skillopt_dsl.lm.pricing import Price, as_price, table_price, unknown_price_message
from skillopt_dsl.lm.settings import LMOptions, LMSettings
from skillopt_dsl.lm.tokens import count_prompt_tokens, count_text_tokens
from skillopt_dsl.lm.usage import Reservation, UsageLedger
from skillopt_dsl.options import settings_from, takes_options

logger = logging.getLogger(__name__)

DEFAULT_MODEL = "local/smollm2-135m"
"""The embedded default: SmolLM2-135M-Instruct, in-process, no key, no network."""

DEFAULT_TIMEOUT_S = 120.0
_MAX_DETAIL_CHARS = 500
_UNRESOLVED = object()


@dataclass(frozen=True)
class LMResponse:
    """The result of one `LM.complete`. A cached response has `cached=True` and `cost_usd=0.0`.

    `usage_estimated` is True when the provider sent no token usage and the counts (and the
    cost computed from them) are the tokenizer's estimate.
    """

    text: str
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float | None
    cached: bool
    latency_s: float
    model: str
    usage_estimated: bool = False


class LM:
    """A model client: wraps a `Backend` (or a litellm model string) with the run's machinery.

    Args:
        model: a litellm model string (wrapped in `LiteLLMBackend`, or in the lean
            `OpenAICompatBackend` for OpenAI-compatible endpoints, see `backend`) or any `Backend`.
        api_base, backend: for a model string: the endpoint's URL, and how it is reached:
            "auto" (default) takes the lean path for `openai-compat/NAME` and for `openai/NAME`
            given an `api_base`, litellm otherwise; "litellm" forces litellm; "lean" the lean
            path (see `skillopt_dsl.lm.openai_compat.backend_for`).
        cache: response cache; None disables caching.
        ledger: shared usage ledger enforcing the run's `Budget`; None creates an unlimited one.
        params: default sampling parameters.
        max_concurrency: most calls in flight at once through this client (and its copies).
        max_retries: retries of a transient failure (timeouts, 429, 5xx, connection errors).
        timeout_s: per-request timeout for a model string (default 120 s). A `Backend` object
            carries its own timeout, so passing one with a `Backend` is an error.
        backoff_base_s, backoff_max_s: full-jitter backoff `uniform(0, min(max, base * 2**n))`.
        price: the model's price, a `Price` or `(input_usd_per_token, output_usd_per_token)`;
            it overrides the backend's (litellm's table) for reservations and recorded costs.
            Under `Budget(max_usd=...)` a model with no known price is refused before its call.
        sleep, rng: injectable for tests.

    The keywords are `LMSettings`' fields (`LMOptions` types them); an unknown one is a
    `TypeError`.
    """

    @takes_options(LMSettings)
    def __init__(self, model: str | Backend, **options: Unpack[LMOptions]) -> None:
        settings = settings_from("LM", LMSettings, options)
        _check_settings(settings)
        self._backend = _make_backend(model, settings)
        self._cache = settings.cache
        self._ledger = settings.ledger if settings.ledger is not None else UsageLedger()
        self._params = settings.params
        self._semaphore = threading.BoundedSemaphore(settings.max_concurrency)
        self._max_concurrency = settings.max_concurrency
        self._max_retries = settings.max_retries
        self._backoff = (settings.backoff_base_s, settings.backoff_max_s)
        self._sleep = settings.sleep
        self._rng = settings.rng if settings.rng is not None else random.Random()
        self._price = as_price(settings.price)
        self._known_price: Any = _UNRESOLVED

    @property
    def model(self) -> str:
        """The backend's model name."""
        return self._backend.model

    @property
    def backend(self) -> Backend:
        """The wrapped backend."""
        return self._backend

    @property
    def ledger(self) -> UsageLedger:
        """The usage ledger this client reports to."""
        return self._ledger

    @property
    def cache(self) -> ResponseCache | None:
        """The response cache, if any."""
        return self._cache

    @property
    def params(self) -> SamplingParams:
        """Default sampling parameters."""
        return self._params

    def identity(self) -> JSONObject:
        """A JSON-ready record of everything that changes this client's answers (no API keys).

        `{"model", "api_base", "provider_params", "sampling"}`: the backend's model string and
        endpoint (None for the provider's default), its extra provider keywords, and the
        default `SamplingParams`. The response cache key, the evaluation cache key and the
        run's config.json are built from it, and `resume=True` refuses a run whose recorded
        identity differs.
        """
        return self.request_identity(self._params)

    def request_identity(self, params: SamplingParams) -> JSONObject:
        """`identity()` with the sampling parameters of one request (its seed included)."""
        return {**backend_identity(self._backend), "sampling": params.to_dict()}

    def identity_hash(self) -> str:
        """The hex SHA-256 of `identity()` (a compact key for caches)."""
        return hashlib.sha256(canonical_json(self.identity()).encode("utf-8")).hexdigest()

    def with_ledger(self, ledger: UsageLedger) -> LM:
        """A copy sharing backend, cache and concurrency limit, reporting to `ledger`."""
        clone = copy.copy(self)
        clone._ledger = ledger
        return clone

    def with_cache(self, cache: ResponseCache) -> LM:
        """A copy sharing backend, ledger and concurrency limit, using `cache`."""
        clone = copy.copy(self)
        clone._cache = cache
        return clone

    def complete(
        self,
        messages: Sequence[Message],
        *,
        seed: int | None = None,
        params: SamplingParams | None = None,
    ) -> LMResponse:
        """Run one chat completion. `seed` (when given) overrides `params.seed`.

        Raises `BudgetExceeded` before sending when the budget could be exceeded, and
        `ModelError` when the call fails for good (its message never contains API keys).
        """
        request = _checked_messages(messages)
        chosen = params if params is not None else self._params
        chosen = chosen if seed is None else replace(chosen, seed=seed)
        start = time.perf_counter()
        key = None
        if self._cache is not None:
            key = cache_key(self.request_identity(chosen), request)
            hit = self._cache.get(key)
            if hit is not None:
                self._ledger.record_cache_hit()
                return self._response(replace(hit, cost_usd=0.0), cached=True, start=start)
        completion = self._call(request, chosen)
        if self._cache is not None and key is not None:
            self._cache.put(key, completion)
        return self._response(completion, cached=False, start=start)

    def _call(self, messages: list[Message], params: SamplingParams) -> Completion:
        """Reserve budget, generate with retries, check the usage, settle the ledger."""
        reservation = self._reserve(messages, params)
        try:
            completion = self._generate_with_retries(messages, params)
        except Exception as exc:
            self._ledger.settle(reservation, None, error_type=type(exc).__name__)
            message = self._failure_message(exc)
            logger.debug(message)
            raise ModelError(message) from None
        except BaseException:
            self._ledger.settle(reservation, None, error_type="interrupted")
            raise
        try:
            completion = self._accounted(messages, completion)
        finally:
            self._ledger.settle(reservation, completion)
        return completion

    def _reserve(self, messages: list[Message], params: SamplingParams) -> Reservation:
        """Reserve the call's worst case: its counted prompt plus `max_tokens`, and their price.

        The prompt is counted (with the model's tokenizer) only under a token or dollar limit.
        """
        budget = self._ledger.budget
        counted = budget.max_tokens is not None or budget.max_usd is not None
        prompt_tokens = count_prompt_tokens(self.model, messages) if counted else 0
        max_cost = None
        if budget.max_usd is not None:
            price = self.price()
            if price is None:
                raise UserInputError(unknown_price_message(self.model))
            max_cost = price.cost(prompt_tokens, params.max_tokens)
        return self._ledger.reserve(params.max_tokens, prompt_tokens, max_cost_usd=max_cost)

    def price(self) -> Price | None:
        """The price used for budgets: `price=` if given, else the backend's, else litellm's
        table for `model`; None when unknown."""
        if self._price is not None:
            return self._price
        if self._known_price is _UNRESOLVED:
            priced = getattr(self._backend, "price", None)
            self._known_price = priced() if callable(priced) else table_price(self.model)
        known: Price | None = self._known_price
        return known

    def _accounted(self, messages: list[Message], completion: Completion) -> Completion:
        """The completion with real token counts and cost: a reply without usage (0 tokens for
        a non-empty prompt or answer) is counted with the tokenizer and flagged."""
        prompt_tokens, completion_tokens = completion.prompt_tokens, completion.completion_tokens
        missing_prompt = prompt_tokens <= 0
        missing_answer = completion_tokens <= 0 and bool(completion.text)
        if missing_prompt:
            prompt_tokens = count_prompt_tokens(self.model, messages)
        if missing_answer:
            completion_tokens = count_text_tokens(self.model, completion.text)
        estimated = missing_prompt or missing_answer
        cost = completion.cost_usd
        if self._price is not None:
            cost = self._price.cost(prompt_tokens, completion_tokens)
        elif estimated:  # the provider's cost was computed from the missing (zero) usage
            price = self.price()
            cost = None if price is None else price.cost(prompt_tokens, completion_tokens)
        return replace(
            completion,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            cost_usd=cost,
            usage_estimated=completion.usage_estimated or estimated,
        )

    def _generate_with_retries(self, messages: list[Message], params: SamplingParams) -> Completion:
        attempt = 0
        while True:
            try:
                with self._semaphore:
                    return self._backend.generate(messages, params)
            except Exception as exc:
                if attempt >= self._max_retries or not is_transient(exc):
                    raise
                self._ledger.record_retry(type(exc).__name__)
                delay = self._retry_delay(attempt, exc)
                logger.info(
                    "%s failed (%s); retry %d in %.2fs",
                    self.model,
                    type(exc).__name__,
                    attempt + 1,
                    delay,
                )
                self._sleep(delay)
                attempt += 1

    def _retry_delay(self, attempt: int, exc: BaseException) -> float:
        base, ceiling = self._backoff
        backoff = self._rng.uniform(0.0, min(ceiling, base * 2**attempt))
        asked = retry_after_s(exc)
        return backoff if asked is None else max(asked, backoff)

    def _failure_message(self, exc: BaseException) -> str:
        secrets_of = getattr(self._backend, "secrets", None)
        extra = secrets_of() if callable(secrets_of) else []
        detail = scrub(str(exc), extra).strip().splitlines()
        first = (detail[0] if detail else "")[:_MAX_DETAIL_CHARS]
        hint = _hint(exc, self._max_retries)
        return f"Model call to {self.model!r} failed: {type(exc).__name__}: {first} {hint}"

    def _response(self, completion: Completion, *, cached: bool, start: float) -> LMResponse:
        return LMResponse(
            text=completion.text,
            prompt_tokens=completion.prompt_tokens,
            completion_tokens=completion.completion_tokens,
            cost_usd=completion.cost_usd,
            cached=cached,
            latency_s=time.perf_counter() - start,
            model=self.model,
            usage_estimated=completion.usage_estimated,
        )

    def __repr__(self) -> str:
        return f"LM({self.model!r}, max_concurrency={self._max_concurrency})"


def resolve_lm(
    spec: str | Backend | LM | None,
    *,
    default: str = DEFAULT_MODEL,
    cache: ResponseCache | None = None,
    ledger: UsageLedger | None = None,
) -> LM:
    """Turn what a user passed as `lm=` into an `LM`.

    None -> `default`; a string -> `LM(LiteLLMBackend(spec))`; a `Backend` -> `LM(backend)`;
    an `LM` keeps its settings and its own cache (it gets `cache` only when it has none), and is
    re-pointed at `ledger` when one is given.
    """
    if spec is None:
        spec = default
    if isinstance(spec, LM):
        client = spec.with_ledger(ledger) if ledger is not None else spec
        return client.with_cache(cache) if client.cache is None and cache is not None else client
    if isinstance(spec, str | Backend):
        return LM(spec, cache=cache, ledger=ledger)
    raise UserInputError(
        f"lm must be a litellm model string (e.g. 'openai/gpt-4o-mini' or {DEFAULT_MODEL!r}), "
        f"a Backend or an LM; got {type(spec).__name__}."
    )


def backend_identity(backend: Backend) -> JSONObject:
    """The backend's part of `LM.identity()`: its own `identity()` when it has one, else its
    model string and `api_base` attribute (if any), with no provider parameters."""
    describe = getattr(backend, "identity", None)
    if callable(describe):
        return dict(describe())
    api_base = getattr(backend, "api_base", None)
    return {
        "model": backend.model,
        "api_base": normalised_base(api_base) if isinstance(api_base, str) else None,
        "provider_params": {},
    }


def _make_backend(model: str | Backend, settings: LMSettings) -> Backend:
    timeout_s, api_base, backend = settings.timeout_s, settings.api_base, settings.backend
    if isinstance(model, str):
        timeout = DEFAULT_TIMEOUT_S if timeout_s is None else timeout_s
        return backend_for(model, api_base=api_base, backend=backend, timeout_s=timeout)
    if isinstance(model, Backend):
        if timeout_s is not None or api_base is not None or backend != "auto":
            raise UserInputError(
                "timeout_s, api_base and backend apply to model strings only; "
                "set them on the Backend itself."
            )
        return model
    raise UserInputError(
        f"LM(model=...) takes a litellm model string or a Backend, got {type(model).__name__}."
    )


def _check_settings(settings: LMSettings) -> None:
    max_concurrency, max_retries = settings.max_concurrency, settings.max_retries
    base, ceiling, params = settings.backoff_base_s, settings.backoff_max_s, settings.params
    if max_concurrency < 1:
        raise UserInputError(f"max_concurrency must be >= 1, got {max_concurrency}.")
    if max_retries < 0:
        raise UserInputError(f"max_retries must be >= 0, got {max_retries}.")
    if base < 0 or ceiling < 0:
        raise UserInputError(
            f"backoff_base_s and backoff_max_s must be >= 0, got {base} and {ceiling}."
        )
    if params.max_tokens < 1:
        raise UserInputError(f"SamplingParams.max_tokens must be >= 1, got {params.max_tokens}.")


def _checked_messages(messages: Sequence[Message]) -> list[Message]:
    """A private copy of `messages`, each a {"role": str, "content": str} dict."""
    if isinstance(messages, str | bytes) or not messages:
        raise UserInputError(
            "messages must be a non-empty list of {'role': ..., 'content': ...} dicts."
        )
    checked: list[Message] = []
    for i, message in enumerate(messages):
        if (
            not isinstance(message, dict)
            or not isinstance(message.get("role"), str)
            or not isinstance(message.get("content"), str)
        ):
            raise UserInputError(
                f"messages[{i}] must be a dict with string 'role' and 'content', got {message!r}."
            )
        checked.append(dict(message))
    return checked


def _hint(exc: BaseException, max_retries: int) -> str:
    """What to do about a failed call, judged from the exception."""
    status, name = status_code(exc), type(exc).__name__
    if is_transient(exc):
        return (
            f"It kept failing after {max_retries} retries; check the provider's status or network, "
            "or raise max_retries / timeout_s."
        )
    if status in (401, 403) or name in ("AuthenticationError", "PermissionDeniedError"):
        return (
            "Check the API key: set the provider's key environment variable "
            "(for example OPENAI_API_KEY) and its access to this model."
        )
    if status == 404 or name == "NotFoundError":
        return "Check the model name; litellm model strings look like 'openai/gpt-4o-mini'."
    if status in (400, 422) or name in ("BadRequestError", "UnprocessableEntityError"):
        return (
            "The provider rejected the request; check the model name, sampling parameters "
            "and that the prompt fits the model's context window."
        )
    return "This error is not retried; fix the cause above and rerun."
