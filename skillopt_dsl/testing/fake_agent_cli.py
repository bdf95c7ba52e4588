"""A FAKE agent CLI for tests: `python -m skillopt_dsl.testing.fake_agent_cli [--format F] PROMPT`
(or run the file itself as a script: it imports only the standard library).

It stands in for Claude Code or Codex (there is no real agent CLI and no network here). Like them
it reads its skill from the working directory (`.claude/skills/*/SKILL.md`, then `AGENTS.md`),
does the task and prints its result with usage and cost: `--format claude` prints one JSON object
as `claude -p --output-format json` does, `--format codex` prints JSON lines as
`codex exec --json` does, `--format text` prints the answer.

Its "competence" depends on the skill, so a better skill scores better: for a task written
`<op>: <text>` with op in `upper`, `reverse`, `sort`, it applies the op only when the skill
contains the phrase `how to <op>`; otherwise it answers the text unchanged. When the skill says
`write answer.txt`, it also writes the answer to `answer.txt` in the workspace. With
`--follow-rules`, any other task is answered with its first line followed by every rule of the
skill (its `- ` bullet lines), as an agent that applies its memory file would.

Faults, triggered by markers in the prompt: `[[hang]]` (starts a child in its process group that
writes its pid to `$FAKE_AGENT_PIDFILE` when set, then both sleep), `[[crash]]` (exit 3 with a
message on stderr), `[[garbage]]` (prints invalid JSON), `[[env]]` (answers with the sorted names
of its environment variables), `[[escape]]` (writes to `$HOME`, `$TMPDIR` and `../outside.txt`,
then answers with those paths).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

OPS = {
    "upper": str.upper,
    "reverse": lambda text: text[::-1],
    "sort": lambda text: " ".join(sorted(text.split())),
}


def read_skill(work: Path) -> str:
    """The skill the agent would read: project skills first, then AGENTS.md (empty if none)."""
    texts = [p.read_text(encoding="utf-8") for p in sorted(work.glob(".claude/skills/*/SKILL.md"))]
    agents = work / "AGENTS.md"
    if agents.is_file():
        texts.append(agents.read_text(encoding="utf-8"))
    return "\n".join(texts)


def solve(prompt: str, skill: str) -> str:
    """The fake's answer: the op applied when the skill teaches it, else the text unchanged."""
    op, sep, text = prompt.partition(":")
    op, text = op.strip().casefold(), text.strip()
    if not sep or op not in OPS:
        return prompt.strip()
    return OPS[op](text) if f"how to {op}" in skill.casefold() else text


def follow_rules(prompt: str, skill: str) -> str:
    """The task's first line, then each rule (`- ` line) of the skill, one a line."""
    lines = [line for line in prompt.strip().splitlines() if not line.startswith("[")]
    rules = [line.strip() for line in skill.splitlines() if line.strip().startswith("- ")]
    return "\n".join([lines[0] if lines else "", *rules]).strip()


def fault(prompt: str) -> str | None:
    """Handle a fault marker; returns a special answer, or None for a normal run."""
    if "[[crash]]" in prompt:
        print("fake agent: simulated crash", file=sys.stderr)
        sys.exit(3)
    if "[[garbage]]" in prompt:
        print("{not json at all")
        sys.exit(0)
    if "[[hang]]" in prompt:
        hang()
    if "[[env]]" in prompt:
        return " ".join(sorted(os.environ))
    if "[[escape]]" in prompt:
        return escape()
    return None


def hang() -> None:
    """Start a sleeping child in this process group (recording its pid), then sleep too."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    pidfile = os.environ.get("FAKE_AGENT_PIDFILE")
    if pidfile:
        Path(pidfile).write_text(f"{os.getpid()} {child.pid}", encoding="utf-8")
    time.sleep(600)


def escape() -> str:
    """Write where a careless agent might: its HOME, its TMPDIR and the workspace's parent."""
    targets = [
        Path(os.environ["HOME"]) / "escape.txt",
        Path(os.environ["TMPDIR"]) / "escape.txt",
        Path("..") / "outside.txt",
    ]
    for target in targets:
        target.write_text("escaped", encoding="utf-8")
    return " ".join(str(t.resolve()) for t in targets)


def report(answer: str, prompt: str, skill: str, fmt: str) -> str:
    """Print the result the way the imitated CLI does."""
    usage = {
        "input_tokens": len(prompt.split()) + len(skill.split()),
        "output_tokens": len(answer.split()),
    }
    if fmt == "text":
        return answer
    if fmt == "codex":
        events = [
            {"type": "thread.started", "thread_id": "fake"},
            {
                "type": "item.completed",
                "item": {"id": "item_0", "type": "agent_message", "text": answer},
            },
            {"type": "turn.completed", "usage": {**usage, "cached_input_tokens": 0}},
        ]
        return "\n".join(json.dumps(e) for e in events)
    payload = {
        "type": "result",
        "subtype": "success",
        "is_error": False,
        "result": answer,
        "usage": usage,
        "total_cost_usd": 0.0001,
    }
    return json.dumps(payload)


def main(argv: list[str] | None = None) -> int:
    """Run the fake agent in the current directory."""
    parser = argparse.ArgumentParser(description="A FAKE agent CLI for tests.")
    parser.add_argument("--format", choices=("claude", "codex", "text"), default="claude")
    parser.add_argument("--follow-rules", action="store_true")
    parser.add_argument("prompt")
    args = parser.parse_args(argv)
    work = Path.cwd()
    skill = read_skill(work)
    answer = fault(args.prompt)
    op = args.prompt.partition(":")[0].strip().casefold()
    if answer is None and args.follow_rules and op not in OPS:
        answer = follow_rules(args.prompt, skill)
    if answer is None:
        answer = solve(args.prompt, skill)
        if "write answer.txt" in skill.casefold():
            (work / "answer.txt").write_text(answer + "\n", encoding="utf-8")
    print(report(answer, args.prompt, skill, args.format))
    return 0


if __name__ == "__main__":
    sys.exit(main())
