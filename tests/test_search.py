"""The search in front of the gate: screening on training data, per-group memory, budget use.

Each test names the regression it kills; the fakes are the contract suite's parity task and a
scripted proposer that offers fixed edit groups.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, cast

import pytest

import skillopt_dsl as sd
from skillopt_dsl.evaluate import EvaluationReport
from skillopt_dsl.lm import LM
from skillopt_dsl.optimizers import Beam, Bundle, GradientText, Optimizer
from skillopt_dsl.optimizers.gradient_text_state import GradientTextState
from skillopt_dsl.optimizers.proposers import EditGroup, ProposalRequest, Proposer
from skillopt_dsl.optimizers.search import ScreenedProposal
from skillopt_dsl.optimizers.search import step as search_step
from skillopt_dsl.optimizers.search.screening import EditEvidence, ScreenResult, merge_duplicates
from skillopt_dsl.search_memory import SearchMemory, group_key
from skillopt_dsl.skill import Add, token_distance
from skillopt_dsl.testing.contract import ContractParity, contract_examples, contract_target
from skillopt_dsl.testing.rule_world import RuleWorld, RuleWorldProposer, RuleWorldTask
from skillopt_dsl.testing.scripted import ScriptedLM
from skillopt_dsl.types import Example

TRAIN = contract_examples(0, 24)
VAL = contract_examples(100, 30)
GOOD = "A number divisible by 2 is even."
HEDGE = "Always hedge your answer."
TRICK = "Numbers below one hundred are special."


@dataclass(kw_only=True)
class FixedProposer(Proposer):
    """A fake proposer: the same edit groups (one `Add` each) at every step; `named`: each
    says it was written for the batch's failures (`EditGroup.addresses`)."""

    texts: Sequence[str]
    name: str = "fixed"
    named: bool = False

    def propose(self, request: ProposalRequest) -> list[EditGroup]:
        names = tuple(e.id for e, _ in request.failures()) if self.named else ()
        return [
            EditGroup((Add(after=None, text=t),), self.name, True, t, addresses=names)
            for t in self.texts
        ]


@dataclass(kw_only=True)
class NoiseProposer(Proposer):
    """A fake proposer: a new useless note at every step (it never passes the screen)."""

    template: str = "Note {step}: be brief."
    name: str = "noise"

    def propose(self, request: ProposalRequest) -> list[EditGroup]:
        text = self.template.format(step=request.step)
        return [EditGroup((Add(after=None, text=text),), self.name, True, text)]


def tricky_target(messages: list[dict[str, str]]) -> str:
    """The parity target, except that TRICK answers every training number (< 100) right and
    every validation number wrong: it passes any screen and fails the gate."""
    system = next(m["content"] for m in messages if m["role"] == "system")
    number = int(messages[-1]["content"].split()[-1])
    if "special" in system:
        right = number < 100
        truth = "even" if number % 2 == 0 else "odd"
        return truth if right else ("odd" if truth == "even" else "even")
    return contract_target(messages)


MILD = "Multiples of four are even."


def mild_target(messages: list[dict[str, str]]) -> str:
    """The parity target, except that MILD makes multiples of four right (a real but small
    fix: ahead at the first look, not yet significant there)."""
    system = next((m["content"] for m in messages if m["role"] == "system"), "")
    number = int(messages[-1]["content"].split()[-1])
    if "four" in system and number % 4 == 0:
        return "even"
    return contract_target(messages)


def compile_with(
    tmp_path: Path,
    optimizer: Optimizer,
    target: Any = contract_target,
    *,
    val: Sequence[Example] = VAL,
    **kwargs: Any,
) -> sd.CompileResult:
    return sd.compile(
        ContractParity(),
        TRAIN,
        list(val),
        optimizer=optimizer,
        lm=ScriptedLM(target),
        optimizer_lm=ScriptedLM(lambda m: "{}"),
        run_dir=tmp_path,
        threads=1,
        **kwargs,
    )


def compile_rule_world(world: RuleWorld, run_dir: Path, calls: int = 200) -> sd.CompileResult:
    """The default search with the fake world's reflection, 30 train and 30 validation items."""
    return sd.compile(
        RuleWorldTask(),
        world.items("train", 30),
        world.items("val", 30),
        optimizer=GradientText(proposers=[RuleWorldProposer()]),
        lm=LM(world.target()),
        optimizer_lm=LM(world.reflector()),
        budget=sd.Budget(max_calls=calls),
        run_dir=run_dir,
        threads=1,
    )


def events(run_dir: Path, kind: str) -> list[dict[str, Any]]:
    lines = (run_dir / "events.jsonl").read_text(encoding="utf-8").splitlines()
    return [e for e in map(json.loads, lines) if e["event"] == kind]


def test_a_proposal_that_breaks_more_than_it_fixes_never_reaches_the_gate(tmp_path: Path) -> None:
    """Kills: screening that passes every proposal (the gate then spends validation calls and
    significance on an edit the training rollouts already showed to be harmful)."""
    optimizer = GradientText(proposers=[FixedProposer(texts=[HEDGE, GOOD])], epochs=1)
    result = compile_with(tmp_path, optimizer)
    assert GOOD in result.best_skill.text and HEDGE not in result.best_skill.text
    screens = {s["rationale"]: s for s in events(tmp_path, "screen") if s["stage"] == "batch"}
    assert screens[HEDGE]["passed"] is False and screens[HEDGE]["fixes"] == 0
    assert screens[HEDGE]["scored"] < len(TRAIN) // 3, "a proposal fixing nothing stops early"
    assert len(result.gate_log) == 1 and result.gate_log[0].accepted, result.gate_log


def test_a_good_edit_rejected_beside_a_bad_one_is_retried_alone(tmp_path: Path) -> None:
    """Kills: remembering every edit of a rejected candidate as rejected (the good edit that
    travelled with a bad one is then never tried again)."""
    optimizer = GradientText(
        proposers=[FixedProposer(texts=[TRICK, GOOD])],
        compose=2, confirm_steps=0, min_net=1.0, submit_at_net=1000.0, epochs=3, batch_size=8,
    )  # fmt: skip
    result = compile_with(tmp_path, optimizer, target=tricky_target)
    first = result.gate_log[0]
    assert not first.accepted, "the bundle with the trick must fail on validation"
    assert GOOD in result.best_skill.text, "the good edit was lost with the bad one"
    assert TRICK not in result.best_skill.text
    retried = [s for s in events(tmp_path, "screen") if s["rationale"] == GOOD]
    assert len(retried) >= 2, "the good edit was screened once only"


def test_the_search_spends_its_call_budget_when_nothing_is_accepted(tmp_path: Path) -> None:
    """Kills: stopping after `epochs` with most of the budget unspent (the old loop ended its
    two epochs having spent 134 of 200 calls). Every decision gets the whole alpha here
    (`spending="per-decision"`): with the run's budget, the futility stops of the noise
    proposals spend its significance and the search stops there (`significance`,
    tests/test_significance_spent.py)."""
    optimizer = GradientText(proposers=[NoiseProposer()], epochs=1, plateau=None)
    budget = 240
    gate = sd.Gate(spending="per-decision")
    result = compile_with(tmp_path, optimizer, budget=sd.Budget(max_calls=budget), gate=gate)
    assert not result.improved
    stop = events(tmp_path, "stop")[-1]
    assert result.stop_reason == "budget" and stop["reason"] == "budget"
    reserve = len(VAL) + optimizer.batch_size * 4
    assert result.usage.calls >= budget - reserve, (result.usage.calls, stop)
    # after the search, the seed's validation examples past the first look are scored
    assert 0 <= budget - result.usage.calls <= stop["calls_left"]
    assert stop["epoch"] > optimizer.epochs, "the search never went past its epochs"


def test_without_a_call_budget_the_search_stops_after_its_epochs(tmp_path: Path) -> None:
    """Kills: an unbounded search when no call budget is set."""
    optimizer = GradientText(proposers=[FixedProposer(texts=["Be brief."])], epochs=2)
    result = compile_with(tmp_path, optimizer)
    assert result.stop_reason == "finished"
    assert events(tmp_path, "stop")[-1]["epoch"] == 2


def test_a_plateau_ends_a_budgeted_search_and_says_so(tmp_path: Path) -> None:
    """Kills: ignoring `plateau` (a search where nothing passes the screen would spend the
    whole budget on proposals it already knows fail)."""
    hedges = NoiseProposer(template="Always hedge your answer ({step}).")
    optimizer = GradientText(proposers=[hedges], epochs=1, plateau=2)
    result = compile_with(tmp_path, optimizer, budget=sd.Budget(max_calls=1000))
    assert result.stop_reason == "plateau"
    assert result.usage.calls < 200
    assert not result.gate_log, "a screened-out proposal reached the gate"


def test_the_plan_counts_the_decisions_a_call_budget_can_pay_for() -> None:
    """Kills: a significance plan over every step when the budget pays for a few decisions
    (each later decision would get a needlessly small level)."""
    optimizer = GradientText()
    unbudgeted = optimizer.planned_decisions(30)
    assert unbudgeted == 2 * (4 + 1)
    assert optimizer.planned_decisions(30, max_calls=200, validation_size=30) == 1
    assert optimizer.planned_decisions(30, max_calls=400, validation_size=30) == 3
    assert optimizer.planned_decisions(30, max_calls=40, validation_size=30) == 1


def test_beam_makes_one_child_per_proposal(tmp_path: Path) -> None:
    """Kills: Beam bundling an expansion's proposals into one child (a harmful edit proposed
    beside the fix sinks it, and both are remembered as rejected)."""
    optimizer = Beam(proposers=[FixedProposer(texts=[HEDGE, GOOD])], width=2, depth=2)
    result = compile_with(tmp_path, optimizer)
    assert GOOD in result.best_skill.text and HEDGE not in result.best_skill.text
    hedges = [s for s in events(tmp_path, "screen") if s["rationale"] == HEDGE]
    assert hedges and not any(s["passed"] for s in hedges)


def test_beam_spends_its_call_budget_past_its_depth(tmp_path: Path) -> None:
    """Kills: Beam stopping after `depth` rounds with the budget unspent."""
    optimizer = Beam(proposers=[NoiseProposer()], width=1, expansions=1, depth=1, plateau=None)
    budget = 200
    result = compile_with(tmp_path, optimizer, budget=sd.Budget(max_calls=budget))
    assert result.stop_reason == "budget"
    assert result.usage.calls >= budget - (len(VAL) + 4 * optimizer.batch_size), result.usage


def test_the_screen_shows_on_the_progress_screen_and_in_the_report(tmp_path: Path) -> None:
    """Kills: screening that only the events know about (a user reading the live panel or
    the report cannot tell where the calls went nor that validation was spared)."""
    from skillopt_dsl.progress import ProgressState
    from skillopt_dsl.report import write_report

    optimizer = GradientText(proposers=[FixedProposer(texts=[HEDGE, GOOD])], epochs=1)
    compile_with(tmp_path / "run", optimizer, budget=sd.Budget(max_calls=400))
    progress = ProgressState()
    lines = (tmp_path / "run" / "events.jsonl").read_text(encoding="utf-8").splitlines()
    for event in map(json.loads, lines):
        progress.update(event.pop("event"), event)
    screens = events(tmp_path / "run", "screen")
    calls = sum(s["calls"] for s in screens)
    assert dict(progress.rows())["screen"] == (
        f"{sum(s['passed'] for s in screens)} passed / {len(screens)} tried on training data "
        f"({calls} calls, no validation)"
    )
    written = write_report(tmp_path / "run", out_dir=tmp_path / "report")
    markdown = next(p for p in written if p.suffix == ".md").read_text(encoding="utf-8")
    html = next(p for p in written if p.suffix == ".html").read_text(encoding="utf-8")
    batch = [s for s in screens if s["stage"] == "batch"]
    told = f"{sum(s['passed'] for s in batch)} of {len(batch)} proposals passed their mini-batch"
    assert "screened on training data" in html and told in html
    assert f"Screened on training data: {told}" in markdown
    left = events(tmp_path / "run", "stop")[-1]["calls_left"]
    assert f"{left} calls left at the stop" in markdown


def test_screen_false_sends_every_proposal_to_the_gate(tmp_path: Path) -> None:
    """Kills: `screen=False` ignored (the gate-noise bench would measure the screen, not the
    gate: it needs one gate decision per proposal)."""
    optimizer = GradientText(
        proposers=[NoiseProposer()], screen=False, compose=1, epochs=1, slow_update=False
    )
    result = compile_with(tmp_path, optimizer)
    steps = len(TRAIN) // optimizer.batch_size
    assert len(result.gate_log) == steps and not events(tmp_path, "screen")


@dataclass(kw_only=True)
class AddressedProposer(Proposer):
    """A fake proposer: the same texts at every step, each naming the batch's first failure."""

    texts: Sequence[str]
    name: str = "addressed"

    def propose(self, request: ProposalRequest) -> list[EditGroup]:
        failing = [e.id for e, _ in request.failures()][:1]
        return [
            EditGroup((Add(after=None, text=t),), self.name, True, t, addresses=tuple(failing))
            for t in self.texts
        ]


def test_a_proposal_is_screened_first_on_the_failures_it_names(tmp_path: Path) -> None:
    """Kills: a screen that ignores `EditGroup.addresses` (a useless proposal naming the
    failure it was written for then costs every failing example of the batch, not one)."""
    useless = "Think about the number."
    optimizer = GradientText(proposers=[AddressedProposer(texts=[useless, GOOD])], epochs=1)
    result = compile_with(tmp_path, optimizer)
    screens = [s for s in events(tmp_path, "screen") if s["stage"] == "batch"]
    dropped = [s for s in screens if s["rationale"] == useless]
    assert dropped and all(s["scored"] == 1 and not s["passed"] for s in dropped), dropped
    kept = [s for s in screens if s["rationale"] == GOOD]
    assert kept[0]["passed"] and kept[0]["scored"] == optimizer.batch_size
    assert GOOD in result.best_skill.text


def test_a_proposal_that_failed_a_screen_is_tried_again_until_its_strikes(
    tmp_path: Path,
) -> None:
    """Kills: blocking a proposal after one unlucky mini-batch (a good edit whose first screen
    saw none of the examples it fixes is never tried again) and never blocking one (a useless
    edit proposed at every step is screened at every step)."""
    useless = "Think about the number."  # named for the failures: it fixes none of them
    optimizer = GradientText(proposers=[FixedProposer(texts=[useless], named=True)], epochs=2)
    result = compile_with(tmp_path, optimizer)
    screened = [s for s in events(tmp_path, "screen") if s["rationale"] == useless]
    assert len(screened) == optimizer.screen_strikes == 2, screened
    assert any(useless in e.text for c in result.rejected for e in c.edits if isinstance(e, Add)), (
        "the proposers are told about a screened-out proposal from its first failure"
    )


@dataclass(kw_only=True)
class MisnamingProposer(Proposer):
    """A fake reflector that offers MILD (it fixes the multiples of four) and names the wrong
    failure for its first `wrong` offers: an even number that is not a multiple of four, which
    MILD cannot fix (a real reflector names the failures it read, and its rules fix unread
    failures as often as read ones: bench/README §14); then one that MILD fixes."""

    wrong: int = 2
    name: str = "misnaming"
    offered: int = 0

    def propose(self, request: ProposalRequest) -> list[EditGroup]:
        failing = [int(e.inputs["number"]) for e, _ in request.failures()]
        remainder = 2 if self.offered < self.wrong else 0
        named = [f"n{n}" for n in failing if n % 4 == remainder][:1]
        if not named:
            return []
        self.offered += 1
        return [EditGroup((Add(after=None, text=MILD),), self.name, True, MILD, tuple(named))]


@pytest.mark.parametrize("search", ["gradient-text", "bundle"])
def test_a_proposal_whose_claims_failed_is_screened_again_and_kept(
    tmp_path: Path, search: str
) -> None:
    """Kills: blocking a proposal at its strikes for failed claims alone (the failures it names
    not fixed) when its evidence does not rule it out: a useful edit named twice for failures
    it cannot fix is never screened again, and the skill never gets it."""
    proposer = MisnamingProposer()
    optimizer: Optimizer = (
        GradientText(proposers=[proposer], epochs=2)
        if search == "gradient-text"
        else Bundle(proposers=[proposer])
    )
    result = compile_with(tmp_path, optimizer, mild_target)
    screens = [s for s in events(tmp_path, "screen") if s["stage"] == "batch"]
    assert [s["passed"] for s in screens[:3]] == [False, False, True], screens
    assert MILD in result.best_skill.text, result.gate_log


@pytest.mark.parametrize("named", [False, True])
def test_a_proposal_that_gains_nothing_on_its_batch_is_struck_whether_or_not_it_names_failures(
    tmp_path: Path, named: bool
) -> None:
    """Kills: striking only a proposal whose named failures stay unfixed (`bool(group.addresses)
    and not result.passed`): one that names none (worked examples, a consolidation) and gains
    nothing on its batch would go on trial, be confirmed on the next batches, where changing
    nothing passes, and reach the gate; in a HandOff run it would keep the run from Bundle."""
    note = "Read each number slowly."
    optimizer = GradientText(proposers=[FixedProposer(texts=[note], named=named)], epochs=1)
    result = compile_with(tmp_path, optimizer)
    screens = [s for s in events(tmp_path, "screen") if s["rationale"] == note]
    assert screens and all(s["stage"] == "batch" and not s["passed"] for s in screens), screens
    assert len(screens) > 1, "struck, not blocked: proposed again, it is screened again"
    assert not result.gate_log, result.gate_log


def test_the_only_proposer_is_not_benched_while_nothing_passes(tmp_path: Path) -> None:
    """Kills: benching a proposer that spent calls without a survivor when no other proposer
    does better (the search then idles and stops with the budget unspent)."""
    world = RuleWorld(seed=0, p_right=0.0)
    result = compile_rule_world(world, tmp_path)
    reflections = [p for p in events(tmp_path, "proposer") if p["name"] == "rule-world"]
    assert not any(p["benched"] for p in reflections), "the only reflection sat out"
    assert result.usage.calls >= 200 - 2 * len(world.items("val", 30)), result.usage
    assert not result.improved, "nothing helps in the null world"


def three_rules_target(messages: list[dict[str, str]]) -> str:
    """The parity target where "Rule k applies." makes the numbers n with n % 3 == k right
    (the others are answered "odd")."""
    system = next(m["content"] for m in messages if m["role"] == "system")
    number = int(messages[-1]["content"].split()[-1])
    if f"Rule {number % 3} applies." in system:
        return "even" if number % 2 == 0 else "odd"
    return "odd"


class RejectFirst(sd.Gate):
    """A fake gate: the first decision is rejected whatever the evidence, later ones decide."""

    def decide(
        self,
        candidate: EvaluationReport,
        incumbent: EvaluationReport,
        *,
        decision_index: int = 0,
        alpha: float | None = None,
    ) -> sd.GateDecision:
        decision = super().decide(candidate, incumbent, decision_index=decision_index, alpha=alpha)
        if decision_index > 0:
            return decision
        return dataclasses.replace(decision, accepted=False, reason="rejected by the test gate")


@dataclass(kw_only=True)
class LateProposer(Proposer):
    """A fake proposer: `first` at the first step, `later` from step `at` on."""

    first: Sequence[str]
    later: Sequence[str]
    at: int
    name: str = "late"

    def propose(self, request: ProposalRequest) -> list[EditGroup]:
        texts = self.first if request.step == 0 else self.later if request.step >= self.at else ()
        return [EditGroup((Add(after=None, text=t),), self.name, True, t) for t in texts]


def test_a_rejected_bundle_waits_for_new_company_and_is_never_sent_again_unchanged(
    tmp_path: Path,
) -> None:
    """Kills: re-sending a working candidate the gate has already judged, or splitting it
    into lone proposals at once (a lone edit rarely has the power to pass): its proposals,
    confirmed again, wait for a new one and go to the gate with it."""
    first, late = ["Rule 0 applies.", "Rule 1 applies."], "Rule 2 applies."
    optimizer = GradientText(
        proposers=[LateProposer(first=first, later=[late], at=2)],
        compose=2, confirm_steps=0, min_net=1.0, submit_at_net=1000.0, epochs=2, batch_size=24,
    )  # fmt: skip
    result = compile_with(tmp_path, optimizer, target=three_rules_target, gate=RejectFirst())
    assert not events(tmp_path, "duplicate"), "a judged text came back to the door"
    assert len(result.gate_log) == 2 and result.gate_log[1].accepted, result.gate_log
    assert all(text in result.best_skill.text for text in [*first, late]), result.best_skill


def test_screening_leaves_a_gate_decision_worth_of_calls(tmp_path: Path) -> None:
    """Kills: screening that spends the calls the last gate decision needs (six proposals
    that all pass would eat the budget, and the confirmed fixes never reach the gate)."""
    goods = [f"{GOOD} ({k})" for k in range(6)]
    optimizer = GradientText(proposers=[FixedProposer(texts=goods)], epochs=1, batch_size=8)
    result = compile_with(tmp_path, optimizer, budget=sd.Budget(max_calls=100))
    assert result.usage.calls <= 100
    assert result.gate_log and result.gate_log[-1].accepted, result.gate_log
    assert GOOD in result.best_skill.text


def test_a_confirmation_that_breaks_even_keeps_the_proposal_on_trial(tmp_path: Path) -> None:
    """Kills: a confirmation that needs a strict gain (a fresh mini-batch without a single
    example the edit fixes would end a good edit; the stage's contract is not to lose)."""
    confirms = []
    for seed in range(8):
        run_dir = tmp_path / str(seed)
        compile_rule_world(RuleWorld(seed=seed), run_dir)
        confirms += [s for s in events(run_dir, "screen") if s["stage"] == "confirm"]
    even = [s for s in confirms if s["net"] == 0]
    assert even and all(s["passed"] for s in even), confirms


@dataclass(kw_only=True)
class ListeningProposer(Proposer):
    """A fake proposer: `text` at the first step only; records, at each step, the texts it is
    told were rejected."""

    text: str
    told: list[list[str]]
    name: str = "listening"

    def propose(self, request: ProposalRequest) -> list[EditGroup]:
        self.told.append([e.text for c in request.rejected for e in c.edits if isinstance(e, Add)])
        if request.step:
            return []
        names = tuple(e.id for e, _ in request.failures())  # written for them; fixes none
        group = EditGroup((Add(after=None, text=self.text),), self.name, True, self.text)
        return [replace(group, addresses=names)]


def test_the_proposers_are_told_of_a_screened_out_proposal_at_its_first_failure(
    tmp_path: Path,
) -> None:
    """Kills: telling the proposers only of blocked proposals (a reflection model would spend
    its next call re-proposing an edit that just failed, instead of a new one), and putting a
    proposal that failed once into the run's memory proper (`CompileResult.rejected`, which
    Sleep carries across nights and never proposes again)."""
    useless = "Think about the number."
    told: list[list[str]] = []
    optimizer = GradientText(proposers=[ListeningProposer(text=useless, told=told)], epochs=1)
    result = compile_with(tmp_path, optimizer)
    assert told[0] == [] and useless in told[1], told[:2]
    assert not any(
        useless in e.text for c in result.rejected for e in c.edits if isinstance(e, Add)
    )


# -- issue 38 item 1: screening and confirmation as the search now keeps them -----------------


def test_merged_duplicate_proposals_keep_the_addresses_of_both_copies() -> None:
    """Kills: a merge that keeps only the first copy's named failures (the screen then scores
    the proposal first on half the failures it was written for, and may drop it there), and
    one that names failures when a copy named none (that copy was not written for them)."""
    edits = (Add(after=None, text=GOOD),)
    first = EditGroup(edits, "a", True, "first", addresses=("n2", "n4"))
    second = EditGroup(edits, "b", True, "second", addresses=("n4", "n6"))
    other = EditGroup((Add(after=None, text=HEDGE),), "a", True, "other", addresses=("n8",))
    merged = merge_duplicates([first, other, second])
    assert [g.rationale for g in merged] == ["first", "other"]
    assert merged[0].addresses == ("n2", "n4", "n6") and merged[1].addresses == ("n8",)
    unnamed = EditGroup(edits, "c", True, "unnamed")
    assert merge_duplicates([first, unnamed])[0].addresses == ()


class ConfirmView:
    """The part of a run view that `GradientText._confirm` reads: the run's search memory, the
    gain the gate certifies about half the time (0.15); events are dropped."""

    def __init__(self, memory: SearchMemory) -> None:
        self.memory = memory

    def certifiable_gain(self) -> float | None:
        return 0.15

    def emit(self, event: str, /, **payload: Any) -> None:
        pass


def standing_after(
    monkeypatch: pytest.MonkeyPatch,
    batch: ScreenResult,
    *confirms: ScreenResult,
    min_net: float = 2.0,
) -> str:
    """Where one proposal stands ("joined", "trial" or "struck") after its batch screen `batch`
    and the confirmations `confirms` (scripted screen results, one per step, `confirm_steps=2`),
    each run by `GradientText._confirm` while the proposal is still on trial."""
    results = iter(confirms)
    monkeypatch.setattr(search_step, "screen", lambda *args, **kwargs: next(results))
    optimizer = GradientText(proposers=[], confirm_steps=2, min_net=min_net)
    group = EditGroup((Add(after=None, text=GOOD),), "fixed", True, GOOD)
    state, key = GradientTextState(), group_key(group.edits)
    memory = SearchMemory(step=1)
    summed = memory.add_evidence(key, batch)
    proposal = ScreenedProposal.of(
        group, group.edits, key=key, net=summed.net, scored=summed.scored
    )
    state.trials.append(replace(proposal, screens=1))
    working, view = sd.Skill(ContractParity.skill), cast(Any, ConfirmView(memory))
    for _ in confirms:
        if not state.trials:
            break
        optimizer.screened.confirm(view, state, working, [], [], state.trials[0], room=1000)
    if key in memory.screen_strikes:
        return "struck"
    return "joined" if [g.key for g in state.pending] == [key] else "trial"


def batch_result(fixes: int, breaks: int, scored: int) -> ScreenResult:
    return ScreenResult("batch", scored, fixes, breaks, fixes - breaks, scored, fixes > breaks)


def confirm_result(fixes: int, breaks: int, scored: int) -> ScreenResult:
    return ScreenResult("confirm", scored, fixes, breaks, fixes - breaks, scored, fixes >= breaks)


def test_a_proposal_joins_after_a_confirmation_only_with_min_net_in_all(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Kills: joining on any passed confirmation (a net gain of one, whatever `min_net`), and
    counting only the confirmation's own net (the batch's gain is evidence too)."""
    assert standing_after(monkeypatch, batch_result(1, 0, 4), confirm_result(1, 0, 4)) == "joined"
    assert standing_after(monkeypatch, batch_result(1, 0, 4), confirm_result(0, 0, 4)) == "trial"
    loose = standing_after(monkeypatch, batch_result(1, 0, 4), confirm_result(0, 0, 4), min_net=1)
    assert loose == "joined"


def test_a_confirmation_that_loses_is_no_strike_by_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    """Kills: striking a proposal at its first losing confirmation while its summed evidence
    still shows a gain (issue 36: small noisy batches threw real gains away), and letting it
    join on that loss because its sum reaches `min_net` (a loss is never a confirmation)."""
    lost = standing_after(monkeypatch, batch_result(3, 0, 4), confirm_result(0, 1, 4))
    assert lost == "trial"


def test_a_proposal_is_struck_when_its_summed_evidence_rules_it_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Kills: keeping on trial a proposal whose evidence, summed over its screens, says it
    hurts (`EditEvidence.rules_out`: two breaks more than fixes) until its confirmations are
    done."""
    assert standing_after(monkeypatch, batch_result(1, 0, 2), confirm_result(0, 3, 8)) == "struck"


def test_a_proposal_whose_confirmations_are_done_joins_only_with_a_net_gain(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Kills: a proposal left on trial for ever once its `confirm_steps` confirmations are
    done with a small positive net (where the batches cannot tell, the gate decides), and one
    that joins with no net gain in all (it hurts or cannot help: struck)."""
    small = (batch_result(1, 0, 2), confirm_result(0, 0, 1), confirm_result(0, 0, 2))
    assert standing_after(monkeypatch, *small) == "joined"
    none = (batch_result(1, 0, 2), confirm_result(0, 0, 1), confirm_result(0, 1, 2))
    assert not EditEvidence(1, 1, 0.0, 5, 3).rules_out(0.15)  # the odds alone cannot tell
    assert standing_after(monkeypatch, *none) == "struck"


def test_a_proposal_the_gate_rejected_alone_is_remembered_not_retried(tmp_path: Path) -> None:
    """Kills: sending a lone proposal the gate rejected back on trial like a bundle's member
    (it is confirmed again on training data, where it still looks good, and comes back to the
    door unchanged: a second decision, or a duplicate, on the same text)."""
    optimizer = GradientText(proposers=[FixedProposer(texts=[TRICK])], epochs=1)
    result = compile_with(tmp_path, optimizer, target=tricky_target)
    (decision,) = result.gate_log
    assert not decision.accepted and not events(tmp_path, "duplicate")
    assert any(TRICK in e.text for c in result.rejected for e in c.edits if isinstance(e, Add))
    gated_at = events(tmp_path, "gate")[0]["step"]
    later = [s for s in events(tmp_path, "screen") if s["rationale"] == TRICK]
    assert all(s["step"] <= gated_at for s in later), later


RULE_0 = "Rule 0 applies."
RULE_1 = "Rule 1 applies."


def test_proposals_that_overflow_the_path_go_back_on_trial_never_lost(tmp_path: Path) -> None:
    """Kills: dropping the proposals `_fit_path` takes off an overflowing working candidate
    (two fixes proposed once, in one step, each within the step's room but not together: the
    second must reach a later decision of its own)."""
    seed = sd.Skill(ContractParity.skill)
    room = max(token_distance(seed.text, seed.apply([Add(after=None, text=t)])[0].text)
               for t in (RULE_0, RULE_1))  # fmt: skip
    optimizer = GradientText(
        proposers=[LateProposer(first=[RULE_0, RULE_1], later=[], at=99)],
        lr=0.01, lr_floor_tokens=room, compose=2, confirm_steps=0, min_net=1.0,
        submit_at_net=1000.0, epochs=1, batch_size=12, slow_update=False,
    )  # fmt: skip
    result = compile_with(tmp_path, optimizer, target=three_rules_target, gate=sd.Gate.mean_only())
    assert not events(tmp_path, "refused")
    assert [d.accepted for d in result.gate_log] == [True, True], result.gate_log
    assert RULE_0 in result.best_skill.text and RULE_1 in result.best_skill.text


def test_proposals_still_on_trial_at_the_end_get_their_last_chance(tmp_path: Path) -> None:
    """Kills: a search that ends with proposals on trial unjudged (a small fix proposed at the
    last step, passed on its batch and awaiting confirmation, goes to the gate at the end)."""
    optimizer = GradientText(
        proposers=[LateProposer(first=[], later=[MILD], at=2)], epochs=1, slow_update=False
    )
    compile_with(tmp_path, optimizer, target=mild_target)
    (screen,) = [s for s in events(tmp_path, "screen") if s["rationale"] == MILD]
    assert screen["passed"] and screen["stage"] == "batch"
    (gate,) = events(tmp_path, "gate")
    assert gate["step"] == 3, "the final decision comes after the last step"


def test_the_learning_rate_path_grows_only_by_steps_that_joined_something(
    tmp_path: Path,
) -> None:
    """Kills: declaring every step's learning rate since the last decision (two empty steps
    before the fix would triple the change the door allows for a one-step candidate)."""
    optimizer = GradientText(proposers=[LateProposer(first=[], later=[GOOD], at=2)], epochs=1)
    result = compile_with(tmp_path, optimizer)
    (record,) = [r for r in result.history if r.accepted]
    assert record.lr_budget == optimizer.lr, record
