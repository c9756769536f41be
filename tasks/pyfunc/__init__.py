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
from the reference body, stored as ``canonical_solution``. The hidden cases are chosen from a
pool of drawn inputs (``select_hidden``) so that:

- the form's edges are among them (``Form.edges``: zero, a threshold and its neighbour, the
  ends of a range, the empty input);
- every one-edge mutant of the reference (``tasks.mutants``: a comparison off by one, a
  threshold or loop end shifted, a swapped branch, a dropped zero case) that differs from it
  on the pool answers one of them wrong; those mutants are stored as ``mutants``, and
  ``python -m envs validate`` grades them in the sandbox (``CodeTestsEnv.mutants_passed``);
- no shallow program answers more than half of them (``SHALLOW_MAX``; ``tasks.pyfunc.trivial``:
  a constant, a shown or hidden answer, a simple transform of the arguments, a transform that
  falls back to a constant): a True/False task has three of each, a cap three cases on either
  side. The records ask the code env to check the same in the sandbox (``strict_baselines``).

A function for which no such choice is found is drawn again.

The split hashes the reference body with its arguments, not the function's name or the
inputs: two tasks asking the same function are in the same split.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tasks.mutants import Mutant, mutants
from tasks.procedural import HashSplitGenerator, check_level
from tasks.pyfunc.forms import GENERIC_NAMES, LEVEL1, LEVEL2, LEVEL3, LEVEL4, Form, Params
from tasks.pyfunc.sequences import LEVEL5, LEVEL6
from tasks.pyfunc.trivial import Case, shallow_matches

FORMS: dict[int, tuple[Form, ...]] = {1: LEVEL1, 2: LEVEL2, 3: LEVEL3, 4: LEVEL4, 5: LEVEL5,
                                      6: LEVEL6}
LEVELS = range(1, 7)
N_SHOWN = 2
N_HIDDEN = 6
#: Pools of inputs drawn per drawn function before its parameters are drawn again.
INPUT_TRIES = 5
#: Distinct inputs per pool, of which the hidden cases are chosen.
POOL = 20
#: The most of a task's hidden cases any shallow program may answer right.
SHALLOW_MAX = 0.5
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


def _cases(form: Form, params: Params, fn: Callable[..., Any], source: str,
           rng: random.Random) -> tuple[list[Case], list[Mutant]] | None:
    """``N_SHOWN + N_HIDDEN`` cases on distinct inputs (the shown ones first) and the mutants
    they catch, or None when no choice of hidden cases is fit (see ``select_hidden``)."""
    edges: list[tuple[Any, ...]] = []
    for args in form.edges(params):
        if args not in edges:
            edges.append(args)
    pool: list[tuple[Any, ...]] = []
    for _ in range(10 * POOL):
        args = form.inputs(rng, params)
        if args not in edges and args not in pool:
            pool.append(args)
            if len(pool) == POOL:
                break
    if len(pool) < N_SHOWN + N_HIDDEN:
        return None
    shown = [(args, fn(*args)) for args in pool[:N_SHOWN]]
    candidates = [(args, fn(*args)) for args in edges + pool[N_SHOWN:]]
    caught = _live_mutants(source, candidates + shown)
    hidden = select_hidden(candidates, len(edges), [a for _, a in shown],
                           [kills for _, kills in caught], rng)
    if hidden is None:
        return None
    return shown + [candidates[i] for i in hidden], [m for m, _ in caught]


@functools.lru_cache(maxsize=1024)
def _mutant_functions(source: str) -> tuple[tuple[Mutant, Callable[..., Any]], ...]:
    out = []
    for mutant in mutants(source):
        namespace: dict[str, Any] = {}
        # Our own reference with one edit, never outside text.
        exec(compile(mutant.source, "<mutant>", "exec"), namespace)  # noqa: S102
        out.append((mutant, namespace["ref"]))
    return tuple(out)


def _live_mutants(source: str, cases: list[Case]) -> list[tuple[Mutant, int]]:
    """The reference's one-edge mutants (``tasks.mutants``) that answer some of ``cases``
    wrong, each with the mask of the cases it answers wrong (the shown ones are the last)."""
    out = []
    for mutant, wrong_fn in _mutant_functions(source):
        kills = 0
        for i, (args, expected) in enumerate(cases):
            try:
                wrong = wrong_fn(*args) != expected
            except Exception:  # noqa: BLE001 - a mutant that raises answers wrong
                wrong = True
            kills |= wrong << i
        if kills & ((1 << (len(cases) - N_SHOWN)) - 1):
            out.append((mutant, kills))
    return out


def select_hidden(candidates: list[Case], n_edges: int, shown_answers: list[Any],
                  mutant_kills: list[int], rng: random.Random) -> list[int] | None:
    """``N_HIDDEN`` indices of ``candidates`` (the first ``n_edges`` always among them, in a
    shuffled order) such that every mutant answers one of them wrong and no shallow program
    (``shallow_matches``) answers more than ``SHALLOW_MAX`` of them right; None if the greedy
    choice (mutants caught first, then the fewest shallow matches) finds none."""
    masks = sorted(shallow_matches(candidates, [a for _, a in candidates] + shown_answers))
    chosen = list(range(n_edges))
    picked = sum(1 << i for i in chosen)
    # Per shallow program: how many chosen cases it answers right.
    counts = [bin(m & picked).count("1") for m in masks]
    missed = [k for k in mutant_kills if not k & picked]

    def cost(i: int) -> tuple[int, int]:
        bit = 1 << i
        return (sum(1 for k in missed if not k & bit),
                max((c + (m & bit > 0) for m, c in zip(masks, counts, strict=True)), default=0))

    rest = list(range(n_edges, len(candidates)))
    rng.shuffle(rest)
    while len(chosen) < N_HIDDEN and rest:
        best = min(rest, key=cost)
        rest.remove(best)
        chosen.append(best)
        bit = 1 << best
        counts = [c + (m & bit > 0) for m, c in zip(masks, counts, strict=True)]
        missed = [k for k in missed if not k & bit]
    if len(chosen) < N_HIDDEN or missed or max(counts, default=0) > SHALLOW_MAX * N_HIDDEN:
        return None
    rng.shuffle(chosen)
    return chosen


def _assert(name: str, case: Case) -> str:
    args, expected = case
    return f"assert {name}({', '.join(map(repr, args))}) == {expected!r}"


def draw_task(level: int, rng: random.Random, wanted: Callable[[str], bool] | None = None
              ) -> tuple[str, dict[str, Any] | None]:
    """One task of ``level``: its split key and its record fields (no id); the fields are None
    when ``wanted`` refuses the key (the cases are the costly part)."""
    while True:
        form = rng.choice(FORMS[level])
        params = form.params(rng)
        body = form.body.format(**params)
        key = f"{', '.join(form.args)}\n{body}"
        if wanted is not None and not wanted(key):
            return key, None
        fn = _reference(form.args, body)
        source = _source("ref", form.args, body)
        for _ in range(INPUT_TRIES):
            drawn = _cases(form, params, fn, source, rng)
            if drawn is not None:
                cases, caught = drawn
                break
        else:
            continue
        pool = GENERIC_NAMES if rng.random() < GENERIC_SHARE else form.names
        name = rng.choice(pool)
        tests = [_assert(name, case) for case in cases]
        signature = f"{name}({', '.join(form.args)})"
        return key, {
            "text": f"Write a function `{signature}` that {form.spec.format(**params)}.",
            "examples": "\n".join(tests[:N_SHOWN]),
            "tests": tests,
            "shown_tests": tests[:N_SHOWN],
            "entry_point": name,
            "canonical_solution": _source(name, form.args, body),
            "strict_baselines": True,
            # The one-edge mutants the hidden cases catch, checked again in the sandbox by
            # ``python -m envs validate`` (``CodeTestsEnv.trivially_passed``).
            "mutants": [{"edit": m.edit, "program": m.source.replace("def ref(", f"def {name}(", 1)}
                        for m in caught],
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
        key, fields = draw_task(combo[0], rng)
        assert fields is not None
        return key, fields

    def draw(self, combo: tuple[Any, ...], rng: random.Random, wanted: Callable[[str], bool]
             ) -> tuple[str, dict[str, Any] | None]:
        return draw_task(combo[0], rng, wanted)

    def source_files(self) -> list[Path]:
        here = Path(__file__).parent
        return [here / f for f in ("__init__.py", "forms.py", "sequences.py", "trivial.py")]
