"""The rows a DSPy user hands `SkillOptimizer`: their program's inputs, examples as we keep them
(with the user's own object beside them, so a metric gets labels exactly as DSPy gives them),
the refusal of shared rows, and the stated split of a trainset when no valset is given."""

from __future__ import annotations

import inspect
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import dspy

from skillopt_dsl.data import as_examples, dspy_input_keys
from skillopt_dsl.dspy.proposals import plain_value
from skillopt_dsl.errors import DataError, UserInputError
from skillopt_dsl.types import Example

VAL_SPLIT_SEED_SALT = 7919
"""Mixed into `seed` for the stated split of a trainset given without a valset."""


@dataclass(frozen=True)
class ProgramInputs:
    """What a DSPy program's `forward` takes: every name it accepts, and those it requires."""

    accepted: tuple[str, ...]
    required: tuple[str, ...]

    @property
    def input_fields(self) -> tuple[str, ...]:
        """The accepted names (what `as_examples` takes as a dict row's inputs)."""
        return self.accepted


def program_inputs(program: dspy.Module) -> ProgramInputs | None:
    """The inputs `program` takes, from its `forward` signature; for a `forward(**kwargs)`
    module (`Predict`, `ReAct`) from its signature's input fields (`ChainOfThought`: its one
    predictor's). None when they cannot be known (a custom `forward(**kwargs)`)."""
    try:  # the class's function: DSPy warns when `module.forward` is read on an instance
        params = list(inspect.signature(type(program).forward).parameters.values())[1:]
    except (AttributeError, TypeError, ValueError):
        return None
    named = [
        p
        for p in params
        if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    ]
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        predictors = [p for _, p in program.named_predictors()]
        signature = getattr(program, "signature", None)
        if signature is None and len(predictors) == 1:  # ChainOfThought: its one predictor
            signature = predictors[0].signature
        fields_ = getattr(signature, "input_fields", None)
        if named or not fields_:
            return None
        return ProgramInputs(tuple(fields_), tuple(fields_))
    required = tuple(p.name for p in named if p.default is inspect.Parameter.empty)
    return ProgramInputs(tuple(p.name for p in named), required)


@dataclass(frozen=True)
class GivenExample:
    """One of the user's examples: our `Example` (JSON values, for the run), the example as
    the user gave it (for the program and the metric: pydantic values stay models), and its
    position in the user's list (`trainset[3]`)."""

    example: Example
    gold: dspy.Example | None
    where: str


def given_examples(
    items: Any, accepted: ProgramInputs | None, *, where: str, program: dspy.Module
) -> list[GivenExample]:
    """The user's rows as `Example`s (dict rows take the program's inputs as their inputs),
    each with the user's own example and its position."""
    if isinstance(items, str | bytes | Mapping) or not isinstance(items, Iterable):
        raise UserInputError(
            f"{where}: expected a list of dspy.Examples, Examples or dicts, got a "
            f"{type(items).__name__}"
        )
    rows = list(items)
    _check_program_inputs(rows, accepted, where=where, program=program)
    plain = [_json_row(row) for row in rows]
    examples = as_examples(plain, module=cast(Any, _given_inputs(rows, accepted)), where=where)
    return [
        GivenExample(example, _gold(row, example), f"{where}[{index}]")
        for index, (row, example) in enumerate(zip(rows, examples, strict=True))
    ]


def _given_inputs(rows: list[Any], accepted: ProgramInputs | None) -> ProgramInputs | None:
    """The program's inputs a row set gives: every required one, and the optional ones (a
    `forward` parameter with a default) its first row holds."""
    if accepted is None or not rows:
        return accepted
    keys = set(_row_keys(rows[0]))
    given = tuple(k for k in accepted.accepted if k in accepted.required or k in keys)
    return ProgramInputs(given, accepted.required)


def _check_program_inputs(
    rows: list[Any], accepted: ProgramInputs | None, *, where: str, program: dspy.Module
) -> None:
    """A dict row, or a `dspy.Example` without `.with_inputs(...)`, must hold every input the
    program requires (its inputs are then read from the program)."""
    if accepted is None:
        return
    for index, row in enumerate(rows):
        if isinstance(row, Example) or (hasattr(row, "inputs") and dspy_input_keys(row)):
            continue
        keys = _row_keys(row)
        missing = [k for k in accepted.required if k not in keys]
        if missing:
            raise DataError(
                f"{where}[{index}] has no {missing} (its keys: {sorted(keys)}), but the program "
                f"{type(program).__name__} takes {list(accepted.accepted)}; give every row the "
                "program's inputs under those names, or mark a dspy.Example's inputs with "
                ".with_inputs(...)"
            )


def _row_keys(row: Any) -> list[str]:
    to_dict = getattr(row, "toDict", None)
    values = to_dict() if callable(to_dict) else row
    return (
        [str(k) for k in values if not str(k).startswith("dspy_")]
        if isinstance(values, Mapping)
        else []
    )


def _json_row(row: Any) -> Any:
    """A dict row with pydantic values as their JSON form (as `dspy.Example.toDict()` gives
    them); any other row as it is."""
    if isinstance(row, Mapping) and not hasattr(row, "toDict"):
        return {k: plain_value(v) for k, v in row.items()}
    return row


def _gold(row: Any, example: Example) -> dspy.Example | None:
    """The example the program and the metric receive: the user's own (values untouched)."""
    if isinstance(row, Example):
        return None
    if hasattr(row, "toDict") and hasattr(row, "inputs"):
        return row if dspy_input_keys(row) else row.with_inputs(*example.inputs)
    if isinstance(row, Mapping):
        values = {k: v for k, v in row.items() if k != "id"}
        return dspy.Example(**values).with_inputs(*example.inputs)
    return None


def golds(rows: Sequence[GivenExample]) -> dict[str, dspy.Example]:
    return {row.example.id: row.gold for row in rows if row.gold is not None}


def refuse_shared(train: Sequence[GivenExample], val: Sequence[GivenExample]) -> None:
    """The gate's examples must not be training examples: name the shared ones by position."""
    seen = {row.example.id: row.where for row in train}
    shared = [(seen[row.example.id], row) for row in val if row.example.id in seen]
    if shared:
        pairs = ", ".join(f"{row.where} = {where}" for where, row in shared[:5])
        more = f" and {len(shared) - 5} more" if len(shared) > 5 else ""
        raise DataError(
            f"{len(shared)} valset example(s) are also in trainset ({pairs}{more}; ids "
            f"{[row.example.id for _, row in shared[:5]]}): the gate must judge on examples "
            "the training never saw; pass examples disjoint from trainset, or leave valset "
            "out to let SkillOptimizer split the trainset"
        )


def split_trainset(
    rows: list[GivenExample], seed: int
) -> tuple[list[GivenExample], list[GivenExample], str]:
    """A seeded split of the trainset when no valset is given: half (rounded down, at least
    one) for the gate, the rest for training; the split is stated."""
    if len(rows) < 2:
        raise UserInputError(
            f"no valset was given and the trainset has {len(rows)} example(s); the gate needs "
            "held-out examples: pass valset=, or at least 2 training examples to split"
        )
    order = list(range(len(rows)))
    random.Random(seed * VAL_SPLIT_SEED_SALT + len(rows)).shuffle(order)
    n_val = max(1, len(rows) // 2)
    val_at, train_at = sorted(order[:n_val]), sorted(order[n_val:])
    note = (
        f"no valset given: the trainset's {len(rows)} examples were split (seed {seed}) into "
        f"{len(train_at)} for training and {n_val} for the gate, "
        f"valset = trainset{_ranges(val_at)}; pass valset= to choose them yourself"
    )
    return [rows[i] for i in train_at], [rows[i] for i in val_at], note


def _ranges(indices: list[int]) -> str:
    """`[0, 2, 5]` as `[0, 2, 5]` (at most 12 shown)."""
    shown = ", ".join(str(i) for i in indices[:12])
    return f"[{shown}{', ...' if len(indices) > 12 else ''}]"


def input_names(
    examples: Sequence[Example], positions: Mapping[str, str], accepted: ProgramInputs | None
) -> tuple[str, ...]:
    """The program's input fields: the same keys on every example, and keys the program takes
    (every required one present, none it does not accept)."""

    def named(example: Example) -> str:
        return f"{positions.get(example.id, 'example')} (id {example.id!r})"

    first = tuple(examples[0].inputs)
    for example in examples:
        if set(example.inputs) != set(first):
            raise DataError(
                f"{named(example)} has inputs {sorted(example.inputs)}, but "
                f"{named(examples[0])} has {sorted(first)}; give every example the same "
                ".with_inputs(...) keys"
            )
    if accepted is not None:
        missing = [k for k in accepted.required if k not in first]
        unknown = [k for k in first if k not in accepted.accepted]
        if missing or unknown:
            raise DataError(
                f"{named(examples[0])} has inputs {sorted(first)}, but the program takes "
                f"{list(accepted.accepted)} (missing {missing}, not taken {unknown}); mark the "
                "program's inputs with .with_inputs(...)"
            )
    return first
