"""Code lines of the search at a revision: what issue 50 asks to go down, not up.

The search is GradientText, Bundle, HandOff, their state, `optimizers/search/`, `base.py` and
`search_memory.py` (every file under `skillopt_dsl/optimizers/` but Beam, OptunaLR, the
proposers, the schedules and the package's `__init__`). A code line is a line holding a token
that is neither a comment nor part of a docstring; blank lines do not count.

    python bench/search_lines.py 6024f02 HEAD      # per revision (git), or `wt` for the tree
    python bench/search_lines.py --files HEAD      # and per file
"""

from __future__ import annotations

import argparse
import ast
import io
import subprocess
import sys
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LEFT_OUT = ("beam.py", "optuna_lr.py", "schedules.py", "optimizers/__init__.py")
_NOT_CODE = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
             tokenize.ENDMARKER}  # fmt: skip


def search_files(revision: str) -> list[str]:
    """The search's files at `revision` (`wt`: the working tree)."""
    if revision == "wt":
        found = [str(p.relative_to(ROOT)) for p in (ROOT / "skillopt_dsl/optimizers").rglob("*.py")]
    else:
        found = _git("ls-tree", "-r", "--name-only", revision, "skillopt_dsl/optimizers").split()
    kept = [f for f in found if f.endswith(".py") and "/proposers/" not in f]
    memory = ["skillopt_dsl/search_memory.py"] if revision == "wt" or _has(revision) else []
    return [*sorted(f for f in kept if not f.endswith(LEFT_OUT)), *memory]


def _has(revision: str) -> bool:
    listed = _git("ls-tree", "--name-only", revision, "skillopt_dsl/search_memory.py")
    return bool(listed.strip())


def code_lines(text: str) -> int:
    """Lines of `text` that hold a token outside comments and docstrings."""
    docstrings: set[int] = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0] if node.body else None
            value = first.value if isinstance(first, ast.Expr) else None
            if (
                first is not None
                and isinstance(value, ast.Constant)
                and isinstance(value.value, str)
            ):
                docstrings.update(range(first.lineno, (first.end_lineno or 0) + 1))
    lines: set[int] = set()
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type not in _NOT_CODE:
            lines.update(range(token.start[0], token.end[0] + 1))
    return len(lines - docstrings)


def _git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True,
                          check=True).stdout  # fmt: skip


def _source(revision: str, path: str) -> str:
    if revision == "wt":
        return (ROOT / path).read_text(encoding="utf-8")
    return _git("show", f"{revision}:{path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("revisions", nargs="+", help="git revisions, or `wt` for the tree")
    parser.add_argument("--files", action="store_true", help="also per file")
    args = parser.parse_args()
    for revision in args.revisions:
        counts = {f: code_lines(_source(revision, f)) for f in search_files(revision)}
        if args.files:
            for path, n in counts.items():
                sys.stdout.write(f"{n:6d}  {path}\n")
        sys.stdout.write(f"{sum(counts.values()):6d}  {revision} ({len(counts)} files)\n")


if __name__ == "__main__":
    main()
