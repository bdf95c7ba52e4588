"""Guards on the keys that tie a score to the model that produced it (issue 20's audit):
the evaluation cache keys on the LM's identity, not its name, and the run config records the
reflector's identity, so a resume with another reflector setting is refused.

Both models are `ScriptedLM` fakes; two fakes share one model name and differ in temperature.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import skillopt_dsl as sd
from skillopt_dsl.errors import RunDirError
from skillopt_dsl.evaluate import EvaluationCache, evaluate
from skillopt_dsl.lm import LM, SamplingParams
from skillopt_dsl.optimizers import GradientText, ReflectiveProposer
from skillopt_dsl.testing import ScriptedLM
from skillopt_dsl.testing.contract import (
    TRAIN,
    VAL,
    ContractParity,
    contract_examples,
    contract_reflector,
    contract_target,
)


def always(answer: str, temperature: float) -> tuple[ScriptedLM, LM]:
    """A fake model named "scripted/same" that answers `answer`, at `temperature`."""
    fake = ScriptedLM(lambda messages: answer, model="scripted/same")
    return fake, LM(fake, params=SamplingParams(temperature=temperature))


def test_the_evaluation_cache_keys_on_the_lm_identity_not_its_name() -> None:
    """Kills: the evaluation cache keyed on the model name. Two LMs with the same name and
    different temperatures must not share rollouts: the second is called and scored itself."""
    examples = contract_examples(0, 6)  # 3 even, 3 odd
    cache = EvaluationCache()
    cold_fake, cold = always("even", 0.0)
    hot_fake, hot = always("odd", 0.7)
    assert cold.model == hot.model
    first = evaluate(ContractParity(), examples, lm=cold, cache=cache, threads=1, progress=False)
    second = evaluate(ContractParity(), examples, lm=hot, cache=cache, threads=1, progress=False)
    assert len(cold_fake.calls) == 6
    assert len(hot_fake.calls) == 6, "the hot model's rollouts came from the cold model's cache"
    assert [r.output for r in second.records] == ["odd"] * 6
    assert [r.score for r in second.records] == [1.0 - r.score for r in first.records]


def compile_with_reflector(run_dir: Path, temperature: float, *, resume: bool) -> sd.CompileResult:
    reflector = LM(contract_reflector(), params=SamplingParams(temperature=temperature))
    return sd.compile(
        ContractParity(),
        TRAIN[:16],
        VAL,
        optimizer=GradientText(
            proposers=[ReflectiveProposer(read_successes=False)], epochs=1, batch_size=8
        ),
        lm=ScriptedLM(contract_target),
        optimizer_lm=reflector,
        run_dir=run_dir,
        resume=resume,
        threads=1,
    )


def test_a_resume_with_another_reflector_temperature_is_refused(tmp_path: Path) -> None:
    """Kills: the run config recording the reflector's model name instead of its identity (a
    resume whose reflector samples at another temperature would mix two models' proposals)."""
    compile_with_reflector(tmp_path, 0.0, resume=False)
    assert compile_with_reflector(tmp_path, 0.0, resume=True).stop_reason == "finished"
    with pytest.raises(RunDirError, match="optimizer_lm"):
        compile_with_reflector(tmp_path, 0.7, resume=True)
