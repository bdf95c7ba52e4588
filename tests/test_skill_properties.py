"""Property tests for `Skill.apply` (it never raises, protected regions never change) and for
`token_distance` (a true metric, so learning-rate bounds compose)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from skillopt_dsl.skill import (
    PROTECTED_CLOSE,
    PROTECTED_OPEN,
    Add,
    Delete,
    Replace,
    Skill,
    token_distance,
)

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

PIECES = [
    "# Title\n",
    "## Rules\n",
    "### Sub\n",
    "- Be brief.\n",
    "- Answer with one word.\n",
    "\n",
    "```\n# code\n```\n",
    "Some text here. ",
    "<!-- protected -->",
    "<!-- /protected -->",
]

documents = st.one_of(
    st.text(max_size=300),
    st.lists(st.sampled_from(PIECES) | st.text(max_size=20), max_size=15).map("".join),
)
anchor_text = st.one_of(
    st.text(max_size=40),
    st.sampled_from(["Rules", "## Rules", "Be brief.", "Be  brief", "Answer with one wrd.", " "]),
)


def edits_strategy(
    anchors: st.SearchStrategy[str],
) -> st.SearchStrategy[list[Add | Replace | Delete]]:
    edit = st.one_of(
        st.builds(Add, text=st.text(max_size=40), after=st.none() | anchors),
        st.builds(Replace, old=anchors, new=st.text(max_size=40)),
        st.builds(Delete, old=anchors),
    )
    return st.lists(edit, max_size=5)


@SETTINGS
@given(doc=documents, edits=edits_strategy(anchor_text))
def test_apply_never_raises_and_reports_every_edit(
    doc: str, edits: list[Add | Replace | Delete]
) -> None:
    skill = Skill(doc)
    new, report = skill.apply(edits)
    assert skill.text == doc
    assert [o.edit for o in report.outcomes] == edits
    assert {o.status for o in report.outcomes} <= {"applied", "not_matched", "refused"}
    if not report.applied:
        assert new.text == doc
    for outcome in report.outcomes:
        if outcome.status == "applied":
            assert outcome.match is not None
        if outcome.status == "not_matched":
            assert outcome.match is None and outcome.reason


@st.composite
def protected_documents(draw: st.DrawFn) -> tuple[str, str]:
    """A document with one terminated protected block; returns (document, block)."""
    clean = st.text(max_size=80).filter(lambda s: "<!--" not in s and "-->" not in s)
    body = draw(clean)
    block = f"{PROTECTED_OPEN}{body}{PROTECTED_CLOSE}"
    before = draw(st.lists(st.sampled_from(PIECES[:8]) | clean, max_size=6).map("".join))
    after = draw(st.lists(st.sampled_from(PIECES[:8]) | clean, max_size=6).map("".join))
    return before + block + after, block


@SETTINGS
@given(data=st.data(), case=protected_documents())
def test_protected_block_survives_random_edits(data: st.DataObject, case: tuple[str, str]) -> None:
    doc, block = case
    # Anchors are drawn from the document itself so that many edits match, some overlapping
    # the protected block, some touching its markers.
    substrings = st.builds(
        lambda i, n: doc[i : i + n],
        st.integers(0, max(len(doc) - 1, 0)),
        st.integers(1, 60),
    )
    edits = data.draw(edits_strategy(substrings | anchor_text))
    new, report = Skill(doc).apply(edits)
    assert block in new.text
    if not report.applied:
        assert new.text == doc


WORDS = ["be", "brief", "answer", "one", "word", ".", ",", "-", "#", "rules", "even", "odd"]
token_texts = st.lists(st.sampled_from(WORDS), max_size=25).map(" ".join)


@SETTINGS
@given(token_texts, token_texts, token_texts)
def test_token_distance_is_a_metric(a: str, b: str, c: str) -> None:
    """Kills: `token_distance` computed from difflib opcodes (sum of max(i2-i1, j2-j1) over
    non-equal opcodes), which breaks the triangle inequality that Beam's trust region and the
    door's composed sweep budget rely on; also any asymmetric or non-zero-on-equal distance."""
    ab, bc, ac = token_distance(a, b), token_distance(b, c), token_distance(a, c)
    assert ac <= ab + bc, (a, b, c, ab, bc, ac)
    assert ab == token_distance(b, a)
    assert (ab == 0) == (a.split() == b.split())


def test_token_distance_counts_one_substitution_as_one() -> None:
    """Kills: a distance that counts a substituted token as a delete plus an insert (InDel)."""
    assert token_distance("a b c d", "a x c d") == 1
    assert token_distance("a b c d", "b c d e") == 2
