"""No import circles among the project's packages (envs, sandbox, tasks, learner), and no import
that runs up the order of layers (``LAYERS`` below).

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


# The order of layers, highest first: a module may import its own layer and any layer below it,
# never one above. Along the data path (tasks -> envs -> learner), with envs/ in its rooms:
# - tools (envs/tools: the report card, validate, the CLI, serve, the TRL/verl integrations,
#   and the documented envs.integrations aliases) check and ship envs, and read the learner's
#   recipe schema: nothing below imports them;
# - learner: trains on any env through the contract;
# - domains (envs/domains: one env per domain, its recipe TOML beside it);
# - the contract (the rest of envs/, named in CONTRACT below: TaskEnv, episodes, spaces,
#   registration, the tool, the sandbox pool, keyword checks, the Ray scorer);
# - grading (envs/grading.py, the one door a batch is graded through);
# - the vocabulary the door speaks (ScoreInfo and LearnerEnv in envs/contract.py, Flag,
#   Perturbation);
# - the verifiers (envs/verify) beside the sandbox they run code in;
# - the task packs.
# Inside learner/: the entry points (one command each) run a launch (env, scorer and run set up
# from flags); training runs the loop and evaluates held-out tasks through evaluation, which
# samples and scores through sampling; "shared" holds what every floor reads: the flags
# (config and each stage's part of it, choices, recipe and the recipe files' schema), the model
# loader, the sampling distribution, provenance, and where a run keeps its checkpoints
# (run_layout) and how its env and scorer are built (env_setup).
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("tools", ("envs.tools", "envs.__main__", "envs.integrations")),
    ("learner", ("learner",)),
    ("domains", ("envs.domains",)),
    ("contract", ("envs",)),
    ("grading", ("envs.grading",)),
    ("vocabulary", ("envs.contract", "envs.flags", "envs.perturb")),
    ("verify, sandbox", ("envs.verify", "sandbox")),
    ("tasks", ("tasks",)),
)
#: The modules at envs/'s top level: the contract's floor. A new domain goes in envs/domains/,
#: a new tool in envs/tools/, a verifier in envs/verify/.
CONTRACT = frozenset({
    "envs", "envs.__main__", "envs.base", "envs.contract", "envs.episode", "envs.extras",
    "envs.flags", "envs.grading", "envs.keywords", "envs.perturb", "envs.python_tool",
    "envs.ray_scoring", "envs.registration", "envs.sandboxes", "envs.spaces",
    "envs.startup_noise", "envs.task_sampling"})
LEARNER_LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("entry points", ("learner.run", "learner.eval", "learner.demo", "learner.plot",
                      "learner.results")),
    ("launch", ("learner.launch", "learner.resume_command")),
    ("training", ("learner.training",)),
    ("evaluation", ("learner.evaluation",)),
    ("sampling", ("learner.sampling",)),
    ("shared", ("learner", "learner.choices", "learner.config", "learner.stage_config",
                "learner.recipe", "learner.recipe_files",
                "learner.model", "learner.model_name", "learner.distribution", "learner.checkpoint_bound",
                "learner.provenance", "learner.run_layout", "learner.env_setup")),
)


def _owner(module: str, layers: Iterable[tuple[str, tuple[str, ...]]]) -> tuple[int, str] | None:
    """(rank, name) of the layer whose longest prefix names ``module`` (0 is the top)."""
    best: tuple[int, int, str] | None = None
    for rank, (name, prefixes) in enumerate(layers):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and (
                    best is None or len(prefix) > best[0]):
                best = (len(prefix), rank, name)
    return None if best is None else (best[1], best[2])


def upward_imports(graph: dict[str, set[str]],
                   layers: Iterable[tuple[str, tuple[str, ...]]]) -> list[str]:
    """Every import from a module to one in a higher layer, as ``a (layer) -> b (layer)``."""
    layers = tuple(layers)
    out = []
    for module in sorted(graph):
        mine = _owner(module, layers)
        for target in sorted(graph[module]):
            theirs = _owner(target, layers)
            if mine is not None and theirs is not None and theirs[0] < mine[0]:
                out.append(f"{module} ({mine[1]}) -> {target} ({theirs[1]})")
    return out


def unplaced(graph: dict[str, set[str]], layers: Iterable[tuple[str, tuple[str, ...]]],
             under: str) -> list[str]:
    """Modules under ``under`` that no layer names (a new top-level module must be placed)."""
    layers = tuple(layers)
    return [m for m in sorted(graph) if (m == under or m.startswith(under + "."))
            and _owner(m, layers) is None]


def test_no_import_runs_up_the_layers():
    graph = import_graph(ROOT, PACKAGES)
    found = upward_imports(graph, LAYERS) + upward_imports(graph, LEARNER_LAYERS)
    assert found == [], "imports up the layers:\n" + "\n".join(found)


def test_envs_top_level_holds_only_the_contract():
    """A module at envs/'s top level that CONTRACT does not name is a domain, tool or verifier
    left outside its room (or a new piece of the contract, to be named there)."""
    top = {m for m, path in project_modules(ROOT, ["envs"]).items()
           if path.parent == ROOT / "envs"}
    assert top - CONTRACT == set(), "envs/ modules in no room: " + ", ".join(sorted(top - CONTRACT))
    assert CONTRACT - top == set(), "CONTRACT names modules that are gone: " + ", ".join(
        sorted(CONTRACT - top))


def test_every_learner_module_has_a_layer():
    found = unplaced(import_graph(ROOT, PACKAGES), LEARNER_LAYERS, "learner")
    assert found == [], "learner modules in no layer (add them to LEARNER_LAYERS): " + ", ".join(found)


def test_the_layer_check_finds_upward_imports(tmp_path):
    """The check itself: an import up (even a lazy one) is found, one down or sideways is not,
    and a module in a sub-package takes its package's layer unless named itself."""
    pkg = tmp_path / "q"
    (pkg / "low").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "low" / "__init__.py").write_text("")
    (pkg / "top.py").write_text("import q.low.a\n")
    (pkg / "low" / "a.py").write_text("from q.low import b\n")
    (pkg / "low" / "b.py").write_text("def f():\n    from q import top\n")
    (pkg / "low" / "c.py").write_text("from q import top\n")
    layers = (("top", ("q.top", "q.low.c")), ("low", ("q.low", "q")))
    graph = import_graph(tmp_path, ["q"])
    assert upward_imports(graph, layers) == ["q.low.b (low) -> q.top (top)"]
    assert unplaced(graph, (("low", ("q.low",)),), "q") == ["q", "q.top"]
