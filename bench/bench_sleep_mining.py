"""How much a heuristic-only harvest mines from a home of real transcripts (issue 26, item 4).

For every project (working directory) under `--home`, it harvests the sessions, mines them with
no model (`sleep harvest --heuristic-only`) and counts the sessions that gave at least one
task with a *discriminating* check: a check other than `no_refusal` that cites its transcript
line (`source`). It also counts the stricter *paired* sessions: a check mined from a correction
or a failed-then-fixed command, which the session's own rejected attempt fails and its
accepted attempt passes. Every citation is verified to point at an existing line of its file.

    python bench/bench_sleep_mining.py --home /path/to/home [--project /work/app] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from skillopt_dsl.sleep.harvest import ProjectMatcher, harvest
from skillopt_dsl.sleep.mine import discriminating_checks, heuristic_tasks
from skillopt_dsl.sleep.sources import make_sources
from skillopt_dsl.sleep.tasks import Task


def _cited_line_exists(source: str) -> bool:
    path, _, line = source.rpartition(":")
    lines = Path(path).read_text(encoding="utf-8", errors="replace").splitlines()
    return line.isdigit() and 1 <= int(line) <= len(lines)


def _paired(task: Task) -> bool:
    return any(e.rejected and e.accepted for e in task.evidence)


def measure(home: Path, projects: list[str] | None) -> dict[str, Any]:
    """Per-project and total figures (see the module docstring)."""
    sources = make_sources("auto", home)
    everything = harvest(sources, ProjectMatcher(("/",))).sessions
    roots = projects or sorted({s.cwd for s in everything})
    rows = []
    for root in roots:
        sessions = [s for s in everything if ProjectMatcher((root,)).matches(s.cwd)]
        kinds: Counter[str] = Counter()
        found = paired = bad_citations = 0
        for session in sessions:
            tasks = heuristic_tasks(session, root)
            checks = [c for t in tasks for c in discriminating_checks(t)]
            bad_citations += sum(1 for c in checks if not _cited_line_exists(c.source or ""))
            kinds.update(e.kind for t in tasks for e in t.evidence)
            found += bool(checks)
            paired += any(_paired(t) for t in tasks)
        rows.append(
            {
                "project": root,
                "sessions": len(sessions),
                "with_discriminating_check": found,
                "with_paired_check": paired,
                "fraction": round(found / len(sessions), 3) if sessions else None,
                "evidence": dict(sorted(kinds.items())),
                "citations_not_found": bad_citations,
            }
        )
    total = sum(r["sessions"] for r in rows)
    hits = sum(r["with_discriminating_check"] for r in rows)
    return {"projects": rows, "sessions": total, "with_discriminating_check": hits,
            "fraction": round(hits / total, 3) if total else None}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    """Print the figures as a table (or JSON)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", type=Path, required=True)
    parser.add_argument("--project", action="append", help="a project folder (repeatable)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    figures = measure(args.home.expanduser(), args.project)
    if args.json:
        sys.stdout.write(json.dumps(figures, indent=2) + "\n")
        return 0
    lines = [
        "| project | sessions | discriminating | paired | fraction | evidence |",
        "|---" * 6 + "|",
    ]
    for r in figures["projects"]:
        lines.append(
            f"| {r['project']} | {r['sessions']} | {r['with_discriminating_check']} | "
            f"{r['with_paired_check']} | {r['fraction']} | {r['evidence']} |"
        )
    lines.append(f"\nall: {figures['with_discriminating_check']}/{figures['sessions']} "
                 f"= {figures['fraction']}")  # fmt: skip
    sys.stdout.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
