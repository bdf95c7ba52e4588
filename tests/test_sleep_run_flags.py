"""`sleep run`'s search: compile's default with the night's flags set on it (issue 51)."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from skillopt_dsl.optimizers import Bundle, FormatRuleProposer, GradientText, HandOff, Optimizer
from skillopt_dsl.sleep.cli_run_flags import (
    NightLimits,
    NightReads,
    NightReplay,
    NightSearch,
    night_config,
)
from skillopt_dsl.sleep.errors import SleepError

# `skillopt_dsl.compile` is the function of that name: the module, by its import path
compile_module = importlib.import_module("skillopt_dsl.compile")


def night_optimizer(search: NightSearch, tmp_path: Path) -> Optimizer | None:
    """The optimizer of the night `sleep run` builds from its flag records."""
    reads = NightReads(project=tmp_path, home=tmp_path)
    config = night_config(
        reads, NightReplay(), NightLimits(), search, auto_adopt=False, describe=()
    )
    return config.optimizer


def test_a_night_runs_compiles_default_search_with_its_flags(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Kills: `sleep run` building its search by hand (`HandOff(first=GradientText(epochs=...,
    batch_size=...))`) instead of compile's default (`compile.default_optimizer`) with
    `--epochs` and `--batch-size` set: a default with other proposers or another hand-off
    would never reach a night."""
    proposers = [FormatRuleProposer()]
    default = HandOff(first=GradientText(proposers=proposers), then=Bundle(pool_size=5))
    monkeypatch.setattr(compile_module, "default_optimizer", lambda module=None: default)
    chosen = night_optimizer(NightSearch(epochs=3, batch_size=5), tmp_path)
    assert isinstance(chosen, HandOff) and chosen.then.pool_size == 5
    assert (chosen.first.epochs, chosen.first.batch_size) == (3, 5)
    assert chosen.first.proposers == proposers


def test_the_real_default_is_the_hand_off_with_the_flags(tmp_path: Path) -> None:
    """Kills: the flags dropped (the night searching with GradientText's own epochs and batch)
    or set on the wrong part of the default."""
    chosen = night_optimizer(NightSearch(epochs=2, batch_size=4), tmp_path)
    assert isinstance(chosen, HandOff)
    assert (chosen.first.epochs, chosen.first.batch_size) == (2, 4)
    assert chosen.then == HandOff().then


def test_flags_a_default_cannot_take_are_refused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Kills: `--epochs` and `--batch-size` silently dropped when compile's default is a
    search without them."""
    monkeypatch.setattr(compile_module, "default_optimizer", lambda module=None: Bundle())
    with pytest.raises(SleepError, match="--epochs and --batch-size do not apply to Bundle"):
        night_optimizer(NightSearch(), tmp_path)
