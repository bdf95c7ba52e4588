"""DSPy programs as they are written (issue 52): every model call a program or its metric can
make is under the budget, a judge under `dspy.context(lm=judge)` works, repeated attempts are
distinct samples, `acall` programs run. Targets are FAKEs: an OpenAI-compatible server that
counts requests (`FakeOpenAIServer`); the reflection model answers "no edits".
"""

from __future__ import annotations

import asyncio
import re
import threading
from collections import Counter
from typing import Any

import pytest

dspy = pytest.importorskip("dspy", reason="needs the [dspy] extra: pip install -e '.[dspy]'")

from skillopt_dsl.dspy import SkillOptimizer, evaluate_program  # noqa: E402
from skillopt_dsl.errors import UserInputError  # noqa: E402
from skillopt_dsl.lm import LM, Budget, ResponseCache  # noqa: E402
from skillopt_dsl.optimizers import DemonstrationsProposer, GradientText  # noqa: E402
from skillopt_dsl.testing.fake_server import FakeOpenAIServer  # noqa: E402
from tests.test_dspy_shapes import model, serve  # noqa: E402

BUDGET = 40


@pytest.fixture(autouse=True)
def no_global_dspy_lm() -> Any:
    with dspy.context(lm=None, adapter=None):
        yield


def small() -> GradientText:
    return GradientText(lr=1.0, epochs=1, batch_size=4)


def other_lm(server: Any, name: str = "other") -> Any:
    """A second model the program reaches on its own (a plain `dspy.LM`, DSPy's cache off so
    that every call it makes would reach the server)."""
    return dspy.LM(f"openai/{name}", api_base=server.url, api_key="fake", cache=False)


def sums(start: int, count: int) -> list[Any]:
    return [
        dspy.Example(question=f"what is {n} plus 1?", answer=str(n + 1)).with_inputs("question")
        for n in range(start, start + count)
    ]


def add_one(system: str, inputs: dict[str, str], wanted: list[str]) -> dict[str, Any]:
    numbers = re.findall(r"\d+", inputs.get("question", inputs.get("_body", "0"))) or ["0"]
    value = str(int(numbers[0]) + 1)
    if "verdict" in wanted:
        return {"verdict": inputs.get("answer") == inputs.get("gold")}
    return {k: value for k in wanted}


def exact(gold: Any, pred: Any, trace: Any = None) -> float:
    return float(str(pred.answer).strip() == str(gold.answer))


class TwoModels(dspy.Module):
    """A draft step on the program's model, a check step on a model of its own, given as
    `dspy.context(lm=...)` inside `forward` or as the call's `lm=` keyword."""

    def __init__(self, second: Any, how: str) -> None:
        super().__init__()
        self.draft = dspy.Predict("question -> answer")
        self.check = dspy.Predict("question, draft -> answer")
        self.second, self.how = second, how

    def forward(self, question: str) -> Any:
        draft = self.draft(question=question).answer
        if self.how == "keyword":
            return self.check(question=question, draft=draft, lm=self.second)
        with dspy.context(lm=self.second):
            return self.check(question=question, draft=draft)


def compiled_usage(server: Any, program: Any, metric: Any = exact, **options: Any) -> Any:
    tele = SkillOptimizer(
        metric, optimizer=small(), lm=model(server), budget=Budget(max_calls=BUDGET), **options
    )
    compiled = tele.compile(program, trainset=sums(1, 8), valset=sums(21, 8))
    return compiled.skillopt


@pytest.mark.parametrize("how", ["context", "keyword"])
def test_a_step_with_its_own_model_is_under_the_budget(how: str) -> None:
    """Kills: a step's own model (`dspy.context(lm=...)` in `forward`, or `lm=` on the call)
    reaching the provider past the bridge: 76 requests for `max_calls=40`, 24 reported (the
    route in `skillopt_dsl.dspy.route` made a pass-through)."""
    with serve(add_one) as server:
        result = compiled_usage(server, TwoModels(other_lm(server), how))
        assert server.requests <= BUDGET
        assert server.requests == result.usage.calls
        models = Counter(str(body["model"]) for body in server.bodies)
        assert models["other"] > 0  # the step's own model was reached, through the bridge


def test_two_step_adapter_extraction_model_is_under_the_budget() -> None:
    """Kills: `TwoStepAdapter(extraction_model=...)`'s second call bypassing the budget (61
    requests at 40, 29 reported)."""
    with serve(add_one) as server:
        adapter = dspy.TwoStepAdapter(other_lm(server, "extractor"))
        result = compiled_usage(server, dspy.Predict("question -> answer"), adapter=adapter)
        assert server.requests <= BUDGET
        assert server.requests == result.usage.calls
        assert any(body["model"] == "extractor" for body in server.bodies)


def test_a_judge_metric_under_dspy_context_works_and_is_under_the_budget() -> None:
    """Kills: the metric run outside the caller's context (`MetricError ... No LM is
    loaded` under `with dspy.context(lm=judge)`), and a judge's calls neither counted nor
    capped (65 requests at 40)."""

    class Verdict(dspy.Signature):
        """Is the answer the gold answer?"""

        question: str = dspy.InputField()
        answer: str = dspy.InputField()
        gold: str = dspy.InputField()
        verdict: bool = dspy.OutputField()

    def judged(gold: Any, pred: Any, trace: Any = None) -> float:
        check = dspy.Predict(Verdict)
        return float(check(question=gold.question, answer=pred.answer, gold=gold.answer).verdict)

    with serve(add_one) as server:
        with dspy.context(lm=other_lm(server, "judge")):
            result = compiled_usage(server, dspy.Predict("question -> answer"), judged)
        assert result.seed_val_score == 1.0  # the judge said yes: it was reached and parsed
        assert server.requests <= BUDGET
        assert server.requests == result.usage.calls
        assert any(body["model"] == "judge" for body in server.bodies)


def test_an_lm_the_bridge_cannot_carry_is_refused_before_any_call() -> None:
    """Kills: a custom `BaseLM` subclass held by the program called unbudgeted, or refused
    only after the run had spent."""

    class Homemade(dspy.BaseLM):
        def forward(self, prompt: Any = None, messages: Any = None, **kwargs: Any) -> Any:
            raise AssertionError("never called")

    program = TwoModels(Homemade("homemade"), "context")
    with serve(add_one) as server:
        with pytest.raises(UserInputError, match=r"TwoModels\.second .*cannot route"):
            compiled_usage(server, program)
        assert server.requests == 0


# -- sampling -----------------------------------------------------------------------------


def second_try_right() -> Any:
    """A FAKE whose first answer to a prompt is wrong and every later one right (a sampling
    model that gets there on a second attempt)."""
    seen: Counter[str] = Counter()
    lock = threading.Lock()

    def policy(system: str, inputs: dict[str, str], wanted: list[str]) -> dict[str, Any]:
        with lock:
            seen[inputs["_body"]] += 1
            first = seen[inputs["_body"]] == 1
        right = add_one(system, inputs, wanted)
        return {k: "wrong" if first else v for k, v in right.items()}

    return policy


def test_best_of_n_attempts_are_distinct_samples_cached_as_such() -> None:
    """Kills: every `dspy.BestOfN` attempt answered from the cache with the first reply
    (validation 0 where `dspy.Evaluate` measures 1.0: the seed of attempts beyond the first
    left unchanged in `BridgeEngine.complete`), and a rerun paying again for its samples."""
    program = dspy.BestOfN(
        dspy.Predict("question -> answer"),
        N=3,
        reward_fn=lambda args, pred: float(pred.answer != "wrong"),
        threshold=1.0,
    )
    with serve(second_try_right()) as server:
        lm = LM("openai/fake-target", api_base=server.url, max_retries=0, cache=ResponseCache())
        report = evaluate_program(program, sums(1, 6), exact, lm=lm)
        assert report.mean == 1.0
        sent = server.requests
        assert sent == 12  # two attempts per row, each a request of its own
        again = evaluate_program(program, sums(1, 6), exact, lm=lm)
        assert again.mean == 1.0 and server.requests == sent


def test_refine_attempts_are_distinct_samples() -> None:
    """Kills: `dspy.Refine`'s second attempt (a new `rollout_id` at temperature 1.0) answered
    from the cache with the first reply (scored 0 where `dspy.Evaluate` measures 1.0)."""
    program = dspy.Refine(
        dspy.Predict("question -> answer"),
        N=3,
        reward_fn=lambda args, pred: float(pred.answer != "wrong"),
        threshold=1.0,
    )
    with serve(second_try_right()) as server:
        lm = LM("openai/fake-target", api_base=server.url, max_retries=0, cache=ResponseCache())
        report = evaluate_program(program, sums(1, 4), exact, lm=lm, threads=1)
        assert report.mean == 1.0


def test_n_candidates_are_distinct_samples() -> None:
    """Kills: an `n=3` call's three requests collapsed into one cached reply (the candidate
    index left out of the sample seed)."""

    class AnyOfThree(dspy.Module):
        def __init__(self) -> None:
            super().__init__()
            self.guess = dspy.Predict("question -> answer", n=3)

        def forward(self, question: str) -> Any:
            answers = self.guess(question=question).completions.answer
            return dspy.Prediction(answer=next((a for a in answers if a != "wrong"), "wrong"))

    with serve(second_try_right()) as server:
        lm = LM("openai/fake-target", api_base=server.url, max_retries=0, cache=ResponseCache())
        report = evaluate_program(AnyOfThree(), sums(1, 4), exact, lm=lm)
        assert report.mean == 1.0
        assert server.requests == 12


# -- async programs -----------------------------------------------------------------------


class Gathered(dspy.Module):
    """A `forward` that runs two sub-calls at once with `acall` and `asyncio.gather`."""

    def __init__(self) -> None:
        super().__init__()
        self.first = dspy.Predict("question -> answer")
        self.second = dspy.Predict("question -> answer")

    def forward(self, question: str) -> Any:
        async def both() -> list[Any]:
            return list(
                await asyncio.gather(
                    self.first.acall(question=question), self.second.acall(question=question)
                )
            )

        first, second = asyncio.run(both())
        return dspy.Prediction(answer=first.answer if first.answer == second.answer else "?")


def test_an_acall_program_compiles_under_the_budget() -> None:
    """Kills: the bridge without an async engine (`acall` refused as "fix the program")."""
    with serve(add_one) as server:
        result = compiled_usage(server, Gathered())
        assert result.seed_val_score == 1.0
        assert server.requests <= BUDGET
        assert server.requests == result.usage.calls


def test_the_route_leaves_dspy_alone_outside_a_run() -> None:
    """Kills: the wrapped `execute` sending a plain DSPy call (no skillopt run) through a
    bridge, or refusing it."""
    with serve(add_one) as server:
        with dspy.context(lm=other_lm(server)):
            answer = dspy.Predict("question -> answer")(question="what is 4 plus 1?").answer
        assert answer == "5" and server.requests == 1


def test_a_bridged_lm_outside_a_run_samples_too() -> None:
    """Kills: sample seeds only inside a `SkillOptimizer` run (a user's `bridge_lm` under
    `dspy.BestOfN` collapsing to one reply)."""
    from skillopt_dsl.dspy import bridge_lm

    with serve(second_try_right()) as server:
        lm = LM("openai/fake-target", api_base=server.url, max_retries=0)
        program = dspy.BestOfN(
            dspy.Predict("question -> answer"),
            N=2,
            reward_fn=lambda args, pred: float(pred.answer != "wrong"),
            threshold=1.0,
        )
        with dspy.context(lm=bridge_lm(lm)):
            assert program(question="what is 2 plus 1?").answer == "3"
        assert server.requests == 2


# -- ChainOfThought gets labelled demos under demos=True --------------------------------------


def cot_demo_follower(messages: list[dict[str, str]]) -> str:
    """A FAKE `ChainOfThought` target that learns a code word's label only from demo turns
    (a labelled demo's reasoning reads "Not supplied") and answers "unsure" otherwise (0 % at
    the seed: no run ever succeeds, so no traced demo exists); it writes its own reasoning."""
    from tests.test_dspy_demos import demo_follower

    reply = demo_follower(messages)
    if reply.startswith("{"):
        return reply
    taught = sum(1 for m in messages[1:-1] if m["role"] == "assistant")
    if not taught or not re.search(r"\b(zorp|blick)\b", str(messages[1:-1])):
        reply = "[[ ## answer ## ]]\nunsure\n\n[[ ## completed ## ]]"
    return f"[[ ## reasoning ## ]]\nThe code word decides.\n\n{reply}"


def test_chain_of_thought_gets_labelled_demos_under_demos_true() -> None:
    """Kills: a `ChainOfThought` never given a worked example with demos on, because its
    labels do not give `reasoning` and no run ever succeeds (it stayed at 0 % where MIPROv2's
    labelled demos reach 100 %): the labelled demo, rationale left to the model, is proposed
    and gated."""
    from tests.test_dspy_demos import exact as same_label
    from tests.test_dspy_demos import reviews

    with FakeOpenAIServer(cot_demo_follower, latency_s=0.0) as server:
        tele = SkillOptimizer(
            same_label,
            optimizer=GradientText(
                lr=1.0, epochs=1, batch_size=8, proposers=[DemonstrationsProposer(per_step=2)]
            ),
            lm=LM("openai/fake-target", api_base=server.url, max_retries=0),
            budget=Budget(max_calls=150),
            threads=2,
            demos=True,
        )
        compiled = tele.compile(
            dspy.ChainOfThought("review -> answer"), trainset=reviews(0, 8), valset=reviews(8, 30)
        )
        assert server.requests == compiled.skillopt.usage.calls <= 150
    result = compiled.skillopt
    assert result.seed_val_score == 0.0 and result.val_score == 1.0
    (predictor,) = [p for _, p in compiled.named_predictors()]
    assert predictor.demos and all(d.get("reasoning") is None for d in predictor.demos)
    assert "Input:" not in predictor.signature.instructions
