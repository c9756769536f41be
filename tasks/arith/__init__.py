"""Procedural arithmetic: from single-digit addition up to multi-step expressions.

Levels (``level=`` pack option; omitted means all levels mixed):

1. single-digit addition            ``3 + 5``
2. two-digit addition               ``47 + 38``
3. addition and subtraction         ``82 - 47 + 15``
4. multiplication                   ``7 * 46``
5. three operations, no brackets    ``12 + 7 * 8 - 5``
6. brackets and four operations     ``(14 - 6) * (3 + 9) - 7``

Train ids ``L<level>-<index>`` are unbounded; the test split is fixed. The two never share a
problem: every expression is assigned to one split by a stable hash of its text.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from tasks.procedural import HashSplitGenerator, check_level

LEVELS = range(1, 7)


def _expression(level: int, rng: random.Random) -> str:
    d = rng.randint
    if level == 1:
        return f"{d(0, 9)} + {d(0, 9)}"
    if level == 2:
        return f"{d(10, 99)} + {d(10, 99)}"
    if level == 3:
        return f"{d(10, 99)} {rng.choice('+-')} {d(10, 99)} {rng.choice('+-')} {d(1, 99)}"
    if level == 4:
        return f"{d(2, 9)} * {d(11, 99)}"
    if level == 5:
        ops = [rng.choice("+-*") for _ in range(3)]
        nums = [d(1, 20) for _ in range(4)]
        return " ".join(f"{n} {o}" for n, o in zip(nums, ops, strict=False)) + f" {nums[-1]}"
    a, b, c, e, f = (d(1, 15) for _ in range(5))
    return f"({a} {rng.choice('+-')} {b}) * ({c} {rng.choice('+-')} {e}) {rng.choice('+-')} {f}"


class ArithGenerator(HashSplitGenerator):
    """The ``generator`` of the ``arith`` pack (see ``tasks.pack.Generator``)."""

    name = "arith"
    test_size = 200  # per level, or fewer where a level has fewer distinct test problems
    test_percent = 30
    test_attempts = 20_000

    def __init__(self, level: int | None = None):
        check_level(level, LEVELS)
        self.level = level
        self.combos = [(lv,) for lv in ([level] if level else LEVELS)]

    def build(self, combo: tuple[Any, ...], rng: random.Random) -> tuple[str, dict[str, Any]]:
        (level,) = combo
        expr = _expression(level, rng)
        # eval is safe here: the expression is generated above from digits and + - * ( ).
        answer = eval(expr, {"__builtins__": {}})  # noqa: S307
        return expr, {"question": f"What is {expr.replace('*', '×')}?", "expression": expr,
                      "answer": str(answer), "level": level}

    def source_files(self) -> list[Path]:
        return [Path(__file__)]
