"""Redaction: secrets replaced and counted before anything is stored or sent; ordinary
hyphenated words untouched."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from skillopt_dsl.sleep.harvest import ProjectMatcher, Session, harvest
from skillopt_dsl.sleep.redact import Redactor
from skillopt_dsl.sleep.sources import ClaudeCodeSource, CodexSource, make_sources

HOME = Path(__file__).parent / "fixtures" / "sleep" / "home"

SECRETS = {
    "openai_key": "sk-proj-AbCdEf1234567890GhIjKlMnOp",
    "anthropic_key": "sk-ant-api03-AbCdEf1234567890GhIjKlMnOpQr",
    "aws_access_key": "AKIAIOSFODNN7EXAMPLE",
    "github_token": "ghp_" + "a1B2" * 9,
    "slack_token": "xoxb-2048203020-4811029210-Zx9aQm7KpL2s",
    "google_api_key": "AIza" + "Sy" + "A1b2C3d4" * 4 + "x",
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N",
}


@pytest.mark.parametrize("kind", sorted(SECRETS))
def test_each_kind_of_key_is_redacted_and_counted(kind: str) -> None:
    """Kills: dropping any one key pattern (that kind would reach disk and the model)."""
    redactor = Redactor()
    out = redactor.redact(f"use {SECRETS[kind]} here")
    assert SECRETS[kind] not in out
    assert f"[REDACTED:{kind}]" in out
    assert redactor.counts[kind] == 1


def test_pem_headers_and_assignments_are_redacted() -> None:
    """Kills: missing PEM blocks, `Authorization:` headers or `password=`/`token=` values."""
    pem = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA1\n-----END RSA PRIVATE KEY-----"
    text = f"{pem}\nAuthorization: Bearer abcdef123456\npassword=hunter22 API_TOKEN: 'zzyyxxww'"
    redactor = Redactor()
    out = redactor.redact(text)
    assert "MIIEow" not in out and "hunter22" not in out and "abcdef123456" not in out
    assert "zzyyxxww" not in out
    assert out.count("[REDACTED:") == 4
    assert redactor.total == 4


def test_hyphenated_words_next_to_secrets_are_untouched() -> None:
    """Kills: patterns without word boundaries (SkillOpt-Sleep turned "task-management-system"
    into a redacted key) and assignments that eat ordinary code (`token: str`)."""
    plain = (
        "the task-management-system, a risk-averse desk-top ask-me-anything flow, "
        "token-bucket and sk-learn; def f(token: str) -> None; password-reset page; "
        "AKIA-style ids; the monkey-patch; the risk-assessment-2024-q3-final-report and "
        "desk-2023-inventory-snapshot-v2 files"
    )
    redactor = Redactor()
    assert redactor.redact(plain) == plain
    assert redactor.total == 0
    mixed = "key sk-proj-AbCdEf1234567890GhIjKlMn in task-management-system"
    assert redactor.redact(mixed) == "key [REDACTED:openai_key] in task-management-system"


def test_transcripts_are_redacted_as_they_are_read(tmp_path: Path) -> None:
    """Kills: redacting only when writing the report (secrets would sit in `Session` objects and
    reach the mining prompt); the counts reach the harvest stats."""
    home = tmp_path / "home"
    shutil.copytree(HOME, home)
    result = harvest([ClaudeCodeSource(home)], ProjectMatcher(("/work/shop",)))
    texts = " ".join(t.text for s in result.sessions for t in s.turns)
    assert "sk-proj-AbCdEf" not in texts and "eyJhbGci" not in texts
    assert "task-management-system" in texts and "risk-averse" in texts
    assert result.stats.project.redactions == {"openai_key": 1, "jwt": 1}


# -- every kept text of the real formats, each with its own planted key ----------------------

REAL = Path(__file__).parent / "fixtures" / "sleep" / "real_home"
PLANTED = {
    "claude prompt": "ghp_Q7rT2mX9vL4kP8sN1wZ6yB3cD5fG0hJ2aE4i",
    "claude assistant text": "sk-ant-api03-Xy7Zq2Lm9Np4Rs8Tv1Wu6Kj3Hg5Fd0Sa",
    "claude tool input": "AKIAZX7Q2M9V4K8P1W6Y",
    "claude queued prompt": "xoxb-4829103847-7719203846-Qm9Xz2Lp7Vr4",
    "codex event_msg prompt (and its response_item mirror)": "sk-proj-Bq8Wn3Ls6Xk1Zt9Vp4Ry7Mc2",
    "codex event_msg reply (and its response_item mirror)": "AIzaSyB7x2Q9m4L8p1W6z3K5v0N7r2T9y4U6i8O",
    "codex tool input": "c2lnbmF0dXJlX29mX2FfdG9rZW4",
    "codex response_item reply (mid-2025 rollout)": "hunter2222x",
}


def _kept_texts(sessions: list[Session]) -> str:
    parts = []
    for session in sessions:
        for turn in session.turns:
            parts.append(turn.text)
            parts += [call.input for call in turn.calls]
        parts.append(json.dumps(session.review_row()))
    return "\n".join(parts)


@pytest.mark.parametrize("where", sorted(PLANTED))
def test_every_kept_text_is_redacted(where: str) -> None:
    """Kills: a kept text that skips the redactor: Claude prompts, Claude assistant text, tool
    inputs, queued prompts, the Codex `event_msg` copy Sleep prefers, the `response_item` copy
    of a rollout without events, Codex tool inputs (each field holds its own planted key)."""
    result = harvest(make_sources("auto", REAL), ProjectMatcher(("/work/app",)))
    assert PLANTED[where] not in _kept_texts(result.sessions)


def test_the_codex_mirror_is_redacted_and_counted_once() -> None:
    """Kills: redacting the `response_item` mirror of a Codex turn without the `event_msg` copy
    (or counting a secret twice because both copies hold it)."""
    result = harvest(make_sources("codex", REAL), ProjectMatcher(("/work/app",)))
    assert result.stats.project.redactions["openai_key"] == 1
    assert result.stats.project.redactions["google_api_key"] == 1


def test_codex_item_copies_are_redacted_when_they_are_the_turns(tmp_path: Path) -> None:
    """Kills: a rollout without `event_msg` turns (the item copy is then the turn) keeping a
    secret in its `response_item` messages."""
    folder = tmp_path / ".codex" / "sessions" / "2026" / "03" / "02"
    folder.mkdir(parents=True)
    key = "sk-proj-Zz9Yy8Xx7Ww6Vv5Uu4Tt3Ss2"
    lines = [
        {
            "timestamp": "2026-03-02T10:00:00Z",
            "type": "session_meta",
            "payload": {"id": "r", "cwd": "/work/app", "source": "exec"},
        },
        {
            "timestamp": "2026-03-02T10:00:01Z",
            "type": "response_item",
            "payload": {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": f"use {key} for the staging deploy"}],
            },
        },
        {
            "timestamp": "2026-03-02T10:00:02Z",
            "type": "response_item",
            "payload": {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": f"Deployed with {key}."}],
            },
        },
    ]
    (folder / "rollout-2026-03-02T10-00-00-r.jsonl").write_text(
        "\n".join(json.dumps(x) for x in lines) + "\n"
    )
    result = harvest([CodexSource(tmp_path)], ProjectMatcher(("/work/app",)))
    assert key not in _kept_texts(result.sessions)
    assert result.stats.project.redactions["openai_key"] == 2
