"""The optimizers' search state holds typed records (issue 39 item 3), and a checkpoint keeps
the JSON shape it always had: a run directory written before the records resumes, and what a
resumed run writes reads back the same."""

from __future__ import annotations

import copy
import json

import pytest

from skillopt_dsl.errors import RunDirError
from skillopt_dsl.optimizers.beam import BeamMember, BeamState
from skillopt_dsl.optimizers.gradient_text_state import GradientTextState
from skillopt_dsl.optimizers.proposers import RejectedCandidate
from skillopt_dsl.optimizers.search import ScreenedProposal
from skillopt_dsl.search_memory import MEMORY_VERSION, EditEvidence, SearchMemory
from skillopt_dsl.skill import Add, EditOutcome, Replace

ADD = {"kind": "add", "after": None, "text": "Answer in one word.", "rationale": ""}
REPLACE = {"kind": "replace", "old": "a", "new": "b", "rationale": "why"}
MEMORY = {"edits": [ADD], "delta": -0.25, "step": 3, "epoch": 1}
TRIAL = {"source": "reflective", "failure_driven": True, "rationale": "fix", "edits": [REPLACE],
         "key": "k1", "net": 2.0, "scored": 8, "screens": 1, "rivals": 3}  # fmt: skip
GATED = {**TRIAL, "key": "k2", "screens": 0, "gated": 1}
UNSCREENED = {key: TRIAL[key] for key in ("source", "failure_driven", "rationale", "edits")}
PENDING = {**UNSCREENED, "key": "k3", "net": 0.0, "scored": 0}
OUTCOME = {"edit": ADD, "status": "applied", "reason": "", "match": "end", "similarity": None}


EVIDENCE = {"fixes": 2, "breaks": 0, "net": 2.0, "scored": 8, "screens": 1}
OLD_MEMORY = {"step": 4, "evidence": {"k1": EVIDENCE}, "rejected": [MEMORY],
              "struck": [{**MEMORY, "step": 4}], "screen_strikes": {"k9": 1},
              "screen_stats": {"batch_screened": 3}, "proposer_stats": {"reflective": {"runs": 2}},
              "proposer_asked": {"reflective": "abc"}}  # fmt: skip
"""The search memory's fields as an optimizer's state held them before the run owned it."""


def old_gradient_checkpoint() -> dict[str, object]:
    """A GradientText state as checkpoint.json held it before the records (plain dicts) and
    before the run owned the search memory (its fields in the optimizer's state)."""
    state = GradientTextState(epoch=1).to_dict()
    state.update(OLD_MEMORY, trials=[TRIAL, GATED], pending=[PENDING], step_outcomes=[OUTCOME])
    return json.loads(json.dumps(state))


def test_an_old_gradient_text_checkpoint_reads_into_records_and_writes_back_the_same() -> None:
    """Kills: a checkpoint written before the records failing to resume (a field read as a
    dict, an optional count such as `gated` or `rivals` required), a record's JSON shape
    changed on the way back (an unset count written as null, a renamed key), `to_dict`
    aliasing the live state (a later step changing a written checkpoint), and an old state's
    memory fields refused by the state (or lost: they are the run's memory now)."""
    old = old_gradient_checkpoint()
    state = GradientTextState.from_dict(copy.deepcopy(old))
    memory = SearchMemory.from_legacy(copy.deepcopy(old), remembered=())
    assert memory.rejected == [RejectedCandidate((Add(after=None, text=ADD["text"]),), -0.25, 3, 1)]
    assert memory.struck[0].step == 4 and memory.step == 4
    assert memory.evidence_of("k1") == EditEvidence(2, 0, 2.0, 8, 1)
    assert [type(t) for t in (*state.trials, *state.pending)] == [ScreenedProposal] * 3
    assert state.trials[1].gated == 1 and state.trials[0].rivals == 3
    assert state.pending[0].screens is None and isinstance(state.pending[0].edits[0], Replace)
    assert state.step_outcomes == [
        EditOutcome(Add(after=None, text=ADD["text"]), "applied", "", "end")
    ]
    written = state.to_dict()
    saved = memory.to_dict()
    assert saved["version"] == MEMORY_VERSION and saved.get("remembered") == []
    legacy = {k: v for k, v in saved.items() if k in OLD_MEMORY}
    assert json.loads(json.dumps({**written, **legacy})) == old
    state.trials.clear()
    memory.screen_stats["batch_screened"] = 9
    assert written["trials"] and json.loads(json.dumps({**written, **legacy})) == old


def test_the_memory_record_round_trips_and_refuses_an_unknown_version() -> None:
    """Kills: a field dropped on the way to checkpoint.json and back (the remembered
    rejections of earlier nights among them), and a record of another version read as this
    one."""
    memory = SearchMemory.from_dict(json.loads(json.dumps(OLD_MEMORY)))
    memory.remembered = [RejectedCandidate((Add(after=None, text="old"),), -0.1, 0, 0)]
    back = SearchMemory.from_dict(json.loads(json.dumps(memory.to_dict())))
    assert back == memory
    with pytest.raises(RunDirError, match="version"):
        SearchMemory.from_dict({**json.loads(json.dumps(memory.to_dict())), "version": 2})


def test_an_old_beam_checkpoint_reads_into_records_and_writes_back_the_same() -> None:
    """Kills: Beam's members read back as dicts, a member without `edits` (an older checkpoint)
    refused, an older state's memory fields (`step`, `rejected`) refused, or the member's JSON
    shape changed on the way back."""
    member = {"text": "Say it.", "scores": {"a": 1.0, "b": 0.0}, "edits": [ADD]}
    old = {**BeamState(round=2, judged=["h"]).to_dict(), "members": [member]}
    state = BeamState.from_dict({**copy.deepcopy(old), "step": 5, "rejected": [MEMORY]})
    assert state.beam()[0] == BeamMember(
        "Say it.", {"a": 1.0, "b": 0.0}, (Add(after=None, text=ADD["text"]),)
    )
    assert state.to_dict() == old
    bare = BeamState.from_dict({**old, "members": [{"text": "t", "scores": {}}]})
    assert bare.members == [BeamMember("t", {})]
