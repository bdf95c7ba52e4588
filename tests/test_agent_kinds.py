"""The one registry of agent kinds (issue 51): the export, a skill folder's description limits, the
CLI's `--agent`, a command agent's `layout=` and Sleep's sessions all read `AGENT_KINDS`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import typer

from skillopt_dsl.agent_kinds import (
    AGENT_KINDS,
    AgentKind,
    agent_kind,
    agent_names,
    description_limit,
    register_agent_kind,
)
from skillopt_dsl.cli.skill_folder import described_agent
from skillopt_dsl.errors import UserInputError
from skillopt_dsl.export import export_agent_skill, install_skill
from skillopt_dsl.skill import Skill
from skillopt_dsl.skill_folder.document import description_problem

TOY = AgentKind(
    name="toy", skill_file="skill-folder", description_limit=12, workspace_skills=".toy/skills"
)


@pytest.fixture
def toy() -> Iterator[AgentKind]:
    register_agent_kind(TOY)
    try:
        yield TOY
    finally:
        AGENT_KINDS.pop("toy", None)


def test_the_shipped_kinds_and_their_limits() -> None:
    """Kills: a limit changed (Claude reads 1024 characters, Codex 500), AGENTS.md given a
    description, or a kind lost from the registry."""
    assert agent_names() == ["claude", "codex", "agents-md"]
    assert agent_names(described=True) == ["claude", "codex"]
    assert agent_names(installable=True) == ["claude", "agents-md"]
    assert (description_limit("claude"), description_limit("codex")) == (1024, 500)
    assert agent_kind("agents-md").description_limit is None


def test_an_unknown_agent_is_refused_with_the_choices() -> None:
    """Kills: an unknown name mapped to a default agent (a typo writing Claude's layout)."""
    with pytest.raises(UserInputError, match="choose one of claude, codex, agents-md"):
        agent_kind("claud")
    with pytest.raises(UserInputError, match=r"choose one of claude, codex$"):
        description_limit("agents-md")
    with pytest.raises(UserInputError, match="unknown agent 'claud'"):
        export_agent_skill(Skill("x"), Path("unused"), name="n", description="d", agent="claud")
    with pytest.raises(typer.BadParameter, match="choose one of claude, codex"):
        described_agent("agents-md")


def test_a_kind_is_checked_and_cannot_be_registered_twice_differently() -> None:
    """Kills: a skill folder kind without a description limit, or a second registration
    silently replacing the first."""
    with pytest.raises(TypeError, match="description limit"):
        AgentKind(name="x", skill_file="skill-folder")
    with pytest.raises(TypeError, match="already registered"):
        register_agent_kind(AgentKind(name="codex", skill_file="skill-folder", description_limit=9))


def test_a_registered_kind_reaches_every_home(toy: AgentKind, tmp_path: Path) -> None:
    """Kills: any of the homes keeping its own table of agents (the export's limit, the skill
    folder's description check, the CLI's `--agent` choices, the workspace install)."""
    skill = Skill("Do the thing.\n")
    with pytest.raises(UserInputError, match="toy reads skill descriptions of at most 12"):
        export_agent_skill(skill, tmp_path, name="n", description="thirteen char", agent="toy")
    written = export_agent_skill(skill, tmp_path, name="n", description="short", agent="toy")
    assert written == (tmp_path / "n" / "SKILL.md").resolve()
    assert "metadata" not in written.read_text(encoding="utf-8")
    assert description_problem("thirteen char", "toy") is not None
    assert description_problem("short", "toy") is None
    assert described_agent("toy") == "toy"
    installed = install_skill(skill, tmp_path / "work", layout="toy", name="s", description="d")
    assert installed == (tmp_path / "work" / ".toy" / "skills" / "s" / "SKILL.md").resolve()
    with pytest.raises(UserInputError, match="unknown skill layout 'codex'"):
        install_skill(skill, tmp_path, layout="codex", name="s", description="d")
