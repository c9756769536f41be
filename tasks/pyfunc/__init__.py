"""Procedural Python functions, graded by hidden test cases (``grpo/CodeTests-v0``).

Levels (``level=`` pack option; omitted means all levels mixed):

1. one int argument, one arithmetic expression  ``scale_add(x)``: x times 3 plus 2
2. two arguments, an expression of a few ops     ``combine(x, y)``: x times 2 plus y times 5
3. a branch (if/else, min/max, parity, sign)     ``parity(n)``: 'even' or 'odd'
4. a loop or accumulation                        ``count_multiples(n)``: multiples of 3 in 1..n
5. strings (counts, slices, case, affixes)       ``prefix(s)``: the first 3 characters
6. lists of ints (filter, map, sums, extremes)   ``sum_evens(nums)``

Each task shows the signature, a one-line spec and two examples as asserts (``shown_tests``:
they run but earn nothing); six hidden asserts on other inputs are graded. The answers come
from the reference body, stored as ``canonical_solution``. A task is drawn again until no
trivial program pays its hidden cases: the answers are not all equal and no simple transform
of the arguments gives them (``tasks.pyfunc.trivial``); the records also ask the code env to
run its transforms in ``python -m envs validate`` (``strict_baselines``).

The split hashes the reference body with its arguments, not the function's name or the
inputs: two tasks asking the same function are in the same split.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tasks.procedural import HashSplitGenerator, check_level
from tasks.pyfunc.forms import GENERIC_NAMES, LEVEL1, LEVEL2, LEVEL3, LEVEL4, Form, Params
from tasks.pyfunc.sequences import LEVEL5, LEVEL6
from tasks.pyfunc.trivial import Case, trivial_payers

FORMS: dict[int, tuple[Form, ...]] = {1: LEVEL1, 2: LEVEL2, 3: LEVEL3, 4: LEVEL4, 5: LEVEL5,
                                      6: LEVEL6}
LEVELS = range(1, 7)
N_SHOWN = 2
N_HIDDEN = 6
#: Input draws per drawn function before its parameters are drawn again.
INPUT_TRIES = 20
GENERIC_SHARE = 0.25  # of tasks named compute/f/solve..., so the name is no reliable hint


@functools.lru_cache(maxsize=4096)
def _reference(args: tuple[str, ...], body: str) -> Callable[..., Any]:
    namespace: dict[str, Any] = {}
    # exec is safe here: the source is a body of this package's forms with integer or
    # one-character parameters, never outside text.
    exec(compile(_source("ref", args, body), "<pyfunc>", "exec"), namespace)  # noqa: S102
    return namespace["ref"]


def _source(name: str, args: tuple[str, ...], body: str) -> str:
    lines = "".join(f"    {line}\n" for line in body.split("\n"))
    return f"def {name}({', '.join(args)}):\n{lines}"


def _cases(form: Form, params: Params, fn: Callable[..., Any], rng: random.Random
           ) -> list[Case] | None:
    """``N_SHOWN + N_HIDDEN`` cases on distinct inputs, the form's edges among the hidden ones,
    or None when the draws repeat."""
    edges = [(args, fn(*args)) for args in form.edges(params)]
    cases: list[Case] = []
    seen: set[str] = {repr(args) for args, _ in edges}
    for _ in range(10 * (N_SHOWN + N_HIDDEN)):
        args = form.inputs(rng, params)
        if repr(args) not in seen:
            seen.add(repr(args))
            cases.append((args, fn(*args)))
            if len(cases) + len(edges) == N_SHOWN + N_HIDDEN:
                return cases[:N_SHOWN] + edges + cases[N_SHOWN:]
    return None


def _assert(name: str, case: Case) -> str:
    args, expected = case
    return f"assert {name}({', '.join(map(repr, args))}) == {expected!r}"


def draw_task(level: int, rng: random.Random) -> tuple[str, dict[str, Any]]:
    """One task of ``level``: its split key and its record fields (no id)."""
    while True:
        form = rng.choice(FORMS[level])
        params = form.params(rng)
        body = form.body.format(**params)
        fn = _reference(form.args, body)
        for _ in range(INPUT_TRIES):
            cases = _cases(form, params, fn, rng)
            if cases is not None and not trivial_payers(
                    cases[N_SHOWN:], [answer for _, answer in cases[:N_SHOWN]]):
                break
        else:
            continue
        pool = GENERIC_NAMES if rng.random() < GENERIC_SHARE else form.names
        name = rng.choice(pool)
        tests = [_assert(name, case) for case in cases]
        signature = f"{name}({', '.join(form.args)})"
        return f"{', '.join(form.args)}\n{body}", {
            "text": f"Write a function `{signature}` that {form.spec.format(**params)}.",
            "examples": "\n".join(tests[:N_SHOWN]),
            "tests": tests,
            "shown_tests": tests[:N_SHOWN],
            "entry_point": name,
            "canonical_solution": _source(name, form.args, body),
            "strict_baselines": True,
            "level": level,
            "form": form.names[0],  # which kind of function, for per-form scores
        }


class PyFuncGenerator(HashSplitGenerator):
    """The ``generator`` of the ``pyfunc`` pack (see ``tasks.pack.Generator``)."""

    name = "pyfunc"
    test_size = 40  # per level, or fewer where a level has fewer distinct test functions
    test_percent = 30
    test_attempts = 3000

    def __init__(self, level: int | None = None):
        check_level(level, LEVELS)
        self.level = level
        self.combos = [(lv,) for lv in ([level] if level else LEVELS)]

    def build(self, combo: tuple[Any, ...], rng: random.Random) -> tuple[str, dict[str, Any]]:
        (level,) = combo
        return draw_task(level, rng)

    def source_files(self) -> list[Path]:
        here = Path(__file__).parent
        return [here / f for f in ("__init__.py", "forms.py", "sequences.py", "trivial.py")]
