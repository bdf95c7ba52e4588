"""Token counts from the model's tokenizer, through litellm.

`litellm.token_counter` uses the model's own tokenizer where litellm knows it (tiktoken's
`o200k_base` for GPT-4o models, Hugging Face tokenizers for some open models) and tiktoken's
`cl100k_base` otherwise: a real BPE tokenizer either way, so 400 CJK characters count as
hundreds of tokens, not `chars / 3`. Used to reserve a call's prompt before it is sent, and to
estimate the usage of a reply that came back without any (flagged `usage_estimated`).
"""

from __future__ import annotations

from collections.abc import Sequence

from skillopt_dsl.lm.base import Message

__all__ = ["count_prompt_tokens", "count_text_tokens"]


def count_prompt_tokens(model: str, messages: Sequence[Message]) -> int:
    """Prompt tokens of `messages` for `model`, chat-format overhead included (at least 1)."""
    from skillopt_dsl.lm._litellm import litellm

    counted = litellm.token_counter(model=model, messages=[dict(m) for m in messages])
    return max(1, int(counted))


def count_text_tokens(model: str, text: str) -> int:
    """Tokens of a completion's `text` for `model` (0 for empty text)."""
    if not text:
        return 0
    from skillopt_dsl.lm._litellm import litellm

    return int(litellm.token_counter(model=model, text=text, count_response_tokens=True))
