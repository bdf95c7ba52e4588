"""Dreams: more to learn from than the night's own tasks, never more to be judged on.

Two kinds, both off by default (`SleepConfig.dream_variants`, `SleepConfig.contrastive`):

- **Variants** (`dream_variants`): each training task is also asked in `count` perturbed
  rewordings (the same checks, ids `<task>~dream<k>`), so an edit that only fits one wording
  helps less. Rewordings come from the optimizer model when the night has one (one call per
  variant, through the night's client and budget; a reply that is empty, too long or the same
  request falls back) or from seeded surface perturbations (a polite or terse frame, filler
  words dropped, case). Variants join the *training* split only: validation and test are the
  mined tasks as they are, so the gate decides exactly as it would without dreams.
- **Contrastive rollouts** (`contrastive`): when a replay scores below the best reply seen for
  the same task (any skill's, or the reply the user accepted in the session), its feedback
  carries the pair: the GOOD reply and how this BAD one differs (the checks it failed). The
  pair reaches the optimizer's reflection through the feedback; scores are unchanged, so the
  gate is unaffected.
"""

from __future__ import annotations

import logging
import random
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from skillopt_dsl.errors import BudgetExceeded, ModelError
from skillopt_dsl.types import Example

if TYPE_CHECKING:
    from skillopt_dsl.lm import LM

__all__ = ["REWORD_SYSTEM", "contrast_note", "dream_variants", "perturb"]

logger = logging.getLogger(__name__)

REWORD_SYSTEM = (
    "Reword the developer's request to their coding agent. Keep every file name, command, "
    "identifier and constraint exactly; change only the wording. Reply with the reworded "
    "request alone."
)
_FRAMES = (
    "{r}",
    "Please {l}",
    "Can you {l}?",
    "I need you to {l}",
    "{r} Thanks.",
    "Quick one: {l}",
)
_FILLER = re.compile(r"(?i)\b(?:please|just|actually|basically|really|kindly)\s+")
GOOD_CHARS = 600


def perturb(request: str, rng: random.Random) -> str:
    """A surface rewording of `request`: a frame, filler dropped, first letter's case.

    >>> perturb("Fix the login test", random.Random(1)) != "Fix the login test"
    True
    """
    core = _FILLER.sub("", request.strip()).strip() or request.strip()
    lower = core[:1].lower() + core[1:]
    lower = lower.rstrip("?.!")
    frames = [f for f in _FRAMES if f.format(r=core, l=lower) != request.strip()]
    frame = rng.choice(frames or list(_FRAMES))
    return frame.format(r=core, l=lower)


def dream_variants(
    train: Sequence[Example],
    count: int,
    *,
    seed: int = 0,
    lm: LM | None = None,
) -> list[Example]:
    """`count` reworded copies of each training task (copies of recurring tasks excluded).

    With `lm`, each rewording is asked of the model (falling back to `perturb` for a reply that
    is unusable); a spent budget stops the model and the rest are perturbed."""
    if count <= 0:
        return []
    rng = random.Random(seed)
    variants: list[Example] = []
    model = lm
    for example in (e for e in train if "~" not in e.id):
        request = str(example.inputs.get("request") or "")
        for k in range(1, count + 1):
            worded = None
            try:
                worded = _reworded(request, model, seed + k)
            except BudgetExceeded as exc:
                logger.warning("dream variants stopped asking the model: %s", exc)
                model = None
            worded = worded or perturb(request, rng)
            inputs = {**example.inputs, "request": worded}
            variants.append(Example(f"{example.id}~dream{k}", inputs, dict(example.labels)))
    return variants


def _reworded(request: str, lm: LM | None, seed: int) -> str | None:
    if lm is None or not request.strip():
        return None
    messages = [
        {"role": "system", "content": REWORD_SYSTEM},
        {"role": "user", "content": request},
    ]
    try:
        reply = lm.complete(messages, seed=seed).text.strip().strip('"')
    except ModelError as exc:
        logger.warning("a dream rewording failed (%s); using a perturbation", exc)
        return None
    same = " ".join(reply.split()).casefold() == " ".join(request.split()).casefold()
    if not reply or same or len(reply) > 2 * len(request) + 80:
        return None
    return reply


def contrast_note(good: str) -> str:
    """The feedback line that pairs this (BAD) reply with a GOOD one for the same task."""
    shown = good if len(good) <= GOOD_CHARS else good[: GOOD_CHARS - 3] + "..."
    return (
        f"Contrast: a GOOD reply to this task was: {shown!r}. This BAD reply scored lower; "
        "the failed checks above say how it differs."
    )
