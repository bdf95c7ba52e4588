"""The keyword front doors over settings records (issue 28): `LM`, `evaluate`, `SkillOptimizer`,
`CommandAgent` and `run_sweep_worker` take `**options: Unpack[XOptions]`, build one frozen
`XSettings`, and still check, document and show every keyword as before."""

from __future__ import annotations

import dataclasses
import inspect
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple, TypedDict, get_args, get_type_hints

import pytest

from skillopt_dsl.agents import CommandAgent
from skillopt_dsl.agents.command_settings import (
    DEFAULT_ENV_ALLOWLIST,
    CommandAgentOptions,
    CommandAgentSettings,
)
from skillopt_dsl.data import Splits
from skillopt_dsl.dspy.optimizer import SkillOptimizer
from skillopt_dsl.dspy.settings import SkillOptimizerOptions, SkillOptimizerSettings
from skillopt_dsl.evaluate import DEFAULT_THREADS, EvaluateOptions, EvaluateSettings, evaluate
from skillopt_dsl.lm import LM, LMOptions, LMSettings, SamplingParams
from skillopt_dsl.studies.storage import GRACE_PERIOD_S, HEARTBEAT_INTERVAL_S
from skillopt_dsl.sweeps import SweepWorkerOptions, SweepWorkerSettings, run_sweep_worker
from skillopt_dsl.testing import ScriptedLM
from skillopt_dsl.testing.contract import TRAIN, VAL, ContractParity


class FrontDoor(NamedTuple):
    api: Callable[..., Any]  # the function (or `__init__`) taking `**options`
    owner: Any  # whose docstring documents the options
    settings: type
    options: type
    defaults: dict[str, object]  # the defaults the signature had before the records


FRONT_DOORS = {
    "evaluate": FrontDoor(evaluate, evaluate, EvaluateSettings, EvaluateOptions, {
        "skill": None, "lm": None, "threads": DEFAULT_THREADS, "max_errors": None, "cache": None,
        "seed": 0, "extra_metrics": None, "progress": None}),
    "LM": FrontDoor(LM.__init__, LM, LMSettings, LMOptions, {
        "cache": None, "ledger": None, "params": SamplingParams(), "max_concurrency": 8,
        "max_retries": 4, "timeout_s": None, "api_base": None, "backend": "auto",
        "backoff_base_s": 0.5, "backoff_max_s": 30.0, "price": None, "sleep": time.sleep,
        "rng": None}),
    "SkillOptimizer": FrontDoor(
        SkillOptimizer.__init__, SkillOptimizer, SkillOptimizerSettings, SkillOptimizerOptions, {
        "optimizer": None, "gate": None, "budget": None, "lm": None, "optimizer_lm": None,
        "predictors": "all", "adapter": None, "run_dir": None, "resume": False, "seed": 0,
        "threads": None, "max_errors": None, "num_threads": None, "log_dir": None,
        "reflection_lm": None, "prompt_model": None, "auto": None, "demos": False,
        "failure_score": 0.0}),
    "CommandAgent": FrontDoor(
        CommandAgent.__init__, CommandAgent, CommandAgentSettings, CommandAgentOptions, {
        "output": "json", "layout": "claude", "skill_name": "skill", "timeout_s": 600.0,
        "env_allowlist": DEFAULT_ENV_ALLOWLIST, "env": None, "check": None,
        "check_timeout_s": 120.0, "max_usd_per_run": None}),
    "run_sweep_worker": FrontDoor(
        run_sweep_worker, run_sweep_worker, SweepWorkerSettings, SweepWorkerOptions, {
        "inner": None, "search_space": None, "lm": None, "optimizer_lm": None, "budget": None,
        "run_dir": None, "seed": 0, "sampler_seed": None, "plots": False,
        "selection_fraction": 0.3, "heartbeat_interval": HEARTBEAT_INTERVAL_S,
        "grace_period": GRACE_PERIOD_S}),
}  # fmt: skip


def drift(settings: type, options: type) -> list[str]:
    """How the TypedDict `options` differs from the dataclass `settings`: its keys (in order),
    their types, and whether every key is optional."""
    fields = [f.name for f in dataclasses.fields(settings) if f.init]
    types, keys = get_type_hints(settings), get_type_hints(options)
    found = [] if list(keys) == fields else [f"keys {list(keys)} != fields {fields}"]
    found += [f"{k}: {keys[k]} != {types[k]}" for k in keys if k in types and keys[k] != types[k]]
    if getattr(options, "__required_keys__", None):
        found.append(f"required keys {sorted(options.__required_keys__)} (use total=False)")
    return found


@dataclass(frozen=True, kw_only=True)
class _Pair:
    a: int = 0
    b: str = ""


class _OneSideShort(TypedDict, total=False):
    a: int


class _TypeDrift(TypedDict, total=False):
    a: int
    b: bytes


class _Required(TypedDict):
    a: int
    b: str


def test_drift_sees_a_field_on_one_side_a_changed_type_and_a_required_key() -> None:
    """Kills: a parity check that compares nothing (a field added to one side only, a type
    changed on one side, or a TypedDict made total would pass)."""
    assert drift(_Pair, _OneSideShort) == ["keys ['a'] != fields ['a', 'b']"]
    assert drift(_Pair, _TypeDrift) == ["b: <class 'bytes'> != <class 'str'>"]
    assert drift(_Pair, _Required) == ["required keys ['a', 'b'] (use total=False)"]


@pytest.mark.parametrize("name", FRONT_DOORS)
def test_each_typed_dict_mirrors_its_settings_record(name: str) -> None:
    """Kills: a keyword added to (or its type changed in) the record but not the TypedDict, or
    the other way round (mypy would check calls against the wrong list)."""
    door = FRONT_DOORS[name]
    assert drift(door.settings, door.options) == []
    assert get_args(get_type_hints(door.api)["options"]) == (door.options,)


@pytest.mark.parametrize("name", FRONT_DOORS)
def test_defaults_signature_and_docs_are_those_of_the_old_keywords(name: str) -> None:
    """Kills: a changed default, a front door whose runtime signature (`help()`,
    `inspect.signature`) lost its keywords or shows another record's, and an option dropped
    from the docstring."""
    door = FRONT_DOORS[name]
    built = door.settings()
    assert {k: getattr(built, k) for k in door.defaults} == door.defaults
    assert [f.name for f in dataclasses.fields(door.settings)] == list(door.defaults)
    shown = inspect.signature(door.api).parameters
    keywords = {k: p.default for k, p in shown.items() if k in door.defaults}
    assert keywords == door.defaults
    assert all(shown[k].kind is inspect.Parameter.KEYWORD_ONLY for k in door.defaults)
    assert not [p for p in shown.values() if p.kind is inspect.Parameter.VAR_KEYWORD]
    doc = inspect.getdoc(door.owner) or ""
    assert [k for k in door.defaults if k not in doc] == []


def _sweep(tmp_path: Path) -> None:
    run_sweep_worker(ContractParity(), Splits(TRAIN, VAL, []), storage=_storage(tmp_path),
                     study_name="s", n_trials=1, sampler_seeds=1)  # type: ignore[call-arg]  # fmt: skip


def _storage(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'study.db'}"


MISSPELT: dict[str, tuple[Callable[[Path], object], str]] = {
    "evaluate": (
        lambda _: evaluate(ContractParity(), VAL, thread=2),  # type: ignore[call-arg]
        "evaluate() got an unexpected keyword argument 'thread'; did you mean 'threads'?",
    ),
    "LM": (
        lambda _: LM(ScriptedLM(lambda m: ""), max_retry=1),  # type: ignore[call-arg]
        "LM() got an unexpected keyword argument 'max_retry'; did you mean 'max_retries'?",
    ),
    "SkillOptimizer": (
        lambda _: SkillOptimizer(lambda g, p: 1.0, optimiser=None),  # type: ignore[call-arg]
        "SkillOptimizer() got an unexpected keyword argument 'optimiser'; did you mean "
        "'optimizer'?",
    ),
    "CommandAgent": (
        lambda _: CommandAgent(argv=[sys.executable, "{prompt}"], check=["true"], timeout=5),  # type: ignore[call-arg]
        "CommandAgent() got an unexpected keyword argument 'timeout'; did you mean 'timeout_s'?",
    ),
    "run_sweep_worker": (
        _sweep,
        "run_sweep_worker() got an unexpected keyword argument 'sampler_seeds'; did you mean "
        "'sampler_seed'?",
    ),
}


@pytest.mark.parametrize("name", MISSPELT)
def test_a_misspelt_keyword_is_a_type_error_naming_the_api_and_the_keyword(
    name: str, tmp_path: Path
) -> None:
    """Kills: an unknown keyword silently dropped (its setting would keep its default), or
    refused without the API's name, the keyword, the closest one and the full list; and a
    sweep worker that creates its study before it checks its keywords."""
    call, message = MISSPELT[name]
    with pytest.raises(TypeError) as refused:
        call(tmp_path)
    said = str(refused.value)
    assert said.startswith(message)
    known = list(FRONT_DOORS[name].defaults)
    assert said.endswith(f"({name} takes {', '.join(known)})")
    assert not (tmp_path / "study.db").exists()


def test_an_unknown_keyword_with_no_near_name_still_lists_the_keywords() -> None:
    """Kills: a hint that guesses a far-off keyword (a wrong "did you mean")."""
    with pytest.raises(TypeError) as refused:
        LM(ScriptedLM(lambda m: ""), zzz=1)  # type: ignore[call-arg]
    assert str(refused.value).startswith(
        "LM() got an unexpected keyword argument 'zzz' (LM takes cache, ledger, params,"
    )


@pytest.mark.parametrize("keyword", ["temperature", "max_calls", "api"])
def test_the_misspelt_keyword_hint_suggests_only_near_keywords(keyword: str) -> None:
    """Kills: a looser hint cutoff (`difflib.get_close_matches(..., cutoff=0.5)` or lower):
    `temperature` (a sampling parameter, closest to `max_concurrency` at 0.38), `max_calls` (a
    budget, `max_retries` at 0.5) and `api` (`api_base` at 0.55) are far from every keyword of
    `LM`, so the refusal lists the keywords without a "did you mean" that would mislead."""
    with pytest.raises(TypeError) as refused:
        LM(ScriptedLM(lambda m: ""), **{keyword: 1})
    said = str(refused.value)
    assert "did you mean" not in said
    assert said.startswith(f"LM() got an unexpected keyword argument {keyword!r} (LM takes ")


def test_skill_optimizer_resolves_an_unset_threads_to_the_one_default() -> None:
    """Kills: `SkillOptimizer`'s `threads=None` (its record's default, so that DSPy's
    `num_threads=` can be told apart) resolving to anything but `DEFAULT_THREADS`."""
    assert SkillOptimizer(lambda gold, pred: 1.0).threads == DEFAULT_THREADS
    assert SkillOptimizer(lambda gold, pred: 1.0, num_threads=2).threads == 2
