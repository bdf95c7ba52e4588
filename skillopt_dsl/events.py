"""The run record: every event kind a compile writes to `events.jsonl`, as a typed record.

Each line of `events.jsonl` is one JSON object whose `"event"` key names its kind; the other
keys are the kind's fields below. The writers stay keyword-based (`RunView.emit(kind,
**fields)`, `CompileContext.emit`, `RunDirectory.event`), so the file format is exactly what it
was; the readers (`skillopt_dsl.runs.RunDirectory.load_events`, the progress screen, the report,
the optimizer contract suite) read records through `as_event`, which checks the fields every
reader relies on (the required keys; `NotRequired` ones may be absent in an older run) and
hands back the `TypedDict` of the kind (narrowed by `event["event"]`).

A kind not listed here (an optimizer's own note) is written and read back like the others;
`as_event` answers None for it, so a typed reader skips it.

Kinds, by who writes them:

- the driver: `seed`, `resume`, `evaluation`, `refused`, `duplicate`, `gate`, `step`,
  `selection_split`;
- `compile`: `baseline`, `preflight`, `test_skipped`, `finish`;
- the caller that draws a compile's study plots (`skillopt_dsl.report.draw_study_plots`, which
  the CLI calls): `sweep_plots`, after `finish`;
- the optimizers (through the run view): `proposal`, `proposer`, `screen`, `compose`,
  `candidate_sources`, `edit_report`, `stop`, `sweep`, and the proposers' notes
  (`reflection_dropped`, `consolidation_dropped`, `consolidation_adds_dropped`,
  `rule_dropped`, `remembered_rejection`).
"""

from collections.abc import Mapping
from typing import Any, Literal, NotRequired, TypedDict, cast

from skillopt_dsl.errors import RunDirError
from skillopt_dsl.json_types import JSONObject
from skillopt_dsl.lm.usage import UsageRecord
from skillopt_dsl.skill import MatchKind, Status

__all__ = [
    "BaselineEvent",
    "BaselineRecord",
    "CandidateSourcesEvent",
    "ComposeEvent",
    "DecisionRecord",
    "DuplicateEvent",
    "EditReportEvent",
    "EvaluationEvent",
    "FinishEvent",
    "GateEvent",
    "GroupRecord",
    "NoteEvent",
    "OutcomeRecord",
    "PreflightEvent",
    "ProposalEvent",
    "ProposerEvent",
    "RefusedEvent",
    "ResumeEvent",
    "RunEvent",
    "ScreenEvent",
    "SeedEvent",
    "SelectionSplitEvent",
    "StepEvent",
    "StopEvent",
    "SweepEvent",
    "SweepPlotsEvent",
    "TestSkippedEvent",
    "TrialRow",
    "as_event",
    "event_kinds",
    "read_event",
]


# -- records inside events ------------------------------------------------------------------
class OutcomeRecord(TypedDict):
    """How one edit applied (`EditOutcome.to_dict()`): the edit's JSON, `status` ("applied",
    "not_found", ...), why, and where and how closely its anchor matched."""

    edit: JSONObject
    status: Status
    reason: str
    match: MatchKind | None
    similarity: float | None


class GroupRecord(TypedDict):
    """One proposed edit group (`gradient_text_state.group_json`)."""

    source: str
    failure_driven: bool
    rationale: str
    edits: list[JSONObject]


class TrialRow(TypedDict):
    """One trial of a sweep (`skillopt_dsl.studies.TrialRecord.to_dict()`; `state` by name)."""

    number: int
    state: str
    params: JSONObject
    value: float | None
    skill_hash: str | None
    run_dir: str | None
    calls: int
    cost_usd: float | None
    stop_reason: str | None


class DecisionRecord(TypedDict):
    """`GateDecision.to_dict()`: a decision as the checkpoint and the `gate` event store it (an
    older run may lack the fields after `reason`; they take their defaults)."""

    accepted: bool
    candidate_score: float
    incumbent_score: float
    delta: float
    reason: str
    candidate_hash: NotRequired[str]
    incumbent_hash: NotRequired[str]
    n_examples: NotRequired[int]
    statistic: NotRequired[float | None]
    p_value: NotRequired[float | None]
    guards: NotRequired[dict[str, dict[str, float]]]
    test: NotRequired[str | None]
    alpha: NotRequired[float | None]
    decision_index: NotRequired[int]
    critical: NotRequired[float | None]
    charged: NotRequired[float | None]
    examples_scored: NotRequired[int]
    stopped_at_look: NotRequired[int | None]
    calls_saved: NotRequired[int]
    accepted_at_look: NotRequired[int | None]
    early_alpha: NotRequired[float | None]
    look_alpha: NotRequired[float | None]


# -- the driver's events ---------------------------------------------------------------------
class SeedEvent(TypedDict):
    """The seed skill was scored on validation (version 1 of the run): on the gate's first
    look, `n` examples (the rest is scored when a decision or the end of the run needs it)."""

    event: Literal["seed"]
    skill_hash: NotRequired[str]
    val_score: float
    n: NotRequired[int]


class ResumeEvent(TypedDict):
    """A run was resumed from its checkpoint: `steps` steps were kept, at `version`."""

    event: Literal["resume"]
    version: NotRequired[int]
    steps: NotRequired[int]


class EvaluationEvent(TypedDict):
    """One skill scored on one split (`EvaluationReport.summary()` and the split)."""

    event: Literal["evaluation"]
    split: str
    skill_hash: NotRequired[str]
    model: NotRequired[str]
    mean: NotRequired[float]
    n: NotRequired[int]
    errors: NotRequired[int]
    parse_failures: NotRequired[int]
    prompt_tokens: NotRequired[int]
    completion_tokens: NotRequired[int]
    cached: NotRequired[int]


class RefusedEvent(TypedDict):
    """The door refused a candidate (over its learning-rate budget, or malformed)."""

    event: Literal["refused"]
    candidate_hash: str
    step: int
    reason: str


class DuplicateEvent(TypedDict):
    """A candidate already decided on came back; it was not scored again."""

    event: Literal["duplicate"]
    candidate_hash: str
    step: int


class GateEvent(TypedDict):
    """A gate decision (`GateDecision.to_dict()`), with the step and epoch it belongs to."""

    event: Literal["gate"]
    step: int
    epoch: int
    accepted: bool
    candidate_score: float
    incumbent_score: float
    delta: NotRequired[float]
    reason: NotRequired[str]
    candidate_hash: NotRequired[str]
    incumbent_hash: NotRequired[str]
    n_examples: NotRequired[int]
    statistic: NotRequired[float | None]
    p_value: NotRequired[float | None]
    guards: NotRequired[dict[str, dict[str, float]]]
    test: NotRequired[str | None]
    alpha: NotRequired[float | None]
    decision_index: NotRequired[int]
    critical: NotRequired[float | None]
    charged: NotRequired[float | None]
    examples_scored: NotRequired[int]
    stopped_at_look: NotRequired[int | None]
    calls_saved: NotRequired[int]
    accepted_at_look: NotRequired[int | None]
    early_alpha: NotRequired[float | None]
    look_alpha: NotRequired[float | None]


class StepEvent(TypedDict):
    """One optimizer step (`StepRecord.to_dict()`)."""

    event: Literal["step"]
    step: int
    epoch: int
    kind: NotRequired[str]
    lr_budget: NotRequired[float]
    budget_tokens: NotRequired[int]
    change_tokens: NotRequired[int]
    measured_change: NotRequired[float]
    accepted: NotRequired[bool]
    candidate_hash: NotRequired[str | None]
    val_score: NotRequired[float | None]
    incumbent_score: NotRequired[float | None]
    edit_report: NotRequired[list[OutcomeRecord]]
    note: NotRequired[str]
    calls: NotRequired[int]
    cost_usd: NotRequired[float | None]


class SelectionSplitEvent(TypedDict):
    """The optimizer carved a selection split off the training set."""

    event: Literal["selection_split"]
    fraction: float
    select_ids: list[str]


# -- compile's events ------------------------------------------------------------------------
class BaselineEvent(TypedDict):
    """The best constant answer (a label output only; no model call)."""

    event: Literal["baseline"]
    label: str
    val_score: float
    test_score: NotRequired[float | None]


class BaselineRecord(TypedDict):
    """The constant answer as the `finish` event carries it (`Baseline.to_dict()`): its
    validation score is on the examples the run compared on."""

    label: str
    val_score: float
    test_score: float | None


class PreflightEvent(TypedDict):
    """What the first gate decision can certify (`Preflight.to_dict()`)."""

    event: Literal["preflight"]
    n_val: int
    planned: int | None
    alpha: float
    first_level: float | None
    clean_fix: int | None
    even_chance_gain: float | None
    warning: str | None


class SweepPlotsEvent(TypedDict):
    """An optimizer's sweep plots were drawn into `folder`."""

    event: Literal["sweep_plots"]
    folder: str
    plots: list[str]


class TestSkippedEvent(TypedDict):
    """The test set was not scored (its budget ran out)."""

    event: Literal["test_skipped"]
    reason: str


class FinishEvent(TypedDict):
    """The run ended (`CompileResult.summary()`, also written to summary.json)."""

    event: Literal["finish"]
    stop_reason: NotRequired[str]
    stop_detail: NotRequired[str | None]
    seed_val_score: NotRequired[float]
    val_score: float
    val_examples: NotRequired[int]
    val_size: NotRequired[int]
    seed_test_score: NotRequired[float | None]
    test_score: NotRequired[float | None]
    baseline: NotRequired[BaselineRecord | None]
    usage: NotRequired[UsageRecord]
    steps: NotRequired[int]
    best_skill_hash: NotRequired[str]
    accepted_steps: NotRequired[int]
    gate_decisions: NotRequired[int]


# -- the optimizers' events ------------------------------------------------------------------
class ProposalEvent(TypedDict):
    """Edit groups proposed at a step."""

    event: Literal["proposal"]
    step: int
    kind: NotRequired[str]
    groups: NotRequired[list[GroupRecord]]


class ProposerEvent(TypedDict):
    """What one proposer spent and gave at a step (or that it sat out: `benched`, or was not
    asked because its request was the one it last answered: `unchanged`)."""

    event: Literal["proposer"]
    step: int
    name: str
    benched: bool
    unchanged: NotRequired[bool]
    calls: NotRequired[int]
    cache_hits: NotRequired[int]
    groups: NotRequired[int]
    edits: NotRequired[int]


class ScreenEvent(TypedDict):
    """One edit group screened on a training minibatch before it may reach the gate."""

    event: Literal["screen"]
    step: int
    stage: str
    scored: int
    fixes: int
    breaks: int
    net: float
    calls: int
    passed: bool
    source: str
    rationale: str


class ComposeEvent(TypedDict):
    """The screened groups of a step composed into one candidate."""

    event: Literal["compose"]
    step: int
    groups: int
    candidate_hash: str


class CandidateSourcesEvent(TypedDict):
    """Which proposers a candidate's edits came from, and the gate's verdict on it."""

    event: Literal["candidate_sources"]
    step: int
    sources: list[str]
    status: str


class EditReportEvent(TypedDict):
    """How each edit of a step applied (`EditOutcome.to_dict()` each)."""

    event: Literal["edit_report"]
    step: int
    outcomes: list[OutcomeRecord]


class StopEvent(TypedDict):
    """The search stopped: one per run, written by `Optimizer.compile` (`reason`: an
    `optimizers.base.StopReason`; where it stopped: `epoch` for GradientText, `round` and
    `idle_rounds` for Beam; `detail`: the budget's message when it ran out)."""

    event: Literal["stop"]
    reason: str
    epoch: NotRequired[int]
    round: NotRequired[int]
    idle_rounds: NotRequired[int]
    step: NotRequired[int]
    calls_left: NotRequired[int | None]
    detail: NotRequired[str]


class SweepEvent(TypedDict):
    """A learning-rate sweep's study (`SweepResult.to_dict()`)."""

    event: Literal["sweep"]
    study_name: str
    storage: str | None
    best_number: int | None
    trials: list[TrialRow]
    plots: list[str]


class NoteEvent(TypedDict):
    """A proposer's note (`ProposalRequest.note`): a reply it dropped, and why."""

    event: Literal[
        "reflection_dropped",
        "consolidation_dropped",
        "consolidation_adds_dropped",
        "rule_dropped",
        "remembered_rejection",
    ]
    step: int


RunEvent = (
    SeedEvent
    | ResumeEvent
    | EvaluationEvent
    | RefusedEvent
    | DuplicateEvent
    | GateEvent
    | StepEvent
    | SelectionSplitEvent
    | BaselineEvent
    | PreflightEvent
    | SweepPlotsEvent
    | TestSkippedEvent
    | FinishEvent
    | ProposalEvent
    | ProposerEvent
    | ScreenEvent
    | ComposeEvent
    | CandidateSourcesEvent
    | EditReportEvent
    | StopEvent
    | SweepEvent
    | NoteEvent
)
"""One line of events.jsonl of a known kind; narrow it with `event["event"] == "gate"`."""

_KINDS: dict[str, type[Any]] = {
    "seed": SeedEvent,
    "resume": ResumeEvent,
    "evaluation": EvaluationEvent,
    "refused": RefusedEvent,
    "duplicate": DuplicateEvent,
    "gate": GateEvent,
    "step": StepEvent,
    "selection_split": SelectionSplitEvent,
    "baseline": BaselineEvent,
    "preflight": PreflightEvent,
    "sweep_plots": SweepPlotsEvent,
    "test_skipped": TestSkippedEvent,
    "finish": FinishEvent,
    "proposal": ProposalEvent,
    "proposer": ProposerEvent,
    "screen": ScreenEvent,
    "compose": ComposeEvent,
    "candidate_sources": CandidateSourcesEvent,
    "edit_report": EditReportEvent,
    "stop": StopEvent,
    "sweep": SweepEvent,
    **dict.fromkeys(
        (
            "reflection_dropped",
            "consolidation_dropped",
            "consolidation_adds_dropped",
            "rule_dropped",
            "remembered_rejection",
        ),
        NoteEvent,
    ),
}


def event_kinds() -> dict[str, type[Any]]:
    """Every known kind and its record type (a copy)."""
    return dict(_KINDS)


def as_event(kind: str, payload: Mapping[str, object]) -> RunEvent | None:
    """The typed record of one event (`kind` and its fields, as `emit` got them); None for a
    kind this module does not know.

    Raises:
        RunDirError: a known kind lacks a field its record requires (the message names it).
    """
    record: dict[str, object] = {"event": kind, **payload}
    shape = _KINDS.get(kind)
    if shape is None:
        return None
    missing = sorted(shape.__required_keys__ - record.keys())
    if missing:
        raise RunDirError(
            f"a {kind!r} event lacks {', '.join(missing)}; it was not written by this "
            "version of skillopt-dsl (or was edited by hand)"
        )
    return cast(RunEvent, record)


def read_event(record: Mapping[str, object]) -> RunEvent | None:
    """The typed record of one line of events.jsonl (`{"event": kind, ...}`); None for an
    unknown kind."""
    kind = record.get("event")
    if not isinstance(kind, str):
        raise RunDirError(f"not an event object (no 'event' kind): {dict(record)!r:.200}")
    return as_event(kind, {k: v for k, v in record.items() if k != "event"})
