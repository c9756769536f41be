"""Symbolic math answer checker: ``verify(gold, completion) -> Verdict``.

Pipeline: extract the final answer from both strings (``math_extract``, in this
process), try exact fast paths (same normalized string, plain numbers compared as exact
fractions), consult an LRU cache, and only then send the pair to a kill-able worker
process that parses with sympy (``math_parse``/``math_equiv``, via ``math_worker``).

Conventions worth knowing (see ``math_equiv`` for all of them):
- ``50%`` equals ``50%``, ``50`` and ``0.5``; ``50`` vs ``0.5`` is not equal;
- bare lists ("1, 2") and sets are unordered; tuples/intervals are ordered;
- several different final answers (hedges, different boxes) fail with
  ``multiple_answers``;
- a decimal matches an exact value with no finite decimal form only when correctly
  rounded or truncated, with at least 2 significant digits for a rational (0.33 vs 1/3)
  and 4 otherwise (1.414 vs sqrt(2); 1.41 and 3.14 fail); a value that has a finite
  decimal form must match exactly (0.24 vs 1/4 is wrong). See ``math_normalize``.

Reasons: equal, not_equal, no_answer, multiple_answers, timeout, unparseable, and
worker_error (no worker process could be started).
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from fractions import Fraction
from typing import Any

from envs.verify.math_extract import MAX_ANSWER_CHARS, Extraction, extract
from envs.verify.math_normalize import decimal_matches, normalize_answer, too_large
from envs.verify.verdict import Verdict

__all__ = ["verify", "clear_cache", "cache_info", "shutdown"]

CACHE_SIZE = 65_536
MAX_NESTING = 60

_cache: OrderedDict[tuple[Any, ...], tuple[bool, str, dict[str, Any], float]] = OrderedDict()
_cache_lock = threading.Lock()
_stats = {"hits": 0, "misses": 0}


def clear_cache() -> None:
    with _cache_lock:
        _cache.clear()
        _stats["hits"] = _stats["misses"] = 0


def cache_info() -> dict[str, int]:
    with _cache_lock:
        return {"size": len(_cache), **_stats}


def shutdown() -> None:
    """Stop the worker processes (they restart lazily on the next ``verify``)."""
    from envs.verify.math_worker import reset_pool

    reset_pool()


# ---------------------------------------------------------------- fast paths

_PLAIN_NUM = re.compile(r"^-?(?:\d+(?:\.\d*)?|\.\d+)(?:/\d+)?$")
_FRAC_CMD = re.compile(r"^(-?)\\frac\{(\d+)\}\{(\d+)\}$")
_DEC_COMMA = re.compile(r"^-?\d+,\d+$")
_DEC_POINT = re.compile(r"^-?\d*\.\d+$")


def _as_fraction(s: str) -> Fraction | None:
    m = _FRAC_CMD.match(s)
    if m:
        if int(m.group(3)) == 0:
            return None
        return Fraction(int(m.group(2)), int(m.group(3))) * (-1 if m.group(1) else 1)
    if _PLAIN_NUM.match(s):
        try:
            return Fraction(s)
        except (ValueError, ZeroDivisionError):
            return None
    return None


def _fast(gold: str, pred: str) -> bool | None:
    """Decide cheaply when possible (True/False), else None."""
    g, p = normalize_answer(gold), normalize_answer(pred)
    if not g or not p:
        return None
    if g.replace(" ", "") == p.replace(" ", ""):
        return True
    # "1,22" reads as a decimal comma only against the same number written "1.22"
    if _DEC_COMMA.match(p) and _DEC_POINT.match(g):
        p = p.replace(",", ".")
    elif _DEC_COMMA.match(g) and _DEC_POINT.match(p):
        g = g.replace(",", ".")
    fg, fp = _as_fraction(g), _as_fraction(p)
    if fg is None or fp is None:
        return None
    if fg == fp:
        return True
    return decimal_matches(p, fg, rational=True) or decimal_matches(g, fp, rational=True)


_OP_SPACE = re.compile(r"\s*([^\w\\\s])\s*")


def _key(answers: tuple[str, ...]) -> tuple[str, ...]:
    """Cache key: the normalized spelling, so "x + 0.5" and "x+0.5" share an entry."""
    return tuple(_OP_SPACE.sub(r"\1", normalize_answer(a)) for a in answers)


def _too_nested(s: str) -> bool:
    depth = best = 0
    for c in s:
        if c in "([{":
            depth += 1
            if depth > best:
                best = depth
        elif c in ")]}":
            depth -= 1
    return best > MAX_NESTING


def _prefilter(ans: tuple[str, ...]) -> str | None:
    for a in ans:
        if len(a) > MAX_ANSWER_CHARS:
            return "answer too long"
        if _too_nested(a):
            return "nesting too deep"
        if too_large(a):
            return "number too large"
    return None


# ---------------------------------------------------------------- public API


def verify(gold: str, completion: str, *, timeout: float = 5.0) -> Verdict:
    """Grade ``completion`` against the reference answer/solution ``gold``.

    Never raises for bad input and returns within about ``timeout`` seconds of worker
    time (plus a one-off worker start); the sympy work runs in a separate process.
    """
    try:
        return _verify(gold, completion, timeout)
    except Exception as exc:  # an RL loop must get a verdict, whatever happened
        return Verdict.fail("unparseable", None, error=repr(exc)[:200])


def _verify(gold: str, completion: str, timeout: float) -> Verdict:
    try:
        pred_ex = extract(completion or "")
        gold_ex = extract(gold or "", gold=True)
    except RecursionError:
        return Verdict.fail("unparseable", None, error="extraction failed")
    if pred_ex is None:
        return Verdict.fail("no_answer", None)
    shown = pred_ex.display()
    if gold_ex is None:
        return Verdict.fail("unparseable", shown, side="gold", error="no gold answer")
    return _grade(gold_ex, pred_ex, shown, timeout)


def _grade(gold_ex: Extraction, pred_ex: Extraction, shown: str, timeout: float) -> Verdict:
    gold_ans = gold_ex.answer
    groups = pred_ex.groups
    details = {"source": pred_ex.source}
    for side, ans in (("gold", gold_ans), ("pred", groups[-1])):
        why = _prefilter(ans)
        if why is not None:
            return Verdict.fail("unparseable", shown, side=side, error=why, **details)

    if len(groups) == 1 and len(gold_ans) == 1 and len(groups[0]) == 1:
        fast = _fast(gold_ans[0], groups[0][0])
        if fast is True:
            return Verdict.ok("equal", shown, fast_path=True, **details)
        if fast is False:
            return Verdict.fail("not_equal", shown, fast_path=True, **details)

    key = (_key(gold_ans), tuple(_key(g) for g in groups))
    with _cache_lock:
        hit = _cache.get(key)
        if hit is not None and (hit[1] != "timeout" or hit[3] >= timeout):
            _cache.move_to_end(key)
            _stats["hits"] += 1
        else:
            hit = None
            _stats["misses"] += 1
    if hit is None:
        from envs.verify.math_worker import get_pool

        try:
            passed, reason, extra = get_pool().run(gold_ans, groups, timeout)
        except RuntimeError as exc:  # no worker could be started: not cached
            return Verdict.fail("worker_error", shown, error=str(exc)[:200], **details)
        with _cache_lock:
            _cache[key] = (passed, reason, extra, timeout)
            if len(_cache) > CACHE_SIZE:
                _cache.popitem(last=False)
    else:
        passed, reason, extra, _ = hit
        extra = {**extra, "cached": True}
    if passed:
        return Verdict.ok(reason, shown, **details, **extra)
    return Verdict.fail(reason, shown, **details, **extra)
