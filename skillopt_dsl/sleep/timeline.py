"""A session's timeline with line numbers: what the user asked, what the agent did, what failed.

`read_timeline(session)` asks the source that read the session (`Source.timeline`, looked up in
the registry by `session.agent`) to re-read its transcript file (read only); it returns the
session's `Step`s in file order, each with the 1-based line it came from, so that evidence
mined from it can cite its source (`Timeline.cite(line)` is `path:line`). Every kept text is
redacted the moment it is read, like the harvest's. A session of a source that has no reader of
its own, or of a name no source has, gets the timeline of its turns
(`skillopt_dsl.sleep.sources.steps.timeline_from_turns`).

The step kinds are listed on `Step`; each format's timeline reader is in its source's file
(`skillopt_dsl.sleep.sources.claude_code`, `.codex`, `.generic_jsonl`).
"""

from __future__ import annotations

from skillopt_dsl.sleep.sources.registry import source_for
from skillopt_dsl.sleep.sources.steps import timeline_from_turns
from skillopt_dsl.sleep.transcript import Session, Step, StepKind, Timeline

__all__ = ["Step", "StepKind", "Timeline", "read_timeline"]


def read_timeline(session: Session) -> Timeline:
    """The steps of `session`'s transcript (see the module docstring)."""
    source = source_for(session.agent)
    if source is None:
        return timeline_from_turns(session)
    return source.timeline(session)
