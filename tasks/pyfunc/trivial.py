"""The generator's own check that no trivial program earns a task: hidden answers that are not
all equal (so no constant, shown answer or shown string passes them all) and that no simple
transform of an argument reproduces. It mirrors what ``python -m envs validate`` runs in the
sandbox (the code env's baseline families and, for records with ``strict_baselines``, its
arithmetic transforms), so that a drawn task is redrawn here rather than refused there.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

Case = tuple[tuple[Any, ...], Any]  # (arguments, expected answer)

#: Each of ``envs.domains.code_tests.ARGUMENT_TRANSFORMS``, on the argument at index ``k``.
_PER_ARGUMENT: dict[str, Callable[[Any], Any]] = {
    "itself": lambda x: x,
    "empty value": lambda x: type(x)(),
    "first item": lambda x: x[0],
    "last item": lambda x: x[-1],
    "min": min,
    "max": max,
    "len": len,
    "sum": sum,
    "sorted": sorted,
    "reversed": lambda x: x[::-1],
    "is even": lambda x: x % 2 == 0,
    "is odd": lambda x: x % 2 == 1,
    "is truthy": bool,
    "as a string": str,
}
N_ARGUMENTS = 2  # the most a form takes


def _on(k: int, fn: Callable[[Any], Any]) -> Callable[..., Any]:
    return lambda *a: fn(a[k])


TRANSFORMS: dict[str, Callable[..., Any]] = {
    **{f"argument {k + 1} {name}": _on(k, fn) for k in range(N_ARGUMENTS)
       for name, fn in _PER_ARGUMENT.items()},
    "negated": lambda *a: -a[0],
    "abs": lambda *a: abs(a[0]),
    "plus 1": lambda *a: a[0] + 1,
    "minus 1": lambda *a: a[0] - 1,
    "doubled": lambda *a: a[0] * 2,
    "squared": lambda *a: a[0] * a[0],
    "sum of two": lambda *a: a[0] + a[1],
    "difference of two": lambda *a: a[0] - a[1],
    "product of two": lambda *a: a[0] * a[1],
    "upper": lambda *a: a[0].upper(),
    "lower": lambda *a: a[0].lower(),
}


def _passes_all(fn: Callable[..., Any], cases: Sequence[Case]) -> bool:
    for args, expected in cases:
        try:
            if fn(*args) != expected:
                return False
        except Exception:  # noqa: BLE001 - a transform that does not apply fails its case
            return False
    return True


#: The constants of ``envs.domains.code_tests.BASELINES``, which a transform may fall back to.
CONSTANTS: tuple[Any, ...] = (None, True, False, 0, 1, "", [], {})


def _else(fn: Callable[..., Any], fallback: Any) -> Callable[..., Any]:
    def guarded(*a: Any) -> Any:
        try:
            return fn(*a)
        except Exception:  # noqa: BLE001 - where the transform raises, the fallback answers
            return fallback
    return guarded


def trivial_payers(hidden: Sequence[Case], shown_answers: Sequence[Any] = ()) -> list[str]:
    """What pays every hidden case: "a constant" when all answers are equal, the transforms
    that reproduce them all, and a transform that falls back to a constant or a shown answer
    where it raises (``envs.domains.code_tests.fallback_baselines``). Empty for a fit task."""
    found = ["a constant"] if all(ans == hidden[0][1] for _, ans in hidden) else []
    found += [name for name, fn in TRANSFORMS.items() if _passes_all(fn, hidden)]
    fallbacks = [*CONSTANTS, *shown_answers]
    return found + [f"{name}, else {value!r}" for name, fn in TRANSFORMS.items()
                    for value in fallbacks if _passes_all(_else(fn, value), hidden)]


def _longer_than(k: int, j: int) -> Callable[..., Any]:
    def fn(*a: Any) -> bool:
        if not isinstance(a[k], list):
            raise TypeError("not a list")
        return len(a[k]) > j
    return fn


#: The generator's own extra shallow programs: a list argument's length above a bound (``k
#: in nums`` on drawn lists is True more often for long ones: ``len(nums) > 3`` earned 0.83).
LENGTH_TESTS: dict[str, Callable[..., Any]] = {
    f"argument {k + 1} longer than {j}": _longer_than(k, j) for k in range(N_ARGUMENTS)
    for j in range(8)}


def shallow_matches(cases: Sequence[Case], values: Sequence[Any] = ()) -> set[int]:
    """Which of ``cases`` each shallow program answers right, as bit masks (bit i: case i),
    one per distinct pattern: the constants (``CONSTANTS`` and ``values``: the shown and
    hidden answers), ``TRANSFORMS`` and ``LENGTH_TESTS``, and each of them falling back to
    each constant where it raises. Compared with ``==`` as the tests compare (``1`` answers ``True``)."""
    constants = {(type(v), repr(v)): v for v in (*CONSTANTS, *values)}
    equal = {sum(1 << i for i, (_, ans) in enumerate(cases) if _same(ans, value))
             for value in constants.values()}
    masks = set(equal)
    for fn in (*TRANSFORMS.values(), *LENGTH_TESTS.values()):
        ok = raised = 0
        for i, (args, ans) in enumerate(cases):
            try:
                got = fn(*args)
            except Exception:  # noqa: BLE001 - a transform that does not apply
                raised |= 1 << i
                continue
            if _same(got, ans):
                ok |= 1 << i
        masks.add(ok)
        masks.update(ok | (raised & eq) for eq in equal)
    return {m for m in masks if m}


def _same(got: Any, expected: Any) -> bool:
    try:
        return bool(got == expected)
    except Exception:  # noqa: BLE001
        return False
