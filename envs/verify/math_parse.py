"""Answer string -> small tree of answer nodes, leaves parsed to sympy (worker side).

The structure of an answer (lists, tuples vs intervals, sets, relations, assignments,
ratios, ellipses) is parsed here by bracket-aware splitting, because it decides how two
answers compare; only leaf expressions go to sympy.

**One tree per leaf.** A leaf is parsed once, as written (``latex2sympy2_extended`` with sympy's
evaluation off: ``leaf_tree``), and both its value (``value_of``: the same tree, evaluated) and
the simplest-form rule's tally of undone work (``math_simplest.leaf_work``) are read from that
one tree. A syntax the form scorer cannot read has no value either: Python's ``**`` and ``//``
are not LaTeX and are ``unparseable``, never a value with no work counted. Bracketed factors
side by side (``(10)(9)``, ``[10][9]``, ``2(3)``), which latex2sympy would read as a mixed
number (a sum), are made explicit products before the parse (``explicit_products``), so both
readings see a product. Decimals are rewritten as exact fractions before sympy sees them, so
0.5 == 1/2 exactly and no float ever rounds 1/2**99 into 1/2**98.

Imports sympy: only the worker processes import this module.
"""

from __future__ import annotations

import re
from contextvars import ContextVar
from dataclasses import dataclass, field
from decimal import ROUND_DOWN, ROUND_HALF_DOWN, ROUND_HALF_UP, Decimal
from functools import lru_cache
from typing import Any

import sympy
from latex2sympy2_extended import latex2sympy
from latex2sympy2_extended.math_normalization import NormalizationConfig
from sympy.core.parameters import evaluate

from envs.verify.math_names import name_like, names_quantity
from envs.verify.math_normalize import normalize_answer, too_large

LATEX_NORMALIZATION = NormalizationConfig(
    basic_latex=True,
    units=False,
    malformed_operators=True,
    nits=False,
    boxed="none",
    equations=False,
)


class Unparseable(ValueError):
    """The answer could not be turned into a node."""


# ---------------------------------------------------------------- nodes


@dataclass
class Val:
    expr: Any
    pct: bool = False
    decimal: str | None = None  # the literal, when the leaf is a single decimal number


@dataclass
class Text:
    text: str
    val: Val | None = None


@dataclass
class Rel:
    rel: Any  # sympy Relational or And of Relationals
    bounds: tuple[Any, str, str, Any] | None = None  # a < mid < b chains: (a, op1, op2, b)


@dataclass
class Assign:
    lhs: str
    value: Any


@dataclass
class Seq:
    """Bracketed tuple or interval: ``(1,2)``, ``[0,1)``."""

    open: str
    items: list[Any]
    close: str


@dataclass
class SetN:
    items: list[Any]
    #: Written with braces (``\\{1, 2\\}``), not made by ``\\pm``: a set inside it is an element.
    written: bool = False


@dataclass
class ListN:
    items: list[Any]
    ordered: bool = False


@dataclass
class Ratio:
    items: list[Any]


@dataclass
class UnionN:
    parts: list[Any]


@dataclass
class Mat:
    m: Any


@dataclass
class Dots:
    kind: str = field(default="ldots")


DOTS = Dots()

# ---------------------------------------------------------------- splitting

_OPENERS = "([{"
_CLOSERS = ")]}"


def split_top(s: str, sep: re.Pattern[str]) -> tuple[list[str], list[str]]:
    """Split ``s`` on ``sep`` matches at bracket depth 0 (and outside environments)."""
    parts: list[str] = []
    seps: list[str] = []
    depth = 0
    env = 0
    start = 0
    i = 0
    n = len(s)

    def split_at(pos: int) -> int | None:
        """Record a separator matched at ``pos``; return where the next part starts."""
        m = sep.match(s, pos)
        if not (m and m.end() > pos):
            return None
        parts.append(s[start:pos])
        seps.append(m.group(0).strip())
        return m.end()

    while i < n:
        c = s[i]
        if c == "\\":
            if s.startswith("\\begin", i):
                env += 1
            elif s.startswith("\\end", i):
                env -= 1
            if i + 1 < n and s[i + 1] in "{}":
                depth += 1 if s[i + 1] == "{" else -1
                i += 2
                continue
            if depth == 0 and env == 0 and (end := split_at(i)) is not None:
                i = start = end
                continue
            i += 1
            while i < n and s[i].isalpha():
                i += 1
            continue
        if c in _OPENERS:
            depth += 1
        elif c in _CLOSERS:
            depth -= 1
        elif depth == 0 and env == 0 and (end := split_at(i)) is not None:
            i = start = end
            continue
        i += 1
    parts.append(s[start:])
    return parts, seps


_LIST_SEP = re.compile(
    r"\s*(?:,|\band\b|\bor\b|(?<=[\d)\]}])or(?=[\s(\[{A-Z\\-])|(?<=[\d)\]}])and(?=[\s(\[{A-Z\\-]))\s*"
    r"(?:(?:and|or)\b\s*)?"
)
_SEMI = re.compile(r"\s*;\s*")
_REL = re.compile(r"\s*(?:\\leq|\\geq|\\neq|\\approx|\\in(?![a-zA-Z])|<|>|=)\s*")
_CUP = re.compile(r"\s*\\cup\s*")
_COLON = re.compile(r"\s*:(?!=)\s*")
_ITEM_SEP = re.compile(r"\s*[,;]\s*")



# ---------------------------------------------------------------- leaves

_DECIMAL = re.compile(r"(?<![\w.])(\d*)\.(\d+)(?![\d.])")
_DECIMAL_LEAF = re.compile(r"^-?(?:\d+\.\d*|\.\d+)$")
_WORDS = re.compile(r"^\(?[A-Za-z][A-Za-z\s'\-]*\)?$")
# Single letters joined by minus signs ("p - q", "p--q") are arithmetic on symbols, not a word:
# compared as text, "p - q" would be "pq" and "-q+p" refused.
_LETTER_EXPRESSION = re.compile(r"^\(?\s*-?\s*[A-Za-z](?:\s*-[\s-]*[A-Za-z])+\s*\)?$")
# Answers that are labels, not quantities: a time of day ("9 a.m.", "4:30 p.m.") and a numeral
# in another base ("0.0011_{2}"); they compare as canonical text.
_CLOCK = re.compile(r"^(\d{1,2})(?::(\d{2}))?\s*([ap])\.?\s*m\.?$", re.I)
_BASE_NUMERAL = re.compile(r"^([0-9A-Za-z.]+)_\{?(\d+)\}?$")


def _dec_to_frac(m: re.Match[str]) -> str:
    whole, frac = m.group(1) or "0", m.group(2)
    return f"(\\frac{{{int(whole + frac)}}}{{1{'0' * len(frac)}}})"


# 0.1\overline{6}: whole part, digits before the bar, repeating digits.
_REPEATING = re.compile(r"(?<![\w.])(\d*)\.(\d*)\\(?:overline|bar)\s*\{\s*(\d+)\s*\}")


def _repeating_to_frac(m: re.Match[str]) -> str:
    whole, fixed, cycle = m.group(1) or "0", m.group(2), m.group(3)
    den = 10 ** len(fixed) * (10 ** len(cycle) - 1)
    num = int(whole) * den + int(fixed + cycle) - int(fixed or "0")
    return f"(\\frac{{{num}}}{{{den}}})"


def exact_decimals(leaf: str) -> str:
    """``leaf`` with each decimal written as an exact fraction (0.5 -> \\frac{5}{10},
    0.1\\overline{6} -> \\frac{15}{90})."""
    return _DECIMAL.sub(_dec_to_frac, _REPEATING.sub(_repeating_to_frac, leaf))


#: The leaves parsed while it holds a list (``parse_group(..., leaves=...)``): the simplest-form
#: rule re-reads them as written.
_LEAVES: ContextVar[list[str] | None] = ContextVar("answer_leaves", default=None)


# Side by side, a number and a bracket (or two brackets) multiply: "(10)(9)", "[10][9]", "2(3)",
# "(3)2". latex2sympy reads a number next to a bracketed number as a mixed number (a sum: 19, 5),
# so the product is made explicit. "]" that closes a root's index (\sqrt[3](8)) is not a factor.
_CLOSE_THEN_OPEN = re.compile(r"(?<!\\)([)\]])\s*(?=[(\[\d])|(\d)\s*(?=[(\[])")


_EXPONENT_DIGITS = re.compile(r"[\^_]\s*\d+$")


def explicit_products(src: str) -> str:
    """``src`` with a ``\\cdot`` between juxtaposed bracketed factors and numbers."""
    if "(" not in src and "[" not in src:
        return _SPACED_NUMBERS.sub(_spaced_product, src)
    index_ends = {m.end() - 1 + _root_index_len(src, m.end() - 1) for m in
                  re.finditer(r"\\sqrt\s*\[", src)}

    def repl(m: re.Match[str]) -> str:
        if m.group(1) is not None and m.start(1) in index_ends:
            return m.group(0)
        if m.group(2) is not None and _EXPONENT_DIGITS.search(src, 0, m.end(2)):
            return m.group(0)  # \tan^2(y): a function's power, then its argument
        return (m.group(1) or m.group(2)) + r"\cdot "

    return _SPACED_NUMBERS.sub(_spaced_product, _CLOSE_THEN_OPEN.sub(repl, src))


# Two numbers with only a space between them ("10 9") are side by side too: a product, as latex2sympy
# would otherwise read a mixed number. Not a mixed number "2 1/2", and not digit groups "1 000 000".
_SPACED_NUMBERS = re.compile(r"(?<![\d.^_])\d+(?:\s+\d+)+(?![\d.]|\s*(?:/|\\frac|\\div))")
_DIGIT_GROUPS = re.compile(r"\d{1,3}(?: \d{3})+")


def _spaced_product(m: re.Match[str]) -> str:
    if _DIGIT_GROUPS.fullmatch(m.group(0)):
        return m.group(0).replace(" ", "")  # 1 000 000: one number in groups of three
    return re.sub(r"\s+", r"\\cdot ", m.group(0))


def _root_index_len(src: str, open_at: int) -> int:
    close = src.find("]", open_at)
    return close - open_at if close >= 0 else 0


# The one construct latex2sympy cannot build with evaluation off: a mixed number of literals.
_MIXED_NUMBER = re.compile(r"\s*-?\s*\d+\s*\\frac\s*\{\s*\d+\s*\}\s*\{\s*\d+\s*\}\s*")


def written(src: str) -> Any:
    """``src`` parsed with sympy's automatic evaluation off, so ``e^{\\ln 5}`` stays
    ``exp(log(5))`` and ``\\binom{5}{2}`` a binomial. A mixed number ``2\\frac12`` needs
    evaluation to parse and is read the usual way (its only work, an unreduced fraction, is read
    from the text). Anything else that parses only with evaluation on is refused: an evaluated
    tree would hide its work from the tally (``\\{10\\}\\{9\\}`` was read as 19)."""
    try:
        with evaluate(False):
            return latex2sympy(src, normalization_config=LATEX_NORMALIZATION)
    except Exception:
        if not _MIXED_NUMBER.fullmatch(src):
            raise
        return latex2sympy(src, normalization_config=LATEX_NORMALIZATION)


# A brace-less argument before a group: \frac1{2x}, \frac{1}2{...} is not bare.
_AFTER_COMMAND = re.compile(r"\\[A-Za-z]+\s*[\w.]\s*$")


def bare_groups_as_brackets(src: str) -> str:
    """``src`` with each brace group that is no command's argument written as a bracket:
    ``{10}{9}`` is ``(10)(9)``, a product (latex2sympy read it as the mixed number 10 + 9).
    An argument follows a command's name, ``^``, ``_``, a root's index or another argument."""
    if "{" not in src:
        return src
    out = list(src)
    stack: list[bool] = []  # per open group: is it an argument?
    last_closed_arg = False
    prev = ""  # the last character before the current one that is not a space
    i = 0
    while i < len(src):
        c = src[i]
        if c == "\\":
            j = i + 1
            while j < len(src) and src[j].isalpha():
                j += 1
            j = max(j, i + 2)  # an escape (\{, \,) is one character after the backslash
            prev = src[j - 1]
            last_closed_arg = False
            i = j
            continue
        if c == "{":
            arg = (prev.isalpha() or (prev != "" and prev in "^_]")
                   or (prev == "}" and last_closed_arg)
                   or _AFTER_COMMAND.search(src, max(0, i - 40), i) is not None)
            stack.append(arg)
            if not arg:
                out[i] = "("
        elif c == "}" and stack:
            arg = stack.pop()
            last_closed_arg = arg
            if not arg:
                out[i] = ")"
        if not c.isspace():
            prev = c
            if c != "}":
                last_closed_arg = False
        i += 1
    return "".join(out)


@lru_cache(maxsize=8192)
def leaf_tree(leaf: str) -> Any:
    """The one tree of ``leaf``, as written (cached: the value and the form are read from the
    same object). Raises ``Unparseable``."""
    if too_large(leaf):
        raise Unparseable("number too large")
    try:
        return written(explicit_products(bare_groups_as_brackets(exact_decimals(leaf))))
    except Exception as exc:  # the ANTLR parser raises bare Exceptions
        raise Unparseable(str(exc)[:200]) from None


_KEPT_UNEVALUATED = (sympy.factorial, sympy.factorial2, sympy.subfactorial, sympy.binomial,
                     sympy.RisingFactorial, sympy.FallingFactorial)


def value_of(tree: Any) -> Any:
    """The value of a tree parsed as written: each node rebuilt with sympy's evaluation on, as
    latex2sympy would have built it. Relations stay relations (``1 = 1`` is not ``True``)."""
    if isinstance(tree, sympy.MatrixBase):
        return tree.applyfunc(value_of)
    if not isinstance(tree, sympy.Basic) or tree.is_Atom or not tree.args:
        return tree
    args = [value_of(a) for a in tree.args]
    if isinstance(tree, _KEPT_UNEVALUATED):  # as latex2sympy builds them: 2004! stays 2004!
        return tree.func(*args, evaluate=False)
    if isinstance(tree, (sympy.core.relational.Relational, sympy.logic.boolalg.Boolean)):
        return tree.func(*args, evaluate=False) if isinstance(
            tree, sympy.core.relational.Relational) else tree.func(*args)
    try:
        return tree.func(*args)
    except Exception:  # a node sympy will not rebuild with evaluation: keep it as written
        return tree


def to_sympy(leaf: str) -> Any:
    """The value of one leaf, read from its one tree (``leaf_tree``)."""
    tree = leaf_tree(leaf)
    leaves = _LEAVES.get()
    if leaves is not None:
        leaves.append(leaf)
    return value_of(tree)


def _leaf(s: str) -> Any:
    pct = False
    if s.endswith("\\%"):
        pct = True
        s = s[:-2].strip()
    s = s.replace("\\%", "/100")
    if not s:
        raise Unparseable("empty")
    for pm, signs in (("\\pm", ("+", "-")), ("\\mp", ("-", "+"))):
        if pm in s:
            # latex2sympy cannot parse \pm inside \frac: expand textually, one at a time
            return SetN(_flatten([_leaf(s.replace(pm, sg, 1)) for sg in signs]))
    clock = _CLOCK.match(s)
    if clock:
        hour, minute, half = clock.groups()
        return Text(f"{int(hour)}:{minute or '00'} {half.lower()}m")
    base = _BASE_NUMERAL.match(s)
    if base:
        return Text(f"{base.group(1).lower()}_{int(base.group(2))}")
    if _WORDS.match(s) and not _LETTER_EXPRESSION.match(s):
        word = s.strip("()").strip()
        val = None
        if len(word) == 1:
            try:
                val = Val(to_sympy(word))
            except Unparseable:
                val = None
        return Text(word, val)
    expr = to_sympy(s)
    if isinstance(expr, sympy.MatrixBase) or getattr(expr, "is_Matrix", False):
        return Mat(sympy.Matrix(expr.doit()) if hasattr(expr, "doit") else expr)
    if isinstance(expr, sympy.FiniteSet):
        return SetN([Val(e) for e in expr])
    if isinstance(expr, sympy.Set):
        return Val(expr)
    if isinstance(expr, (sympy.core.relational.Relational, sympy.logic.boolalg.BooleanFunction)):
        return Rel(expr)
    if not isinstance(expr, sympy.Basic):
        raise Unparseable(f"unexpected {type(expr).__name__}")
    return Val(expr, pct=pct, decimal=s if _DECIMAL_LEAF.match(s) else None)


# ---------------------------------------------------------------- structure


def _flatten(items: list[Any], keep_sets: bool = False) -> list[Any]:
    """Items with unordered lists and ``\\pm`` sets spread out; a set written with braces stays
    one item inside a set or beside others (``keep_sets``): ``\\{\\{1, 2\\}\\}`` and
    ``\\{1\\}, \\{2\\}`` are not ``\\{1, 2\\}``."""
    out: list[Any] = []
    for it in items:
        if keep_sets and isinstance(it, SetN) and it.written:
            out.append(it)
        elif isinstance(it, (ListN, SetN)) and not (isinstance(it, ListN) and it.ordered):
            out.extend(_flatten(it.items, keep_sets))
        elif isinstance(it, Assign) and isinstance(it.value, (ListN, SetN)):
            out.extend(_flatten(it.value.items))
        else:
            out.append(it)
    return out


def _make_list(nodes: list[Any]) -> Any:
    if len(nodes) == 1 and isinstance(nodes[0], SetN):
        return nodes[0]  # a set stays a set: brackets carry meaning (never an interval's ends)
    nodes = _flatten(nodes, keep_sets=True)
    if len(nodes) == 1:
        return nodes[0]
    return ListN(nodes, ordered=any(isinstance(n, Dots) for n in nodes))


def parse_list(s: str) -> Any:
    s = s.strip()
    parts, _ = split_top(s, _SEMI)
    if len(parts) > 1:
        # "p=5,q=2;p=7,q=2": each ;-part is one (ordered) solution
        return _make_list([_ordered_or_item(p) for p in parts if p.strip()])
    return _ordered_or_item(s, top=True)


def _ordered_or_item(s: str, top: bool = False) -> Any:
    parts, seps = split_top(s.strip(), _LIST_SEP)
    parts = [p for p in parts if p.strip()]
    if not parts:
        raise Unparseable("empty")
    if len(parts) == 1:
        return parse_item(parts[0])
    nodes = [parse_item(p) for p in parts]
    either = disjunction(nodes, seps)
    if either is not None:
        return either
    if top:
        return _make_list(nodes)
    return ListN(nodes, ordered=True)


_INEQUALITIES = (sympy.StrictLessThan, sympy.LessThan, sympy.StrictGreaterThan,
                 sympy.GreaterThan)


def disjunction(nodes: list[Any], seps: list[str]) -> Rel | None:
    """``x < 2 or x > 3``: inequalities in one variable joined by "or" state the union of their
    solution sets, one relation (``sympy.Or``) compared as that set; ``None`` for anything else
    (numbers joined by "or" stay a list: a hedge). "and" and commas are not read as "or"."""
    if len(nodes) < 2 or not all(sep.lower().lstrip(", ") == "or" for sep in seps):
        return None
    if not all(isinstance(n, Rel) for n in nodes):
        return None
    rels = [n.rel for n in nodes]
    if not all(isinstance(r, _INEQUALITIES) or (
            isinstance(r, sympy.And) and all(isinstance(a, _INEQUALITIES) for a in r.args))
            for r in rels):
        return None
    free = {frozenset(r.free_symbols) for r in rels}
    if len(free) != 1 or len(next(iter(free))) != 1:
        return None
    if len(set(rels)) < len(rels):
        raise Unparseable("a condition repeated in a disjunction")  # "x > 2 or x > 2"
    return Rel(sympy.Or(*rels, evaluate=False))


_NUMBER_PART = re.compile(r"^-?\d+(?:\.\d+)?$")
_WORK = re.compile(r"[\d)}]\s*(?:[-+*/^]|\\cdot|\\times|\\div)\s*[\d({\\]")


def _relation(parts: list[str], ops: list[str]) -> Any:
    if "\\approx" in ops:
        k = ops.index("\\approx")
        before, before_ops = parts[: k + 1], ops[:k]
        if len(before) == 1 and name_like(before[0]):
            rest_ops = [o for o in ops[k + 1 :] if o != "\\approx"]
            rest = parts[k + 1 : k + 2 + len(rest_ops)]
            if not rest_ops:
                return parse_item(rest[0])
            return _relation(rest, rest_ops)
        if len(parts) == 2 and _DECIMAL_LEAF.match(parts[1].strip()):
            # "\frac{128}{75} \approx 1.7067": the exact value, its decimal beside it (which
            # must round or cut it: "\frac{128}{75} \approx 9.1" is two answers)
            exact = parse_item(parts[0])
            if not _approximates(exact, parts[1].strip()):
                raise Unparseable("the decimal after \\approx is not the value's")
            return exact
        parts, ops = before, before_ops
        if not ops:
            return parse_item(parts[0])
    if all(o == "=" for o in ops):
        if len(parts) >= 3:
            # "x = 5 + 6 = 11" (work shown) is read by its last part, as Math-Verify reads
            # "x = 5+5+1 = 7 = 11"; a name then two numbers, "a = 3 = 5" or "m+n = 24 = 23",
            # states two values
            numbers = {p.strip(" {}") for p in parts if _NUMBER_PART.match(p.strip(" {}"))}
            named = name_like(parts[0]) or names_quantity(parts[0])
            work = any(_WORK.search(p) for p in parts[1:])
            if named and not work and len({sympy.nsimplify(n) for n in numbers}) > 1:
                raise Unparseable("a chain of two different numbers")
            return parse_item(parts[-1])
        lhs, rhs = parts
        if not rhs.strip():
            return parse_item(lhs)
        if not re.search(r"[A-Za-z]", _strip_cmds(lhs + rhs)):
            # "\frac{1}{2} \cdot 3 = \frac{3}{2}": a computation, its result is the answer
            return parse_item(rhs)
        if name_like(lhs):
            return Assign(lhs.strip(), parse_item(rhs))
        if name_like(rhs) and not re.search(r"[A-Za-z]", _strip_cmds(lhs)):
            return Assign(rhs.strip(), parse_item(lhs))  # "18 = x" names the value as "x = 18"
        if names_quantity(lhs) and not re.search(r"[A-Za-z]", _strip_cmds(rhs)):
            return Assign(lhs.strip(), parse_item(rhs))  # "m + n = 23"
        return Rel(sympy.Eq(_expr(lhs), _expr(rhs), evaluate=False))
    if ops == ["\\in"]:
        return Assign(parts[0].strip(), parse_item(parts[1]))
    if any(o in ("=", "\\in") for o in ops):
        raise Unparseable("mixed relation")
    table = {"<": sympy.Lt, ">": sympy.Gt, "\\leq": sympy.Le, "\\geq": sympy.Ge, "\\neq": sympy.Ne}
    exprs = [_expr(p) for p in parts]
    rels = [table[o](exprs[i], exprs[i + 1], evaluate=False) for i, o in enumerate(ops)]
    bounds = None
    if len(ops) == 2 and ops[0] in ("<", "\\leq") and ops[1] in ("<", "\\leq"):
        bounds = (exprs[0], ops[0], ops[1], exprs[2])
    rel = rels[0] if len(rels) == 1 else sympy.And(*rels, evaluate=False)
    return Rel(rel, bounds)


def _approximates(node: Any, decimal: str) -> bool:
    """Whether ``decimal`` is ``node``'s value rounded or cut to its places."""
    if not isinstance(node, Val) or not isinstance(node.expr, sympy.Expr):
        return False
    try:
        value = node.expr.evalf(50)
        if not value.is_real:
            return False
        exact = Decimal(str(value))
    except (TypeError, ValueError, ArithmeticError):
        return False
    unit = Decimal(1).scaleb(-len(decimal.split(".")[1]))
    written = Decimal(decimal)
    return any(exact.quantize(unit, rounding=r) == written
               for r in (ROUND_HALF_UP, ROUND_HALF_DOWN, ROUND_DOWN))


def _strip_cmds(s: str) -> str:
    return re.sub(r"\\[a-zA-Z]+", "", s)


def _expr(s: str) -> Any:
    node = parse_item(s)
    if isinstance(node, Val):
        return node.expr / 100 if node.pct else node.expr
    if isinstance(node, Text) and node.val is not None:
        return node.val.expr
    if isinstance(node, Text):
        return sympy.Symbol(node.text.lower().replace(" ", ""))
    raise Unparseable("relation side is not an expression")


def _match_close(s: str) -> int:
    """Index of the bracket closing ``s[0]`` (any bracket type: intervals mix them)."""
    depth = 0
    i = 0
    while i < len(s):
        c = s[i]
        if c == "\\":
            i += 2
            continue
        if c in _OPENERS:
            depth += 1
        elif c in _CLOSERS:
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return -1


def _set_close(s: str) -> int:
    """Index of the ``\\}`` closing the ``\\{`` that opens ``s`` (-1 for none). ``_match_close``
    skips escapes, so it never saw a set's own braces: ``\\{1, 2\\}`` was read by latex2sympy
    and flattened into a bare list, and ``\\{(1, 2)\\}`` into an interval."""
    depth = 0
    i = 0
    while i < len(s) - 1:
        if s[i] == "\\" and s[i + 1] in "{}":
            depth += 1 if s[i + 1] == "{" else -1
            if depth == 0:
                return i
            i += 2
            continue
        i += 2 if s[i] == "\\" else 1
    return -1


_SUCH_THAT = re.compile(r"\s*(?:\\mid(?![A-Za-z])|\\vert(?![A-Za-z])|\||:)\s*")
# The bound variable of a set-builder, over the reals when a domain is named.
_BOUND_VARIABLE = re.compile(r"\s*([A-Za-z])\s*(?:\\in\s*\\mathbb\{R\}\s*)?")


def set_builder(inner: str) -> Rel | None:
    """``\\{x \\mid x > 2\\}`` (or ``:``, ``|``, ``x \\in \\mathbb{R}``): the set of reals its
    condition holds for, read as that condition (a ``Rel``), so it compares as the solution set
    of ``x > 2`` does. ``None`` when ``inner`` has no such-that bar (a set of elements);
    ``Unparseable`` when the bar is there but the rest is not a condition on the one bound
    variable over the reals (``\\{x \\in \\mathbb{Z} \\mid x > 2\\}``, ``\\{x \\mid y > 2\\}``)."""
    parts, _ = split_top(inner, _SUCH_THAT)
    if len(parts) < 2:
        return None
    head = parts[0]
    bar = _SUCH_THAT.match(inner, len(head))
    condition = inner[bar.end():] if bar else ""
    var = _BOUND_VARIABLE.fullmatch(head)
    if var is None or not condition.strip():
        raise Unparseable("set-builder: not a condition on one real variable")
    node = parse_list(condition)
    symbol = sympy.Symbol(var.group(1))
    if not isinstance(node, Rel) or isinstance(node.rel, sympy.Eq) or (
            node.rel.free_symbols != {symbol}):
        raise Unparseable("set-builder: not a condition on its bound variable")
    return node


def parse_item(s: str) -> Any:
    s = s.strip()
    if not s:
        raise Unparseable("empty")
    if s == "\\ldots":
        return DOTS
    parts, ops = split_top(s, _REL)
    if ops:
        if any(not p.strip() for p in parts[:-1]) or not parts[-1].strip():
            if ops[0] in ("=", "\\approx") and not parts[0].strip():
                return parse_item("".join(parts[1:]))
            raise Unparseable("dangling relation")
        return _relation(parts, ops)
    parts, _ = split_top(s, _CUP)
    if len(parts) > 1:
        return UnionN([parse_item(p) for p in parts])
    clock = _CLOCK.match(s)
    if clock:  # "9:00 AM" is a time of day before it is a ratio
        return _leaf(s)
    parts, _ = split_top(s, _COLON)
    if len(parts) > 1:
        return Ratio([parse_item(p) for p in parts])
    if s.startswith("\\{") and s.endswith("\\}") and _set_close(s) == len(s) - 2:
        builder = set_builder(s[2:-2])
        if builder is not None:
            return builder
        items, _ = split_top(s[2:-2], _ITEM_SEP)
        return SetN(_flatten([parse_item(p) for p in items if p.strip()], keep_sets=True),
                    written=True)
    if s[0] in _OPENERS and _match_close(s) == len(s) - 1:
        inner = s[1:-1]
        items, _ = split_top(inner, _ITEM_SEP)
        items = [p for p in items if p.strip()]
        if s[0] == "{":
            return parse_list(inner)
        if len(items) >= 2:
            return Seq(s[0], [parse_item(p) for p in items], s[-1])
        if len(items) == 1 and (s[0], s[-1]) in (("(", ")"), ("[", "]")):
            return parse_item(inner)
    return _leaf(s)


def parse_answer(raw: str) -> Any:
    """Parse one extracted answer string into a node."""
    s = normalize_answer(raw)
    if not s:
        raise Unparseable("empty")
    return parse_list(s)


def parse_group(items: tuple[str, ...] | list[str], leaves: list[str] | None = None) -> Any:
    """Several answers that form one (boxes joined by "and") become one list node. The
    expression leaves parsed are appended to ``leaves`` when it is given."""
    token = _LEAVES.set(leaves)
    try:
        nodes = [parse_answer(s) for s in items]
    finally:
        _LEAVES.reset(token)
    return _make_list(nodes)
