"""`LiteLLMBackend`: any litellm provider string as a `Backend`, the local models included."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

from skillopt_dsl.errors import UserInputError
from skillopt_dsl.lm.base import Completion, Message, SamplingParams
from skillopt_dsl.lm.pricing import FREE, LOCAL_PREFIX, Price, table_price

ExtraValue = str | int | float | bool
"""A value litellm accepts as an extra keyword (`top_p=0.9`, `api_version="..."`)."""

_RESERVED = frozenset(
    {
        "model",
        "messages",
        "temperature",
        "max_tokens",
        "seed",
        "timeout",
        "api_base",
        "max_retries",
        "num_retries",
        "stream",
        "drop_params",
    }
)
_SECRET_WORDS = ("key", "token", "secret", "password")
_SECRET_NAME_ENDINGS = ("key", "_token", "secret", "password", "credentials")


class LiteLLMBackend:
    """Calls `litellm.completion` for one model string (`openai/gpt-4o-mini`, `local/smollm2-135m`).

    litellm's own retries are switched off (`LM` retries with backoff and counts them), and
    `drop_params=True` lets providers that do not support `seed` ignore it (the seed still
    separates cache entries). Prices come from litellm's bundled price map; a model it has no
    price for reports `cost_usd=None`, never a made-up 0. `local/...` models run in-process
    (see `skillopt_dsl.lm.local`) and cost 0.0. A reply without usage is reported as 0 tokens
    (litellm's own zero), which `LM` replaces with a tokenizer estimate and flags.

    `api_base` and `extra` (provider keywords such as `api_version`; sampling parameters belong
    in `SamplingParams`) are part of `identity()`, hence of the cache key; secret-looking
    extras (`api_key`, `..._token`, `...credentials`) are sent but never recorded.
    """

    def __init__(
        self,
        model: str,
        *,
        api_base: str | None = None,
        extra: Mapping[str, ExtraValue] | None = None,
        timeout_s: float = 120.0,
    ) -> None:
        if not isinstance(model, str) or not model.strip():
            raise UserInputError(
                "Model must be a non-empty litellm string such as 'openai/gpt-4o-mini', "
                f"got {model!r}."
            )
        clash = sorted(_RESERVED & set(extra or {}))
        if clash:
            raise UserInputError(
                f"LiteLLMBackend(extra=...) may not set {clash}; "
                "use SamplingParams or the named arguments."
            )
        if timeout_s <= 0:
            raise UserInputError(f"timeout_s must be > 0, got {timeout_s!r}.")
        self._model = model
        self._api_base = api_base
        self._extra: Mapping[str, ExtraValue] = MappingProxyType(dict(extra or {}))
        self._timeout_s = timeout_s
        self._unpriced = False
        if self.is_local:
            from skillopt_dsl.lm import local

            local.check_local_model(model)

    @property
    def model(self) -> str:
        """The litellm model string."""
        return self._model

    @property
    def is_local(self) -> bool:
        """True for the embedded in-process models (`local/...`)."""
        return self._model.startswith(LOCAL_PREFIX)

    @property
    def api_base(self) -> str | None:
        """The endpoint given, or None for litellm's default (or its environment setting)."""
        return self._api_base

    def identity(self) -> dict[str, object]:
        """What besides sampling parameters changes an answer (no secrets): see `Backend`."""
        return {
            "model": self._model,
            "api_base": normalised_base(self._api_base or _environment_base(self._model)),
            "provider_params": {
                k: v for k, v in sorted(self._extra.items()) if not is_secret_name(k)
            },
        }

    def price(self) -> Price | None:
        """The model's price from litellm's table (0 for `local/...`), None when unknown."""
        return FREE if self.is_local else table_price(self._model)

    def secrets(self) -> list[str]:
        """Credential-like values passed in `extra` (for scrubbing error messages)."""
        return [
            str(v) for k, v in self._extra.items() if any(w in k.lower() for w in _SECRET_WORDS)
        ]

    def generate(self, messages: list[Message], params: SamplingParams) -> Completion:
        """Run one completion through litellm (thread-safe)."""
        from skillopt_dsl.lm._litellm import litellm

        if self.is_local:
            from skillopt_dsl.lm.local import register_local_provider

            register_local_provider()
        response = litellm.completion(**self._request(messages, params))
        usage = getattr(response, "usage", None)
        return Completion(
            text=self._reply_text(response.choices[0].message),
            prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
            completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
            cost_usd=self._cost(response),
        )

    def _reply_text(self, message: Any) -> str:
        """The completion's text from litellm's reply message (a subclass may add to it)."""
        return str(message.content or "")

    def _request(
        self, messages: Sequence[Mapping[str, object]], params: SamplingParams
    ) -> dict[str, object]:
        """The keywords of one `litellm.completion` call: the one place they are built."""
        optional = params.provider_kwargs()
        clash = sorted(set(optional) & set(self._extra))
        if clash:
            raise UserInputError(
                f"{clash} set both in SamplingParams and in LiteLLMBackend(extra=...); "
                "set each in one place only."
            )
        request: dict[str, object] = {
            "model": self._model,
            "messages": list(messages),
            "temperature": params.temperature,
            "max_tokens": params.max_tokens,
            "seed": params.seed,
            "timeout": self._timeout_s,
            "max_retries": 0,
            "num_retries": 0,
            "drop_params": True,
            **optional,
            **self._extra,
        }
        if self._api_base is not None:
            request["api_base"] = self._api_base
        return request

    def _cost(self, response: Any) -> float | None:
        """The call's price in USD, or None when litellm has no price for this model.

        `litellm.completion` already prices every response with the same calculator and price
        map as `completion_cost` and stores it in `response._hidden_params["response_cost"]`;
        that value is reused instead of pricing the response a second time (0.6-0.9 ms CPU per
        call). When litellm recorded no price, `completion_cost` decides as before: a
        `ModelNotMappedError` means unpriced (None), any other error propagates. An unpriced
        model is remembered per backend so its later calls skip that second lookup.
        """
        if self.is_local:
            return 0.0
        stamped = _stamped_cost(response)
        if stamped is not None:
            return stamped
        if self._unpriced:
            return None
        from skillopt_dsl.lm._litellm import litellm

        try:
            return float(litellm.completion_cost(completion_response=response, model=self._model))
        except litellm.exceptions.ModelNotMappedError:
            self._unpriced = True
            return None

    def __repr__(self) -> str:
        return f"LiteLLMBackend({self._model!r})"


def _stamped_cost(response: Any) -> float | None:
    """The price litellm stored on the response while returning it, if it computed one."""
    hidden = getattr(response, "_hidden_params", None)
    cost = hidden.get("response_cost") if isinstance(hidden, Mapping) else None
    return float(cost) if isinstance(cost, int | float) and not isinstance(cost, bool) else None


def is_secret_name(name: str) -> bool:
    """True for keyword names that carry credentials (`api_key`, `aws_session_token`)."""
    lowered = name.lower()
    return lowered == "token" or lowered.endswith(_SECRET_NAME_ENDINGS)


def normalised_base(api_base: str | None) -> str | None:
    """An endpoint URL without its trailing slash (two spellings of one endpoint are one)."""
    return None if api_base is None else api_base.rstrip("/")


def _environment_base(model: str) -> str | None:
    """The endpoint litellm reads from the environment for this provider, if one is set
    (`OPENAI_API_BASE`, `OPENAI_BASE_URL`, `OLLAMA_API_BASE`, ...)."""
    if "/" not in model or model.startswith(LOCAL_PREFIX):
        return None
    provider = model.split("/", 1)[0].upper().replace("-", "_")
    for suffix in ("_API_BASE", "_BASE_URL"):
        value = os.environ.get(provider + suffix)
        if value:
            return value
    return None
