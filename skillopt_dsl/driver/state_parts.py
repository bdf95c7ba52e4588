"""A composite optimizer's checkpointed state: each part's own state, and which part runs.

A composite optimizer (`optimizers.HandOff`) runs its parts one after another, each on a view
`within` its own part (`RunView.within`). Each part reads and saves only its own state, which
the checkpoint holds under `parts` by the part's name, beside `phase`, the part that saved last:

    {"phase": "then", "parts": {"first": {...}, "then": {...}}}

A part's state may itself be a composite's (a path of names reaches it). The search memory the
parts search in is not in their states: the run owns it (`RunView.memory`).
"""

from __future__ import annotations

from collections.abc import Sequence

from skillopt_dsl.json_types import JSONObject

__all__ = ["PARTS", "PHASE", "nest_part", "phase_state", "read_part"]

PHASE = "phase"
PARTS = "parts"


def _parts(state: JSONObject) -> JSONObject:
    parts = state.get(PARTS, {})
    if not isinstance(parts, dict):
        raise TypeError(f"checkpoint field {PARTS!r} is not an object: {parts!r:.200}")
    return parts


def read_part(state: JSONObject, path: Sequence[str]) -> JSONObject:
    """The state of the part at `path` ({} where none was saved yet; `state` itself for the
    empty path)."""
    for name in path:
        part = _parts(state).get(name, {})
        if not isinstance(part, dict):
            raise TypeError(f"checkpoint part {name!r} is not an object: {part!r:.200}")
        state = part
    return state


def nest_part(state: JSONObject, path: Sequence[str], inner: JSONObject) -> JSONObject:
    """`state` with the part at `path` replaced by `inner`, `phase` naming it at every level
    (the other parts' states are kept)."""
    if not path:
        return dict(inner)
    name, rest = path[0], path[1:]
    parts = _parts(state)
    below = nest_part(read_part(state, [name]), rest, inner)
    return {**state, PHASE: name, PARTS: {**parts, name: below}}


def phase_state(state: JSONObject) -> JSONObject:
    """The state of the part that saved last (following `phase` down; `state` itself for an
    optimizer without parts)."""
    while isinstance(name := state.get(PHASE), str):
        state = read_part(state, [name])
    return state
