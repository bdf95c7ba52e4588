"""Point a model at a server of the user's own: `--api-base`, `--optimizer-api-base` and their
environment variables, shared by every command line (`skillopt-dsl` and `skillopt-dsl sleep`).

An API base applies to a model string served over HTTP (`openai/<name>` for any
OpenAI-compatible server: llama.cpp's `llama-server`, vLLM, Ollama's `/v1`; or any litellm
provider that takes an `api_base`). The in-process `local/...` models have no endpoint, so an
API base given for one is an error that says what to pass instead.
"""

from __future__ import annotations

from skillopt_dsl.errors import UserInputError
from skillopt_dsl.lm.base import Backend, SamplingParams
from skillopt_dsl.lm.client import DEFAULT_MODEL, LM
from skillopt_dsl.lm.pricing import LOCAL_PREFIX

__all__ = ["API_BASE_ENV", "OPTIMIZER_API_BASE_ENV", "at_api_base"]

API_BASE_ENV = "SKILLOPT_API_BASE"
"""Environment variable read by `--api-base` (the target model's server)."""
OPTIMIZER_API_BASE_ENV = "SKILLOPT_OPTIMIZER_API_BASE"
"""Environment variable read by `--optimizer-api-base` (the optimizer model's server)."""

ModelChoice = str | LM | Backend | None


def at_api_base(
    spec: ModelChoice,
    api_base: str | None,
    *,
    flag: str = "--api-base",
    model_flag: str = "--model",
    env: str = API_BASE_ENV,
) -> ModelChoice:
    """`spec` (a model string, an `LM`, or None for the embedded default) served at `api_base`.

    Returns `spec` unchanged when `api_base` is None; otherwise a new `LM` for the same model
    string and sampling parameters, reached at `api_base`. `flag`, `model_flag` and `env` only
    name the options in the error raised for an in-process `local/...` model or a `Backend`.
    """
    if api_base is None:
        return spec
    if isinstance(spec, Backend):
        raise UserInputError(
            f"{flag} (or {env}) cannot re-point a Backend object; set its endpoint on the Backend."
        )
    model = DEFAULT_MODEL if spec is None else spec.model if isinstance(spec, LM) else spec
    if model.startswith(LOCAL_PREFIX):
        raise UserInputError(
            f"{flag} (or {env}) is {api_base!r}, but the model is {model!r}, which runs in "
            f"this process and has no server. Name the served model with {model_flag} "
            f"(e.g. {model_flag} openai/<name> for an OpenAI-compatible server), or unset {env}."
        )
    params = spec.params if isinstance(spec, LM) else SamplingParams()
    return LM(model, params=params, api_base=api_base)
