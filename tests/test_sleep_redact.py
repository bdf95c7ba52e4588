"""Redaction: secrets replaced and counted before anything is stored or sent; ordinary
hyphenated words untouched."""

from __future__ import annotations

import dataclasses
import json
import shutil
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

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


# -- the table of key shapes, each in every location a reader keeps ------------------------

from fixtures.sleep.planted import LOCATIONS, SHAPES, plant_everywhere  # noqa: E402

from skillopt_dsl.sleep.redact import REDACTION_KINDS  # noqa: E402


def _strings(value: object) -> Iterator[str]:
    """Every string reachable from `value` (dataclass fields, mappings, sequences, paths)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, Path):
        yield str(value)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            yield from _strings(getattr(value, f.name))
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _strings(key)
            yield from _strings(item)
    elif isinstance(value, list | tuple | set | frozenset):
        for item in value:
            yield from _strings(item)


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_every_key_shape_in_the_table_is_redacted_and_counted_once(name: str) -> None:
    """Kills: dropping or narrowing any one shape of the table (an AWS secret key in either
    form, a `ghr_` token, a Stripe, Hugging Face or Slack key...), or counting it twice."""
    planted = SHAPES[name]
    redactor = Redactor()
    out = redactor.redact(f"note: {planted.text} (end)")
    assert planted.secret not in out
    assert f"[REDACTED:{planted.kind}]" in out
    assert dict(redactor.counts) == {planted.kind: 1}
    assert planted.kind in REDACTION_KINDS


def test_every_redaction_kind_has_a_planted_sample() -> None:
    """Kills: a rule added to the redactor without a sample here (it would have no test)."""
    assert {p.kind for p in SHAPES.values()} == set(REDACTION_KINDS)


@pytest.mark.parametrize("location", sorted(LOCATIONS))
@pytest.mark.parametrize("name", sorted(SHAPES))
def test_every_shape_is_redacted_in_every_location_the_readers_keep(
    tmp_path: Path, name: str, location: str
) -> None:
    """Kills: a reader keeping a text unredacted — a prompt, reply text, tool argument, tool
    output or compaction summary of a Claude Code or Codex session, or a generic-JSONL turn —
    and a count that is not the number of secrets actually replaced."""
    planted = SHAPES[name]
    LOCATIONS[location](tmp_path, planted.text)
    result = harvest(make_sources("auto", tmp_path), ProjectMatcher(("/work/app",)))
    assert len(result.sessions) == 1
    kept = list(_strings(result.sessions)) + [json.dumps(s.review_row()) for s in result.sessions]
    assert not [s for s in kept if planted.secret in s]
    assert dict(result.stats.project.redactions) == {planted.kind: 1}


def test_outputs_and_summaries_are_kept_so_their_redaction_is_tested(tmp_path: Path) -> None:
    """Kills: the location test passing because a reader dropped the text instead of redacting
    it (tool outputs and compaction summaries are kept, and with them the words around a key)."""
    for location in ("claude tool output", "codex tool output"):
        LOCATIONS[location](tmp_path / location, "MARKER-42 here")
        (session,) = harvest(
            make_sources("auto", tmp_path / location), ProjectMatcher(("/work/app",))
        ).sessions
        outputs = [c.output for t in session.turns for c in t.calls]
        assert any("MARKER-42 here" in o for o in outputs), location
    for location in ("claude compaction summary", "codex compaction summary"):
        LOCATIONS[location](tmp_path / location, "MARKER-42 here")
        (session,) = harvest(
            make_sources("auto", tmp_path / location), ProjectMatcher(("/work/app",))
        ).sessions
        assert any("MARKER-42 here" in s for s in session.summaries), location


CODE = [
    "token = Base.url_encode64(:crypto.strong_rand_bytes(32), padding: false)",
    "def refresh(token: str, api_key: Optional[str] = None) -> None:",
    "password = os.environ['DB_PASSWORD2']",
    "secret = self.settings.secret_key2",
    "token = make_token2(user)",
    "TOKEN=$CI_TOKEN_V2 ./deploy.sh",
    "max_token=512 and token_limit=4096",
    'headers = {"Authorization": f"Bearer {token}"}',
    "Authorization: Bearer ${API_TOKEN}",
    "export AWS_SECRET_ACCESS_KEY=$AWS_SECRET_FROM_VAULT",
    'password: "${DB_PASSWORD}"',
    "hf_hub_download(repo_id, filename) and sk-learn and token-bucket",
    "git clone git@github.com:me/app.git && ssh://git@host:22/repo",
    "the task-management-system, risk-averse ask-me-anything, AKIA-style ids",
]


@pytest.mark.parametrize("line", CODE)
def test_ordinary_code_is_not_redacted_nor_counted(line: str) -> None:
    """Kills: assignments that take a call, an attribute path, a type or a placeholder for a
    secret (issue 26: `token = Base.url_encode64(...)` was counted as a redacted secret)."""
    redactor = Redactor()
    assert redactor.redact(line) == line
    assert redactor.total == 0


def test_the_count_shown_by_harvest_is_the_count_of_real_redactions(tmp_path: Path) -> None:
    """Kills: counting a rule's matches instead of its replacements (a value left alone as
    code would still be counted, and the summary would show a redaction that never was)."""
    from typer.testing import CliRunner

    from skillopt_dsl.sleep.cli import sleep_app

    home = tmp_path / "home"
    LOCATIONS["claude prompt"](home, "token = Base.url_encode64(raw) and " + SHAPES["jwt"].text)
    project = tmp_path / "app"
    (project / ".skillopt").mkdir(parents=True)
    (project / ".skillopt" / "sleep.json").write_text(json.dumps({"session_cwds": ["/work/app"]}))
    done = CliRunner().invoke(
        sleep_app,
        ["harvest", "--project", str(project), "--home", str(home), "--heuristic-only"],
    )
    assert done.exit_code == 0, done.output
    assert "1 redaction(s)" in done.output


# -- issue 27: the promises of redaction and reading, each named -----------------------------


def test_github_ghr_refresh_tokens_are_redacted() -> None:
    """Kills: a GitHub pattern without `r` in `gh[pousr]_` (refresh tokens kept)."""
    token = "ghr_" + "Zq8Wn3Ls6Xk1Zt9Vp4Ry7Mc2Hb5Jd0Fg3Tk6P"
    redactor = Redactor()
    assert redactor.redact(f"refresh with {token}") == "refresh with [REDACTED:github_token]"


def test_generic_jsonl_sessions_are_redacted(tmp_path: Path) -> None:
    """Kills: the generic-JSONL reader keeping its turns' text as written."""
    key = SHAPES["anthropic sk-ant-"].secret
    LOCATIONS["jsonl prompt"](tmp_path, f"use {key}")
    result = harvest(make_sources("jsonl", tmp_path), ProjectMatcher(("/work/app",)))
    assert key not in _kept_texts(result.sessions)
    assert result.stats.project.redactions == {"anthropic_key": 1}


@pytest.mark.parametrize(
    ("location", "before_text"),
    [
        # Claude's input is JSON: `{"command": "echo start && ` precedes the planted text
        ("claude tool argument", len('{"command": "echo start && ')),
        # Codex's apply_patch input is plain text: the patch header and a `+` precede it
        ("codex patch input", len("*** Begin Patch\n*** Add File: notes/search.py\n+")),
    ],
)
def test_a_tool_input_is_redacted_before_it_is_cut_so_no_key_prefix_leaks(
    tmp_path: Path, location: str, before_text: int
) -> None:
    """Kills: cutting a tool input to its 500 characters before redacting it (the key at the
    cut is then too short to be recognised and its first characters are kept)."""
    from skillopt_dsl.sleep.harvest import TOOL_INPUT_CHARS

    key = SHAPES["openai sk-proj-"].secret
    for key_at in range(TOOL_INPUT_CHARS - 25, TOOL_INPUT_CHARS - 5, 3):
        home = tmp_path / str(key_at)
        LOCATIONS[location](home, "x" * (key_at - before_text - 1) + " " + key)
        (session,) = harvest(make_sources("auto", home), ProjectMatcher(("/work/app",))).sessions
        (call,) = [c for t in session.turns for c in t.calls if "xxxx" in c.input]
        assert len(call.input) <= TOOL_INPUT_CHARS
        assert call.input.endswith("...")
        assert "sk-proj" not in call.input and "sk-" not in call.input, key_at


def test_planted_secrets_never_reach_the_project_folder_nor_a_model_request(
    tmp_path: Path,
) -> None:
    """Kills: any path by which a secret read from a transcript reaches `.skillopt/` (the
    sessions list, the tasks, the report, the run) or the mining / replay model's requests: a
    fake server records every request body, and the model echoes the transcript it was sent
    back as a task (so whatever it saw would be written too)."""
    from typer.testing import CliRunner

    from skillopt_dsl.sleep.cli import sleep_app
    from skillopt_dsl.testing.fake_server import FakeOpenAIServer

    home = tmp_path / "home"
    secrets = plant_everywhere(home)
    project = tmp_path / "app"
    (project / ".skillopt").mkdir(parents=True)
    (project / ".skillopt" / "sleep.json").write_text(json.dumps({"session_cwds": ["/work/app"]}))
    (project / "CLAUDE.md").write_text("# app\n")

    def echo_as_task(messages: list[Any]) -> str:
        seen = messages[-1]["content"]
        task = {"intent": seen[-400:], "context": seen, "checks": [{"kind": "no_refusal"}]}
        return json.dumps({"tasks": [task]})

    with FakeOpenAIServer(echo_as_task, latency_s=0.0) as server:
        done = CliRunner().invoke(
            sleep_app,
            [
                "run",
                "--project",
                str(project),
                "--home",
                str(home),
                "--optimizer-model",
                "openai/fake-miner",
                "--optimizer-api-base",
                server.url,
                "--model",
                "openai/fake-target",
                "--api-base",
                server.url,
                "--max-calls",
                "40",
            ],
        )
        bodies = json.dumps(server.bodies)
        requests = server.requests
    assert done.exit_code == 0, done.output
    assert requests >= 3  # one mining call per session, at least
    assert "[REDACTED:" in bodies
    written = [
        p.read_text(encoding="utf-8", errors="replace")
        for p in (project / ".skillopt").rglob("*")
        if p.is_file()
    ]
    assert len(written) > 5
    for secret in secrets:
        assert secret not in bodies, secret
        assert not [text for text in written if secret in text], secret


# -- issue 38: the assignment rule's limits, each named ----------------------------------------


def test_a_bare_secret_value_of_six_characters_is_redacted() -> None:
    """Kills: a bare-value floor above 6 (`len(value) <= _BARE_MIN_CHARS`, or a floor of 7):
    a 6-character password with a digit would reach disk and the model; 5 stay code-like."""
    redactor = Redactor()
    assert redactor.redact("password=hunt3r now") == "password=[REDACTED:secret_assignment] now"
    assert redactor.redact("token=abc12 now") == "token=abc12 now"
    assert redactor.counts == {"secret_assignment": 1}


REAL_QUOTED = ["pa$$word99", "$3cr3t!pw", "*hunter22", "hunter*22", "{abc}123", "<3kitties",
               "wait...what1", "...hunter2", "xxxxhunter2"]  # fmt: skip
WHOLE_PLACEHOLDERS = ["${DB_PASSWORD}", "$DB_PASSWORD", "<your-password>", "****",
                      "xxxxxxxx", "....", "{token}", "{{token}}", "%PASSWORD%"]  # fmt: skip


@pytest.mark.parametrize("value", REAL_QUOTED)
def test_a_quoted_secret_with_placeholder_characters_is_still_redacted(value: str) -> None:
    """Kills: a quoted value taken for a placeholder because it starts with (or contains) `$`,
    `*`, `{`, `<` or `...` (`_WHOLE_PLACEHOLDER.fullmatch` turned into `.match`/`.search`,
    or the old start-of-value `_PLACEHOLDER.match`): a real password would be kept."""
    redactor = Redactor()
    out = redactor.redact(f'password: "{value}"')
    assert out == "password: [REDACTED:secret_assignment]" and value not in out
    assert redactor.total == 1


@pytest.mark.parametrize("value", WHOLE_PLACEHOLDERS)
def test_a_quoted_value_that_is_wholly_a_placeholder_is_left_alone(value: str) -> None:
    """Kills: placeholders counted as secrets (`"${DB_PASSWORD}"` is a reference, not a
    password): the night's report would count redactions that never hid anything."""
    redactor = Redactor()
    line = f'password: "{value}"'
    assert redactor.redact(line) == line and redactor.total == 0
