"""Tests for `skillopt_dsl.skill`: the Skill document, typed edits, matching and protection."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import random
from pathlib import Path

import pydantic
import pytest

from skillopt_dsl.errors import UserInputError
from skillopt_dsl.skill import (
    FUZZY_THRESHOLD,
    Add,
    ApplyReport,
    Delete,
    EditOutcome,
    Replace,
    Skill,
    diff,
    measure_change,
    parse_edits,
    tokenize,
)

DOC = """Preamble line.

# Task

Judge sports sentences.

## Rules

- Be brief.
- Answer with one word.

### Details

Some detail here.

## Examples

Example text.
"""


def apply_one(text: str, edit: Add | Replace | Delete) -> tuple[str, EditOutcome]:
    new, report = Skill(text).apply([edit])
    assert len(report.outcomes) == 1
    return new.text, report.outcomes[0]


# --------------------------------------------------------------------------- basics


def test_hash_is_full_sha256_of_utf8_text() -> None:
    skill = Skill("Réponds en un mot.\n")
    assert skill.hash == hashlib.sha256("Réponds en un mot.\n".encode()).hexdigest()
    assert len(skill.hash) == 64
    assert Skill("a").hash != Skill("a ").hash


def test_tokenize_and_token_count() -> None:
    assert tokenize("Hello, world! x_1") == ["Hello", ",", "world", "!", "x_1"]
    assert Skill("Hello, world!").token_count == 4
    assert Skill("").token_count == 0


def test_skill_rejects_non_string() -> None:
    with pytest.raises(UserInputError, match="must be a str"):
        Skill(b"bytes")  # type: ignore[arg-type]


def test_skill_is_frozen() -> None:
    skill = Skill("x")
    with pytest.raises(dataclasses.FrozenInstanceError):
        skill.text = "y"  # type: ignore[misc]


def test_sections_split_on_headings_with_preamble() -> None:
    sections = Skill(DOC).sections()
    assert [(s.heading, s.level) for s in sections] == [
        (None, 0),
        ("Task", 1),
        ("Rules", 2),
        ("Details", 3),
        ("Examples", 2),
    ]
    assert "".join(s.text for s in sections) == DOC
    for section in sections:
        assert DOC[section.start : section.end] == section.text
    assert sections[2].text.startswith("## Rules\n")


def test_sections_ignore_headings_in_code_fences_and_strip_closing_hashes() -> None:
    text = "\n\n# One #\n```md\n# not a heading\n```\n~~~\n## also not\n~~~\n##Two\n## Three ##\n"
    sections = Skill(text).sections()
    assert [(s.heading, s.level) for s in sections] == [("One", 1), ("Three", 2)]
    assert "# not a heading" in sections[0].text


def test_from_file_keeps_bytes_exactly(tmp_path: Path) -> None:
    path = tmp_path / "skill.md"
    path.write_bytes(b"# T\r\n\r\nline  \r\n")
    assert Skill.from_file(path).text == "# T\r\n\r\nline  \r\n"
    with pytest.raises(UserInputError, match="does not exist"):
        Skill.from_file(tmp_path / "missing.md")
    (tmp_path / "bad.md").write_bytes(b"\xff\xfe")
    with pytest.raises(UserInputError, match="UTF-8"):
        Skill.from_file(tmp_path / "bad.md")


# --------------------------------------------------------------------------- Add


def test_add_by_heading_title_goes_to_end_of_section_subtree() -> None:
    text, outcome = apply_one(DOC, Add(after="Rules", text="- New rule."))
    assert outcome.status == "applied" and outcome.match == "heading"
    assert "Some detail here.\n\n- New rule.\n\n## Examples" in text
    assert text.replace("- New rule.\n\n", "", 1) == DOC


def test_add_by_full_heading_line_and_list_stays_tight() -> None:
    doc = "# A\n\n## Rules\n\n- one\n- two\n\n## B\n\nb\n"
    text, outcome = apply_one(doc, Add(after="## Rules", text="- three"))
    assert outcome.match == "heading"
    assert text == "# A\n\n## Rules\n\n- one\n- two\n- three\n\n## B\n\nb\n"


def test_add_to_empty_last_section_without_trailing_newline() -> None:
    text, outcome = apply_one("# A\n\ntext\n\n## Empty", Add(after="Empty", text="Filled."))
    assert outcome.status == "applied"
    assert text == "# A\n\ntext\n\n## Empty\n\nFilled.\n"


def test_add_without_anchor_appends_at_end() -> None:
    text, outcome = apply_one("Answer with one word.", Add(text="Be concise."))
    assert (outcome.status, outcome.match) == ("applied", "end")
    assert text == "Answer with one word.\n\nBe concise.\n"
    text, _ = apply_one("", Add(text="First."))
    assert text == "First.\n"


def test_add_after_exact_anchor_inserts_after_its_line() -> None:
    text, outcome = apply_one(DOC, Add(after="Be brief", text="- Never guess."))
    assert (outcome.status, outcome.match) == ("applied", "exact")
    assert "- Be brief.\n- Never guess.\n- Answer with one word.\n" in text


def test_add_after_whitespace_insensitive_anchor() -> None:
    text, outcome = apply_one(DOC, Add(after="Judge   sports\nsentences.", text="Be careful."))
    assert (outcome.status, outcome.match) == ("applied", "whitespace")
    assert "Judge sports sentences.\n\nBe careful.\n\n## Rules" in text


def test_add_after_fuzzy_anchor() -> None:
    text, outcome = apply_one(DOC, Add(after="Judge sport sentences.", text="Be careful."))
    assert (outcome.status, outcome.match) == ("applied", "fuzzy")
    assert outcome.similarity is not None and outcome.similarity >= FUZZY_THRESHOLD
    assert "Judge sports sentences.\n\nBe careful.\n" in text


def test_add_with_ambiguous_heading_is_not_matched() -> None:
    doc = "## Notes\n\na\n\n## Notes\n\nb\n"
    text, outcome = apply_one(doc, Add(after="Notes", text="c"))
    assert outcome.status == "not_matched"
    assert "ambiguous: 2 headings" in outcome.reason
    assert text == doc


def test_add_with_unknown_anchor_is_not_matched() -> None:
    text, outcome = apply_one(DOC, Add(after="Nonexistent section xyz", text="c"))
    assert outcome.status == "not_matched" and outcome.match is None
    assert text == DOC


# --------------------------------------------------------------------------- Replace / Delete


def test_replace_exact() -> None:
    text, outcome = apply_one(DOC, Replace(old="one word", new="a single word"))
    assert (outcome.status, outcome.match, outcome.reason) == ("applied", "exact", "")
    assert text == DOC.replace("one word", "a single word")


def test_replace_whitespace_insensitive_maps_back_to_original_span() -> None:
    doc = "Keep this.\nAnswer   with\n  one word.\nKeep that.\n"
    text, outcome = apply_one(doc, Replace(old="Answer with one word.", new="Answer briefly."))
    assert (outcome.status, outcome.match) == ("applied", "whitespace")
    assert text == "Keep this.\nAnswer briefly.\nKeep that.\n"


def test_replace_fuzzy_above_threshold() -> None:
    old = "Answer with one wrd."  # one letter missing
    text, outcome = apply_one(DOC, Replace(old=old, new="Answer in one word only."))
    assert (outcome.status, outcome.match) == ("applied", "fuzzy")
    assert outcome.similarity is not None and 0.9 <= outcome.similarity < 1.0
    assert "- Answer in one word only.\n" in text
    assert text.count("\n") == DOC.count("\n")


def test_replace_fuzzy_below_threshold_is_not_matched_and_not_converted() -> None:
    new, report = Skill(DOC).apply([Replace(old="Answer with two sentences.", new="X")])
    outcome = report.outcomes[0]
    assert outcome.status == "not_matched"
    assert outcome.similarity is not None and outcome.similarity < FUZZY_THRESHOLD
    assert f"{outcome.similarity:.3f}" in outcome.reason
    assert new.text == DOC and "X" not in new.text
    assert report.applied == [] and not report.all_applied


def test_ambiguous_exact_match_is_reported() -> None:
    doc = "Be brief.\nThen be brief.\n"
    text, outcome = apply_one(doc, Replace(old="brief", new="short"))
    assert outcome.status == "not_matched"
    assert outcome.reason == "ambiguous: 2 occurrences"
    assert text == doc


def test_ambiguous_fuzzy_match_is_reported() -> None:
    doc = "- Answer with one word.\n\nOther.\n\n- Answer with one word.\n"
    text, outcome = apply_one(doc, Delete(old="Answer with one wurd."))
    assert outcome.status == "not_matched"
    assert outcome.reason.startswith("ambiguous: 2 fuzzy matches")
    assert text == doc


def test_delete_whole_line_removes_its_line_break() -> None:
    text, outcome = apply_one(DOC, Delete(old="- Be brief."))
    assert outcome.status == "applied"
    assert "## Rules\n\n- Answer with one word.\n" in text
    assert text == DOC.replace("- Be brief.\n", "")


def test_delete_part_of_a_line() -> None:
    text, outcome = apply_one(DOC, Delete(old=" sports"))
    assert outcome.status == "applied"
    assert "Judge sentences.\n" in text


def test_noop_and_empty_edits_are_refused() -> None:
    cases = [
        (Replace(old="Be brief.", new="Be brief."), "no-op"),
        (Replace(old="", new="x"), "empty anchor"),
        (Delete(old="  \n"), "empty anchor"),
        (Add(text="x", after=""), "empty anchor"),
        (Add(text="\n\n"), "no-op: empty text"),
    ]
    for edit, reason in cases:
        text, outcome = apply_one(DOC, edit)
        assert (outcome.status, outcome.reason) == ("refused", reason), edit
        assert text == DOC


def test_edits_apply_in_order_to_the_evolving_text() -> None:
    new, report = Skill("alpha\n").apply(
        [Replace(old="alpha", new="beta"), Replace(old="beta", new="gamma"), Delete(old="alpha")]
    )
    assert new.text == "gamma\n"
    assert [o.status for o in report.outcomes] == ["applied", "applied", "not_matched"]
    assert len(report.applied) == 2 and len(report.not_matched) == 1 and report.refused == []


def test_apply_never_mutates_the_original() -> None:
    skill = Skill(DOC)
    before_hash = skill.hash
    new, report = skill.apply([Replace(old="Be brief.", new="Be long."), Add(text="More.")])
    assert report.all_applied
    assert skill.text == DOC and skill.hash == before_hash
    assert new is not skill and new.text != DOC and new.hash != before_hash


# --------------------------------------------------------------------------- protection

PROTECTED_DOC = """# Skill

Intro.

## Rules

<!-- protected -->
- Never reveal the answer key.
- Never change this block.
<!-- /protected -->

- Editable rule.
"""
BLOCK = PROTECTED_DOC[PROTECTED_DOC.index("<!-- protected -->") : PROTECTED_DOC.index("\n\n- Edit")]


@pytest.mark.parametrize(
    "edit",
    [
        Replace(old="Never reveal the answer key.", new="Reveal it."),
        Replace(old="Never reveal the answer kee.", new="Reveal it."),  # fuzzy
        Replace(old="Intro.\n\n## Rules\n\n<!-- protected -->", new="Intro."),
        Delete(old="- Never change this block."),
        Delete(old="<!-- /protected -->"),
        Add(after="Never reveal the answer key.", text="- Inserted inside."),
        Replace(old="Editable rule.", new="x <!-- protected --> y"),
        Replace(old="Intro.", new="<!-- /protected -->"),
    ],
)
def test_protected_region_survives_and_edit_is_refused(edit: Replace | Delete | Add) -> None:
    text, outcome = apply_one(PROTECTED_DOC, edit)
    assert outcome.status == "refused", outcome
    assert "protected" in outcome.reason
    assert text == PROTECTED_DOC


def test_edits_outside_protected_region_still_apply() -> None:
    new, report = Skill(PROTECTED_DOC).apply(
        [Add(after="Rules", text="- Added."), Replace(old="Intro.", new="Hello.")]
    )
    assert report.all_applied
    assert BLOCK in new.text
    assert new.text.endswith("- Editable rule.\n- Added.\n")


def test_unterminated_protected_region_protects_to_end() -> None:
    doc = "# A\n\nfree text\n\n<!-- protected -->\nlocked\n"
    for edit in (Add(text="tail"), Add(after="A", text="x"), Replace(old="locked", new="open")):
        text, outcome = apply_one(doc, edit)
        assert outcome.status == "refused", edit
        assert text == doc
    text, outcome = apply_one(doc, Replace(old="free text", new="freer text"))
    assert outcome.status == "applied" and text.endswith("<!-- protected -->\nlocked\n")


# --------------------------------------------------------------------------- parsing and reports


def test_parse_edits_from_json_with_discriminator() -> None:
    data = json.dumps(
        [
            {"kind": "add", "text": "x", "after": "Rules", "rationale": "because"},
            {"kind": "replace", "old": "a", "new": "b"},
            {"kind": "delete", "old": "c"},
        ]
    )
    edits = parse_edits(data)
    assert [type(e) for e in edits] == [Add, Replace, Delete]
    assert edits[0] == Add(text="x", after="Rules", rationale="because")
    assert parse_edits([{"kind": "delete", "old": "c"}]) == [Delete(old="c")]


@pytest.mark.parametrize(
    "bad",
    [
        [{"kind": "rename", "old": "a"}],
        [{"kind": "delete", "old": "a", "extra": 1}],
        [{"kind": "replace", "old": "a"}],
    ],
)
def test_parse_edits_rejects_invalid(bad: list[dict[str, object]]) -> None:
    with pytest.raises(pydantic.ValidationError):
        parse_edits(bad)


def test_edits_are_frozen() -> None:
    edit = Delete(old="x")
    with pytest.raises(pydantic.ValidationError):
        edit.old = "y"  # type: ignore[misc]


def test_report_to_dict_is_json_ready() -> None:
    _, report = Skill(DOC).apply(
        [Replace(old="Be brief.", new="Be short."), Delete(old="nothing like this"), Add(text="")]
    )
    assert isinstance(report, ApplyReport)
    data = json.loads(json.dumps(report.to_dict()))
    assert (data["applied"], data["not_matched"], data["refused"]) == (1, 1, 1)
    assert data["outcomes"][0]["edit"] == {
        "kind": "replace",
        "old": "Be brief.",
        "new": "Be short.",
        "rationale": "",
    }
    assert data["outcomes"][0]["match"] == "exact"


# --------------------------------------------------------------------------- change and diff


def test_measure_change_identical_and_empty() -> None:
    assert measure_change(DOC, DOC) == 0.0
    assert measure_change("", "") == 0.0
    assert measure_change("", "one two") == 1.0
    assert measure_change(Skill("one two"), Skill("")) == 1.0


def test_measure_change_total_rewrite_is_one() -> None:
    assert measure_change("alpha beta gamma", "delta epsilon zeta") == 1.0
    words = [f"w{i}" for i in range(50)]
    assert measure_change(" ".join(words), " ".join(reversed(words))) <= 1.0


def test_measure_change_counts_changed_tokens() -> None:
    before = "a b c d e f g h i j"
    assert measure_change(before, "a b c d e X g h i j") == pytest.approx(0.1)
    assert measure_change(before, "a b c d e f g h i j k l") == pytest.approx(2 / 12)
    forward = measure_change(before, "a b Z d e f")
    backward = measure_change("a b Z d e f", before)
    assert forward == pytest.approx(backward)
    assert 0.0 < forward < 1.0


def test_diff_shows_changes() -> None:
    patch = diff("a\nb\n", Skill("a\nc\n"))
    assert "-b\n" in patch and "+c\n" in patch and patch.startswith("--- before")
    assert diff("same\n", "same\n") == ""
    assert "\\ No newline at end of file" in diff("a", "b")


# --------------------------------------------------------------------------- speed


def _big_document(size: int = 20_000) -> str:
    rng = random.Random(0)
    words = [
        "the",
        "model",
        "should",
        "answer",
        "with",
        "one",
        "word",
        "and",
        "never",
        "explain",
        "its",
        "reasoning",
    ]
    lines = [f"## Section {i}" if i % 12 == 0 else "" for i in range(10_000)]
    out: list[str] = []
    for index, heading in enumerate(lines):
        out.append(heading or "- " + " ".join(rng.choice(words) for _ in range(8)) + f" {index}.")
        if sum(map(len, out)) > size:
            break
    return "\n".join(out) + "\n"


def test_fuzzy_matching_on_a_20kb_document() -> None:
    # Speed is measured in bench/bench_edits.py, not asserted here.
    doc = _big_document()
    lines = doc.splitlines()
    target_line = lines[len(lines) // 2]
    misquoted = target_line.replace("e", "E", 1)
    long_target = "\n".join(lines[100:130]).replace("model", "modal", 2)
    new, report = Skill(doc).apply(
        [
            Replace(old=misquoted, new="- replaced"),
            Delete(old=long_target),
            Replace(old="completely absent sentence about cooking pasta", new="x"),
        ]
    )
    assert [o.status for o in report.outcomes] == ["applied", "applied", "not_matched"]
    assert [o.match for o in report.outcomes[:2]] == ["fuzzy", "fuzzy"]
    assert "- replaced\n" in new.text


def test_an_add_that_opens_an_existing_section_extends_it() -> None:
    """Kills: two proposals composed into one candidate that each open `## Output format`
    giving the skill two `## Output format` headings (issue 25, item 8)."""
    first = Add(after=None, text="## Output format\n\n- Reply with one word.")
    second = Add(after=None, text="## Output format\n\n- Write nothing else.")
    skill, report = Skill("Tag the review.").apply([first, second])
    assert skill.text.count("## Output format") == 1, skill.text
    assert "- Reply with one word." in skill.text and "- Write nothing else." in skill.text
    assert all(o.status == "applied" for o in report.outcomes)
    other_level, _ = skill.apply([Add(after=None, text="### Output format\n\n- Deeper.")])
    assert other_level.text.count("Output format") == 2, "a heading of another level is new"
