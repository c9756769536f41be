"""The safe grammar an answer must match before a reasoning-gym scorer sees it.

Some of reasoning-gym 0.1.25's scorers run the answer as code: ``eval`` in spiral_matrix,
binary_matrix, n_queens and string_insertion (and number_sorting's, on its gold); sympy's ``parse_expr`` (itself an ``eval``) in
countdown, puzzle24, polynomial_multiplication, simple_integration and intermediate_integration
(``evaluates_text`` reads their ``score_answer``). An answer such as
``__import__('builtins').exec(...)`` ran inside the scorer and forged its verdict. So each of
those tasks declares the type of its answer here (a line of integers, a grid, a board, letters,
an arithmetic expression, a polynomial or an antiderivative over the question's symbols), and an
answer outside it is a wrong answer that no scorer sees.

An expression is read by our own tokenizer (ASCII digits, the question's symbols, a short list of
function names, ``+ - * / ** ( ) ,``: no attribute, subscript, string, keyword or lookalike can
appear), then by ``ast`` (which runs nothing) against a whitelist of node types, with a bound on
the size of any number it can build (``9**9**9`` and ``9**(x*0 + 10**9)`` are refused here, not
timed out in sympy); the scorer gets the tokens written again, never the raw text. The other
scorer tasks read the answer as data (string compares, ``json.loads``): their answer must be
printable text. A task whose scorer evaluates text but has no grammar here refuses every answer
(``evaluates_text``, fail closed when reasoning-gym adds one). Standard library only.
"""

from __future__ import annotations

import ast
import inspect
import math
import re
from collections.abc import Callable
from fractions import Fraction
from functools import cache
from typing import Any

#: A number an expression may build: at most this many digits (a polynomial's degree counts too).
MAX_DIGITS = 1_000
#: Calls in a scorer's ``score_answer`` that run text as code.
EVAL_CALL = re.compile(r"\b(eval|exec|compile|parse_expr|sympify|literal_eval|S)\s*\(")

_INTEGERS_LINE = re.compile(r"-?[0-9]+(?: +-?[0-9]+)*", re.ASCII)
_GRID_ROW = re.compile(r"-?[0-9]+(?: +-?[0-9]+)*", re.ASCII)
_BOARD_ROW = re.compile(r"[Q_](?: [Q_])*", re.ASCII)
_LETTERS = re.compile(r"[A-Z]+", re.ASCII)
_TOKEN = re.compile(r"\s*(?:([0-9]+(?:\.[0-9]+)?)|([A-Za-z]+)|(\*\*|[-+*/(),]))", re.ASCII)
_NUMBER_ITEM = r"""(?:'-?[0-9]+(?:\.[0-9]+)?'|"-?[0-9]+(?:\.[0-9]+)?"|-?[0-9]+(?:\.[0-9]+)?)"""
_NUMBER_LIST = re.compile(rf"\[\s*{_NUMBER_ITEM}(?:\s*,\s*{_NUMBER_ITEM})*\s*\]", re.ASCII)
_PRINTABLE = re.compile(r"[^\x00-\x08\x0b-\x1f\x7f]*")

#: Functions an antiderivative may use (sympy's names, as reasoning-gym's golds write them).
FUNCTIONS = frozenset({"sin", "cos", "tan", "cot", "sec", "csc", "asin", "acos", "atan",
                       "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "exp", "log", "sqrt",
                       "Abs"})
CONSTANTS = frozenset({"E", "pi"})


class Refused(ValueError):
    """The answer is outside its task's grammar (the message says where)."""


# -- expressions -----------------------------------------------------------------------------------
def tokens(text: str, names: frozenset[str]) -> list[str]:
    """The tokens of ``text``; a character outside them, or a name outside ``names``, refuses."""
    out, pos, text = [], 0, text.rstrip()
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None:
            raise Refused(f"character {text[pos:].lstrip()[:1]!r} is not in the grammar")
        number, name, op = match.groups()
        if name is not None and name not in names:
            raise Refused(f"name {name!r} is not in the grammar")
        out.append(number or name or op)
        pos = match.end()
    if not out:
        raise Refused("empty expression")
    return out


def _digits(node: ast.AST, functions: frozenset[str]) -> float:
    """An upper bound on the digits of any number ``node`` can build (a symbol counts as a
    one-digit number, so that ``x*0`` cannot hide a huge exponent); refuses a node type
    outside the whitelist."""
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return max(1.0, len(repr(node.value)))
    if isinstance(node, ast.Name):
        return 1.0
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.UAdd | ast.USub):
        return _digits(node.operand, functions)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Sub):
        return max(_digits(node.left, functions), _digits(node.right, functions)) + 1
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult | ast.Div):
        return _digits(node.left, functions) + _digits(node.right, functions)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow):
        base, exponent = _digits(node.left, functions), _digits(node.right, functions)
        if exponent > math.log10(MAX_DIGITS) + 1:
            raise Refused("an exponent too large")
        size = base * 10.0 ** exponent
        if size > MAX_DIGITS:
            raise Refused("a power too large")
        return size
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id in functions and not node.keywords and 1 <= len(node.args) <= 2):
        return max(_digits(a, functions) for a in node.args)
    raise Refused(f"{type(node).__name__} is not in the grammar")


def expression(text: str, symbols: frozenset[str], functions: frozenset[str] = frozenset(),
               power: bool = True) -> str:
    """``text`` as a checked expression over ``symbols`` (and ``functions``), written again from
    its tokens; ``Refused`` otherwise."""
    names = symbols | functions
    found = tokens(text, names)
    if not power and "**" in found:
        raise Refused("no powers in this task's answers")
    if "," in found and not functions:
        raise Refused("character ',' is not in the grammar")
    written = " ".join(found)
    try:
        tree = ast.parse(written, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise Refused(f"not an expression ({type(exc).__name__})") from None
    for node in ast.walk(tree.body):
        if isinstance(node, ast.Name) and node.id in functions:
            continue  # checked as a call's function by _digits
        if isinstance(node, ast.Call) and not (isinstance(node.func, ast.Name)
                                               and node.func.id in functions):
            raise Refused("only the listed functions may be called")
    try:
        _digits(tree.body, functions)
    except RecursionError:
        raise Refused("nested too deeply") from None
    _no_bare_functions(tree.body, functions)
    return written


def _no_bare_functions(node: ast.AST, functions: frozenset[str]) -> None:
    """A function name only as a call's function (``sin + 1`` is not an expression)."""
    if isinstance(node, ast.Call):
        for arg in node.args:
            _no_bare_functions(arg, functions)
        return
    if isinstance(node, ast.Name) and node.id in functions:
        raise Refused(f"{node.id} is a function, not a value")
    for child in ast.iter_child_nodes(node):
        _no_bare_functions(child, functions)


# -- the answer types ---------------------------------------------------------------------------
def _lines(pattern: re.Pattern[str]) -> Callable[[str, dict[str, Any]], str]:
    def check(answer: str, entry: dict[str, Any]) -> str:
        rows = answer.strip().splitlines()
        if not rows or not all(pattern.fullmatch(row.strip()) for row in rows):
            raise Refused("not a grid of the task's cells")
        return answer
    return check


def _whole(pattern: re.Pattern[str], what: str) -> Callable[[str, dict[str, Any]], str]:
    def check(answer: str, entry: dict[str, Any]) -> str:
        if pattern.fullmatch(answer.strip()) is None:
            raise Refused(f"not {what}")
        return answer
    return check


def _arithmetic(answer: str, entry: dict[str, Any]) -> str:
    """The question's integers under + - * / (its scorers count the integers in the text, so
    a decimal such as ``6.61`` would pass as the two numbers 6 and 61)."""
    written = expression(answer, frozenset(), power=False)
    if "." in written:
        raise Refused("integers only in this task's answers")
    return written


def _arithmetic_of_given(answer: str, entry: dict[str, Any]) -> str:
    """``_arithmetic`` over the question's numbers, each once: puzzle24's scorer only checks
    that four numbers in its range are written, so it pays another task's expression."""
    written = _arithmetic(answer, entry)
    used = sorted(int(t) for t in written.split() if t.isdigit())
    given = sorted(int(x) for x in (entry.get("metadata") or {}).get("numbers") or ())
    if used != given:
        raise Refused("not the question's numbers, each once")
    return written


def _makes_24(answer: str, entry: dict[str, Any]) -> str:
    """``_arithmetic_of_given`` whose exact value is 24: puzzle24's scorer reads the value
    through ``int()``, which truncates, so it pays ``(10*7 + 4)/3`` (74/3) as 24."""
    written = _arithmetic_of_given(answer, entry)
    if _exact(ast.parse(written, mode="eval").body) != 24:
        raise Refused("its value is not exactly 24")
    return written


def _exact(node: ast.AST) -> Fraction:
    """The value of an expression ``expression`` accepted with no symbols and no powers
    (integers, signs, + - * /), in fractions."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return Fraction(node.value)
    if isinstance(node, ast.UnaryOp):
        return -_exact(node.operand) if isinstance(node.op, ast.USub) else _exact(node.operand)
    if isinstance(node, ast.BinOp):
        left, right = _exact(node.left), _exact(node.right)
        ops: dict[type, Callable[[Fraction, Fraction], Fraction]] = {
            ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b,
            ast.Mult: lambda a, b: a * b, ast.Div: lambda a, b: a / b}
        if type(node.op) in ops:
            try:
                return ops[type(node.op)](left, right)
            except ZeroDivisionError:
                raise Refused("a division by zero") from None
    raise Refused(f"{type(node).__name__} is not in the grammar")


def _polynomial(answer: str, entry: dict[str, Any]) -> str:
    meta = entry.get("metadata") or {}
    symbols = set(meta.get("variables") or ())
    symbols |= set(re.findall(r"(?<![A-Za-z])[a-z](?![A-Za-z])", str(entry.get("answer", ""))))
    symbols |= set(re.findall(r"(?<![A-Za-z])[a-z](?![A-Za-z])",
                              str(meta.get("polynomial_expr", ""))))
    return expression(answer, frozenset(symbols))


def _antiderivative(answer: str, entry: dict[str, Any]) -> str:
    variable = str((entry.get("metadata") or {}).get("variable", "x"))
    return expression(answer, frozenset({variable, "C"}) | CONSTANTS, FUNCTIONS)


def printable(answer: str, entry: dict[str, Any]) -> str:
    """The grammar of an answer read as data: printable text (no control characters)."""
    if _PRINTABLE.fullmatch(answer) is None:
        raise Refused("a control character")
    return answer


#: The tasks whose scorer evaluates the answer, and the type their answer must have.
GRAMMARS: dict[str, Callable[[str, dict[str, Any]], str]] = {
    "spiral_matrix": _whole(_INTEGERS_LINE, "a line of integers"),
    "binary_matrix": _lines(_GRID_ROW),
    "n_queens": _lines(_BOARD_ROW),
    "string_insertion": _whole(_LETTERS, "a word of capital letters"),
    # Its scorer evals the gold only (when the gold is not JSON); the answer is a list anyway.
    "number_sorting": _whole(_NUMBER_LIST, "a list of numbers"),
    "countdown": _arithmetic,
    "puzzle24": _makes_24,
    "polynomial_multiplication": _polynomial,
    "simple_integration": _antiderivative,
    "intermediate_integration": _antiderivative,
}


@cache
def evaluates_text(task: str) -> bool:
    """Whether reasoning-gym's scorer for ``task`` calls something that runs text as code."""
    from reasoning_gym.factory import DATASETS

    try:
        source = inspect.getsource(DATASETS[task][0].score_answer)
    except (OSError, TypeError):
        return True  # cannot tell: treat it as one (fail closed)
    return EVAL_CALL.search(source) is not None


def safe_answer(task: str | None, answer: str, entry: dict[str, Any],
                evaluates: bool = False) -> str:
    """The text the scorer of ``task`` may see for ``answer``, or ``Refused``. ``evaluates``:
    the scorer runs text (a task without a grammar here then refuses every answer)."""
    grammar = GRAMMARS.get(task or "")
    if grammar is None:
        if evaluates:
            raise Refused(f"the scorer of {task!r} evaluates text and has no safe grammar")
        grammar = printable
    return grammar(answer, entry)
