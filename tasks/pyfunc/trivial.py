"""The generator's own check that no trivial program earns a task: hidden answers that are not
all equal (so no constant passes them all) and that no simple transform of the arguments
reproduces. It mirrors what ``python -m envs validate`` runs in the sandbox (the code env's
baselines and, for records with ``strict_baselines``, its transforms), so that a drawn task is
redrawn here rather than refused there.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

Case = tuple[tuple[Any, ...], Any]  # (arguments, expected answer)

TRANSFORMS: dict[str, Callable[..., Any]] = {
    "the first argument": lambda *a: a[0],
    "the first argument's empty value": lambda *a: type(a[0])(),
    "the second argument": lambda *a: a[1],
    "negated": lambda *a: -a[0],
    "abs": lambda *a: abs(a[0]),
    "plus 1": lambda *a: a[0] + 1,
    "minus 1": lambda *a: a[0] - 1,
    "doubled": lambda *a: a[0] * 2,
    "squared": lambda *a: a[0] * a[0],
    "sum of two": lambda *a: a[0] + a[1],
    "difference of two": lambda *a: a[0] - a[1],
    "product of two": lambda *a: a[0] * a[1],
    "len": lambda *a: len(a[0]),
    "sorted": lambda *a: sorted(a[0]),
    "reversed": lambda *a: a[0][::-1],
    "sum": lambda *a: sum(a[0]),
    "max": lambda *a: max(a[0]),
    "min": lambda *a: min(a[0]),
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


def trivial_payers(hidden: Sequence[Case]) -> list[str]:
    """What pays every hidden case: "a constant" when all answers are equal, and the
    transforms that reproduce them all. Empty for a fit task."""
    found = ["a constant"] if all(ans == hidden[0][1] for _, ans in hidden) else []
    return found + [name for name, fn in TRANSFORMS.items() if _passes_all(fn, hidden)]
