"""The compile command's lines before its progress panel: what is loading, and how long it took."""

from __future__ import annotations

import logging

from skillopt_dsl.lm import LM
from skillopt_dsl.lm.client import resolve_lm

__all__ = ["load_in_process", "progress_log"]

progress_log = logging.getLogger("skillopt_dsl.progress")
"""The compile command's own progress lines (the logger `handled` shows at INFO)."""


def load_in_process(target: object) -> None:
    """Load an in-process target model (`local/...`) before the progress panel starts, saying
    so (it would load silently on the seed's first call); any other target is left alone.
    `target` is an `LM` or a model as the command line gives it (a model string, or None: the
    embedded model)."""
    if target is None or isinstance(target, str):
        target = resolve_lm(target)
    if not isinstance(target, LM) or not getattr(target.backend, "is_local", False):
        return
    from skillopt_dsl.lm import local

    runtime = local.runtime_label(local.select_runtime())
    progress_log.info("loading the model %s into this process (%s)", target.model, runtime)
    seconds = local.preload(target.model)
    progress_log.info("model loaded in %.1f s; scoring the seed skill next", seconds)
