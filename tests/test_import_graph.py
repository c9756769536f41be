"""No import circles among the project's packages (envs, sandbox, tasks, learner).

Every ``import`` statement counts, wherever it is: at module level, inside a function (a lazy
import is still a dependency) and under ``if TYPE_CHECKING:`` (a type-only cycle is a cycle in
the design). A module's implicit import of its parent package does not: ``sandbox/__init__.py``
importing ``sandbox.runner`` is how packages work.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("envs", "sandbox", "tasks", "learner")


def project_modules(root: Path, packages: Iterable[str]) -> dict[str, Path]:
    """Dotted module name -> file, for every .py file of ``packages`` under ``root``."""
    out = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


def _absolute(module: str, is_package: bool, level: int, name: str | None) -> str:
    """The absolute name of a relative import ``from <level dots><name> import ...``."""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (level - 1)] if level > 1 else base
    return ".".join([*base, *([name] if name else [])])


def imports_of(module: str, path: Path, known: set[str]) -> set[str]:
    """The project modules that ``module`` imports anywhere in its file."""
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                # ``import a.b.c`` runs a.b.c; the deepest project module named is the edge.
                parts = alias.name.split(".")
                for n in range(len(parts), 0, -1):
                    if ".".join(parts[:n]) in known:
                        found.add(".".join(parts[:n]))
                        break
        elif isinstance(node, ast.ImportFrom):
            target = (_absolute(module, is_package, node.level, node.module) if node.level
                      else node.module or "")
            for alias in node.names:  # ``from pkg import submodule`` imports the submodule
                sub = f"{target}.{alias.name}"
                found.add(sub if sub in known else target)
    return {m for m in found if m in known and m != module}


def import_graph(root: Path, packages: Iterable[str]) -> dict[str, set[str]]:
    modules = project_modules(root, packages)
    known = set(modules)
    return {m: imports_of(m, p, known) for m, p in modules.items()}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def test_the_project_has_no_import_circles():
    found = circles(import_graph(ROOT, PACKAGES))
    assert found == [], "import circles: " + "; ".join(" <-> ".join(c) for c in found)


def test_the_check_finds_circles_of_every_kind(tmp_path):
    """The detector itself: a circle through a function-level import, a TYPE_CHECKING import,
    a relative import and ``from pkg import submodule`` is found; a DAG is not."""
    pkg = tmp_path / "p"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("from p.a import A\n")
    (pkg / "a.py").write_text("class A:\n    def f(self):\n        from p.b import B\n")
    (pkg / "b.py").write_text("from typing import TYPE_CHECKING\n"
                              "if TYPE_CHECKING:\n    from .a import A\nB = 1\n")
    (pkg / "c.py").write_text("from p import d\n")
    (pkg / "d.py").write_text("import p.c\n")
    (pkg / "e.py").write_text("from p.a import A\nimport json\n")
    graph = import_graph(tmp_path, ["p"])
    assert graph["p.b"] == {"p.a"} and graph["p.c"] == {"p.d"} and graph["p.e"] == {"p.a"}
    assert circles(graph) == [["p.a", "p.b"], ["p.c", "p.d"]]
