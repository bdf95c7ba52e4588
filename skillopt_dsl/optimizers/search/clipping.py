"""`clip_to_budget`: apply ranked edits greedily within a step's learning-rate budget (GradientText
and Beam).
"""

from __future__ import annotations

from collections.abc import Sequence

from skillopt_dsl.skill import ApplyReport, Edit, EditOutcome, Skill, token_distance


def clip_to_budget(
    skill: Skill, ranked: Sequence[Edit], budget_tokens: int, max_edits: int | None
) -> tuple[Skill, list[Edit], ApplyReport]:
    """Apply edits greedily, keeping each only if the total change stays within `budget_tokens`.

    Returns the candidate, the edits kept, and a report of every edit (clipped ones are reported
    as refused with the reason "over the learning-rate budget").
    """
    current: Skill = skill
    kept: list[Edit] = []
    outcomes: list[EditOutcome] = []
    for edit in ranked:
        if max_edits is not None and len(kept) >= max_edits:
            outcomes.append(EditOutcome(edit, "refused", f"max_edits={max_edits} reached"))
            continue
        trial, report = current.apply([edit])
        outcome = report.outcomes[0]
        if outcome.status == "applied":
            change = token_distance(skill.text, trial.text)
            if change <= budget_tokens:
                current, kept = trial, [*kept, edit]
            else:
                reason = f"over the learning-rate budget ({change} > {budget_tokens} tokens)"
                outcome = EditOutcome(edit, "refused", reason, outcome.match, outcome.similarity)
        outcomes.append(outcome)
    return current, kept, ApplyReport(tuple(outcomes))
