"""Redaction: secrets replaced and counted before anything is stored or sent; ordinary
hyphenated words untouched."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from skillopt_dsl.sleep.harvest import ProjectMatcher, harvest
from skillopt_dsl.sleep.redact import Redactor
from skillopt_dsl.sleep.sources import ClaudeCodeSource

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
    assert result.stats.redactor.counts == {"openai_key": 1, "jwt": 1}
