"""What the Sleep CLI tells a user to do next: every suggestion names a `skillopt-dsl sleep`
command and flags that exist (a test reads every string of the package and checks them against
the CLI).

The library's pre-flight speaks to Python users (`Gate.mean_only()`, "fewer planned
decisions"); `cli_advice` turns that advice into the `sleep run` flags that do the same.
"""

from __future__ import annotations

import re

__all__ = [
    "REVIEW_TASKS",
    "add_checks",
    "cli_advice",
    "no_sessions",
    "nothing_to_adopt",
    "only_no_refusal",
    "reread",
    "train_on_review",
]

REVIEW_TASKS = ".skillopt/sleep/review/tasks.jsonl"
"""Where `sleep harvest` writes the tasks to review (relative to the project)."""

_EXAMPLE_CHECK = '{"kind": "contains", "value": "..."}'


def reread(skipped: int, watermark: str | None) -> str:
    """Sessions skipped as older than the watermark, and how to read them again."""
    return (
        f"{skipped} session(s) older than the watermark ({watermark or 'none'}) were skipped: "
        "a night already read them. Re-read them with `skillopt-dsl sleep harvest --since "
        "YYYY-MM-DD` or `skillopt-dsl sleep harvest --all`"
    )


def no_sessions(home: str) -> str:
    """No session of the project was found at all."""
    return (
        f"no session of this project was found under {home}: check `--home` and `--source` "
        "(`skillopt-dsl sleep harvest --home ~ --source auto`), and list the folders its "
        'sessions were recorded in as "session_cwds" in .skillopt/sleep.json'
    )


def train_on_review(tasks_path: str = REVIEW_TASKS) -> str:
    """How to review harvested tasks and run a night on them."""
    return (
        "review them with `skillopt-dsl sleep review` (`--accept ID`, `--drop ID`, "
        f"`--edit ID --add-check '{_EXAMPLE_CHECK}'`), then "
        f"`skillopt-dsl sleep run --tasks {tasks_path} --reviewed-only`"
    )


def add_checks(task_id: str = "ID") -> str:
    """How to give a task a check the live files can fail."""
    return f"`skillopt-dsl sleep review --edit {task_id} --add-check '{_EXAMPLE_CHECK}'`"


def only_no_refusal(where: str, tasks: int) -> str:
    """Every task only checks `no_refusal`: the live files pass it, nothing can be learned."""
    return (
        f"all {tasks} task(s) of {where} only check no_refusal, which the live files already "
        "pass: a night cannot learn anything from them. Add checks that say what a good reply "
        f"holds: `skillopt-dsl sleep harvest --all`, then {add_checks()}, then "
        f"`skillopt-dsl sleep run --tasks {REVIEW_TASKS} --reviewed-only`"
    )


def nothing_to_adopt(project: str) -> str:
    """`sleep adopt` with no staged proposal: why, and what can be done."""
    return (
        f"no staged night of {project} has a proposal: a night stages one only when the gate "
        "accepts a candidate. See each night and why nothing passed with `skillopt-dsl sleep "
        "status`; give the tasks better checks (`skillopt-dsl sleep harvest --all`, "
        f"{add_checks()}) and run `skillopt-dsl sleep run --tasks {REVIEW_TASKS}`"
    )


_MEAN_ONLY = re.compile(r"Gate\.mean_only\(\)")
_FEWER = re.compile(r"fewer planned decisions \((\d+) now\)")
_MORE_VAL = "Use more validation examples (50-100+)"


def cli_advice(statement: str) -> str:
    """The library's pre-flight advice with the `sleep run` flags that act on it.

    >>> out = cli_advice("Use more validation examples (50-100+), fewer planned decisions "
    ...                  "(8 now), or Gate.mean_only() if you accept that useless edits pass")
    >>> "sleep run --gate mean-only" in out and "--batch-size" in out and "Gate." not in out
    True
    """
    text = statement.replace(
        _MORE_VAL,
        "Use more val tasks (more sessions: `skillopt-dsl sleep harvest --all`, then "
        f"`skillopt-dsl sleep run --tasks {REVIEW_TASKS}`)",
    )
    text = _FEWER.sub(
        lambda m: (
            f"fewer planned decisions ({m.group(1)} now: a larger `skillopt-dsl sleep run "
            "--batch-size`, `--epochs 1`)"
        ),
        text,
    )
    return _MEAN_ONLY.sub("`skillopt-dsl sleep run --gate mean-only`", text)
