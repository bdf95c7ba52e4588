"""Users' imports keep working across the house's folder moves (issue 39): every name the old
modules `skillopt_dsl.skill`, `skillopt_dsl.data` and `skillopt_dsl.driver` exported is still
importable from the folder that replaced each, and every name in the package's and each
subpackage's `__all__` resolves."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import skillopt_dsl

# The `__all__` of each module before it became a folder (commit af08145).
BEFORE_THE_MOVE = {
    "skillopt_dsl.skill": [
        "FUZZY_LENGTH_TOLERANCE", "FUZZY_MAX_CHARS", "FUZZY_MAX_RATIO_CALLS", "FUZZY_THRESHOLD",
        "FUZZY_WORD_UNITS_MAX_CHARS", "PROTECTED_CLOSE", "PROTECTED_OPEN", "Add", "ApplyReport",
        "Delete", "Edit", "EditList", "EditOutcome", "MatchKind", "Replace", "Section", "Skill",
        "Status", "diff", "measure_change", "parse_edits", "token_distance", "tokenize",
    ],
    "skillopt_dsl.data": [
        "DEFAULT_SIZES", "Example", "Splits", "as_examples", "coerce_splits", "content_hash",
        "from_hf", "load_skillopt_dir", "load_splits", "dspy_input_keys",
    ],
    "skillopt_dsl.driver": [
        "CompileContext", "LearningRateBound", "RunView", "SelectionSplit", "StateAfter",
        "StepRecord", "Verdict", "look_order",
    ],
}  # fmt: skip


@pytest.mark.parametrize("module", sorted(BEFORE_THE_MOVE))
def test_every_name_a_moved_module_exported_is_still_there(module: str) -> None:
    """Kills: a folder whose front forgets a name its old module exported (a user's
    `from skillopt_dsl.skill import measure_change` breaking after the move)."""
    imported = importlib.import_module(module)
    missing = [name for name in BEFORE_THE_MOVE[module] if not hasattr(imported, name)]
    assert not missing, f"{module} lost {missing}"


def _packages() -> list[str]:
    found = ["skillopt_dsl"]
    for info in pkgutil.walk_packages(skillopt_dsl.__path__, "skillopt_dsl."):
        if info.ispkg:
            found.append(info.name)
    return found


@pytest.mark.parametrize("package", _packages())
def test_every_name_in_a_packages_all_resolves(package: str) -> None:
    """Kills: an `__all__` naming something the package no longer has (a star import or the
    docs would fail on it)."""
    imported = importlib.import_module(package)
    missing = [name for name in getattr(imported, "__all__", ()) if not hasattr(imported, name)]
    assert not missing, f"{package}.__all__ names missing {missing}"
