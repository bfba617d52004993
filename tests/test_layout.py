"""The package's shape: rooms at the top, no import cycle, the router on its seams.

Read from the source with ``ast`` (no import), except the one check that
needs an interpreter: what ``import gateway.router`` loads, in a fresh one.
Every import counts, at module level, under ``TYPE_CHECKING`` and inside a
function alike: a cycle that only the type checker sees still means two
modules that cannot be read, moved or tested apart (issue 24, "House, second
plan"). Importing a submodule also runs its package's ``__init__``; that
edge is not counted, as in import-linter, since a package that re-exports
its parts would otherwise always be a cycle with them.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "gateway"
TOP_LEVEL_FILES = frozenset({"__init__.py", "__main__.py", "errors.py"})
# What the router may import of the backends: their state and a call's
# request clock (both sans-IO), nothing else.
ROUTER_SEAMS = frozenset({"gateway.backends.state", "gateway.backends.call_clock"})
# What importing the router must not load: the supervisor, the session, the
# transports (all three come only through the concrete backend).
NOT_UNDER_ROUTER = ("gateway.backends.supervision", "gateway.transports", "gateway.session")

Graph = dict[str, set[str]]


def _modules(package: Path) -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its ``__init__``)."""
    found = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The module ``name`` refers to: itself, or the closest package or module above it."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def _imported(module: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The gateway modules one module imports, anywhere in its body."""
    is_package = path.name == "__init__.py"
    here = module if is_package else module.rpartition(".")[0]
    targets: set[str | None] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets.update(_resolve(alias.name, modules) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = here
            for _ in range(node.level - 1):
                base = base.rpartition(".")[0]
            if node.level:
                source = f"{base}.{node.module}" if node.module else base
            else:
                source = node.module or ""
            for alias in node.names:
                submodule = f"{source}.{alias.name}"
                targets.add(submodule if submodule in modules else _resolve(source, modules))
    return {t for t in targets if t is not None and t != module}


def import_graph(package: Path = PACKAGE) -> Graph:
    """Who imports whom among the package's modules (ast, nothing imported)."""
    modules = _modules(package)
    return {name: _imported(name, path, modules) for name, path in modules.items()}


def cycles(graph: Graph) -> list[list[str]]:
    """The graph's strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in sorted(graph.get(node, ())):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _described(component: list[str], graph: Graph) -> str:
    """One component as its members and the edges that close it."""
    inside = set(component)
    return "\n".join(
        f"  {member} -> {', '.join(sorted(graph[member] & inside))}" for member in component
    )


def test_the_package_top_holds_only_the_entry_point_the_errors_and_packages() -> None:
    """gateway choice: every module lives in a room (a package); only three files stay on top."""
    loose = sorted(
        entry.name
        for entry in PACKAGE.iterdir()
        if entry.is_file() and entry.suffix == ".py" and entry.name not in TOP_LEVEL_FILES
    )
    not_packages = sorted(
        entry.name
        for entry in PACKAGE.iterdir()
        if entry.is_dir() and entry.name != "__pycache__" and not (entry / "__init__.py").exists()
    )
    assert loose == [], f"modules at the top of gateway/: {loose}"
    assert not_packages == [], f"directories of gateway/ that are not packages: {not_packages}"


def test_no_module_imports_itself_through_others_counting_type_checking_ones() -> None:
    """gateway choice: a shared type lives in a low module, so no two modules import each other."""
    graph = import_graph()
    found = cycles(graph)
    assert found == [], "import cycles:\n" + "\n\n".join(_described(c, graph) for c in found)


def test_the_cycle_finder_reports_a_planted_cycle_and_nothing_else() -> None:
    """gateway choice: the cycle check above can fail (a ring of three, beside a chain)."""
    planted: Graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": {"e"}, "e": set()}
    assert cycles(planted) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_router_modules_import_nothing_of_the_backends_but_their_state() -> None:
    """gateway choice: the router sees a backend through backends/state.py only."""
    graph = import_graph()
    reaching = {
        module: sorted(
            t for t in targets if t.startswith("gateway.backends") and t not in ROUTER_SEAMS
        )
        for module, targets in graph.items()
        if module == "gateway.router" or module.startswith("gateway.router.")
    }
    assert {m: t for m, t in reaching.items() if t} == {}


def test_importing_the_router_loads_no_supervisor_session_or_transport() -> None:
    """gateway choice: the router is read and tested without the backends' machinery."""
    probe = (
        "import sys, gateway.router\n"
        "for name in sorted(sys.modules):\n"
        "    if name.startswith('gateway'):\n"
        "        print(name)\n"
    )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    loaded = done.stdout.split()
    assert "gateway.router.dispatch" in loaded  # the probe saw the router load
    assert [m for m in loaded if m.startswith(NOT_UNDER_ROUTER)] == []
