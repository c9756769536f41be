"""Shipping ``sandbox.inside`` modules into a container as one self-contained program.

The judge, the graded program's process, the agent and its zygote are each such a program: the
host passes it as a ``python3 -c`` argument or a job's main program, so no file is ever written
into a container for them and the image holds nothing of ours.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

INSIDE = Path(__file__).with_name("inside")


def compact(source: str) -> str:
    """``source`` without docstrings and comments: the container compiles it at every start."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            continue  # the nodes that carry docstrings
        body = node.body
        if (body and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str)):
            node.body = body[1:] or [ast.Pass()]
    return ast.unparse(tree)


@cache
def module_source(name: str) -> str:
    """The compacted source of ``sandbox/inside/<name>.py``."""
    return compact((INSIDE / f"{name}.py").read_text(encoding="utf-8"))


def program(entry: str, sources: dict[str, str]) -> str:
    """One program that defines ``sandbox.inside.<name>`` from each of ``sources`` (in order:
    a module's imports come before it) and runs ``<entry>.main()``."""
    lines = [
        "import sys, types",
        "for _name in ('sandbox', 'sandbox.inside'):",
        "    _pkg = types.ModuleType(_name)",
        "    _pkg.__path__ = []",
        "    sys.modules[_name] = _pkg",
        "sys.modules['sandbox'].inside = sys.modules['sandbox.inside']",
        "def _define(name, source):",
        "    module = types.ModuleType('sandbox.inside.' + name)",
        "    module.__file__ = name + '.py'",
        "    sys.modules[module.__name__] = module",
        "    setattr(sys.modules['sandbox.inside'], name, module)",
        "    exec(compile(source, module.__file__, 'exec'), module.__dict__)",
    ]
    lines += [f"_define({name!r}, {source!r})" for name, source in sources.items()]
    lines.append(f"sys.modules['sandbox.inside.{entry}'].main()")
    return "\n".join(lines) + "\n"


@cache
def bundle(entry: str, modules: tuple[str, ...]) -> str:
    """``program`` of the named modules' sources (``module_source``)."""
    return program(entry, {name: module_source(name) for name in modules})
