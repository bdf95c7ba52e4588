"""Recipes: a Python file that declares a task, its data and (optionally) its defaults.

A recipe file defines, at module level:

- `module`: a `SkillModule` instance (required);
- `splits`: a `Splits` (required);
- `lm`, `optimizer_lm`: model specs (litellm strings or `LM` objects; default the embedded model);
- `optimizer`: an `Optimizer` instance (default `GradientText()`);
- `budget`: a `Budget`.

Other public names (imports, helper constants) are allowed, but one that holds a setting-like
object (a module, splits, a model, an optimizer or a budget) under an unknown name is an error,
so a typo (`optimiser = GradientText()`) never silently does nothing. A recipe that raises while
loading is reported as one `UserInputError` naming the file. CLI flags override the recipe's values.
"""

from __future__ import annotations

import difflib
import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from skillopt_dsl.data import Splits
from skillopt_dsl.errors import UserInputError
from skillopt_dsl.lm import LM, Budget
from skillopt_dsl.module import SkillModule
from skillopt_dsl.optimizers.base import Optimizer

__all__ = ["Recipe", "load_recipe"]

_KNOWN = {"module", "splits", "lm", "optimizer_lm", "optimizer", "budget"}


@dataclass(frozen=True)
class Recipe:
    """What a recipe file declares."""

    path: Path
    module: SkillModule
    splits: Splits
    lm: str | LM | None = None
    optimizer_lm: str | LM | None = None
    optimizer: Optimizer | None = None
    budget: Budget | None = None

    @property
    def name(self) -> str:
        """The recipe's file stem, e.g. `navigate_local`."""
        return self.path.stem


def load_recipe(path: str | Path) -> Recipe:
    """Import a recipe file and check what it declares."""
    target = Path(path)
    if not target.is_file() or target.suffix != ".py":
        raise UserInputError(
            f"recipe {str(target)!r} is not a Python file; pass a path like recipes/navigate_local.py"
        )
    namespace = _import(target)
    public = {k: v for k, v in vars(namespace).items() if not k.startswith("_")}
    values = {k: public[k] for k in _KNOWN if k in public}
    _check_unknown(target, public)
    for required in ("module", "splits"):
        if required not in values:
            raise UserInputError(f"recipe {target} must define `{required}`")
    _check_types(target, values)
    return Recipe(path=target, **values)


def _import(path: Path) -> ModuleType:
    name = f"skillopt_recipe_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise UserInputError(f"cannot import recipe {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        sys.modules.pop(name, None)
        raise UserInputError(f"recipe {path} failed to load: {type(exc).__name__}: {exc}") from exc
    return module


def _check_unknown(path: Path, public: dict[str, object]) -> None:
    """Refuse a setting-like object under a name the loader does not read (a typo)."""
    setting_types = (SkillModule, Splits, LM, Optimizer, Budget)
    for key, value in public.items():
        if key in _KNOWN or not isinstance(value, setting_types):
            continue
        close = difflib.get_close_matches(key, sorted(_KNOWN), n=1)
        hint = f"did you mean `{close[0]}`? " if close else ""
        raise UserInputError(
            f"recipe {path}: `{key}` holds a {type(value).__name__} but is not a recipe setting; "
            f"{hint}recipes read {', '.join(sorted(_KNOWN))} (prefix helpers with `_`)"
        )


def _check_types(path: Path, values: dict[str, object]) -> None:
    expected: dict[str, tuple[type, ...]] = {
        "module": (SkillModule,),
        "splits": (Splits,),
        "lm": (str, LM, type(None)),
        "optimizer_lm": (str, LM, type(None)),
        "optimizer": (Optimizer, type(None)),
        "budget": (Budget, type(None)),
    }
    for key, value in values.items():
        if not isinstance(value, expected[key]):
            names = " or ".join(t.__name__ for t in expected[key])
            raise UserInputError(
                f"recipe {path}: `{key}` must be {names}, got {type(value).__name__}"
            )
