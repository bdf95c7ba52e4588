"""Replay: the mined tasks run as an ordinary `SkillModule` under one trainable document.

The document is the live files' (`skillopt_dsl.sleep.live.compose`): the agent's skill file,
the memory file's own text inside a protected region, then the memory file's learned block.
The task's context and request are the inputs; the reply is the one output, judged by
`skillopt_dsl.sleep.judge.TaskJudge`. Replays through the user's own agent CLI instead of a
model are `skillopt_dsl.sleep.agent_replay.AgentReplay`.

Moved (still importable from here, with a `DeprecationWarning`): the judge, `RUBRIC_PASS`,
`ScoreBook`, `Entry` and `no_regression_guard` to `skillopt_dsl.sleep.judge`; `compose`,
`split_document` and `MEMORY_NOTE` to `skillopt_dsl.sleep.live`.
"""

from __future__ import annotations

import importlib
import warnings
from typing import TYPE_CHECKING

from skillopt_dsl.metrics import Score
from skillopt_dsl.module import InputField, OutputField, RunOutcome, SkillModule
from skillopt_dsl.skill import Skill
from skillopt_dsl.sleep import judge as judging
from skillopt_dsl.sleep.harvest import REPLAY_MARKER
from skillopt_dsl.types import Example

if TYPE_CHECKING:
    from skillopt_dsl.lm import LM

__all__ = ["Replay"]

_MOVED = {
    "RUBRIC_PASS": "skillopt_dsl.sleep.judge",
    "Entry": "skillopt_dsl.sleep.judge",
    "ScoreBook": "skillopt_dsl.sleep.judge",
    "TaskJudge": "skillopt_dsl.sleep.judge",
    "checks_of": "skillopt_dsl.sleep.judge",
    "no_regression_guard": "skillopt_dsl.sleep.judge",
    "MEMORY_NOTE": "skillopt_dsl.sleep.live",
    "compose": "skillopt_dsl.sleep.live",
    "split_document": "skillopt_dsl.sleep.live",
}


class Replay(SkillModule):
    """Do the developer's request in their project, as their coding agent would."""

    context: str = InputField()
    request: str = InputField()
    response: str = OutputField()

    def __init__(
        self,
        *,
        skill: Skill,
        judge: judging.TaskJudge,
        book: judging.ScoreBook,
        contrastive: bool = False,
    ) -> None:
        super().__init__(skill=skill, metric=judge)
        self.judge = judge
        self.book = book
        self.contrastive = contrastive

    def run(self, skill: Skill, example: Example, lm: LM, *, seed: int) -> RunOutcome:
        """One call; the prompt opens with the replay marker so no harvest reads it back."""
        self.judge.bind(lm.ledger)
        messages = self.render(skill, example)
        messages[-1]["content"] = f"{REPLAY_MARKER}\n{messages[-1]['content']}"
        response = lm.complete(messages, seed=seed)
        return self.outcome(response, trace={"skill_hash": skill.hash})

    def score(self, example: Example, outcome: RunOutcome) -> Score:
        """The judge's score, also kept in the score book under the skill that ran; with
        `contrastive`, a reply below the task's best one gets the GOOD/BAD pair in its
        feedback (`skillopt_dsl.sleep.dreams`)."""
        score = super().score(example, outcome)
        if self.contrastive and score.value < 1.0:
            score = self._contrast(example, score)
        skill_hash = outcome.trace["skill_hash"] if isinstance(outcome.trace, dict) else ""
        self.book.record(
            skill_hash, example.id, judging.Entry(score.value, score.feedback, outcome.output)
        )
        return score

    def _contrast(self, example: Example, score: Score) -> Score:
        from skillopt_dsl.sleep.dreams import contrast_note

        best = self.book.best(example.id)
        good = best.output if best is not None and best.score > score.value else None
        accepted = str(example.labels.get("accepted") or "")
        if good is None and accepted and self.judge.rules_score(example, accepted) > score.value:
            good = accepted
        if good is None:
            return score
        return Score(score.value, f"{score.feedback or ''} | {contrast_note(good)}")


def __getattr__(name: str) -> object:
    """The names that moved out of this module, with a `DeprecationWarning` naming their home."""
    home = _MOVED.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    warnings.warn(
        f"skillopt_dsl.sleep.replay.{name} moved; import it from {home}",
        DeprecationWarning,
        stacklevel=2,
    )
    return getattr(importlib.import_module(home), name)
