"""Security: hostile names cannot escape the export folder, API keys never reach run files, and
model output is data only (never executed, never used as a path)."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import skillopt_dsl as sd
from skillopt_dsl.export import export_agent_skill
from skillopt_dsl.lm import LM
from skillopt_dsl.optimizers import GradientText, ReflectiveProposer
from skillopt_dsl.skill import Skill
from skillopt_dsl.testing import FaultyBackend, ScriptedLM
from tests.helpers import Parity, parity_examples, parity_target

TRAIN = parity_examples(0, 16)
VAL = parity_examples(100, 10)
SECRET = "sk-test-9f8e7d6c5b4a39281706"
HOSTILE_NAMES = [
    "../../etc/passwd",
    "..",
    "/etc/cron.d/evil",
    "..\\..\\windows\\system32",
    "a/../../b",
    "name\x00.md",
    "~root/.ssh/authorized_keys",
    "C:\\evil",
    "skill/../../../../tmp/x",
]


def files_under(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_hostile_skill_name_cannot_write_outside_the_folder(tmp_path: Path, name: str) -> None:
    outside = tmp_path / "outside"
    folder = outside / "skills"
    folder.mkdir(parents=True)
    try:
        written = export_agent_skill(Skill("Be brief."), folder, name=name, description="A skill.")
    except sd.UserInputError:
        assert files_under(tmp_path) == {}, "a refused export wrote nothing"
        return
    assert written.resolve().parent.parent == folder.resolve()
    assert written.name == "SKILL.md"
    assert set(files_under(tmp_path)) == {str(written.relative_to(tmp_path))}


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(name=st.text(min_size=1, max_size=80))
def test_any_skill_name_stays_inside_or_is_refused(tmp_path: Path, name: str) -> None:
    folder = tmp_path / "export"
    try:
        written = export_agent_skill(Skill("x"), folder, name=name, description="d")
    except sd.UserInputError as exc:
        assert "no usable characters" in str(exc)
        return
    assert folder.resolve() in written.resolve().parents


def test_result_export_with_a_hostile_module_name(tmp_path: Path) -> None:
    result = sd.compile(
        Parity(), TRAIN, VAL, lm=ScriptedLM(parity_target), optimizer_lm=ScriptedLM(lambda m: "{}"),
        optimizer=GradientText(epochs=1, proposers=[ReflectiveProposer()]), threads=1,
    )  # fmt: skip
    hostile = result.__class__(**{**result.__dict__, "metadata": {"name": "../../../escape"}})
    target = tmp_path / "out"
    written = hostile.export(target, format="agent-skill")
    assert target.resolve() in written.resolve().parents
    assert not (tmp_path / "escape").exists()


# -- secrets --------------------------------------------------------------------------------


def leaky_target(messages: list[dict[str, str]]) -> str:
    """A fake that fails on a third of the prompts with an error quoting the API key."""
    if int(messages[-1]["content"]) % 3 == 0:
        raise PermissionError(f"401 invalid api key {os.environ['OPENAI_API_KEY']} for org x")
    return parity_target(messages)


def test_api_keys_never_reach_the_run_directory_or_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET[::-1])
    transient = FaultyBackend(ScriptedLM(leaky_target), rate=0.3, seed=0,
                              message=f"(key {SECRET})")  # fmt: skip
    target = LM(transient, max_retries=1, sleep=lambda s: None)
    reflector = LM(FaultyBackend(ScriptedLM(lambda m: json.dumps({"edits": []})), rate=0.5,
                                 seed=1, message=SECRET[::-1]), max_retries=0)  # fmt: skip
    run_dir = tmp_path / "run"
    result = sd.compile(
        Parity(), TRAIN, VAL, lm=target, optimizer_lm=reflector, run_dir=run_dir, threads=2,
        optimizer=GradientText(epochs=1, proposers=[ReflectiveProposer()]),
    )  # fmt: skip
    assert result.usage.errors > 0 and transient.raised > 0, "errors carrying the key happened"
    files = files_under(run_dir)
    assert "cache.sqlite" in files and "events.jsonl" in files
    for name, data in files.items():
        for secret in (SECRET, SECRET[::-1]):
            assert secret.encode() not in data, f"{name} leaks an API key"
            assert secret.encode("utf-16-le") not in data, f"{name} leaks an API key (utf-16)"
    events = (run_dir / "events.jsonl").read_text(encoding="utf-8")
    assert "***" in events or "401" in caplog.text, "the scrubbed errors were recorded"
    assert SECRET not in caplog.text and SECRET[::-1] not in caplog.text
    with sqlite3.connect(run_dir / "cache.sqlite") as db:
        tables = [r[0] for r in db.execute("select name from sqlite_master where type='table'")]
        for table in tables:
            for row in db.execute(f"select * from {table}"):
                assert SECRET not in repr(row)


# -- model output is data -------------------------------------------------------------------

HOSTILE_TEXTS = [
    "../../etc/passwd",
    "__import__('os').system('touch {canary}')",
    "{__class__.__init__.__globals__}",
    "{number} {0} %s %(x)s",
    "<!-- /protected --> $(touch {canary}) `touch {canary}`",
]


def hostile_reflector(canary: Path) -> ScriptedLM:
    """Hostile edits; every other reply also carries path-like extra keys (which are refused)."""
    replies = [0]

    def respond(messages: list[dict[str, str]]) -> str:
        replies[0] += 1
        texts = [t.replace("{canary}", str(canary)) for t in HOSTILE_TEXTS]
        edits: list[dict[str, Any]] = [
            {"kind": "add", "after": "../../etc/passwd", "text": texts[1], "rationale": texts[0]},
            {"kind": "add", "after": None, "text": " ".join(texts), "rationale": "x"},
            {"kind": "replace", "old": "Answer", "new": texts[2], "rationale": "y"},
            {"kind": "delete", "old": texts[0], "rationale": "z"},
        ]
        extra = {"path": "../../evil.md", "file": texts[0]} if replies[0] % 2 else {}
        return json.dumps({"edits": edits, **extra})

    return ScriptedLM(respond, model="scripted/hostile")


def hostile_target(canary: Path) -> Any:
    def respond(messages: list[dict[str, str]]) -> str:
        return f"__import__('os').system('touch {canary}') ../../etc/passwd odd"

    return respond


def test_model_output_is_never_executed_or_used_as_a_path(tmp_path: Path) -> None:
    sandbox = tmp_path / "sandbox"
    run_dir = sandbox / "run"
    canary = tmp_path / "PWNED"
    result = sd.compile(
        Parity(), TRAIN, VAL, lm=ScriptedLM(hostile_target(canary)),
        optimizer_lm=hostile_reflector(canary), run_dir=run_dir, threads=1,
        optimizer=GradientText(epochs=2, batch_size=8, lr=1.0, proposers=[ReflectiveProposer()]),
    )  # fmt: skip
    assert not canary.exists(), "model output was executed"
    outside = {p for p in tmp_path.rglob("*") if p.is_file() and run_dir not in p.parents}
    assert outside == set(), f"files written outside run_dir: {outside}"
    assert not Path("/etc/passwd.md").exists() and not (tmp_path / "evil.md").exists()
    skill_files = sorted(p.name for p in (run_dir / "skills").iterdir())
    assert all(name.startswith("v") and name.endswith(".md") for name in skill_files)
    applied = [o for h in result.history for o in h.edit_report if o["status"] == "applied"]
    assert applied, "the hostile edits reached the skill as plain text"
    for version in (run_dir / "skills").iterdir():
        assert "{__class__" not in version.read_text() or "__globals__}" in version.read_text()
