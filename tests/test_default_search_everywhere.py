"""Sleep nights and skill-folder descriptions run compile's default search (issue 51): built
from `compile.default_optimizer`, never a search written out by hand, so a changed default
reaches them."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

import skillopt_dsl.sleep.night as night_module
from skillopt_dsl.cli.skill_folder import ProposerChoice, trigger_optimizer
from skillopt_dsl.optimizers import Bundle, ConsolidationProposer, GradientText, HandOff
from skillopt_dsl.optimizers.proposers import Proposer, ReflectiveProposer
from skillopt_dsl.skill import Skill
from skillopt_dsl.skill_folder.describe import words_optimizer
from skillopt_dsl.skill_folder.trigger_proposer import TriggerWordsProposer
from skillopt_dsl.sleep import SleepConfig, SleepProject
from skillopt_dsl.sleep.judge import ScoreBook, TaskJudge
from skillopt_dsl.sleep.replay import Replay

compile_module = importlib.import_module(
    "skillopt_dsl.compile"
)  # the package exports a `compile` function

CHANGED = HandOff(first=GradientText(epochs=7), then=Bundle(max_steps=3), probe_steps=2)
"""A default unlike the shipped one in every part a hand-built search would reset."""


def _changed_default(module: object = None) -> HandOff:
    return CHANGED


def test_a_description_runs_the_changed_default_on_its_own_proposers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Kills: `words_optimizer` (sleep describe, compile --skill-folder --proposer words) or
    `trigger_optimizer` building `HandOff(GradientText(...), Bundle(...))` by hand: a changed
    default would not reach the description's search."""
    monkeypatch.setattr(compile_module, "default_optimizer", _changed_default)
    for chosen, names in [
        (words_optimizer(), ["trigger-words"]),
        (trigger_optimizer(ProposerChoice.words), ["trigger-words"]),
        (trigger_optimizer(ProposerChoice.reflect), ["reflective"]),
        (trigger_optimizer(ProposerChoice.both), ["trigger-words", "reflective"]),
    ]:
        assert isinstance(chosen, HandOff)
        assert (chosen.probe_steps, chosen.first.epochs, chosen.then.max_steps) == (2, 7, 3)
        assert [p.name for p in chosen.first.proposers] == names
        assert [p.name for p in chosen.then.proposers] == names
    words = words_optimizer()
    assert isinstance(words, HandOff) and isinstance(
        words.first.consolidation, ConsolidationProposer
    )
    assert not words.first.consolidation.use_model  # the words search calls no optimizer model


def test_the_words_search_is_the_shipped_default_on_the_words_proposer() -> None:
    """Kills: the description's search drifting from what it was before it was derived from
    the default (same settings, same proposers, a consolidation without a model)."""
    words = [TriggerWordsProposer()]
    before = HandOff(
        first=GradientText(proposers=words, consolidation=ConsolidationProposer(use_model=False)),
        then=Bundle(proposers=words),
    )
    assert words_optimizer().config() == before.config()
    both = HandOff.with_proposers([TriggerWordsProposer(), ReflectiveProposer()])
    assert trigger_optimizer(ProposerChoice.both).config() == both.config()


class _ReplayWithOwnProposers(Replay):
    """A replay module that declares its own proposers (`ChoosesProposers`): one whose name
    tells it apart (it never runs here)."""

    def default_proposers(self) -> list[Proposer]:
        return [ReflectiveProposer(name="fake-own")]


def test_a_night_runs_the_default_for_its_replay_module(tmp_path: Path) -> None:
    """Kills: the night calling `default_optimizer()` without its replay module (a module that
    declares its own proposers would get the generic ones)."""
    project = tmp_path / "p"
    (project / ".skillopt").mkdir(parents=True)
    night = night_module._Night(SleepProject.open(project), SleepConfig(project=project), None)
    module = _ReplayWithOwnProposers(skill=Skill("s"), judge=TaskJudge(), book=ScoreBook())
    chosen = night._optimizer(module)
    assert isinstance(chosen, HandOff)
    assert [p.name for p in chosen.first.proposers] == ["fake-own"]
    assert [p.name for p in chosen.then.proposers] == ["fake-own"]
