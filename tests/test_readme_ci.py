"""README.md's two commands and `.ci/run` agree: CI installs and tests exactly as a new user would.

The README's "The first two commands" section holds two fenced `bash` blocks, each one line of
steps joined by `&&`: command 1 installs and runs the demo, command 2 installs with the test
extras and runs the tests. `.ci/run` must run command 2's steps in the same order, with the same
environment (a `VAR="..."` prefix in the README is an `export VAR="..."` in `.ci/run`), the same
extras and the same test command; command 1 must install the same way with a subset of those
extras, so the runtime CI tests is the one the demo runs on. No subprocess runs here: the files are
read as text.
"""

from __future__ import annotations

import re
import shlex
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SECTION = "## The first two commands"


@dataclass(frozen=True)
class Step:
    """One `&&`-separated step: its `VAR=value` prefixes and its command words."""

    env: tuple[tuple[str, str], ...]
    words: tuple[str, ...]


def parse_step(text: str) -> Step:
    words = shlex.split(text)
    env: list[tuple[str, str]] = []
    while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", words[0]):
        name, _, value = words.pop(0).partition("=")
        env.append((name, value))
    return Step(tuple(env), tuple(words))


def readme_commands(readme: str) -> list[list[Step]]:
    """The `bash` blocks of the README's first-commands section, each split into its steps."""
    start = readme.index(SECTION)
    end = readme.find("\n## ", start + len(SECTION))
    section = readme[start : end if end != -1 else len(readme)]
    blocks = re.findall(r"```bash\n(.*?)\n```", section, flags=re.DOTALL)
    return [[parse_step(part) for part in block.strip().split(" && ")] for block in blocks]


@dataclass(frozen=True)
class CiScript:
    exports: tuple[tuple[str, str], ...]
    steps: tuple[Step, ...]
    """The install steps and the test command, in order (lint and docs lines are CI's own)."""


def ci_script(text: str) -> CiScript:
    exports: list[tuple[str, str]] = []
    steps: list[Step] = []
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("export "):
            for word in shlex.split(line.removeprefix("export ")):
                name, _, value = word.partition("=")
                exports.append((name, value))
        elif line.startswith(
            ("python3 -m venv", ". .venv/bin/activate", "pip ", "python -m pytest")
        ):
            steps.append(parse_step(line))
    return CiScript(tuple(exports), tuple(steps))


def extras(step: Step) -> set[str]:
    """The extras of a `pip install -e ".[a,b]"` step (empty for any other step)."""
    for word in step.words:
        match = re.fullmatch(r"\.\[([a-z0-9_,-]+)\]", word)
        if match:
            return set(match.group(1).split(","))
    return set()


def without_extras(step: Step) -> Step:
    """The step with its project install's extras (none, `.`, or `.[a,b]`) blanked and pip's
    `--no-compile` dropped (it changes when bytecode is compiled, not what is installed)."""
    words = tuple(
        re.sub(r"^\.(\[[a-z0-9_,-]+\])?$", ".[...]", w) for w in step.words if w != "--no-compile"
    )
    return Step(step.env, words)


def project_install(command: list[Step]) -> Step:
    """The command's `pip install -e ...` step (the project itself)."""
    found = [s for s in command if s.words[:2] == ("pip", "install") and "-e" in s.words]
    assert len(found) == 1, f"expected one project install in {command}"
    return found[0]


RUNTIME_STEP = re.compile(r"llama-cpp-cffi==[0-9.]+")
"""The prebuilt llama.cpp runtime's requirement, pinned."""


@pytest.fixture(scope="module")
def commands() -> list[list[Step]]:
    found = readme_commands((ROOT / "README.md").read_text(encoding="utf-8"))
    assert len(found) == 2, f"README's {SECTION!r} must hold exactly two bash blocks"
    return found


@pytest.fixture(scope="module")
def ci() -> CiScript:
    return ci_script((ROOT / ".ci" / "run").read_text(encoding="utf-8"))


def test_ci_runs_command_two_step_for_step(commands: list[list[Step]], ci: CiScript) -> None:
    """Same pip steps in the same order, same extras, same test command (flags included)."""
    readme_words = [step.words for step in commands[1]]
    ci_words = [step.words for step in ci.steps]
    assert ci_words == readme_words, (
        "README.md's command 2 and .ci/run differ; change both together:\n"
        f"README: {readme_words}\n.ci/run: {ci_words}"
    )
    assert commands[1][-1].words[:3] == ("python", "-m", "pytest")


def test_ci_exports_the_readme_environment(commands: list[list[Step]], ci: CiScript) -> None:
    """A `VAR="..."` prefix in either README command is exported by `.ci/run` with that value."""
    exported = dict(ci.exports)
    for command in commands:
        for step in command:
            for name, value in step.env:
                assert exported.get(name) == value, f"{name} differs between README and .ci/run"


def test_command_one_installs_as_command_two(commands: list[list[Step]]) -> None:
    """Command 1 is command 2's install with fewer extras, then the demo; both install the same
    pinned llama.cpp runtime, so the runtime CI tests is the one the demo runs on."""
    demo, tests = commands
    assert [without_extras(s) for s in demo[:-1]] == [without_extras(s) for s in tests[:-1]]
    assert extras(project_install(demo)) <= extras(project_install(tests))
    runtime = [w for s in demo for w in s.words if RUNTIME_STEP.fullmatch(w)]
    assert runtime, "command 1 installs no llama.cpp runtime for the embedded model"
    assert demo[-1].words[:2] == ("skillopt-dsl", "compile")
    assert (ROOT / demo[-1].words[-1]).is_file(), "command 1's recipe does not exist"


def test_every_named_extra_exists(commands: list[list[Step]]) -> None:
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"][
        "optional-dependencies"
    ]
    for command in commands:
        for step in command:
            assert extras(step) <= set(declared), f"unknown extra in {step.words}"


def test_the_parsers_see_a_disagreement() -> None:
    """The check is not vacuous: a CI script with another extra or another pytest flag differs."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    script = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    readme_steps = [s.words for s in readme_commands(readme)[1]]
    for before, after in ((",postgres]", "]"), ("python -m pytest", "python -m pytest -x")):
        assert before in script
        changed = ci_script(script.replace(before, after, 1))
        assert [s.words for s in changed.steps] != readme_steps


def test_a_parallel_test_command_has_its_plugin_in_the_dev_extra(
    commands: list[list[Step]],
) -> None:
    """`-n` needs pytest-xdist: a fresh clone that installs the dev extra must have it."""
    test_command = commands[1][-1].words
    if "-n" not in test_command:
        return
    dev = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"][
        "optional-dependencies"
    ]["dev"]
    assert any(re.match(r"pytest-xdist\b", requirement) for requirement in dev)


@pytest.mark.parametrize(
    ("heading", "index"),
    [("## 1. Compile a skill on the embedded model", 0), ("## 2. Run the tests", 1)],
)
def test_getting_started_runs_the_readme_commands(
    commands: list[list[Step]], heading: str, index: int
) -> None:
    """docs/getting-started.md's two commands are the README's, word for word."""
    page = (ROOT / "docs" / "getting-started.md").read_text(encoding="utf-8")
    section = page.split(heading, 1)[1]
    block = re.findall(r"```bash\n(.*?)\n```", section, flags=re.DOTALL)[0]
    assert [parse_step(part) for part in block.strip().split(" && ")] == commands[index]
