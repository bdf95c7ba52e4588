"""What the commands print: the scores table, the gate log, usage lines (rich tables)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import typer
from rich import box
from rich.console import Console
from rich.table import Table

from skillopt_dsl.baselines import Baseline, constant_baseline, not_better_warning
from skillopt_dsl.cli.options import SplitChoice
from skillopt_dsl.compile import CompileResult
from skillopt_dsl.evaluate import EvaluationReport
from skillopt_dsl.gate import GateDecision
from skillopt_dsl.recipes import Recipe
from skillopt_dsl.types import Example


def fmt_score(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def _delta(after: float | None, before: float | None) -> str:
    return "-" if before is None or after is None else f"{after - before:+.4f}"


def _scores_table(
    title: str,
    rows: Sequence[tuple[str, float | None, float | None]],
    baseline: Baseline | None,
    skill_column: str,
) -> Table:
    """One row per split: seed, best constant answer (when the output is a label), the skill,
    and the skill's gain over each."""
    constant = None if baseline is None else f"constant {baseline.label!r}"
    columns = ["split", "seed", *([constant] if constant else []), skill_column, "vs seed"]
    columns += ["vs constant"] if constant else []
    table = Table(title=title)
    for column in columns:
        table.add_column(column, justify="left" if column == "split" else "right")
    for split, seed, skill in rows:
        cells = [split, fmt_score(seed)]
        fixed = _constant_on(baseline, split)
        cells += [fmt_score(fixed)] if baseline is not None else []
        cells += [fmt_score(skill), _delta(skill, seed)]
        cells += [_delta(skill, fixed)] if baseline is not None else []
        table.add_row(*cells)
    return table


def _constant_on(baseline: Baseline | None, split: str) -> float | None:
    """The constant answer's score on `split` (validation, or "validation (12 of 50)" where the
    run compared on part of it: where it was chosen, rescored there; any other split: the
    held-out score)."""
    if baseline is None:
        return None
    on_validation = split == "validation" or split.startswith("validation (")
    return baseline.val_score if on_validation else baseline.test_score


def _usage_line(usage: Any) -> str:
    cost = "unknown (unpriced model)" if usage.cost_usd is None else f"${usage.cost_usd:.4f}"
    return (
        f"calls: {usage.calls}  cache hits: {usage.cache_hits}  tokens: {usage.total_tokens} "
        f"(prompt {usage.prompt_tokens}, completion {usage.completion_tokens})  cost: {cost}"
    )


def _gate_table(result: CompileResult) -> Table:
    """Every gate decision with its evidence: the significance it could use (alpha), the
    statistic it needed, its p-value, what it spent, and where a stopped loser stopped."""
    table = Table(title="gate decisions: the evidence each needed and had", box=box.SIMPLE_HEAD)
    for column in ("#", "verdict", "cand", "inc", "n", "alpha", "needed", "p", "spent"):
        table.add_column(column, justify="left" if column == "verdict" else "right")
    for number, d in enumerate(result.gate_log, start=1):
        verdict = (
            f"ACCEPTED@{d.accepted_at_look}"
            if d.accepted_at_look is not None
            else "ACCEPTED"
            if d.accepted
            else f"stop@{d.stopped_at_look}"
            if d.stopped_early
            else "rejected"
        )
        table.add_row(
            str(number),
            verdict,
            f"{d.candidate_score:.3f}",
            f"{d.incumbent_score:.3f}",
            f"{d.examples_scored}/{d.n_examples}",
            _levels(d),
            "-" if d.critical is None else f"{d.critical:g}",
            "-" if d.p_value is None else f"{d.p_value:.2g}",
            "-" if d.charged is None else f"{d.charged:.2g}",
        )
    return table


def _levels(d: GateDecision) -> str:
    """The level the deciding test ran at: the whole set's, or an early acceptance's look's."""
    level = d.look_alpha if d.accepted_at_look is not None else d.alpha
    return "-" if level is None else f"{level:.2g}"


def _validation_label(result: CompileResult) -> str:
    """ "validation", or "validation (15 of 30)" when the best skill was accepted early and the
    scores compare on the examples it was scored on."""
    if 0 < result.val_examples < result.val_size:
        return f"validation ({result.val_examples} of {result.val_size})"
    return "validation"


def print_compile(result: CompileResult, wall_s: float) -> None:
    name = result.metadata.get("name", "skill")
    rows = (
        (_validation_label(result), result.seed_val_score, result.val_score),
        ("test", result.seed_test_score, result.test_score),
    )
    title = f"{name}: seed vs {'constant answer vs ' if result.baseline else ''}compiled"
    Console(soft_wrap=True).print(_scores_table(title, rows, result.baseline, "compiled"))
    if result.baseline is None:
        typer.echo("no constant baseline: the output has no fixed label set; compare with the seed")
    else:
        typer.echo(
            f"constant answer: {result.baseline.label!r} for every example (best on validation, "
            "no model call)"
        )
    if result.baseline_warning is not None:
        typer.echo(f"WARNING: {result.baseline_warning}")
    accepted = sum(1 for d in result.gate_log if d.accepted)
    why: str = result.stop_reason
    if result.stop_detail is not None:  # what the reason alone does not say
        why += f" ({result.stop_detail})"
    typer.echo(f"stopped: {why}; {accepted} of {len(result.gate_log)} candidates accepted")
    if result.gate_log:
        Console(soft_wrap=True).print(_gate_table(result))
    if result.preflight is not None:
        typer.echo(result.preflight.summary())
        if result.preflight.warning is not None:
            typer.echo(f"WARNING: {result.preflight.warning}")
    typer.echo(f"search {_usage_line(result.usage)}")
    if result.test_usage is not None:
        typer.echo(f"test   {_usage_line(result.test_usage)} (not charged to the search budget)")
    typer.echo(f"wall time: {wall_s:.1f}s")
    if result.run_dir is not None:
        typer.echo(f"best skill: {result.run_dir / 'best_skill.md'}")
        typer.echo(f"report:     skillopt-dsl report {result.run_dir}")


def print_sweep(result: Any) -> None:
    """Print a `SweepResult`: one row per trial of the study, then the best trial."""
    table = Table(title=f"study {result.study_name}: {len(result.trials)} trials")
    for column in ("trial", "state", "params", "val score", "calls", "run dir"):
        table.add_column(column)
    for trial in result.trials:
        params = ", ".join(f"{k}={_short(v)}" for k, v in sorted(trial.params.items()))
        table.add_row(
            str(trial.number),
            trial.state.name,
            params,
            fmt_score(trial.value),
            str(trial.calls),
            str(trial.run_dir or "-"),
        )
    Console(soft_wrap=True).print(table)
    best = result.best
    if best is None:
        typer.echo("no trial has completed yet")
    else:
        typer.echo(
            f"best: trial {best.number}, val {fmt_score(best.value)}, run dir {best.run_dir}"
        )


def _short(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def print_eval(
    recipe: Recipe,
    skill_hash: str,
    split: SplitChoice,
    report: EvaluationReport,
    seed_mean: float | None,
    held_out: Sequence[Example] | None,
) -> None:
    """The eval command's output; `held_out` is the scored split unless it is validation."""
    row_name = "validation" if split is SplitChoice.val else split.value
    baseline = constant_baseline(recipe.module, recipe.splits.val, held_out)  # no model call
    typer.echo(f"skill {skill_hash[:12]} on {recipe.name}/{split.value} with {report.model}")
    title = f"seed vs {'constant answer vs ' if baseline else ''}skill"
    rows = [(row_name, seed_mean, report.mean)]
    Console(soft_wrap=True).print(_scores_table(title, rows, baseline, "skill"))
    summary = report.summary()
    correct = sum(1 for r in report.records if r.score >= 1.0)
    typer.echo(f"mean: {report.mean:.4f}")
    typer.echo(
        f"examples: {summary['n']}  correct: {correct}  model errors: {summary['errors']}  "
        f"parse failures: {summary['parse_failures']}"
    )
    if baseline is None:
        typer.echo("no constant baseline: the output has no fixed label set")
        return
    typer.echo(f"constant answer: {baseline.label!r} for every example (best on validation)")
    constant = _constant_on(baseline, row_name)
    warning = (
        None
        if constant is None
        else not_better_warning(baseline.label, row_name, report.mean, constant)
    )
    if warning is not None:
        typer.echo(f"WARNING: {warning}")
