"""Evidence: rule checks mined from what happened in a session, without a model.

A session is cut into *requests*: a prompt that asks for something, with the follow-ups that
steer it (corrections, interrupts, refused tool calls, "continue", "thanks"). For each request,
four kinds of evidence become checks of the kinds Sleep has (`contains`, `not_contains`), each
citing the transcript line it came from (`source`, `path:line`) and listed in the task's
`evidence`:

- **corrections** (`correction`, `interrupt`, `rejection`, `revert`): the user's next message
  after an attempt ("no, run it with MIX_ENV=test", "that's the wrong file, use lib/router.ex",
  a refused tool call with what they said instead, an interrupt, "undo that"). What the message
  names (backticked text, `KEY=value`, `--flags`, paths, "use X") becomes `contains`, what it
  rejects ("not X", "instead of X", the wrong file) `not_contains`; with nothing named, what the
  next attempt did differently (a command or a file). A check is kept only when the rejected
  attempt fails it, so every one distinguishes the attempt the user turned down from one that
  does what they asked; `accepted` cites the next attempt when it passes.
- **hook feedback** (`hook`): a hook of the user's that blocked the agent from stopping and
  said why (Claude Code's "Stop hook feedback: ... Cannot exit with unstaged changes"); what
  the hook names and the agent then did, else what the agent did differently after it (a
  command, a newly edited file), becomes `contains`: the attempt the hook turned down fails
  it, the work after the hook passes it.
- **quoted literals** (`quoted`): text the request puts in double quotes ("prints "Hello
  world"") that the agent's work then holds becomes `contains`, citing the request's line.
- **failed, then fixed** (`failed_then_fixed`): a shell command that failed (an exit code or an
  error in its result), followed by a similar command that succeeded; the part of the fixed
  command that is new becomes `contains` (the failed command fails it, the fixed one passes).
  Exploratory commands (`ls`, `grep`, `cat`, `git status`, ...) are not evidence.
- **end state** (`end_state`): the files the request ended up editing (the two most edited) and
  the last verification command that succeeded (tests, build, lint), when the request does not
  already name them.
- **compaction summaries** (`compaction`): paths and backticked names a summary says the
  session worked on, kept when the work after it touched them.

Nothing here calls a model; what a message names is read by `skillopt_dsl.sleep.fragments`
and what a shell command does by `skillopt_dsl.sleep.commands`; `skillopt_dsl.sleep.mine` adds
the intent's own heuristics and, when given one, a model's tasks.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from skillopt_dsl.sleep.commands import (
    MAX_SPAN_CHARS,
    command_core,
    command_similarity,
    fix_check,
    is_exploratory,
    is_verification,
    program_name,
)
from skillopt_dsl.sleep.fragments import fragments, meaningful, negated_names
from skillopt_dsl.sleep.harvest import Session
from skillopt_dsl.sleep.tasks import (
    Check,
    Contains,
    Evidence,
    EvidenceKind,
    NotContains,
    check_key,
    check_passes,
)
from skillopt_dsl.sleep.timeline import Step, Timeline, read_timeline

__all__ = ["Request", "command_core", "fragments", "mine_requests"]

MAX_CHECKS = 6
REDACTED = "[REDACTED"
QUOTE_CHARS = 200

_CORRECTION = re.compile(
    r"(?i)^\s*(?:no\b|nope\b|nah\b|wrong\b|not\s+(?:that|this|quite|like)|don'?t\b|do not\b"
    r"|stop\b|actually\b|wait\b|instead\b|undo\b|revert\b|roll\s*back\b|use\s)"
    r"|\b(?:that'?s|this is|it'?s|you used) (?:not|the wrong|wrong|incorrect|broken)\b"
    r"|\bwrong (?:file|command|directory|folder|branch|path|place|one|module|test)\b"
    r"|\b(?:still|again) (?:broken|failing|fails|wrong|not working)\b"
    r"|\b(?:didn'?t|doesn'?t|does not|did not) work\b|\bnot what i (?:asked|wanted|meant)\b"
    r"|\byou (?:forgot|missed|broke|deleted|removed)\b|\binstead of\b|\brather than\b"
)
_REVERT_ASK = re.compile(r"(?i)\b(?:revert|undo|roll\s*back|put (?:it|that|them) back)\b")
_REVERT_RUN = re.compile(
    r"\bgit\s+(?:checkout\s+(?:--\s|HEAD\s)|restore\b|revert\b|reset\s+--hard|stash\b)"
)
_WRONG_FILE = re.compile(r"(?i)\bwrong (?:file|path|module|place)\b")
_ACK = re.compile(
    r"(?i)^\s*(?:y(?:es|ep|eah)?|ok(?:ay)?|sure|go(?: ahead)?|continue|proceed|do it|thanks?"
    r"|thank you|perfect|great|lgtm|ship it|looks good|nice)\b"
)
_QUOTED = re.compile(r"[\"\u201c]([^\"\u201d\n]{3,60})[\"\u201d]")


@dataclass
class Request:
    """One request of a session and the checks its evidence gave (see the module docstring).

    `prompt` is the request's step and `source` its transcript line (`path:line`); `followups`
    the user's later messages about it (for the outcome); `final_reply` the agent's last reply.
    """

    prompt: Step
    source: str = ""
    followups: list[str] = field(default_factory=list)
    final_reply: str | None = None
    checks: list[Check] = field(default_factory=list)
    evidence: list[Evidence] = field(default_factory=list)

    def add(self, check: Check, evidence: Evidence) -> bool:
        """Keep `check` (once) with the evidence behind it; False when it was already there,
        holds a redacted secret (no reply could contain it) or the task has `MAX_CHECKS`."""
        keys = {check_key(c) for c in self.checks}
        if check_key(check) in keys or len(self.checks) >= MAX_CHECKS or _redacted(check):
            return False
        self.checks.append(check)
        if evidence not in self.evidence:
            self.evidence.append(evidence)
        return True


def _redacted(check: Check) -> bool:
    return REDACTED in str(getattr(check, "value", ""))


@dataclass
class _Exchange:
    """A user message and the agent's steps until the next one."""

    prompt: Step
    work: list[Step] = field(default_factory=list)
    interrupted: bool = False


def mine_requests(session: Session) -> list[Request]:
    """The session's requests with the checks mined from their evidence."""
    timeline = read_timeline(session)
    exchanges, compactions = _exchanges(timeline)
    start = exchanges[0].prompt.line if exchanges else 0
    early = [c for c in compactions if c.line < start]
    requests: list[Request] = []
    groups = _group(exchanges)
    for index, group in enumerate(groups):
        request = Request(
            group[0].prompt,
            timeline.cite(group[0].prompt.line),
            [e.prompt.text for e in group[1:]],
        )
        replies = [s.text for e in group for s in e.work if s.kind == "reply"]
        request.final_reply = replies[-1] if replies else None
        _corrections(request, group, timeline)
        _hooks(request, group, timeline)
        _quoted(request, group, timeline)
        _failed_then_fixed(request, group, timeline)
        _compaction(request, group, early if index == 0 else [], timeline)
        _end_state(request, group, timeline)
        requests.append(request)
    return requests


def _exchanges(timeline: Timeline) -> tuple[list[_Exchange], list[Step]]:
    exchanges: list[_Exchange] = []
    compactions: list[Step] = []
    for step in timeline.steps:
        if step.kind in ("prompt", "rejection"):
            exchanges.append(_Exchange(step))
        elif step.kind == "compaction":
            compactions.append(step)
            if exchanges:
                exchanges[-1].work.append(step)
        elif step.kind == "interrupt" and exchanges:
            exchanges[-1].interrupted = True
        elif exchanges:
            exchanges[-1].work.append(step)
    return exchanges, compactions


def _is_correction(exchange: _Exchange, previous: _Exchange) -> bool:
    text = exchange.prompt.text
    return (
        exchange.prompt.kind == "rejection"
        or previous.interrupted
        or bool(_CORRECTION.search(text[:300]))
        or bool(_REVERT_ASK.search(text[:300]))
    )


def _group(exchanges: Sequence[_Exchange]) -> list[list[_Exchange]]:
    """Exchanges grouped by request: a correction, an acknowledgement or a short follow-up
    belongs to the request before it."""
    groups: list[list[_Exchange]] = []
    for exchange in exchanges:
        text = exchange.prompt.text
        follows = groups and (
            _is_correction(exchange, groups[-1][-1])
            or bool(_ACK.match(text))
            or len(text.split()) <= 4
        )
        if follows:
            groups[-1].append(exchange)
        elif exchange.prompt.kind == "prompt":
            groups.append([exchange])
    return groups


# -- what an attempt said and did --------------------------------------------------------------


def _attempt_text(work: Iterable[Step], cwd: str) -> str:
    text = "\n".join(s.text for s in work if s.kind in ("reply", "command", "edit"))
    root = cwd.rstrip("/")
    return text.replace(root + "/", "") if root else text


def _first_line(work: Sequence[Step]) -> int | None:
    lines = [s.line for s in work if s.kind in ("reply", "command", "edit")]
    return lines[0] if lines else None


# -- corrections -------------------------------------------------------------------------------


def _kind(exchange: _Exchange, previous: _Exchange) -> EvidenceKind:
    if exchange.prompt.kind == "rejection":
        return "rejection"
    if _REVERT_ASK.search(exchange.prompt.text[:300]) or any(
        s.kind == "command" and _REVERT_RUN.search(s.text) for s in exchange.work
    ):
        return "revert"
    return "interrupt" if previous.interrupted else "correction"


def _corrections(request: Request, group: Sequence[_Exchange], timeline: Timeline) -> None:
    for previous, exchange in itertools.pairwise(group):
        if not _is_correction(exchange, previous):
            continue
        rejected = _attempt_text(previous.work, timeline.cwd)
        accepted = _attempt_text(exchange.work, timeline.cwd)
        candidates = _named_checks(exchange.prompt.text, rejected, accepted)
        if not candidates:
            candidates = _changed_checks(exchange, previous, timeline)
        source = timeline.cite(exchange.prompt.line)
        rejected_line = _first_line(previous.work)
        for check in candidates:
            passes = bool(accepted) and check_passes(check, accepted)
            evidence = Evidence(
                kind=_kind(exchange, previous),
                source=source,
                quote=exchange.prompt.text[:QUOTE_CHARS],
                rejected=timeline.cite(rejected_line) if rejected_line else None,
                accepted=_cite_first(timeline, exchange.work) if passes else None,
            )
            request.add(check.model_copy(update={"source": source}), evidence)


def _cite_first(timeline: Timeline, work: Sequence[Step]) -> str | None:
    line = _first_line(work)
    return timeline.cite(line) if line else None


def _named_checks(message: str, rejected: str, accepted: str) -> list[Check]:
    """Checks from what the correction names; each one fails the rejected attempt (a named
    value the attempt already holds is skipped, a rejected one must be in it)."""
    checks: list[Check] = []
    negated = {n.casefold() for n in negated_names(message)}
    for name in negated_names(message):
        if name.casefold() in rejected.casefold() and name.casefold() not in accepted.casefold():
            checks.append(NotContains(value=name))
    for name in fragments(message):
        if name.casefold() in negated or name.casefold() in rejected.casefold():
            continue
        checks.append(Contains(value=name))
    return checks[:4]


def _changed_checks(exchange: _Exchange, previous: _Exchange, timeline: Timeline) -> list[Check]:
    """With nothing named: what the next attempt did differently (files for a wrong-file
    correction, else the first command that succeeded)."""
    rejected = _attempt_text(previous.work, timeline.cwd)
    checks: list[Check] = []
    if _WRONG_FILE.search(exchange.prompt.text):
        old = {s.text for s in previous.work if s.kind == "edit"}
        new = {s.text for s in exchange.work if s.kind == "edit"}
        checks += [NotContains(value=p) for p in sorted(old - new)]
        checks += [Contains(value=p) for p in sorted(new - old)]
    else:
        checks += _new_command(previous.work, exchange.work, timeline)
    return [c for c in checks if not check_passes(c, rejected)][:3]


def _new_command(before: Sequence[Step], after: Sequence[Step], timeline: Timeline) -> list[Check]:
    """`contains` what is new in the first non-exploratory command of `after` that succeeded,
    against the most similar command of `before` (empty when there is none)."""
    results = timeline.results()
    tried = [s for s in before if s.kind == "command"]
    for step in after:
        if step.kind != "command" or is_exploratory(step.text):
            continue
        outcome = results.get(step.call_id)
        if outcome is not None and not outcome.failed:
            closest = max(tried, key=lambda t: command_similarity(t.text, step.text), default=None)
            check = fix_check(closest.text if closest else "", step.text)
            return [check] if check is not None else []
    return []


# -- quoted literals --------------------------------------------------------------------------


def _quoted(request: Request, group: Sequence[_Exchange], timeline: Timeline) -> None:
    """A literal the request quotes (`change the content to "modified content"`) that the
    agent's work then holds (a command, an edited path or a reply) becomes `contains`, citing
    the request's line."""
    done = _attempt_text([s for e in group for s in e.work], timeline.cwd).casefold()
    for literal in _QUOTED.findall(request.prompt.text)[:2]:
        if meaningful(literal.strip()) and literal.casefold() in done:
            request.add(
                Contains(value=literal, source=request.source),
                Evidence(
                    kind="quoted", source=request.source, quote=request.prompt.text[:QUOTE_CHARS]
                ),
            )


# -- hook feedback -----------------------------------------------------------------------------


def _hooks(request: Request, group: Sequence[_Exchange], timeline: Timeline) -> None:
    """Each hook that blocked the agent from stopping splits the work around it: before it,
    the attempt the hook turned down; after it (until the next hook), the work that satisfied
    the hook."""
    for exchange in group:
        marks = [i for i, s in enumerate(exchange.work) if s.kind == "hook"]
        for n, at in enumerate(marks):
            start = marks[n - 1] + 1 if n else 0
            end = marks[n + 1] if n + 1 < len(marks) else len(exchange.work)
            work = exchange.work
            _hook(request, work[at], work[start:at], work[at + 1 : end], timeline)


def _hook(
    request: Request, hook: Step, before: Sequence[Step], after: Sequence[Step], timeline: Timeline
) -> None:
    """What the hook names and the agent then did, else what the agent did differently after
    it (a command, a newly edited file), as `contains`; kept only when the turned-down attempt
    fails it and the work after the hook passes it."""
    rejected_line, accepted_line = _first_line(before), _first_line(after)
    if rejected_line is None or accepted_line is None:
        return
    rejected = _attempt_text(before, timeline.cwd)
    accepted = _attempt_text(after, timeline.cwd)
    named: list[Check] = [Contains(value=f) for f in fragments(hook.text, plain_words=False)]
    edited = {s.text for s in before if s.kind == "edit"}
    changed = _new_command(before, after, timeline) + [
        Contains(value=s.text) for s in after if s.kind == "edit" and s.text not in edited
    ]
    source = timeline.cite(hook.line)
    for check in named + changed:
        if check_passes(check, rejected) or not check_passes(check, accepted):
            continue
        request.add(
            check.model_copy(update={"source": source}),
            Evidence(
                kind="hook",
                source=source,
                quote=hook.text[:QUOTE_CHARS],
                rejected=timeline.cite(rejected_line),
                accepted=timeline.cite(accepted_line),
            ),
        )


# -- failed, then fixed ------------------------------------------------------------------------


def _failed_then_fixed(request: Request, group: Sequence[_Exchange], timeline: Timeline) -> None:
    results = timeline.results()
    for exchange in group:
        commands = [s for s in exchange.work if s.kind == "command"]
        for index, failed in enumerate(commands):
            outcome = results.get(failed.call_id)
            if outcome is None or not outcome.failed or is_exploratory(failed.text):
                continue
            fixed = _fix_of(failed, commands[index + 1 :], results)
            check = fix_check(failed.text, fixed.text) if fixed else None
            if fixed is None or check is None:
                continue
            request.add(
                check.model_copy(update={"source": timeline.cite(fixed.line)}),
                Evidence(
                    kind="failed_then_fixed",
                    source=timeline.cite(fixed.line),
                    quote=f"failed (exit {outcome.exit_code}): {failed.text}"[:QUOTE_CHARS],
                    rejected=timeline.cite(failed.line),
                    accepted=timeline.cite(fixed.line),
                ),
            )


def _fix_of(failed: Step, later: Sequence[Step], results: dict[str, Step]) -> Step | None:
    for step in later:
        outcome = results.get(step.call_id)
        if outcome is None or outcome.failed:
            continue
        similar = command_similarity(failed.text, step.text) >= 50 or (
            program_name(failed.text) == program_name(step.text)
        )
        if similar and command_core(step.text) != command_core(failed.text):
            return step
    return None


# -- end state and compaction summaries ---------------------------------------------------------


def _end_state(request: Request, group: Sequence[_Exchange], timeline: Timeline) -> None:
    intent = request.prompt.text.casefold()
    unwanted = {c.value.casefold() for c in request.checks if isinstance(c, NotContains)}
    edits = [s for e in group for s in e.work if s.kind == "edit"]
    counts = Counter(s.text for s in edits if s.text.casefold() not in unwanted)
    for path, _ in counts.most_common(2):
        if path.casefold() in intent:
            continue
        last = max(s.line for s in edits if s.text == path)
        _add_end_state(request, timeline, Contains(value=path), last, f"edited {path}")
    verified = _last_verification(group, timeline)
    if verified is not None:
        core = command_core(verified.text)
        if core.casefold() not in intent and len(core) <= MAX_SPAN_CHARS:
            _add_end_state(request, timeline, Contains(value=core), verified.line, f"ran {core}")


def _add_end_state(
    request: Request, timeline: Timeline, check: Check, line: int, quote: str
) -> None:
    source = timeline.cite(line)
    request.add(
        check.model_copy(update={"source": source}),
        Evidence(kind="end_state", source=source, quote=quote[:QUOTE_CHARS]),
    )


def _last_verification(group: Sequence[_Exchange], timeline: Timeline) -> Step | None:
    results = timeline.results()
    found = None
    for step in (s for e in group for s in e.work if s.kind == "command"):
        outcome = results.get(step.call_id)
        if outcome is None or outcome.failed or is_exploratory(step.text):
            continue
        if is_verification(step.text):
            found = step
    return found


def _compaction(
    request: Request, group: Sequence[_Exchange], before: Sequence[Step], timeline: Timeline
) -> None:
    summaries = list(before) + [s for e in group for s in e.work if s.kind == "compaction"]
    for summary in summaries:
        later = [s for e in group for s in e.work if s.line > summary.line]
        done = _attempt_text(later, timeline.cwd).casefold()
        intent = request.prompt.text.casefold()
        named = [f for f in fragments(summary.text) if "/" in f or "." in f]
        kept = [f for f in named if f.casefold() in done and f.casefold() not in intent]
        for name in kept[:2]:
            source = timeline.cite(summary.line)
            request.add(
                Contains(value=name, source=source),
                Evidence(kind="compaction", source=source, quote=summary.text[:QUOTE_CHARS]),
            )
