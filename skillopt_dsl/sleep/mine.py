"""Mine: turn harvested sessions into checkable `Task`s.

Without a model, always: the session's evidence (`skillopt_dsl.sleep.evidence`: corrections,
interrupts, refused tool calls, reverts, commands that failed and were then fixed, the files and
commands it ended with, compaction summaries) gives each request checks that cite their
transcript line; the first request also gets its backticked names, the user's corrections
("use X, not Y") and feedback signals ("still broken", "thanks"). Up to three tasks a session:
the first request, then later requests that have evidence.

With a model (the optimizer model, or a local server), it *adds*: one call per session proposes
up to three tasks as JSON (intents, rule checks, rubrics), validated by pydantic (an unknown
check kind invalidates the reply), shown the evidence already mined; a task with the same intent
as a mined one is merged into it. A model is used only while it answers validly: when its
first reply is invalid (a small model that cannot write the JSON, say), it is not asked again;
the reason is logged as a warning and kept in the report (`model_dropped`), never dropped
silently. A valid reply that finds no task in its session (`{"tasks": []}`: a greeting, a
question answered) counts for the model: one such session is no evidence that it cannot mine
the others.

Recurring tasks (near-duplicate intents across sessions: rapidfuzz's `token_sort_ratio` at
least 85 *and* the same identifiers, so "Work on bead bd-12" and "Work on bead bd-13" stay two
tasks) are merged into one task whose `weight` is the number of sessions that asked for it.
Every task's split comes from its id's hash (`assign_split`), except that the tasks a reply can
fail are shared between train and val when they all hashed to one split
(`skillopt_dsl.sleep.splits.balance_splits`).
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal, TypedDict

import pydantic
from pydantic import BaseModel, ConfigDict, Field
from rapidfuzz import fuzz, process

from skillopt_dsl.errors import BudgetExceeded, ModelError
from skillopt_dsl.lm import LM
from skillopt_dsl.sleep.evidence import Request, mine_requests
from skillopt_dsl.sleep.harvest import Session
from skillopt_dsl.sleep.splits import balance_splits
from skillopt_dsl.sleep.tasks import (
    Check,
    Contains,
    Evidence,
    NoRefusal,
    NotContains,
    SplitFractions,
    Task,
    assign_split,
    check_key,
    task_id,
)

__all__ = [
    "MineStats",
    "cluster_tasks",
    "discriminating_checks",
    "heuristic_task",
    "heuristic_tasks",
    "identifiers",
    "mine_sessions",
]

logger = logging.getLogger(__name__)

MAX_TRANSCRIPT_CHARS = 6000
CLUSTER_SIMILARITY = 85.0
MODEL_PROBE_REPLIES = 1
"""A model whose first reply(ies) are all invalid (no JSON, an unknown check, a task with no
check or rubric, a model error) is not asked again; a valid reply that finds no task counts
for the model."""

MINE_SYSTEM = """You read one session between a developer and their coding agent and write up to 3
checkable tasks that the agent should be able to do well next time.
A task has: "intent" (the developer's request, rewritten to stand alone), "context" (what the
agent needs to know: project, files, constraints), "checks" (rules a good reply passes) and/or a
"rubric" (one sentence a grader can apply), and "outcome" ("resolved", "unresolved" or "unknown").
Allowed checks, exactly: {"kind": "contains", "value": str}, {"kind": "not_contains", "value": str},
{"kind": "regex", "pattern": str}, {"kind": "max_chars", "limit": int},
{"kind": "section_present", "heading": str}, {"kind": "no_refusal"}.
Base checks on what the developer asked for or corrected; add a rubric where a rule cannot say
what a good reply is. Reply with JSON only:
{"tasks": [{"intent": "...", "context": "...", "checks": [...], "rubric": null, "outcome": "unknown"}]}"""


class _ProposedTask(BaseModel):
    model_config = ConfigDict(extra="forbid")
    intent: str = Field(min_length=1)
    context: str = ""
    checks: list[Check] = Field(default_factory=list)
    rubric: str | None = None
    outcome: Literal["resolved", "unresolved", "unknown"] = "unknown"


class _Proposal(BaseModel):
    model_config = ConfigDict(extra="forbid")
    tasks: list[_ProposedTask] = Field(max_length=3)  # "up to 3": none is a valid answer


class MineRecord(TypedDict):
    """`MineStats.to_dict()`: how the tasks were mined, as a night's report stores it."""

    sessions: int
    model_calls: int
    model_tasks: int
    heuristic_tasks: int
    invalid_replies: int
    budget_stopped: bool
    model_dropped: str | None
    recurring_clusters: int
    tasks: int
    invalid_reply_examples: list[str]
    evidence: dict[str, int]
    sessions_with_evidence_checks: int
    sessions_with_paired_checks: int


@dataclass
class MineStats:
    """How the tasks were mined."""

    sessions: int = 0
    model_calls: int = 0
    model_tasks: int = 0
    heuristic_tasks: int = 0
    invalid_replies: int = 0
    budget_stopped: bool = False
    model_dropped: str | None = None
    recurring_clusters: int = 0
    tasks: int = 0
    reasons: list[str] = field(default_factory=list)
    evidence: Counter[str] = field(default_factory=Counter)
    sessions_with_evidence_checks: int = 0
    sessions_with_paired_checks: int = 0

    def to_dict(self) -> MineRecord:
        """JSON-ready counts."""
        return {
            "sessions": self.sessions,
            "model_calls": self.model_calls,
            "model_tasks": self.model_tasks,
            "heuristic_tasks": self.heuristic_tasks,
            "invalid_replies": self.invalid_replies,
            "budget_stopped": self.budget_stopped,
            "model_dropped": self.model_dropped,
            "recurring_clusters": self.recurring_clusters,
            "tasks": self.tasks,
            "invalid_reply_examples": self.reasons[:5],
            "evidence": dict(sorted(self.evidence.items())),
            "sessions_with_evidence_checks": self.sessions_with_evidence_checks,
            "sessions_with_paired_checks": self.sessions_with_paired_checks,
        }


def mine_sessions(
    sessions: Sequence[Session],
    *,
    project: str,
    lm: LM | None,
    fractions: SplitFractions,
    seed: int = 0,
    on_session: Callable[[int, int], None] | None = None,
) -> tuple[list[Task], MineStats]:
    """Tasks from `sessions` (see the module docstring); `lm=None` mines heuristically.

    `on_session(done, total)` is called after each session (for a progress bar)."""
    stats = MineStats(sessions=len(sessions))
    raw: list[Task] = []
    for index, session in enumerate(sessions):
        mined = heuristic_tasks(session, project)
        _count_evidence(mined, stats)
        stats.heuristic_tasks += len(mined)
        raw += mined
        if lm is not None and not stats.budget_stopped and stats.model_dropped is None:
            added = _ask_model(session, project, lm, stats, seed=seed + index, mined=mined)
            if added is None and _cannot_mine(stats):
                stats.model_dropped = _dropped(lm, stats, len(sessions) - index - 1)
                logger.warning("%s", stats.model_dropped)
            stats.model_tasks += len(added or [])
            raw += added or []
        if on_session is not None:
            on_session(index + 1, len(sessions))
    tasks = balance_splits(cluster_tasks(raw, fractions=fractions), fractions)
    stats.recurring_clusters = sum(1 for t in tasks if t.weight > 1)
    stats.tasks = len(tasks)
    return tasks, stats


def _count_evidence(tasks: Sequence[Task], stats: MineStats) -> None:
    for task in tasks:
        stats.evidence.update(e.kind for e in task.evidence)
    if any(discriminating_checks(t) for t in tasks):
        stats.sessions_with_evidence_checks += 1
    if any(e.rejected and e.accepted for t in tasks for e in t.evidence):
        stats.sessions_with_paired_checks += 1


def discriminating_checks(task: Task) -> list[Check]:
    """The task's checks mined from evidence that a reply can fail: every check with a
    `source` except `no_refusal` (which nearly every reply passes)."""
    return [c for c in task.checks if c.source and not isinstance(c, NoRefusal)]


def _cannot_mine(stats: MineStats) -> bool:
    """Whether the model has answered `MODEL_PROBE_REPLIES` times or more and every reply
    was invalid. A valid reply that finds no task in its session (a greeting, a question
    answered) is the model mining well, not a reason to stop asking it."""
    invalid = stats.invalid_replies
    return (
        not stats.budget_stopped and invalid >= MODEL_PROBE_REPLIES and invalid == stats.model_calls
    )


def _dropped(lm: LM, stats: MineStats, left: int) -> str:
    why = stats.reasons[-1].split(": ", 1)[-1] if stats.reasons else "no valid task"
    return (
        f"mining stopped asking {lm.model}: its first {stats.model_calls} reply(ies) held no "
        f"valid task ({why}); the other {left} session(s) were mined from their evidence only "
        "(pass --heuristic-only to skip the model, or --optimizer-model for a stronger one)"
    )


def _transcript(session: Session) -> str:
    lines = []
    for turn in session.turns:
        tools = f" [tools: {', '.join(turn.tools)}]" if turn.tools else ""
        lines.append(f"{turn.role.upper()}{tools}: {turn.text}")
    text = "\n\n".join(lines)
    return text if len(text) <= MAX_TRANSCRIPT_CHARS else text[:MAX_TRANSCRIPT_CHARS] + "\n[...]"


def _mined_summary(tasks: Sequence[Task]) -> str:
    lines = [f"- {t.intent[:120]!r}: " + "; ".join(c.describe() for c in t.checks) for t in tasks]
    return "\n".join(lines) or "(none)"


def _ask_model(
    session: Session,
    project: str,
    lm: LM,
    stats: MineStats,
    *,
    seed: int,
    mined: Sequence[Task] = (),
) -> list[Task] | None:
    """The tasks the model mines from `session`: a list (empty where a valid reply finds
    none), or None where no reply came (the budget) or the reply is invalid (counted)."""
    user = (
        f"Project: {project}\nBranch: {session.branch or 'unknown'}\n\n"
        f"# Checks already mined from the session's evidence\n{_mined_summary(mined)}\n\n"
        f"# Session (secrets already redacted)\n{_transcript(session)}"
    )
    messages = [{"role": "system", "content": MINE_SYSTEM}, {"role": "user", "content": user}]
    try:
        reply = lm.complete(messages, seed=seed).text
    except BudgetExceeded as exc:
        logger.warning("mining stopped using the model: %s", exc)
        stats.budget_stopped = True
        return None
    except ModelError as exc:
        stats.model_calls += 1
        stats.invalid_replies += 1
        stats.reasons.append(f"{session.id}: model error: {exc}")
        return None
    stats.model_calls += 1
    try:
        proposal = _Proposal.model_validate_json(_json_block(reply))
    except (pydantic.ValidationError, ValueError) as exc:
        stats.invalid_replies += 1
        stats.reasons.append(f"{session.id}: {_brief(exc)}")
        return None
    drafts = [p for p in proposal.tasks if p.checks or p.rubric]
    if proposal.tasks and not drafts:
        stats.invalid_replies += 1
        stats.reasons.append(f"{session.id}: no task has a check or a rubric")
        return None
    return [
        _task(
            project,
            session,
            _Draft(p.intent, p.context, list(p.checks), p.outcome, "model", rubric=p.rubric),
        )
        for p in drafts
    ]


def _json_block(text: str) -> str:
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        raise ValueError("the reply holds no JSON object")
    return text[start : end + 1]


def _brief(exc: Exception) -> str:
    if isinstance(exc, pydantic.ValidationError):
        return "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:3])
    return str(exc)[:200]


@dataclass(frozen=True)
class _Draft:
    """What a miner found for one task; `_task` adds its id, project and session."""

    intent: str
    context: str
    checks: list[Check]
    outcome: Literal["resolved", "unresolved", "unknown"]
    origin: Literal["model", "heuristic"]
    rubric: str | None = None
    reference: str | None = None
    evidence: list[Evidence] = field(default_factory=list)


def _task(project: str, session: Session, draft: _Draft) -> Task:
    return Task(
        id=task_id(project, draft.intent),
        project=project,
        intent=draft.intent.strip(),
        context=draft.context.strip(),
        checks=draft.checks,
        rubric=draft.rubric,
        outcome=draft.outcome,
        reference=draft.reference,
        source_sessions=[session.id],
        origin=draft.origin,
        evidence=draft.evidence,
    )


# -- the heuristic -----------------------------------------------------------------------------

_NEGATIVE = re.compile(
    r"(?i)\b(?:still (?:broken|wrong|failing|fails|not working)|doesn'?t work|didn'?t work|"
    r"not what i (?:asked|wanted)|that'?s wrong|wrong again|^no[,.!]|undo that|revert)"
)
_POSITIVE = re.compile(
    r"(?i)\b(?:thanks|thank you|perfect|great,? (?:that|it) works|works now|looks good|lgtm|"
    r"ship it|that fixed it)\b"
)
_USE_INSTEAD = re.compile(
    r"(?i)\buse\s+`([^`\n]{1,60})`\s*,?\s+(?:not|instead of|rather than)\s+`([^`\n]{1,60})`"
)
_ALWAYS = re.compile(
    r"(?i)\b(?:always|remember to|you forgot to|don'?t forget to)\s+[\w\s]{0,20}?`([^`\n]{2,60})`"
)
_NEVER = re.compile(
    r"(?i)\b(?:never|don'?t|do not|stop)\s+(?:use|using|call|calling|add|adding)\s+`([^`\n]{2,60})`"
)
_BACKTICKED = re.compile(r"`([A-Za-z_][\w.\-/]{2,60}(?:\(\))?)`")


MAX_TASKS_PER_SESSION = 3


def heuristic_tasks(session: Session, project: str) -> list[Task]:
    """Tasks mined without a model: the first request (its evidence, backticked names,
    corrections and feedback) and later requests that have evidence; at most three."""
    try:
        requests = mine_requests(session)
    except OSError as exc:
        logger.warning(
            "could not re-read %s for evidence (%s); mining its prompts only", session.path, exc
        )
        requests = []
    first = heuristic_task(session, project, requests[0] if requests else None)
    tasks = [first] if first is not None else []
    for request in requests[1:]:
        if len(tasks) >= MAX_TASKS_PER_SESSION:
            break
        if request.checks and request.prompt.text.strip():
            tasks.append(_request_task(session, project, request))
    return tasks


def heuristic_task(session: Session, project: str, request: Request | None = None) -> Task | None:
    """One task from the first prompt, the user's corrections and feedback signals, plus the
    checks `request` (the first request's evidence) mined; the prompt's backticked names cite
    the prompt's line."""
    prompts = session.prompts
    if not prompts or not prompts[0].strip():
        return None
    intent = prompts[0].strip()[:1500]
    checks: list[Check] = [NoRefusal()]
    seen: set[str] = {check_key(checks[0])}
    named = _named(intent)
    if request is not None and request.prompt.text.strip()[:1500] == intent:
        named = [c.model_copy(update={"source": request.source}) for c in named]
    found = (request.checks if request else []) + _corrections(prompts[1:]) + named
    for check in found:
        if check_key(check) not in seen:
            seen.add(check_key(check))
            checks.append(check)
    outcome = _outcome(prompts[1:])
    reference = _final_reply(session) if outcome == "resolved" else None
    evidence = list(request.evidence) if request else []
    context = _context(project, session)
    draft = _Draft(intent, context, checks[:8], outcome, "heuristic", None, reference, evidence)
    return _task(project, session, draft)


def _request_task(session: Session, project: str, request: Request) -> Task:
    outcome = _outcome(request.followups)
    reference = request.final_reply if outcome == "resolved" else None
    draft = _Draft(
        request.prompt.text[:1500],
        _context(project, session),
        list(request.checks),
        outcome,
        "heuristic",
        reference=reference,
        evidence=list(request.evidence),
    )
    return _task(project, session, draft)


def _context(project: str, session: Session) -> str:
    return f"Project {project.rstrip('/').rsplit('/', 1)[-1]}" + (
        f", branch {session.branch}" if session.branch else ""
    )


def _corrections(followups: Sequence[str]) -> list[Check]:
    checks: list[Check] = []
    for text in followups:
        for use, instead in _USE_INSTEAD.findall(text):
            checks.append(Contains(value=use))
            if instead.casefold() not in use.casefold():
                checks.append(NotContains(value=instead))
        checks += [Contains(value=v) for v in _ALWAYS.findall(text)]
        checks += [NotContains(value=v) for v in _NEVER.findall(text)]
    return checks


def _named(intent: str) -> list[Check]:
    return [Contains(value=name) for name in _BACKTICKED.findall(intent)[:2]]


def _outcome(followups: Sequence[str]) -> Literal["resolved", "unresolved", "unknown"]:
    verdict: Literal["resolved", "unresolved", "unknown"] = "unknown"
    for text in followups:
        if _NEGATIVE.search(text):
            verdict = "unresolved"
        elif _POSITIVE.search(text):
            verdict = "resolved"
    return verdict


def _final_reply(session: Session) -> str | None:
    replies = [t.text for t in session.turns if t.role == "assistant" and t.text.strip()]
    return replies[-1][:2000] if replies else None


# -- recurring tasks ---------------------------------------------------------------------------


_TOKEN = re.compile(r"[\w./#-]+")


def identifiers(intent: str) -> frozenset[str]:
    """The tokens of an intent that name one thing: with a digit, or joined by `-`, `_`, `.`,
    `/` or `#` (`bd-12`, `src/app.py`, `#431`), case-folded.

    >>> sorted(identifiers("Work on bead bd-12 in src/app.py."))
    ['bd-12', 'src/app.py']
    """
    found = set()
    for token in _TOKEN.findall(intent):
        token = token.strip("./-")
        if any(c.isdigit() for c in token) or any(c in token for c in "-_./#"):
            found.add(token.casefold())
    return frozenset(found)


def cluster_tasks(tasks: Sequence[Task], *, fractions: SplitFractions) -> list[Task]:
    """Merge near-duplicate intents into weighted tasks: rapidfuzz `token_sort_ratio` >= 85 and
    the same `identifiers` (different beads, issues or files are different tasks).

    The merged task keeps the earliest task's intent and id, the union of checks, every source
    session, the sum of weights, and a split from the id's hash.
    """
    if not tasks:
        return []
    intents = [" ".join(t.intent.split()).casefold() for t in tasks]
    names = [identifiers(t.intent) for t in tasks]
    scores = process.cdist(intents, intents, scorer=fuzz.token_sort_ratio, workers=1)
    parent = list(range(len(tasks)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i in range(len(tasks)):
        for j in range(i + 1, len(tasks)):
            if scores[i][j] >= CLUSTER_SIMILARITY and names[i] == names[j]:
                parent[root(j)] = root(i)
    groups: dict[int, list[Task]] = {}
    for index, task in enumerate(tasks):
        groups.setdefault(root(index), []).append(task)
    return [_merge(group, fractions) for group in groups.values()]


def _merge(group: list[Task], fractions: SplitFractions) -> Task:
    first = group[0]
    checks: list[Check] = []
    seen: set[str] = set()
    for task in group:
        for check in task.checks:
            key = check_key(check)
            if key not in seen:
                seen.add(key)
                checks.append(check)
    evidence = list(dict.fromkeys(e for t in group for e in t.evidence))
    rubric = next((t.rubric for t in group if t.rubric), None)
    sessions = sorted({s for t in group for s in t.source_sessions})
    resolved = [t for t in group if t.outcome == "resolved"]
    return first.model_copy(
        update={
            "checks": checks[:8],
            "evidence": evidence,
            "rubric": rubric,
            "source_sessions": sessions,
            "weight": sum(t.weight for t in group),
            "reference": resolved[-1].reference if resolved else first.reference,
            "outcome": resolved[-1].outcome if resolved else first.outcome,
            "split": assign_split(first.id, fractions),
        }
    )
