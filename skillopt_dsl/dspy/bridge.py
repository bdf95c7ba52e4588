"""The bridge from DSPy to our model layer: every call a DSPy program makes goes through `LM`.

`dspy.LM(engine=...)` accepts any object with `complete(request) -> response` (DSPy's canonical
`dspy.lm15.Request` / `Response`). `BridgeEngine` is such an engine: it turns the request into
chat messages and sends them with `LM.complete`, so the response cache, the usage ledger, the
retries and the **hard budget, checked before the call is sent** apply to DSPy programs exactly
as to our own modules. `bridge_lm` builds the `dspy.LM` around it with `cache=False` (DSPy's cache
key ignores the engine, so it would answer one model with another's reply) and `num_retries=0`
(our `LM` already retries transient failures; DSPy must not multiply them).

What the bridge carries: the system prompt and text messages, `temperature` and `max_tokens`
(when the request sets them; otherwise the `LM`'s own), and the rollout seed. Tools, images and
other non-text parts are refused with a clear error; provider-specific settings (`stop`,
`response_format`, ...) are not sent (our backends take messages and sampling parameters only).

A budget stop reaches the caller as `BridgeBudgetExceeded`, a `BudgetExceeded` that DSPy lets
through as it is (not wrapped in `LMUnexpectedError`). Each program run gets its own engine and
`RunRecord`, which counts its calls and tokens and keeps
the first `BudgetExceeded` / `ModelError`, so a stop that DSPy code caught and swallowed still
surfaces (`PredictorModule.run` re-raises it).
"""

from __future__ import annotations

import asyncio
import contextvars
import hashlib
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import dspy
from dspy.lm15 import Message, Response, TextPart, Usage, response_to_events
from dspy.utils.exceptions import LMError

from skillopt_dsl.errors import BudgetExceeded, ModelError, UserInputError
from skillopt_dsl.lm import LM, SamplingParams, resolve_lm
from skillopt_dsl.lm.client import DEFAULT_TIMEOUT_S
from skillopt_dsl.lm.openai_compat import backend_for

if TYPE_CHECKING:
    from skillopt_dsl.lm.client import LMResponse

__all__ = [
    "AsyncBridgeEngine",
    "BridgeBudgetExceeded",
    "BridgeEngine",
    "RunRecord",
    "Sample",
    "bridge_lm",
    "from_dspy_lm",
    "sample_seed",
]

BRIDGE_PREFIX = "skillopt/"
"""The bridged `dspy.LM`'s model name is this prefix plus our `LM`'s model name."""

_ROLES = {"user": "user", "assistant": "assistant", "developer": "system"}


class BridgeBudgetExceeded(BudgetExceeded, LMError):
    """Our `BudgetExceeded`, raised through DSPy: DSPy passes its own `LMError`s through
    unwrapped (anything else becomes `LMUnexpectedError`), so a program run under `bridge_lm`
    stops with an exception that is a `BudgetExceeded` (`except BudgetExceeded` catches it)."""

    def __init__(self, message: str) -> None:
        LMError.__init__(self, message)


@dataclass
class RunRecord:
    """What the model calls of one program run did. Thread-safe (a program may call in parallel).

    Attributes:
        calls: calls answered (from the provider or the response cache).
        prompt_tokens / completion_tokens: summed over those calls.
        cached_calls: how many of them the response cache answered.
        last_text: the latest completion (the program's final output, for a sequential program).
        budget_stop: the first `BudgetExceeded` a call raised (nothing was sent for it).
        model_error: the first `ModelError` a call raised (it failed after our retries).
        other_error: the first other exception from our side of a call (a refused request).
        parse_errors: outputs a `RawSkillAdapter` could not parse, as `(signature, error)` text.
        sent_calls / sent_tokens / sent_cost_usd: what reached the provider (not the cache),
            failed calls included: what the run's ledger charged for this run.
    """

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_calls: int = 0
    last_text: str = ""
    budget_stop: BudgetExceeded | None = None
    model_error: ModelError | None = None
    other_error: Exception | None = None
    sent_calls: int = 0
    sent_tokens: tuple[int, int] = (0, 0)
    sent_cost_usd: float = 0.0
    parse_errors: list[tuple[str, str]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def raise_recorded_failure(self) -> None:
        """A budget stop or a failed call anywhere in the run decides the rollout, even if DSPy
        code caught the exception: the budget stops the run, a failed call fails the rollout,
        and any other error on our side of a call (a refused request) is raised as itself."""
        if self.budget_stop is not None:
            raise self.budget_stop
        if self.model_error is not None:
            raise self.model_error
        if self.other_error is not None:
            raise self.other_error

    def answered(self, response: LMResponse) -> None:
        """Count one answered call."""
        with self._lock:
            self.calls += 1
            self.prompt_tokens += response.prompt_tokens
            self.completion_tokens += response.completion_tokens
            self.cached_calls += int(response.cached)
            self.last_text = response.text
            if not response.cached:
                self.sent_calls += 1
                prompt, completion = self.sent_tokens
                self.sent_tokens = (
                    prompt + response.prompt_tokens,
                    completion + response.completion_tokens,
                )
                self.sent_cost_usd += response.cost_usd or 0.0

    def failed(self, exc: Exception) -> None:
        """Keep the first budget stop, model failure and other error (a bug, a bad request)."""
        with self._lock:
            if isinstance(exc, BudgetExceeded):
                self.budget_stop = self.budget_stop or exc
            elif isinstance(exc, ModelError):
                self.model_error = self.model_error or exc
                self.sent_calls += 1
            else:
                self.other_error = self.other_error or exc

    def parse_failed(self, signature: str, error: str) -> None:
        """Record an output a `RawSkillAdapter` could not parse."""
        with self._lock:
            self.parse_errors.append((signature, error))

    @property
    def all_cached(self) -> bool:
        """True when at least one call was made and the cache answered every one."""
        return self.calls > 0 and self.cached_calls == self.calls


@dataclass
class Sample:
    """Which sample of one DSPy call a bridge request is: the call's `rollout_id` (set by
    `dspy.BestOfN` and `dspy.Refine`) and the next candidate's index (an `n=3` call sends three
    requests). Set around each DSPy call by `skillopt_dsl.dspy.route`."""

    rollout_id: Any = None
    _next: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def take(self) -> int:
        """The index of the candidate being sent now (0, 1, ...)."""
        with self._lock:
            index, self._next = self._next, self._next + 1
            return index


SAMPLE: contextvars.ContextVar[Sample | None] = contextvars.ContextVar(
    "skillopt_dspy_sample", default=None
)
"""The `Sample` of the DSPy call being executed (None: a request outside any DSPy call)."""


def sample_seed(seed: int, rollout_id: Any, index: int) -> int:
    """The seed of one sample: `seed` itself for the plain request (rollout 0 or None, first
    candidate); else one derived from all three, stable across processes. Repeated attempts
    are so distinct requests (to the provider and in the cache key) and a rerun of one sample
    is still a cache hit."""
    if rollout_id in (None, 0) and index == 0:
        return seed
    digest = hashlib.sha256(f"{seed}/{rollout_id!r}/{index}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


class BridgeEngine:
    """A DSPy engine (`complete(request) -> response`) that sends each request through `lm`.

    Args:
        lm: our model client (cache, ledger and budget, retries, concurrency limit).
        seed: the rollout seed sent with every call (None: the request's, else the LM's).
        record: where this engine counts calls and keeps failures (a fresh one by default).
    """

    def __init__(self, lm: LM, *, seed: int | None = None, record: RunRecord | None = None):
        self.lm = lm
        self.seed = seed
        self.record = record if record is not None else RunRecord()

    def complete(self, request: Any) -> Response:
        """Answer one `dspy.lm15.Request` with `LM.complete` (budget checked before sending)."""
        messages = request_messages(request)
        params = self._params(request.config)
        sample = SAMPLE.get()
        if sample is not None:
            params = replace(
                params, seed=sample_seed(params.seed, sample.rollout_id, sample.take())
            )
        try:
            response = self.lm.complete(messages, params=params)
        except BudgetExceeded as exc:
            self.record.failed(exc)
            raise BridgeBudgetExceeded(str(exc)) from exc
        except Exception as exc:
            self.record.failed(exc)
            raise
        self.record.answered(response)
        return Response(
            id=None,
            model=request.model or self.lm.model,
            message=Message.assistant([TextPart(response.text)]),
            finish_reason="stop",
            usage=Usage(
                input_tokens=response.prompt_tokens, output_tokens=response.completion_tokens
            ),
        )

    def stream(self, request: Any) -> Iterator[Any]:
        """DSPy's streaming entry point: the whole answer as one stream of events."""
        return iter(response_to_events(self.complete(request)))

    def close(self) -> None:
        """Nothing to release: the `LM` is borrowed, not owned."""

    def _params(self, config: Any) -> SamplingParams:
        base = self.lm.params
        chosen = replace(
            base,
            temperature=base.temperature if config.temperature is None else config.temperature,
            max_tokens=base.max_tokens if config.max_tokens is None else config.max_tokens,
        )
        if self.seed is not None:
            return replace(chosen, seed=self.seed)
        return chosen if config.seed is None else replace(chosen, seed=config.seed)


class AsyncBridgeEngine:
    """The async counterpart of a `BridgeEngine` (`acall`, `asyncio.gather` in `forward`): each
    request is answered by the sync engine in a worker thread (the context, the run's route
    and sample included, is copied into it), so the same cache, ledger and budget apply."""

    def __init__(self, engine: BridgeEngine) -> None:
        self.engine = engine

    async def complete(self, request: Any) -> Response:
        """Answer one request with `BridgeEngine.complete`, off the event loop."""
        return await asyncio.to_thread(self.engine.complete, request)

    async def stream(self, request: Any) -> AsyncIterator[Any]:
        """The whole answer as one stream of events."""
        for event in response_to_events(await self.complete(request)):
            yield event

    async def aclose(self) -> None:
        """Nothing to release."""

    def close(self) -> None:
        """Nothing to release."""


def request_messages(request: Any) -> list[dict[str, str]]:
    """The chat messages of a `dspy.lm15.Request` (text only; anything else is refused)."""
    if request.tools:
        raise UserInputError(
            "the skillopt bridge carries text messages only, but this DSPy call declares tools; "
            "use a DSPy adapter without native function calling"
        )
    messages: list[dict[str, str]] = []
    if request.system:
        system = request.system
        text = system if isinstance(system, str) else "".join(_text(p) for p in system)
        messages.append({"role": "system", "content": text})
    for message in request.messages:
        role = _ROLES.get(message.role)
        if role is None:
            raise UserInputError(
                f"the skillopt bridge cannot send a {message.role!r} message; it carries "
                "system, user and assistant text only"
            )
        messages.append({"role": role, "content": "".join(_text(p) for p in message.parts)})
    return messages


def _text(part: Any) -> str:
    if isinstance(part, TextPart):
        return str(part.text)
    raise UserInputError(
        f"the skillopt bridge carries text only, got a {type(part).__name__} in a DSPy request; "
        "pass text inputs (images, audio and files are not supported)"
    )


def bridge_lm(
    lm: str | LM | None = None, *, seed: int | None = None, record: RunRecord | None = None
) -> dspy.LM:
    """A `dspy.LM` whose every call goes through our `LM` (see the module docstring).

    `lm` is a litellm model string, an `LM` (its cache, ledger and budget are used), or None for
    the embedded default. Use it to run any DSPy code (an optimizer, an evaluation) under our
    ledger and budget: `dspy.configure(lm=bridge_lm(LM("local/smollm2-135m", ledger=...)))`.
    It cannot be saved with a program: set it with `dspy.context`, never on a predictor.
    """
    client = resolve_lm(lm)
    engine = BridgeEngine(client, seed=seed, record=record)
    return dspy.LM(
        f"{BRIDGE_PREFIX}{client.model}",
        engine=engine,
        async_engine=AsyncBridgeEngine(engine),
        cache=False,
        num_retries=0,
    )


def engine_record(lm: Any) -> RunRecord | None:
    """The `RunRecord` of a bridged `dspy.LM`; None for any other LM."""
    engine = getattr(lm, "engine", None)
    return engine.record if isinstance(engine, BridgeEngine) else None


_SAMPLING_KEYS = ("temperature", "max_tokens", "top_p", "stop")
_IGNORED_KEYS = ("rollout_id",)
"""`dspy.LM` settings that only separate DSPy's own cache entries (our seed does that)."""


def from_dspy_lm(lm: Any) -> LM:
    """Our `LM` for a `dspy.LM`, so a DSPy user passes the LM they already built.

    Its model string, `api_base` (or `base_url`), `api_key`, `num_retries`, `timeout` (seconds
    per request, our backend's `timeout_s`) and sampling settings (`temperature`,
    `max_tokens`, `top_p`, `stop`) are carried; a setting left unset
    takes our default (`SamplingParams`: temperature 0, 256 max tokens, which budgets reserve).
    A `bridge_lm` gives back the `LM` it bridges. Any other setting is refused, naming it,
    rather than dropped.

    Raises:
        UserInputError: not a `dspy.LM`, or a setting our `LM` cannot carry.
    """
    engine = getattr(lm, "engine", None)
    if isinstance(engine, BridgeEngine):
        return engine.lm
    if not isinstance(lm, dspy.LM):
        raise UserInputError(
            f"lm= takes a dspy.LM, a litellm model string, a skillopt LM or a Backend; got a "
            f"{type(lm).__name__}, whose calls skillopt cannot route through its ledger and budget"
        )
    settings = {k: v for k, v in dict(lm.kwargs).items() if v is not None}
    api_base = settings.pop("api_base", None) or settings.pop("base_url", None)
    api_key = settings.pop("api_key", None)
    timeout = settings.pop("timeout", None)
    sampling = {k: settings.pop(k) for k in _SAMPLING_KEYS if k in settings}
    for key in _IGNORED_KEYS:
        settings.pop(key, None)
    if settings:
        raise UserInputError(
            f"the dspy.LM {lm.model!r} sets {sorted(settings)}, which skillopt's LM does not "
            "carry; drop them from the dspy.LM, or pass lm=skillopt_dsl.lm.LM(...) built with "
            "the backend and SamplingParams you need"
        )
    backend = backend_for(lm.model, api_base=api_base, api_key=api_key,
                          timeout_s=_timeout_s(lm.model, timeout))  # fmt: skip
    return LM(
        backend,
        params=SamplingParams(**sampling),
        max_retries=int(getattr(lm, "num_retries", 4) or 0),
    )


def _timeout_s(model: str, timeout: Any) -> float:
    """A `dspy.LM`'s `timeout=` as our backend's `timeout_s` (None: our default)."""
    if timeout is None:
        return DEFAULT_TIMEOUT_S
    if isinstance(timeout, bool) or not isinstance(timeout, int | float):
        raise UserInputError(
            f"the dspy.LM {model!r} sets timeout={timeout!r}; skillopt carries a timeout in "
            "seconds (a number), per request"
        )
    return float(timeout)
