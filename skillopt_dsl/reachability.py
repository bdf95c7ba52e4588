"""Fail fast: a run whose seed evaluation got no answer at all stops before the search.

When every call of the seed's validation evaluation failed (an unreachable endpoint, a bad key,
an unknown model), a search would only spend its budget on more failures and end with "nothing
passed". `require_an_answer` turns that into one clear error naming the model, its endpoint and
the first failure. `compile` calls it where the seed's report is first produced, so
`skillopt_dsl.compile`, `SkillOptimizer` and `skillopt-dsl sleep run` all stop the same way.
"""

from __future__ import annotations

from skillopt_dsl.errors import ModelError
from skillopt_dsl.evaluate import EvaluationReport
from skillopt_dsl.lm import LM

__all__ = ["TargetUnreachable", "require_an_answer"]


class TargetUnreachable(ModelError):
    """Every call of the seed evaluation failed: the target model cannot be reached or used."""


def require_an_answer(report: EvaluationReport, lm: LM, *, what: str = "seed") -> None:
    """Raise `TargetUnreachable` when every rollout of `report` failed at the model call.

    A report with at least one answered rollout (even a wrong or unparseable one) passes: the
    model is reachable, and scoring is the gate's business.
    """
    records = report.records
    if not records or any(r.error is None for r in records):
        return
    first = records[0]
    endpoint = lm.identity().get("api_base") or "the provider's default endpoint"
    raise TargetUnreachable(
        f"every call of the {what} evaluation failed ({len(records)} of {len(records)} "
        f"examples), so the search would only spend its budget on failures. Model "
        f"{lm.model!r} at {endpoint}; first failure (example {first.example_id!r}): "
        f"{str(first.error).rstrip('.')}. Check the endpoint (api_base), the API key and "
        "the model name."
    )
