"""Kill and resume of an agent compile: SIGKILL mid-trajectory, resume, same result.

The subprocess compiles `ToolParity` (tests/test_agents.py): multi-turn tool-using rollouts, so
a kill lands between the turns of a trajectory as well as between rollouts and steps. The fake
target kills its own process (`os.kill(os.getpid(), SIGKILL)`) on its K-th call: no cleanup,
no flush. Resuming must give the same final skill, gate log, step history and spent calls as an
uninterrupted run.
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
KILLS = 3

SCRIPT = r"""
import json, os, signal, sys, threading
import skillopt_dsl as sd
from skillopt_dsl.optimizers import GradientText, ReflectiveProposer
from skillopt_dsl.testing import ScriptedLM
from tests.test_agents import ToolParity, agent_target, examples

PROPOSALS = ["Be brief.", "Always call parity before answering.", "Answer politely."]
run_dir, kill_at, resume, out = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1", sys.argv[4]
lock, calls = threading.Lock(), [0]

def target(messages):
    with lock:
        calls[0] += 1
        if calls[0] == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
    return agent_target(messages)

def reflector(messages):
    seen = " ".join(m["content"] for m in messages)
    todo = [p for p in PROPOSALS if p not in seen] or ["Be brief."]
    return json.dumps({"edits": [{"kind": "add", "after": None, "text": todo[0], "rationale": "r"}]})

result = sd.compile(
    ToolParity(), examples(0, 8), examples(100, 40),
    optimizer=GradientText(proposers=[ReflectiveProposer(read_successes=False)], epochs=2,
                           batch_size=4, lr=1.0),
    lm=ScriptedLM(target), optimizer_lm=ScriptedLM(reflector, model="scripted/reflector"),
    run_dir=run_dir, resume=resume, threads=2,
)
with open(out, "w") as f:
    json.dump({
        "best": result.best_skill.text,
        "gate_log": [d.to_dict() for d in result.gate_log],
        "history": [h.to_dict() | {"calls": 0} for h in result.history],
        "calls": result.usage.calls,
        "lost": result.usage.lost_calls,
        "target_calls": calls[0],
    }, f)
"""


def run_script(tmp: Path, run_dir: Path, kill_at: int, resume: bool) -> tuple[int, dict[str, Any]]:
    script = tmp / "agent_compile.py"
    if not script.exists():
        script.write_text(SCRIPT, encoding="utf-8")
    out = tmp / f"out-{run_dir.name}-{kill_at}-{int(resume)}.json"
    proc = subprocess.run(
        [sys.executable, str(script), str(run_dir), str(kill_at), str(int(resume)), str(out)],
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    if proc.returncode == 0:
        return 0, json.loads(out.read_text(encoding="utf-8"))
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    return proc.returncode, {}


def test_sigkill_mid_trajectory_then_resume_equals_uninterrupted(tmp_path: Path) -> None:
    """Kills: agent rollouts that are not reproducible from the response cache (e.g. a
    timestamp in a tool-result message), or a resume that re-pays or forgets the turns of a
    trajectory cut by the kill (spent calls would drift from the uninterrupted run)."""
    code, reference = run_script(tmp_path, tmp_path / "reference", kill_at=0, resume=False)
    assert code == 0
    assert sum(d["accepted"] for d in reference["gate_log"]) >= 1, "the rule must be learnt"
    assert "Always call parity" in reference["best"]
    points = sorted(random.Random(1).sample(range(2, reference["target_calls"]), KILLS))
    for kill_at in points:
        run_dir = tmp_path / f"killed-{kill_at}"
        code, _ = run_script(tmp_path, run_dir, kill_at=kill_at, resume=False)
        assert code == -signal.SIGKILL, f"the run was not killed at call {kill_at}"
        code, resumed = run_script(tmp_path, run_dir, kill_at=0, resume=True)
        assert code == 0
        context = f"killed at target call {kill_at}"
        assert resumed["best"] == reference["best"], context
        assert resumed["gate_log"] == reference["gate_log"], context
        assert resumed["history"] == reference["history"], context
        # Every call that reached the target counts (issue 19): those in flight at the kill as
        # lost (the usage journal) and again when the resume sends them; a call answered but
        # not yet cached when the kill came is sent again too (at most one per other thread).
        assert resumed["lost"] >= 1, f"{context}: the call in flight at the kill was not counted"
        extra = resumed["calls"] - resumed["lost"] - reference["calls"]
        assert 0 <= extra <= 1, f"{context}: spent budget drifted ({extra:+d} calls)"
