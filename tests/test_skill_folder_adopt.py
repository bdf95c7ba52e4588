"""Stage, adopt and rollback of a skill folder (issue 40, part 4): compile writes nothing to the
user's folder; the staged change touches only the accepted parts; adopt refuses changed live
files, backs up, and is one transaction (all old files after a kill halfway); rollback restores
the exact bytes. Every model here is a scripted fake."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import pytest

import skillopt_dsl as sd
from skillopt_dsl.compile import CompileResult
from skillopt_dsl.errors import UserInputError
from skillopt_dsl.lm import LM
from skillopt_dsl.optimizers import GradientText, ReflectiveProposer
from skillopt_dsl.skill_folder import SkillFolder
from skillopt_dsl.skill_folder.adopt import (
    JOURNAL_NAME,
    FolderChanged,
    adopt_folder,
    recover_folder,
    rollback_folder,
)
from skillopt_dsl.skill_folder.stage import read_folder_manifest, stage_dir, stage_folder
from skillopt_dsl.testing import ScriptedLM
from skillopt_dsl.types import Example

SKILL_MD = (
    "---\nname: release-notes\ndescription: Write release notes.\nlicense: MIT\n---\n"
    "# Release notes\n\nBe brief.\n"
)
DESCRIPTION_EDIT = {"kind": "replace", "old": "Write release notes.", "rationale": "r"}
REFERENCE_EDIT = {"kind": "replace", "old": "No hype.", "rationale": "r"}
Snapshot = dict[str, tuple[bytes, int]]


class FakeFolderRouter(sd.SkillModule):
    """FAKE module: says whether a request is for this skill; the scripted target answers yes
    exactly when the trained document mentions the request's topic."""

    request: str = sd.InputField()
    answer: Literal["yes", "no"] = sd.OutputField()
    metric = sd.metrics.exact_match("answer")


def _fake_target(messages: Sequence[dict[str, str]]) -> str:
    """FAKE target: 'yes' when the request's topic word appears in the system message."""
    system = messages[0]["content"] if messages[0]["role"] == "system" else ""
    topic = messages[-1]["content"].split()[-1]
    return "yes" if topic in system else "no"


def _fake_reflector(edits: list[dict[str, str]]) -> ScriptedLM:
    """FAKE optimizer model: proposes `edits` as one group."""
    return ScriptedLM(lambda _messages: json.dumps({"edits": edits}), model="scripted/reflector")


def _examples(prefix: str, count: int) -> list[Example]:
    rows = []
    for n in range(count):
        topic = "changelog" if n % 2 == 0 else "weather"
        label = "yes" if topic == "changelog" else "no"
        rows.append(
            Example(id=f"{prefix}{n}", inputs={"request": f"{n} {topic}"}, labels={"answer": label})
        )
    return rows


def make_folder(tmp_path: Path) -> Path:
    """A skill folder with a description, a body, two reference files and a template."""
    root = tmp_path / "skills" / "release-notes"
    (root / "references").mkdir(parents=True)
    (root / "SKILL.md").write_bytes(SKILL_MD.encode())
    (root / "references" / "style.md").write_bytes(b"Use bullets.\n")
    (root / "references" / "tone.md").write_bytes(b"No hype.")
    (root / "template.txt").write_bytes(b"{{notes}}")
    return root


def compile_folder(
    root: Path, run_dir: Path, edits: list[dict[str, str]], parts: Sequence[str]
) -> tuple[CompileResult, SkillFolder]:
    """Compile the fake router on `root`'s `parts` with one proposed group of `edits`."""
    folder = SkillFolder.read(root)
    result = sd.compile(
        FakeFolderRouter(skill=folder.seed_skill(parts)),
        _examples("t", 8),
        _examples("v", 30),
        optimizer=GradientText(
            proposers=[ReflectiveProposer(read_successes=False)], epochs=1, batch_size=8
        ),
        lm=LM(ScriptedLM(_fake_target)),
        optimizer_lm=LM(_fake_reflector(edits)),
        run_dir=run_dir,
        threads=2,
    )
    return result, folder


def snapshot(root: Path) -> Snapshot:
    """Every file under `root` (hidden ones too): its bytes and its mtime in nanoseconds."""
    return {
        p.relative_to(root).as_posix(): (p.read_bytes(), p.stat().st_mtime_ns)
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.fixture
def staged_two_files(tmp_path: Path) -> tuple[Path, Path, Snapshot]:
    """A staged change rewriting SKILL.md's description and references/tone.md."""
    root = make_folder(tmp_path)
    edits = [
        {**DESCRIPTION_EDIT, "new": "Write release notes from a changelog."},
        {**REFERENCE_EDIT, "new": "No hype. Cite the changelog."},
    ]
    before = snapshot(root)
    result, folder = compile_folder(root, tmp_path / "run", edits, ("description", "references"))
    assert result.improved
    staged = stage_folder(result, folder)
    assert [c.path for c in staged.changes] == ["SKILL.md", "references/tone.md"]
    return root, tmp_path / "run", before


def test_compile_and_stage_write_nothing_to_the_folder(tmp_path: Path) -> None:
    """Kills: staging that writes the new text into the live folder (or leaves a journal or a
    temporary file there) before an explicit adopt."""
    root = make_folder(tmp_path)
    before = snapshot(root)
    edits = [{**DESCRIPTION_EDIT, "new": "Write release notes from a changelog."}]
    result, folder = compile_folder(root, tmp_path / "run", edits, ("description", "body"))
    staged = stage_folder(result, folder)
    assert staged.accepted and staged.diff_path is not None
    assert snapshot(root) == before
    proposed = stage_dir(tmp_path / "run") / "proposed" / "SKILL.md"
    assert proposed.read_text() == SKILL_MD.replace("notes.", "notes from a changelog.", 1)
    diff = staged.diff_path.read_text()
    assert "-description: Write release notes.\n" in diff
    assert "+description: Write release notes from a changelog.\n" in diff
    assert "adopt" in staged.adopt_command and str(tmp_path / "run") in staged.adopt_command


def test_the_manifest_pins_compile_time_hashes_and_the_gate_evidence(tmp_path: Path) -> None:
    """Kills: pinning the hashes of the files as they are at staging time (an edit made during
    the compile would then be adopted over), or dropping the gate's evidence."""
    root = make_folder(tmp_path)
    edits = [{**DESCRIPTION_EDIT, "new": "Write release notes from a changelog."}]
    result, folder = compile_folder(root, tmp_path / "run", edits, ("description", "body"))
    (root / "SKILL.md").write_text(SKILL_MD + "edited during the run\n")
    manifest = stage_folder(result, folder).manifest
    assert manifest.live == {"SKILL.md": _sha(SKILL_MD.encode())}
    assert manifest.evidence.seed_val == result.seed_val_score < manifest.evidence.best_val
    assert manifest.evidence.run_id == "run" and manifest.evidence.accepted_decisions >= 1
    with pytest.raises(FolderChanged, match="changed since run"):
        adopt_folder(tmp_path / "run")


def test_only_the_accepted_part_is_staged_and_untouched_files_keep_bytes_and_mtimes(
    tmp_path: Path,
) -> None:
    """Kills: rewriting every trained file on adopt (SKILL.md and style.md were trained but
    not changed: their bytes and mtimes must stay), or a journal/temporary file left behind."""
    root = make_folder(tmp_path)
    edits = [{**REFERENCE_EDIT, "new": "No hype. Cite the changelog."}]
    before = snapshot(root)
    result, folder = compile_folder(
        root, tmp_path / "run", edits, ("description", "body", "references")
    )
    staged = stage_folder(result, folder)
    assert [c.path for c in staged.changes] == ["references/tone.md"]
    assert sorted(read_folder_manifest(tmp_path / "run").proposed) == ["references/tone.md"]
    adopt_folder(tmp_path / "run")
    after = snapshot(root)
    assert sorted(after) == sorted(before)
    assert after["references/tone.md"][0] == b"No hype. Cite the changelog."
    for path in ("SKILL.md", "references/style.md", "template.txt"):
        assert after[path] == before[path], path


def test_adopt_then_rollback_restores_the_exact_bytes(
    staged_two_files: tuple[Path, Path, Snapshot],
) -> None:
    """Kills: backing a file up after it was replaced (the backup would hold the new bytes), or
    a rollback that writes anything but the backups."""
    root, run, before = staged_two_files
    receipt = adopt_folder(run)
    assert {c.path for c in receipt.files} == {"SKILL.md", "references/tone.md"}
    assert (
        (root / "SKILL.md")
        .read_text()
        .startswith(
            "---\nname: release-notes\ndescription: Write release notes from a changelog.\n"
        )
    )
    backups = stage_dir(run) / "backups"
    assert {p.name for p in backups.iterdir()} == {
        f"{_sha(before[path][0])}.bak" for path in ("SKILL.md", "references/tone.md")
    }
    rollback_folder(run)
    assert {k: v[0] for k, v in snapshot(root).items()} == {k: v[0] for k, v in before.items()}
    with pytest.raises(UserInputError, match="nothing to roll back"):
        rollback_folder(run)


def test_adopt_refuses_a_live_file_changed_since_staging(
    staged_two_files: tuple[Path, Path, Snapshot],
) -> None:
    """Kills: dropping the hash check (adopt would overwrite the user's new edit)."""
    root, run, _ = staged_two_files
    (root / "references" / "tone.md").write_bytes(b"No hype. My own edit.")
    edited = snapshot(root)
    with pytest.raises(FolderChanged, match=r"tone\.md changed since run .*Compile again"):
        adopt_folder(run)
    assert snapshot(root) == edited


def test_adopt_refuses_a_tampered_staged_file(
    staged_two_files: tuple[Path, Path, Snapshot],
) -> None:
    """Kills: adopting the staged bytes without checking them against the manifest."""
    root, run, before = staged_two_files
    (stage_dir(run) / "proposed" / "SKILL.md").write_text("tampered")
    with pytest.raises(FolderChanged, match="modified after staging"):
        adopt_folder(run)
    assert snapshot(root) == before


def test_rollback_refuses_a_file_edited_since_adopt(
    staged_two_files: tuple[Path, Path, Snapshot],
) -> None:
    """Kills: a rollback that silently throws away edits made after adopting."""
    root, run, _ = staged_two_files
    adopt_folder(run)
    (root / "SKILL.md").write_text("my edit after adopting\n")
    with pytest.raises(FolderChanged, match="changed since it was adopted"):
        rollback_folder(run)
    assert (root / "SKILL.md").read_text() == "my edit after adopting\n"


def test_a_second_adopt_says_it_is_already_adopted(
    staged_two_files: tuple[Path, Path, Snapshot],
) -> None:
    """Kills: a second adopt blamed on a 'changed' file (it is our own change) or applied twice."""
    _, run, _ = staged_two_files
    adopt_folder(run)
    with pytest.raises(UserInputError, match="already adopted"):
        adopt_folder(run)


def test_an_adopt_failing_between_two_swaps_leaves_every_old_file(
    staged_two_files: tuple[Path, Path, Snapshot],
) -> None:
    """Kills: a transaction that, failing after its first swap, leaves old and new files mixed."""
    root, run, before = staged_two_files

    def fail_after_first(path: str) -> None:
        raise OSError(f"injected failure after {path}")

    with pytest.raises(OSError, match="injected"):
        adopt_folder(run, after_replace=fail_after_first)
    assert {k: v[0] for k, v in snapshot(root).items()} == {k: v[0] for k, v in before.items()}
    assert not (root / JOURNAL_NAME).exists()


def _kill_mid_adopt(run: Path) -> None:
    """Run adopt in a child process that is killed (os._exit) right after its first swap."""
    script = textwrap.dedent(
        f"""
        import os
        from skillopt_dsl.skill_folder.adopt import adopt_folder
        adopt_folder({str(run)!r}, after_replace=lambda path: os._exit(9))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 9, done.stderr


def test_an_adopt_killed_halfway_is_undone_by_the_next_command(
    staged_two_files: tuple[Path, Path, Snapshot],
) -> None:
    """Kills: recover not run at the start of a command, or a recover that leaves the first
    swapped file new (the folder would mix old and new files)."""
    root, run, before = staged_two_files
    _kill_mid_adopt(run)
    assert (root / JOURNAL_NAME).exists()
    assert (root / "SKILL.md").read_bytes() != before["SKILL.md"][0]
    assert recover_folder(root) is not None and not (root / JOURNAL_NAME).exists()
    assert {k: v[0] for k, v in snapshot(root).items()} == {k: v[0] for k, v in before.items()}
    _kill_mid_adopt(run)
    adopt_folder(run)  # no explicit recover: adopt runs it first, then adopts cleanly
    assert (root / "references" / "tone.md").read_bytes() == b"No hype. Cite the changelog."


def test_nothing_is_staged_when_the_gate_accepts_nothing(tmp_path: Path) -> None:
    """Kills: staging the seed (or a rejected candidate) as a change to adopt."""
    root = make_folder(tmp_path)
    useless = [{**REFERENCE_EDIT, "new": "No hype at all."}]
    result, folder = compile_folder(root, tmp_path / "run", useless, ("references",))
    assert not result.improved
    staged = stage_folder(result, folder)
    assert not staged.accepted and staged.diff_path is None and staged.changes == ()
    assert "accepted no candidate" in staged.manifest.note
    assert not (stage_dir(tmp_path / "run") / "proposed").exists()
    with pytest.raises(UserInputError, match=r"nothing to adopt.*accepted no candidate"):
        adopt_folder(tmp_path / "run")


def test_staging_a_result_from_another_folder_is_refused(tmp_path: Path) -> None:
    """Kills: staging a change against a folder the run never read (its diff would be wrong)."""
    root = make_folder(tmp_path)
    edits = [{**DESCRIPTION_EDIT, "new": "Write release notes from a changelog."}]
    result, _ = compile_folder(root, tmp_path / "run", edits, ("description", "body"))
    (root / "SKILL.md").write_text(SKILL_MD.replace("Be brief.", "Be very brief."))
    with pytest.raises(UserInputError, match="not compiled from"):
        stage_folder(result, SkillFolder.read(root))


def _sha(data: bytes) -> str:
    import hashlib

    return hashlib.sha256(data).hexdigest()


def test_the_journal_is_hidden_from_the_folder_reader(tmp_path: Path) -> None:
    """Kills: a journal name the folder reader would train as a reference file."""
    root = make_folder(tmp_path)
    (root / JOURNAL_NAME).write_text("{}")
    assert "references/tone.md" in SkillFolder.read(root).reference_paths
    assert all(JOURNAL_NAME not in p for p in SkillFolder.read(root).reference_paths)
    os.unlink(root / JOURNAL_NAME)
