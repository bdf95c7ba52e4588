"""Skill folders as skills authors keep them (issue 53, the nine defects): file modes and
symlinked SKILL.md files survive adopt and rollback (Sleep's adopt too, through the same
writer), bad or unwritable front matter and names the Agent Skills specification refuses are
user errors before any model call, CRLF and byte-order-mark files read and write back, one
broken file or sibling folder does not stop a description-only compile, and trigger data is
read as skill-creator writes it and refused when no run could learn from it."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Sequence
from pathlib import Path

import pytest
from test_skill_folder_adopt import DESCRIPTION_EDIT, compile_folder, make_folder
from typer.testing import CliRunner

from skillopt_dsl.cli import app
from skillopt_dsl.cli import skill_folder as folder_cli
from skillopt_dsl.errors import UserInputError
from skillopt_dsl.file_transaction import FilePlace, atomic_write, backup, transact
from skillopt_dsl.lm import LM
from skillopt_dsl.settings import CompileSettings
from skillopt_dsl.skill_folder import (
    SkillFolder,
    adopt_folder,
    describe,
    rollback_folder,
    stage_folder,
)
from skillopt_dsl.skill_folder.describe import DescriptionTask, train_description
from skillopt_dsl.skill_folder.trigger_data import load_trigger_splits, read_trigger_rows
from skillopt_dsl.testing import ScriptedLM
from tests.helpers import assert_closed, record_caches

runner = CliRunner()
NEW = "Write release notes from a changelog."


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def _adopted(tmp_path: Path, root: Path) -> Path:
    """Compile a description change on `root`, stage it and adopt it; returns the run dir."""
    run = tmp_path / "run"
    result, folder = compile_folder(root, run, [{**DESCRIPTION_EDIT, "new": NEW}], ("description",))
    assert stage_folder(result, folder).accepted
    adopt_folder(run)
    return run


# -- 1, 2: modes and symlinks ------------------------------------------------------------------


def test_adopt_keeps_the_mode_and_rollback_restores_it(tmp_path: Path) -> None:
    """Kills: a writer that leaves the temporary file's mode (0600 from mkstemp, or the umask's
    0644) on SKILL.md, and a rollback that does not put the old mode back."""
    root = make_folder(tmp_path)
    skill = root / "SKILL.md"
    os.chmod(skill, 0o664)
    run = _adopted(tmp_path, root)
    assert NEW in skill.read_text() and _mode(skill) == 0o664
    os.chmod(skill, 0o600)  # changed after the adopt: the rollback restores the bits as adopted
    rollback_folder(run)
    assert NEW not in skill.read_text() and _mode(skill) == 0o664


def test_a_symlinked_skill_md_keeps_its_link_and_its_target_changes(tmp_path: Path) -> None:
    """Kills: `os.replace` over the link itself (the link becomes a regular file and the
    dotfiles copy it points to never changes), on adopt and on rollback."""
    root = make_folder(tmp_path)
    dotfiles = tmp_path / "dotfiles"
    dotfiles.mkdir()
    target = dotfiles / "release-notes.SKILL.md"
    target.write_bytes((root / "SKILL.md").read_bytes())
    os.chmod(target, 0o640)
    (root / "SKILL.md").unlink()
    (root / "SKILL.md").symlink_to(target)
    before = target.read_bytes()
    run = _adopted(tmp_path, root)
    assert (root / "SKILL.md").is_symlink() and NEW in target.read_text()
    assert _mode(target) == 0o640
    assert not [p.name for p in dotfiles.iterdir() if p != target]  # no temporary left there
    rollback_folder(run)
    assert (root / "SKILL.md").is_symlink() and target.read_bytes() == before


def test_the_one_writer_keeps_links_and_modes_and_recovery_restores_the_mode(
    tmp_path: Path,
) -> None:
    """Kills: `atomic_write` (every writer of the package, Sleep's adopt included) replacing a
    link or resetting a mode, and a recovery after a failed swap that leaves the new mode."""
    target = tmp_path / "real.md"
    target.write_text("old")
    os.chmod(target, 0o604)
    link = tmp_path / "link.md"
    link.symlink_to(target)
    atomic_write(link, b"new")
    assert link.is_symlink() and target.read_text() == "new" and _mode(target) == 0o604
    place = FilePlace(root=tmp_path, backups=tmp_path / "backups", journal=tmp_path / "j.json")
    change = backup(place, "link.md").model_copy(update={"new_sha": "x", "new_mode": 0o600})

    def fail(_: str) -> None:
        raise OSError("injected")

    with pytest.raises(OSError, match="injected"):
        journal = json.dumps({"files": [change.model_dump()]})
        transact(place, journal, [change], {"link.md": b"newer"}, lambda: None, fail)
    assert link.is_symlink() and target.read_text() == "new" and _mode(target) == 0o604


# -- 3, 4, 5, 6: what is read, and what is refused before any call -------------------------------


def _counting_router(calls: list[int] | None = None) -> tuple[LM, list[int]]:
    """A scripted router that answers `none` and appends 1 to `calls` on every call."""
    counted = [] if calls is None else calls

    def reply(_messages: Sequence[dict[str, str]]) -> str:
        counted.append(1)
        return "none"

    return LM(ScriptedLM(reply, model="scripted/router")), counted


def _rows(path: Path, count: int = 60) -> Path:
    rows = [
        {"request": f"request {n} about the {'changelog' if n % 2 else 'weather'}",
         "should_trigger": bool(n % 2)}
        for n in range(count)
    ]  # fmt: skip
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def _train(tmp_path: Path, root: Path, calls: list[int] | None = None) -> list[int]:
    """Run `train_description` on `root` with a router counting its calls into `calls`."""
    cards = tmp_path / "cards.jsonl"
    cards.write_text(json.dumps({"name": "commit-message", "description": "Writes commits."}))
    lm, calls = _counting_router(calls)
    task = DescriptionTask(
        skill_folder=root,
        trigger_data=_rows(tmp_path / "rows.jsonl"),
        distractors=cards,
    )
    settings = CompileSettings(lm=lm, optimizer_lm=lm, run_dir=tmp_path / "run", threads=1)
    train_description(task, settings, None)
    return calls


def _skill_md(tmp_path: Path, text: str, name: str = "release-notes") -> Path:
    root = tmp_path / "skills" / name
    root.mkdir(parents=True, exist_ok=True)
    (root / "SKILL.md").write_bytes(text.encode("utf-8"))
    return root


def test_invalid_yaml_is_a_user_error_naming_skill_md_and_the_line(tmp_path: Path) -> None:
    """Kills: the YAML parser's own error escaping as an internal error ("report it") that
    points at `<unicode string>`, and a line number counted inside the front matter."""
    root = _skill_md(
        tmp_path, "---\nname: release-notes\ndescription: [Writes notes\nlicense: MIT\n---\nb\n"
    )
    with pytest.raises(
        UserInputError, match=r"SKILL\.md: the front matter is not valid YAML at line [45]"
    ):
        SkillFolder.read(root)
    calls: list[int] = []
    with pytest.raises(UserInputError, match=r"SKILL\.md"):
        _train(tmp_path, root, calls)
    assert calls == []


@pytest.mark.parametrize(
    ("front", "why"),
    [
        ("description: >\n  Writes notes.\n\n  From changelogs.\n", "several lines"),
        ('"description": Writes notes.\n', "cannot be rewritten"),
        ("{name: release-notes, description: Writes notes.}\n", "cannot be rewritten"),
    ],
)
def test_what_cannot_be_written_back_is_refused_before_the_first_call(
    tmp_path: Path, front: str, why: str
) -> None:
    """Kills: reading a folded description with a blank line or a quoted / flow-mapping key
    for the search and failing only at staging, after the budget is spent."""
    name = "" if front.startswith("{") else "name: release-notes\n"
    root = _skill_md(tmp_path, f"---\n{name}{front}---\n# Body\n")
    SkillFolder.read(root)  # read fine (as a card, say): only training is refused
    calls: list[int] = []
    with pytest.raises(UserInputError, match=why) as caught:
        _train(tmp_path, root, calls)
    assert "SKILL.md" in str(caught.value) and "nothing was run" in str(caught.value)
    assert calls == []


@pytest.mark.parametrize("bom", [b"", b"\xef\xbb\xbf"])
def test_crlf_and_byte_order_mark_files_read_and_write_back_in_kind(
    tmp_path: Path, bom: bytes
) -> None:
    """Kills: a front matter check that misses `---\\r\\n` (or a leading mark) and refuses a
    file that has a name; and a rewrite that drops the mark or turns CRLF into LF."""
    text = "---\r\nname: release-notes\r\ndescription: Write release notes.\r\nlicense: MIT\r\n"
    text += "---\r\n# Release notes\r\n\r\nBe brief.\r\n"
    root = make_folder(tmp_path)
    (root / "SKILL.md").write_bytes(bom + text.encode())
    folder = SkillFolder.read(root)
    assert (folder.name, folder.description) == ("release-notes", "Write release notes.")
    assert folder.body == "# Release notes\n\nBe brief.\n"
    _adopted(tmp_path, root)
    expected = text.replace("Write release notes.", NEW)
    assert (root / "SKILL.md").read_bytes() == bom + expected.encode()


def test_a_skill_md_mixing_line_endings_is_refused_before_a_call(tmp_path: Path) -> None:
    """Kills: writing back a CRLF file whose stray LF lines would all turn CRLF."""
    root = _skill_md(tmp_path, "---\r\nname: release-notes\r\ndescription: D.\r\n---\r\nx\ny\n")
    with pytest.raises(UserInputError, match="mixes CRLF and LF"):
        _train(tmp_path, root)


@pytest.mark.parametrize(
    ("name", "folder", "why"),
    [
        ("release-notes", "notes", "does not match its folder"),
        ("Release-Notes", "Release-Notes", "lowercase"),
        ("release_notes", "release_notes", "lowercase"),
        ("-notes", "-notes", "start or end"),
        ("release--notes", "release--notes", "--"),
        ("a" * 65, "a" * 65, "the most is 64"),
    ],
)
def test_names_the_specification_refuses_are_refused_before_a_call(
    tmp_path: Path, name: str, folder: str, why: str
) -> None:
    """Kills: training and staging a skill whose name an agent would refuse to load (each rule
    of the Agent Skills specification: matches its folder, lowercase letters, digits and single
    hyphens, at most 64 characters)."""
    root = _skill_md(tmp_path, f"---\nname: {name}\ndescription: Writes notes.\n---\nb\n", folder)
    calls: list[int] = []
    with pytest.raises(UserInputError, match=why):
        _train(tmp_path, root, calls)
    assert calls == []


# -- 7, 8: trigger data with one label; a broken file or sibling ---------------------------------


@pytest.fixture
def fake_models(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    lm, calls = _counting_router()
    monkeypatch.setattr(folder_cli, "folder_models", lambda flags: (lm, lm))
    return calls


def _cli_compile(root: Path, data: Path, run: Path, *extra: str) -> tuple[int, str]:
    args = ["compile", "--skill-folder", str(root), "--trigger-data", str(data)]
    result = runner.invoke(app, [*args, "--run-dir", str(run), "--threads", "1", *extra])
    return result.exit_code, result.output


def test_compile_refuses_one_label_trigger_data_like_sleep_describe(
    tmp_path: Path, fake_models: list[int]
) -> None:
    """Kills: `compile --skill-folder` training on rows that all say should-trigger (the
    constant answer "always" is perfect: nothing can be certified) and staging a change."""
    root = make_folder(tmp_path)
    data = tmp_path / "rows.jsonl"
    data.write_text(
        "".join(json.dumps({"request": f"r {n}", "should_trigger": True}) + "\n" for n in range(40))
    )
    code, output = _cli_compile(root, data, tmp_path / "run")
    assert code != 0 and "one label only" in output and "40 should trigger" in output
    assert fake_models == [] and not (tmp_path / "run" / "skill_folder").exists()


def test_a_non_utf8_reference_and_a_broken_sibling_do_not_stop_a_description_compile(
    tmp_path: Path, fake_models: list[int], caplog: pytest.LogCaptureFixture
) -> None:
    """Kills: reading every `.md` strictly (one Latin-1 note stops the run although no
    reference trains) and reading the folders beside strictly (one broken distractor stops
    it); each is skipped with a warning naming it."""
    root = make_folder(tmp_path)
    (root / "references" / "legacy.md").write_bytes("café".encode("latin-1"))
    broken = tmp_path / "skills" / "broken"
    broken.mkdir()
    (broken / "SKILL.md").write_text("---\nname: [broken\n---\nx\n")
    other = tmp_path / "skills" / "commit-message"
    other.mkdir()
    (other / "SKILL.md").write_text("---\nname: commit-message\ndescription: Commits.\n---\nx\n")
    code, output = _cli_compile(root, _rows(tmp_path / "rows.jsonl"), tmp_path / "run")
    assert code == 0, output
    assert fake_models, "the compile ran"
    warned = caplog.text + output
    assert "legacy.md" in warned and "broken" in warned
    with pytest.raises(UserInputError, match=r"legacy\.md cannot be trained"):
        SkillFolder.read(root).document(("references/legacy.md",))


# -- 9: skill-creator's eval sets, conflicting labels, too few rows -----------------------------


def test_skill_creator_eval_sets_are_read_as_they_are(tmp_path: Path) -> None:
    """Kills: refusing skill-creator's `[{"query": ..., "should_trigger": ...}]` for its
    column names or for being one JSON array rather than JSONL."""
    rows = [{"query": f"q {n}", "should_trigger": n % 2 == 0, "note": "x"} for n in range(30)]
    path = tmp_path / "evals.json"
    path.write_text(json.dumps(rows, indent=2))
    read = read_trigger_rows(path)
    assert read[0] == {"request": "q 0", "should_trigger": True} and len(read) == 30
    splits = load_trigger_splits(path)
    assert len(splits.train) + len(splits.val) + len(splits.test) == 30


def test_a_request_labelled_both_ways_is_refused(tmp_path: Path) -> None:
    """Kills: accepting the same request as should and should-not trigger (the gate would score
    any description wrong on one of them)."""
    rows = [{"query": "Summarise this PDF", "should_trigger": True},
            {"query": "summarise  this pdf", "should_trigger": False}]  # fmt: skip
    path = tmp_path / "evals.json"
    path.write_text(json.dumps(rows))
    with pytest.raises(UserInputError, match="labelled both"):
        read_trigger_rows(path)


@pytest.mark.parametrize("count", [4, 8, 12])
def test_too_few_rows_are_refused_with_how_many_are_needed(tmp_path: Path, count: int) -> None:
    """Kills: running 4-12 rows, whose validation split is too small for the gate to accept
    even a description that fixes every request, without saying how many are needed."""
    with pytest.raises(UserInputError, match=r"fewer than 6 validation requests \(about 20 rows"):
        load_trigger_splits(_rows(tmp_path / "rows.jsonl", count))
    assert len(load_trigger_splits(_rows(tmp_path / "more.jsonl", 20)).val) >= 6


def test_the_description_compile_closes_its_replay_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kills: the cache `train_description` replays the compile's calls from left open until
    garbage collection (SQLite's `cache.sqlite-wal` and `-shm` then stay in the run folder,
    or not, by chance)."""
    opened = record_caches(monkeypatch, describe)
    _train(tmp_path, _skill_md(tmp_path, "---\nname: release-notes\ndescription: D.\n---\nb\n"))
    assert len(opened) == 1
    assert_closed(opened[0])
