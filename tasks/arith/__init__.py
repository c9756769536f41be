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

import hashlib
import random
from functools import cached_property
from pathlib import Path
from typing import Any

LEVELS = range(1, 7)
TEST_SIZE = 200  # per level, or fewer where a level has fewer distinct test problems
TEST_PERCENT = 30


def _rng(*key: Any) -> random.Random:
    seed = hashlib.sha256(repr(key).encode()).digest()[:8]
    return random.Random(int.from_bytes(seed, "big"))


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


def _is_test(expr: str) -> bool:
    return hashlib.sha256(expr.encode()).digest()[0] * 100 < TEST_PERCENT * 256


def _record(level: int, split: str, index: int, expr: str) -> dict[str, Any]:
    # eval is safe here: the expression is generated above from digits and + - * ( ).
    answer = eval(expr, {"__builtins__": {}})  # noqa: S307
    shown = expr.replace("*", "×")
    return {"id": f"L{level}-{index}" if split == "train" else f"test-L{level}-{index}",
            "question": f"What is {shown}?", "expression": expr, "answer": str(answer),
            "level": level}


class ArithGenerator:
    """The ``generator`` of the ``arith`` pack (see ``tasks.pack.Generator``)."""

    def __init__(self, level: int | None = None):
        if level is not None and level not in LEVELS:
            raise ValueError(f"level must be one of {list(LEVELS)} or omitted, got {level!r}")
        self.level = level

    @property
    def levels(self) -> list[int]:
        return [self.level] if self.level else list(LEVELS)

    @cached_property
    def _test(self) -> list[dict[str, Any]]:
        out = []
        for level in self.levels:
            rng, seen = _rng("arith-test", level), set()
            for _ in range(20_000):
                expr = _expression(level, rng)
                if _is_test(expr) and expr not in seen:
                    seen.add(expr)
                    out.append(_record(level, "test", len(seen) - 1, expr))
                    if len(seen) == TEST_SIZE:
                        break
        return out

    def size(self, split: str) -> int | None:
        return None if split == "train" else len(self._test)

    def record(self, split: str, index: int) -> dict[str, Any]:
        if split == "test":
            return self._test[index]
        level = self.levels[index % len(self.levels)]
        rng = _rng("arith-train", level, index)
        while True:
            expr = _expression(level, rng)
            if not _is_test(expr):
                return _record(level, "train", index, expr)

    def locate(self, native_id: str) -> tuple[str, int]:
        if native_id.startswith("test-"):
            matches = [i for i, r in enumerate(self._test) if r["id"] == native_id]
            if not matches:
                raise KeyError(native_id)
            return "test", matches[0]
        level, _, index = native_id.removeprefix("L").partition("-")
        if int(level) not in self.levels:
            raise KeyError(f"{native_id} is not at this pack's level(s) {self.levels}")
        i = int(index)
        if i < 0 or self.levels[i % len(self.levels)] != int(level):
            raise KeyError(native_id)
        return "train", i

    def fingerprint(self) -> str:
        return Path(__file__).read_text(encoding="utf-8") + repr(self.levels)
