"""Property tests on bad input: arbitrary model output, hostile edits, malformed datasets.

`tests/test_skill_properties.py` covers one protected block; here: several blocks, edits aimed
at the markers themselves, output parsing for every field type, and dataset type checks.
"""

from __future__ import annotations

import math
from typing import Literal

import pydantic
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import skillopt_dsl as sd
from skillopt_dsl.data import load_splits
from skillopt_dsl.skill import PROTECTED_CLOSE, PROTECTED_OPEN, Add, Delete, Replace, Skill
from skillopt_dsl.types import Prediction

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


class Point(pydantic.BaseModel):
    x: int
    label: str


def module_with(annotation: object) -> sd.SkillModule:
    return sd.SkillModule.create(
        name="Probe",
        inputs={"question": str},
        outputs={"answer": annotation},
        skill="Answer.",
        metric=lambda e, p: 0.0,
    )


SINGLE_TYPES: list[object] = [
    Literal["yes", "no"],
    Literal["True", "False"],
    int,
    float,
    bool,
    str,
    list[str],
    Point,
]
MODULES = [module_with(t) for t in SINGLE_TYPES] + [
    sd.SkillModule.create(
        name="Multi",
        inputs={"q": str},
        outputs={"answer": int, "reason": str},
        skill="A.",
        metric=lambda e, p: 0.0,
    )
]
model_like_text = st.one_of(
    st.text(max_size=300),
    st.lists(
        st.sampled_from(
            ['{"answer": ', '"x"', "}", "{", "Answer:", "yes", "no", "True", "42", "-3.5e9",
             '{"x": 1, "label": "a"}', "<answer>", "</answer>", "\\", '"', "NaN", "1,000", "\n"]
        ) | st.text(max_size=10),
        max_size=20,
    ).map("".join),
)  # fmt: skip


@SETTINGS
@given(text=model_like_text, index=st.integers(0, len(MODULES) - 1))
def test_parse_never_raises_and_is_typed_or_errored(text: str, index: int) -> None:
    module = MODULES[index]
    prediction = module.parse(text)
    assert isinstance(prediction, Prediction) and prediction.raw == text
    assert set(prediction.outputs) == set(module.output_fields)
    if prediction.ok:
        assert all(v is not None for v in prediction.outputs.values())
    else:
        assert prediction.error and prediction.error.startswith("could not parse")


@SETTINGS
@given(text=model_like_text)
def test_parsed_literal_is_one_of_the_choices(text: str) -> None:
    prediction = MODULES[0].parse(text)
    assert not prediction.ok or prediction.outputs["answer"] in ("yes", "no")
    number = MODULES[2].parse(text)
    assert not number.ok or isinstance(number.outputs["answer"], int)


# -- edits against several protected blocks ---------------------------------------------------

clean_text = st.text(max_size=40).filter(lambda s: "<!--" not in s and "-->" not in s)


@st.composite
def documents_with_blocks(draw: st.DrawFn) -> tuple[str, list[str]]:
    blocks = [
        f"{PROTECTED_OPEN}{draw(clean_text)}{PROTECTED_CLOSE}"
        for _ in range(draw(st.integers(1, 3)))
    ]
    gaps = [draw(clean_text) for _ in range(len(blocks) + 1)]
    doc = gaps[0] + "".join(b + g for b, g in zip(blocks, gaps[1:], strict=True))
    return doc, blocks


@SETTINGS
@given(case=documents_with_blocks(), data=st.data())
def test_edits_aimed_at_protected_markers_never_change_any_block(
    case: tuple[str, list[str]], data: st.DataObject
) -> None:
    doc, blocks = case
    aimed = st.sampled_from([PROTECTED_OPEN, PROTECTED_CLOSE, *blocks, doc, doc[: len(doc) // 2]])
    anchors = aimed | clean_text
    edit = st.one_of(
        st.builds(Add, text=st.text(max_size=30) | aimed, after=st.none() | anchors),
        st.builds(Replace, old=anchors, new=st.text(max_size=30) | aimed),
        st.builds(Delete, old=anchors),
    )
    edits = data.draw(st.lists(edit, max_size=6))
    new, report = Skill(doc).apply(edits)
    for block in blocks:
        assert new.text.count(block) >= doc.count(block), "a protected block changed"
    assert len(report.outcomes) == len(edits)


# -- dataset loading --------------------------------------------------------------------------

BAD_VALUES = [
    {1, 2},
    b"bytes",
    object(),
    math.nan,
    math.inf,
    complex(1, 2),
    None,
    {"nested": {3}},
]


@settings(max_examples=60, deadline=None)
@given(
    column=st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=12),
    bad=st.sampled_from(BAD_VALUES),
    where=st.sampled_from(["input", "label"]),
    row=st.integers(0, 9),
)
def test_load_splits_rejects_wrong_types_naming_the_column(
    column: str, bad: object, where: str, row: int
) -> None:
    other = "zz_other" if column != "zz_other" else "zz_else"
    rows = [{column: f"v{i}", other: f"w{i}"} for i in range(10)]
    rows[row][column] = bad
    inputs, labels = ([column], [other]) if where == "input" else ([other], [column])
    with pytest.raises(sd.DataError) as caught:
        load_splits(rows, input_fields=inputs, label_fields=labels, sizes=(4, 3, 3), seed=0)
    message = str(caught.value)
    assert repr(column) in message and f"row {row}" in message


def test_load_splits_rejects_a_non_list_source_and_missing_columns() -> None:
    with pytest.raises(sd.UserInputError, match="expected a list of dicts"):
        load_splits(b"not rows", input_fields=["q"], label_fields=["a"])
    rows = [{"q": "x", "a": "y"}] * 2 + [{"q": "z", "a": "w"}] * 0
    with pytest.raises(sd.DataError, match="answer"):
        load_splits(rows, input_fields=["q"], label_fields=["answer"])
