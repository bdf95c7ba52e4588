"""Advice a user can follow: every suggestion the Sleep CLI prints names a `skillopt-dsl sleep`
command and flags that exist, read from every string of the package and from what the CLI
prints where issue 26 found dead ends (adopt without a proposal, a harvest of 0 sessions,
pre-flight advice, tasks that only check `no_refusal`)."""

from __future__ import annotations

import ast
import functools
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
from fixtures.sleep.world import PROMPTS, make_project, write_sessions
from typer.testing import CliRunner

import skillopt_dsl.sleep
from skillopt_dsl.cli import app
from skillopt_dsl.evidence import preflight
from skillopt_dsl.gate import Gate
from skillopt_dsl.optimizers import HandOff
from skillopt_dsl.sleep import SleepConfig, run_night
from skillopt_dsl.sleep.advice import cli_advice
from skillopt_dsl.sleep.cli import sleep_app

SLEEP = Path(skillopt_dsl.sleep.__file__).parent
_MENTION = re.compile(
    r"sleep (harvest|review|run|status|diff|adopt|rollback|schedule|unschedule|trigger-rows)\b"
    r"([^`\n]*)"
)
_FLAG = re.compile(r"(?<![\w-])--[a-z][a-z-]*")
# other programs' command lines (their flags are theirs): `systemctl --user ...`, `claude -p`
# the project's own compile command (its flags are checked against `skillopt-dsl compile`)
_COMPILE = re.compile(r"skillopt-dsl compile\b([^`\n]*)")
_OTHER_PROGRAM = re.compile(r"\b(?:systemctl|crontab|claude|codex|git|pytest)\b [^`\n]*")


def _options() -> dict[str, set[str]]:
    group = typer.main.get_command(sleep_app)
    return {
        name: {o for p in command.params for o in (*p.opts, *p.secondary_opts)}
        for name, command in group.commands.items()  # type: ignore[attr-defined]
    }


@functools.cache
def _compile_options() -> frozenset[str]:
    """`skillopt-dsl compile`'s flags, built once: typer builds the whole CLI to list them, and
    `_wrong_flags` asks for every string of the package (120 s of the suite before the cache)."""
    compile_command = typer.main.get_command(app).commands["compile"]  # type: ignore[attr-defined]
    return frozenset(o for p in compile_command.params for o in (*p.opts, *p.secondary_opts))


def _wrong_flags(text: str, options: dict[str, set[str]]) -> list[str]:
    """Commands named in `text` that do not exist, flags next to a command that it does not
    take, and flags named alone that no Sleep command takes."""
    wrong = []
    every = set().union(*options.values())
    for match in _MENTION.finditer(text):
        command = match.group(1)
        wrong += [
            f"sleep {command} {f}"
            for f in _FLAG.findall(match.group(2))
            if f not in options.get(command, set())
        ]
    compile_options = _compile_options()
    for match in _COMPILE.finditer(text):
        wrong += [f"compile {f}" for f in _FLAG.findall(match.group(1)) if f not in compile_options]
    alone = _OTHER_PROGRAM.sub("", _COMPILE.sub("", _MENTION.sub("", text)))
    wrong += [f for f in _FLAG.findall(alone) if f not in every]
    return wrong


def _not_printed(tree: ast.AST, *, keep_docstrings: bool) -> set[int]:
    """Ids of the strings the CLI never prints: docstrings (except the commands', which are
    their help) and regular expressions (they match what users typed, `reset --hard`)."""
    skipped: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if not keep_docstrings and isinstance(body, list) and body:
            first = body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                skipped.add(id(first.value))
        func = getattr(node, "func", None)
        if isinstance(func, ast.Attribute) and getattr(func.value, "id", None) == "re":
            skipped |= {id(n) for arg in node.args for n in ast.walk(arg)}  # type: ignore[attr-defined]
    return skipped


def _literals() -> Iterator[tuple[str, str]]:
    """Every string of the Sleep package the CLI can print (f-strings with `{}` for their
    fields): messages, help texts, the commands' docstrings."""
    for path in sorted(SLEEP.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skipped = _not_printed(tree, keep_docstrings=path.name == "cli.py")
        for node in ast.walk(tree):
            if id(node) in skipped:
                continue
            if isinstance(node, ast.JoinedStr):
                yield (
                    path.name,
                    "".join(
                        str(v.value) if isinstance(v, ast.Constant) else "{}" for v in node.values
                    ),
                )
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                yield path.name, node.value


def test_every_suggestion_in_the_package_names_flags_that_exist() -> None:
    """Kills: a message, help text or docstring naming a `sleep` command or a flag that does
    not exist (issue 26: advice that leads nowhere), e.g. `--since` without the option."""
    options = _options()
    assert {"harvest", "review", "run", "status", "adopt"} <= set(options)
    wrong = []
    for name, text in _literals():
        if re.fullmatch(r"--[a-z][a-z-]*", text.strip()):
            continue  # an option's own declaration, or an agent CLI's argv element
        if name == "agent_replay.py" and text.startswith("-"):
            continue
        wrong += [f"{name}: {w}" for w in _wrong_flags(text, options)]
    assert not wrong
    mentioned = {m.group(1) for _, t in _literals() for m in _MENTION.finditer(t)}
    assert {"harvest", "review", "run", "status"} <= mentioned


def test_the_checker_finds_a_flag_that_does_not_exist() -> None:
    """Kills: a checker that passes everything (the test above could then never fail)."""
    options = _options()
    assert _wrong_flags("use `skillopt-dsl sleep harvest --everything`", options) == [
        "sleep harvest --everything"
    ]
    assert _wrong_flags("pass --no-such-flag", options) == ["--no-such-flag"]
    assert _wrong_flags("`skillopt-dsl sleep run --gate mean-only`", options) == []


def _printed(*args: str) -> tuple[int, str]:
    done = CliRunner().invoke(sleep_app, list(args))
    return done.exit_code, done.output


def _blocked_night(tmp_path: Path, prompts: list[str]) -> tuple[Path, Path]:
    home = tmp_path / "home"
    write_sessions(home, prompts)
    project = make_project(tmp_path)
    return project, home


def test_adopt_without_a_proposal_says_what_can_be_done(tmp_path: Path) -> None:
    """Kills: "run `sleep run` first" when a night already ran and staged nothing (issue 26:
    that run harvests 0 sessions and says "mine more sessions")."""
    project, home = _blocked_night(tmp_path, PROMPTS[:4])
    run_night(SleepConfig(project=project, home=home, source="jsonl", mine_with_model=False))
    code, out = _printed("adopt", "--project", str(project))
    assert code == 1
    assert "run `skillopt-dsl sleep run` first" not in out
    assert "sleep status" in out and "sleep harvest --all" in out and "--add-check" in out
    assert not _wrong_flags(out, _options())


def test_a_harvest_of_no_session_says_why(tmp_path: Path) -> None:
    """Kills: "0 session(s)" with no hint when nothing of the project was found (the home or
    the recorded folders are wrong)."""
    home = tmp_path / "home"
    write_sessions(home, PROMPTS[:2])
    project = tmp_path / "elsewhere"
    project.mkdir()
    code, out = _printed(
        "harvest", "--project", str(project), "--home", str(home), "--heuristic-only"
    )
    assert code == 0, out
    assert "no session of this project was found" in out and "session_cwds" in out
    assert not _wrong_flags(out, _options())


def test_a_night_with_too_few_val_tasks_names_sleep_flags_not_python(tmp_path: Path) -> None:
    """Kills: pre-flight advice printed as the library says it (`Gate.mean_only()`, "fewer
    planned decisions"), which a CLI user cannot act on; and a blocked night that says
    "mine more sessions" without a command."""
    project, home = _blocked_night(tmp_path, PROMPTS[:4])
    code, out = _printed(
        "run",
        "--project",
        str(project),
        "--home",
        str(home),
        "--source",
        "jsonl",
        "--heuristic-only",
    )
    assert code == 0, out
    assert "WARNING" in out and "Gate.mean_only" not in out
    assert "sleep run --gate mean-only" in out
    (blocked,) = [line for line in out.splitlines() if "nothing accepted:" in line]
    assert "sleep harvest --all" in blocked and "sleep run --tasks" in blocked
    assert not _wrong_flags(out, _options())
    report = next((project / ".skillopt" / "sleep").glob("*/report.md")).read_text()
    assert "Gate.mean_only" not in report and "sleep run --gate mean-only" in report


def test_fewer_planned_decisions_names_the_flags_that_make_fewer() -> None:
    """Kills: the planned-decisions advice left as the library words it."""
    statement = preflight(Gate(), 10, 6).statement()
    assert "fewer planned decisions (6 now)" in statement and "Gate.mean_only()" in statement
    advice = cli_advice(statement)
    assert "6 now: a larger `skillopt-dsl sleep run --batch-size`, `--epochs 1`" in advice
    assert "Gate." not in advice and not _wrong_flags(advice, _options())


def test_gate_and_batch_size_flags_reach_the_night(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kills: `--gate mean-only` or `--batch-size` accepted but not used (advice naming a flag
    that does nothing), an unknown `--gate` value silently taken as the default, or a night
    that runs another search than compile's default (`HandOff`)."""
    seen: list[Any] = []

    def capture(config: SleepConfig, **_: object) -> None:
        seen.append(config)
        raise KeyboardInterrupt

    monkeypatch.setattr("skillopt_dsl.sleep.cli.run_night", capture)
    project = make_project(tmp_path)
    _printed("run", "--project", str(project), "--gate", "mean-only", "--batch-size", "3")
    assert seen[0].gate.test is None and seen[0].optimizer.first.batch_size == 3
    assert isinstance(seen[0].optimizer, HandOff)  # compile's default search, its first part set
    _printed("run", "--project", str(project))
    assert seen[1].gate is None and seen[1].optimizer.first.batch_size == 8
    code, out = _printed("run", "--project", str(project), "--gate", "bonferroni")
    assert code == 1 and "--gate must be paired or mean-only" in out


def test_status_suggests_adding_checks_when_every_task_only_checks_no_refusal(
    tmp_path: Path,
) -> None:
    """Kills: `sleep status` silent when no task can fail the live files (issue 26: every
    mined task carried only `no_refusal`, so every night ended "no proposal")."""
    project, home = _blocked_night(tmp_path, PROMPTS[:4])
    config = SleepConfig(project=project, home=home, source="jsonl", mine_with_model=False)
    night = run_night(config)
    _, out = _printed("status", "--project", str(project))
    assert "only check no_refusal" not in out  # these tasks have contains / not_contains checks
    rows = [json.loads(line) for line in (night.path / "tasks.jsonl").read_text().splitlines()]
    for row in rows:
        row["checks"] = [{"kind": "no_refusal"}]
    (night.path / "tasks.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    _, out = _printed("status", "--project", str(project))
    assert f"all {len(rows)} task(s) of night {night.report.night_id} only check no_refusal" in out
    assert "sleep review --edit ID --add-check" in out
    assert not _wrong_flags(out, _options())
