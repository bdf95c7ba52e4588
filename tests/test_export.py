from __future__ import annotations

from pathlib import Path

import pytest
import yaml

import skillopt_dsl as sd
from skillopt_dsl.testing import ScriptedLM
from tests.helpers import Parity, parity_examples


def test_exported_body_equals_the_exact_system_message_sent(tmp_path: Path) -> None:
    text = "# Parity\n\nCheck if divisible by 2.\n  trailing spaces  \n\n---\nnot front matter\n"
    fake = ScriptedLM(lambda m: "odd")
    sd.evaluate(Parity(), parity_examples(0, 1), skill=text, lm=fake)
    sent = fake.calls[0][0]["content"]
    path = sd.export_skill(
        sd.Skill(text), tmp_path / "best_skill.md", {"name": "parity", "val_score": 0.5}
    )
    assert sd.load_skill(path).text == sent
    raw = path.read_text(encoding="utf-8")
    assert raw.endswith(sent)
    front = yaml.safe_load(raw.split("---\n")[1])
    assert (
        front["name"] == "parity"
        and front["val_score"] == 0.5
        and front["skill_hash"] == sd.Skill(text).hash
    )


def test_load_plain_markdown_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "plain.md"
    path.write_bytes(b"no front matter\r\n")
    assert sd.load_skill(path).text == "no front matter\r\n"


def test_agent_skill_layout_and_hostile_names(tmp_path: Path) -> None:
    path = sd.export_agent_skill(
        sd.Skill("Body"), tmp_path, name="../../etc/Passwd Skill", description="Use it."
    )
    assert path == (tmp_path / "etc-passwd-skill" / "SKILL.md").resolve()
    assert path.read_text(encoding="utf-8").endswith("---\nBody")
    with pytest.raises(sd.UserInputError):
        sd.export_agent_skill(sd.Skill("x"), tmp_path, name="///", description="d")


def test_unclosed_front_matter_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.md"
    path.write_text("---\nname: x\nbody", encoding="utf-8")
    with pytest.raises(sd.UserInputError, match="never closed"):
        sd.load_skill(path)


def test_compile_result_exports_for_each_agent(tmp_path: Path) -> None:
    """Kills: `CompileResult.export(format="agent-skill")` ignoring `agent=` (always Claude's
    layout, so a Codex user gets front matter Codex rejects and no AGENTS.md)."""
    result = sd.compile(
        Parity(),
        parity_examples(0, 4),
        parity_examples(100, 4),
        lm=ScriptedLM(lambda m: "even"),
        optimizer_lm=ScriptedLM(lambda m: "{}"),
        budget=sd.Budget(max_calls=40),
    )
    agents_md = result.export(tmp_path / "repo", format="agent-skill", agent="agents-md")
    assert agents_md == (tmp_path / "repo" / "AGENTS.md").resolve()
    assert agents_md.read_text(encoding="utf-8") == result.best_skill.text
    codex = result.export(tmp_path / "codex", format="agent-skill", agent="codex")
    front = yaml.safe_load(codex.read_text(encoding="utf-8").split("---\n")[1])
    assert set(front) == {"name", "description"}
