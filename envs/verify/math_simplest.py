"""Simplest form: the evaluation an answer leaves undone (worker side; imports sympy).

The checker credits any expression with the gold's value, so without this rule ``\\log_2 64``
would answer "Evaluate $\\log_2 64$" and ``\\sqrt{242}`` a gold of ``11\\sqrt{2}``: the question's
computation, left undone in another notation. Each answer leaf is parsed *as written* (sympy's
evaluation off) and its tree is scored, kind by kind, for the work left in it:

- ``function``: an application of a function or operator (log, trig and inverse trig, abs,
  floor, factorial, binomial, gcd, max, sum, product, integral, limit, derivative, ...).
  Counted, not judged: an answer equal to the gold that applies more functions than the gold
  has evaluations that the gold's form shows are unnecessary. A logarithm to a base counts two
  (``\\log_b a`` is ``\\ln a / \\ln b``), so a change of base costs nothing; ``e^x`` is a power,
  not an application; an operator counts once and its body is not scored (it is what the
  operator computes);
- ``identity``: a term ``0``, a factor ``1`` (not a fraction's numerator), a denominator ``1``,
  an exponent ``0`` or ``1``, a power of ``1``;
- ``arithmetic``: numbers left to combine: two number terms in one sum, like terms
  (``x + x``), a term or product that is 0, two integers on one side of a product
  (``2 \\cdot 3``, ``\\frac12\\cdot\\frac13``), two minus signs in a row, an integer power of a
  number (``10^2``), a power of a power, a repeated factor (``x \\cdot x``, ``\\frac{x}{x}``), an
  integer power of a product with a number in it (``(2x)^2``), a product or power of sums of
  numbers (``(\\sqrt3+1)(\\sqrt3-1)``), a power of numbers whose value is rational (``e^{i\\pi}``);
- ``fraction``: a numerator and denominator with a common factor (``\\frac{6}{8}``,
  ``\\frac{2\\sqrt2}{4}``, ``\\frac{x^2-1}{x+1}``), a fraction in a denominator;
- ``radical``: a root with a perfect power in it (``\\sqrt{242}``, ``\\sqrt[3]{27}``,
  ``\\sqrt{-4}``, ``\\sqrt{1/4}``), a fractional exponent of 1 or more (``2^{3/2}``), two roots of
  one index that combine (``\\sqrt2\\sqrt3``, ``\\frac{\\sqrt6}{\\sqrt2}``), a numerator that
  cancels a root in the denominator (``\\frac{2}{\\sqrt2}``).

Notation is free: signs, the order of terms, a number distributed over a sum or not
(``\\frac{1+\\sqrt5}{2}``), mixed numbers and decimals, and denominators need not be rationalized:
``\\frac{1}{\\sqrt2}``, ``\\sqrt{1/2}``, ``\\frac{\\sqrt2}{\\sqrt3}``, ``\\frac{1}{1+\\sqrt2}`` are
simplified (rationalizing moves a root, it evaluates nothing). ``math_equiv`` credits an answer
equal to the gold only when, for every kind, it leaves no more work than the gold does: a gold
that is itself unsimplified (``2^{10}``) is matched by its own form and by any form no less
simplified (``1024``, ``4^5``).

Only the worker imports this module: parsing and evaluating run under its time and memory
limits.
"""

from __future__ import annotations

import contextlib
import math
import re
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import sympy
from latex2sympy2_extended import latex2sympy
from sympy.concrete.expr_with_limits import ExprWithLimits
from sympy.core.function import Application
from sympy.core.parameters import evaluate

from envs.verify.math_parse import LATEX_NORMALIZATION, exact_decimals

KINDS = ("function", "identity", "arithmetic", "fraction", "radical")

_PERCENT = sympy.Rational(1, 100)  # latex2sympy's percent marker, UnevaluatedExpr(1/100)
_OPERATORS = (ExprWithLimits, sympy.Limit, sympy.Derivative)
_E_WRITTEN = sympy.exp(1, evaluate=False)


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


# latex2sympy reads an integer fraction as a reduced Rational (\frac{6}{8} -> 3/4) before any
# tree exists, so whether it was written in lowest terms is read from the text.
_INT_FRACTION = re.compile(
    r"\\frac\s*\{\s*(-?\d+)\s*\}\s*\{\s*(-?\d+)\s*\}|(?<![\w.}^])(\d+)\s*/\s*(\d+)(?![\w.{])")


# latex2sympy also negates a number while parsing (-(-6) is read as 6).
_DOUBLE_MINUS = re.compile(r"-\s*(?:\\left)?[({]?\s*-")


def _text_work(leaf: str, work: Work) -> None:
    """The work the parser hides: unreduced integer fractions and double negatives."""
    for m in _INT_FRACTION.finditer(leaf):
        num, den = (int(g) for g in m.groups() if g is not None)
        if abs(den) == 1:
            work.add("identity", m.group(0))
        elif den != 0 and math.gcd(num, den) > 1:
            work.add("fraction", m.group(0))
    for m in _DOUBLE_MINUS.finditer(leaf):
        work.add("arithmetic", m.group(0))


def written(src: str) -> Any:
    """``src`` parsed with sympy's automatic evaluation off, so ``e^{\\ln 5}`` stays
    ``exp(log(5))`` and ``\\binom{5}{2}`` a binomial. A few constructs need evaluation to parse
    (latex2sympy builds a mixed number ``2\\frac12`` from numbers): they are read the usual way,
    which latex2sympy also keeps unevaluated for everything but ``exp``, binomials and those."""
    try:
        with evaluate(False):
            return latex2sympy(src, normalization_config=LATEX_NORMALIZATION)
    except Exception:
        return latex2sympy(src, normalization_config=LATEX_NORMALIZATION)


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
        for arg in node.args:
            _visit(arg, work)
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
    """The sum has fewer terms once its products and powers of sums are multiplied out (the
    vertex form ``(x+1)^2 - 1`` keeps its two, so it is not unsimplified)."""
    if not any(t.has(sympy.Add) for t in terms):
        return False
    for p in sympy.Add(*terms).atoms(sympy.Pow):
        if p.exp.is_Integer and abs(p.exp) > MAX_EXPAND_DEGREE:
            return False
    try:
        return len(sympy.Add.make_args(sympy.expand(sympy.Add(*terms)))) < len(terms)
    except (TypeError, ValueError, AttributeError):
        return False


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


def _mul(node: Any, kids: list[Any], work: Work) -> None:
    factors: list[tuple[Any, Any]] = []
    for k in kids:
        _factors(k, 1, factors)
    # \frac{1}{\sqrt2} is written 1 * (\sqrt2)^-1: a 1 beside a written reciprocal is a numerator
    reciprocal = any(a.is_Pow and a.exp.is_negative for a in node.args)
    ones = sum(1 for a in node.args if a == 1 and a.is_Integer)
    if ones and not reciprocal:
        work.add("identity", node, ones)
    if any(k == 0 for k in kids):
        work.add("arithmetic", node)  # a product that is 0
    nums: list[int] = []
    dens: list[int] = []
    negatives = floats = numbers = 0
    radicals: dict[int, tuple[list[int], list[int]]] = {}
    others: dict[Any, list[Any]] = {}
    constant_sums: Counter[bool] = Counter()
    for base, exp in factors:
        if base.is_Integer and exp.is_Integer:
            if base < 0:
                negatives += 1
            value = abs(int(base))  # its primes are the power's: enough for a common factor
            if value != 1:
                (nums if exp > 0 else dens).append(value)
                numbers += 1
        elif base.is_Integer:  # a root of an integer
            num_rad, den_rad = radicals.setdefault(int(exp.q), ([], []))
            (num_rad if exp > 0 else den_rad).append(abs(int(base)))
        elif base.is_Float:
            floats += 1
            numbers += 1
        else:
            others.setdefault(base, []).append(exp)
            if base.is_Add and not base.free_symbols:
                constant_sums[bool(exp > 0)] += 1
    if len(nums) >= 2 or len(dens) >= 2 or negatives >= 2 or (floats and numbers >= 2):
        work.add("arithmetic", node)
    elif math.gcd(math.prod(nums), math.prod(dens)) > 1:
        work.add("fraction", node)
    if any(n >= 2 for n in constant_sums.values()):
        work.add("arithmetic", node)  # (\sqrt3 + 1)(\sqrt3 - 1): multiply out
    if any(_repeated(exps) for exps in others.values()):
        work.add("arithmetic", node)  # x \cdot x, \frac{x}{x}
    if _radicals_combine(radicals, math.prod(nums)):
        work.add("radical", node)
    if any(exp < 0 and base.free_symbols for base, exp in factors) and _cancels(kids):
        work.add("fraction", node)


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
    """sympy takes something out of the q-th root of |n| (a perfect-power factor)."""
    n = abs(int(n))
    if n in (0, 1):
        return False
    root = sympy.Pow(n, sympy.Rational(1, q))
    return not (root.is_Pow and root.base == n)


# ---------------------------------------------------------------- entry points


@lru_cache(maxsize=4096)
def leaf_work(leaf: str) -> Work:
    """Work left in one answer leaf (a string ``math_parse.to_sympy`` parsed). Cached: do not
    mutate the result."""
    work = Work()
    _text_work(leaf, work)
    try:
        tree = written(exact_decimals(leaf))
    except Exception:
        return work  # the value parsed another way (math_simple); nothing more to measure
    # A sympy object the rules do not expect stops the walk: what was found so far stands.
    with contextlib.suppress(TypeError, ValueError, AttributeError, RecursionError):
        _visit(tree, work)
    return work


def excess(pred: Work, gold: Work) -> dict[str, str]:
    """Kinds of work ``pred`` leaves beyond ``gold``'s, each with an example."""
    return {kind: pred.examples.get(kind, "")
            for kind in KINDS if pred.counts[kind] > gold.counts[kind]}
