"""Tool-using agents (`AgentModule`) scripted turn by turn with `ScriptedLM`.

The shared fake task: `ToolParity` asks whether a number is even or odd and has a `parity` tool.
The scripted target (`agent_target`) calls the tool only when the skill says "call parity", then
answers with the tool's result; without that rule it guesses "odd".
"""

from __future__ import annotations

import json
import time
from typing import Any, Literal

import pytest

import skillopt_dsl as sd
from skillopt_dsl.agents import (
    AgentModule,
    Environment,
    NativeToolBackend,
    Tool,
    ToolDemonstrationsProposer,
    Trajectory,
    parse_tool_calls,
)
from skillopt_dsl.agents.trajectory import CUT_ABOVE, KEEP_HEAD
from skillopt_dsl.lm import LM, Budget, ResponseCache, UsageLedger
from skillopt_dsl.testing import ScriptedLM

RULE = "Always call parity before answering."


def parity(n: int) -> str:
    """Say whether a whole number is even or odd.

    Args:
        n: the number to check.
    """
    return "even" if n % 2 == 0 else "odd"


class ToolParity(AgentModule):
    """Say whether a number is even or odd, using the parity tool."""

    number: str = sd.InputField()
    answer: Literal["even", "odd"] = sd.OutputField()

    skill = "Answer with one word."
    tools = (parity,)
    max_turns = 4
    metric = sd.metrics.exact_match("answer")


def examples(start: int, count: int) -> list[sd.Example]:
    return [
        sd.Example(f"n{i}", {"number": str(i)}, {"answer": "even" if i % 2 == 0 else "odd"})
        for i in range(start, start + count)
    ]


def call(name: str, **arguments: Any) -> str:
    return "```json\n" + json.dumps({"tool": name, "arguments": arguments}) + "\n```"


def agent_target(messages: list[dict[str, str]]) -> str:
    """Calls parity when the skill says so, then answers with the result; else guesses odd."""
    last = messages[-1]["content"]
    if last.startswith("Result of parity: "):
        return last.removeprefix("Result of parity: ")
    system = messages[0]["content"] if messages[0]["role"] == "system" else ""
    number = int(last.split("\n")[0])
    return call("parity", n=number) if "call parity" in system else "odd"


def run_one(
    module: AgentModule, respond: Any, example: sd.Example | None = None, **lm_kwargs: Any
) -> tuple[sd.RunOutcome, ScriptedLM, LM]:
    fake = ScriptedLM(respond)
    lm = LM(fake, **lm_kwargs)
    chosen = example or examples(3, 1)[0]
    return module.run(module.seed_skill, chosen, lm, seed=0), fake, lm


# -- tools -------------------------------------------------------------------------------------


def test_tool_schema_comes_from_signature_and_docstring() -> None:
    """Kills: a schema written by hand or dropping the docstring's parameter descriptions,
    the required list or the types (the model would see a schema the validator does not use)."""

    def convert(amount: float, unit: Literal["km", "mi"] = "km") -> float:
        """Convert a distance.

        Args:
            amount: how far.
            unit: the unit of `amount`.
        """
        return amount

    schema = Tool.from_function(convert).schema()["function"]
    assert schema["name"] == "convert" and schema["description"] == "Convert a distance."
    props = schema["parameters"]["properties"]
    assert props["amount"] == {"type": "number", "description": "how far."}
    assert props["unit"]["enum"] == ["km", "mi"] and props["unit"]["default"] == "km"
    assert schema["parameters"]["required"] == ["amount"]


def test_unannotated_tool_parameter_is_a_clear_error() -> None:
    """Kills: silently typing an unannotated parameter as Any (no validation, vague schema)."""

    def bad(x):  # type: ignore[no-untyped-def]
        return x

    with pytest.raises(sd.UserInputError, match="has no type annotation"):
        Tool.from_function(bad)


# -- the loop ----------------------------------------------------------------------------------


def test_tool_results_reach_the_model_and_every_turn_is_a_counted_call() -> None:
    """Kills: not sending the tool result back, counting a trajectory as one call, or losing
    the tool calls from the trajectory."""
    module = ToolParity(skill=RULE)
    outcome, fake, lm = run_one(module, agent_target, examples(7, 1)[0])
    assert outcome.prediction.answer == "odd" and outcome.calls == 2
    assert fake.calls[1][-1] == {"role": "user", "content": "Result of parity: odd"}
    assert fake.calls[1][-2]["role"] == "assistant" and "parity" in fake.calls[1][-2]["content"]
    assert lm.ledger.snapshot().calls == 2
    trajectory = outcome.trace
    assert isinstance(trajectory, Trajectory) and trajectory.stop_reason == "answered"
    (tool_call,) = trajectory.tool_calls
    assert (tool_call.name, dict(tool_call.arguments), tool_call.result) == (
        "parity",
        {"n": 7},
        "odd",
    )
    assert trajectory.messages[-1]["content"] == "Result of parity: odd"
    assert outcome.prompt_tokens == sum(
        sum(len(m["content"].split()) for m in request) for request in fake.calls
    )


def test_tool_faults_go_back_to_the_model_and_the_run_continues() -> None:
    """Kills: a raising tool, an unknown tool or a wrongly typed argument ending the run (or
    raising into the optimizer) instead of returning the error as the tool's result."""

    def explode(n: int) -> str:
        """Always fails."""
        raise RuntimeError("disk on fire")

    script = iter([call("explode", n=1), call("nope"), call("parity", n="seven"), "even"])
    module = ToolParity(tools=[parity, explode])
    outcome, fake, _ = run_one(module, lambda m: next(script))
    results = [c.result for c in outcome.trace.tool_calls]
    assert "RuntimeError: disk on fire" in results[0]
    assert "no tool named 'nope'" in results[1] and "parity" in results[1]
    assert "bad arguments for tool 'parity'" in results[2] and "n:" in results[2]
    assert all(not c.ok for c in outcome.trace.tool_calls)
    assert fake.calls[3][-1]["content"] == f"Result of parity: {results[2]}"
    assert outcome.prediction.answer == "even" and outcome.calls == 4


def test_a_hanging_tool_is_cut_off_and_the_run_goes_on() -> None:
    """Kills: calling the tool without a time limit (one hung tool would hang the compile)."""

    def slow(n: int) -> str:
        """Hangs."""
        time.sleep(5)
        return "late"

    script = iter([call("slow", n=1), "odd"])
    module = ToolParity(tools=[parity, Tool.from_function(slow, timeout_s=0.2)])
    started = time.perf_counter()
    outcome, _, _ = run_one(module, lambda m: next(script))
    assert time.perf_counter() - started < 4.0  # the tool itself would take 5 s
    assert "timed out after 0.2 s" in outcome.trace.tool_calls[0].result
    assert outcome.prediction.answer == "odd"


def test_a_loop_that_never_answers_stops_at_max_turns() -> None:
    """Kills: an unbounded loop, or an off-by-one in max_turns (exactly max_turns calls)."""
    module = ToolParity(max_turns=3)
    outcome, fake, _ = run_one(module, lambda m: call("parity", n=2))
    assert len(fake.calls) == 3 and outcome.calls == 3
    assert outcome.trace.stop_reason == "max_turns"
    assert "max_turns=3" in (outcome.prediction.error or "")
    score = module.score(examples(3, 1)[0], outcome)
    assert score.value == 0.0


def test_budget_stop_mid_trajectory_is_exact() -> None:
    """Kills: checking the budget once per example instead of before every turn (a long
    trajectory would overspend) or swallowing BudgetExceeded inside the loop."""
    fake = ScriptedLM(lambda m: call("parity", n=2))
    lm = LM(fake, ledger=UsageLedger(Budget(max_calls=3)))
    with pytest.raises(sd.BudgetExceeded):
        sd.evaluate(ToolParity(max_turns=5), examples(0, 1), lm=lm, threads=1)
    assert len(fake.calls) == 3 and lm.ledger.snapshot().calls == 3


def test_the_response_cache_replays_a_whole_trajectory_for_free() -> None:
    """Kills: a non-deterministic transcript (e.g. a timestamp in a result) that misses the cache on
    the second and later turns, or counting cache hits as spent calls."""
    cache = ResponseCache()
    fake = ScriptedLM(agent_target)
    first = LM(fake, cache=cache)
    module = ToolParity(skill=RULE)
    report = sd.evaluate(module, examples(0, 4), lm=first, threads=2)
    assert report.mean == 1.0 and len(fake.calls) == 8
    again = LM(fake, cache=cache)
    replay = sd.evaluate(module, examples(0, 4), lm=again, threads=2)
    assert len(fake.calls) == 8, "the replay sent nothing"
    assert all(r.cached for r in replay.records) and replay.mean == 1.0
    snapshot = again.ledger.snapshot()
    assert (snapshot.calls, snapshot.cache_hits) == (0, 8)


def test_metric_with_trace_receives_the_whole_trajectory() -> None:
    """Kills: scoring agents on the final prediction only (a metric could not check that the
    tool was used, with which arguments, or the final state)."""
    seen: list[Trajectory] = []

    def used_the_tool(example: sd.Example, prediction: sd.Prediction, trace: Any = None) -> float:
        seen.append(trace)
        return 1.0 if any(c.name == "parity" for c in trace.tool_calls) else 0.0

    module = ToolParity(skill=RULE, metric=used_the_tool)
    report = sd.evaluate(module, examples(0, 2), lm=ScriptedLM(agent_target), threads=1)
    assert report.mean == 1.0 and len(seen) == 2
    assert seen[0].answer in ("even", "odd") and seen[0].tool_calls[0].arguments == {"n": 0}
    no_rule = sd.evaluate(
        ToolParity(metric=used_the_tool), examples(0, 2), lm=ScriptedLM(agent_target), threads=1
    )
    assert no_rule.mean == 0.0


class Counter(Environment[dict[str, int]]):
    """A counter the agent must bring to the example's target."""

    def reset(self, example: sd.Example) -> dict[str, int]:
        return {"value": 0}

    def tools(self, state: dict[str, int]) -> list[Any]:
        def add(k: int) -> int:
            """Add k to the counter; returns the new value."""
            state["value"] += k
            return state["value"]

        return [add]

    def check(self, example: sd.Example, state: dict[str, int]) -> sd.Score:
        target = int(example.labels["target"])
        return sd.Score(float(state["value"] == target), f"counter {state['value']}, want {target}")


class CountTo(AgentModule):
    """Bring the counter to the target."""

    target: str = sd.InputField()
    answer: str = sd.OutputField()
    environment = Counter()
    max_turns = 3


def test_environment_gives_each_example_fresh_state_and_checks_the_final_state() -> None:
    """Kills: sharing one state across examples (parallel rollouts would add up), or scoring
    the answer text instead of the final state when the module has no metric."""

    def add_target(messages: list[dict[str, str]]) -> str:
        if messages[-1]["content"].startswith("Result of add"):
            return "done"
        return call("add", k=int(messages[-1]["content"].split("\n")[0]))

    data = [sd.Example(f"t{i}", {"target": str(i)}, {"target": i}) for i in (2, 5, 7)]
    report = sd.evaluate(CountTo(), data, lm=ScriptedLM(add_target), threads=3)
    assert report.mean == 1.0
    assert [r.trace.final_state for r in report.records] == [{"value": v} for v in (2, 5, 7)]
    wrong = sd.evaluate(CountTo(), data, lm=ScriptedLM(lambda m: "done"), threads=1)
    assert wrong.mean == 0.0 and "counter 0, want 2" in (wrong.records[0].feedback or "")


# -- the text protocol -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('```json\n{"tool": "parity", "arguments": {"n": 4}}\n```', [("parity", {"n": 4})]),
        ('Sure. {"name": "parity", "args": {"n": 4}} is my call', [("parity", {"n": 4})]),
        ("```\n{'tool': 'parity', 'arguments': {'n': 4},}\n```", [("parity", {"n": 4})]),
        ('{"function": "parity", "parameters": "{\\"n\\": 4}"}', [("parity", {"n": 4})]),
        ('{"tool": "parity", "n": 4}', [("parity", {"n": 4})]),
        ("I will run parity(n=4) now", [("parity", {"n": 4})]),
        ('parity("4")', [("parity", {"_positional": ["4"]})]),
        ('{"tool": "ghost", "arguments": {}}', [("ghost", {})]),
        ("The answer is even.", []),
        ('{"answer": "even"}', []),
        ("compute(n=4)", []),
    ],
)
def test_tolerant_parser(text: str, expected: list[tuple[str, dict[str, Any]]]) -> None:
    """Kills: a strict parser that ignores the sloppy-but-clear calls small models write, or one
    so loose that an answer (plain text, a JSON answer, an unknown Python call) runs a tool."""
    found = [(c.name, dict(c.arguments)) for c in parse_tool_calls(text, {"parity"})]
    assert found == expected


def test_positional_python_call_is_bound_and_validated() -> None:
    """Kills: dropping positional arguments of a Python-style call (the tool would get none)."""
    script = iter(['parity("4")', "even"])
    outcome, _, _ = run_one(ToolParity(), lambda m: next(script))
    assert outcome.trace.tool_calls[0].result == "even"


# -- reflection --------------------------------------------------------------------------------


def test_compact_rendering_cuts_long_results_by_the_stated_rule_and_marks_the_failing_step() -> (
    None
):
    """Kills: pasting whole tool outputs into the reflection prompt, or not marking where the
    run went wrong."""

    def dump(n: int) -> str:
        """Returns a lot."""
        return "x" * 1000

    script = iter([call("dump", n=1), call("nope"), "even"])
    outcome, _, _ = run_one(ToolParity(tools=[parity, dump]), lambda m: next(script))
    text = outcome.trace.render_for_reflection()
    first, second, last = text.splitlines()
    assert f"[{1000 - KEEP_HEAD - 40} chars cut]" in first and len(first) < CUT_ABOVE + 80
    assert second.startswith(">> 2. call nope(") and "ERROR there is no tool" in second
    assert last.startswith("   3. answered 'even'")


def test_reflective_proposer_shows_failed_trajectories() -> None:
    """Kills: removing the proposers' trajectory hook (the optimizer model would see only the
    final answer and could not write procedures such as 'call parity first')."""
    prompts: list[str] = []

    def reflector(messages: list[dict[str, str]]) -> str:
        prompts.append(messages[-1]["content"])
        return json.dumps({"edits": []})

    script = iter([call("parity", n=3), "even"])
    outcome, _, _ = run_one(ToolParity(), lambda m: next(script))
    rollout = sd.Rollout("n3", outcome.output, outcome.prediction, 0.0, trace=outcome.trace)
    request = sd.optimizers.ProposalRequest(
        module=ToolParity(),
        skill=sd.Skill("Answer with one word."),
        batch=examples(3, 1),
        rollouts=[rollout],
        trainset=examples(3, 1),
        rejected=[],
        optimizer_lm=LM(ScriptedLM(reflector)),
        rng=__import__("random").Random(0),
        budget_tokens=100,
    )
    sd.optimizers.ReflectiveProposer(read_successes=False).propose(request)
    assert '1. call parity({"n": 3}) -> odd' in prompts[0]
    assert ">> 2. answered 'even'" in prompts[0]


def test_tool_demonstrations_teach_the_call_format_and_pass_the_gate() -> None:
    """Kills: worked examples that omit the tool call or its real result (a model copying them
    learns to answer without the tool), or an agent compile that bypasses the gate."""

    class Lookup(ToolParity):
        skill = "Answer with one word."

    def copies_demos(messages: list[dict[str, str]]) -> str:
        system = messages[0]["content"] if messages[0]["role"] == "system" else ""
        taught = '{"tool": "parity", "arguments": {"n":' in system and "Result of parity" in system
        return agent_target(
            [{"role": "system", "content": "call parity" if taught else ""}, *messages[1:]]
        )

    def with_calls(items: list[sd.Example]) -> list[sd.Example]:
        return [
            sd.Example(
                e.id,
                e.inputs,
                {
                    **e.labels,
                    "tool_calls": [{"tool": "parity", "arguments": {"n": int(e.inputs["number"])}}],
                },
            )
            for e in items
        ]

    result = sd.compile(
        Lookup(),
        with_calls(examples(0, 8)),
        with_calls(examples(100, 40)),
        optimizer=sd.optimizers.GradientText(
            proposers=[ToolDemonstrationsProposer(per_step=1)], epochs=1, batch_size=8, lr=1.0
        ),
        lm=ScriptedLM(copies_demos),
        optimizer_lm=ScriptedLM(lambda m: "{}", model="scripted/unused"),
        threads=4,
    )
    assert result.seed_val_score == 0.5 and result.val_score == 1.0
    assert result.improved and all(d.delta > 0 for d in result.gate_log if d.accepted)
    assert "Result of parity: " in result.best_skill.text and "```json" in result.best_skill.text


# -- native tool calling -----------------------------------------------------------------------


def test_native_tool_calls_round_trip_through_litellm(monkeypatch: pytest.MonkeyPatch) -> None:
    """Kills: dropping `tools=` from the request, sending tool results as plain user text, or
    losing native tool-call ids (providers reject a tool message without its call id)."""
    import litellm

    requests: list[dict[str, Any]] = []

    def fake_completion(**request: Any) -> Any:
        requests.append(request)
        if request["messages"][-1]["role"] == "tool":
            message = {"role": "assistant", "content": request["messages"][-1]["content"]}
        else:
            message = {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_abc",
                        "type": "function",
                        "function": {"name": "parity", "arguments": '{"n": 9}'},
                    }
                ],
            }
        return litellm.ModelResponse(
            choices=[{"index": 0, "message": message, "finish_reason": "stop"}],
            usage={"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7},
        )

    monkeypatch.setattr(litellm, "completion", fake_completion)
    lm = LM(NativeToolBackend("openai/gpt-4o-mini"))
    module = ToolParity()
    outcome = module.run(module.seed_skill, examples(9, 1)[0], lm, seed=0)
    assert outcome.prediction.answer == "odd" and outcome.calls == 2
    assert requests[0]["tools"][0]["function"]["name"] == "parity"
    assert "You can call these tools" not in requests[0]["messages"][-1]["content"]
    assistant, tool_message = requests[1]["messages"][-2:]
    assert assistant["tool_calls"][0]["id"] == "call_abc" and assistant["content"] is None
    assert tool_message == {
        "role": "tool",
        "content": "odd",
        "tool_call_id": "call_abc",
        "name": "parity",
    }


def test_native_protocol_without_a_native_backend_is_a_clear_error() -> None:
    """Kills: silently falling back to the text protocol when native was asked for."""
    module = ToolParity(protocol="native")
    with pytest.raises(sd.UserInputError, match="NativeToolBackend"):
        module.run(module.seed_skill, examples(1, 1)[0], LM(ScriptedLM(lambda m: "odd")), seed=0)


def test_an_agent_without_tools_or_environment_is_refused() -> None:
    """Kills: building an agent that can never act (every run a silent zero)."""
    with pytest.raises(sd.UserInputError, match="no tools and no environment"):
        ToolParity(tools=[])


# -- export ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("agent", "relative", "front"),
    [
        ("claude", "tool-parity/SKILL.md", {"name", "description", "metadata"}),
        ("codex", "tool-parity/SKILL.md", {"name", "description"}),
        ("agents-md", "AGENTS.md", None),
    ],
)
def test_agent_skill_export_writes_each_agents_layout(
    tmp_path: Any, agent: Any, relative: str, front: set[str] | None
) -> None:
    """Kills: one front matter for every agent (Codex rejects unknown keys; AGENTS.md is plain
    markdown, so front matter there would reach the model as text)."""
    path = sd.export_agent_skill(
        sd.Skill(RULE),
        tmp_path,
        name="Tool Parity",
        description="Parity.",
        metadata={"val_score": 1.0},
        agent=agent,
    )
    assert path == (tmp_path / relative).resolve()
    raw = path.read_text(encoding="utf-8")
    if front is None:
        assert raw == RULE
    else:
        import yaml

        assert set(yaml.safe_load(raw.split("---\n")[1])) == front and raw.endswith(RULE)


@pytest.mark.integration
def test_the_embedded_model_runs_the_text_protocol_loop() -> None:
    """Kills: an agent loop that cannot run on the embedded default (a message shape the local
    provider rejects, or turns that bypass the ledger)."""
    from skillopt_dsl.benchmarks import load_benchmark
    from skillopt_dsl.benchmarks.table_lookup import TableLookup
    from skillopt_dsl.lm import SamplingParams

    example = load_benchmark("table_lookup", seed=0, sizes=(8, 12, 12)).val[0]
    lm = LM("local/smollm2-135m", params=SamplingParams(max_tokens=48))
    report = sd.evaluate(TableLookup(max_turns=2), [example], lm=lm, threads=1)
    (record,) = report.records
    assert record.error is None and isinstance(record.trace, Trajectory)
    assert 1 <= record.trace.n_turns <= 2 == record.trace.max_turns
    assert lm.ledger.snapshot().calls == record.trace.n_turns


def test_native_backend_sends_every_sampling_parameter(monkeypatch: pytest.MonkeyPatch) -> None:
    """Kills: the native tool backend building its own request without the sampling
    parameters the cache key holds (top_p, stop): two keys, one answer."""
    import litellm

    from skillopt_dsl.lm import SamplingParams

    requests: list[dict[str, Any]] = []

    def fake_completion(**request: Any) -> Any:
        requests.append(request)
        return litellm.ModelResponse(
            choices=[{"index": 0, "message": {"role": "assistant", "content": "odd"}}],
            usage={"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6},
        )

    monkeypatch.setattr(litellm, "completion", fake_completion)
    backend = NativeToolBackend("openai/gpt-4o-mini")
    backend.generate([{"role": "user", "content": "9"}], SamplingParams(top_p=0.5, stop=("END",)))
    assert requests[0]["top_p"] == 0.5 and list(requests[0]["stop"]) == ["END"]
