"""`best_skill.md` is written in one place (issue 51): the run's `publish_best`, at the run's start
(the seed), at each acceptance and at its end (with the test scores)."""

from __future__ import annotations

import ast
from pathlib import Path

import skillopt_dsl
from skillopt_dsl.export import split_front_matter
from tests.test_compile import TEST, run

PACKAGE = Path(skillopt_dsl.__file__).parent


def test_the_final_best_skill_carries_the_runs_front_matter_and_test_scores(
    tmp_path: Path,
) -> None:
    """Kills: the end of the run no longer writing `best_skill.md` (it would keep the last
    acceptance's front matter, without test scores), or writing other metadata than the
    result reports."""
    result = run(tmp_path / "run", testset=TEST)
    meta, body = split_front_matter((tmp_path / "run" / "best_skill.md").read_text())
    assert body == result.best_skill.text
    assert meta["test_score"] == result.test_score is not None
    assert meta["seed_test_score"] == result.seed_test_score
    assert {k: meta[k] for k in result.metadata} == dict(result.metadata)


def test_only_the_run_calls_the_writer() -> None:
    """Kills: a second place (compile.py, an optimizer, the DSPy bridge) writing
    `best_skill.md` with its own `save_best` call or front matter."""
    callers = sorted(
        path.relative_to(PACKAGE).as_posix()
        for path in PACKAGE.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Attribute) and node.attr == "save_best"
    )
    assert callers == ["driver/run.py", "dspy/optimizer.py"], callers
