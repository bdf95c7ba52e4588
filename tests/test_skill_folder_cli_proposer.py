"""`compile --skill-folder` on the command line (issue 40, done-when): `--proposer` chooses where
description edits come from and the CLI prints which proposers run (no silent reflection on a
model too small for it); `--shown-others`, `--reply-tokens`, `--trigger-samples` and
`--trigger-temperature` reach the router (a sampling no run could honour refused before any
call); the held-out table is replayed from the run's cache (no new router call); folder-only
flags without `--skill-folder` are refused. The router and the optimizer model are scripted
fakes."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from skillopt_dsl.cli import app
from skillopt_dsl.cli import skill_folder as folder_cli
from skillopt_dsl.cli.options import CompileFlags
from skillopt_dsl.cli.sleep_describe import DescribeFlags
from skillopt_dsl.lm import LM
from skillopt_dsl.skill_folder import describe as describe_module
from skillopt_dsl.testing import ScriptedLM
from skillopt_dsl.testing.trigger_fakes import (
    listed_description,
    listed_names,
    skill_call,
    trigger_request,
)

runner = CliRunner()
SKILL_MD = "---\nname: release-notes\ndescription: Writes text.\n---\n# Release notes\n"


def _fake_router(messages: Sequence[dict[str, str]]) -> str:
    """FAKE router: loads release-notes for a changelog request when its card says changelog."""
    card = listed_description(messages, "release-notes") or ""
    wanted = "changelog" in card and "changelog" in trigger_request(messages)
    return skill_call("release-notes") if wanted else "No tool is needed."


def _fake_reflector(_messages: Sequence[dict[str, str]]) -> str:
    """FAKE optimizer model: proposes nothing."""
    return json.dumps({"edits": []})


class FakeModels:
    """FAKE `folder_models`: a scripted router and reflector, kept so a test can count calls."""

    def __init__(self) -> None:
        self.router = ScriptedLM(_fake_router, model="scripted/router")
        self.reflector = ScriptedLM(_fake_reflector, model="scripted/reflector")

    def __call__(self, flags: CompileFlags) -> tuple[LM, LM]:
        return LM(self.router), LM(self.reflector)


@pytest.fixture
def fakes(monkeypatch: pytest.MonkeyPatch) -> FakeModels:
    models = FakeModels()
    monkeypatch.setattr(folder_cli, "folder_models", models)
    return models


@pytest.fixture
def task(tmp_path: Path) -> list[str]:
    """The flags naming a skill folder, its trigger data and three distractor cards."""
    root = tmp_path / "skills" / "release-notes"
    root.mkdir(parents=True)
    (root / "SKILL.md").write_text(SKILL_MD)
    rows = [
        {"request": f"request {n} about the {'changelog' if n % 2 else 'weather'}",
         "should_trigger": bool(n % 2)}
        for n in range(40)
    ]  # fmt: skip
    data = tmp_path / "trigger.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in rows))
    cards = tmp_path / "distractors.jsonl"
    cards.write_text(
        "".join(
            json.dumps({"name": name, "description": f"Writes {name}."}) + "\n"
            for name in ("commit-message", "pr-description", "version-bump")
        )
    )
    return ["--skill-folder", str(root), "--trigger-data", str(data), "--distractors", str(cards)]


def _compile(task: list[str], run: Path, *extra: str) -> str:
    result = runner.invoke(
        app,
        ["compile", *task, "--run-dir", str(run), "--threads", "1", "--max-calls", "180", *extra],
    )
    assert result.exit_code == 0, result.output
    return result.stdout


@pytest.mark.parametrize(
    ("choice", "line"),
    [
        ([], "proposers: trigger-words (no optimizer-model call"),
        (["--proposer", "words"], "proposers: trigger-words (no optimizer-model call"),
        (["--proposer", "reflect"], "proposers: reflective, consolidation (reflective, "
         "consolidation by scripted/reflector)"),
        (["--proposer", "both"], "proposers: trigger-words, reflective, consolidation "
         "(reflective, consolidation by scripted/reflector)"),
    ],
)  # fmt: skip
def test_the_cli_says_which_proposers_run(
    fakes: FakeModels, task: list[str], tmp_path: Path, choice: list[str], line: str
) -> None:
    """Kills: reflection running by default on the embedded model (the 7-minute step 1), a
    `--proposer` choice that is ignored, or a search that does not say which proposers run."""
    out = _compile(task, tmp_path / "run", *choice)
    assert line in out
    reflected = len(fakes.reflector.calls)
    assert (reflected > 0) == ("reflect" in " ".join(choice) or "both" in choice), reflected


def test_the_router_sees_the_shown_others_and_the_reply_cap(
    fakes: FakeModels, task: list[str], tmp_path: Path
) -> None:
    """Kills: `--shown-others` or `--reply-tokens` not reaching the routing call (the embedded
    model copying the whole list back at 256 tokens a call), and the default cap lost."""
    _compile(task, tmp_path / "run", "--shown-others", "1", "--reply-tokens", "5")
    lists = [listed_names(m) for m in fakes.router.calls]
    assert {len(names) for names in lists} == {2}  # this skill and one other
    assert {p.max_tokens for p in fakes.router.params} == {5}
    _compile(task, tmp_path / "default")
    assert {p.max_tokens for p in fakes.router.params[-3:]} == {folder_cli.DEFAULT_REPLY_TOKENS}


def test_the_held_out_table_costs_no_new_router_call(
    fakes: FakeModels, task: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kills: the seed/compiled trigger rows routing the held-out requests again instead of
    replaying the calls the compile's test scoring made (twice the calls on a slow model)."""
    seen: list[int] = []
    compile_with: Callable[..., Any] = describe_module.compile_with

    def counted(*args: Any, **kwargs: Any) -> Any:
        result = compile_with(*args, **kwargs)
        seen.append(len(fakes.router.calls))
        return result

    monkeypatch.setattr(describe_module, "compile_with", counted)
    out = _compile(task, tmp_path / "run", "--seed", "3")  # the rollout seed is in every key
    assert "compiled             accuracy 1.000" in out  # the compiled row differs from the seed's
    assert seen == [len(fakes.router.calls)]


def test_folder_flags_without_a_skill_folder_are_refused() -> None:
    """Kills: `--proposer` (or another folder-only flag) silently ignored on a recipe compile."""
    result = runner.invoke(app, ["compile", "r.py", "--proposer", "reflect"])
    assert result.exit_code == 1 and "--proposer goes with --skill-folder" in result.output
    result = runner.invoke(app, ["compile", "r.py", "--shown-others", "2", "--reply-tokens", "4"])
    assert "--shown-others and --reply-tokens go with --skill-folder" in result.output


def test_the_resume_command_repeats_the_folder_flags() -> None:
    """Kills: an interrupted run resumed with another proposer or router than it started."""
    task = folder_cli.FolderTask(
        Path("f"), Path("t.jsonl"), None, "claude",
        proposer=folder_cli.ProposerChoice.reflect, shown_others=4, reply_tokens=9,
    )  # fmt: skip
    words = " ".join(task.words())
    assert "--proposer reflect --shown-others 4 --reply-tokens 9" in words


# -- --trigger-samples and --trigger-temperature (issue 53) -----------------------------------


def _run(task: list[str], run: Path, *extra: str) -> tuple[int, str]:
    """`compile` with `extra` flags at 60 calls: its exit code and output."""
    result = runner.invoke(
        app,
        ["compile", *task, "--run-dir", str(run), "--threads", "1", "--max-calls", "60", *extra],
    )
    return result.exit_code, result.output


def _seeds_by_request(router: ScriptedLM) -> dict[str, list[int]]:
    """Each routed prompt's sample seeds, sorted."""
    seeds: dict[str, list[int]] = defaultdict(list)
    for messages, params in zip(router.calls, router.params, strict=True):
        seeds[json.dumps(messages)].append(params.seed)
    return {prompt: sorted(found) for prompt, found in seeds.items()}


def _grouped_by(seeds: dict[str, list[int]], k: int) -> bool:
    """Whether every prompt's seeds are whole runs of k samples (`seed * k + i`, i < k)."""
    return all(
        found[i : i + k] == list(range(found[i], found[i] + k))
        and found[i] % k == 0
        and len(found) % k == 0
        for found in seeds.values()
        for i in range(0, len(found), k)
    )


def test_each_request_is_routed_k_times_at_the_given_temperature(
    fakes: FakeModels, task: list[str], tmp_path: Path
) -> None:
    """Kills: `--trigger-samples` or `--trigger-temperature` ignored (the module's default 3
    samples at 0.7 routed instead), and the pre-flight counting the default samples."""
    code, out = _run(task, tmp_path / "run", "--trigger-samples", "2",
                     "--trigger-temperature", "0.4")  # fmt: skip
    assert code == 0, out
    assert {p.temperature for p in fakes.router.params} == {0.4}
    seeds = _seeds_by_request(fakes.router)
    assert _grouped_by(seeds, 2) and not _grouped_by(seeds, 3)
    assert "validation requests x 2 sample(s)" in out


def test_the_defaults_are_three_samples_at_0_7(
    fakes: FakeModels, task: list[str], tmp_path: Path
) -> None:
    """Kills: the flags' absence changing the documented default sampling."""
    code, out = _run(task, tmp_path / "run")
    assert code == 0, out
    assert {p.temperature for p in fakes.router.params} == {folder_cli.DEFAULT_TEMPERATURE}
    assert _grouped_by(_seeds_by_request(fakes.router), folder_cli.DEFAULT_SAMPLES)
    assert f"x {folder_cli.DEFAULT_SAMPLES} sample(s)" in out


@pytest.mark.parametrize(
    ("flags", "code", "message"),
    [
        (["--trigger-samples", "0"], 2, "--trigger-samples"),
        (["--trigger-temperature", "-0.1"], 2, "--trigger-temperature"),
        (["--trigger-samples", "x"], 2, "--trigger-samples"),
        (["--trigger-samples", "3", "--trigger-temperature", "0"], 1, "would all agree"),
        (["--trigger-temperature", "0"], 1, "would all agree"),
        (["--trigger-samples", "1", "--trigger-temperature", "0.5"], 1,
         "--trigger-temperature goes with --trigger-samples above 1"),
    ],
)  # fmt: skip
def test_a_sampling_no_run_could_honour_is_refused_before_any_call(
    fakes: FakeModels, task: list[str], tmp_path: Path, flags: list[str], code: int, message: str
) -> None:
    """Kills: a typed flag accepting nonsense, several samples at temperature 0 spending calls
    on identical answers, and a temperature silently dropped for one sample."""
    got, out = _run(task, tmp_path / "run", *flags)
    assert got == code and message in out, out
    assert fakes.router.calls == []


def test_one_sample_runs_at_the_models_own_temperature(
    fakes: FakeModels, task: list[str], tmp_path: Path
) -> None:
    """Kills: `--trigger-samples 1` still routing three samples."""
    code, out = _run(task, tmp_path / "run", "--trigger-samples", "1")
    assert code == 0, out
    assert {p.temperature for p in fakes.router.params} == {0.0}
    assert "x 1 sample(s)" in out


def test_the_sampling_flags_go_with_a_skill_folder_and_are_resumed() -> None:
    """Kills: the flags silently ignored on a recipe compile, a resumed run routing with
    another sampling than it started, and `sleep describe` dropping them."""
    result = runner.invoke(app, ["compile", "r.py", "--trigger-samples", "5"])
    assert result.exit_code == 1 and "--trigger-samples goes with --skill-folder" in result.output
    flags = DescribeFlags(trigger_samples=5, trigger_temperature=0.3).folder_flags(Path("d.jsonl"))
    chosen = folder_cli.folder_task(Path("f"), flags)
    assert (chosen.samples, chosen.temperature) == (5, 0.3)
    assert (chosen.description_task.samples, chosen.description_task.temperature) == (5, 0.3)
    assert "--trigger-samples 5 --trigger-temperature 0.3" in " ".join(chosen.words())
