"""Adopt and rollback as a transaction: all old files or all new ones, even when adopt crashes
or is killed between the two file swaps; tampered proposals refused."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from fixtures.sleep.world import learning_target, make_project, write_sessions

from skillopt_dsl.optimizers import GradientText
from skillopt_dsl.sleep import (
    SleepConfig,
    SleepProject,
    StageMismatch,
    adopt,
    recover,
    rollback,
    run_night,
)
from skillopt_dsl.sleep.adopt import journal_pending
from skillopt_dsl.testing import ScriptedLM

SKILL = "# Pricing skill\n\nAnswer the pricing question.\n"


def _two_file_optimizer() -> ScriptedLM:
    """FAKE optimizer: one edit to the skill file and one to the learned block."""
    edits = {
        "edits": [
            {
                "kind": "replace",
                "old": "Answer the pricing question.",
                "new": "Answer the pricing question in Decimal terms.",
                "rationale": "r",
            },
            {
                "kind": "add",
                "after": None,
                "text": "- Money is always `Decimal`.",
                "rationale": "r",
            },
        ]
    }

    def respond(messages: list[dict[str, str]]) -> str:
        if messages[0]["content"].startswith("You improve a skill document"):
            return json.dumps(edits)
        return json.dumps({"edits": []})

    return ScriptedLM(respond, model="scripted/optimizer")


@pytest.fixture
def staged(tmp_path: Path) -> tuple[SleepProject, dict[str, bytes], str]:
    home = tmp_path / "home"
    write_sessions(home)
    project = make_project(tmp_path)
    (project / "SKILL.md").write_text(SKILL)
    config = SleepConfig(
        project=project,
        home=home,
        source="jsonl",
        lm=learning_target(),
        optimizer_lm=_two_file_optimizer(),
        mine_with_model=False,
        skill_file="SKILL.md",
        optimizer=GradientText(epochs=1, batch_size=8),
        threads=2,
    )
    night = run_night(config)
    assert night.report.proposed_files == ["CLAUDE.md", "SKILL.md"]
    old = {name: (project / name).read_bytes() for name in ("CLAUDE.md", "SKILL.md")}
    return SleepProject.open(project), old, night.report.night_id


def _current(project: SleepProject) -> dict[str, bytes]:
    return {name: (project.path / name).read_bytes() for name in ("CLAUDE.md", "SKILL.md")}


def test_a_crash_between_the_two_swaps_leaves_all_old_files(
    staged: tuple[SleepProject, dict[str, bytes], str],
) -> None:
    """Kills: replacing files one by one without a journal (a crash after the first swap would
    leave a new CLAUDE.md beside an old SKILL.md)."""
    project, old, night = staged

    def crash(path: str) -> None:
        raise OSError("disk full (injected)")

    with pytest.raises(OSError, match="injected"):
        adopt(project, night, after_replace=crash)
    assert _current(project) == old
    assert not journal_pending(project)
    receipt = adopt(project, night)
    assert {c.path for c in receipt.files} == {"CLAUDE.md", "SKILL.md"}
    assert _current(project) != old


def test_a_kill_mid_adopt_is_undone_by_the_next_command(
    staged: tuple[SleepProject, dict[str, bytes], str],
) -> None:
    """Kills: no write-ahead journal (a process killed after the first swap leaves a mix of old
    and new files that nothing repairs)."""
    project, old, night = staged
    script = textwrap.dedent(
        f"""
        import os
        from skillopt_dsl.sleep import SleepProject, adopt
        adopt(SleepProject.open({str(project.path)!r}), {night!r}, after_replace=lambda path: os._exit(9))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 9, done.stderr
    assert journal_pending(project)
    assert _current(project) != old  # killed half-way: one file is new
    message = recover(project)
    assert message is not None and "undone" in message
    assert _current(project) == old and not journal_pending(project)


def test_a_tampered_proposal_is_refused(staged: tuple[SleepProject, dict[str, bytes], str]) -> None:
    """Kills: adopting staged files without checking them against the manifest's sha256."""
    project, old, night = staged
    proposal = project.night_dir(night) / "proposed" / "SKILL.md"
    proposal.write_text("# Pricing skill\n\nrm -rf /\n")
    with pytest.raises(StageMismatch, match="modified after staging"):
        adopt(project, night)
    assert _current(project) == old


def test_rollback_restores_bytes_and_refuses_over_new_edits(
    staged: tuple[SleepProject, dict[str, bytes], str],
) -> None:
    """Kills: a rollback that rewrites files from the staged text (not the backups), or one that
    silently discards edits the user made after adopting."""
    project, old, night = staged
    adopt(project, night)
    adopted = _current(project)
    (project.path / "SKILL.md").write_bytes(adopted["SKILL.md"] + b"my edit\n")
    with pytest.raises(StageMismatch, match="changed since it was adopted"):
        rollback(project)
    rollback(project, force=True)
    assert _current(project) == old
    with pytest.raises(Exception, match="nothing to roll back"):
        rollback(project)


def _kill_mid_adopt(project: SleepProject, night: str) -> None:
    """Run `adopt` in a child process killed (`os._exit`) right after its first file swap."""
    script = textwrap.dedent(
        f"""
        import os
        from skillopt_dsl.sleep import SleepProject, adopt
        adopt(SleepProject.open({str(project.path)!r}), {night!r}, after_replace=lambda path: os._exit(9))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 9, done.stderr


def test_adopt_recovers_an_interrupted_adopt_before_anything_else(
    staged: tuple[SleepProject, dict[str, bytes], str],
) -> None:
    """Kills: `adopt` no longer recovering an interrupted adopt first (issue 20: a second adopt
    after a crash then raises and leaves old and new files mixed)."""
    project, old, night = staged
    _kill_mid_adopt(project, night)
    assert journal_pending(project) and _current(project) != old
    receipt = adopt(project, night)  # no explicit recover(): adopt must do it itself
    proposed = project.night_dir(night) / "proposed"
    assert _current(project) == {
        name: (proposed / name).read_bytes() for name in ("CLAUDE.md", "SKILL.md")
    }
    assert not journal_pending(project) and receipt.night_id == night


def test_a_live_file_deleted_after_staging_makes_adopt_refuse(
    staged: tuple[SleepProject, dict[str, bytes], str],
) -> None:
    """Kills: the staging check skipped when the live file was deleted after staging (issue 20:
    adopt would recreate a file the user removed, from a proposal made against its old text)."""
    project, old, night = staged
    (project.path / "CLAUDE.md").unlink()
    with pytest.raises(StageMismatch, match=r"CLAUDE\.md changed since night"):
        adopt(project, night)
    assert not (project.path / "CLAUDE.md").exists()
    assert (project.path / "SKILL.md").read_bytes() == old["SKILL.md"]
    assert not journal_pending(project)


def test_adopt_keeps_a_symlinked_memory_file_and_its_mode(
    staged: tuple[SleepProject, dict[str, bytes], str], tmp_path: Path
) -> None:
    """Kills: Sleep's adopt replacing a symlinked CLAUDE.md (a dotfiles setup) with a regular
    file and resetting its mode; its rollback likewise (issue 53: one writer for both)."""
    import os
    import stat

    project, old, night = staged
    dotfiles = tmp_path / "dotfiles"
    dotfiles.mkdir()
    target = dotfiles / "CLAUDE.md"
    target.write_bytes(old["CLAUDE.md"])
    os.chmod(target, 0o640)
    live = project.path / "CLAUDE.md"
    live.unlink()
    live.symlink_to(target)
    adopt(project, night)
    assert live.is_symlink() and target.read_bytes() != old["CLAUDE.md"]
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o640
    rollback(project)
    assert live.is_symlink() and target.read_bytes() == old["CLAUDE.md"]
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o640
