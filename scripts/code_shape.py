"""The code's shape: lines per package and per module, and the longest functions.

    python scripts/code_shape.py [--top 10] [--tree] [PACKAGE ...]

Counts physical lines (docstrings and comments included: what a reader scrolls through).
"""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("learner", "envs", "sandbox", "tasks")


def functions(path: Path) -> list[tuple[int, str]]:
    """(lines, "file:qualified.name") of every function and method in ``path``."""
    out = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    out.append((child.end_lineno - child.lineno + 1,
                                f"{path.relative_to(ROOT)}:{name}"))
                visit(child, name + ".")

    visit(ast.parse(path.read_text(encoding="utf-8")), "")
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("packages", nargs="*", default=list(PACKAGES))
    parser.add_argument("--top", type=int, default=10, help="how many functions to list")
    parser.add_argument("--tree", action="store_true", help="every module's line count")
    args = parser.parse_args(argv)
    found: list[tuple[int, str]] = []
    for package in args.packages:
        files = sorted((ROOT / package).rglob("*.py"))
        lines = {f: len(f.read_text(encoding="utf-8").splitlines()) for f in files}
        print(f"{package}/  {sum(lines.values())} lines in {len(files)} modules")
        if args.tree:
            for f, n in lines.items():
                print(f"  {n:5d}  {f.relative_to(ROOT / package)}")
        for f in files:
            found += functions(f)
    print(f"\nthe {args.top} longest functions:")
    for n, name in sorted(found, reverse=True)[:args.top]:
        print(f"  {n:4d}  {name}")


if __name__ == "__main__":
    main()
