"""Equivalence of parsed answers (worker side; imports sympy).

Rules, in short:
- numbers compare exactly (rationals): 0.33 is not 1/3. Only under the opt-in
  ``decimal_rounding`` does a decimal match a value with no finite decimal form (1/3,
  sqrt(17)) that it is correctly rounded or truncated from, given enough significant
  digits (``math_normalize.decimal_matches``: 2 for a rational, 4 otherwise);
- a gold ``X%`` matches ``X%``, ``X`` and ``X/100``; an answer ``X%`` matches a gold ``X`` only
  (its percent sign is a unit, never also a factor 1/100); two bare numbers never compare as
  percent;
- expressions: exact difference, then ``simplify``, then high-precision evaluation at
  random points;
- equations match when ``lhs - rhs`` of one is a non-zero constant multiple of the
  other's; inequalities by their solution sets (one variable) or the same canonical form;
  a gold inequality also matches an interval (``x >= 2`` vs ``[2, oo)``), not vice versa;
- ``x = 5``/``x \\in S`` (assignment to a name) matches its value;
- bare lists and sets are unordered, tuples/intervals/ratios/sequences with ``\\ldots``
  are ordered, interval ends must agree, matrices compare entry-wise, and a one-row or
  one-column matrix matches the tuple of its entries (a vector written ``(6, 3, 0)``);
- words compare as text (case/space/paren-insensitive);
- an answer equal to the gold that leaves more work undone than the gold, of any kind, is
  ``not_simplified`` (``math_simplest``): ``\\log_2 64`` for 6, ``\\sqrt{242}`` for
  ``11\\sqrt{2}``.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from contextvars import ContextVar
from fractions import Fraction
from typing import Any

import sympy

from envs.verify.math_names import name_like
from envs.verify.math_normalize import decimal_matches
from envs.verify.math_parse import (
    Assign,
    Dots,
    ListN,
    Mat,
    Ratio,
    Rel,
    Seq,
    SetN,
    Text,
    UnionN,
    Unparseable,
    Val,
    parse_group,
    to_sympy,
)
from envs.verify.math_simplest import UNSCORED, Work, excess, leaf_work

_rng = random.Random(1234)


# ---------------------------------------------------------------- expressions


_OPAQUE = (
    sympy.core.function.AppliedUndef,
    sympy.Sum,
    sympy.Product,
    sympy.Integral,
    sympy.Limit,
    sympy.Derivative,
)


def _opaque(e: Any) -> bool:
    """Expressions random evaluation cannot decide (undefined functions, Sums...)."""
    return any(e.has(t) for t in _OPAQUE)


def _imaginary_unit(a: Any, b: Any) -> tuple[Any, Any]:
    """A letter ``i`` is the imaginary unit when the other side is complex: ``\\sqrt{-1}``
    parses to sympy's ``I``, while ``i`` written as a letter parses to a symbol."""
    try:
        a_complex, b_complex = a.has(sympy.I), b.has(sympy.I)
    except (AttributeError, TypeError):
        return a, b
    if a_complex == b_complex:
        return a, b
    letter = a if b_complex else b
    unit = next((s for s in letter.free_symbols if getattr(s, "name", "") == "i"), None)
    if unit is None:
        return a, b
    letter = letter.subs(unit, sympy.I)
    return (letter, b) if b_complex else (a, letter)


def expr_equal(a: Any, b: Any) -> bool:
    if a == b:
        return True
    if isinstance(a, sympy.Set) or isinstance(b, sympy.Set):
        return isinstance(a, sympy.Set) and isinstance(b, sympy.Set) and sets_equal(a, b)
    a, b = _imaginary_unit(a, b)
    try:
        d = a - b
    except Exception:
        return False
    if d == 0:
        return True
    if d.is_Number:
        return False
    free = d.free_symbols
    try:
        if not free:
            if a.is_Rational and b.is_Rational:
                return False
            d = d.doit()  # unevaluated factorials/powers -> exact numbers
            if d.is_Number:
                return d == 0
            v = sympy.N(d, 60)
            if v.is_Number:
                scale = max(abs(sympy.N(a, 20)), abs(sympy.N(b, 20)))
                if v == 0 or abs(v) < sympy.Float("1e-45") * scale:
                    return True
                if v.is_finite:
                    return False  # clearly non-zero at 60 digits
            return sympy.simplify(d) == 0
        if _opaque(d):
            return sympy.expand(d) == 0
        numeric = _numeric_zero(d, free)
        if numeric is not None:
            return numeric
        return sympy.simplify(d) == 0
    except (TypeError, ValueError, AttributeError, ZeroDivisionError, RecursionError):
        return False


def _points(free: set[Any], n: int) -> list[dict[Any, Any]]:
    syms = sorted(free, key=str)
    return [{s: sympy.Rational(_rng.randint(11, 299), 97) for s in syms} for _ in range(n)]


def _numeric_zero(d: Any, free: set[Any]) -> bool | None:
    """Decide ``d == 0`` by evaluation at random points; None when it cannot."""
    zeros = 0
    for point in _points(free, 6):
        try:
            v = sympy.N(d.subs(point), 40)
        except Exception:
            return None
        if not v.is_Number or not v.is_finite:
            if v.free_symbols:
                return None
            continue
        if abs(v) > sympy.Float("1e-25"):
            return False
        zeros += 1
        if zeros >= 3:
            return True
    return None


#: The opt-in rounding rule (``verify(..., decimal_rounding=True)``); set by ``check``.
_ROUNDING: ContextVar[bool] = ContextVar("decimal_rounding", default=False)


def _decimal_close(dec: str, other: Any) -> bool:
    """``dec`` (a literal like "0.333") stands for the exact value ``other``: only under the
    opt-in rounding rule, since by default a decimal must equal the value exactly."""
    if "." not in dec or not _ROUNDING.get():
        return False
    try:
        if other.free_symbols or not other.is_number:
            return False
        exact = other
        if not isinstance(exact, sympy.Rational) and other.is_rational:
            # an unevaluated rational expression (5!/7); evaluated exactly, because
            # nsimplify would round it to a nearby simpler fraction
            exact = sympy.expand(other.doit())
        if isinstance(exact, sympy.Rational):
            return decimal_matches(dec, Fraction(int(exact.p), int(exact.q)), rational=True)
        # 30 guard digits beyond the written ones: the approximation cannot straddle a
        # rounding boundary of ``dec`` (irrational values have no ties).
        v = sympy.N(other, len(dec) + 30)
        if not v.is_real or not v.is_finite or not v.is_Float:
            return False
        approx = sympy.Rational(v)
        return decimal_matches(dec, Fraction(int(approx.p), int(approx.q)), rational=False)
    except (TypeError, ValueError, AttributeError, ZeroDivisionError):
        return False


def val_equal(g: Val, p: Val) -> bool:
    """A gold written ``28\\%`` is answered by ``28\\%``, ``28`` or ``0.28``. An answer's
    percent sign has one reading: it names the unit of the number before it, so ``18\\%``
    answers a gold of 18 and ``1800\\%`` does not (read both ways, both would be credited)."""
    a, b = g.expr, p.expr
    if g.pct and not p.pct:
        return any(_num_equal(c, b, None, p.decimal) for c in (a, a / 100))
    return _num_equal(a, b, g.decimal, p.decimal)


def _num_equal(a: Any, b: Any, dec_a: str | None, dec_b: str | None) -> bool:
    if expr_equal(a, b):
        return True
    if dec_b is not None and dec_a is None and _decimal_close(dec_b, a):
        return True
    return bool(dec_a is not None and dec_b is None and _decimal_close(dec_a, b))


# ---------------------------------------------------------------- relations and sets


def sets_equal(a: Any, b: Any) -> bool:
    if a == b:
        return True
    try:
        return (
            sympy.Complement(a, b) == sympy.S.EmptySet
            and sympy.Complement(b, a) == sympy.S.EmptySet
        )
    except Exception:
        return False


def _rel_set(r: Rel) -> Any:
    rel = r.rel
    free = rel.free_symbols
    if len(free) == 1 and not rel.atoms(sympy.core.function.AppliedUndef):
        try:
            got = rel.as_set()
            if not isinstance(got, sympy.ConditionSet):
                return got
        except Exception:
            pass
    if r.bounds is not None:
        lo, op1, op2, hi = r.bounds
        return sympy.Interval(lo, hi, op1 == "<", op2 == "<")
    return None


def _canon(rel: Any) -> list[tuple[str, Any]]:
    args = rel.args if isinstance(rel, sympy.And) else (rel,)
    out = []
    for r in args:
        d = r.lhs - r.rhs
        op = r.rel_op
        if op in ("<", "<="):
            d, op = -d, {"<": ">", "<=": ">="}[op]
        out.append((op, d))
    return out


def _proportional(d1: Any, d2: Any, positive: bool) -> bool:
    """``d1 == c * d2`` for a non-zero constant ``c`` (> 0 when ``positive``)."""
    if d1 == d2:
        return True
    if d1 == 0 or d2 == 0:
        return False
    try:
        if sympy.expand(d1 - d2) == 0 or (not positive and sympy.expand(d1 + d2) == 0):
            return True
        if _opaque(d1) or _opaque(d2):
            return False
        free = d1.free_symbols | d2.free_symbols
        ratios = []
        for point in _points(free, 4):
            v1, v2 = sympy.N(d1.subs(point), 40), sympy.N(d2.subs(point), 40)
            if v1.is_Number and v2.is_Number and v2 != 0 and v1.is_finite and v2.is_finite:
                ratios.append(v1 / v2)
        if len(ratios) >= 2:
            r0 = ratios[0]
            same = all(abs(r - r0) <= sympy.Float("1e-20") * (1 + abs(r0)) for r in ratios)
            ok = same and abs(r0) > sympy.Float("1e-30")
            return bool(ok and (r0 > 0 if positive else True))
        r = sympy.simplify(d1 / d2)
    except Exception:
        return False
    if r.free_symbols or not r.is_number or r == 0 or not r.is_finite:
        return False
    return bool(r > 0) if positive else True


def rel_equal(g: Rel, p: Rel) -> bool:
    if _overlapping_or(p):
        return False  # "x < 2 or x < 3": a union left to take
    a, b = g.rel, p.rel
    if isinstance(a, sympy.Eq) and isinstance(b, sympy.Eq):
        return _proportional(a.lhs - a.rhs, b.lhs - b.rhs, positive=False)
    if isinstance(a, sympy.Eq) or isinstance(b, sympy.Eq):
        return False
    sa, sb = _rel_set(g), _rel_set(p)
    if sa is not None and sb is not None and a.free_symbols == b.free_symbols:
        return sets_equal(sa, sb)
    if isinstance(a, sympy.Or) or isinstance(b, sympy.Or):
        return False  # a disjunction compares only as a set (one variable)
    ca, cb = _canon(a), _canon(b)
    if len(ca) != len(cb):
        return False
    used: set[int] = set()
    for op, d in ca:
        hit = next(
            (
                j
                for j, (op2, d2) in enumerate(cb)
                if j not in used and op2 == op and _proportional(d, d2, positive=op != "!=")
            ),
            None,
        )
        if hit is None:
            return False
        used.add(hit)
    return True


def _as_set(node: Any) -> Any:
    if (
        isinstance(node, Seq)
        and len(node.items) == 2
        and all(isinstance(i, Val) for i in node.items)
    ):
        lo, hi = node.items[0].expr, node.items[1].expr
        if lo.is_extended_real is False or hi.is_extended_real is False:
            return None
        try:
            return sympy.Interval(lo, hi, node.open == "(", node.close == ")")
        except Exception:
            return None
    if isinstance(node, SetN) and all(isinstance(i, Val) for i in node.items):
        return sympy.FiniteSet(*[i.expr for i in node.items])
    if isinstance(node, UnionN):
        sets = [_as_set(p) for p in node.parts]
        if any(s is None for s in sets):
            return None
        return sympy.Union(*sets)
    if isinstance(node, Val) and isinstance(node.expr, sympy.Set):
        return node.expr
    if isinstance(node, Rel):
        return _rel_set(node)
    return None


def _assign_rel(a: Assign) -> Rel | None:
    if not isinstance(a.value, Val):
        return None
    try:
        return Rel(sympy.Eq(to_sympy(a.lhs), a.value.expr, evaluate=False))
    except (Unparseable, Exception):
        return None


# ---------------------------------------------------------------- nodes


def _norm_text(t: str) -> str:
    """Letters and digits in words: case, punctuation and spacing are free, a word boundary is
    not (``Eve lyn`` is not ``Evelyn``)."""
    return " ".join("".join(ch if ch.isalnum() else " " for ch in t.lower()).split())


def _unordered(xs: list[Any], ys: list[Any]) -> bool:
    """The same items in any order (a bare list may repeat one: the corpus's row 188)."""
    return all(any(equal(x, y) for y in ys) for x in xs) and all(
        any(equal(x, y) for x in xs) for y in ys
    )


def _counted(xs: list[Any], ys: list[Any]) -> bool:
    """The same items in any order, each matched once: a set written ``\\{1, 2, 2\\}`` is not
    ``\\{1, 2\\}`` (an element written twice is work left undone, or a hedge)."""
    if len(xs) != len(ys):
        return False
    left = list(ys)
    for x in xs:
        hit = next((k for k, y in enumerate(left) if equal(x, y)), None)
        if hit is None:
            return False
        del left[hit]
    return True


def _ordered(xs: list[Any], ys: list[Any]) -> bool:
    return len(xs) == len(ys) and all(equal(x, y) for x, y in zip(xs, ys, strict=False))


def equal(g: Any, p: Any) -> bool:
    """Is prediction node ``p`` equivalent to gold node ``g``? The first rule for the pair's
    kinds decides (``_RULES``, in order); a pair no rule takes is not equal."""
    for rule in _RULES:
        verdict = rule(g, p)
        if verdict is not None:
            return verdict
    return False


def _dots_equal(g: Any, p: Any) -> bool | None:
    if isinstance(g, Dots) or isinstance(p, Dots):
        return isinstance(g, Dots) and isinstance(p, Dots)
    return None


# A multiple-choice option: "(C)", or one capital letter ("\text{(C)}" parses as the text C).
_CHOICE = re.compile(r"^\(\s*[A-Za-z]\s*\)$|^[A-Z]$")


def _assign_equal(g: Any, p: Any) -> bool | None:
    """``x = 3`` against ``x = 3``, ``3`` or a relation (an assignment is its value, or the
    relation it states)."""
    if isinstance(g, Assign) and isinstance(p, Assign):
        # One letter may name the value either way (x = 3, y = 3); a longer name must be the
        # gold's ("x + y = 10" is not "x - y = 10").
        same = (name_like(g.lhs) and name_like(p.lhs)
                or re.sub(r"\s", "", g.lhs) == re.sub(r"\s", "", p.lhs))
        if same and equal(g.value, p.value):
            return True
        rg, rp = _assign_rel(g), _assign_rel(p)
        return rg is not None and rp is not None and rel_equal(rg, rp)
    if isinstance(g, Assign):
        if isinstance(p, Rel):
            rg = _assign_rel(g)
            return rg is not None and rel_equal(rg, p)
        return equal(g.value, p)
    if isinstance(p, Assign):
        if isinstance(g, Text) and (_CHOICE.match(g.text.strip()) or g.val is None and len(
                re.sub(r"[^A-Za-z]", "", g.text)) >= 2):
            # "z = c" names a value: it picks no option (C); and a word answer is no value
            # of a name ("\text{Navin} = \text{Evelyn}" is not Evelyn)
            return False
        if isinstance(g, Rel) and isinstance(p.value, Val):
            rp = _assign_rel(p)
            return rp is not None and rel_equal(g, rp)
        return equal(g, p.value)
    return None


def _text_equal(g: Any, p: Any) -> bool | None:
    """Text matches text with the same letters and digits, or by the value both state."""
    if not (isinstance(g, Text) or isinstance(p, Text)):
        return None
    if isinstance(g, Text) and isinstance(p, Text):
        if _norm_text(g.text) == _norm_text(p.text):
            return True
        return g.val is not None and p.val is not None and val_equal(g.val, p.val)
    t, other = (g, p) if isinstance(g, Text) else (p, g)
    if t.val is not None and isinstance(other, Val):
        return val_equal(t.val, other) if t is g else val_equal(other, t.val)
    return False


def _list_equal(g: Any, p: Any) -> bool | None:
    """A list on either side: item by item (by name when both name theirs), in order when
    either side is ordered; one gold answer matches that answer repeated."""
    if not (isinstance(g, ListN) or isinstance(p, ListN)):
        return None
    gi = g.items if isinstance(g, (ListN, SetN, Seq)) else [g]
    pi = p.items if isinstance(p, (ListN, SetN, Seq)) else [p]
    ordered = (
        isinstance(g, Seq)
        or isinstance(p, Seq)
        or (isinstance(g, ListN) and g.ordered)
        or (isinstance(p, ListN) and p.ordered)
    )
    if not isinstance(g, (ListN, SetN, Seq)):
        return all(equal(g, y) for y in pi)  # the same answer repeated
    if not isinstance(p, (ListN, SetN, Seq)):
        return False
    if isinstance(g, Seq) and not _tuple_like(g):
        return False  # "2, \\infty" does not say which ends an interval holds
    by_name = _by_name(gi, pi)
    if by_name is not None:
        return by_name
    if ordered:
        return _ordered(gi, pi)
    return _counted(gi, pi) if isinstance(g, SetN) or isinstance(p, SetN) else _unordered(gi, pi)


def _tuple_like(g: Seq) -> bool:
    """``(1, 2)`` may be a point; ``[0, 1)``, ``(2, \\infty)`` are only intervals."""
    return g.open == "(" and g.close == ")" and not any(
        isinstance(i, Val) and getattr(i.expr, "is_infinite", False) for i in g.items)


def _interval_only(g: Any) -> bool:
    """A gold that can only be read as a set of reals: an interval no point could be, or a union."""
    if isinstance(g, UnionN):
        return all(isinstance(p, (Seq, SetN)) for p in g.parts)
    return isinstance(g, Seq) and len(g.items) == 2 and not _tuple_like(g)


def _seq_equal(g: Seq, p: Seq) -> bool:
    return g.open == p.open and g.close == p.close and _ordered(g.items, p.items)


#: (gold kind, prediction kind, comparison), first match wins (a lambda: defined below).
_PAIRS: tuple[tuple[type, type, Callable[[Any, Any], bool]], ...] = (
    (SetN, SetN, lambda g, p: _counted(g.items, p.items)),
    (Rel, Rel, rel_equal),
    (Seq, Seq, _seq_equal),
    (Ratio, Ratio, lambda g, p: _ratio_equal(g, p)),
    (Mat, Mat, lambda g, p: _mat_equal(g.m, p.m)),
    (Mat, Seq, lambda g, p: _vector_equal(g, p)),
    (Seq, Mat, lambda g, p: _vector_equal(g, p)),
    (Val, Val, val_equal),
)


def _same_kind_equal(g: Any, p: Any) -> bool | None:
    for gold, pred, compare in _PAIRS:
        if isinstance(g, gold) and isinstance(p, pred):
            return compare(g, p)
    return None


def _overlapping(u: UnionN) -> bool:
    """Two parts of a union share points, meet end to end, or are both finite sets, or a part is
    empty: the union is not taken."""
    if sum(isinstance(part, SetN) for part in u.parts) > 1:
        return True  # \\{1\\} \\cup \\{2\\}
    return _sets_overlap([_as_set(part) for part in u.parts])


def _overlapping_or(r: Rel) -> bool:
    """``x < 2 or x < 3``, ``x \\le 2 or x \\ge 2``: a disjunction whose parts overlap, meet end
    to end or are empty is a union left to take, as ``\\cup`` of such parts is."""
    if not isinstance(r.rel, sympy.Or):
        return False
    return _sets_overlap([_rel_set(Rel(part)) for part in r.rel.args])


def _sets_overlap(sets: list[Any]) -> bool:
    if sympy.S.EmptySet in sets:
        return True  # a union with the empty set
    for i, a in enumerate(sets):
        for b in sets[i + 1:]:
            try:
                if a is not None and b is not None and (
                        sympy.Intersection(a, b) != sympy.S.EmptySet
                        or isinstance(sympy.Union(a, b), sympy.Interval)):
                    return True  # sharing points, or meeting end to end: [0, 1/2) and [1/2, 1)
            except Exception:
                continue
    return False


def _as_sets_equal(g: Any, p: Any) -> bool | None:
    """Sets, intervals, unions and values compared as the sets they denote."""
    if isinstance(p, Rel):
        if _overlapping_or(p):
            return False
        # "0 \\le x < 1" states the interval [0, 1); "1 < x < 2" for a gold (1, 2) that may be
        # a point does not
        if not _interval_only(g):
            return False
        sg, sp = _as_set(g), _rel_set(p)
        return sg is not None and sp is not None and sets_equal(sg, sp)
    if isinstance(p, UnionN) and _overlapping(p):
        return False  # \\{1, 2\\} \\cup \\{2\\}, [1, 2] \\cup [2, 3]: a union left to take
    if isinstance(g, (Rel, UnionN, Seq, SetN, Val)) and isinstance(p, (UnionN, Seq, SetN, Val)):
        sg, sp = _as_set(g), _as_set(p)
        return sg is not None and sp is not None and sets_equal(sg, sp)
    return None


_RULES: tuple[Callable[[Any, Any], bool | None], ...] = (
    _dots_equal, _assign_equal, _text_equal, _list_equal, _same_kind_equal, _as_sets_equal)


def _name(lhs: str) -> str:
    return "".join(ch for ch in lhs if ch not in "{} ")


def _by_name(gi: list[Any], pi: list[Any]) -> bool | None:
    """``a=2, b=3`` vs ``b=3, a=2``: match named values by name (None: not applicable)."""
    if not gi or not pi or not all(isinstance(x, Assign) for x in gi + pi):
        return None
    gmap = {_name(x.lhs): x.value for x in gi}
    pmap = {_name(x.lhs): x.value for x in pi}
    if len(gmap) != len(gi) or len(pmap) != len(pi) or gmap.keys() != pmap.keys():
        return None  # repeated or different names: compare the values alone
    return all(equal(gmap[k], pmap[k]) for k in gmap)


def _common_factor(items: list[Any]) -> int:
    """The gcd of a ratio of integers (1 when any part is not an integer)."""
    if not all(isinstance(x, Val) and getattr(x.expr, "is_Integer", False) for x in items):
        return 1
    return int(sympy.igcd(*[int(x.expr) for x in items])) if items else 1


def _ratio_equal(g: Ratio, p: Ratio) -> bool:
    if _common_factor(p.items) > 1 and _common_factor(g.items) == 1:
        return False  # 5:10 for 1:2, the ratio left to reduce
    if _ordered(g.items, p.items):
        return True
    if len(g.items) != len(p.items) or not all(isinstance(x, Val) for x in g.items + p.items):
        return False
    a = [x.expr for x in g.items]
    b = [x.expr for x in p.items]
    if any(x == 0 for x in a + b):
        return False
    return all(expr_equal(a[i] * b[0], b[i] * a[0]) for i in range(1, len(a)))


def _mat_equal(a: Any, b: Any) -> bool:
    if getattr(a, "shape", None) != getattr(b, "shape", None):
        return False
    for x, y in zip(a, b, strict=False):
        if expr_equal(x, y):
            continue
        # entries written as decimals arrive as p/10**k rationals: allow their rounding
        ok = False
        for dec, other in ((x, y), (y, x)):
            # (_decimal_close refuses an ``other`` with a finite decimal form itself)
            if isinstance(dec, sympy.Rational):
                q = int(dec.q)
                k = len(str(q)) - 1
                if q == 10**k and k > 0:
                    ok = _decimal_close(_fmt_decimal(dec, k), other)
            if ok:
                break
        if not ok:
            return False
    return True


def _vector_equal(a: Any, b: Any) -> bool:
    """A one-row/one-column matrix against a tuple: ``(6, 3, 0)`` is that vector.

    MATH writes vectors as ``\\begin{pmatrix} 6 \\\\ 3 \\\\ 0 \\end{pmatrix}``; a model
    that writes the same components as a tuple (or ``\\langle 6, 3, 0 \\rangle``) states
    the same vector. Order matters; intervals (``[0, 1)``, mixed brackets) never match.
    """
    mat, seq = (a.m, b) if isinstance(a, Mat) else (b.m, a)
    if (seq.open, seq.close) != ("(", ")") or 1 not in mat.shape:
        return False
    if len(seq.items) != len(mat) or not all(isinstance(i, Val) and not i.pct for i in seq.items):
        return False
    return _mat_equal(mat, sympy.Matrix(mat.shape[0], mat.shape[1], [i.expr for i in seq.items]))


def _fmt_decimal(x: Any, k: int) -> str:
    sign = "-" if x < 0 else ""
    n = abs(int(x.p))
    s = str(n).rjust(k + 1, "0")
    return f"{sign}{s[:-k]}.{s[-k:]}"


# ---------------------------------------------------------------- entry point


def check(
    gold_group: tuple[str, ...], pred_groups: tuple[tuple[str, ...], ...],
    decimal_rounding: bool = False,
) -> tuple[bool, str, dict[str, Any]]:
    """Grade the final answer ``pred_groups[-1]`` (and competing earlier ones)."""
    token = _ROUNDING.set(decimal_rounding)
    try:
        return _check(gold_group, pred_groups)
    finally:
        _ROUNDING.reset(token)


def _check(
    gold_group: tuple[str, ...], pred_groups: tuple[tuple[str, ...], ...]
) -> tuple[bool, str, dict[str, Any]]:
    gold_leaves: list[str] = []
    pred_leaves: list[str] = []
    try:
        g = parse_group(gold_group, gold_leaves)
    except (Unparseable, Exception) as exc:
        return False, "unparseable", {"side": "gold", "error": str(exc)[:200]}
    try:
        p = parse_group(pred_groups[-1], pred_leaves)
    except (Unparseable, Exception) as exc:
        return False, "unparseable", {"side": "pred", "error": str(exc)[:200]}
    if not equal(g, p):
        if len(pred_groups) > 1 or (
            isinstance(p, ListN) and not isinstance(g, (ListN, SetN, Seq, UnionN))
        ):
            return False, "multiple_answers", {}
        return False, "not_equal", {}
    for other in pred_groups[:-1]:
        try:
            ok = equal(g, parse_group(other))
        except (Unparseable, Exception):
            ok = False
        if not ok:
            return False, "multiple_answers", {"competing": list(other)}
    pred_work, gold_work = answer_work(pred_leaves), answer_work(gold_leaves)
    if pred_work.counts[UNSCORED] > gold_work.counts[UNSCORED]:
        return False, "unparseable", {"error": "the answer's form cannot be scored"}
    undone = excess(pred_work, gold_work)
    if undone:
        return False, "not_simplified", {"undone": undone}
    return True, "equal", {}


def answer_work(leaves: list[str]) -> Work:
    """The evaluation left undone in an answer's leaves, summed (``math_simplest``)."""
    total = Work()
    for leaf in leaves:
        total.merge(leaf_work(leaf))
    return total
