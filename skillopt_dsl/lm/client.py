"""`LM`: the one door to models. Cache, budget, concurrency limit and retries around a `Backend`.

Flow of `LM.complete`: cache lookup (a hit is free and counted as a hit) -> budget reservation
(`BudgetExceeded` propagates, nothing is sent) -> concurrency semaphore -> `backend.generate`
with retries (exponential backoff with full jitter, at least the provider's `Retry-After`; only
transient failures are retried) -> ledger settlement -> cache store.
"""

from __future__ import annotations

import copy
import logging
import random
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from skillopt_dsl.errors import ModelError, UserInputError
from skillopt_dsl.lm.base import Backend, Completion, Message, SamplingParams
from skillopt_dsl.lm.cache import ResponseCache
from skillopt_dsl.lm.failures import is_transient, retry_after_s, scrub, status_code
from skillopt_dsl.lm.litellm_backend import LiteLLMBackend
from skillopt_dsl.lm.usage import UsageLedger

logger = logging.getLogger(__name__)

DEFAULT_MODEL = "local/smollm2-135m"
"""The embedded default: SmolLM2-135M-Instruct, in-process, no key, no network."""

DEFAULT_TIMEOUT_S = 120.0
_CHARS_PER_TOKEN_ESTIMATE = 3  # over-counts English BPE (~4 chars/token) on purpose
_TOKENS_PER_MESSAGE = 4
_MAX_DETAIL_CHARS = 500


@dataclass(frozen=True)
class LMResponse:
    """The result of one `LM.complete`. A cached response has `cached=True` and `cost_usd=0.0`."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float | None
    cached: bool
    latency_s: float
    model: str


class LM:
    """A model client: wraps a `Backend` (or a litellm model string) with the run's machinery.

    Args:
        model: a litellm model string (wrapped in `LiteLLMBackend`) or any `Backend`.
        cache: response cache; None disables caching.
        ledger: shared usage ledger enforcing the run's `Budget`; None creates an unlimited one.
        params: default sampling parameters.
        max_concurrency: most calls in flight at once through this client (and its copies).
        max_retries: retries of a transient failure (timeouts, 429, 5xx, connection errors).
        timeout_s: per-request timeout for a model string (default 120 s). A `Backend` object
            carries its own timeout, so passing one with a `Backend` is an error.
        backoff_base_s, backoff_max_s: full-jitter backoff `uniform(0, min(max, base * 2**n))`.
        sleep, rng: injectable for tests.
    """

    def __init__(
        self,
        model: str | Backend,
        *,
        cache: ResponseCache | None = None,
        ledger: UsageLedger | None = None,
        params: SamplingParams = SamplingParams(),
        max_concurrency: int = 8,
        max_retries: int = 4,
        timeout_s: float | None = None,
        backoff_base_s: float = 0.5,
        backoff_max_s: float = 30.0,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
    ) -> None:
        _check_settings(max_concurrency, max_retries, backoff_base_s, backoff_max_s, params)
        self._backend = _make_backend(model, timeout_s)
        self._cache = cache
        self._ledger = ledger if ledger is not None else UsageLedger()
        self._params = params
        self._semaphore = threading.BoundedSemaphore(max_concurrency)
        self._max_concurrency = max_concurrency
        self._max_retries = max_retries
        self._backoff = (backoff_base_s, backoff_max_s)
        self._sleep = sleep
        self._rng = rng if rng is not None else random.Random()

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
        hit = self._cache.get(self.model, request, chosen) if self._cache is not None else None
        if hit is not None:
            self._ledger.record_cache_hit()
            return self._response(replace(hit, cost_usd=0.0), cached=True, start=start)
        completion = self._call(request, chosen)
        if self._cache is not None:
            self._cache.put(self.model, request, chosen, completion)
        return self._response(completion, cached=False, start=start)

    def _call(self, messages: list[Message], params: SamplingParams) -> Completion:
        """Reserve budget, generate with retries, settle the ledger."""
        reservation = self._ledger.reserve(params.max_tokens, estimate_prompt_tokens(messages))
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
        self._ledger.settle(reservation, completion)
        return completion

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


def estimate_prompt_tokens(messages: Sequence[Message]) -> int:
    """A deliberately generous prompt-size estimate used to reserve budget before a call."""
    chars = sum(len(m.get("content", "")) for m in messages)
    return chars // _CHARS_PER_TOKEN_ESTIMATE + _TOKENS_PER_MESSAGE * len(messages) + 1


def _make_backend(model: str | Backend, timeout_s: float | None) -> Backend:
    if isinstance(model, str):
        return LiteLLMBackend(
            model, timeout_s=DEFAULT_TIMEOUT_S if timeout_s is None else timeout_s
        )
    if isinstance(model, Backend):
        if timeout_s is not None:
            raise UserInputError(
                "timeout_s applies to model strings only; set the timeout on the Backend itself."
            )
        return model
    raise UserInputError(
        f"LM(model=...) takes a litellm model string or a Backend, got {type(model).__name__}."
    )


def _check_settings(
    max_concurrency: int, max_retries: int, base: float, ceiling: float, params: SamplingParams
) -> None:
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
