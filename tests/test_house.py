"""The shape of the house (issues 28 and 39), measured on the package's own source: no function
takes more than 8 parameters outside the public keyword front doors, no module grows past 600
lines, untyped `dict[str, Any]` / `Mapping[str, Any]` annotations stay at most 5 per 1,000
lines, `compile` reaches nothing of `cli/` or `report/`, optimizers print nothing, the gate calls
no model, the model layer (`lm/`) reaches neither `types.py` nor `module.py`, and no module
imports another module's underscore name."""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Iterator
from pathlib import Path

import skillopt_dsl

PACKAGE = Path(skillopt_dsl.__file__).parent
MAX_PARAMETERS = 8
MAX_LINES = 600
MAX_UNTYPED_PER_1000 = 5.0

# The public keyword front doors: callers name each keyword, so the list is the documented API
# itself; everything else passes a typed record (`CompileSettings`, `RunModels`, ...) instead, or
# takes `**options: Unpack[XOptions]` over a frozen `XSettings` (`LM`, `evaluate`, ...; see
# tests/test_house_options.py).
FRONT_DOORS = {
    "compile.py:compile": "the library's keyword front door (packs `CompileSettings`)",
    "cli/__init__.py:sweep_command": "CLI command `skillopt-dsl sweep`",
    "cli/__init__.py:eval_command": "CLI command `skillopt-dsl eval`",
    "cli/__init__.py:transfer_command": "CLI command `skillopt-dsl transfer`",
    "sleep/cli.py:harvest_command": "CLI command `skillopt-dsl sleep harvest`",
    "data/loading.py:load_splits": (
        "`sd.load_splits`: its `**load_kwargs` forward any other keyword to "
        "`datasets.load_dataset` (`cache_dir=`, `name=`), which `Unpack[TypedDict]` cannot type "
        "until mypy supports PEP 728's `extra_items`"
    ),
    "data/loading.py:from_hf": "twin of `load_splits` for Hub datasets (same keywords, same reason)",
}


def _sources() -> Iterator[tuple[str, str]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        yield path.relative_to(PACKAGE).as_posix(), path.read_text(encoding="utf-8")


def parameter_count(arguments: ast.arguments) -> int:
    """Parameters of a function, `self`/`cls` left out, `*args` and `**kwargs` one each."""
    named = arguments.posonlyargs + arguments.args + arguments.kwonlyargs
    count = sum(1 for a in named if a.arg not in ("self", "cls"))
    return count + (arguments.vararg is not None) + (arguments.kwarg is not None)


def _functions(node: ast.AST, prefix: str) -> Iterator[tuple[str, ast.arguments]]:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
            yield prefix + child.name, child.args
            yield from _functions(child, f"{prefix}{child.name}.")
        elif isinstance(child, ast.ClassDef):
            yield from _functions(child, f"{prefix}{child.name}.")
        else:
            yield from _functions(child, prefix)


def long_signatures(sources: Iterator[tuple[str, str]]) -> dict[str, int]:
    """`file:qualified.name` -> parameter count, for every function over `MAX_PARAMETERS`."""
    found: dict[str, int] = {}
    for relative, text in sources:
        for name, arguments in _functions(ast.parse(text), ""):
            count = parameter_count(arguments)
            if count > MAX_PARAMETERS:
                found[f"{relative}:{name}"] = count
    return found


def test_the_counter_counts_what_a_caller_passes() -> None:
    """Kills: the counter skipping methods, nested functions, keyword-only parameters or
    `*args`/`**kwargs`, or counting `self` (each would let a long signature through)."""
    source = (
        "class A:\n"
        "    def m(self, a, b, c, d, e, f, g, h): ...\n"  # 8 without self: allowed
        "    def n(self, a, b, c, d, e, f, g, *, h, i): ...\n"  # 9 with keyword-only
        "def outer():\n"
        "    def inner(a, b, c, d, e, f, g, *args, **kwargs): ...\n"  # 9 with both stars
    )
    found = long_signatures(iter([("x.py", source)]))
    assert found == {"x.py:A.n": 9, "x.py:outer.inner": 9}


def test_no_function_takes_more_than_eight_parameters_outside_the_front_doors() -> None:
    """Kills: a new internal function (or a helper that lost its settings record) with a
    ninth loose parameter; and a front door that no longer needs its place on the list."""
    found = long_signatures(_sources())
    inside = sorted(f"{name} ({n})" for name, n in found.items() if name not in FRONT_DOORS)
    assert not inside, f"pass a typed record (e.g. CompileSettings) instead: {inside}"
    stale = sorted(set(FRONT_DOORS) - set(found))
    assert not stale, f"no longer over {MAX_PARAMETERS} parameters; drop from FRONT_DOORS: {stale}"


def test_no_module_is_over_six_hundred_lines() -> None:
    """Kills: a module growing past 600 lines (split it by concept, re-exporting public names
    from the old module)."""
    long = sorted(
        f"{relative} ({text.count(chr(10))})"
        for relative, text in _sources()
        if text.count("\n") > MAX_LINES
    )
    assert not long, f"split by concept: {long}"


# -- function length, CLI width, the gate's size (issue 51) ------------------------------------
MAX_FUNCTION_LINES = 60
MAX_CLI_PARAMETERS = 20
MAX_GATE_LINES = 500

# Functions still over `MAX_FUNCTION_LINES`, each with the line count it may not exceed: the list
# only shrinks (a function that no longer needs its place must leave it).
LONG_FUNCTIONS: dict[str, int] = {}


def _function_lengths(node: ast.AST, prefix: str) -> Iterator[tuple[str, int]]:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
            yield prefix + child.name, (child.end_lineno or child.lineno) - child.lineno + 1
            yield from _function_lengths(child, f"{prefix}{child.name}.")
        elif isinstance(child, ast.ClassDef):
            yield from _function_lengths(child, f"{prefix}{child.name}.")
        else:
            yield from _function_lengths(child, prefix)


def long_functions(sources: Iterator[tuple[str, str]]) -> dict[str, int]:
    """`file:qualified.name` -> lines (the `def` line to the last, docstring included), for
    every function over `MAX_FUNCTION_LINES`."""
    return {
        f"{relative}:{name}": lines
        for relative, text in sources
        for name, lines in _function_lengths(ast.parse(text), "")
        if lines > MAX_FUNCTION_LINES
    }


def test_the_length_reader_counts_methods_and_nested_functions() -> None:
    """Kills: a reader that skips methods or nested functions, or counts the decorator."""
    body = "".join(f"    x = {i}\n" for i in range(60))
    source = (
        f"@decorator\ndef short():\n{body[: -len('    x = 59') - 1]}"
        f"class A:\n    def m(self):\n{body.replace('    x', '        x')}"
        f"def outer():\n    def inner():\n{body.replace('    x', '        x')}"
    )
    assert long_functions(iter([("x.py", source)])) == {
        "x.py:A.m": 61,
        "x.py:outer": 62,
        "x.py:outer.inner": 61,
    }


def test_no_function_is_over_sixty_lines() -> None:
    """Kills: a function growing past 60 lines (split it into named steps), one on the list
    growing, and a listed one that no longer needs its place."""
    found = long_functions(_sources())
    over = sorted(
        f"{name} ({n})"
        for name, n in found.items()
        if n > LONG_FUNCTIONS.get(name, MAX_FUNCTION_LINES)
    )
    assert not over, f"split into named steps: {over}"
    stale = sorted(set(LONG_FUNCTIONS) - set(found))
    assert not stale, (
        f"no longer over {MAX_FUNCTION_LINES} lines; drop from LONG_FUNCTIONS: {stale}"
    )


def _registered(tree: ast.AST) -> set[str]:
    """Names passed to a typer app's `command(...)` (`app.command("describe")(describe_command)`)."""
    return {
        node.args[0].id
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Call)
        and isinstance(node.func.func, ast.Attribute)
        and node.func.func.attr == "command"
        and node.args
        and isinstance(node.args[0], ast.Name)
    }


def cli_commands(sources: Iterator[tuple[str, str]]) -> dict[str, int]:
    """`file:name` -> parameters, for each function a typer app registers: decorated with
    `<app>.command(...)`, or passed to one in any file of the package."""
    trees = {relative: ast.parse(text) for relative, text in sources}
    registered = set().union(*(_registered(tree) for tree in trees.values()))
    found: dict[str, int] = {}
    for relative, tree in trees.items():
        for node in ast.walk(tree):
            if not isinstance(node, ast.FunctionDef):
                continue
            decorated = any(
                isinstance(d, ast.Call)
                and isinstance(d.func, ast.Attribute)
                and d.func.attr == "command"
                for d in node.decorator_list
            )
            if decorated or node.name in registered:
                found[f"{relative}:{node.name}"] = parameter_count(node.args)
    return found


def test_no_cli_command_takes_more_than_twenty_parameters() -> None:
    """Kills: a CLI command growing one parameter per flag past 20 (group its flags in a
    `skillopt_dsl.flags.FlagRecord` and take the record: `takes_flag_records`), and a reader
    that misses a command registered in another file."""
    sample = iter(
        [
            ("a.py", "@app.command('x')\ndef a(p): ...\ndef b(p, q): ...\ndef c(): ...\n"),
            ("b.py", "from a import b\napp.command('b')(b)\n"),
        ]
    )
    assert cli_commands(sample) == {"a.py:a": 1, "a.py:b": 2}
    commands = cli_commands(_sources())
    named = {name.split(":")[1] for name in commands}
    assert {"compile_command", "run_command", "describe_command"} <= named
    wide = sorted(f"{name} ({n})" for name, n in commands.items() if n > MAX_CLI_PARAMETERS)
    assert not wide, f"take typed flag records instead: {wide}"


def test_the_gate_stays_small() -> None:
    """Kills: the gate growing back past 500 lines (its statistics live in `signed_rank.py`)."""
    lines = (PACKAGE / "gate.py").read_text(encoding="utf-8").count("\n")
    assert lines <= MAX_GATE_LINES, f"gate.py has {lines} lines"


UNTYPED = re.compile(r"\b(?:dict|Mapping)\[str,\s*(?:Any|object)\]")


def test_untyped_string_maps_stay_rare() -> None:
    """Kills: untyped string maps, `dict[str, Any]` / `Mapping[str, Any]` and their respelling
    `dict[str, object]` / `Mapping[str, object]`, creeping above 5 per 1,000 lines of the
    package (use a frozen dataclass or TypedDict where the keys are known, `JSONObject` where
    the value is arbitrary JSON)."""
    untyped = lines = 0
    for _, text in _sources():
        untyped += len(UNTYPED.findall(text))
        lines += text.count("\n")
    sample = "a: dict[str, Any]; b: Mapping[str,Any]; c: dict[str, int]; d: Mapping[str, object]"
    assert len(UNTYPED.findall(sample + "; e: dict[str, object]; f: dict[str, JSONValue]")) == 4
    per_1000 = untyped / lines * 1000
    assert per_1000 <= MAX_UNTYPED_PER_1000, f"{untyped} in {lines} lines = {per_1000:.2f}/1,000"


# -- the layers ---------------------------------------------------------------------------------
# A module's imports are every `import skillopt_dsl...` / `from skillopt_dsl... import ...` in its
# file, wherever it stands (module top, inside a function, under `if TYPE_CHECKING:`), with
# `from skillopt_dsl.x import y` also naming `skillopt_dsl.x.y` when that is a module, and each
# subpackage a module sits in (its `__init__` runs first; the root package's is left out, as it
# imports everything). The rules below hold for everything a module reaches through them.


def _module_name(relative: str) -> str:
    parts = relative.removesuffix(".py").split("/")
    return ".".join(["skillopt_dsl", *(parts[:-1] if parts[-1] == "__init__" else parts)])


def imported_modules(text: str, modules: set[str]) -> set[str]:
    """The package's modules (of `modules`) that a file's import statements name, and the
    subpackages they sit in (not the root package)."""
    named: set[str] = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            named.add(node.module)
            named.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            named.update(alias.name for alias in node.names)
    found: set[str] = set()
    for name in named:
        parts = name.split(".")
        found.update(".".join(parts[:end]) for end in range(2, len(parts) + 1))
    return found & modules


def import_graph(sources: dict[str, str]) -> dict[str, set[str]]:
    """Module name -> the package's modules its file imports (`sources`: name -> text)."""
    modules = set(sources)
    return {name: imported_modules(text, modules) for name, text in sources.items()}


def reached_from(start: str, graph: dict[str, set[str]]) -> set[str]:
    """Every module of the package that importing `start` reaches, `start` left out."""
    seen, todo = {start}, [start]
    while todo:
        for name in graph[todo.pop()] - seen:
            seen.add(name)
            todo.append(name)
    return seen - {start}


@functools.cache
def _graph() -> dict[str, set[str]]:
    return import_graph({_module_name(relative): text for relative, text in _sources()})


def test_the_import_reader_sees_every_form_of_import() -> None:
    """Kills: the reader missing an import inside a function or under `TYPE_CHECKING`, the
    `from skillopt_dsl import report` form, a subpackage's `__init__`, or an import reached
    through another module (each would let a broken layer rule through)."""
    sources = {
        "skillopt_dsl.a": "def f():\n    from skillopt_dsl.b import thing\n",
        "skillopt_dsl.b": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import skillopt_dsl.c\n",
        "skillopt_dsl.c": "from skillopt_dsl import report\n",
        "skillopt_dsl.report": "",
        "skillopt_dsl.d": "from skillopt_dsl.report.page import write\n",
        "skillopt_dsl.report.page": "",
    }
    graph = import_graph(sources)
    assert reached_from("skillopt_dsl.a", graph) == {
        "skillopt_dsl.b",
        "skillopt_dsl.c",
        "skillopt_dsl.report",
    }
    assert reached_from("skillopt_dsl.d", graph) == {
        "skillopt_dsl.report",
        "skillopt_dsl.report.page",
    }


def _in_folder(name: str, *folders: str) -> bool:
    return any(
        name == f"skillopt_dsl.{f}" or name.startswith(f"skillopt_dsl.{f}.") for f in folders
    )


def test_compile_imports_nothing_from_the_cli_or_the_report() -> None:
    """Kills: `compile` (or anything it imports) importing `skillopt_dsl.cli` or
    `skillopt_dsl.report`, e.g. drawing a sweep's plots itself: compile returns what the CLI and
    the report draw (`CompileResult.study_plots`) and prints and draws nothing."""
    reached = reached_from("skillopt_dsl.compile", _graph())
    above = sorted(name for name in reached if _in_folder(name, "cli", "report"))
    assert not above, f"compile returns what the CLI and the report draw; it imports {above}"


def test_the_model_layer_imports_nothing_of_the_modules_nouns() -> None:
    """Kills: a module of `skillopt_dsl/lm/` (or anything it imports) importing
    `skillopt_dsl.types` (`Example`, `Prediction`) or `skillopt_dsl.module`: the model layer
    calls models and counts their cost without knowing what a module or an example is (the
    JSON aliases it needs live in `skillopt_dsl.json_types`)."""
    graph = _graph()
    nouns = {"skillopt_dsl.types", "skillopt_dsl.module"}
    crossing = {
        name: sorted(reached_from(name, graph) & nouns)
        for name in sorted(graph)
        if _in_folder(name, "lm")
    }
    assert not {k: v for k, v in crossing.items() if v}, f"the model layer reaches {crossing}"


# -- private names stay home --------------------------------------------------------------------
# A name with a leading underscore is its module's own: no other module of the package imports it,
# neither as `from skillopt_dsl.x import _y` (absolute or relative) nor as `import skillopt_dsl.x`
# (or `from skillopt_dsl import x`) followed by `x._y`. Dunder names (`__version__`) are left out.


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _absolute(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    """The module a `from ... import` names, its relative dots resolved against `module`."""
    if not node.level:
        return node.module or ""
    parts = module.split(".")
    base = parts if is_package else parts[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def _module_aliases(tree: ast.AST, module: str, is_package: bool) -> dict[str, str]:
    """Local name -> package module, for each `import skillopt_dsl.x as m` / `from ... import m`."""
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname and alias.name.startswith("skillopt_dsl"):
                    aliases[alias.asname] = alias.name
        elif isinstance(node, ast.ImportFrom):
            source = _absolute(node, module, is_package)
            for alias in node.names:
                aliases[alias.asname or alias.name] = f"{source}.{alias.name}"
    return aliases


def private_imports(relative: str, text: str, modules: set[str]) -> list[str]:
    """`file: module.name` for each underscore name the file takes from another package module
    (`modules`: the package's module names, for the `import skillopt_dsl.x as m` + `m._y` form)."""
    module, tree = _module_name(relative), ast.parse(text)
    is_package = relative.endswith("__init__.py")
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            source = _absolute(node, module, is_package)
            if source.startswith("skillopt_dsl") and source != module:
                found += [f"{source}.{a.name}" for a in node.names if _private(a.name)]
    aliases = _module_aliases(tree, module, is_package)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            owner = ast.unparse(node.value)
            owner = aliases.get(owner, owner)
            if owner in modules and owner != module:
                found.append(f"{owner}.{node.attr}")
    return [f"{relative}: {name}" for name in found]


def test_the_private_import_reader_sees_each_form() -> None:
    """Kills: the reader missing a relative `from . import _x`, an import inside a function, the
    `import skillopt_dsl.x as m` + `m._y` form, or flagging a dunder or a module's own names."""
    text = (
        "import skillopt_dsl.door as door\n"
        "from skillopt_dsl import sections\n"
        "from skillopt_dsl import __version__\n"
        "from .anchors import _locate, Span\n"
        "def f():\n"
        "    from skillopt_dsl.data_rows import _Fields, to_examples\n"
        "    import skillopt_dsl.looks\n"
        "    return door._refusal, sections._sections, door.Step, self._own, Span._replace\n"
        "    return skillopt_dsl.looks._judge, skillopt_dsl.skill._own\n"
    )
    modules = {f"skillopt_dsl.{m}" for m in ("skill", "door", "sections", "looks", "data_rows")}
    found = private_imports("skill.py", text, modules)
    assert sorted(name.split(": ")[1] for name in found) == [
        "skillopt_dsl.anchors._locate",
        "skillopt_dsl.data_rows._Fields",
        "skillopt_dsl.door._refusal",
        "skillopt_dsl.looks._judge",
        "skillopt_dsl.sections._sections",
    ]


def test_no_underscore_name_is_imported_from_another_module() -> None:
    """Kills: a module importing another module's underscore name (e.g. `from skillopt_dsl.door
    import _look_order` in driver.py): a name other modules use is public, without the underscore."""
    modules = set(_graph())
    crossing = [
        line for relative, text in _sources() for line in private_imports(relative, text, modules)
    ]
    assert not crossing, "underscore names imported across modules:\n" + "\n".join(crossing)


# -- circles and arrows up ----------------------------------------------------------------------
# The file-level import graph: an arrow from a file to each package file its import statements name
# (`from skillopt_dsl.x import y` names `skillopt_dsl.x.y` when that is a module, else
# `skillopt_dsl.x`), wherever the statement stands (under `TYPE_CHECKING` too: a circle in the
# types is a circle in the design). A package's `__init__` is a file like any other; importing a
# submodule does not draw an arrow to the package around it.


def direct_imports(module: str, text: str, modules: set[str], *, is_package: bool) -> set[str]:
    """The package's modules that one file's import statements name directly."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.ImportFrom):
            source = _absolute(node, module, is_package)
            for alias in node.names:
                child = f"{source}.{alias.name}"
                found.add(child if child in modules else source)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return (found & modules) - {module}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected set of two or more modules (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            members = []
            while True:
                member = stack.pop()
                members.append(member)
                if member == node:
                    break
            if len(members) > 1:
                found.append(sorted(members))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def arrows_up(graph: dict[str, set[str]], packages: set[str]) -> list[str]:
    """Each arrow from a file to the front (`__init__`) of a package that holds it: a piece
    reaching back up into its own folder's door instead of the sibling that defines the name."""
    return sorted(
        f"{source} -> {target}"
        for source, targets in graph.items()
        for target in targets
        if target in packages and source.startswith(target + ".")
    )


def _file_graph() -> tuple[dict[str, set[str]], set[str]]:
    sources = {_module_name(relative): (relative, text) for relative, text in _sources()}
    modules = set(sources) | {"skillopt_dsl"}
    packages = {_module_name(r) for r, _ in sources.values() if r.endswith("__init__.py")}
    graph = {
        name: direct_imports(name, text, modules, is_package=relative.endswith("__init__.py"))
        for name, (relative, text) in sources.items()
        if not relative.endswith("__main__.py")  # `python -m`'s entry sits above everything
    }
    return graph, packages | {"skillopt_dsl"}


def test_the_circle_and_arrow_readers_see_what_they_must() -> None:
    """Kills: a circle reader that misses a two-file circle through a `TYPE_CHECKING` import or
    a relative import, and an arrow reader that misses `from skillopt_dsl.pkg import Name` in
    `pkg/a.py` or calls an import of a sibling submodule an arrow up."""
    texts = {
        "skillopt_dsl.pkg": ("pkg/__init__.py", "from skillopt_dsl.pkg.a import A\n"),
        "skillopt_dsl.pkg.a": (
            "pkg/a.py",
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .b import B\n",
        ),
        "skillopt_dsl.pkg.b": ("pkg/b.py", "from skillopt_dsl.pkg.a import A\n"),
        "skillopt_dsl.pkg.c": ("pkg/c.py", "from skillopt_dsl.pkg import A\nfrom . import b\n"),
    }
    modules = set(texts)
    graph = {
        name: direct_imports(name, text, modules, is_package=relative.endswith("__init__.py"))
        for name, (relative, text) in texts.items()
    }
    assert graph["skillopt_dsl.pkg.c"] == {"skillopt_dsl.pkg", "skillopt_dsl.pkg.b"}
    assert circles(graph) == [["skillopt_dsl.pkg.a", "skillopt_dsl.pkg.b"]]
    assert arrows_up(graph, {"skillopt_dsl.pkg"}) == ["skillopt_dsl.pkg.c -> skillopt_dsl.pkg"]


def test_no_import_circles() -> None:
    """Kills: two files importing each other, even only for types (e.g. `dspy/hooks.py` taking
    `DSPyProgram` from `dspy/program.py`, which takes `ProposerHooks` from it): the lower file
    declares what it needs (a Protocol) or the shared name moves down."""
    graph, _ = _file_graph()
    assert not circles(graph), f"import circles: {circles(graph)}"


def test_no_arrow_runs_back_up_into_a_folders_door() -> None:
    """Kills: a file importing a name from the `__init__` of its own folder (or the package root)
    instead of from the sibling module that defines it, e.g. `from skillopt_dsl.optimizers import
    GradientText` inside `optimizers/beam.py`."""
    graph, packages = _file_graph()
    up = arrows_up(graph, packages)
    assert not up, "arrows back up:\n" + "\n".join(up)


# The layers, from the bottom up (CONTRIBUTING.md, "Architecture"): a file imports only files of
# its own layer or of layers below it. A new top-level file or folder is placed here.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors", "json_types", "options", "types", "cli_harness", "file_transaction", "agent_kinds"),
    ("staged_change",),
    ("lm",),
    ("skill", "metrics", "events", "evidence", "progress", "signed_rank"),
    ("module", "export", "studies"),
    ("evaluate", "runs", "baselines", "data"),
    ("gate", "guards", "reachability", "search_memory", "settings", "flags"),
    ("driver",),
    ("optimizers",),
    ("compile", "agents", "skill_folder", "recipes"),
    ("dspy", "sleep", "benchmarks", "report"),
    ("cli", "sweeps", "testing"),
)


def layer_of(module: str) -> int | None:
    """The layer of a package module (by its top-level file or folder); None when unplaced;
    the root package sits above every layer."""
    parts = module.split(".")
    if len(parts) == 1:
        return len(LAYERS)
    return next((i for i, names in enumerate(LAYERS) if parts[1] in names), None)


def test_every_import_points_down_the_layers() -> None:
    """Kills: a lower layer importing a higher one (e.g. `driver/run.py` importing from
    `optimizers/`, or `skill/` from `module.py`), and a new top-level file nobody placed in
    `LAYERS`."""
    graph, _ = _file_graph()
    unplaced = sorted({m for m in graph if layer_of(m) is None})
    assert not unplaced, f"place these in LAYERS (tests/test_house.py) and CONTRIBUTING: {unplaced}"
    upward = sorted(
        f"{source} -> {target}"
        for source, targets in graph.items()
        for target in targets
        if (layer_of(target) or 0) > (layer_of(source) or 0)
    )
    assert not upward, "imports up the layers:\n" + "\n".join(upward)


# -- mixins and the door's commit (issue 51) -----------------------------------------------------
def _decorated_dataclass(cls: ast.ClassDef) -> bool:
    for decorator in cls.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
        if name == "dataclass":
            return True
    return False


def _private_names(cls: ast.ClassDef) -> tuple[set[str], set[str]]:
    """The private names a class defines (methods, class attributes with a value or dataclass
    fields, `self._x = ...`) and those it reads on `self`. A bare annotation outside a
    dataclass (`_state: RunState`) defines nothing: it declares a subclass's field."""
    defined: set[str] = set()
    read: set[str] = set()
    for item in cls.body:
        if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
            defined.add(item.name)
        elif isinstance(item, ast.Assign):
            defined |= {t.id for t in item.targets if isinstance(t, ast.Name)}
        elif (
            isinstance(item, ast.AnnAssign)
            and isinstance(item.target, ast.Name)
            and (item.value is not None or _decorated_dataclass(cls))
        ):
            defined.add(item.target.id)
    for node in ast.walk(cls):
        if not (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)):
            continue
        name = node.attr
        if node.value.id != "self" or not name.startswith("_") or name.endswith("__"):
            continue
        (read if isinstance(node.ctx, ast.Load) else defined).add(name)
    return defined, read


def foreign_private_reads(sources: Iterator[tuple[str, str]]) -> dict[str, list[str]]:
    """`file:Class` -> the private attributes it reads on `self` that neither it nor any of
    its bases (by name, within the package) defines: a mixin reading its subclass's fields."""
    classes: dict[str, list[tuple[str, ast.ClassDef]]] = {}
    for relative, text in sources:
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef):
                classes.setdefault(node.name, []).append((relative, node))

    def lineage(cls: ast.ClassDef, seen: set[str]) -> set[str]:
        defined = _private_names(cls)[0]
        for base in cls.bases:
            name = base.attr if isinstance(base, ast.Attribute) else getattr(base, "id", "")
            if name and name not in seen:
                seen.add(name)
                for _, parent in classes.get(name, []):
                    defined |= lineage(parent, seen)
        return defined

    found: dict[str, list[str]] = {}
    for name, entries in classes.items():
        for relative, cls in entries:
            missing = _private_names(cls)[1] - lineage(cls, {name})
            if missing:
                found[f"{relative}:{name}"] = sorted(missing)
    return found


def test_the_mixin_reader_sees_a_subclass_field_read_by_its_mixin() -> None:
    """Kills: a reader that counts a bare annotation as a definition (the old
    `ValidationBook` declared `_state: RunState` and read it), or that misses an attribute
    a base class defines (inheritance is not a mixin)."""
    source = (
        "class Book:\n    _state: int\n    def report(self):\n        return self._state\n"
        "class Driver(Book):\n    def __init__(self):\n        self._state = 1\n"
        "class Child(Driver):\n    def again(self):\n        return self._state + self._own()\n"
        "    def _own(self):\n        return 0\n"
        "@dataclass\nclass Record:\n    _x: int\n    def get(self):\n        return self._x\n"
    )
    assert foreign_private_reads(iter([("x.py", source)])) == {"x.py:Book": ["_state"]}


def test_no_mixin_reads_private_attributes_it_does_not_define() -> None:
    """Kills: a mixin that reads the private fields of the class it is mixed into (the driver's
    `CompileContext(ValidationBook)`, whose book read `_state` and `_judging`): give the fields
    a typed owner or hold the part (composition)."""
    found = foreign_private_reads(_sources())
    assert not found, f"classes reading private fields they do not define: {found}"


DOOR_COMMIT_PATH = {
    "driver/view.py": ("RunView.submit", "RunView.commit"),
    "driver/run.py": (
        "CompileContext._submit",
        "CompileContext._close",
        "CompileContext._commit",
        "CompileContext._append_step",
        "CompileContext.checkpoint",
    ),
}
"""The door's commit path: from `RunView.submit` to the checkpoint written with a verdict."""


def _methods(tree: ast.AST) -> Iterator[tuple[str, ast.FunctionDef]]:
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef):
                    yield f"{node.name}.{item.name}", item


def callables_on_commit_path(relative: str, text: str, names: tuple[str, ...]) -> list[str]:
    """The parameters of the commit path's functions that are callables: annotated with
    `Callable` (or a name for one ending in `After`, `Fn`, `Callback`), or called in the body."""
    found = []
    for name, function in _methods(ast.parse(text)):
        if name not in names:
            continue
        arguments = function.args
        parameters = {a.arg: a for a in [*arguments.args, *arguments.kwonlyargs]}
        called = {
            node.func.id
            for node in ast.walk(function)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
        }
        for parameter, argument in parameters.items():
            annotation = ast.unparse(argument.annotation) if argument.annotation else ""
            typed = re.search(r"Callable|After\b|Fn\b|Callback\b", annotation)
            if typed or parameter in called:
                found.append(f"{relative}:{name}({parameter})")
    return found


def test_the_commit_path_reader_sees_a_callback() -> None:
    """Kills: a reader blind to the old hand-over (`_close(step, verdict, state_after)` calling
    `state_after(verdict)`), to a callable annotation, or to a function it must read."""
    source = (
        "class CompileContext:\n"
        "    def _close(self, step, verdict, state_after):\n"
        "        return state_after(verdict)\n"
        "    def _commit(self, state: Callable[[], dict]):\n        return state\n"
        "    def other(self, fn):\n        return fn()\n"
    )
    names = ("CompileContext._close", "CompileContext._commit")
    assert callables_on_commit_path("run.py", source, names) == [
        "run.py:CompileContext._close(state_after)",
        "run.py:CompileContext._commit(state)",
    ]


def test_no_optimizer_callable_runs_inside_the_doors_commit() -> None:
    """Kills: a door that calls back into the optimizer while it records a verdict (the old
    `state_after` closure, called from inside `CompileContext._close` before the checkpoint):
    the optimizer hands its state over with `RunView.commit` after the verdict returns."""
    sources = dict(_sources())
    found = []
    for relative, names in DOOR_COMMIT_PATH.items():
        present = {name for name, _ in _methods(ast.parse(sources[relative]))}
        assert set(names) <= present, f"the commit path moved: {set(names) - present}"
        found += callables_on_commit_path(relative, sources[relative], names)
    assert not found, f"callables on the door's commit path: {found}"


# -- the whiteboard's nevers: optimizers print nothing; the gate calls no model ----------------

SAYING_CALLS = frozenset({"print", "echo", "secho", "pprint"})
"""Calls that print (`print`, `typer.echo`/`secho`, `pprint`)."""
SAYING_MODULES = ("rich", "typer", "matplotlib", "tqdm")
GATE_FILES = ("gate.py", "guards.py", "signed_rank.py", "evidence.py")
"""The gate and the statistics it decides with."""
GATE_MAY_TAKE = {"skillopt_dsl.evaluate": {"EvaluationReport", "Rollout"}}
"""What the gate's files may import from a module that runs models: its report types alone."""
MODEL_CALLS = frozenset({"complete", "acomplete", "generate", "evaluate", "run", "forward"})


def sayings(source: str) -> list[str]:
    """Where `source` prints: a call named in `SAYING_CALLS`, `sys.stdout`/`sys.stderr`, or an
    import of a module that draws or prints (`SAYING_MODULES`)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
            if name in SAYING_CALLS:
                found.append(f"{name}() at line {node.lineno}")
        elif isinstance(node, ast.Attribute) and node.attr in ("stdout", "stderr"):
            found.append(f"sys.{node.attr} at line {node.lineno}")
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module]
            found += [f"import {n}" for n in names if n and n.split(".")[0] in SAYING_MODULES]
    return found


def model_calls(source: str) -> list[str]:
    """Where `source` could call a model: an import from `skillopt_dsl.lm`, the module or the
    driver, a name from a model-running module beyond `GATE_MAY_TAKE`, or a call named in
    `MODEL_CALLS`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module:
            taken = {a.name for a in node.names}
            if _in_folder(node.module, "lm", "module", "driver", "optimizers", "agents"):
                found.append(f"from {node.module} import {sorted(taken)}")
            extra = taken - GATE_MAY_TAKE.get(node.module, taken)
            if extra:
                found.append(f"from {node.module} import {sorted(extra)}")
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", None) in MODEL_CALLS:
            found.append(f".{getattr(node.func, 'attr', '')}() at line {node.lineno}")
    return found


def test_the_never_readers_see_a_print_and_a_model_call() -> None:
    """Kills: a reader blind to `print`, `typer.echo`, `sys.stdout`, a lazy drawing import, a
    model import or the `evaluate` function taken beside the report type."""
    said = "import sys\ndef f():\n    from rich.console import Console\n    print(1)\n"
    said += "    typer.echo(2)\n    sys.stdout.write('x')\n"
    assert sayings(said) == [
        "import rich.console",
        "print() at line 4",
        "echo() at line 5",
        "sys.stdout at line 6",
    ]
    called = "from skillopt_dsl.evaluate import EvaluationReport, evaluate\n"
    called += "from skillopt_dsl.lm import LM\nx = lm.complete([])\n"
    assert model_calls(called) == [
        "from skillopt_dsl.evaluate import ['evaluate']",
        "from skillopt_dsl.lm import ['LM']",
        ".complete() at line 3",
    ]
    assert model_calls("from skillopt_dsl.evaluate import EvaluationReport\n") == []


def test_optimizers_print_nothing() -> None:
    """Kills: an optimizer (or its search step, proposers, schedules) printing or drawing
    itself (the old lazy import of the report's `draw_study_plots` in `sweeps.py`): it returns
    what its caller shows, and reaches nothing of `cli/`, `report/` or the progress display."""
    sources = [(r, s) for r, s in _sources() if r.startswith(("optimizers/", "sweeps.py"))]
    said = {r: sayings(s) for r, s in sources if sayings(s)}
    assert not said, f"optimizers print nothing themselves: {said}"
    graph = _graph()
    shown = {
        (name, reached)
        for name in graph
        if _in_folder(name, "optimizers") or name == "skillopt_dsl.sweeps"
        for reached in reached_from(name, graph)
        if _in_folder(reached, "cli", "report") or reached == "skillopt_dsl.progress"
    }
    assert not shown, f"optimizers reach the display: {sorted(shown)}"


def test_the_gate_calls_no_model() -> None:
    """Kills: the gate (or the statistics it decides with) importing a model, the module, the
    driver or an optimizer, or taking `evaluate` itself beside its report types: it decides on
    two reports it is handed and never scores a candidate."""
    sources = dict(_sources())
    called = {name: model_calls(sources[name]) for name in GATE_FILES if model_calls(sources[name])}
    assert not called, f"the gate calls no model: {called}"
