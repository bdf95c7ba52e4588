"""Reliability under a faulty model: compile completes, every fault is counted, errors never win.

The rule under test (see `skillopt_dsl.gate`): a failed model call is first retried by the model
layer (`LM`, with backoff and at least the provider's Retry-After). A rollout that still fails is
scored 0 for the candidate; and on an example where the *incumbent's* rollout failed, the
candidate is scored 0 as well. So errors can lower a candidate's score but never raise it: a
candidate is never accepted because the incumbent's calls failed.

Why the incumbent needs care: the incumbent's validation report is computed once and kept (its
successful rollouts are cached), so an error in it stays in it for every later comparison. The
tests below make the incumbent's calls fail *persistently* to exercise exactly that.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from typing import Any

import pytest

import skillopt_dsl as sd
from skillopt_dsl.evaluate import EvaluationReport, Rollout
from skillopt_dsl.lm import LM
from skillopt_dsl.optimizers import GradientText, ReflectiveProposer
from skillopt_dsl.testing import FaultyBackend, ScriptedLM
from skillopt_dsl.testing.faults import InjectedServerError
from skillopt_dsl.types import Prediction
from tests.helpers import Parity, parity_examples, parity_target

TRAIN = parity_examples(0, 16)
VAL = parity_examples(100, 30)  # enough for the fix to be significant under the default gate
GOOD = {"kind": "add", "after": None, "text": "Check if divisible by 2.", "rationale": "parity"}
NOISE = {"kind": "add", "after": None, "text": "Be brief.", "rationale": "style"}
RAISING = ("exception", "timeout", "rate_limit")
RETRY_AFTER_S = 7.0  # above the largest jittered backoff used here (capped at 4 s)


def reflector_respond(messages: list[dict[str, str]]) -> str:
    """Propose the no-op NOISE edit first, the real fix once a rejection is shown."""
    rejected = "Already tried and rejected" in messages[-1]["content"]
    return json.dumps({"edits": [GOOD if rejected else NOISE]})


def faulty_lm(
    respond: Any, *, rate: float, seed: int, kinds: Sequence[Any], retries: int, sleeps: list[float]
) -> tuple[LM, FaultyBackend]:
    backend = FaultyBackend(
        ScriptedLM(respond), rate=rate, seed=seed, kinds=kinds, retry_after_s=RETRY_AFTER_S
    )
    client = LM(
        backend,
        max_retries=retries,
        backoff_max_s=4.0,  # so only a Retry-After can ask for RETRY_AFTER_S
        sleep=sleeps.append,
        rng=random.Random(seed),
    )
    return client, backend


def compile_with(
    target: LM | ScriptedLM,
    reflector: LM | ScriptedLM,
    threads: int = 1,
    gate: sd.Gate | None = None,
    one_by_one: bool = False,
) -> Any:
    # one_by_one: every proposal that passes its own mini-batch screen goes to the gate alone
    settings: dict[str, Any] = {
        "compose": 1, "confirm_steps": 0, "min_net": 1.0, "submit_at_net": 0.0
    }  # fmt: skip
    optimizer = GradientText(
        proposers=[ReflectiveProposer(read_successes=False)], epochs=2, batch_size=8,
        **(settings if one_by_one else {}),
    )  # fmt: skip
    return sd.compile(
        Parity(), TRAIN, VAL, optimizer=optimizer, lm=target, optimizer_lm=reflector,
        threads=threads, gate=gate,
    )  # fmt: skip


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_compile_completes_and_every_fault_is_counted(seed: int) -> None:
    sleeps: list[float] = []
    target, target_faults = faulty_lm(
        parity_target, rate=0.3, seed=seed, kinds=RAISING, retries=6, sleeps=sleeps
    )
    reflector, reflector_faults = faulty_lm(
        reflector_respond, rate=0.3, seed=seed, kinds=RAISING, retries=6, sleeps=sleeps
    )
    result = compile_with(target, reflector, threads=4)
    usage = result.usage
    raised = target_faults.raised + reflector_faults.raised
    assert raised > 10, "the fake really injected faults"
    assert usage.retries + usage.errors == raised
    assert sum(usage.error_types.values()) == raised
    assert set(usage.error_types) <= {"InjectedServerError", "InjectedTimeout", "InjectedRateLimit"}
    assert usage.errors == 0, "with 6 retries at a 30% fault rate every call finally succeeds"
    rate_limited = usage.error_types.get("InjectedRateLimit", 0)
    assert sum(1 for s in sleeps if s >= RETRY_AFTER_S) == rate_limited, "Retry-After honoured"
    assert result.stop_reason == "perfect"  # validation is perfect: nothing left to certify
    assert result.val_score == 1.0 and "divisible by 2" in result.best_skill.text


def test_completion_faults_reach_the_parser_and_are_scored_not_raised() -> None:
    kinds = ("empty", "garbage", "overlong")
    target, faults = faulty_lm(parity_target, rate=0.5, seed=3, kinds=kinds, retries=0, sleeps=[])
    report = sd.evaluate(Parity(), VAL + TRAIN, lm=target, threads=4, progress=False)
    assert sum(faults.injected.values()) > 5
    assert report.n_errors == 0 and target.ledger.snapshot().errors == 0
    assert all(0.0 <= r.score <= 1.0 for r in report.records)
    assert report.summary()["parse_failures"] >= faults.injected["empty"]


def test_fault_injection_is_deterministic_under_its_seed() -> None:
    def run_once() -> tuple[dict[str, int], list[dict[str, Any]]]:
        target, faults = faulty_lm(parity_target, rate=0.4, seed=5, kinds=RAISING, retries=1,
                                   sleeps=[])  # fmt: skip
        reflector = ScriptedLM(reflector_respond, model="scripted/reflector")
        result = compile_with(target, reflector, threads=4)
        return dict(faults.injected), [d.to_dict() for d in result.gate_log]

    assert run_once() == run_once()


def persistent_incumbent_failures(seed_text: str, failing: set[int]) -> Any:
    """A target that always fails (non-transient) for the seed skill on `failing` numbers.
    "Be brief." makes it right on the training numbers (< 100) only: NOISE passes the training
    screen and reaches the gate, where it changes nothing."""

    def respond(messages: list[dict[str, str]]) -> str:
        number = int(messages[-1]["content"])
        if messages[0]["content"] == seed_text and number in failing:
            raise InjectedServerError("persistent outage for this prompt")
        if NOISE["text"] in messages[0]["content"] and number < 100:
            return "even" if number % 2 == 0 else "odd"
        return parity_target(messages)

    return respond


def test_incumbent_errors_never_make_a_candidate_win() -> None:
    # The seed answers "odd" for everything: right on the 15 odd validation numbers (0.5).
    # "Be brief." changes nothing on validation, so the NOISE candidate's true score there is
    # also 0.5. Failing the seed's calls on two odd numbers drops the incumbent to 13/30 (both
    # of its rollouts fail there, since the failure is tied to the prompt): if errors
    # counted for the candidate, NOISE would "win" 0.5 > 13/30. It must be rejected as a tie;
    # GOOD still wins. NOISE helps on training only, so it passes its screen; each proposal
    # that passes goes to the gate alone (compose=1, confirm_steps=0).
    respond = persistent_incumbent_failures(Parity().seed_skill.text, {101, 103})
    target = LM(ScriptedLM(respond), max_retries=2, sleep=lambda s: None)
    reflector = ScriptedLM(reflector_respond, model="scripted/reflector")
    # No looks: the candidate is scored on the failing examples too, whatever the look order.
    result = compile_with(target, reflector, gate=sd.Gate(looks=()), one_by_one=True)
    assert result.seed_val_score == pytest.approx(13 / 30)
    first = result.gate_log[0]
    assert "Be brief." in result.history[0].edit_report[0]["edit"]["text"]
    assert not first.accepted, f"accepted because of incumbent errors: {first.reason}"
    assert first.candidate_score == pytest.approx(13 / 30)
    assert result.improved and "divisible by 2" in result.best_skill.text
    assert "Be brief." not in result.best_skill.text
    assert result.usage.errors == 2, "two failing examples, the seed scored once, none hidden"


@pytest.mark.parametrize("seed", range(6))
def test_flaky_model_never_gets_a_no_op_edit_accepted(seed: int) -> None:
    # With one retry at a 35% fault rate, ~12% of calls fail for good, on the incumbent and the
    # candidates alike. NOISE never truly improves anything: it must never pass the gate.
    target, faults = faulty_lm(parity_target, rate=0.35, seed=seed, kinds=RAISING, retries=1,
                               sleeps=[])  # fmt: skip
    reflector = ScriptedLM(reflector_respond, model="scripted/reflector")
    result = compile_with(target, reflector, threads=2)
    assert result.usage.errors > 0 or faults.raised > 0
    steps = {h.candidate_hash: h for h in result.history if h.candidate_hash}
    for decision in result.gate_log:
        if decision.accepted:
            edits = json.dumps(steps[decision.candidate_hash].edit_report)
            assert "Be brief." not in edits, f"a no-op edit was accepted: {decision.reason}"


def rollout(example_id: str, score: float, error: str | None = None) -> Rollout:
    prediction = Prediction({"answer": None}, raw="", error=error)
    return Rollout(example_id=example_id, output="", prediction=prediction, score=score,
                   error=error)  # fmt: skip


def report(scores: Sequence[float], errors: Sequence[int] = (), skill: str = "s") -> Any:
    records = tuple(
        rollout(f"e{i}", 0.0 if i in errors else s, "boom" if i in errors else None)
        for i, s in enumerate(scores)
    )
    return EvaluationReport(records, skill_hash=skill, model="m")


def test_gate_rule_on_errored_rollouts() -> None:
    gate = sd.Gate.mean_only()  # the credit rule is under test here, not significance
    # Incumbent failed on e0 and e1: the candidate gets no credit there, so 1 vs 1 on the rest.
    tie = gate.decide(report([1, 1, 1, 0], skill="c"), report([1, 1, 1, 0], errors=[0, 1]))
    assert not tie.accepted and tie.candidate_score == pytest.approx(0.25)
    # A real gain on examples both answered still passes.
    gain = gate.decide(report([1, 1, 1, 1], skill="c"), report([1, 1, 1, 0], errors=[0]))
    assert gain.accepted and gain.delta == pytest.approx(0.25)
    # The candidate's own errors count 0 for it: they can only hurt.
    hurt = gate.decide(report([1, 1, 1, 1], errors=[0, 1], skill="c"), report([1, 1, 1, 0]))
    assert not hurt.accepted and hurt.delta == pytest.approx(-0.25)
