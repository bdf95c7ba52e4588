"""Run reports: real run directories from compile() with ScriptedLM fakes, then plots and HTML."""

from __future__ import annotations

import base64
import json
import re
import shutil
import struct
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

import skillopt_dsl as sd
from skillopt_dsl.optimizers import GradientText, ReflectiveProposer
from skillopt_dsl.optimizers.optuna_lr import OptunaLR
from skillopt_dsl.report import load_run, load_sweep_trials, skill_diff, write_report
from skillopt_dsl.testing import ScriptedLM
from tests.helpers import Parity, parity_examples, parity_target

GOOD = {
    "kind": "add",
    "after": None,
    "text": "Check if the number is divisible by 2.",
    "rationale": "",
}
NOISE = {"kind": "add", "after": None, "text": "Be brief.", "rationale": ""}
PNGS = ("plot_scores.png", "plot_learning_rate.png", "plot_cost.png")


class TaggedParity(Parity):
    """Parity with markup in its seed skill (the report must escape it)."""

    skill = "Answer with one word, <b>even</b> & nothing else."


def reflector(first: dict[str, Any], after_rejection: dict[str, Any]) -> ScriptedLM:
    """Proposes `first`, then `after_rejection` once a rejected candidate is in the prompt."""

    def respond(messages: list[dict[str, str]]) -> str:
        rejected = "Already tried and rejected" in messages[-1]["content"]
        return json.dumps({"edits": [after_rejection if rejected else first]})

    return ScriptedLM(respond, model="scripted/reflector")


def target(messages: list[dict[str, str]]) -> str:
    """`parity_target`, except that NOISE makes it right on the training numbers (< 100): NOISE
    passes its training screen and reaches the gate, where it changes nothing."""
    number = int(messages[-1]["content"].split()[-1])
    if NOISE["text"] in messages[0]["content"] and number < 100:
        return "even" if number % 2 == 0 else "odd"
    return parity_target(messages)


def compile_run(run_dir: Path, module: sd.SkillModule, good: dict[str, Any] = GOOD) -> Path:
    # every proposal that passes its own mini-batch screen goes to the gate alone
    optimizer = GradientText(
        proposers=[ReflectiveProposer(read_successes=False)], epochs=2, batch_size=8,
        compose=1, confirm_steps=0, min_net=1.0, submit_at_net=0.0,
    )  # fmt: skip
    sd.compile(
        module,
        parity_examples(0, 16),
        parity_examples(100, 30),  # the fix is significant under any sane gate
        optimizer=optimizer,
        lm=ScriptedLM(target),
        optimizer_lm=reflector(NOISE, good),
        testset=parity_examples(200, 6),
        run_dir=run_dir,
        threads=1,
    )
    return run_dir


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return compile_run(tmp_path_factory.mktemp("run") / "parity", TaggedParity())


@pytest.fixture(scope="module")
def written(run_dir: Path) -> list[Path]:
    return write_report(run_dir)


class _Collector(HTMLParser):
    """Collects image sources, link targets, table rows and text; fails on unbalanced tags."""

    def __init__(self) -> None:
        super().__init__()
        self.images: list[dict[str, str | None]] = []
        self.links: list[str] = []
        self.rows = 0
        self.text: list[str] = []
        self.open: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "img":
            self.images.append(dict(attrs))
            return
        if tag == "meta":
            return
        self.open.append(tag)
        if tag == "a":
            self.links.append(dict(attrs)["href"] or "")
        if tag == "tr":
            self.rows += 1

    def handle_endtag(self, tag: str) -> None:
        assert self.open and self.open[-1] == tag, f"unbalanced </{tag}> after {self.open[-3:]}"
        self.open.pop()

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def parse(path: Path) -> _Collector:
    collector = _Collector()
    collector.feed(path.read_text(encoding="utf-8"))
    collector.close()
    assert collector.open == [], "every tag is closed"
    return collector


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path.name} is not a PNG"
    assert data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    with Image.open(path) as image:
        image.verify()
    return width, height


def test_plots_are_valid_png_images(run_dir: Path, written: list[Path]) -> None:
    assert [p.name for p in written] == [*PNGS, "report.md", "report.html"]
    for name in PNGS:
        path = run_dir / name
        width, height = png_size(path)
        assert width > 200 and height > 200, name
        with Image.open(path) as image:
            colours = image.convert("RGB").getcolors(maxcolors=1_000_000)
        assert colours is not None and len(colours) > 10, f"{name} has something drawn on it"


def test_html_parses_and_embeds_every_plot(run_dir: Path, written: list[Path]) -> None:
    page = parse(run_dir / "report.html")
    for name in PNGS:
        assert name in page.links, f"report.html links {name}"
    embedded = {img["alt"]: img["src"] or "" for img in page.images}
    assert set(embedded) == set(PNGS)
    for name, src in embedded.items():
        prefix = "data:image/png;base64,"
        assert src.startswith(prefix)
        assert base64.b64decode(src[len(prefix) :]) == (run_dir / name).read_bytes()


def test_html_holds_summary_gate_log_and_escaped_diff(run_dir: Path, written: list[Path]) -> None:
    raw = (run_dir / "report.html").read_text(encoding="utf-8")
    text = "".join(parse(run_dir / "report.html").text)
    summary = json.loads((run_dir / "summary.json").read_text())
    gates = [json.loads(x) for x in (run_dir / "events.jsonl").read_text().splitlines()]
    gates = [e for e in gates if e["event"] == "gate"]
    assert len(gates) == 2 and sum(g["accepted"] for g in gates) == 1
    assert "1 / 2" in text, "accepted / gate decisions"
    assert str(summary["usage"]["calls"]) in text
    rejected = next(g for g in gates if not g["accepted"])
    assert rejected["reason"] in text, "the gate log shows why a candidate was rejected"
    # Kills: a gate log without each decision's evidence (its alpha and what it spent).
    assert "alpha spent" in text and f"{rejected['alpha']:.4g}"[:5] in text
    assert "what the gate could certify (pre-flight)" in text
    assert "+Check if the number is divisible by 2." in text
    assert "&lt;b&gt;even&lt;/b&gt; &amp; nothing else." in raw
    assert "<b>even</b>" not in raw, "skill text is escaped, never interpreted"
    # Kills: printing the recorded LM identity record whole instead of the model's name.
    assert "scripted/reflector" in text and "'sampling'" not in text


def test_scores_sit_beside_the_constant_answer_in_html_and_markdown(
    run_dir: Path, written: list[Path]
) -> None:
    """Kills: a report without the constant baseline (in either format), and a warning shown
    for a skill that beats the constant answer on test."""
    markdown = (run_dir / "report.md").read_text(encoding="utf-8")
    assert "| split | seed | constant 'even' | best |" in markdown
    assert "| validation | 0.5000 | 0.5000 | 1.0000 |" in markdown
    assert "| test | 0.5000 | 0.5000 | 1.0000 |" in markdown
    assert "Warning" not in markdown
    assert "not charged to the search budget" in markdown
    text = "".join(parse(run_dir / "report.html").text)
    assert "constant 'even'" in text and "Warning" not in text


def test_report_of_a_run_where_nothing_passed(tmp_path: Path) -> None:
    run = compile_run(tmp_path / "flat", Parity(), good=NOISE)
    write_report(run, out_dir=tmp_path / "out")
    text = "".join(parse(tmp_path / "out" / "report.html").text)
    assert "same lines as the seed" in text
    assert "0 / 1" in text
    assert "Warning:" in text and "does not beat the constant answer 'even' on test" in text
    markdown = (tmp_path / "out" / "report.md").read_text(encoding="utf-8")
    assert "**Warning:** the skill does not beat the constant answer 'even' on test" in markdown
    assert not (run / "report.html").exists(), "out_dir is honoured; the run is only read"


def test_report_states_the_small_set_warning(tmp_path: Path) -> None:
    """Kills: the report's pre-flight row without its warning (the summary alone) and a
    report.md without it, so a report of a run on 12 validation examples (in HTML or in a
    pull request) never says the set was too small to certify a useful gain."""
    run = tmp_path / "small"
    sd.compile(
        Parity(),
        parity_examples(0, 16),
        parity_examples(100, 12),
        optimizer=GradientText(proposers=[ReflectiveProposer(read_successes=False)], epochs=1),
        lm=ScriptedLM(parity_target),
        optimizer_lm=reflector(GOOD, GOOD),
        run_dir=run,
        threads=1,
    )
    write_report(run)
    text = " ".join("".join(parse(run / "report.html").text).split())
    assert "WARNING: 12 validation examples are too few for the gate" in text
    markdown = " ".join((run / "report.md").read_text(encoding="utf-8").split())
    assert "**Warning (pre-flight):** 12 validation examples are too few for the gate" in markdown


def test_skill_diff_is_a_unified_diff() -> None:
    diff = skill_diff("A.\nB.\n", "A.\nC.\n")
    assert diff.splitlines() == [
        "--- skills/v0001.md (seed)",
        "+++ best_skill.md (best)",
        "@@ -1,2 +1,2 @@",
        " A.",
        "-B.",
        "+C.",
    ]
    assert skill_diff("same", "same") == ""


def test_missing_run_dir_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(sd.UserInputError, match="does not exist"):
        write_report(tmp_path / "nope")
    assert not (tmp_path / "nope").exists(), "the report never creates the folder it reads"


@pytest.mark.parametrize("missing", ["events.jsonl", "skills/v0001.md", "best_skill.md"])
def test_missing_file_is_named(run_dir: Path, tmp_path: Path, missing: str) -> None:
    broken = tmp_path / "broken"
    shutil.copytree(run_dir, broken)
    (broken / missing).unlink()
    with pytest.raises(sd.RunDirError, match=re.escape(missing)):
        write_report(broken)


def test_corrupt_event_line_is_refused(run_dir: Path, tmp_path: Path) -> None:
    broken = tmp_path / "corrupt"
    shutil.copytree(run_dir, broken)
    lines = (broken / "events.jsonl").read_text().splitlines()
    lines[2] = "{not json"
    (broken / "events.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(sd.RunDirError, match="line 3 is corrupt"):
        load_run(broken)


def test_killed_run_torn_line_and_resume_are_read_once(run_dir: Path, tmp_path: Path) -> None:
    """After a resume, steps the killed process logged past its checkpoint are not doubled."""
    copy = tmp_path / "resumed"
    shutil.copytree(run_dir, copy)
    (copy / "summary.json").unlink()
    events = [json.loads(x) for x in (copy / "events.jsonl").read_text().splitlines()]
    steps = [e for e in events if e["event"] == "step"]
    gates = [e for e in events if e["event"] == "gate"]
    replay = [{"event": "resume", "version": 1, "steps": 1}, gates[1], *steps[1:]]
    lines = [json.dumps(e) for e in [*events, *replay]]
    original = "\n".join(lines) + '\n{"event": "st'
    (copy / "events.jsonl").write_text(original)
    record = load_run(copy)
    assert [s.step for s in record.steps] == [s["step"] for s in steps]
    assert [g.decision.candidate_hash for g in record.gates] == [g["candidate_hash"] for g in gates]
    assert not record.finished
    assert (copy / "events.jsonl").read_text() == original, "the report never rewrites the run"
    write_report(copy)
    assert "unfinished" in "".join(parse(copy / "report.html").text)


def test_sweep_report_from_sweep_json(run_dir: Path, tmp_path: Path) -> None:
    sweep = tmp_path / "sweep"
    shutil.copytree(run_dir, sweep / "trials" / "0")
    trials = [
        {"params": {"lr": 0.1}, "value": 0.6, "state": "COMPLETE"},
        {"params": {"lr": 0.3}, "value": 1.0, "state": "COMPLETE"},
        {"params": {"lr": 0.9}, "value": None, "state": "FAIL"},
    ]
    (sweep / "sweep.json").write_text(json.dumps(trials))
    written = write_report(sweep)
    assert written[0].name == "plot_sweep_lr.png" and png_size(written[0])[0] > 200
    assert sweep / "trials" / "0" / "report.html" in written
    page = parse(sweep / "report.html")
    assert "trials/0/report.html" in page.links
    assert [img["alt"] for img in page.images] == ["plot_sweep_lr.png"]
    text = "".join(page.text)
    assert "FAIL" in text and page.rows == 1 + len(trials)


def test_sweep_from_trial_folders(run_dir: Path, tmp_path: Path) -> None:
    sweep = tmp_path / "folders"
    shutil.copytree(run_dir, sweep / "trials" / "a")
    shutil.copytree(run_dir, sweep / "trials" / "b")
    (sweep / "trials" / "b" / "summary.json").unlink()
    trials = load_sweep_trials(sweep)
    assert [(t.lr, t.value, t.state) for t in trials] == [
        (0.3, 1.0, "COMPLETE"),
        (0.3, None, "RUNNING_OR_KILLED"),
    ]
    assert [t.run_dir for t in trials] == [sweep / "trials" / "a", sweep / "trials" / "b"]


def test_config_json_is_optional_and_said_so(run_dir: Path, tmp_path: Path) -> None:
    trial_like = tmp_path / "trial"
    shutil.copytree(run_dir, trial_like)
    (trial_like / "config.json").unlink()
    write_report(trial_like)
    assert "a sweep trial's run records none" in "".join(parse(trial_like / "report.html").text)


def test_optuna_lr_run_reports_the_run_and_its_sweep(tmp_path: Path) -> None:
    inner = GradientText(
        proposers=[ReflectiveProposer(read_successes=False)], epochs=1, batch_size=8
    )
    sd.compile(
        Parity(),
        parity_examples(0, 16),
        parity_examples(100, 10),
        optimizer=OptunaLR(inner=inner, n_trials=2, plots=False),
        lm=ScriptedLM(parity_target),
        optimizer_lm=reflector(NOISE, GOOD),
        run_dir=tmp_path / "sweep",
        threads=1,
    )
    written = write_report(tmp_path / "sweep")
    names = {p.relative_to(tmp_path / "sweep").as_posix() for p in written}
    assert {*PNGS, "plot_sweep_lr.png", "report.html"} <= names
    assert {"trials/0000/report.html", "trials/0001/report.html"} <= names
    page = parse(tmp_path / "sweep" / "report.html")
    assert {img["alt"] for img in page.images} == {*PNGS, "plot_sweep_lr.png"}
    assert "trials/0001/report.html" in page.links
    assert png_size(tmp_path / "sweep" / "plot_sweep_lr.png")[1] > 200
