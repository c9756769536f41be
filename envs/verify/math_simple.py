"""Fast parser for simple LaTeX leaves (numbers, fractions, roots, polynomials).

Not used for grading since issue 31: an answer's value and its simplest-form tally are read from
one tree (``math_parse.leaf_tree``); a second parser that reads more than the form scorer (Python's
``**`` and ``//``, bracketed numbers side by side) paid for work left undone. Kept for callers
that want a quick sympy reading of plain arithmetic.

The ANTLR-based ``latex2sympy`` costs 5-50 ms per call in pure Python; most answers are
far simpler. This translator handles digits, single-letter variables, ``+ - * / ^``,
parentheses, ``\\frac``, ``\\sqrt``, ``\\pi``, ``\\cdot`` and implicit multiplication,
and returns ``None`` for anything else so the caller falls back to ``latex2sympy``.
It mirrors ``latex2sympy``'s conventions (letters are lower-cased symbols) so both paths
agree; leaves containing ``e``/``E``/``i``/``I`` are declined because their meaning
(Euler's number, imaginary unit, or a variable) is ``latex2sympy``'s call.
"""

from __future__ import annotations

import re
import string
from typing import Any

import sympy
from sympy.parsing.sympy_parser import (
    implicit_multiplication,
    parse_expr,
    split_symbols,
    standard_transformations,
)

_ALLOWED = re.compile(
    r"^(?:[0-9a-zA-Z+\-*/^()\s{}\[\]]|\\frac|\\sqrt|\\pi|\\cdot|\\times|\\infty)*$"
)
_LETTERS = {c: sympy.Symbol(c.lower()) for c in string.ascii_letters if c not in "eEiI"}
_LOCALS: dict[str, Any] = {
    **_LETTERS,
    "pi": sympy.pi,
    "oo": sympy.oo,
    "sqrt": sympy.sqrt,
    "root": sympy.root,
}
_TRANSFORMS = (*standard_transformations, split_symbols, implicit_multiplication)


def _group(s: str, i: int) -> tuple[str, int] | None:
    """Content of the ``{...}`` (or single character) argument starting at ``s[i]``."""
    while i < len(s) and s[i] == " ":
        i += 1
    if i >= len(s):
        return None
    if s[i] != "{":
        if s[i] in "\\{}":
            return None
        return s[i], i + 1
    depth = 0
    for j in range(i, len(s)):
        if s[j] == "{":
            depth += 1
        elif s[j] == "}":
            depth -= 1
            if depth == 0:
                return s[i + 1 : j], j + 1
    return None


def _translate(s: str) -> str | None:
    out: list[str] = []
    i = 0
    while i < len(s):
        if s.startswith("\\frac", i):
            a = _group(s, i + 5)
            if a is None:
                return None
            b = _group(s, a[1])
            if b is None:
                return None
            ta, tb = _translate(a[0]), _translate(b[0])
            if ta is None or tb is None:
                return None
            out.append(f"(({ta})/({tb}))")
            i = b[1]
        elif s.startswith("\\sqrt", i):
            j = i + 5
            index = None
            if j < len(s) and s[j] == "[":
                k = s.find("]", j)
                if k < 0:
                    return None
                index = _translate(s[j + 1 : k])
                if index is None:
                    return None
                j = k + 1
            a = _group(s, j)
            if a is None:
                return None
            ta = _translate(a[0])
            if ta is None:
                return None
            out.append(f"root(({ta}),({index}))" if index else f"sqrt({ta})")
            i = a[1]
        elif s.startswith("\\pi", i):
            out.append(" pi ")
            i += 3
        elif s.startswith("\\infty", i):
            out.append(" oo ")
            i += 6
        elif s.startswith("\\cdot", i) or s.startswith("\\times", i):
            out.append("*")
            i += 5 if s.startswith("\\cdot", i) else 6
        elif s[i] == "^":
            a = _group(s, i + 1)
            if a is None:
                return None
            ta = _translate(a[0])
            if ta is None:
                return None
            out.append(f"**({ta})")
            i = a[1]
        elif s[i] in "{[":
            out.append("(")
            i += 1
        elif s[i] in "}]":
            out.append(")")
            i += 1
        elif s[i] == "\\":
            return None
        else:
            out.append(s[i])
            i += 1
    return "".join(out)


def parse_simple(s: str) -> Any | None:
    """sympy expression for a simple leaf, or None when ``latex2sympy`` is needed."""
    if len(s) > 200 or not _ALLOWED.match(s) or re.search(r"[eEiI]", re.sub(r"\\[a-z]+", "", s)):
        return None
    if re.search(r"\d\s+\d|\d\s*\\frac\s*\{?\d+\}?\s*\{?\d", s):
        # "2 1/2", "3\frac{1}{2}": mixed numbers are latex2sympy's convention
        return None
    if re.search(r"[A-Za-z]\s*\(", s.replace("\\frac", "").replace("\\sqrt", "")):
        return None  # f(x): function application is latex2sympy's call
    code = _translate(s)
    if code is None or not code.strip():
        return None
    try:
        expr = parse_expr(code, local_dict=dict(_LOCALS), transformations=_TRANSFORMS)
    except Exception:
        return None
    return expr if isinstance(expr, sympy.Basic) else None
