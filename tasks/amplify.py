"""EvalPlus-style amplified hidden tests for the HumanEval and MBPP packs: the pure parts (seeds,
type-aware input mutation, choosing the cases, writing them, reading the stored file).

How the stored cases were made (``python -m envs.tools.code_amplify``, offline, in the sandbox):

1. **Seeds**: the argument tuples of every call of the task's function, written with literal
   arguments, in its own test cases (``seed_inputs``).
2. **Mutation with the types in mind** (``mutate_inputs``): an int moves by one, to zero, to
   its negative, doubled, halved, larger; a float likewise; a string is emptied, cut,
   doubled, reversed, re-cased, padded with spaces, a character inserted, dropped or replaced;
   a list or tuple emptied, cut to one item, reversed, sorted, one item duplicated, dropped or
   mutated; a dict loses a key or a value changes; an argument takes the value another seed
   has there, and two arguments of one kind swap. Two rounds (mutants of mutants), the
   shortest inputs first.
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
   cases, and with ``extended`` swapped operators) are run on every kept input. HumanEval's
   and MBPP's tests are public, so each of them is also taken behind a lookup table of the
   task's own cases, which it then passes all: only the added cases (``unpublished_tests``)
   tell it apart, and the code env pays at most the share of those passed. Cases are chosen
   greedily so that each adversary that the task's own cases let pass in full fails one,
   then up to ``MIN_GRADED`` graded cases, and last so that no shallow program (nor a lookup
   program answering an unknown input as the nearest public one) passes more than half of
   the added cases; at most ``MAX_ADDED`` cases a task, and ``HALF_RULE_EXTRA`` more for the
   half rule. A task where a memorised shallow program still
   earns more than half (``memorised_share``) leaves its pack, with the reason stored
   (``left_out``).
6. **A shallow program that is the answer** (``equivalent_shallow``): ``sorted`` for a merge
   sort, ``len`` for strlen. One that returns the reference's value on every input tried,
   and also on inputs off the contract (``probe_inputs``: the arguments' kinds and sizes
   only, so ``return a`` for a minimum whose seeds all have a <= b is found out), is the
   task's answer by another route, as EvalPlus would pass it: it is no adversary of the
   task, which stays in its pack, and the code env does not try it as a shallow program
   there (``equivalent_shallow`` in the file). There the probes are the function's own
   inputs: ``PROBE_CASES`` of them become cases (``choose_probes``), and the answer's near
   misses (``envs.tools.code_amplify``) are adversaries.

The result is stored per pack (``tasks/<pack>/amplified.json``) with its provenance, and the
pack's loader appends each task's cases to its hidden tests (``amplified_tests``).
"""

from __future__ import annotations

import ast
import contextlib
import json
import math
import random
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: Inputs tried per task (seeds and mutants), the most cases added to a task, and the time
#: the reference may take on one input inside the sandbox (far under the grader's per-case
#: limit, so that a slow container does not fail the reference).
POOL = 160
MAX_ADDED = 8
#: More cases the half rule may add, after ``MAX_ADDED`` went to failing each adversary once
#: (humaneval/0: 8 added cases left 'threshold is truthy' behind a table at 5 of 8).
HALF_RULE_EXTRA = 4
#: Graded cases a task gets at least (its hidden ones and the added ones), where the inputs
#: allow: a task with one hidden case (humaneval/34) grades on more than one input.
MIN_GRADED = 4
CALL_S = 0.25
#: The most a shallow program may pass of a task's graded cases, where the inputs allow it
#: (the issue's rule for partially graded code).
SHALLOW_MAX = 0.5
#: Inputs off the contract (``probe_inputs``) tried per task, never added as cases: a shallow
#: program that returns the reference's value on them as well is the task's answer written
#: another way (``sorted`` for a merge sort), not a program the contract's inputs favour (the
#: first argument for a minimum whose seeds all have a <= b).
PROBE_POOL = 80
#: Off-contract inputs the reference must answer before any shallow program counts as
#: equivalent (``equivalent_shallow``).
MIN_PROBES = 8
#: Generations of mutants ``probe_inputs`` grows where two give too few probes.
PROBE_ROUNDS = 5
#: Probes added as cases to a task whose reference a shallow program equals
#: (``choose_probes``): there the reference agrees with a plain builtin off the contract
#: too, so those inputs are the function's own; each leaves the contract another way, so
#: that a program right only inside it fails (``sorted(map(abs, x))`` for a sort whose
#: seeds are all positive).
PROBE_CASES = 4
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

    def allows(self, value: Any, loose: bool = False) -> bool:
        """Whether ``value`` keeps this shape; ``loose``: its kinds and sizes only (no sign,
        alphabet, order or distinctness: the inputs ``mutate_inputs`` probes equivalence
        with, off the contract)."""
        return not self.breaks(value, loose)

    def breaks(self, value: Any, loose: bool = False) -> list[str]:
        """What of this shape ``value`` breaks, none where it keeps it: "kind", "finite",
        "sign", "size", "chars", "length", "keys", "sorted", "distinct", "order" (items that
        do not compare), and each of its items' as "items:<what>"."""
        # An int where the seeds have floats (or the reverse) is the same kind of number.
        number = (self.kinds & {"int", "float"} and _kind(value) in ("int", "float")
                  and not isinstance(value, bool))
        if _kind(value) not in self.kinds and not number:
            return ["kind"]
        if isinstance(value, bool) or value is None:
            return []
        out: list[str] = []
        if isinstance(value, int | float):
            if not math.isfinite(value):
                return ["finite"]
            if not loose and (self.lo >= 0 and value < 0 or self.lo >= 1 and value < 1
                              or self.hi <= 0 and value > 0 or self.hi <= -1 and value > -1):
                out.append("sign")
            if abs(value) > 4 * max(abs(self.lo), abs(self.hi), 1) + 10:
                out.append("size")
            return out
        if isinstance(value, str):
            if not loose and not set(value) <= self.chars:
                out.append("chars")
            return out + ([] if self._length_ok(value) else ["length"])
        if not isinstance(value, list | tuple | set | frozenset | dict):
            return ["kind"]
        if not self._length_ok(value):
            return ["length"]
        items = list(value.values()) if isinstance(value, dict) else list(value)
        if isinstance(value, dict) and self.keys and any(self.keys.breaks(k, loose)
                                                         for k in value):
            out.append("keys")
        if items and self.items is None:
            return out + ["items:kind"]
        if items and self.items is not None:
            out += sorted({f"items:{b}" for i in items for b in self.items.breaks(i, loose)})
        if isinstance(value, list | tuple) and len(items) >= 2 and not loose:
            try:
                if self.sorted_up and self.max_len >= 3 and not all(
                        a <= b for a, b in zip(items, items[1:], strict=False)):
                    out.append("sorted")
                if self.sorted_down and self.max_len >= 3 and not all(
                        a >= b for a, b in zip(items, items[1:], strict=False)):
                    out.append("sorted")
                if self.distinct and self.max_len >= 3 and len(
                        set(map(_hashable, items))) != len(items):
                    out.append("distinct")
            except TypeError:
                out.append("order")
        return out

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

    #: Kinds and sizes only (``Shape.allows``'s ``loose``), and no orders between arguments.
    loose: bool = False

    @classmethod
    def of(cls, seeds: Sequence[tuple[Any, ...]], contract: bool = True) -> Invariants:
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
        if not contract:
            return cls(arity, shapes, [], loose=True)
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
        return not self.breaks(args)

    def breaks(self, args: tuple[Any, ...]) -> set[str]:
        """What of the contract ``args`` breaks, none where it keeps it: "arity", each
        argument's ("<i>:sign", "<i>:items:distinct", ``Shape.breaks``) and each order
        ("le:<i>:<j>")."""
        if len(args) != self.arity:
            return {"arity"}
        out = {f"{i}:{b}" for i, (shape, v) in enumerate(zip(self.shapes, args, strict=True))
               for b in shape.breaks(v, self.loose)}
        if any(b.endswith(("kind", "length", "finite")) for b in out):
            return out  # the orders below may not even compare
        for rel, i, j in self.relations:
            a, b = args[i], args[j]
            try:
                right = len(b) if rel.endswith("_len") else b
                kept = not (rel.startswith("lt") and not a < right
                            or rel.startswith("le") and not a <= right
                            or rel.startswith("eq") and a != right)
            except TypeError:
                kept = False
            if not kept:
                out.add(f"{rel}:{i}:{j}")
        return out


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True)
class Precondition:
    """A task's precondition written by hand from its prompt, where the task's own inputs show
    too little of it or more than it (as EvalPlus writes contracts for HumanEval+ and MBPP+):
    ``holds(*args)`` says whether an input is one the prompt asks about; ``seeds`` are such
    inputs that its cases never show (a rotated array for "the minimum of a sorted and
    rotated array", whose cases are all sorted), mutated like the cases' own. Every input
    tried, the probes off the contract included, keeps it: an honest program may do anything
    outside it (mbpp/54's counting sort on negative numbers)."""

    why: str
    holds: Callable[..., bool]
    seeds: tuple[tuple[Any, ...], ...] = ()

    def allows(self, args: tuple[Any, ...]) -> bool:
        """Whether ``holds`` accepts ``args``; False where it raises (an input of another
        kind)."""
        try:
            return bool(self.holds(*args))
        except Exception:  # noqa: BLE001 - any error means the input is not the prompt's
            return False


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
    words = s.split(" ")
    if len(words) > 1:  # a sentence or a list of words ('three one five'): move whole words
        shuffled = words[:]
        rng.shuffle(shuffled)
        at = rng.randrange(len(words))
        out += [" ".join(words[::-1]), " ".join(shuffled), " ".join(words[:at] + words[at + 1:]),
                " ".join(words[:at + 1] + words[at:]), " ".join(words + [rng.choice(words)])]
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


def mutate_inputs(seeds: Sequence[tuple[Any, ...]], seed: str, pool: int = POOL,
                  contract: bool = True, precondition: Precondition | None = None,
                  rounds: int = 2) -> list[tuple[Any, ...]]:
    """Up to ``pool`` new argument tuples (none a seed), each keeping ``Invariants.of(seeds)``
    and the task's ``precondition`` where it has one: one argument mutated at a time, from the
    seeds and then from their mutants (``rounds`` generations). With ``contract`` False they
    keep only the arguments' kinds and sizes (``probe_inputs``)."""
    if not seeds or len({len(s) for s in seeds}) != 1:
        return []
    rng = random.Random(f"amplify:{seed}")
    inv = Invariants.of(seeds, contract)
    known = {repr(s) for s in seeds}
    found: dict[str, tuple[Any, ...]] = {}

    # Each argument's values across the seeds: a seed's argument put into another seed
    # ('Jupiter' beside 'Mercury') is a new input that keeps a vocabulary mutation cannot
    # (planet names, a word list's words).
    seen_at = [list({repr(s[i]): s[i] for s in seeds}.values()) for i in range(inv.arity)]

    def variants(parent: tuple[Any, ...]) -> Iterable[tuple[int, tuple[Any, ...]]]:
        for i, value in enumerate(parent):
            for mutated in mutate_value(value, rng, inv.shapes[i]) + seen_at[i]:
                yield i, parent[:i] + (mutated,) + parent[i + 1:]
        # The arguments swapped, where two have the same kind (a triangle's sides 3, 4, 5
        # as 5, 3, 4): the answer often stays the same where a mutation would change it.
        for i in range(len(parent)):
            for j in range(i + 1, len(parent)):
                if _kind(parent[i]) == _kind(parent[j]) and parent[i] != parent[j]:
                    swapped = list(parent)
                    swapped[i], swapped[j] = parent[j], parent[i]
                    yield i, tuple(swapped)

    def grow(parents: Sequence[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
        new = []
        for parent in parents:
            for i, changed in variants(parent):
                args = inv.repaired(changed, i)
                text = repr(args)
                if text in known or text in found or len(text) > MAX_CHARS:
                    continue
                try:
                    ok = (inv.allows(args) and ast.literal_eval(text) == args
                          and (precondition is None or precondition.allows(args)))
                except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                    ok = False
                if ok:
                    found[text] = args
                    new.append(args)
        return new

    first = grow(seeds)
    rng.shuffle(first)
    parents = first[: max(8, pool // 4)]
    for generation in range(2, rounds + 1):
        born = grow(parents)
        if generation < rounds:
            rng.shuffle(born)
            parents = born[: max(8, pool // 4)]
    chosen = list(found.values())
    if len(chosen) > pool:
        # Keep every first-round input that fits, then a sample of the second round.
        firsts = {repr(a) for a in first}
        head = [a for a in chosen if repr(a) in firsts][:pool]
        rest = [a for a in chosen if repr(a) not in firsts]
        chosen = head + rng.sample(rest, k=max(0, min(len(rest), pool - len(head))))
    # The shortest first: the sandbox stops running a reference after ten slow inputs, and a
    # slow reference (humaneval/39's prime Fibonacci numbers) is fast on its small inputs.
    return sorted(chosen, key=lambda a: (len(repr(a)), repr(a)))


def probe_inputs(seeds: Sequence[tuple[Any, ...]], seed: str, known: Iterable[tuple[Any, ...]],
                 pool: int = PROBE_POOL, precondition: Precondition | None = None
                 ) -> list[tuple[Any, ...]]:
    """Up to ``pool`` inputs of the seeds' kinds and sizes (and within the task's
    ``precondition``), none of ``known``, those the contract (``Invariants.of(seeds)``)
    refuses first: what ``equivalent_shallow`` compares a shallow program with the reference
    on. Never added as cases: the prompt may rule them out, and an honest program may do
    anything there. Where two generations of mutants give fewer than ``MIN_PROBES`` new ones
    (lists of booleans, whose few short values the contract's inputs already hold), up to
    ``PROBE_ROUNDS`` generations make longer ones."""
    if not seeds or len({len(s) for s in seeds}) != 1:
        return []
    inv = Invariants.of(seeds)
    taken = {repr(a) for a in known}
    found: list[tuple[Any, ...]] = []
    for tag, rounds in ((f"{seed}:probe", 2), (f"{seed}:probe:deeper", PROBE_ROUNDS)):
        found = [a for a in mutate_inputs(seeds, tag, pool=4 * pool, contract=False,
                                          precondition=precondition, rounds=rounds)
                 if repr(a) not in taken]
        if len(found) >= MIN_PROBES:
            break
    return sorted(found, key=lambda a: inv.allows(a))[:pool]


def equivalent_shallow(adversaries: Sequence[Adversary], n_graded: int, usable: Sequence[int],
                       probes: Sequence[int], answers: Sequence[str]) -> list[str]:
    """The names of the shallow programs (lookup tables aside) that are the task's answer by
    another route, such as a builtin (``sorted`` for a merge sort, ``len`` for strlen), as
    EvalPlus would pass them: each passes the task's own graded cases and returns the
    reference's value on every ``usable`` input and on every off-contract input of
    ``probes`` that the reference answered. None where fewer than ``MIN_PROBES`` probes were
    answered, or where the reference's ``answers`` (a text per input) are all one value: a
    constant that no input tried fails is the inputs' weakness, not an answer."""
    inputs = [*usable, *probes]
    if len(probes) < MIN_PROBES or len({answers[i] for i in inputs}) < 2:
        return []
    return [a.name for a in adversaries if a.shallow and not a.memorised
            and a.passes_own == n_graded and all(a.agrees[i] == "1" for i in inputs)]


def choose_probes(broken: dict[int, set[str]], n: int = PROBE_CASES) -> list[int]:
    """Up to ``n`` of the probes that break the contract (index -> what of it each breaks,
    ``Invariants.breaks``), greedily each breaking the most that no probe chosen in this
    round breaks (ties: the most ways at once, then the last, the longest: a long list
    with a negative tells more orderings apart); a round ends when every way is broken, and
    the next starts over, so that the cases leave the contract each way they can
    (duplicates in a list of distinct items, a negative where every seed was positive, a
    space in a word), and more than once where ``n`` allows."""
    chosen: list[int] = []
    covered: set[str] = set()
    while len(chosen) < n:
        left = [i for i in broken if i not in chosen and broken[i] - covered]
        if not left:
            if not covered or not any(broken[i] for i in broken if i not in chosen):
                break
            covered = set()  # a new round
            continue
        best = max(left, key=lambda i: (len(broken[i] - covered), len(broken[i]), i))
        chosen.append(best)
        covered |= broken[best]
    return chosen


# -- choosing the cases --------------------------------------------------------------------------
@dataclass(frozen=True)
class Adversary:
    name: str
    shallow: bool  # a shallow program (else a mutant of the reference)
    passes_own: int  # of the task's graded cases (those it was not run on included)
    agrees: str  # per candidate input: "1" returns the reference's value, "0" not, "-" none,
    # "t" not run (after its third timeout) and "x" timed out: never counted as failed
    #: A lookup program over the task's own (public) cases, which it passes all (the nearest
    #: public input's answer elsewhere): held to the half rule, not counted as a shallow
    #: program of the task's own cases.
    memorised: bool = False
    #: Held to the half rule while the cases are chosen, though no shallow program in the
    #: report (a near miss of the task's answer: ``min(x[0], x[-1])`` for the min of a rotated
    #: sorted array passed 4 of 5 cases that only had to fail it once).
    halve: bool = False


def select_cases(adversaries: Sequence[Adversary], n_graded: int, usable: Sequence[int],
                 max_added: int = MAX_ADDED, shallow_max: float = SHALLOW_MAX,
                 min_graded: int = MIN_GRADED, half_rule_extra: int = HALF_RULE_EXTRA,
                 first: Sequence[int] = ()) -> list[int]:
    """Indices of candidate inputs (of ``usable``) to add. The task's own cases are public (a
    program may hold them in a lookup table), so every adversary is also taken with its own
    cases memorised: it then passes them all, and only the added cases tell it apart.

    1. Greedily, each adversary that passes every graded case so far gets an added case it
       fails (the input that fails most of those left; ties: the one that the most shallow
       programs over half fail).
    2. While the task has fewer than ``min_graded`` graded cases, the input that the most
       shallow programs over half fail (ties: most adversaries).
    3. Last, so that no later step undoes it: while a shallow program passes more than
       ``shallow_max`` of the added cases (the reward of it behind a table of the own cases:
       ``envs.domains.code_tests`` pays at most the share of the unpublished cases passed; with none
       added, it passes in full), or a near miss (``Adversary.halve``) does, the input that
       those fail, each weighed by how far over half it is (ties: the one the most of them
       fail, then the most adversaries); this step may add ``half_rule_extra`` cases beyond
       ``max_added``.

    ``first``: inputs added before all of these (``choose_probes``), beyond ``max_added``."""
    chosen: list[int] = list(first)
    max_added += len(chosen)
    usable = list(usable)

    def added(a: Adversary) -> int:  # an input it was not run on ("t") may pass
        return sum(a.agrees[i] in "1tx" for i in chosen)

    def kills(i: int, group: Sequence[Adversary]) -> int:
        return sum(a.agrees[i] == "0" for a in group)

    def left() -> list[int]:
        return [i for i in usable if i not in chosen]

    def over() -> list[Adversary]:
        # With no case added, every shallow program behind a table of the own cases passes.
        return [a for a in adversaries if (a.shallow or a.halve)
                and (not chosen or added(a) > shallow_max * len(chosen))]

    def fail_each(alive_if: Any) -> None:
        while len(chosen) < max_added:
            alive = [a for a in adversaries if alive_if(a)
                     and any(a.agrees[i] == "0" for i in left())]
            if not alive:
                return
            # Ties go to the input that the shallow programs over half fail, so that the
            # cases that fail mutants also keep True and False answers balanced.
            high = over()
            best = max(left(), key=lambda i: (kills(i, alive), kills(i, high),
                                              kills(i, adversaries), -i))
            chosen.append(best)

    fail_each(lambda a: a.passes_own + added(a) == n_graded + len(chosen))
    while len(chosen) < max_added and n_graded + len(chosen) < min_graded and left():
        high = over()
        chosen.append(max(left(), key=lambda i: (kills(i, high), kills(i, adversaries), -i)))
    while len(chosen) < max_added + half_rule_extra:
        high = over()
        if not high or not left():
            break
        # Weighted by how far over half each is: with a count, the inputs that fail the
        # many programs right where the answer is last (the first item, the ends) won every
        # round, and min(x[1:]) for a rotated array's min kept 14 of 16 cases.
        excess = {a.name: added(a) - shallow_max * len(chosen) for a in high}
        best = max(left(), key=lambda i: (sum(excess[a.name] for a in high
                                              if a.agrees[i] == "0"),
                                          kills(i, high), kills(i, adversaries), -i))
        if kills(best, high) == 0:
            break
        chosen.append(best)
    return chosen


def memorised_share(adversary: Adversary, chosen: Sequence[int]) -> float:
    """What ``adversary`` behind a lookup table of the task's own (public) cases earns: the
    share of the added cases it passes (1.0 with none added)."""
    if not chosen:
        return 1.0
    return sum(adversary.agrees[i] in "1tx" for i in chosen) / len(chosen)


# -- lookup programs over the public cases --------------------------------------------------------
def case_table(cases: Iterable[str], names: Iterable[str]) -> dict[str, Any]:
    """``repr`` of the arguments -> the expected value, for every case of the form ``assert
    f(literals) == literal`` with ``f`` one of ``names``: what a program that memorised a
    benchmark's public cases holds."""
    names = set(names)
    table: dict[str, Any] = {}
    for case in cases:
        try:
            node = ast.parse(case).body[-1]
        except (SyntaxError, IndexError, ValueError):
            continue
        test = node.test if isinstance(node, ast.Assert) else None
        if not (isinstance(test, ast.Compare) and len(test.ops) == 1
                and isinstance(test.ops[0], ast.Eq) and isinstance(test.left, ast.Call)
                and isinstance(test.left.func, ast.Name) and test.left.func.id in names):
            continue
        args = literal_args(test.left)
        try:
            want = ast.literal_eval(test.comparators[0])
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            continue
        if args is not None:
            table[repr(args)] = want
    return table


def nearest_answers(table: dict[str, Any], args: tuple[Any, ...]) -> dict[str, Any]:
    """What lookup programs answer on an input their table of public cases lacks, by the
    answer of the most alike known input (a mutated input often keeps its parent's answer):
    a name -> the answer. Alike by ``difflib``'s ratio of the ``repr``, and, for numbers, by
    their distance."""
    import difflib

    key = repr(args)
    if not table:
        return {}
    out = {"the nearest public input's answer (text)": table[max(
        table, key=lambda k: difflib.SequenceMatcher(None, k, key).ratio())]}
    numbers = [a for a in args if isinstance(a, int | float) and not isinstance(a, bool)]
    if numbers:
        def distance(k: str) -> float:
            try:
                known = [a for a in ast.literal_eval(k)
                         if isinstance(a, int | float) and not isinstance(a, bool)]
            except (ValueError, SyntaxError, TypeError):
                return math.inf
            if len(known) != len(numbers):
                return math.inf
            return sum(abs(a - b) for a, b in zip(known, numbers, strict=True))

        out["the nearest public input's answer (numbers)"] = table[min(table, key=distance)]
    return out


def same_value(got: Any, want: Any) -> bool:
    """As the judge compares a case's value: floats within ``FLOAT_TOLERANCE``."""
    if isinstance(want, float):
        return (isinstance(got, int | float) and not isinstance(got, bool)
                and abs(got - want) <= FLOAT_TOLERANCE * max(1.0, abs(want)))
    try:
        return bool(got == want)
    except Exception:  # noqa: BLE001 - plain data compares; anything else is no match
        return False


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


def left_out_reason(stored: dict[str, Any], task_id: str) -> str | None:
    """Why a task leaves its pack: a shallow program behind a lookup table of its own
    (public) cases still earns more than ``SHALLOW_MAX`` (``left_out`` in the file, with the
    reason); None when it stays."""
    entry = stored.get("tasks", {}).get(task_id) or {}
    reason = entry.get("left_out")
    return str(reason) if reason else None


def restored(stored: dict[str, Any], task_id: str) -> bool:
    """Whether a task left out as shallow-payable is safe with its amplified cases: no shallow
    program and no mutant of its reference passed them all (``safe`` in the file)."""
    entry = stored.get("tasks", {}).get(task_id) or {}
    return bool(entry.get("safe"))


def amplified_splits(records: Iterable[tuple[str, dict[str, Any]]], path: Path, *,
                     left_out: Collection[str], dropped: Collection[str] = (),
                     kept: Collection[str] = ()) -> dict[str, list[dict[str, Any]]]:
    """A code pack's splits from its ``(split, record)`` pairs, each record with its amplified
    cases from ``path`` (``with_amplified``): a task in ``dropped`` is never in them, one in
    ``left_out`` only when its amplified cases are ``restored``, and one the file leaves out
    (``left_out`` there: memorised public cases still half-pay it) only when it is ``kept``."""
    stored = read(path)
    splits: dict[str, list[dict[str, Any]]] = {"train": [], "test": []}
    for split, rec in records:
        native = str(rec["id"])
        if native in dropped or (native in left_out and not restored(stored, native)):
            continue
        if left_out_reason(stored, native) and native not in kept:
            continue
        splits[split].append(with_amplified(rec, stored))
    return splits


def with_amplified(rec: dict[str, Any], stored: dict[str, Any]) -> dict[str, Any]:
    """``rec`` with its amplified cases appended to ``tests`` (hidden: they are never shown)
    and listed in ``unpublished_tests``, ``mutant_edits``: the reference's mutants (``tasks.mutants``, ``extended``) that differ
    from it on some input, as ``[index, edit]``, which the code env rebuilds for ``validate``
    and the report card (``envs.domains.code_tests.mutant_programs``), and
    ``equivalent_baselines``: the shallow programs that are its answer by another route
    (``equivalent_shallow``)."""
    entry = stored.get("tasks", {}).get(str(rec["id"])) or {}
    added = list(entry.get("tests") or [])
    if not added and not entry.get("mutant_edits") and not entry.get("equivalent_shallow"):
        return rec
    out = {**rec, "tests": list(rec["tests"]) + added}
    if entry.get("equivalent_shallow"):
        # Not shallow for this task: ``envs.domains.code_tests.task_baselines`` leaves them out.
        out["equivalent_baselines"] = list(entry["equivalent_shallow"])
    if added:
        # Never published, unlike the task's own cases: the reward is at most the share of
        # these passed (``envs.domains.code_tests``), so a memorised table of the own cases earns
        # what its fallback earns here.
        out["unpublished_tests"] = added
    if entry.get("mutant_edits"):
        out["mutant_edits"] = [list(e) for e in entry["mutant_edits"]]
    return out
