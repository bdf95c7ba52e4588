"""Every shipped transcript source passes the shipped `SourceContract`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from skillopt_dsl.sleep.sources import ClaudeCodeSource, CodexSource, GenericJsonlSource
from skillopt_dsl.testing.source_contract import PROJECT, REQUEST, SourceContract

WHEN = "2025-06-01T10:00:00Z"


def _write(path: Path, records: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(r) for r in records] + ["{not json"]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


class TestClaudeCodeSourceContract(SourceContract):
    source = ClaudeCodeSource

    def write_transcript(self, home: Path) -> None:
        base = {"sessionId": "s1", "cwd": PROJECT, "timestamp": WHEN, "isSidechain": False}
        _write(
            home / ".claude" / "projects" / "-work-app" / "s1.jsonl",
            [
                {**base, "type": "user", "message": {"role": "user", "content": REQUEST}},
                {**base, "type": "assistant", "message": {"role": "assistant", "content": "ok"}},
            ],
        )


class TestCodexSourceContract(SourceContract):
    source = CodexSource

    def write_transcript(self, home: Path) -> None:
        def item(role: str, text: str) -> dict[str, Any]:
            kind = "input_text" if role == "user" else "output_text"
            payload = {"type": "message", "role": role, "content": [{"type": kind, "text": text}]}
            return {"timestamp": WHEN, "type": "response_item", "payload": payload}

        meta = {"timestamp": WHEN, "type": "session_meta", "payload": {"id": "c1", "cwd": PROJECT}}
        _write(
            home / ".codex" / "sessions" / "2025" / "06" / "01" / "rollout-c1.jsonl",
            [meta, item("user", REQUEST), item("assistant", "ok")],
        )


class TestGenericJsonlSourceContract(SourceContract):
    source = GenericJsonlSource

    def write_transcript(self, home: Path) -> None:
        turn = {"session_id": "g1", "project": PROJECT, "timestamp": WHEN}
        _write(
            home / ".skillopt" / "sessions" / "g.jsonl",
            [
                {**turn, "role": "user", "text": REQUEST},
                {**turn, "role": "assistant", "text": "ok"},
            ],
        )
