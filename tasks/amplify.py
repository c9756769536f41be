"""EvalPlus-style amplified hidden tests for the HumanEval and MBPP packs: the pure parts (seeds,
type-aware input mutation, choosing the cases, writing them, reading the stored file).

How the stored cases were made (``python -m envs.tools.code_amplify``, offline, in the sandbox):

1. **Seeds**: the argument tuples of every call of the task's function, written with literal
   arguments, in its own test cases (``seed_inputs``).
2. **Mutation with the types in mind** (``mutate_inputs``): an int moves by one, to zero, to
   its negative, doubled, halved, larger; a float likewise; a string is emptied, cut,
   doubled, reversed, re-cased, padded with spaces, a character inserted, dropped or replaced;
   a list or tuple emptied, cut to one item, reversed, sorted, one item duplicated, dropped or
   mutated; a dict loses a key or a value changes. Two rounds (mutants of mutants).
3. **Staying inside the task's contract** (``Invariants``): the prompt's preconditions are not
   machine-readable, so a mutated input keeps what holds for every seed: the argument's
   types, its sign (a non-negative or positive int stays so), a string's alphabet, a
   container's least length (no empty list where every seed has items), sortedness and
   distinct items, and an int argument's order against the others and against a container's
   length (``k <= len(arr)``, ``n == len(arr)``). An honest program may do anything off the contract; the cases
   never ask it.
4. **Expected outputs from the reference, in the sandbox** (``tasks.amplify_driver``): only an
   input on which the reference returns within ``CALL_S`` without an error, a value that is
   plain data written as a literal, is kept.
5. **Cases that separate** (``select_cases``): the shallow programs of
   ``envs.domains.code_tests.task_baselines`` (constants, the shown answers, the prompt's strings,
   transforms of an argument, each falling back to a constant) and the reference's mutants
   (``tasks.mutants``: comparisons off by one, shifted bounds, swapped branches, dropped zero
   cases, and with ``extended`` swapped operators) are run on every kept input, and so is each
   shallow program behind a lookup table of the task's own cases (HumanEval's and MBPP's tests
   are public: a memorised table passes them all, so it must fail an added case); cases are
   chosen greedily so that each of them that the task's own cases let pass in full fails one,
   then so that no shallow program passes more than half of the graded cases where the inputs
   allow it, then up to ``MIN_GRADED`` graded cases; at most ``MAX_ADDED`` cases a task.

The result is stored per pack (``tasks/<pack>/amplified.json``) with its provenance, and the
pack's loader appends each task's cases to its hidden tests (``amplified_tests``).
"""

from __future__ import annotations

import ast
import contextlib
import json
import math
import random
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: Inputs tried per task (seeds and mutants), the most cases added to a task, and the time
#: the reference may take on one input inside the sandbox (far under the grader's per-case
#: limit, so that a slow container does not fail the reference).
POOL = 160
MAX_ADDED = 8
#: Graded cases a task gets at least (its hidden ones and the added ones), where the inputs
#: allow: a task with one hidden case (humaneval/34) grades on more than one input.
MIN_GRADED = 4
CALL_S = 0.25
#: The most a shallow program may pass of a task's graded cases, where the inputs allow it
#: (the issue's rule for partially graded code).
SHALLOW_MAX = 0.5
#: Longest ``repr`` of an input or an expected value kept in a case.
MAX_CHARS = 400
FLOAT_TOLERANCE = 1e-6


def literal_args(call: ast.Call) -> tuple[Any, ...] | None:
    if call.keywords or any(isinstance(a, ast.Starred) for a in call.args):
        return None
    try:
        return tuple(ast.literal_eval(a) for a in call.args)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None


def seed_inputs(cases: Iterable[str], name: str) -> list[tuple[Any, ...]]:
    """The distinct argument tuples of every call of ``name`` with literal arguments."""
    seen: dict[str, tuple[Any, ...]] = {}
    for case in cases:
        try:
            tree = ast.parse(case)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                    and node.func.id == name:
                args = literal_args(node)
                if args is not None and len(repr(args)) <= MAX_CHARS:
                    seen.setdefault(repr(args), args)
    return list(seen.values())


# -- the contract a mutated input keeps ----------------------------------------------------------
def _kind(value: Any) -> str:
    return type(value).__name__


@dataclass
class Shape:
    """What holds for every seed value at one place (an argument, or the items of a
    container): its kinds, and for numbers, strings and containers their bounds."""
    kinds: set[str] = field(default_factory=set)
    lo: float = math.inf
    hi: float = -math.inf
    chars: set[str] = field(default_factory=set)
    min_len: int = 1 << 30
    max_len: int = 0
    sorted_up: bool = True
    sorted_down: bool = True
    distinct: bool = True
    items: Shape | None = None
    keys: Shape | None = None

    def add(self, value: Any) -> None:
        self.kinds.add(_kind(value))
        if isinstance(value, bool) or value is None:
            return
        if isinstance(value, int | float):
            self.lo, self.hi = min(self.lo, value), max(self.hi, value)
        elif isinstance(value, str):
            self.chars.update(value)
            self._length(value)
        elif isinstance(value, list | tuple | set | frozenset | dict):
            self._length(value)
            items = list(value.values()) if isinstance(value, dict) else list(value)
            if isinstance(value, dict):
                self.keys = self.keys or Shape()
                for k in value:
                    self.keys.add(k)
            self.items = self.items or Shape()
            for item in items:
                self.items.add(item)
            if isinstance(value, list | tuple) and len(items) >= 2:
                try:
                    self.sorted_up &= all(a <= b for a, b in zip(items, items[1:], strict=False))
                    self.sorted_down &= all(a >= b for a, b in zip(items, items[1:], strict=False))
                except TypeError:
                    self.sorted_up = self.sorted_down = False
                try:
                    self.distinct &= len(set(map(_hashable, items))) == len(items)
                except TypeError:
                    self.distinct = False

    def _length(self, value: Sized) -> None:
        self.min_len, self.max_len = min(self.min_len, len(value)), max(self.max_len, len(value))

    def allows(self, value: Any) -> bool:
        # An int where the seeds have floats (or the reverse) is the same kind of number.
        number = (self.kinds & {"int", "float"} and _kind(value) in ("int", "float")
                  and not isinstance(value, bool))
        if _kind(value) not in self.kinds and not number:
            return False
        if isinstance(value, bool) or value is None:
            return True
        if isinstance(value, int | float):
            if not math.isfinite(value):
                return False
            if self.lo >= 0 and value < 0 or self.lo >= 1 and value < 1:
                return False
            if self.hi <= 0 and value > 0 or self.hi <= -1 and value > -1:
                return False
            span = max(abs(self.lo), abs(self.hi), 1)
            return abs(value) <= 4 * span + 10
        if isinstance(value, str):
            return (set(value) <= self.chars and self._length_ok(value))
        if isinstance(value, list | tuple | set | frozenset | dict):
            if not self._length_ok(value):
                return False
            items = list(value.values()) if isinstance(value, dict) else list(value)
            if isinstance(value, dict) and self.keys and not all(self.keys.allows(k)
                                                                 for k in value):
                return False
            if items and (self.items is None or not all(self.items.allows(i) for i in items)):
                return False
            if isinstance(value, list | tuple) and len(items) >= 2:
                try:
                    if self.sorted_up and self.max_len >= 3 and not all(
                            a <= b for a, b in zip(items, items[1:], strict=False)):
                        return False
                    if self.sorted_down and self.max_len >= 3 and not all(
                            a >= b for a, b in zip(items, items[1:], strict=False)):
                        return False
                    if self.distinct and self.max_len >= 3 and len(
                            set(map(_hashable, items))) != len(items):
                        return False
                except TypeError:
                    return False
            return True
        return False

    def _length_ok(self, value: Sized) -> bool:
        if len(value) < min(self.min_len, 1) or (self.min_len >= 1 and len(value) == 0):
            return False
        return len(value) <= 2 * self.max_len + 4


Sized = Any  # a str or a container


def _hashable(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((repr(k), _hashable(v)) for k, v in value.items()))
    if isinstance(value, set):
        return frozenset(value)
    return value


@dataclass
class Invariants:
    """Per argument, its ``Shape``; and the orders (equal, less, at most) between int
    arguments, and between an int argument and a container's length, that every seed
    keeps."""
    arity: int
    shapes: list[Shape]
    relations: list[tuple[str, int, int]]  # ("eq"|"le"|"lt", optionally "_len", i, j)

    @classmethod
    def of(cls, seeds: Sequence[tuple[Any, ...]]) -> Invariants:
        arity = len(seeds[0])
        shapes = [Shape() for _ in range(arity)]
        for seed in seeds:
            for shape, value in zip(shapes, seed, strict=True):
                shape.add(value)
        relations = []
        for i in range(arity):
            for j in range(arity):
                if i == j:
                    continue
                pairs = [(s[i], s[j]) for s in seeds]
                if all(_int(a) and _int(b) for a, b in pairs):
                    if all(a == b for a, b in pairs):
                        relations.append(("eq", i, j))
                    elif all(a < b for a, b in pairs):
                        relations.append(("lt", i, j))
                    elif all(a <= b for a, b in pairs):
                        relations.append(("le", i, j))
                elif all(_int(a) and hasattr(b, "__len__") for a, b in pairs):
                    if all(a == len(b) for a, b in pairs):
                        relations.append(("eq_len", i, j))
                    elif all(a < len(b) for a, b in pairs):
                        relations.append(("lt_len", i, j))
                    elif all(a <= len(b) for a, b in pairs):
                        relations.append(("le_len", i, j))
        return cls(arity, shapes, relations)

    def repaired(self, args: tuple[Any, ...], changed: int) -> tuple[Any, ...]:
        """``args`` after argument ``changed`` moved, with the equalities put back: an int
        argument equal to another (or to a container's length) in every seed follows it."""
        out = list(args)
        for rel, i, j in self.relations:
            if rel.startswith("eq") and i != changed:
                with contextlib.suppress(TypeError):  # no length: allows() refuses it
                    out[i] = len(out[j]) if rel == "eq_len" else out[j]
        return tuple(out)

    def allows(self, args: tuple[Any, ...]) -> bool:
        if len(args) != self.arity:
            return False
        if not all(shape.allows(v) for shape, v in zip(self.shapes, args, strict=True)):
            return False
        for rel, i, j in self.relations:
            a, b = args[i], args[j]
            right = len(b) if rel.endswith("_len") else b
            if (rel.startswith("lt") and not a < right or rel.startswith("le") and not a <= right
                    or rel.startswith("eq") and a != right):
                return False
        return True


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# -- mutation ------------------------------------------------------------------------------------
def _mutate_number(v: int | float, rng: random.Random) -> list[Any]:
    out: list[Any]
    if isinstance(v, int):
        out = [v + 1, v - 1, 0, 1, -v, 2 * v, v // 2, v + rng.randint(2, 20), v * 10 + 7,
               rng.randint(-abs(v) - 5, abs(v) + 5)]
    else:
        out = [v + 0.5, v - 0.5, 0.0, -v, 2 * v, round(v / 2, 3), round(v + rng.uniform(-3, 3), 2)]
    return out


def _mutate_str(s: str, rng: random.Random, alphabet: str) -> list[str]:
    out = ["", s[::-1], s + s, s[1:], s[:-1], s.upper(), s.lower(), s.swapcase(),
           s.capitalize(), " " + s, s + " ", "".join(sorted(s))]
    pool = alphabet or s or "a"
    for _ in range(3):
        at = rng.randint(0, len(s))
        out.append(s[:at] + rng.choice(pool) + s[at:])
        if s:
            at = rng.randrange(len(s))
            out.append(s[:at] + s[at + 1:])
            out.append(s[:at] + rng.choice(pool) + s[at + 1:])
            out.append(s[:at] + s[at] + s[at:])
    return out


def _mutate_seq(seq: list | tuple, rng: random.Random, items: Shape | None) -> list[Any]:
    kind = type(seq)
    xs = list(seq)
    out: list[list[Any]] = [[], xs[:1], xs[::-1], xs[1:], xs[:-1]]
    with contextlib.suppress(TypeError):  # items that do not compare
        out += [sorted(xs), sorted(xs, reverse=True)]
    shuffled = xs[:]
    rng.shuffle(shuffled)
    out.append(shuffled)
    if xs:
        at = rng.randrange(len(xs))
        out.append(xs[:at] + [xs[at]] + xs[at:])
        out.append(xs[:at] + xs[at + 1:])
        for _ in range(3):
            at = rng.randrange(len(xs))
            for new in rng.sample(mutate_value(xs[at], rng, items), k=min(3, len(
                    mutate_value(xs[at], rng, items)))):
                out.append(xs[:at] + [new] + xs[at + 1:])
        out.append(xs + [rng.choice(mutate_value(xs[-1], rng, items) or [xs[-1]])])
    return [kind(x) for x in out]


def mutate_value(value: Any, rng: random.Random, shape: Shape | None = None) -> list[Any]:
    """Type-aware mutants of one value (some may break the contract: ``Invariants`` sorts
    them out)."""
    if isinstance(value, bool):
        return [not value]
    if isinstance(value, int | float):
        return _mutate_number(value, rng)
    if isinstance(value, str):
        alphabet = "".join(sorted(shape.chars)) if shape is not None else ""
        return _mutate_str(value, rng, alphabet)
    if isinstance(value, list | tuple):
        return _mutate_seq(value, rng, shape.items if shape is not None else None)
    if isinstance(value, dict):
        out: list[Any] = [{}]
        keys = list(value)
        for k in keys:
            out.append({a: b for a, b in value.items() if a != k})
            for new in mutate_value(value[k], rng, shape.items if shape else None)[:3]:
                out.append({**value, k: new})
        return out
    return []


def mutate_inputs(seeds: Sequence[tuple[Any, ...]], seed: str, pool: int = POOL
                  ) -> list[tuple[Any, ...]]:
    """Up to ``pool`` new argument tuples (none a seed), each keeping ``Invariants.of(seeds)``:
    one argument mutated at a time, from the seeds and then from their mutants."""
    if not seeds or len({len(s) for s in seeds}) != 1:
        return []
    rng = random.Random(f"amplify:{seed}")
    inv = Invariants.of(seeds)
    known = {repr(s) for s in seeds}
    found: dict[str, tuple[Any, ...]] = {}

    def grow(parents: Sequence[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
        new = []
        for parent in parents:
            for i, value in enumerate(parent):
                for mutated in mutate_value(value, rng, inv.shapes[i]):
                    args = inv.repaired(parent[:i] + (mutated,) + parent[i + 1:], i)
                    text = repr(args)
                    if text in known or text in found or len(text) > MAX_CHARS:
                        continue
                    try:
                        ok = inv.allows(args) and ast.literal_eval(text) == args
                    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                        ok = False
                    if ok:
                        found[text] = args
                        new.append(args)
        return new

    first = grow(seeds)
    rng.shuffle(first)
    grow(first[: max(8, pool // 4)])
    chosen = list(found.values())
    if len(chosen) > pool:
        # Keep every first-round input that fits, then a sample of the second round.
        firsts = {repr(a) for a in first}
        head = [a for a in chosen if repr(a) in firsts][:pool]
        rest = [a for a in chosen if repr(a) not in firsts]
        chosen = head + rng.sample(rest, k=max(0, min(len(rest), pool - len(head))))
    return chosen


# -- choosing the cases --------------------------------------------------------------------------
@dataclass(frozen=True)
class Adversary:
    name: str
    shallow: bool  # a shallow program (else a mutant of the reference)
    passes_own: int  # of the task's graded cases (those it was not run on included)
    agrees: str  # per candidate input: "1" returns the reference's value, "0" not, "-" none,
    # "t" not run (after its third timeout): never counted as failed
    #: A shallow program behind a lookup table of the task's own (public) cases: it passes
    #: them all, and must fail an added one. Not held to ``shallow_max``: with its own cases
    #: memorised it would take more added cases than ``MAX_ADDED`` allows.
    memorised: bool = False


def select_cases(adversaries: Sequence[Adversary], n_graded: int, usable: Sequence[int],
                 max_added: int = MAX_ADDED, shallow_max: float = SHALLOW_MAX,
                 min_graded: int = MIN_GRADED) -> list[int]:
    """Indices of candidate inputs (of ``usable``) to add: first, greedily, each adversary that
    passes every graded case so far gets one it fails (the input that fails most of those
    left); then, while a shallow program passes more than ``shallow_max`` of the graded cases,
    the input that the most of those fail (ties: the one most adversaries fail); then, while
    the task has fewer than ``min_graded`` graded cases, the input most adversaries fail."""
    chosen: list[int] = []
    usable = list(usable)

    def passed(a: Adversary) -> int:  # an input it was not run on ("t") may pass
        return a.passes_own + sum(a.agrees[i] in "1t" for i in chosen)

    def total() -> int:
        return n_graded + len(chosen)

    def kills(i: int, group: Sequence[Adversary]) -> int:
        return sum(a.agrees[i] == "0" for a in group)

    while len(chosen) < max_added:
        alive = [a for a in adversaries if passed(a) == total()
                 and any(a.agrees[i] == "0" for i in usable if i not in chosen)]
        if not alive:
            break
        best = max((i for i in usable if i not in chosen),
                   key=lambda i: (kills(i, alive), kills(i, adversaries), -i))
        if kills(best, alive) == 0:
            break
        chosen.append(best)
    while len(chosen) < max_added:
        over = [a for a in adversaries if a.shallow and passed(a) > shallow_max * total()]
        if not over:
            break
        left = [i for i in usable if i not in chosen]
        if not left:
            break
        best = max(left, key=lambda i: (kills(i, over), kills(i, adversaries), -i))
        if kills(best, over) == 0:
            break
        chosen.append(best)
    while len(chosen) < max_added and total() < min_graded:
        left = [i for i in usable if i not in chosen]
        if not left:
            break
        chosen.append(max(left, key=lambda i: (kills(i, adversaries), -i)))
    return chosen


# -- cases as code -------------------------------------------------------------------------------
def render_case(name: str, args: tuple[Any, ...], expected: Any) -> str:
    """``assert name(args) == expected``; a float answer within ``FLOAT_TOLERANCE`` (relative
    beyond 1), as HumanEval's own float checks are written."""
    call = f"{name}({', '.join(repr(a) for a in args)})"
    if isinstance(expected, float):
        bound = FLOAT_TOLERANCE * max(1.0, abs(expected))
        return f"assert abs({call} - {expected!r}) <= {bound!r}"
    return f"assert {call} == {expected!r}"


# -- the stored file -----------------------------------------------------------------------------
def read(path: Path) -> dict[str, Any]:
    """The stored amplification of a pack (``{"provenance": ..., "tasks": {id: ...}}``); an
    empty one when the file is absent (a checkout without it grades the task's own cases)."""
    if not path.is_file():
        return {"provenance": {}, "tasks": {}}
    return json.loads(path.read_text(encoding="utf-8"))


def amplified_tests(stored: dict[str, Any], task_id: str) -> list[str]:
    entry = stored.get("tasks", {}).get(task_id) or {}
    return list(entry.get("tests") or [])


def restored(stored: dict[str, Any], task_id: str) -> bool:
    """Whether a task left out as shallow-payable is safe with its amplified cases: no shallow
    program and no mutant of its reference passed them all (``safe`` in the file)."""
    entry = stored.get("tasks", {}).get(task_id) or {}
    return bool(entry.get("safe"))


def amplified_splits(records: Iterable[tuple[str, dict[str, Any]]], path: Path, *,
                     left_out: Collection[str], dropped: Collection[str] = ()
                     ) -> dict[str, list[dict[str, Any]]]:
    """A code pack's splits from its ``(split, record)`` pairs, each record with its amplified
    cases from ``path`` (``with_amplified``): a task in ``dropped`` is never in them, one in
    ``left_out`` only when its amplified cases are ``restored``."""
    stored = read(path)
    splits: dict[str, list[dict[str, Any]]] = {"train": [], "test": []}
    for split, rec in records:
        native = str(rec["id"])
        if native in dropped or (native in left_out and not restored(stored, native)):
            continue
        splits[split].append(with_amplified(rec, stored))
    return splits


def with_amplified(rec: dict[str, Any], stored: dict[str, Any]) -> dict[str, Any]:
    """``rec`` with its amplified cases appended to ``tests`` (hidden: they are never shown),
    and ``mutant_edits``: the reference's mutants (``tasks.mutants``, ``extended``) that differ
    from it on some input, as ``[index, edit]``, which the code env rebuilds for ``validate``
    and the report card (``envs.domains.code_tests.mutant_programs``)."""
    entry = stored.get("tasks", {}).get(str(rec["id"])) or {}
    added = list(entry.get("tests") or [])
    if not added and not entry.get("mutant_edits"):
        return rec
    out = {**rec, "tests": list(rec["tests"]) + added}
    if entry.get("mutant_edits"):
        out["mutant_edits"] = [list(e) for e in entry["mutant_edits"]]
    return out
