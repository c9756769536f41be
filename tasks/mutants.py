"""Mutants of a reference Python function that each break one edge of it, for checking that a
task's hidden cases tell the reference from a program that is wrong on one boundary only.

The kinds (``mutants``):

- ``off by one``: one comparison's boundary moved (``>=`` -> ``>``, ``<`` -> ``<=``, ...);
- ``shifted``: one integer in a comparison, a ``range(...)`` bound or a slice, plus or minus 1
  (a threshold or a loop's end one off);
- ``swapped branch``: one condition negated (``if c:`` -> ``if not c:``, ``a if c else b`` ->
  ``a if not c else b``, a returned test negated);
- ``zero case``: one condition with its zero or empty case dropped or added (``c and bool(n)``,
  ``c or not n``, for each argument ``n``): ``if n % 2 == 0 and n != 0: return 'even'``.

With ``extended`` (the amplified HumanEval and MBPP tests, ``tasks.amplify``), also:

- ``operator``: one arithmetic operator swapped (``+`` and ``-``, ``*`` and ``+``, ``//`` and
  ``%``, ...), ``==`` and ``!=``, ``and`` and ``or``, ``min`` and ``max``, ``True`` and
  ``False``, ``reverse=`` flipped;
- ``constant``: any other integer literal plus or minus 1.

``while`` conditions are left alone: moving one may make the loop endless. A mutant may be
equivalent to the reference (``a if a > b else b`` with ``>=``); the caller keeps those that
differ from it on some input (``tasks.pyfunc`` runs them over the form's inputs).
"""

from __future__ import annotations

import ast
import copy
from dataclasses import dataclass

_OFF_BY_ONE: dict[type, type] = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE,
                                 ast.GtE: ast.Gt}


@dataclass(frozen=True)
class Mutant:
    kind: str  # "off by one", "shifted", "swapped branch", "zero case", "operator", "constant"
    edit: str  # what changed: "n >= 8 -> n > 8"
    source: str  # the whole function, renamed or not as the reference was


def _conditions(tree: ast.AST) -> list[ast.expr]:
    """The tests of ``if`` statements and expressions, and returned comparisons or boolean
    operations (``return lo <= n <= hi``): the places a branch is decided."""
    found: list[ast.expr] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.If | ast.IfExp):
            found.append(node.test)
        elif isinstance(node, ast.Return) and isinstance(node.value, ast.Compare | ast.BoolOp):
            found.append(node.value)
    return found


def _in_while_test(tree: ast.AST) -> set[int]:
    ids: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.While):
            ids.update(id(n) for n in ast.walk(node.test))
    return ids


def _shiftable(tree: ast.AST) -> list[ast.AST]:
    """Integers in comparisons, ``range(...)`` arguments and slices (outside ``while`` tests)."""
    skip = _in_while_test(tree)
    found: list[ast.AST] = []
    for node in ast.walk(tree):
        parts: list[ast.AST] = []
        if isinstance(node, ast.Compare):
            parts = [node.left, *node.comparators]
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
              and node.func.id == "range"):
            parts = list(node.args)
        elif isinstance(node, ast.Slice):
            parts = [p for p in (node.lower, node.upper) if p is not None]
        for part in parts:
            for sub in ast.walk(part):
                if (isinstance(sub, ast.Constant) and type(sub.value) is int
                        and id(sub) not in skip and sub not in found):
                    found.append(sub)
    return found


def _edited(tree: ast.Module, target: ast.AST, replace) -> tuple[str, str] | None:
    """The source with ``target`` (a node of ``tree``) replaced by ``replace(copy)``, and the
    edit as text; None when nothing changed."""
    twin = copy.deepcopy(tree)
    index = [n for n in ast.walk(tree)].index(target)
    node = [n for n in ast.walk(twin)][index]
    before = ast.unparse(node)
    new = replace(node)
    for parent in ast.walk(twin):
        for name, value in ast.iter_fields(parent):
            if value is node:
                setattr(parent, name, new)
            elif isinstance(value, list):
                for i, item in enumerate(value):
                    if item is node:
                        value[i] = new
    after = ast.unparse(new)
    if after == before:
        return None
    return ast.unparse(ast.fix_missing_locations(twin)) + "\n", f"{before} -> {after}"


def mutants(source: str, function: str | None = None, *, extended: bool = False
            ) -> list[Mutant]:
    """Every one-edge mutant of the function in ``source`` (its first, or the one named
    ``function``; the rest of the source is left as it is), each once; ``extended`` adds the
    ``operator`` and ``constant`` kinds (see the module's doc)."""
    tree = ast.parse(source)
    func = next(n for n in tree.body if isinstance(n, ast.FunctionDef)
                and (function is None or n.name == function))
    args = [a.arg for a in func.args.args]
    out: dict[str, Mutant] = {}

    def add(kind: str, result: tuple[str, str] | None) -> None:
        if result is not None and result[0] not in out and result[0] != ast.unparse(tree) + "\n":
            out[result[0]] = Mutant(kind, result[1], result[0])

    skip = _in_while_test(func)
    for node in list(ast.walk(func)):
        if isinstance(node, ast.Compare) and id(node) not in skip:
            for i, op in enumerate(node.ops):
                if type(op) in _OFF_BY_ONE:
                    add("off by one", _edited(tree, node, _swap_op(i)))
    shiftable = _shiftable(func)
    for node in shiftable:
        for delta in (1, -1):
            add("shifted", _edited(tree, node, _shift(delta)))
    if extended:
        _extended(tree, func, skip, shiftable, add)
    for cond in _conditions(func):
        if id(cond) in skip:
            continue
        add("swapped branch", _edited(tree, cond, _negate))
        for name in args:
            add("zero case", _edited(tree, cond, _joined(ast.And(), _truthy(name))))
            add("zero case", _edited(tree, cond, _joined(ast.Or(), _falsy(name))))
    return list(out.values())


def _swap_op(i: int):
    def replace(node: ast.Compare) -> ast.Compare:
        node.ops[i] = _OFF_BY_ONE[type(node.ops[i])]()
        return node
    return replace


def _shift(delta: int):
    def replace(node: ast.Constant) -> ast.Constant:
        assert isinstance(node.value, int)  # _shiftable picks integer constants only
        return ast.Constant(node.value + delta)
    return replace


def _negate(node: ast.expr) -> ast.expr:
    return ast.UnaryOp(ast.Not(), node)


def _truthy(name: str) -> ast.expr:
    return ast.Call(ast.Name("bool", ast.Load()), [ast.Name(name, ast.Load())], [])


def _falsy(name: str) -> ast.expr:
    return ast.UnaryOp(ast.Not(), ast.Name(name, ast.Load()))


def _joined(op: ast.boolop, extra: ast.expr):
    def replace(node: ast.expr) -> ast.expr:
        return ast.BoolOp(op, [node, extra])
    return replace


_SWAPPED_OPS: dict[type, type] = {
    ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Add, ast.FloorDiv: ast.Mod,
    ast.Mod: ast.FloorDiv, ast.Div: ast.Mult, ast.Pow: ast.Mult, ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq, ast.And: ast.Or, ast.Or: ast.And, ast.In: ast.NotIn, ast.NotIn: ast.In,
}
_SWAPPED_NAMES = {"min": "max", "max": "min", "any": "all", "all": "any"}


def _extended(tree: ast.Module, func: ast.FunctionDef, skip: set[int],
              shiftable: list[ast.AST], add) -> None:
    """The ``operator`` and ``constant`` mutants of ``func`` (outside ``while`` tests)."""
    for node in list(ast.walk(func)):
        if id(node) in skip:
            continue
        if (isinstance(node, ast.BinOp) and type(node.op) in _SWAPPED_OPS
                or isinstance(node, ast.BoolOp)):
            swapped = _SWAPPED_OPS[type(node.op)]()
            add("operator", _edited(tree, node, _set_attr("op", swapped)))
        elif isinstance(node, ast.Compare):
            for i, op in enumerate(node.ops):
                if type(op) in (ast.Eq, ast.NotEq, ast.In, ast.NotIn):
                    add("operator", _edited(tree, node, _swap_cmp(i)))
        elif (isinstance(node, ast.Name) and node.id in _SWAPPED_NAMES
              and isinstance(node.ctx, ast.Load)):
            add("operator", _edited(tree, node, lambda n: ast.Name(_SWAPPED_NAMES[n.id],
                                                                   ast.Load())))
        elif isinstance(node, ast.Constant) and type(node.value) is bool:
            add("operator", _edited(tree, node, lambda n: ast.Constant(not n.value)))
        elif isinstance(node, ast.Constant) and type(node.value) is int \
                and node not in shiftable:
            for delta in (1, -1):
                add("constant", _edited(tree, node, _shift(delta)))


def _set_attr(name: str, value: object):
    def replace(node: ast.AST) -> ast.AST:
        setattr(node, name, value)
        return node
    return replace


def _swap_cmp(i: int):
    def replace(node: ast.Compare) -> ast.Compare:
        node.ops[i] = _SWAPPED_OPS[type(node.ops[i])]()
        return node
    return replace
