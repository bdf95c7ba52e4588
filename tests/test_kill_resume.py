"""Kill and resume: a compile in a subprocess is SIGKILLed at seeded points, then resumed.

The subprocess's fake target kills its own process (`os.kill(os.getpid(), SIGKILL)`) on its K-th
call, K drawn from `random.Random(0)`: no cleanup code, no `finally`, no flush runs. Resuming the
run directory must give the same final skill, the same gate log, the same step history and the
same accepted versions on disk as an uninterrupted run. A torn `events.jsonl` is repaired; a torn
or garbage `checkpoint.json` is refused with a `RunDirError`.
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import skillopt_dsl as sd

ROOT = Path(__file__).resolve().parents[1]
KILLS = 10

SCRIPT = r"""
import json, os, signal, sys, threading
import skillopt_dsl as sd
from skillopt_dsl.optimizers import GradientText, ReflectiveProposer
from skillopt_dsl.testing import ScriptedLM
from tests.helpers import Parity, parity_examples

RULES = {0: "Rule A: multiples of 3 follow parity.", 1: "Rule B: n mod 3 = 1 follows parity.",
         2: "Rule C: n mod 3 = 2 follows parity."}
OVERFIT = "Rule D: numbers below 16 follow parity."  # fixes training, not validation
PROPOSALS = [RULES[0], "Be brief.", OVERFIT, RULES[1], "Answer politely.", RULES[2]]
run_dir, kill_at, resume, out = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1", sys.argv[4]
lock, calls = threading.Lock(), [0]

def target(messages):
    with lock:
        calls[0] += 1
        if calls[0] == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
    n = int(messages[-1]["content"])
    if RULES[n % 3] in messages[0]["content"] or (OVERFIT in messages[0]["content"] and n < 16):
        return "even" if n % 2 == 0 else "odd"
    return "odd"

def reflector(messages):
    seen = " ".join(m["content"] for m in messages)
    todo = [p for p in PROPOSALS if p not in seen] or ["Be brief."]
    return json.dumps({"edits": [{"kind": "add", "after": None, "text": todo[0],
                                  "rationale": "r"}]})

result = sd.compile(
    Parity(), parity_examples(0, 16), parity_examples(100, 72),
    # one proposal a step, screened on the whole training set (each rule fixes some of it;
    # "Be brief." and "Answer politely." fix nothing and are screened out), and every proposal
    # that passes goes to the gate alone: one decision per rule, the overfit one rejected
    optimizer=GradientText(proposers=[ReflectiveProposer(read_successes=False)], epochs=6,
                           batch_size=16, lr=1.0, compose=1, confirm_steps=0, min_net=1.0,
                           submit_at_net=0.0),
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
    script = tmp / "compile_script.py"
    if not script.exists():
        script.write_text(SCRIPT, encoding="utf-8")
    out = tmp / f"out-{run_dir.name}-{kill_at}-{int(resume)}.json"
    proc = subprocess.run(
        [sys.executable, str(script), str(run_dir), str(kill_at), str(int(resume)), str(out)],
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    if proc.returncode == 0:
        return 0, json.loads(out.read_text(encoding="utf-8"))
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    return proc.returncode, {}


def versions(run_dir: Path) -> dict[str, str]:
    return {
        p.name: p.read_text(encoding="utf-8") for p in sorted((run_dir / "skills").glob("*.md"))
    }


def test_sigkill_at_ten_seeded_points_then_resume_equals_uninterrupted(tmp_path: Path) -> None:
    """Kills: a resume that re-scores, re-spends or loses an accepted step (72 validation
    examples: each rule fixes 12, enough for the run-level significance of its decision)."""
    reference_dir = tmp_path / "reference"
    code, reference = run_script(tmp_path, reference_dir, kill_at=0, resume=False)
    assert code == 0
    accepted = sum(d["accepted"] for d in reference["gate_log"])
    assert accepted == 3, "the task has three real improvements, each a separate accepted step"
    assert any(not d["accepted"] for d in reference["gate_log"])
    points = sorted(random.Random(0).sample(range(1, reference["target_calls"]), KILLS))
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
        # Every call that reached the target counts (issue 19): the one in flight at the kill
        # as lost (the usage journal) and again when the resume sends it; with two threads, at
        # most one more call may have been answered but not yet cached, and is sent again.
        assert resumed["lost"] >= 1, f"{context}: the call in flight at the kill was not counted"
        extra = resumed["calls"] - resumed["lost"] - reference["calls"]
        assert 0 <= extra <= 1, f"{context}: spent budget drifted ({extra:+d} calls)"
        assert versions(run_dir) == versions(reference_dir), f"{context}: an accepted step lost"
        on_disk = (run_dir / "best_skill.md").read_text(encoding="utf-8")
        assert on_disk.endswith(reference["best"]), context


# -- torn files (in-process: the repair logic does not need a real kill) --------------------


def first_run(tmp_path: Path) -> Path:
    from tests.test_compile import run

    run(tmp_path)
    return tmp_path


def test_torn_events_line_is_cut_and_the_run_resumes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from tests.test_compile import run

    reference = run(tmp_path / "ref")
    run_dir = first_run(tmp_path / "run")
    events = run_dir / "events.jsonl"
    intact = events.read_bytes()
    events.write_bytes(intact + b'{"event": "gate", "accep')
    resumed = run(run_dir, resume=True)
    assert "torn last line" in caplog.text
    assert resumed.best_skill == reference.best_skill
    lines = events.read_bytes().splitlines()
    assert all(json.loads(line) for line in lines), "every line of the repaired log parses"
    assert events.read_bytes().startswith(intact)


def test_corrupt_complete_events_line_is_refused(tmp_path: Path) -> None:
    from tests.test_compile import run

    run_dir = first_run(tmp_path)
    events = run_dir / "events.jsonl"
    events.write_bytes(events.read_bytes() + b"not json at all\n")
    with pytest.raises(sd.RunDirError, match="corrupt"):
        run(run_dir, resume=True)


@pytest.mark.parametrize(
    "damage",
    [
        lambda raw: raw[: len(raw) // 2],
        lambda raw: b"",
        lambda raw: b"\x00\xff garbage \xfe",
        lambda raw: b'["a list", "not a checkpoint"]',
        lambda raw: b'{"no_driver": 1}',
    ],
    ids=["torn", "empty", "binary", "wrong-shape", "no-driver"],
)
def test_damaged_checkpoint_is_refused_not_silently_continued(tmp_path: Path, damage: Any) -> None:
    from tests.test_compile import run

    run_dir = first_run(tmp_path)
    checkpoint = run_dir / "checkpoint.json"
    checkpoint.write_bytes(damage(checkpoint.read_bytes()))
    before = {p.name: p.read_bytes() for p in run_dir.rglob("*") if p.is_file()}
    with pytest.raises(sd.RunDirError, match="checkpoint"):
        run(run_dir, resume=True)
    after = {p.name: p.read_bytes() for p in run_dir.rglob("*") if p.is_file()}
    assert after["checkpoint.json"] == before["checkpoint.json"], "the evidence is kept"
    assert after.get("best_skill.md") == before.get("best_skill.md")
