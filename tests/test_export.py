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
