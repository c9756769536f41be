"""Preconditions written by hand from an MBPP prompt, where the task's own cases show too little
of it or more than it (``tasks.amplify.Precondition``; EvalPlus's MBPP+ writes such contracts
for its tasks). Only the amplifier (``python -m envs.tools.code_amplify``) reads them: every
input it tries keeps the task's precondition, and its ``seeds`` are mutated like the cases'
own. Each says why, from the prompt and the reference.
"""

from __future__ import annotations

from typing import Any

from tasks.amplify import Precondition


def _naturals(values: Any) -> bool:
    return all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in values)


def _rotated_ascending(arr: Any, low: Any, high: Any) -> bool:
    """``arr`` is an ascending list turned at one place, and ``low``/``high`` span it."""
    if not isinstance(arr, list) or not arr or low != 0 or high != len(arr) - 1:
        return False
    if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in arr):
        return False
    falls = sum(a > b for a, b in zip(arr, arr[1:], strict=False))
    return falls == 0 or falls == 1 and arr[-1] <= arr[0]


PRECONDITIONS: dict[str, Precondition] = {
    "54": Precondition(
        why="counting sort counts values in a list indexed by value: the prompt's sort is of "
            "non-negative ints (the reference indexes a negative one from the list's end and "
            "returns a wrong order; its cases are all positive)",
        holds=lambda my_list: isinstance(my_list, list) and _naturals(my_list)),
    "225": Precondition(
        why="'the minimum element in a sorted and rotated array', searched between low and "
            "high: an ascending array turned at one place, from its first index to its last "
            "(its three cases are ascending and never turned, so the first item passed them)",
        holds=_rotated_ascending,
        seeds=(([3, 4, 5, 1, 2], 0, 4), ([8, 4, 6], 0, 2), ([7, 9, 2, 3, 5], 0, 4))),
}
