"""Whether an answer to a reasoning-gym task with several right answers is right, checked from the
task's rules alone: the report card's reference (``envs.tools.card.reference``) for those tasks.

The gold is one right answer among many (another 8-queens placement, another expression that
makes the target, another plan that leaves a jug at the target, another shortest sequence of
buttons), so comparing with it calls a right answer wrong, and the card's reward search
then reports a paid wrong answer that is not one. These checks are written from the puzzle's
rules and the entry's data (the given queens, the given numbers and target), not from the
scoring path the search attacks: neither reasoning-gym's ``score_answer`` (the scorer that pays,
with its own leniencies: puzzle24 truncates the value with ``int()``, countdown allows 1e-6 off
the target, n_queens compares with the list it enumerated) nor our answer grammar. An expression
is read by ``ast`` (which runs nothing, never ``eval``) after a character whitelist, and
evaluated here with exact fractions. Standard library only.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from collections.abc import Callable
from fractions import Fraction
from typing import Any

#: Characters of an arithmetic answer: ASCII digits, + - * / and brackets.
_ARITHMETIC = re.compile(r"[0-9+\-*/()\s]+", re.ASCII)
#: Longest answer text these checks read (an expression of the puzzles' few numbers is short).
MAX_CHARS = 1_000

Check = Callable[[str, dict[str, Any]], bool]


def _queens(answer: str, entry: dict[str, Any]) -> bool:
    """An n x n board of ``Q`` and ``_`` (one row a line, cells apart) with n queens, no two
    on one row, column or diagonal, that keeps every queen the puzzle gave."""
    puzzle = (entry.get("metadata") or {}).get("puzzle")
    if not isinstance(puzzle, list) or not puzzle:
        return False
    n = len(puzzle)
    rows = [line.split() for line in answer.strip().splitlines()]
    if len(rows) != n or any(len(r) != n or not set(r) <= {"Q", "_"} for r in rows):
        return False
    queens = [(i, j) for i, row in enumerate(rows) for j, cell in enumerate(row) if cell == "Q"]
    given = [(i, j) for i, row in enumerate(puzzle) for j, cell in enumerate(row) if cell == "Q"]
    if len(queens) != n or not set(given) <= set(queens):
        return False
    return all(len({key(i, j) for i, j in queens}) == n
               for key in (lambda i, j: i, lambda i, j: j, lambda i, j: i - j,
                           lambda i, j: i + j))


def _value(node: ast.AST, leaves: list[int]) -> Fraction:
    """The exact value of an expression of integers under + - * / (and a sign), its integers
    collected in ``leaves``; ``ValueError`` for anything else (a power, a float, a name)."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        leaves.append(node.value)
        return Fraction(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        value = _value(node.operand, leaves)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp):
        left, right = _value(node.left, leaves), _value(node.right, leaves)
        if isinstance(node.op, ast.Add):
            return left + right
        if isinstance(node.op, ast.Sub):
            return left - right
        if isinstance(node.op, ast.Mult):
            return left * right
        if isinstance(node.op, ast.Div):
            if right == 0:
                raise ValueError("division by zero")
            return left / right
    raise ValueError(f"{type(node).__name__} is not arithmetic")


def makes_target(answer: str, numbers: list[int], target: int) -> bool:
    """``answer`` is an expression that uses each of ``numbers`` once (no other number) under
    + - * / and equals ``target`` exactly."""
    text = answer.strip()
    if not text or len(text) > MAX_CHARS or _ARITHMETIC.fullmatch(text) is None:
        return False
    leaves: list[int] = []
    try:
        value = _value(ast.parse(text, mode="eval").body, leaves)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return Counter(leaves) == Counter(int(x) for x in numbers) and value == target


def _countdown(answer: str, entry: dict[str, Any]) -> bool:
    meta = entry.get("metadata") or {}
    return makes_target(answer, list(meta.get("numbers") or ()), int(meta["target"]))


def _puzzle24(answer: str, entry: dict[str, Any]) -> bool:
    return makes_target(answer, list((entry.get("metadata") or {}).get("numbers") or ()), 24)


_JUG_MOVE = re.compile(r"(fill|empty) ([A-Z])|pour ([A-Z])->([A-Z])")


def _jugs(answer: str, entry: dict[str, Any]) -> bool:
    """A JSON list of moves (``fill X``, ``empty X``, ``pour X->Y``, spelt as the question
    spells them) that, from empty jugs of the puzzle's capacities, leaves one jug holding the
    target: any such plan, not only the gold's."""
    import json

    puzzle = (entry.get("metadata") or {}).get("puzzle") or {}
    capacities, target = list(puzzle["jug_capacities"]), int(puzzle["target"])
    if len(answer) > MAX_CHARS * 10:
        return False
    try:
        moves = json.loads(answer)
    except (ValueError, RecursionError):
        return False
    if not isinstance(moves, list):
        return False
    jug = {chr(ord("A") + i): i for i in range(len(capacities))}
    water = [0] * len(capacities)
    for move in moves:
        found = _JUG_MOVE.fullmatch(move) if isinstance(move, str) else None
        if found is None:
            return False
        verb, one, source, dest = found.groups()
        if any(x is not None and x not in jug for x in (one, source, dest)):
            return False
        if verb == "fill":
            water[jug[one]] = capacities[jug[one]]
        elif verb == "empty":
            water[jug[one]] = 0
        else:
            i, j = jug[source], jug[dest]
            amount = min(water[i], capacities[j] - water[j])
            water[i], water[j] = water[i] - amount, water[j] + amount
    return target in water


_PRESSES = re.compile(r"[A-Z](?:\s*(?:→|->)\s*[A-Z])*")


def _quantum_lock(answer: str, entry: dict[str, Any]) -> bool:
    """A sequence of the puzzle's buttons (``A → B → C``), as short as the shortest (the gold's
    length: the question asks for the shortest), each pressed while the light allows it, that
    takes the start value to the target; the light toggles at every press."""
    meta = entry.get("metadata") or {}
    text = answer.strip()
    if len(text) > MAX_CHARS or _PRESSES.fullmatch(text) is None:
        return False
    presses = re.findall(r"[A-Z]", text)
    buttons = {b["name"]: b for b in meta["buttons"]}
    if len(presses) != len(meta["solution_path"]):
        return False
    value, light = meta["initial_value"], meta["initial_state"]
    for name in presses:
        button = buttons.get(name)
        if button is None or button["active_state"] not in ("any", light):
            return False
        step = int(button["value"])
        value = {"add": value + step, "subtract": value - step,
                 "multiply": value * step}[button["type"]]
        light = "green" if light == "red" else "red"
    return value == meta["target_value"]


#: Tasks with several right answers and the check of one (answer text, reasoning-gym entry).
CHECKS: dict[str, Check] = {
    "jugs": _jugs,
    "n_queens": _queens,
    "countdown": _countdown,
    "puzzle24": _puzzle24,
    "quantum_lock": _quantum_lock,
}


def is_right(task: str, answer: str, entry: dict[str, Any]) -> bool | None:
    """Whether ``answer`` is a right answer to ``entry`` of ``task`` by the task's rules, or
    ``None`` when ``task`` has no check here (its gold is its one right answer)."""
    check = CHECKS.get(task)
    if check is None:
        return None
    try:
        return check(answer, entry)
    except (KeyError, TypeError, ValueError):  # an entry without the data the check reads
        return False
