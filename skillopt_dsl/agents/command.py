"""`CommandAgent`: each example runs an external agent CLI (Claude Code, Codex, ...) in a workspace.

Per example, `run`:

1. reserves one call in the run's usage ledger (a harness run is a call: `BudgetExceeded`
   propagates before anything starts);
2. creates a fresh temporary root holding `work/` (the agent's working directory), `home/` and
   `tmp/` (the child's `HOME` and `TMPDIR`), and seeds `work/` from the example's `files` input
   (a mapping of relative path to text);
3. installs the skill where the agent reads it (`.claude/skills/<name>/SKILL.md` or `AGENTS.md`);
4. starts the command from the argv template (`{prompt}`, `{workspace}`, `{skill_file}` are
   substituted; no shell) in its own process group, with only the allowlisted environment
   variables (plus `HOME`, `TMPDIR` and the explicit `env` values), and kills the whole group at
   the timeout;
5. reads its output (`"json"`: one object as `claude -p --output-format json` prints; `"jsonl"`:
   one event per line as `codex exec --json` prints; `"text"`: stdout is the answer), and the
   usage and cost it reports where it prints them;
6. records the workspace diff and runs the check command (the example's `check` label, else the
   module's `check`) in the workspace;
7. removes the whole temporary root, whatever happened.

A command that exits non-zero, prints invalid JSON, reports an error or times out is a failed
rollout (`ModelError` with the reason; scored 0), never a hang. The executable is looked up when
the module is built, so a missing CLI is a clear error before any spend.

Isolation is what a process can be given without a container: the working directory, `HOME` and
`TMPDIR` inside the temporary root, and a scrubbed environment. An agent that deliberately writes
to absolute paths elsewhere is not stopped; wrap the command in a sandbox (`bwrap`, `docker run`)
through the argv template for that.
"""

from __future__ import annotations

import contextlib
import difflib
import hashlib
import json
import logging
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Unpack

from skillopt_dsl.agent_kinds import agent_kind
from skillopt_dsl.agents.command_settings import (
    DEFAULT_ENV_ALLOWLIST,
    CommandAgentOptions,
    CommandAgentSettings,
    OutputFormat,
)
from skillopt_dsl.agents.module import call_agent_metric
from skillopt_dsl.errors import ModelError, UserInputError
from skillopt_dsl.export import SkillLayout, install_skill
from skillopt_dsl.lm.base import Completion
from skillopt_dsl.metrics.score import Score
from skillopt_dsl.module import InputField, OutputField, RunOutcome, SkillModule
from skillopt_dsl.options import settings_from, takes_options
from skillopt_dsl.skill import Skill
from skillopt_dsl.types import Example, json_float, json_int

if TYPE_CHECKING:
    from skillopt_dsl.lm import LM, UsageLedger

__all__ = [
    "DEFAULT_ENV_ALLOWLIST",
    "CheckResult",
    "CommandAgent",
    "CommandAgentOptions",
    "CommandAgentSettings",
    "HarnessRun",
    "WorkspaceDiff",
]

logger = logging.getLogger(__name__)

_PLACEHOLDERS = ("{prompt}", "{workspace}", "{skill_file}")
_MAX_CAPTURE = 200_000
_MAX_PATCH = 20_000
_TEXT_FILE_LIMIT = 64_000


@dataclass(frozen=True)
class WorkspaceDiff:
    """What the agent changed in its workspace (the installed skill files included)."""

    added: tuple[str, ...] = ()
    modified: tuple[str, ...] = ()
    deleted: tuple[str, ...] = ()
    patch: str = ""

    @property
    def changed(self) -> bool:
        """True when any file was added, modified or deleted."""
        return bool(self.added or self.modified or self.deleted)


@dataclass(frozen=True)
class CheckResult:
    """The check command's verdict (exit code 0 passes)."""

    argv: tuple[str, ...]
    returncode: int | None
    output: str
    timed_out: bool = False

    @property
    def passed(self) -> bool:
        """True when the check exited 0 within its time limit."""
        return self.returncode == 0 and not self.timed_out


@dataclass(frozen=True)
class HarnessRun:
    """One agent CLI run: the trace of a `CommandAgent` rollout (`RunOutcome.trace`)."""

    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    answer: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = None
    duration_s: float = 0.0
    skill_file: str = ""
    diff: WorkspaceDiff = field(default_factory=WorkspaceDiff)
    check: CheckResult | None = None

    @property
    def text(self) -> str:
        """The answer (what `SkillModule.outcome` parses)."""
        return self.answer

    @property
    def latency_s(self) -> float:
        """The run's wall time."""
        return self.duration_s

    @property
    def cached(self) -> bool:
        """Always False: a harness run is never answered from a cache."""
        return False

    def render_for_reflection(self) -> str:
        """A compact account for the optimizer model: the answer, the diff and the check."""
        lines = [f"   answer: {self.answer[:300]!r}"]
        if self.diff.changed:
            lines.append(
                f"   files: added {list(self.diff.added)}, modified {list(self.diff.modified)}, "
                f"deleted {list(self.diff.deleted)}"
            )
        if self.check is not None:
            flag = "  " if self.check.passed else ">>"
            verdict = "passed" if self.check.passed else "FAILED"
            lines.append(
                f"{flag} check {' '.join(self.check.argv)} {verdict}: {self.check.output[-300:]}"
            )
        return "\n".join(lines)


class CommandAgent(SkillModule):
    """Runs an agent CLI per example (see the module docstring).

    The task is the `task` input; the workspace is seeded from the example's `files` input (a
    mapping of relative path to text, optional). The answer is what the agent reports. Score:
    the metric when given (a metric with a `trace` parameter receives the `HarnessRun`), else the
    check command's pass or fail.

    Args:
        argv: the command template, e.g. `["claude", "-p", "{prompt}", "--output-format", "json"]`.
        output: how to read stdout: "json", "jsonl" or "text".
        layout: where the skill goes: "claude" (`.claude/skills/<name>/SKILL.md`) or "agents-md".
        skill_name: the installed skill's name (and folder).
        timeout_s: the agent's wall-clock limit; the process group is killed past it.
        env_allowlist: environment variables copied from this process into the child's.
        env: extra variables set for the child (explicit values, e.g. a test key).
        check: a command run in the workspace after the agent (exit 0 passes); an example's
            `check` label (a list of strings) overrides it.
        check_timeout_s: the check's wall-clock limit.
        max_usd_per_run: the declared worst-case price of one run, in USD. Required under a
            `Budget(max_usd=...)` (an agent CLI cannot be priced before it runs: an unpriced run
            is refused); a run that reports no cost is charged this price.

    The keywords after `argv`, `skill` and `metric` are `CommandAgentSettings`' fields
    (`CommandAgentOptions` types them); an unknown one is a `TypeError`.
    """

    task: str = InputField()
    answer: str = OutputField()

    @takes_options(CommandAgentSettings)
    def __init__(
        self,
        *,
        argv: Sequence[str],
        skill: str | Path | Skill | None = None,
        metric: Callable[..., Any] | None = None,
        **options: Unpack[CommandAgentOptions],
    ) -> None:
        super().__init__(skill=skill, metric=metric)
        settings = settings_from("CommandAgent", CommandAgentSettings, options)
        max_usd = settings.max_usd_per_run
        if max_usd is not None and not max_usd >= 0:
            raise UserInputError(f"max_usd_per_run must be >= 0, got {max_usd!r}")
        self.max_usd_per_run = max_usd
        self.harness = HarnessSettings.of(argv, settings)
        self.harness.validate()
        if self._metric is None and self.harness.check is None:
            raise UserInputError(
                f"{self.name} needs a metric or a check command to score runs; pass metric=... "
                "or check=[...]"
            )

    def run(self, skill: Skill, example: Example, lm: LM, *, seed: int) -> RunOutcome:
        """Run the agent once on `example` under `skill`; a failure raises `ModelError`."""
        ledger = lm.ledger
        reservation = ledger.reserve(0, 0, max_cost_usd=self.max_usd_per_run)
        try:
            harness_run = self._run_in_workspace(skill, example)
        except ModelError as exc:
            ledger.settle(reservation, None, error_type="AgentRunFailed")
            raise ModelError(f"agent command failed on example {example.id!r}: {exc}") from None
        except BaseException:
            ledger.settle(reservation, None, error_type="interrupted")
            raise
        _settle(ledger, reservation, harness_run, self.max_usd_per_run)
        return self.outcome(harness_run, trace=harness_run)

    def score(self, example: Example, outcome: RunOutcome) -> Score:
        """The metric when given (with `trace=` the `HarnessRun`), else the check's verdict."""
        run = outcome.trace
        if self._metric is not None:
            return call_agent_metric(self._metric, example, outcome, run)
        check = run.check if isinstance(run, HarnessRun) else None
        if check is None:
            return Score(0.0, "no check ran, so the run cannot be scored")
        if check.passed:
            return Score(1.0, "the check passed")
        why = "timed out" if check.timed_out else f"exited {check.returncode}"
        return Score(0.0, f"the check {why}: {check.output[-500:]}")

    # -- one run -------------------------------------------------------------------------------
    def _run_in_workspace(self, skill: Skill, example: Example) -> HarnessRun:
        root = Path(tempfile.mkdtemp(prefix="skillopt-agent-"))
        try:
            work, home, tmp = root / "work", root / "home", root / "tmp"
            for folder in (work, home, tmp):
                folder.mkdir()
            seed_files(work, example)
            skill_file = install_skill(
                skill,
                work,
                layout=self.harness.layout,
                name=self.harness.skill_name,
                description=self.description.split("\n\n")[0] or self.name,
            )
            before = _snapshot(work)
            prompt = self.render(Skill(""), example)[-1]["content"]
            argv = self.harness.command(prompt, work, skill_file)
            child_env = self.harness.child_env(home, tmp)
            started = time.perf_counter()
            stdout, stderr, code = _run_group(argv, work, child_env, self.harness.timeout_s)
            duration = time.perf_counter() - started
            if code != 0:
                raise ModelError(f"the agent exited with code {code}: {_tail(stderr or stdout)}")
            answer, usage = read_output(stdout, self.harness.output)
            diff = _diff(before, _snapshot(work))
            check = self._check(example, work, child_env)
            return HarnessRun(
                argv=argv,
                returncode=code,
                stdout=stdout,
                stderr=stderr,
                answer=answer,
                prompt_tokens=usage.prompt_tokens,
                completion_tokens=usage.completion_tokens,
                cost_usd=usage.cost_usd,
                duration_s=duration,
                skill_file=str(skill_file.relative_to(work)),
                diff=diff,
                check=check,
            )
        finally:
            shutil.rmtree(root, ignore_errors=True)

    def _check(self, example: Example, work: Path, env: dict[str, str]) -> CheckResult | None:
        argv = example.labels.get("check", self.harness.check)
        if argv is None:
            return None
        if isinstance(argv, str) or not all(isinstance(a, str) for a in argv):
            raise UserInputError(
                f"example {example.id!r}: the 'check' label must be a list of strings (an argv)"
            )
        command = tuple(argv)
        out, err, code = _run_group(command, work, env, self.harness.check_timeout_s, fail=False)
        timed_out = code is None
        return CheckResult(command, code, _tail(out + err, 2000), timed_out)


@dataclass(frozen=True)
class HarnessSettings:
    """A `CommandAgent`'s typed settings (see its Args), normalised for the runs."""

    argv: tuple[str, ...]
    output: OutputFormat
    layout: SkillLayout
    skill_name: str
    timeout_s: float
    env_allowlist: tuple[str, ...]
    env: Mapping[str, str]
    check: tuple[str, ...] | None
    check_timeout_s: float

    @classmethod
    def of(cls, argv: Sequence[str], settings: CommandAgentSettings) -> HarnessSettings:
        """The harness of a `CommandAgent` built with `argv` and `settings`."""
        return cls(
            argv=tuple(argv),
            output=settings.output,
            layout=agent_kind(settings.layout, what="skill layout", installable=True).name,
            skill_name=settings.skill_name,
            timeout_s=settings.timeout_s,
            env_allowlist=tuple(settings.env_allowlist),
            env=dict(settings.env or {}),
            check=tuple(settings.check) if settings.check is not None else None,
            check_timeout_s=settings.check_timeout_s,
        )

    def validate(self) -> None:
        """Refuse unusable settings, and a missing executable, before any spend."""
        if not self.argv or not all(isinstance(a, str) for a in self.argv):
            raise UserInputError(
                "argv must be a non-empty list of strings, e.g. ['claude', '-p', '{prompt}']"
            )
        if self.output not in ("json", "jsonl", "text"):
            raise UserInputError(f"output must be 'json', 'jsonl' or 'text', got {self.output!r}")
        if self.timeout_s <= 0 or self.check_timeout_s <= 0:
            raise UserInputError("timeout_s and check_timeout_s must be > 0")
        if not any("{prompt}" in a for a in self.argv):
            raise UserInputError("argv must contain '{prompt}' where the task goes")
        for command in (self.argv, self.check):
            if command and "{" not in command[0] and _find_executable(command[0]) is None:
                raise UserInputError(
                    f"executable {command[0]!r} was not found on PATH; install it or give its "
                    "full path (nothing was run and nothing was spent)"
                )

    def command(self, prompt: str, work: Path, skill_file: Path) -> tuple[str, ...]:
        """The argv with its placeholders filled in (each element stays one argument)."""
        values = dict(zip(_PLACEHOLDERS, (prompt, str(work), str(skill_file)), strict=True))
        filled = []
        for part in self.argv:
            for placeholder, value in values.items():
                part = part.replace(placeholder, value)
            filled.append(part)
        executable = _find_executable(filled[0])
        if executable is None:
            raise ModelError(f"executable {filled[0]!r} is no longer on PATH")
        return (executable, *filled[1:])

    def child_env(self, home: Path, tmp: Path) -> dict[str, str]:
        """The child's whole environment: allowlisted variables, HOME, TMPDIR and `env`."""
        chosen = {k: os.environ[k] for k in self.env_allowlist if k in os.environ}
        chosen.update({"HOME": str(home), "TMPDIR": str(tmp)})
        chosen.update(self.env)
        return chosen


@dataclass(frozen=True)
class ReportedUsage:
    """Usage and cost an agent printed (zeros and None when it printed none)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = None


def read_output(stdout: str, output: OutputFormat) -> tuple[str, ReportedUsage]:
    """The answer and reported usage from an agent's stdout; invalid output is a `ModelError`."""
    if output == "text":
        return stdout.strip(), ReportedUsage()
    if output == "json":
        return _read_json(stdout)
    return _read_jsonl(stdout)


def _read_json(stdout: str) -> tuple[str, ReportedUsage]:
    try:
        data = json.loads(stdout)
    except ValueError as exc:
        raise ModelError(f"the agent printed invalid JSON ({exc}): {_tail(stdout, 300)}") from None
    if not isinstance(data, dict):
        raise ModelError(f"the agent printed JSON that is not an object: {_tail(stdout, 300)}")
    if data.get("is_error") is True or data.get("subtype", "success") != "success":
        raise ModelError(
            f"the agent reported an error: {_tail(str(data.get('result', data)), 300)}"
        )
    answer = next(
        (data[k] for k in ("result", "output", "text") if isinstance(data.get(k), str)), None
    )
    if answer is None:
        raise ModelError(f"the agent's JSON has no 'result' text: {_tail(stdout, 300)}")
    return answer, _usage_of(data)


def _read_jsonl(stdout: str) -> tuple[str, ReportedUsage]:
    answer: str | None = None
    prompt = completion = 0
    cost: float | None = None
    for number, line in enumerate(stdout.splitlines(), 1):
        if not line.strip():
            continue
        try:
            event = json.loads(line)
        except ValueError as exc:
            raise ModelError(
                f"line {number} of the agent's output is invalid JSON ({exc})"
            ) from None
        if not isinstance(event, dict):
            continue
        if event.get("type") in ("error", "turn.failed"):
            raise ModelError(f"the agent reported an error: {_tail(json.dumps(event), 300)}")
        answer = _event_text(event) or answer
        usage = _usage_of(event)
        prompt, completion = prompt + usage.prompt_tokens, completion + usage.completion_tokens
        if usage.cost_usd is not None:
            cost = (cost or 0.0) + usage.cost_usd
    if answer is None:
        raise ModelError("the agent's JSON lines contain no final message")
    return answer, ReportedUsage(prompt, completion, cost)


def _event_text(event: Mapping[str, object]) -> str | None:
    item = event.get("item")
    if isinstance(item, dict) and item.get("type") in ("agent_message", "assistant_message"):
        text = item.get("text")
        return text if isinstance(text, str) else None
    result = event.get("result")
    return result if isinstance(result, str) else None


def _usage_of(data: Mapping[str, object]) -> ReportedUsage:
    usage = data.get("usage")
    usage = usage if isinstance(usage, dict) else {}
    prompt = _first_int(usage, ("input_tokens", "prompt_tokens"))
    completion = _first_int(usage, ("output_tokens", "completion_tokens"))
    cost = next(
        (json_float(data[k]) for k in ("total_cost_usd", "cost_usd") if _is_number(data.get(k))),
        None,
    )
    return ReportedUsage(prompt, completion, cost)


def _first_int(data: Mapping[str, object], keys: Sequence[str]) -> int:
    return next((json_int(data[k]) for k in keys if _is_number(data.get(k))), 0)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def seed_files(work: Path, example: Example) -> None:
    """Write the example's `files` (relative path -> text) into the workspace."""
    files = example.inputs.get("files") or {}
    if not isinstance(files, Mapping):
        raise UserInputError(f"example {example.id!r}: 'files' must map relative paths to text")
    root = work.resolve()
    for name, content in files.items():
        target = (root / str(name)).resolve()
        if root not in target.parents or not isinstance(content, str):
            raise UserInputError(
                f"example {example.id!r}: file {name!r} must be a relative path inside the "
                "workspace with text content"
            )
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, encoding="utf-8")


def _run_group(
    argv: Sequence[str], cwd: Path, env: dict[str, str], timeout_s: float, *, fail: bool = True
) -> tuple[str, str, int | None]:
    """Run `argv` in its own process group; kill the group at the timeout.

    Returns (stdout, stderr, exit code); the code is None after a timeout when `fail` is False,
    and a timeout is a `ModelError` when `fail` is True.
    """
    with subprocess.Popen(
        list(argv),
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    ) as process:
        try:
            out, err = process.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _kill_group(process)
            out, err = _drain(process)
            if fail:
                raise ModelError(
                    f"the agent ran past timeout_s={timeout_s:g} and was killed "
                    f"(with its process group): {_tail(_decode(err), 300)}"
                ) from None
            return _decode(out), _decode(err), None
        finally:
            _kill_group(process)
    return _decode(out), _decode(err), process.returncode


def _drain(process: subprocess.Popen[bytes]) -> tuple[bytes, bytes]:
    """What a killed process left in its pipes; empty if a stray child still holds them."""
    try:
        return process.communicate(timeout=5.0)
    except subprocess.TimeoutExpired:
        return b"", b""


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


def _find_executable(name: str) -> str | None:
    if os.sep in name:
        return name if os.access(name, os.X_OK) and Path(name).is_file() else None
    return shutil.which(name)


def _decode(data: bytes | None) -> str:
    return (data or b"")[:_MAX_CAPTURE].decode("utf-8", errors="replace")


def _tail(text: str, limit: int = 500) -> str:
    text = text.strip()
    return text if len(text) <= limit else "…" + text[-limit:]


def _snapshot(work: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(work)): path.read_bytes()
        for path in sorted(work.rglob("*"))
        if path.is_file() and not path.is_symlink()
    }


def _diff(before: Mapping[str, bytes], after: Mapping[str, bytes]) -> WorkspaceDiff:
    added = tuple(sorted(set(after) - set(before)))
    deleted = tuple(sorted(set(before) - set(after)))
    modified = tuple(
        sorted(
            name
            for name in set(before) & set(after)
            if hashlib.sha256(before[name]).digest() != hashlib.sha256(after[name]).digest()
        )
    )
    chunks: list[str] = []
    for name in (*added, *modified, *deleted):
        old, new = _text_of(before.get(name, b"")), _text_of(after.get(name, b""))
        chunks += difflib.unified_diff(
            old.splitlines(keepends=True), new.splitlines(keepends=True), f"a/{name}", f"b/{name}"
        )
    patch = "".join(chunks)
    if len(patch) > _MAX_PATCH:
        patch = patch[:_MAX_PATCH] + f"\n[... {len(patch) - _MAX_PATCH} more characters cut]\n"
    return WorkspaceDiff(added, modified, deleted, patch)


def _text_of(data: bytes) -> str:
    if len(data) > _TEXT_FILE_LIMIT or b"\0" in data:
        return f"(binary or large file, {len(data)} bytes)\n"
    return data.decode("utf-8", errors="replace")


def _settle(
    ledger: UsageLedger, reservation: Any, run: HarnessRun, declared_usd: float | None
) -> None:
    """Record the run; one that reported no cost is charged its declared price (if any)."""
    cost = run.cost_usd if run.cost_usd is not None else declared_usd
    completion = Completion(run.answer, run.prompt_tokens, run.completion_tokens, cost)
    ledger.settle(reservation, completion)
