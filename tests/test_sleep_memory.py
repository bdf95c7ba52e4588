"""The memory file's learned block: only the block is ever rewritten; broken markers refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from skillopt_dsl.sleep.errors import MemoryFileError
from skillopt_dsl.sleep.live import compose, split_document
from skillopt_dsl.sleep.memory import LEARNED_END, LEARNED_START, MemoryFile

USER_TEXT = "# shop\n\nMy own notes.\n"


def test_a_broken_end_marker_is_refused_never_truncated() -> None:
    """Kills: treating a missing end marker as "block runs to the end of the file" (everything
    the user wrote after the start marker would be replaced)."""
    text = f"{USER_TEXT}{LEARNED_START}\n- learned\n\n## My section after\nkeep me\n"
    with pytest.raises(MemoryFileError, match="1 start and 0 end"):
        MemoryFile.parse(Path("CLAUDE.md"), text)
    with pytest.raises(MemoryFileError, match="before its start"):
        MemoryFile.parse(Path("CLAUDE.md"), f"{LEARNED_END}\n{LEARNED_START}\n")
    with pytest.raises(MemoryFileError, match="2 start"):
        MemoryFile.parse(
            Path("CLAUDE.md"), f"{LEARNED_START}{LEARNED_END}{LEARNED_START}{LEARNED_END}"
        )


def test_only_the_block_changes_and_the_rest_is_kept_byte_for_byte() -> None:
    """Kills: rewriting or normalising the user's text around the block."""
    after = "\n\n## After\ntrailing  spaces  \r\nkept\n"
    text = f"{USER_TEXT}{LEARNED_START}\n- old rule\n{LEARNED_END}{after}"
    memory = MemoryFile.parse(Path("CLAUDE.md"), text)
    assert memory.learned == "- old rule"
    new = memory.with_learned("- new rule")
    assert new == f"{USER_TEXT}{LEARNED_START}\n- new rule\n{LEARNED_END}{after}"
    assert memory.outside == USER_TEXT + after


def test_a_file_without_markers_gets_a_block_appended() -> None:
    """Kills: refusing (or overwriting) a memory file that has no learned block yet."""
    memory = MemoryFile.parse(Path("AGENTS.md"), USER_TEXT)
    assert not memory.has_block and memory.learned == ""
    assert memory.with_learned("- rule") == f"{USER_TEXT}\n{LEARNED_START}\n- rule\n{LEARNED_END}\n"


def test_the_trainable_document_splits_back_into_skill_and_block() -> None:
    """Kills: an optimiser edit leaking into the memory file's own text, or the skill file's
    text ending up in the learned block."""
    doc = compose("# Skill\nDo X.", USER_TEXT, "- learned")
    edited = doc.text.replace("Do X.", "Do X well.") + "\n- another rule\n"
    skill, learned = split_document(edited)
    assert skill == "# Skill\nDo X well."
    assert learned == "- learned\n\n- another rule"
    from skillopt_dsl.skill import Replace

    blocked, report = doc.apply([Replace(old="My own notes.", new="Mine.")])
    assert blocked == doc and report.outcomes[0].status == "refused"
