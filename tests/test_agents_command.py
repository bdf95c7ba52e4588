"""`CommandAgent` against the FAKE agent CLI shipped in `skillopt_dsl.testing.fake_agent_cli`.

The fake reads its skill from the workspace like Claude Code or Codex, prints their output
formats, and simulates hangs, crashes, garbage output and careless writes on demand.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

import skillopt_dsl as sd
from skillopt_dsl.agents import CommandAgent, HarnessRun
from skillopt_dsl.lm import LM, Budget, UsageLedger
from skillopt_dsl.testing import ScriptedLM, fake_agent_cli

# The fake runs as a plain script (stdlib only): fast to start, like a real CLI binary.
FAKE = [sys.executable, fake_agent_cli.__file__]
ROOT = Path(__file__).resolve().parents[1]
ENV = {"FAKE_AGENT": "1"}


def agent(fmt: str = "claude", **kwargs: Any) -> CommandAgent:
    settings: dict[str, Any] = {
        "argv": [*FAKE, "--format", fmt, "{prompt}"],
        "output": {"claude": "json", "codex": "jsonl", "text": "text"}[fmt],
        "env": ENV,
        "timeout_s": 20.0,
        "metric": sd.metrics.exact_match("answer", normalize=False),
        "skill_name": "fake-skill",
    }
    settings.update(kwargs)
    return CommandAgent(**settings)


def task(text: str, answer: str = "", **extra: Any) -> sd.Example:
    return sd.Example(f"t-{abs(hash(text)) % 10**8}", {"task": text, **extra}, {"answer": answer})


def lm(budget: Budget | None = None) -> LM:
    return LM(ScriptedLM(lambda m: "unused"), ledger=UsageLedger(budget))


def run(
    module: CommandAgent, example: sd.Example, skill: str = "", target: LM | None = None
) -> sd.RunOutcome:
    return module.run(sd.Skill(skill), example, target or lm(), seed=0)


def leftover_workspaces() -> set[str]:
    return {p.name for p in Path(tempfile.gettempdir()).glob("skillopt-agent-*")}


@pytest.mark.parametrize(("fmt", "layout"), [("claude", "claude"), ("codex", "agents-md")])
def test_the_skill_lands_where_the_agent_reads_it(fmt: str, layout: str) -> None:
    """Kills: installing the skill anywhere the agent does not look (the fake only knows how
    to upper-case when it has read 'how to upper'), or misreading either output format."""
    module = agent(fmt, layout=layout)
    outcome = run(module, task("upper: abc"), skill="This is how to upper: use capitals.")
    assert outcome.prediction.answer == "ABC"
    assert run(module, task("upper: abc")).prediction.answer == "abc"
    harness = outcome.trace
    assert isinstance(harness, HarnessRun)
    expected = ".claude/skills/fake-skill/SKILL.md" if layout == "claude" else "AGENTS.md"
    assert harness.skill_file == expected
    assert harness.prompt_tokens > 0 and harness.completion_tokens == 1


def test_harness_runs_are_budgeted_calls_with_the_reported_usage_and_cost() -> None:
    """Kills: running agent CLIs outside the ledger (a budget could not stop a harness compile)
    or dropping the usage and cost the CLI printed."""
    target = lm(Budget(max_calls=2))
    module = agent()
    data = [task(f"upper: x{i}", f"x{i}") for i in range(3)]
    with pytest.raises(sd.BudgetExceeded):
        sd.evaluate(module, data, lm=target, threads=1)
    usage = target.ledger.snapshot()
    assert usage.calls == 2 and usage.cost_usd == pytest.approx(0.0002)
    assert usage.completion_tokens == 2


def test_a_hung_agent_is_killed_with_its_process_group(tmp_path: Path) -> None:
    """Kills: waiting on a hung agent forever, or killing only the direct child (its own
    children would live on holding the machine)."""
    pidfile = tmp_path / "pids"
    module = agent(timeout_s=5.0, env={**ENV, "FAKE_AGENT_PIDFILE": str(pidfile)})
    started = time.perf_counter()
    report = sd.evaluate(module, [task("upper: a [[hang]]", "A")], lm=lm(), threads=1)
    assert time.perf_counter() - started < 15
    (record,) = report.records
    assert record.score == 0.0 and "timeout_s=5" in (record.error or "")
    for pid in map(int, pidfile.read_text().split()):
        assert not _alive(pid), f"process {pid} of the agent's group survived"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split()[2] == "Z")


@pytest.mark.parametrize(
    ("marker", "reason"),
    [
        ("[[crash]]", "exited with code 3: fake agent: simulated crash"),
        ("[[garbage]]", "invalid JSON"),
    ],
)
def test_crashes_and_invalid_output_are_failed_rollouts_with_a_reason(
    marker: str, reason: str
) -> None:
    """Kills: a crashing agent or unparsable output stopping the compile, or being scored by
    the metric as if it had answered."""
    target = lm()
    report = sd.evaluate(agent(), [task(f"upper: a {marker}", "A")], lm=target, threads=1)
    (record,) = report.records
    assert record.score == 0.0 and reason in (record.error or "")
    assert target.ledger.snapshot().errors == 1


def test_only_allowlisted_environment_reaches_the_agent(monkeypatch: pytest.MonkeyPatch) -> None:
    """Kills: passing this process's environment (API keys, tokens) to the agent CLI."""
    monkeypatch.setenv("SKILLOPT_TEST_SECRET", "hunter2")
    monkeypatch.setenv("ALLOWED_ONE", "yes")
    module = agent(env_allowlist=("PATH", "ALLOWED_ONE"))
    names = set(run(module, task("[[env]]")).output.split())
    names.discard("LC_CTYPE")  # set by the fake's own Python at startup (PEP 538 locale coercion)
    assert names == {"PATH", "ALLOWED_ONE", "HOME", "TMPDIR", "FAKE_AGENT"}


def test_the_workspace_holds_every_write_and_is_removed() -> None:
    """Kills: leaving workspaces behind, or giving the agent the real HOME/TMPDIR (its writes
    would land in the user's files)."""
    before = leftover_workspaces()
    outcome = run(agent(), task("[[escape]]"))
    written = [Path(p) for p in outcome.output.split()]
    assert all("skillopt-agent-" in str(p) for p in written), written
    assert not any(p.exists() for p in written)
    assert leftover_workspaces() == before


def test_check_command_runs_in_the_workspace_and_the_diff_is_recorded() -> None:
    """Kills: running the check outside the workspace, or scoring without it when no metric is
    given; the diff must show what the agent wrote."""
    check = [
        sys.executable,
        "-c",
        "import sys; sys.exit(open('answer.txt').read().strip() != 'cba')",
    ]
    module = agent(metric=None, check=check)
    example = task("reverse: abc", files={"notes/readme.txt": "hello"})
    good = run(module, example, skill="Know how to reverse. Then write answer.txt.")
    assert good.trace.check.passed and module.score(example, good).value == 1.0
    assert good.trace.diff.added == ("answer.txt",) and "+cba" in good.trace.diff.patch
    bad = run(module, example, skill="Then write answer.txt.")
    assert module.score(example, bad).value == 0.0 and not bad.trace.check.passed


def test_a_missing_executable_is_a_clear_error_before_any_spend() -> None:
    """Kills: discovering a missing CLI mid-compile (every rollout failing after spend)."""
    with pytest.raises(sd.UserInputError, match="not found on PATH"):
        CommandAgent(argv=["no-such-agent-cli-xyz", "{prompt}"], check=["true"])


def test_seed_files_may_not_escape_the_workspace() -> None:
    """Kills: writing an example's `../` file outside the workspace."""
    with pytest.raises(sd.UserInputError, match="relative path inside the workspace"):
        run(agent(), task("upper: a", files={"../evil.txt": "x"}))


def test_a_harness_compile_learns_through_the_gate() -> None:
    """Kills: CommandAgent needing its own driver (it must compile like any module: proposals,
    the gate, the incumbent)."""
    teach = json.dumps(
        {
            "edits": [
                {"kind": "add", "after": None, "text": "Know how to reverse.", "rationale": "r"}
            ]
        }
    )
    words = ["abc", "hello", "skill", "agent", "tools", "north", "plane", "river"]
    data = [task(f"reverse: {w}{i}", f"{w}{i}"[::-1]) for i in range(2) for w in words]
    result = sd.compile(
        agent(),
        data[:4],
        data[4:],
        optimizer=sd.optimizers.GradientText(
            proposers=[sd.optimizers.ReflectiveProposer(read_successes=False)],
            epochs=1,
            batch_size=8,
            lr=1.0,
        ),
        optimizer_lm=ScriptedLM(lambda m: teach, model="scripted/reflector"),
        lm=ScriptedLM(lambda m: "unused"),
        threads=4,
    )
    assert result.seed_val_score == 0.0 and result.val_score == 1.0
    assert "how to reverse" in result.best_skill.text
