"""The one place that imports litellm, so its import-time settings are applied exactly once.

`LITELLM_LOCAL_MODEL_COST_MAP=True` must be set *before* the first `import litellm`: without it
litellm downloads its model price map from GitHub at import time, which needs network, makes
the import slow and lets prices (hence `cost_usd` and `max_usd` budgets) change between runs.
With it litellm uses the price map bundled with the pinned version, so runs stay offline and
reproducible. `setdefault` keeps an explicit user choice. Importing this module is the lazy
import: nothing in `skillopt_dsl.lm` imports it until a real model is called.

Per-call CPU (measured by `bench/bench_litellm_cpu.py`; ~3.5 ms per `litellm.completion` here,
of which ~1.2 ms is the OpenAI SDK): no other global litellm setting is changed, on purpose.
litellm 1.110.2 has no public switch that makes a call cheaper without changing what users see:
its pricing runs inside every call (`LiteLLMBackend` reuses that price instead of pricing twice),
and the one large removable cost, the background success handler (~0.5 ms CPU per call), is also
what runs the user's own `litellm.callbacks` / `success_callback` and logging payloads; turning
it off would silently disable them, so it stays on. `suppress_debug_info` only mutes a banner.
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import litellm  # after the environment default above, on purpose

litellm.suppress_debug_info = True  # no "Provider List: ..." banners printed on errors

__all__ = ["litellm"]
