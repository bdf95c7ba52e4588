"""The optimizers' search state holds typed records (issue 39 item 3), and a checkpoint keeps
the JSON shape it always had: a run directory written before the records resumes, and what a
resumed run writes reads back the same."""

from __future__ import annotations

import copy
import json

from skillopt_dsl.optimizers.beam import BeamMember, BeamState
from skillopt_dsl.optimizers.gradient_text_state import GradientTextState, ScreenedProposal
from skillopt_dsl.optimizers.proposers import RejectedCandidate
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


def old_gradient_checkpoint() -> dict[str, object]:
    """A GradientText state as checkpoint.json held it before the records (plain dicts)."""
    state = GradientTextState(step=4, epoch=1, evidence={"k1": {"net": 2.0}}).to_dict()
    state.update(rejected=[MEMORY], struck=[{**MEMORY, "step": 4}], trials=[TRIAL, GATED],
                 pending=[PENDING], step_outcomes=[OUTCOME])  # fmt: skip
    return json.loads(json.dumps(state))


def test_an_old_gradient_text_checkpoint_reads_into_records_and_writes_back_the_same() -> None:
    """Kills: a checkpoint written before the records failing to resume (a field read as a
    dict, an optional count such as `gated` or `rivals` required), a record's JSON shape
    changed on the way back (an unset count written as null, a renamed key), and `to_dict`
    aliasing the live state (a later step changing a written checkpoint)."""
    old = old_gradient_checkpoint()
    state = GradientTextState.from_dict(copy.deepcopy(old))
    assert state.rejected == [RejectedCandidate((Add(after=None, text=ADD["text"]),), -0.25, 3, 1)]
    assert state.struck[0].step == 4
    assert [type(t) for t in (*state.trials, *state.pending)] == [ScreenedProposal] * 3
    assert state.trials[1].gated == 1 and state.trials[0].rivals == 3
    assert state.pending[0].screens is None and isinstance(state.pending[0].edits[0], Replace)
    assert state.step_outcomes == [
        EditOutcome(Add(after=None, text=ADD["text"]), "applied", "", "end")
    ]
    written = state.to_dict()
    assert json.loads(json.dumps(written)) == old
    state.trials.clear()
    state.evidence["k1"]["net"] = 9.0
    assert written["trials"] and json.loads(json.dumps(written)) == old


def test_an_old_beam_checkpoint_reads_into_records_and_writes_back_the_same() -> None:
    """Kills: Beam's members or memory read back as dicts, a member without `edits` (an older
    checkpoint) refused, or the member's JSON shape changed on the way back."""
    member = {"text": "Say it.", "scores": {"a": 1.0, "b": 0.0}, "edits": [ADD]}
    old = {**BeamState(round=2, step=5, judged=["h"]).to_dict(), "members": [member],
           "rejected": [MEMORY]}  # fmt: skip
    state = BeamState.from_dict(copy.deepcopy(old))
    assert state.beam()[0] == BeamMember(
        "Say it.", {"a": 1.0, "b": 0.0}, (Add(after=None, text=ADD["text"]),)
    )
    assert isinstance(state.rejected[0], RejectedCandidate)
    assert state.to_dict() == old
    bare = BeamState.from_dict({**old, "members": [{"text": "t", "scores": {}}]})
    assert bare.members == [BeamMember("t", {})]
