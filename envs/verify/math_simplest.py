"""Simplest form: the evaluation an answer leaves undone (worker side; imports sympy).

The checker credits any expression with the gold's value, so without this rule ``\\log_2 64``
would answer "Evaluate $\\log_2 64$" and ``\\sqrt{242}`` a gold of ``11\\sqrt{2}``: the question's
computation, left undone in another notation. Each answer leaf is parsed *as written* (sympy's
evaluation off) and its tree is scored, kind by kind, for the work left in it. That tree is the
one the leaf's value is read from (``math_parse.leaf_tree``): a syntax this scorer
cannot read has no value either, so nothing is credited with its work left uncounted (Python's
``**`` and ``//`` are ``unparseable``; ``(10)(9)``, ``[10][9]`` and ``{10}{9}`` are products):

- ``function``: an application of a function or operator (log, trig and inverse trig, abs,
  floor, factorial, binomial, gcd, max, sum, product, integral, limit, derivative, ...).
  Counted, not judged: an answer equal to the gold that applies more functions than the gold
  has evaluations that the gold's form shows are unnecessary. A logarithm to a base counts two
  (``\\log_b a`` is ``\\ln a / \\ln b``), so a change of base costs nothing; ``e^x`` is a power,
  not an application; an operator counts once and its body is not scored (it is what the
  operator computes). An application that sympy's own evaluation rewrites counts once more
  (``\\cos(\\frac{\\pi}{2} - 1)`` is ``\\sin 1``, ``\\ln\\frac12`` is ``-\\ln 2``), so one
  function traded for another with the evaluation left in its argument is not free;
- ``identity``: a term ``0``, a factor ``1`` of either sign (not a written numerator:
  ``x^{-1}\\cdot 1`` is not ``\\frac1x``; ``(-1)\\cdot 50`` and ``(80-15x)(-1)`` write a minus
  sign as a product), a denominator ``1``, an exponent ``0`` or ``1`` (``e^{1}``), a power of ``1``;
- ``arithmetic``: numbers left to combine: two number terms in one sum, like terms
  (``x + x``), a term or product that is 0, two integers on one side of a product
  (``2 \\cdot 3``, ``\\frac12\\cdot\\frac13``, ``(10)(9)``), two signs in a row through any
  brackets (``-(-6)``, ``-[-6]``, ``p + (-q)``), an integer power of a
  number (``10^2``, ``2^{-1}``; scientific notation from ``10^4`` on is a form, below), a power of
  a power, a repeated factor (``x \\cdot x``,
  ``\\frac{x}{x}``), an integer power of a product with a number in it (``(2x)^2``), a product or
  power of sums of numbers (``(\\sqrt3+1)(\\sqrt3-1)``), a power of numbers whose value is rational
  (``e^{i\\pi}``), a sum that multiplied out (logarithms expanded too) loses terms or cancels
  terms with a variable (``(a+b)^2 - 2ab``, ``\\ln(2e) - 1``; not the vertex form ``(x+1)^2 - 1``);
- ``fraction``: a numerator and denominator with a common factor (``\\frac{6}{8}``,
  ``\\frac{2\\sqrt2}{4}``, ``\\frac{x^2-1}{x+1}``, ``\\frac{2+2\\sqrt2}{2}``,
  ``\\frac{2+\\sqrt2}{\\sqrt2}``), a fraction in a fraction (``\\frac{1}{2.0}``), a repeating
  decimal (``0.\\overline{6}``: the fraction left as its expansion);
- ``radical``: a root with a perfect power in it (``\\sqrt{242}``, ``\\sqrt[3]{27}``,
  ``\\sqrt{-4}``, ``\\sqrt{1/4}``), a fractional exponent of 1 or more (``2^{3/2}``), two roots of
  one index that combine (``\\sqrt2\\sqrt3``, ``\\frac{\\sqrt6}{\\sqrt2}``), a numerator that
  cancels a root in the denominator (``\\frac{2}{\\sqrt2}``), a root that takes something out
  of a root in a sum it multiplies (``\\sqrt2(1+\\sqrt2)``).

**Scientific notation is a form, not a computation**, from the exponent
``SCIENTIFIC_MIN_EXPONENT`` = 4 on: ``10^6`` and ``2.5\\times 10^{4}`` (one power of ten, a
mantissa 1 <= |m| < 10 written first) write their numbers shorter than the digits do. Below it the
power is arithmetic left undone (``10^2`` for 100, ``1.5\\times 10^3`` for 1500), as is any other
product with a power of ten (``10\\times 10^5``, ``10^6\\cdot 1``).

Notation is free: signs, the order of terms, a factor distributed over a sum or not
(``\\frac{1+\\sqrt5}{2}``, ``\\pi(1+\\sqrt2)``, ``(x-1)(x+1)``) unless multiplying out evaluates
something (above), ``x^{-1}`` for ``\\frac1x``, mixed numbers and terminating decimals, and
denominators need not be rationalized:
``\\frac{1}{\\sqrt2}``, ``\\sqrt{1/2}``, ``\\frac{\\sqrt2}{\\sqrt3}``, ``\\frac{1}{1+\\sqrt2}`` are
simplified (rationalizing moves a root, it evaluates nothing). ``math_equiv`` credits an answer
equal to the gold only when, for every kind, it leaves no more work than the gold does: a gold
that is itself unsimplified (``2^{10}``) is matched by its own form and by any form no less
simplified (``1024``, ``4^5``).

Only the worker imports this module: parsing and evaluating run under its time and memory
limits.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass, field
from fractions import Fraction
from functools import lru_cache
from typing import Any

import sympy
from sympy.concrete.expr_with_limits import ExprWithLimits
from sympy.core.function import Application

from envs.verify.math_parse import Unparseable, leaf_tree, written

__all__ = ["KINDS", "SCIENTIFIC_MIN_EXPONENT", "UNSCORED", "Work", "excess", "leaf_work",
           "written"]

KINDS = ("function", "identity", "arithmetic", "fraction", "radical")
#: Not a kind of work: the count of leaves whose tree the walk could not score.
UNSCORED = "unscored"
#: Scientific notation is a form, not a computation, from this exponent on: ``10^6`` and
#: ``2.5\times 10^{4}`` write their numbers shorter than the digits do (``10^4`` has four
#: characters, ``10000`` five). Below it the power is arithmetic left undone: ``10^2`` for 100,
#: ``1.5\times 10^3`` for 1500, ``10^{-1}`` for 0.1.
SCIENTIFIC_MIN_EXPONENT = 4

_PERCENT = sympy.Rational(1, 100)  # latex2sympy's percent marker, UnevaluatedExpr(1/100)
_OPERATORS = (ExprWithLimits, sympy.Limit, sympy.Derivative)
_E_WRITTEN = sympy.exp(1, evaluate=False)
# Matrix and set operations are computations like any other: a sum or product of matrices, a
# power of one, an intersection or difference of sets is the answer left unevaluated.
_MATRIX_OPS = (sympy.MatAdd, sympy.MatPow, sympy.HadamardProduct)
_MATRIX_FUNCS = (sympy.Determinant, sympy.Trace, sympy.Transpose, sympy.Inverse, sympy.Adjoint)
_SET_OPS = (sympy.Intersection, sympy.Complement, sympy.SymmetricDifference, sympy.ProductSet)


@dataclass
class Work:
    """Counts of undone work by kind, with the first subexpression found of each kind."""

    counts: Counter[str] = field(default_factory=Counter)
    examples: dict[str, str] = field(default_factory=dict)

    def add(self, kind: str, where: Any, n: int = 1) -> None:
        self.counts[kind] += n
        self.examples.setdefault(kind, str(where)[:80])

    def merge(self, other: Work) -> None:
        self.counts.update(other.counts)
        for kind, where in other.examples.items():
            self.examples.setdefault(kind, where)


# ---------------------------------------------------------------- parsing as written


# latex2sympy reads a fraction of number literals as one Rational (\frac{6}{8} -> 3/4,
# \frac{1}{2.0} -> 1/2, 12 \div 2 -> 6) before any tree exists, so whether it was written in
# lowest terms is read from the text.
_NUM = r"-?(?:\d+(?:\.\d+)?|\.\d+)"
_NUMBER_FRACTION = re.compile(
    rf"\\frac\s*\{{\s*({_NUM})\s*\}}\s*\{{\s*({_NUM})\s*\}}"
    r"|(?<![\w.}^])(\d+(?:\.\d+)?)\s*(?:/|\\div(?![A-Za-z]))\s*(\d+(?:\.\d+)?)(?![\w.{])")


# latex2sympy also negates a number while parsing (-(-6) is read as 6): two signs in a row,
# whatever brackets sit between them (-(-6), -[-6], -((-6)), +(-q), p + -q), are read here.
_DOUBLE_MINUS = re.compile(r"[-+]\s*(?:(?:\\left)?(?:[(\[{]|\\\{)\s*)*-")
# A factor 1 after a power of ten: 10^6 \cdot 1 (the mantissa of scientific notation comes first).
_TEN_POWER_TIMES_ONE = re.compile(
    r"10\s*\^\s*(?:\{[^{}]*\}|[-+]?\d+)\s*(?:\\cdot|\\times|\*)\s*1(?![\d.])")

# It writes the letter e, e^{1} and \exp(1) alike as exp(1): the exponent 1 is read here.
_E_TO_THE_ONE = re.compile(
    r"(?<![\\A-Za-z])e\s*\^\s*(?:\{\s*1\s*\}|1(?![\d.]))"
    r"|\\exp\s*(?:\(\s*1\s*\)|\{\s*1\s*\}|1(?![\d.]))")

# It writes \frac{x}{2} as x * 2^{-1}, so a number written to the power -1 (2^{-1} for 1/2,
# like 10^{2} for 100) is read here; a letter to the power -1 (x^{-1}) is notation for 1/x.
_NUMBER_RECIPROCAL = re.compile(
    r"(?:(?<![\w.)}\\])\d+(?:\.\d+)?|\(\s*\d+(?:\.\d+)?\s*\)|\{\s*\d+(?:\.\d+)?\s*\})"
    r"\s*\^\s*(?:\{\s*-\s*1\s*\}|-\s*1(?![\d.]))")

# And it writes \frac{1}{x} and 1 * x^{-1} alike as Mul(1, x^-1): a factor 1 beside a
# reciprocal is a numerator only as many times as a numerator 1 was written.
_UNIT_NUMERATOR = re.compile(r"\\frac\s*(?:\{\s*1\s*\}|1(?!\d))|(?<![\w.}])1\s*(?:/|\\div(?![A-Za-z]))")
_NUMERATOR_ONE = "numerator one"  # not a kind: settled against the text in leaf_work

# A repeating decimal (0.\overline{6}) is exact, but it is the fraction's expansion, not the
# fraction: the conversion is left undone.
_REPEATING = re.compile(r"\d*\.\d*\\(?:overline|bar)\s*\{\s*\d+\s*\}")


# And it writes a minus sign as a factor -1 (-x is Mul(-1, x)), so a factor -1 written out
# ((-1)\cdot 50, (80-15x)(-1), -1\cdot x) looks like a sign: it is read here (-1 \div 7 is the
# fraction -1/7, as -1/7 is). A factor 1 of any
# sign is an identity; a power (-1)^n is not a factor, nor is a -1 in an exponent or a fraction.
_MULTIPLY = r"(?:\\cdot|\\times|\*)"
_UNIT_FACTOR = re.compile(
    r"\(\s*[-+]\s*1\s*\)(?!\s*\^)(?=\s*(?:\\cdot|\\times|\*|[(\[\w\\]))"
    rf"|(?<=[)\]\w}}])\s*(?:{_MULTIPLY}\s*)?\(\s*[-+]\s*1\s*\)(?!\s*\^)"
    rf"|{_MULTIPLY}\s*-\s*1(?![\d.])(?!\s*\^)"
    r"|(?<![\w.}{^_])-\s*1(?![\d.])(?!\s*\^)"
    r"(?=\s*(?:\\cdot|\\times|\*|\(|\[|\\(?!frac|div(?![A-Za-z]))[A-Za-z]|[A-Za-z]))")


# latex2sympy evaluates a determinant while parsing (\det\begin{pmatrix}10\end{pmatrix} and a
# vmatrix are read as 10), and a matrix's power (I^2, I^{-1} are read as the matrix they make):
# the determinant, transpose or power left to take is read here.
_DETERMINANT = re.compile(r"\\det(?![A-Za-z])|\\begin\s*\{\s*[vV]matrix\s*\}"
                          r"|\\end\s*\{\s*[pbBvV]?matrix\s*\}\s*(?:\\right\s*)?[)\]]?\s*\^")
# A bracket around one number or letter groups nothing: in an answer a square bracket opens a
# list or an interval, so [-1][50] and [15][x] are lists side by side, not the products
# -50 and 15x that latex2sympy reads (a root's index, \sqrt[3]{..}, is no bracket).
_ATOM_IN_SQUARE_BRACKETS = re.compile(r"(?<!sqrt)(?<!sqrt )\[\s*[-+]?\s*(?:\d+(?:\.\d+)?|[A-Za-z])\s*\]")


def _text_work(leaf: str, work: Work) -> None:
    """The work the parser hides: unreduced or compound fractions of numbers, double
    negatives, e^{1}, a number to the power -1, repeating decimals."""
    for m in _NUMBER_FRACTION.finditer(leaf):
        num, den = (g for g in m.groups() if g is not None)
        if Fraction(den) in (1, -1):
            work.add("identity", m.group(0))
        elif "." in num + den:
            work.add("fraction", m.group(0))  # \frac{1}{2.0}: a fraction inside a fraction
        elif int(den) != 0 and math.gcd(int(num), int(den)) > 1:
            work.add("fraction", m.group(0))
    for kind, pattern in (("identity", _UNIT_FACTOR), ("identity", _TEN_POWER_TIMES_ONE),
                          ("arithmetic", _DOUBLE_MINUS),
                          ("identity", _E_TO_THE_ONE),
                          ("arithmetic", _NUMBER_RECIPROCAL), ("fraction", _REPEATING),
                          ("function", _DETERMINANT),
                          ("arithmetic", _ATOM_IN_SQUARE_BRACKETS)):
        for m in pattern.finditer(leaf):
            work.add(kind, m.group(0))


# ---------------------------------------------------------------- the walk


def _is_number(e: Any) -> bool:
    return bool(getattr(e, "is_Rational", False) or getattr(e, "is_Float", False))


def _evaluated(func: Any, args: list[Any]) -> Any:
    try:
        return func(*args)
    except Exception:  # a value sympy cannot build: keep it as written
        return func(*args, evaluate=False)


def _visit(node: Any, work: Work) -> Any:
    """Score ``node`` (as written) into ``work``; return its value for the parent's rules:
    evaluated, except reciprocals and roots that are notation (see ``_pow``)."""
    if isinstance(node, sympy.MatrixBase):
        for entry in node:
            _visit(entry, work)
        return node
    if not isinstance(node, sympy.Basic) or node.is_Atom or not node.args:
        return node
    if isinstance(node, _MATRIX_FUNCS):
        work.add("function", node)
        return node
    if isinstance(node, _MATRIX_OPS + _SET_OPS) or (isinstance(node, sympy.MatMul) and (
            sum(a.is_Matrix for a in node.args) > 1
            or any(a.is_Integer and abs(a) != 1 for a in node.args))):
        # a fraction times one matrix is a factored form (\frac{1}{5}\begin{pmatrix}..); an
        # integer times one is a product left to multiply out
        work.add("arithmetic", node)
        return node
    if isinstance(node, sympy.UnevaluatedExpr):
        # latex2sympy computes gcd/lcm while parsing and wraps the result
        if node.args[0] != _PERCENT:
            work.add("function", node)
        return node.args[0]
    if isinstance(node, _OPERATORS):
        # a sum, integral or limit counts once; its body is what it computes (and latex2sympy
        # leaves construction debris there: \int 1\,dx has the body 1*1)
        work.add("function", node)
        return node
    if node == _E_WRITTEN:
        return sympy.E  # the letter e, which latex2sympy writes exp(1) when nothing evaluates
    if isinstance(node, sympy.exp):  # e^x is a power of e, not a function application
        node = sympy.Pow(sympy.E, node.args[0], evaluate=False)
    if isinstance(node, Application):  # sin(x), Abs, Max, ... (not Add/Mul/Pow)
        base_e = not (isinstance(node, sympy.log) and len(node.args) == 2 and node.args[1] != sympy.E)
        work.add("function", node, 1 if base_e else 2)
        kids = [_visit(arg, work) for arg in node.args]
        if _rewrites(node.func, kids):
            work.add("function", node)
        return node
    kids = [_visit(arg, work) for arg in node.args]
    if node.is_Add:
        _add(node, kids, work)
        return _evaluated(sympy.Add, kids)
    if node.is_Mul:
        _mul(node, kids, work)
        return _evaluated(sympy.Mul, kids)
    if node.is_Pow:
        if kids[1].is_Pow:  # \sqrt[3]{x} is x^(3^-1) as written: the exponent's value counts
            kids[1] = _evaluated(sympy.Pow, list(kids[1].args))
        if _pow(kids[0], kids[1], work, node):
            return sympy.Pow(kids[0], kids[1], evaluate=False)
        return _evaluated(sympy.Pow, kids)
    return node  # relations, sets, tuples: their parts were scored


def _rewrites(func: Any, args: list[Any]) -> bool:
    """sympy's own evaluation turns the application into something else: a value
    (``\\sin\\frac{\\pi}{6}``), another function (``\\cos(\\frac{\\pi}{2} - 1)`` is
    ``\\sin 1``), a simpler argument (``\\ln\\frac12`` is ``-\\ln 2``, ``\\sin(x + 2\\pi)``).
    An application counts once more for that, so trading one function for another with the
    evaluation left inside costs the trade. A sign moved in or out (``\\sin(1 - x)``,
    ``|1 - x|``) is notation, and ``\\log_b a`` is ``\\ln a / \\ln b``."""
    value = _evaluated(func, args)
    if func is sympy.log and len(args) == 2:  # ln a / ln b: either log, or the quotient
        quotient = _evaluated(sympy.log, args[:1]) / _evaluated(sympy.log, args[1:])
        return value != quotient or any(_rewrites(sympy.log, [a]) for a in args if a != sympy.E)
    if value.could_extract_minus_sign():
        value = -value
    if value.func != func or len(value.args) != len(args):
        return True
    signed = {*args, *(-a for a in args)}
    return any(v not in signed for v in value.args)


def _add(node: Any, kids: list[Any], work: Work) -> None:
    zeros = sum(1 for a in node.args if a == 0 and a.is_Integer)
    if zeros:
        work.add("identity", node, zeros)
    if sum(1 for k in kids if k == 0) > zeros:
        work.add("arithmetic", node)  # a term that vanishes: + 0\pi, + (x - x)
    terms = [t for k in kids for t in sympy.Add.make_args(k) if t != 0]
    if sum(1 for t in terms if _is_number(t)) >= 2:
        work.add("arithmetic", node)
        return
    rests = [t.as_coeff_Mul()[1] for t in terms if not _is_number(t)]
    if len(rests) != len(set(rests)):
        work.add("arithmetic", node)  # like terms: x + x, 2\sqrt2 - \sqrt2
    elif _collapses(terms):
        work.add("arithmetic", node)  # (x+1)^2 - x^2 - 1: fewer terms once multiplied out


MAX_EXPAND_DEGREE = 12  # a power of a sum beyond this is not multiplied out to check


def _collapses(terms: list[Any]) -> bool:
    """Multiplied out (logarithms of products and powers too), the sum has fewer terms than
    written (``(x+1)^2 - x^2 - 1``, ``\\ln(2e) - 1``), or terms with a variable cancel or merge
    across it (``(a+b)^2 - 2ab``). Numbers may merge: the vertex form ``(x+1)^2 - 1`` is a form
    of its own."""
    if not any(t.has(sympy.Add, sympy.log) for t in terms):
        return False
    for p in sympy.Add(*terms).atoms(sympy.Pow):
        if p.exp.is_Integer and abs(p.exp) > MAX_EXPAND_DEGREE:
            return False
    try:
        whole = sympy.Add.make_args(_multiplied_out(sympy.Add(*terms)))
        if len(whole) < len(terms):
            return True
        apart = sum(_with_variables(sympy.Add.make_args(_multiplied_out(t))) for t in terms)
        return _with_variables(whole) < apart
    except (TypeError, ValueError, AttributeError):
        return False


def _multiplied_out(e: Any) -> Any:
    return sympy.expand(e, log=True, force=True)  # force: ln(xy) = ln x + ln y, as written


def _with_variables(terms: tuple[Any, ...]) -> int:
    return sum(1 for t in terms if t.free_symbols)


def _factors(e: Any, side: int, out: list[tuple[Any, Any]]) -> None:
    """``e`` as (base, exponent) factors, a written reciprocal of a product spread over its
    factors and a rational split into numerator and denominator."""
    if e.is_Mul:
        for a in e.args:
            _factors(a, side, out)
    elif e.is_Pow and e.exp == -1 and e.base.is_Mul:
        _factors(e.base, -side, out)
    elif e.is_Rational:
        out.append((sympy.Integer(e.p), sympy.Integer(side)))
        if e.q != 1:
            out.append((sympy.Integer(e.q), sympy.Integer(-side)))
    elif e.is_Pow and e.exp.is_Rational:
        base, exp = e.base, e.exp
        if base.is_Pow and base.exp.is_Rational:
            base, exp = base.base, base.exp * exp
        if base.is_Rational and not base.is_Integer:  # \sqrt{21/2} is \sqrt{21}/\sqrt{2}
            out.append((sympy.Integer(base.p), exp * side))
            out.append((sympy.Integer(base.q), -exp * side))
        else:
            out.append((base, exp * side))
    else:
        out.append((e, sympy.Integer(side)))


@dataclass
class _Tally:
    """A product's factors as the rules read them: integers and roots of integers by side
    (numerator, denominator), signs, decimals, and other bases with their exponents."""

    nums: list[int] = field(default_factory=list)
    dens: list[int] = field(default_factory=list)
    negatives: int = 0
    floats: int = 0
    numbers: int = 0
    radicals: dict[int, tuple[list[int], list[int]]] = field(default_factory=dict)
    others: dict[Any, list[Any]] = field(default_factory=dict)
    constant_sums: Counter[bool] = field(default_factory=Counter)


def _tally(factors: list[tuple[Any, Any]]) -> _Tally:
    t = _Tally()
    for base, exp in factors:
        if base.is_Integer and exp.is_Integer:
            if base < 0:
                t.negatives += 1
            value = abs(int(base))  # its primes are the power's: enough for a common factor
            if value != 1:
                (t.nums if exp > 0 else t.dens).append(value)
                t.numbers += 1
        elif base.is_Integer:  # a root of an integer
            num_rad, den_rad = t.radicals.setdefault(int(exp.q), ([], []))
            (num_rad if exp > 0 else den_rad).append(abs(int(base)))
        elif base.is_Float:
            t.floats += 1
            t.numbers += 1
        else:
            t.others.setdefault(base, []).append(exp)
            if base.is_Add and not base.free_symbols:
                t.constant_sums[bool(exp > 0)] += 1
    return t


def power_of_ten(e: Any) -> bool:
    """``e`` is written ``10^k`` with an integer ``|k| >= SCIENTIFIC_MIN_EXPONENT``."""
    if not getattr(e, "is_Pow", False) or e.base != 10:
        return False
    k = e.exp
    return bool(k.is_number and k.is_integer and abs(int(k)) >= SCIENTIFIC_MIN_EXPONENT)


def _scientific(node: Any) -> bool:
    """``node`` is ``m \\times 10^k`` as written: one power of ten (``power_of_ten``) and a
    mantissa 1 <= |m| < 10 with a finite decimal form, a minus sign aside."""
    args = [a for a in node.args if a != -1]
    powers = [a for a in args if power_of_ten(a)]
    rest = [a for a in args if not power_of_ten(a)]
    if len(powers) != 1 or len(rest) != 1 or not rest[0].is_Rational:
        return False
    m = abs(rest[0])
    q = int(m.q)
    for p in (2, 5):
        while q % p == 0:
            q //= p
    return q == 1 and 1 <= m < 10


def _mul(node: Any, kids: list[Any], work: Work) -> None:
    if _scientific(node):
        return  # 2.5 \times 10^{6}: a way to write a number (SCIENTIFIC_MIN_EXPONENT)
    factors: list[tuple[Any, Any]] = []
    for k in kids:
        _factors(k, 1, factors)
    ones = sum(1 for a in node.args if a == 1 and a.is_Integer)
    if ones:
        # \frac{1}{\sqrt2} is written 1 * (\sqrt2)^-1: a 1 beside a reciprocal may be a
        # numerator; leaf_work counts the numerators 1 actually written
        reciprocal = any(a.is_Pow and a.exp.is_negative for a in node.args)
        work.add(_NUMERATOR_ONE if reciprocal else "identity", node, ones)
    if any(k == 0 for k in kids):
        work.add("arithmetic", node)  # a product that is 0
    t = _tally(factors)
    if len(t.nums) >= 2 or len(t.dens) >= 2 or t.negatives >= 2 or (t.floats and t.numbers >= 2):
        work.add("arithmetic", node)
    elif math.gcd(math.prod(t.nums), math.prod(t.dens)) > 1:
        work.add("fraction", node)
    if any(n >= 2 for n in t.constant_sums.values()):
        work.add("arithmetic", node)  # (\sqrt3 + 1)(\sqrt3 - 1): multiply out
    if any(_repeated(exps) for exps in t.others.values()):
        work.add("arithmetic", node)  # x \cdot x, \frac{x}{x}
    if _radicals_combine(t.radicals, math.prod(t.nums)):
        work.add("radical", node)
    if any(exp < 0 and base.free_symbols for base, exp in factors) and _cancels(kids):
        work.add("fraction", node)
    for kind in _distributed(factors):
        work.add(kind, node)


def _distributed(factors: list[tuple[Any, Any]]) -> set[str]:
    """Work hidden behind the brackets of a sum in a product, found by multiplying it out term
    by term: a root meeting a root of its index that takes something out (``\\sqrt2(1+\\sqrt2)``
    is ``\\sqrt2 + 2``: ``radical``), or a factor common to every term and the denominator
    (``\\frac{2+2\\sqrt2}{2}``, ``\\frac{2+\\sqrt2}{\\sqrt2}``: ``fraction``). Nothing else:
    a factor left undistributed is notation (``2(1+\\sqrt2)``, ``\\pi(1+\\sqrt2)``,
    ``\\sqrt2(1+\\sqrt3)``, ``\\frac{2+\\sqrt2}{2}``, ``\\frac{a+b}{ab}``)."""
    kinds: set[str] = set()
    for i, (base, exp) in enumerate(factors):
        if not (base.is_Add and exp == 1):
            continue
        rest = _tally(factors[:i] + factors[i + 1:])
        terms = []
        for term in base.args:
            split: list[tuple[Any, Any]] = []
            _factors(term, 1, split)
            terms.append(_tally(split))
        if any(_takes_out(term, rest) for term in terms):
            kinds.add("radical")
        if _common_factor(terms, rest):
            kinds.add("fraction")
    return kinds


def _takes_out(term: _Tally, rest: _Tally) -> bool:
    """A root of the term times the product's roots of that index leaves a perfect power."""
    for q, (num_rad, _) in term.radicals.items():
        outer = rest.radicals.get(q, ([], []))[0]
        if num_rad and outer and _extracts(math.prod(num_rad) * math.prod(outer), q):
            return True
    return False


def _common_factor(terms: list[_Tally], rest: _Tally) -> bool:
    """Every term of the numerator and the denominator share one factor: an integer, a root's
    prime (``c\\sqrt{s}`` has ``\\sqrt p`` for each prime ``p`` of ``c`` or ``s``), a base."""
    coeffs = [math.prod(t.nums) for t in terms]
    if math.gcd(math.gcd(*coeffs), math.prod(rest.dens)) > 1:
        return True
    for q, (_, den_rad) in rest.radicals.items():
        if den_rad:
            each = [c * math.prod(t.radicals.get(q, ([], []))[0])
                    for c, t in zip(coeffs, terms, strict=True)]
            if math.gcd(math.gcd(*each), math.prod(den_rad)) > 1:
                return True
    shared = set.intersection(*({b for b, exps in t.others.items() if any(e > 0 for e in exps)}
                                for t in terms))
    return any(any(e < 0 for e in rest.others.get(b, [])) for b in shared)


def _repeated(exps: list[Any]) -> bool:
    """Two factors of one base that merge: both integer powers or both roots (``x\\sqrt x``
    is a form of its own)."""
    whole = [e for e in exps if e.is_Integer]
    return len(whole) >= 2 or len(exps) - len(whole) >= 2


def _radicals_combine(radicals: dict[int, tuple[list[int], list[int]]], numerator: int) -> bool:
    for num_rad, den_rad in radicals.values():
        if len(num_rad) >= 2 or len(den_rad) >= 2:
            return True  # \sqrt2\sqrt3 = \sqrt6
        if math.gcd(math.prod(num_rad), math.prod(den_rad)) > 1:
            return True  # \frac{\sqrt6}{\sqrt2} = \sqrt3
        if math.gcd(numerator, math.prod(den_rad)) > 1:
            return True  # \frac{2}{\sqrt2} = \sqrt2
    return False


def _cancels(kids: list[Any]) -> bool:
    """A polynomial fraction whose numerator and denominator share a factor."""
    try:
        num, den = sympy.fraction(sympy.Mul(*kids))
        if not (num.is_polynomial() and den.is_polynomial()):
            return False
        return bool(sympy.gcd(num, den).free_symbols)
    except Exception:
        return False


def _pow(base: Any, exp: Any, work: Work, node: Any) -> bool:
    """Score a power. True when the parent must see it as written: a reciprocal, or a root with
    nothing to take out (sympy's value would rationalize ``1/\\sqrt2`` into ``\\sqrt2/2``)."""
    if exp in (0, 1) or base == 1:
        work.add("identity", node)
        return False
    if exp == -1:
        if (base.is_Rational and not base.is_Integer) or base.is_Float:
            work.add("fraction", node)  # 1/(1/2)
        elif base.is_Pow and base.exp.is_negative:
            work.add("arithmetic", node)
        elif base.is_Mul and not base.as_coeff_Mul()[0].is_Integer:
            work.add("fraction", node)  # 1/(x/2)
        return True
    if not exp.is_Rational:
        if not (base.free_symbols or exp.free_symbols) and _evaluated(sympy.Pow, [base, exp]).is_Rational:
            work.add("arithmetic", node)  # e^{i\pi}: a power whose value is a plain number
        return False
    if base.is_Rational:
        if exp.is_Integer and power_of_ten(sympy.Pow(base, exp, evaluate=False)):
            return False  # 10^6: scientific notation (SCIENTIFIC_MIN_EXPONENT)
        if exp.is_Integer:
            work.add("arithmetic", node)  # 10^2, (1/2)^3
            return False
        if abs(exp.p) >= exp.q or _extracts(base.p, exp.q) or _extracts(base.q, exp.q):
            work.add("radical", node)  # 2^{3/2}, \sqrt{242}, \sqrt{1/4}
            return False
        return True
    if base.is_Pow and base.exp.is_Rational:
        work.add("arithmetic", node)  # (x^2)^3, (\sqrt2)^2
    elif base.is_Mul:
        coeff = base.as_coeff_Mul()[0]
        constant = [f for f in base.args if not f.free_symbols]
        if exp.is_Integer and constant:
            work.add("arithmetic", node)  # (2x)^2
        elif not exp.is_Integer and coeff.is_Rational and (
                _extracts(coeff.p, exp.q) or _extracts(coeff.q, exp.q)):
            work.add("radical", node)  # \sqrt{4x}
    elif base.is_Add and not base.free_symbols and exp.is_Integer:
        work.add("arithmetic", node)  # (1 + \sqrt2)^2
    return False


def _extracts(n: int, q: int) -> bool:
    """Something comes out of the q-th root of |n|: a number (``\\sqrt8 = 2\\sqrt2``) or a smaller
    index (``\\sqrt[4]{4} = \\sqrt2``). sympy also writes ``\\sqrt[3]{4}`` as ``2^{2/3}``, which
    takes nothing out."""
    n = abs(int(n))
    if n in (0, 1):
        return False
    coeff, rest = sympy.Pow(n, sympy.Rational(1, q)).as_coeff_Mul()
    if coeff != 1:
        return True
    return all(f.exp.q < q for f in sympy.Mul.make_args(rest) if f.is_Pow)


# ---------------------------------------------------------------- entry points


@lru_cache(maxsize=4096)
def leaf_work(leaf: str) -> Work:
    """Work left in one answer leaf, read from the one tree its value came from
    (``math_parse.leaf_tree``) and from the text where the parser loses what was written.
    Cached: do not mutate the result."""
    work = Work()
    _text_work(leaf, work)
    try:
        tree = leaf_tree(leaf)
    except Unparseable:
        return work  # no tree, so no value either: the answer was refused before this
    # A sympy object the rules do not expect stops the walk: the form cannot be scored, and an
    # answer whose form cannot be scored earns nothing (math_equiv; no gold or honest form of the
    # corpora stops it).
    try:
        _visit(tree, work)
    except (TypeError, ValueError, AttributeError, RecursionError):
        work.counts[UNSCORED] += 1
    work.examples.pop(_NUMERATOR_ONE, None)
    surplus = work.counts.pop(_NUMERATOR_ONE, 0) - len(_UNIT_NUMERATOR.findall(leaf))
    if surplus > 0:
        work.add("identity", leaf, surplus)  # x^{-1} \cdot 1: a factor 1, not a numerator
    return work


def excess(pred: Work, gold: Work) -> dict[str, str]:
    """Kinds of work ``pred`` leaves beyond ``gold``'s, each with an example."""
    return {kind: pred.examples.get(kind, "")
            for kind in KINDS if pred.counts[kind] > gold.counts[kind]}
