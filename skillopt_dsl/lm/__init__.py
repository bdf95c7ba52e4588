"""The one door to models: `LM` wraps a backend with cache, budget, retries and concurrency.

Importing this package does not import litellm; that happens on the first real model call.
"""

from skillopt_dsl.lm.base import Backend, Completion, Message, SamplingParams
from skillopt_dsl.lm.cache import ResponseCache
from skillopt_dsl.lm.client import DEFAULT_MODEL, LM, LMResponse, resolve_lm
from skillopt_dsl.lm.litellm_backend import LiteLLMBackend
from skillopt_dsl.lm.openai_compat import OpenAICompatBackend
from skillopt_dsl.lm.pricing import Price
from skillopt_dsl.lm.settings import LMOptions, LMSettings
from skillopt_dsl.lm.usage import Budget, UsageLedger, UsageSnapshot

__all__ = [
    "DEFAULT_MODEL",
    "LM",
    "Backend",
    "Budget",
    "Completion",
    "LMOptions",
    "LMResponse",
    "LMSettings",
    "LiteLLMBackend",
    "Message",
    "OpenAICompatBackend",
    "Price",
    "ResponseCache",
    "SamplingParams",
    "UsageLedger",
    "UsageSnapshot",
    "resolve_lm",
]
