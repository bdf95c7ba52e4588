"""Optimizer settings from command-line flags: `--optimizer` picks one, and each setting flag
replaces that field on it (or on its `inner` optimizer, or on each of a composite's searches
that has it), refused with the settings it has."""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import fields, is_dataclass, replace
from typing import Any

from skillopt_dsl.cli.options import OptimizerChoice
from skillopt_dsl.errors import UserInputError
from skillopt_dsl.optimizers.base import Optimizer


def lazy(module: str, name: str, what: str) -> Any:
    """Import `module.name` on first use, with a clear error when it is not available."""
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise UserInputError(
            f"{what} is not available in this installation ({module}.{name}: {exc}); "
            "upgrade skillopt-dsl"
        ) from exc


def optimizer_from_flags(
    base: Optimizer | None,
    choice: OptimizerChoice | None,
    overrides: Mapping[str, object],
    default: Optimizer | None = None,
) -> Optimizer | None:
    """The recipe's optimizer, or the one `--optimizer` names, with flag overrides applied
    (to `compile`'s default where neither names one: `default`, the module's own default
    search from `compile.default_optimizer(module)`, else a plain `HandOff`)."""
    from skillopt_dsl.optimizers.gradient_text import GradientText
    from skillopt_dsl.optimizers.hand_off import HandOff

    chosen: Optimizer | None = base
    if choice is OptimizerChoice.gradient_text and not isinstance(base, GradientText):
        chosen = GradientText(**_carried(base, GradientText))
    elif choice is OptimizerChoice.beam:
        beam = lazy("skillopt_dsl.optimizers.beam", "Beam", "the beam optimizer")
        chosen = beam(**_carried(base, beam))
    elif choice is OptimizerChoice.hand_off and not isinstance(base, HandOff):
        proposers = _carried(base, GradientText).get("proposers")
        if proposers is not None:
            chosen = HandOff.with_proposers(proposers)
        else:
            chosen = default if isinstance(default, HandOff) else HandOff()
    elif choice is OptimizerChoice.bundle:
        bundle = lazy("skillopt_dsl.optimizers.bundle", "Bundle", "the bundle optimizer")
        chosen = bundle(**_carried(base, bundle))
    elif choice is OptimizerChoice.optuna:
        optuna_lr = lazy("skillopt_dsl.optimizers.optuna_lr", "OptunaLR", "the optuna optimizer")
        inner = base if isinstance(base, GradientText) else GradientText()
        chosen = optuna_lr(inner=inner)
    if not overrides:
        return chosen
    result: Optimizer = chosen if chosen is not None else (default or HandOff())
    for name, value in overrides.items():
        result = _override(result, name, value)
    return result


def _carried(base: Optimizer | None, cls: type) -> dict[str, Any]:
    """The recipe's proposers, carried to another optimizer that takes proposers."""
    if base is None or not is_dataclass(cls) or "proposers" not in _field_names(cls):
        return {}
    proposers = getattr(base, "proposers", None)
    return {} if proposers is None else {"proposers": proposers}


def _field_names(obj: Any) -> set[str]:
    return {f.name for f in fields(obj) if f.init} if is_dataclass(obj) else set()


def _override(optimizer: Optimizer, name: str, value: Any) -> Optimizer:
    """`dataclasses.replace` one setting, on the optimizer or on its `inner` optimizer."""
    flag = "--" + name.replace("_", "-")
    if name in (getattr(optimizer, "search_space", None) or {}):
        raise UserInputError(
            f"{flag} is searched by the {type(optimizer).__name__} optimizer, so a fixed value "
            "would be ignored; drop the flag or set the search space in the recipe"
        )
    if name in _field_names(optimizer):
        return replace(optimizer, **{name: value})  # type: ignore[type-var]
    parts = {p: getattr(optimizer, p) for p in ("first", "then") if hasattr(optimizer, p)}
    if any(name in _field_names(part) for part in parts.values()):  # a composite's searches
        changed = {p: replace(part, **{name: value}) for p, part in parts.items()
                   if name in _field_names(part)}  # fmt: skip
        return replace(optimizer, **changed)  # type: ignore[type-var]
    inner = getattr(optimizer, "inner", None)
    if inner is not None and name in _field_names(inner):
        return replace(optimizer, inner=replace(inner, **{name: value}))  # type: ignore[type-var]
    known = ", ".join(sorted(_field_names(optimizer))) or "none settable from the command line"
    raise UserInputError(
        f"{flag} does not apply to the {type(optimizer).__name__} optimizer (its settings: {known})"
    )
