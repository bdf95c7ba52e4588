"""The one place that imports litellm, so its import-time settings are applied exactly once.

`LITELLM_LOCAL_MODEL_COST_MAP=True` must be set *before* the first `import litellm`: without it
litellm downloads its model price map from GitHub at import time, which needs network, makes
the import slow and lets prices (hence `cost_usd` and `max_usd` budgets) change between runs.
With it litellm uses the price map bundled with the pinned version, so runs stay offline and
reproducible. `setdefault` keeps an explicit user choice. Importing this module is the lazy
import: nothing in `skillopt_dsl.lm` imports it until a real model is called.
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import litellm  # after the environment default above, on purpose

litellm.suppress_debug_info = True  # no "Provider List: ..." banners printed on errors

__all__ = ["litellm"]
