"""Guards on the searches' promises (issue 56): each test names the promise and, in its
docstring, the one-spot mutation of the code it kills (ScriptedLM only, each well under 2 s)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, cast

import pytest

import skillopt_dsl as sd
from skillopt_dsl.driver import RunView
from skillopt_dsl.driver.looks import SequentialJudge
from skillopt_dsl.driver.state_parts import PARTS, PHASE, nest_part, phase_state, read_part
from skillopt_dsl.evidence import SignificanceBudget
from skillopt_dsl.optimizers import Beam, Bundle, GradientText, HandOff, ReflectiveProposer
from skillopt_dsl.optimizers import bundle as bundle_module
from skillopt_dsl.optimizers.base import Optimizer
from skillopt_dsl.optimizers.bundle import BundleMember, BundleState, quotes
from skillopt_dsl.optimizers.gradient_text_state import GradientTextState
from skillopt_dsl.optimizers.proposers import EditGroup, ProposalRequest, Proposer
from skillopt_dsl.optimizers.search import ScreenedProposal
from skillopt_dsl.optimizers.search.screened import _clean_sweep
from skillopt_dsl.optimizers.search.screening import ScreenResult
from skillopt_dsl.search_memory import group_key
from skillopt_dsl.skill import Add
from skillopt_dsl.testing import ScriptedLM
from skillopt_dsl.testing.contract import (
    BAD_EDIT,
    ContractParity,
    contract_examples,
    contract_reflector,
    contract_target,
)
from skillopt_dsl.testing.rule_world import RuleWorldTask
from skillopt_dsl.testing.search_contract import PARITY_FIX, OfferedEdits
from tests.test_bundle import CLEAN, Offers, items, scripted_target

VAL30 = contract_examples(100, 30)
FIXES = [f"{PARITY_FIX} ({k})" for k in range(6)]
UNPAID = "the calls left do not pay for the next look"


@pytest.mark.timeout(60)
@pytest.mark.parametrize("calls", [80, 100])
def test_beam_ends_on_a_set_too_small_to_certify_with_its_default_proposers(calls: int) -> None:
    """Kills: Beam without its idle-round stop (`IDLE_ROUNDS` unused): on 6 training and 3
    validation examples, with the default proposers and a model that proposes nothing, every
    round after the first was served from the cache and the run never returned (issue 56)."""
    result = sd.compile(
        ContractParity(), contract_examples(0, 6), contract_examples(100, 3),
        optimizer=Beam(width=2), lm=ScriptedLM(contract_target),
        optimizer_lm=ScriptedLM(lambda _: "{}"), budget=sd.Budget(max_calls=calls), threads=1,
    )  # fmt: skip
    assert result.stop_reason == "plateau" and result.usage.calls <= calls
    assert not result.improved


def _judge(gate: sd.Gate) -> SequentialJudge:
    budget = SignificanceBudget(alpha=gate.alpha, first_share=gate.first_share)
    budget.plan(1)
    return SequentialJudge(gate, budget, tuple(VAL30), tuple(VAL30))


def _brevity(example: sd.Example, prediction: object) -> bool:
    return True


@pytest.mark.parametrize(
    ("gate", "size"),
    [
        (sd.Gate(), 15),
        (sd.Gate(early_share=0.0), 30),
        (sd.Gate(guards=[sd.Guard.metric("brevity", _brevity)]), 30),
        (sd.Gate(looks=(0.15, 0.5), min_look=4), 15),
    ],
)
def test_the_reserved_look_is_the_first_at_which_the_gate_could_accept(
    gate: sd.Gate, size: int
) -> None:
    """Kills: a decision reserve of the gate's first look whatever the gate (`deciding_look`
    returning the first look where early acceptance is off, with `early_share=0` or a guard,
    or where the first look is too small for a clean fix to pass its share of the level: 4
    examples, 2^-4 above it): the reserve is the first look that could accept."""
    judge = _judge(gate)
    assert len(judge.deciding_look()) == size
    whole = judge.calls_needed(frozenset())
    assert judge.calls_needed(frozenset(), first_look=True) == (size * 2 if size < 30 else whole)


OPTIMIZERS: dict[str, Callable[[], Optimizer]] = {
    "bundle": lambda: Bundle(proposers=[OfferedEdits(texts=FIXES)], failures_per_step=4),
    "gradient-text": lambda: GradientText(proposers=[OfferedEdits(texts=FIXES)]),
}


@pytest.mark.parametrize(
    ("name", "calls"),
    [("bundle", 60), ("bundle", 72), ("gradient-text", 56), ("gradient-text", 60)],
)
@pytest.mark.parametrize("gate", ["early_share=0", "guard"])
def test_a_search_near_its_budgets_end_keeps_the_calls_of_a_decision_that_could_accept(
    name: str, calls: int, gate: str
) -> None:
    """Kills: Bundle and GradientText reserving only the gate's first look in the budget's
    tail where the gate cannot accept there (`early_share=0`, or any guard): their candidate
    went to a decision stopped at look 1 "for lack of calls" (the parity fix, 0.5 ahead, at
    56-76 calls), its calls and its significance spent for nothing (issue 56). A decision
    either runs to a look that could accept it, or is not started."""
    chosen = (
        sd.Gate(early_share=0.0)
        if gate == "early_share=0"
        else sd.Gate(guards=[sd.Guard.metric("brevity", _brevity)])
    )
    result = sd.compile(
        ContractParity(), contract_examples(0, 24), VAL30, optimizer=OPTIMIZERS[name](),
        lm=ScriptedLM(contract_target), optimizer_lm=ScriptedLM(lambda _: "{}"), gate=chosen,
        budget=sd.Budget(max_calls=calls), threads=1,
    )  # fmt: skip
    stopped = [d for d in result.gate_log if UNPAID in d.reason]
    assert not stopped, stopped
    assert result.usage.calls <= calls


# -- HandOff and the composite state (issue 56, items 1-2) ------------------------------------


def test_hand_offs_door_floor_is_the_larger_of_the_two_searches_floors() -> None:
    """Kills: `HandOff.lr_bound` taking the smaller floor (or GradientText's alone): Bundle's
    larger floor would then be refused by the door on Bundle's own steps."""
    first = GradientText(lr=0.2, lr_floor_tokens=16)
    then = Bundle(lr=0.1, lr_floor_tokens=128)
    bound = HandOff(first=first, then=then).lr_bound()
    assert (bound.max_lr, bound.floor_tokens) == (0.2, 128)
    bound = HandOff(first=replace(first, lr_floor_tokens=256), then=then).lr_bound()
    assert bound.floor_tokens == 256


def test_a_part_inside_a_part_saves_its_state_under_its_whole_path() -> None:
    """Kills: `nest_part` saving a nested part's state under its last name at the top level
    (or dropping the rest of the path): a HandOff inside a composite would then overwrite its
    sibling's state, and resume would read the wrong one."""
    saved = nest_part({PARTS: {"other": {"x": 0}}}, ("outer", "inner"), {"x": 1})
    assert read_part(saved, ("outer", "inner")) == {"x": 1}
    assert read_part(saved, ("inner",)) == {}, "the nested state leaked to the top level"
    assert read_part(saved, ("other",)) == {"x": 0}, "a sibling's state was lost"
    assert saved[PHASE] == "outer" and read_part(saved, ("outer",))[PHASE] == "inner"
    assert phase_state(saved) == {"x": 1}


# -- the screened step (item 4) -------------------------------------------------------------


def _screen(fixes: int, breaks: int) -> ScreenResult:
    return ScreenResult("screen", 8, fixes, breaks, float(fixes - breaks), 8, True)


def test_a_clean_sweep_fixes_every_failure_of_its_batch() -> None:
    """Kills: `_clean_sweep` counting a proposal that fixed 2 of its batch's 3 failures (and
    broke none) as a clean sweep (`fixes >= least` alone, or `min(failing, least)`): it
    would join the working candidate unconfirmed."""
    assert _clean_sweep(_screen(3, 0), 3, 2.0)
    assert not _clean_sweep(_screen(2, 0), 3, 2.0), "2 of 3 failures fixed is no clean sweep"
    assert not _clean_sweep(_screen(3, 1), 3, 2.0), "a sweep that breaks one is not clean"
    assert not _clean_sweep(_screen(1, 0), 1, 2.0), "a sweep asks at least `least` fixes"


# -- Bundle (item 5) -------------------------------------------------------------------------


def test_an_input_the_incumbent_already_quotes_is_not_the_new_edits_quote() -> None:
    """Kills: `quotes` ignoring what the incumbent already holds (`v not in incumbent.text`
    dropped): a fix of an example the seed already quoted would not count as the edit's."""
    example = sd.Example(id="e", inputs={"item": "item train12"}, labels={"answer": "A"})
    bare, quoting = sd.Skill("Answer A."), sd.Skill("Answer A. For item train12 say A.")
    assert quotes(bare, quoting, example)
    assert not quotes(quoting, sd.Skill(quoting.text + " Be brief."), example)
    short = sd.Example(id="s", inputs={"item": "x7"}, labels={"answer": "A"})
    assert not quotes(bare, sd.Skill("Answer A. x7"), short), "a short value is no quote"


def test_the_collected_edits_survive_the_checkpoint() -> None:
    """Kills: `BundleState.to_dict` / `from_dict` dropping the members or the survivors
    waiting to be audited within the bundle, or a waiting survivor's breaks (a run resumed
    from a checkpoint taken mid-bundle would submit a bundle without the edits it had
    collected, or admit a waiting one without auditing its breaks again)."""
    member = BundleMember((Add(after=None, text="FIX the zeros."),), ("train4", "train8"))
    waiting = BundleMember((Add(after=None, text="FIX the ones."),), ("train1",), ("train6",))
    state = BundleState(
        members=[member], waiting=[waiting], steps_this_bundle=2, idle_steps=1, tail=True
    )
    back = BundleState.from_dict(json.loads(json.dumps(state.to_dict())))
    assert back.members == [member] and back.waiting == [waiting]
    assert (back.steps_this_bundle, back.idle_steps, back.tail) == (2, 1, True)
    older = {k: v for k, v in state.to_dict().items() if k != "waiting"}  # before the wait
    assert BundleState.from_dict(older).waiting == []


@dataclass
class _Calls:
    """What `Bundle._affords_step` reads of a view: the calls left and the prices."""

    left: int
    decision: int = 30

    def calls_left(self) -> int:
        return self.left

    def calls_per_rollout(self) -> float:
        return 1.0

    def decision_calls(self, *, first_look: bool = False) -> int:
        return self.decision


def test_a_bundle_step_is_priced_with_its_proposers_calls() -> None:
    """Kills: a step priced at its screen alone (`_PROPOSAL_CALLS` dropped from
    `_affords_step`): with 3 failures a step and a 30-call decision, 33 calls left would start
    a step whose proposers then eat the decision's calls."""
    bundle = Bundle(failures_per_step=3)
    step = bundle_module._PROPOSAL_CALLS + 3
    view = cast(RunView, _Calls(left=30 + step))
    assert bundle._affords_step(view, first_look=False)
    view = cast(RunView, _Calls(left=30 + step - 1))
    assert not bundle._affords_step(view, first_look=False)
    assert not bundle._affords_step(cast(RunView, _Calls(left=33)), first_look=False)


# -- GradientText's small-budget plan (item 3) ------------------------------------------------


def test_a_planned_batch_never_exceeds_the_configured_batch_size(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Kills: a small-budget plan whose least batch is 2 whatever `batch_size` says
    (`max(2, ...)` in `_planned_batch`), or that refuses a batch of one (`size >= 2` in
    `_batch_within`): with `batch_size=1` every step rolls out one training example, and
    screened steps of one example do run."""
    real, sizes = RunView.evaluate, []

    def evaluate(view: RunView, skill: sd.Skill, examples: Any, **kwargs: Any) -> Any:
        if kwargs.get("label") == "train":
            sizes.append(len(examples))
        return real(view, skill, examples, **kwargs)

    monkeypatch.setattr(RunView, "evaluate", evaluate)
    optimizer = GradientText(proposers=[OfferedEdits(texts=FIXES[:1])], batch_size=1)
    for calls in (60, 100):
        result = sd.compile(
            ContractParity(), contract_examples(0, 24), VAL30, optimizer=optimizer,
            lm=ScriptedLM(contract_target), optimizer_lm=ScriptedLM(lambda _: "{}"),
            budget=sd.Budget(max_calls=calls), threads=1,
        )  # fmt: skip
        kinds = {h.kind for h in result.history}
        assert "step" in kinds, f"no screened step of one example ran at {calls} calls: {kinds}"
    assert sizes and max(sizes) == 1, sizes


def _parity_or_minor(messages: list[dict[str, str]]) -> str:
    """The contract's target, and a skill saying MINOR makes multiples of 4 even (a small
    proposal that passes its screen but does not join at once)."""
    system = messages[0]["content"] if messages[0]["role"] == "system" else ""
    number = int(messages[-1]["content"].split()[-1])
    if "MINOR" in system and number % 4 == 0:
        return "even"
    return contract_target(messages)


def test_after_a_perfect_stop_nothing_on_trial_goes_to_a_decision_it_cannot_win() -> None:
    """Kills: GradientText's last chance sending what is still on trial to a "final" gate
    decision after the incumbent became perfect (`stop != "perfect"` dropped from
    `optimize`): the small proposal on trial would spend a decision no candidate can win."""
    offers = OfferedEdits(texts=[PARITY_FIX, "MINOR: multiples of 4 are even."])
    result = sd.compile(
        ContractParity(), contract_examples(0, 24), VAL30,
        optimizer=GradientText(proposers=[offers]), lm=ScriptedLM(_parity_or_minor),
        optimizer_lm=ScriptedLM(lambda _: "{}"), threads=1, seed=1,
    )  # fmt: skip
    assert result.stop_reason == "perfect"
    assert [d.accepted for d in result.gate_log] == [True], result.gate_log


@dataclass(kw_only=True)
class _Recording(Proposer):
    """Proposes nothing; counts the requests it was asked."""

    name: str = "recording"
    asked: list[int] = field(default_factory=list)

    def propose(self, request: ProposalRequest) -> list[EditGroup]:
        self.asked.append(request.step)
        return []


def _right_on_training(messages: list[dict[str, str]]) -> str:
    """Right on every training number (below 100); the contract's target on validation."""
    number = int(messages[-1]["content"].split()[-1])
    if number < 100:
        return "even" if number % 2 == 0 else "odd"
    return contract_target(messages)


def test_the_end_of_epoch_consolidation_is_asked_even_when_its_batch_is_solved() -> None:
    """Kills: the slow update skipped on a solved batch like a step's proposers (`or kind ==
    "slow_update"` dropped where the proposers are asked): a consolidation shortens what is
    right already, so it is asked at each epoch's end whatever the batch shows."""
    consolidation = _Recording()
    optimizer = GradientText(
        proposers=[OfferedEdits(texts=[])], consolidation=consolidation, epochs=1
    )
    result = sd.compile(
        ContractParity(), contract_examples(0, 16), VAL30, optimizer=optimizer,
        lm=ScriptedLM(_right_on_training), optimizer_lm=ScriptedLM(lambda _: "{}"), threads=1,
    )  # fmt: skip
    assert consolidation.asked, f"the consolidation was never asked ({result.stop_reason})"


@dataclass(kw_only=True)
class _FixFirst(Proposer):
    """The parity fix at the run's first step, nothing after."""

    name: str = "fix-first"

    def propose(self, request: ProposalRequest) -> list[EditGroup]:
        if request.step > 0:
            return []
        return [EditGroup((Add(after=None, text=PARITY_FIX),), self.name, True, PARITY_FIX)]


def _wrong_on_sevens(messages: list[dict[str, str]]) -> str:
    """The contract's target, wrong on multiples of 7 (the fix leaves validation imperfect)."""
    answer = contract_target(messages)
    if int(messages[-1]["content"].split()[-1]) % 7:
        return answer
    return "odd" if answer == "even" else "even"


def _wrong_on_validation_sevens(messages: list[dict[str, str]]) -> str:
    """`_wrong_on_sevens` on validation (numbers from 100) only: the fix leaves validation
    imperfect and gains on every training batch (it is never struck there)."""
    if int(messages[-1]["content"].split()[-1]) < 100:
        return contract_target(messages)
    return _wrong_on_sevens(messages)


def test_the_run_is_never_handed_to_bundle_after_gradient_text_had_a_candidate_accepted(
    tmp_path: Path,
) -> None:
    """Kills: GradientText's hand-off test without `view.version == 1` (`_hands_off`): after
    its first step's fix is accepted, the steps that confirm nothing would hand the rest of
    the run to Bundle, though a mini-batch has shown an effect."""
    proposers = [_FixFirst()]
    optimizer = HandOff(first=GradientText(proposers=proposers), then=Bundle(proposers=proposers))
    result = sd.compile(
        ContractParity(), contract_examples(0, 24), VAL30, optimizer=optimizer,
        lm=ScriptedLM(_wrong_on_validation_sevens), optimizer_lm=ScriptedLM(lambda _: "{}"),
        budget=sd.Budget(max_calls=200), run_dir=tmp_path, threads=1,
    )  # fmt: skip
    assert [d.accepted for d in result.gate_log][:1] == [True]
    events = (tmp_path / "events.jsonl").read_text(encoding="utf-8")
    assert '"hand_off"' not in events, "handed off after an acceptance"
    assert "hand_off" not in {h.kind for h in result.history}


@dataclass(kw_only=True)
class _EveryOtherStep(Proposer):
    """A clean fix (a new text each time) at steps 1 and 3, nothing at the others."""

    name: str = "every-other"

    def propose(self, request: ProposalRequest) -> list[EditGroup]:
        if request.step not in (1, 3):
            return []
        text = f"{CLEAN} ({request.step})"
        names = tuple(e.id for e, _ in request.failures())
        return [EditGroup((Add(after=None, text=text),), self.name, True, text, addresses=names)]


def test_bundles_patience_counts_idle_steps_in_a_row(tmp_path: Path) -> None:
    """Kills: an idle count that a collecting step does not reset (`idle_steps` only ever
    grows): with `patience=2`, steps that collect nothing and steps that collect in turn would
    send the bundle to the gate at the third step instead of after two idle steps in a row."""
    optimizer = Bundle(proposers=[_EveryOtherStep()], failures_per_step=1, patience=2)
    result = sd.compile(
        RuleWorldTask(), items("train", 24), items("val", 40), optimizer=optimizer,
        lm=ScriptedLM(scripted_target), optimizer_lm=ScriptedLM(lambda _: "{}"),
        run_dir=tmp_path, threads=1,
    )  # fmt: skip
    lines = (tmp_path / "events.jsonl").read_text(encoding="utf-8").splitlines()
    kinds = [e for e in map(json.loads, lines) if e["event"] in ("bundle_step", "compose")]
    first = [e.get("collected", "compose") for e in kinds][:7]
    assert first == [0, 1, 0, 1, 0, 0, "compose"], first
    assert result.gate_log and result.gate_log[0].accepted


def test_the_report_reads_the_rejections_of_a_part_inside_a_composite_search() -> None:
    """Kills: a report that reads only the top-level search's rejected memory (the rejections
    made inside HandOff's parts left out of `CompileResult.rejected`): the hedge, struck once
    by GradientText and blocked by Bundle after the hand-off, is in the run's report."""
    reflective = [ReflectiveProposer(read_successes=False)]
    optimizer = HandOff(first=GradientText(proposers=reflective), then=Bundle(proposers=reflective))
    result = sd.compile(
        ContractParity(), contract_examples(0, 24), VAL30, optimizer=optimizer,
        lm=ScriptedLM(contract_target), optimizer_lm=contract_reflector([BAD_EDIT]),
        budget=sd.Budget(max_calls=150), threads=1,
    )  # fmt: skip
    assert "hand_off" in {h.kind for h in result.history}
    rejected = [e.text for c in result.rejected for e in c.edits]
    assert rejected == [BAD_EDIT["text"]], rejected


@pytest.mark.parametrize("calls", [112, 124])
def test_a_bundle_that_holds_edits_stops_collecting_in_time_to_afford_its_decision(
    calls: int,
) -> None:
    """Kills: a bundle holding edits that goes on into the budget's tail when a whole decision
    no longer fits after a step (`if state.members or state.tail` reduced to `if state.tail`
    in `_collect`): its clean fixes of a quarter of the inputs, not decisive on the gate's
    first look, were stopped there for lack of calls (112-130 calls) instead of accepted."""
    texts = [f"{CLEAN} ({k})" for k in range(4)]
    result = sd.compile(
        RuleWorldTask(), items("train", 24), items("val", 40),
        optimizer=Bundle(proposers=[Offers(texts=texts)], failures_per_step=2),
        lm=ScriptedLM(scripted_target), optimizer_lm=ScriptedLM(lambda _: "{}"),
        budget=sd.Budget(max_calls=calls), threads=1,
    )  # fmt: skip
    assert [d.accepted for d in result.gate_log] == [True], result.gate_log
    assert result.usage.calls <= calls


@pytest.mark.parametrize("calls", [120, 160])
def test_after_an_accepted_bundle_the_new_incumbent_is_scored_only_within_the_reserve(
    calls: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kills: an accepted bundle that keeps the old incumbent's pool count (`state.scored = 0`
    dropped from what `Bundle._submit` commits after the verdict): the new incumbent is then scored on the whole
    pool scored so far, past the gate's reserve, until the budget stops it mid-way (its calls
    spent to the last, no search step after). Every training score of the new incumbent
    must complete and leave the next decision's first look."""
    real, slack = RunView.evaluate, []

    def evaluate(view: RunView, skill: sd.Skill, examples: Any, **kwargs: Any) -> Any:
        report = real(view, skill, examples, **kwargs)
        left = view.calls_left()
        if kwargs.get("label") == "train" and view.version > 1 and left is not None:
            slack.append(left - view.decision_calls(first_look=True))
        return report

    monkeypatch.setattr(RunView, "evaluate", evaluate)
    result = sd.compile(
        ContractParity(), contract_examples(0, 48), VAL30,
        optimizer=Bundle(proposers=[OfferedEdits(texts=FIXES)], failures_per_step=4),
        lm=ScriptedLM(_wrong_on_sevens), optimizer_lm=ScriptedLM(lambda _: "{}"),
        budget=sd.Budget(max_calls=calls), threads=1,
    )  # fmt: skip
    assert [d.accepted for d in result.gate_log] == [True]
    assert slack and min(slack) >= 0, slack


def _breaks_seven(messages: list[dict[str, str]]) -> str:
    """The contract's target, and a skill saying BREAK7 gets the number 7 wrong."""
    system = messages[0]["content"] if messages[0]["role"] == "system" else ""
    if "BREAK7" in system and messages[-1]["content"].split()[-1] == "7":
        return "even"
    return contract_target(messages)


@dataclass(kw_only=True)
class _ConfirmOnce(GradientText):
    """Puts one proposal back on trial from a rejected bundle (its earlier screens summed to
    +10 over 16 examples) and confirms it once on a batch where it breaks one example."""

    outcome: dict[str, list[str]] = field(default_factory=dict)

    def optimize(self, view: RunView) -> None:
        text = "BREAK7 rarely."
        group = EditGroup((Add(after=None, text=text),), "test", True, text)
        key = group_key(group.edits)
        view.memory.add_evidence(key, ScreenResult("screen", 16, 10, 0, 10.0, 16, True))
        trial = ScreenedProposal.of(group, group.edits, key=key, net=10.0, scored=16)
        trial = replace(trial, screens=0, gated=1)
        state = GradientTextState(trials=[trial])
        batch = [e for e in view.trainset if e.id in {f"n{k}" for k in range(8)}]
        rollouts = view.evaluate(view.incumbent, batch).records
        self.screened.confirm(view, state, view.incumbent, batch, rollouts, trial, 1000)
        self.outcome["pending"] = [g.key for g in state.pending]
        self.outcome["trials"] = [g.key for g in state.trials]


def test_with_confirm_steps_0_a_proposal_rejected_in_a_bundle_does_not_rejoin_unconfirmed() -> None:
    """Kills: a confirmation that ignores the gate strikes a proposal came back with (`done =
    screens > self.confirm_steps`, without `trial.gated`): with `confirm_steps=0` a proposal
    back from a rejected bundle would rejoin the working candidate on its first confirmation
    even when that confirmation lost (it broke 7, fixed nothing), so the gate would judge it
    again on no new evidence. It must pass a confirmation first; until then it stays on trial."""
    optimizer = _ConfirmOnce(proposers=[], confirm_steps=0)
    sd.compile(
        ContractParity(), contract_examples(0, 24), VAL30, optimizer=optimizer,
        lm=ScriptedLM(_breaks_seven), optimizer_lm=ScriptedLM(lambda _: "{}"), threads=1,
    )  # fmt: skip
    assert optimizer.outcome["pending"] == [], "it rejoined on a confirmation it lost"
    assert len(optimizer.outcome["trials"]) == 1, optimizer.outcome
