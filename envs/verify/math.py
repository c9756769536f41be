"""Symbolic math answer checker: ``verify(gold, completion) -> Verdict``.

Pipeline: extract the final answer from both strings (``math_extract``, in this
process), try exact fast paths (same normalized string, plain numbers compared as exact
fractions), consult an LRU cache, and only then send the pair to a kill-able worker
process that parses with sympy (``math_parse``/``math_equiv``, via ``math_worker``).

Conventions worth knowing (see ``math_equiv`` for all of them):
- a gold ``50%`` is answered by ``50%``, ``50`` and ``0.5``; an answer ``18%`` answers a gold
  of 18, never of 0.18 (one reading of the answer's sign); ``50`` vs ``0.5`` is not equal;
- bare lists ("1, 2") and sets are unordered; tuples/intervals are ordered;
- several different final answers (hedges, different boxes) fail with
  ``multiple_answers``;
- a decimal must equal the exact value: 0.33 is not 1/3, as Math-Verify also says. The
  opt-in ``decimal_rounding=True`` accepts a decimal that is the value correctly rounded or
  truncated, with at least 2 significant digits for a rational (0.33 vs 1/3) and 4
  otherwise (1.414 vs sqrt(2); 1.41 and 3.14 fail); a value with a finite decimal form
  must still match exactly (0.24 vs 1/4 is wrong). See ``math_normalize``;
- a box inside a box (``\\boxed{2 + \\boxed{6}}``) or an unclosed ``\\boxed{18`` anywhere in
  the completion is ``malformed_box``, never unwrapped or read around
  (``\\boxed{8 or \\boxed{7}`` is not 7); "anywhere" is the whole completion, however long
  (the box scan is linear; a completion over ``MAX_COMPLETION_CHARS`` is not graded), and so
  is a competing different box;
- text in an answer is dropped only when it labels the value (``15\\text{ apples}``): a
  scale word multiplies (``15\\text{ thousand}`` is 15000, ``8\\text{ thousand dollars}`` 8000),
  a hedge or a second number in words (``15\\text{ maybe sixteen}``) is ``multiple_answers``,
  and a word that changes the value (``6\\text{ squared}``, ``0.3\\text{ repeating}``) is
  ``unparseable``;
- unicode math reads as its LaTeX twin (``2√5``, ``(5, ∞)``, ``½``, ``x²``, ``·``, ``−``);
- an answer's value and its form come from one parse (``math_parse.leaf_tree``): what the
  simplest-form rule cannot read (Python's ``**``, ``//``) is ``unparseable``;
- an answer equal to the gold must be in a form no less simplified than the gold's
  (``not_simplified`` for ``\\log_2 64`` against 6 or ``\\sqrt{242}`` against
  ``11\\sqrt{2}``; see ``math_simplest``);
- ``answer="number"`` credits only a number literal (``not_a_number`` for ``2\\cdot 78``),
  and with ``question=`` an answer that restates the question's computation
  (``\\boxed{6 + 2}`` for "What is 2 + 6?") fails with ``restates_question``, whatever its
  value. See ``math_answer``.

Reasons: equal, not_equal, no_answer, multiple_answers, malformed_box, restates_question,
not_a_number, not_simplified, timeout, unparseable, and worker_error (no worker process could be
started).
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from fractions import Fraction
from typing import Any

from envs.verify.math_answer import (
    ANSWER_TYPES,
    alternative_after_box,
    assigned_literal,
    group_word,
    hedge,
    is_number_literal,
    operation_word,
    restated_before,
    restated_expression,
    value_around_name,
)
from envs.verify.math_extract import MAX_ANSWER_CHARS, MAX_COMPLETION_CHARS, Extraction, extract
from envs.verify.math_normalize import (
    decimal_matches,
    normalize_answer,
    too_large,
    unit_of,
    without_style,
)
from envs.verify.verdict import Verdict

__all__ = ["verify", "gold_problem", "clear_cache", "cache_info", "shutdown"]

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


# Spaces are free except between two letters ("Eve lyn" is not "Evelyn") and between two
# digits ("1 5" is not 15, nor "10 05" 1005: ``normalize_answer`` has already joined the
# groups of three of "10 000"; the worker reads what is left as a product).
_SPACELESS = re.compile(r"(?<![A-Za-z0-9]) +| +(?![A-Za-z0-9])|(?<=[A-Za-z]) +(?=\d)"
                        r"|(?<=\d) +(?=[A-Za-z])")


def _fast(gold: str, pred: str, rounding: bool) -> bool | None:
    """Decide cheaply when possible (True/False), else None."""
    g, p = normalize_answer(gold), normalize_answer(pred)
    if not g or not p:
        return None
    if _SPACELESS.sub("", g) == _SPACELESS.sub("", p):
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
        # \frac{6}{8} has the value of 3/4 but is not in lowest terms: the worker's
        # simplest-form rule decides (against a gold written the same way it passes)
        return True if is_number_literal(p) else None
    if not rounding:
        return False
    return decimal_matches(p, fg, rational=True) or decimal_matches(g, fp, rational=True)


# pi and a degree mark anywhere in one answer: "\frac{\pi}{3}^\circ", "^{\bm{\circ}}", "\,^\circ",
# "\,\mathrm{deg}", "\text{ degrees}".
_DEGREES_OF_PI = re.compile(r"(?:\\pi|π)(?![A-Za-z]).*?(?:\\circ|°|\\degree|(?<![A-Za-z])deg)",
                            re.S)
# Pieces of an answer tag: "<answer>", "</answer>", and their broken spellings ("</answer"
# without its ">", "answer>", "<by/answ>").
_TAG_PIECE = re.compile(r"<\s*/?\s*answ[a-z]*\s*>?|(?<![</\w])answer\s*>", re.I)


def malformed_answer_tag(text: str) -> bool:
    """Whether ``text`` holds a broken answer tag or unpaired ones. The reward search found
    "<answer>3<by/answ>2</answer", "4answer>2</answer>" and "<-5>...</answer>" paid by their
    last number; a math answer goes in a box, and without one a tag must at least be whole
    (after a box, a stray "</answer>" is harmless: the box is the answer)."""
    pieces = _TAG_PIECE.findall(text)
    if not pieces:
        return False
    whole = all(p in ("<answer>", "</answer>") for p in pieces)
    return not whole or text.count("<answer>") != text.count("</answer>")


_HIDDEN = re.compile(r"\\(?:[hv]?phantom|smash)(?![A-Za-z])")
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


def verify(
    gold: str,
    completion: str,
    *,
    timeout: float = 5.0,
    answer: str = "expression",
    question: str | None = None,
    decimal_rounding: bool = False,
) -> Verdict:
    """Grade ``completion`` against the reference answer/solution ``gold``.

    ``answer`` is the answer type: ``"expression"`` (any value the checker understands) or
    ``"number"`` (a number literal only). ``question``, when given, is the task's prompt:
    an answer that restates a computation written in it is not credited.
    ``decimal_rounding`` opts in to accepting rounded decimals for non-terminating values.

    Never raises for bad input and returns within about ``timeout`` seconds of worker
    time (plus a one-off worker start); the sympy work runs in a separate process.
    """
    if answer not in ANSWER_TYPES:
        raise ValueError(f"answer must be one of {ANSWER_TYPES}, got {answer!r}")
    try:
        return _verify(gold, completion, timeout, answer, question, decimal_rounding)
    except Exception as exc:  # an RL loop must get a verdict, whatever happened
        return Verdict.fail("unparseable", None, error=repr(exc)[:200])


def gold_problem(gold: str, *, answer: str = "expression", timeout: float = 10.0) -> str | None:
    """Why ``gold`` is not a well-formed answer of type ``answer`` (``None`` when it is).

    Checks the form, not the truth: the gold must yield an answer, a ``number`` gold must be a
    number literal, and any gold must parse with the symbolic parser (run in a worker, so the
    string-equality fast path that lets a gold "equal" itself cannot hide ``\\frac{1}{``).
    """
    if answer not in ANSWER_TYPES:
        raise ValueError(f"answer must be one of {ANSWER_TYPES}, got {answer!r}")
    if answer == "number" and not is_number_literal(gold or ""):
        # the whole gold, not an answer extracted from it: "29 rolls" would extract 29
        return f"{gold!r} is not a number literal (the pack's answer type is 'number')"
    ex = extract(gold or "", gold=True)
    if ex is None:
        return "no answer found in the gold"
    if ex.malformed_box:
        return "the gold's box is malformed (nested or unclosed)"
    why = _prefilter(ex.answer)
    if why is not None:
        return why
    from envs.verify.math_worker import get_pool

    try:
        passed, reason, extra = get_pool().run(ex.answer, (ex.answer,), timeout)
    except RuntimeError as exc:
        return f"cannot check the gold: {str(exc)[:200]}"
    if not passed:
        error = str(extra.get("error", "")).splitlines()[0:1]
        return f"the gold does not parse as a math answer ({reason}{': ' + error[0] if error else ''})"
    return None


def _verify(gold: str, completion: str, timeout: float, answer: str, question: str | None,
            rounding: bool) -> Verdict:
    if len(completion or "") > MAX_COMPLETION_CHARS:
        return Verdict.fail("unparseable", None, error=f"completion over {MAX_COMPLETION_CHARS:,} "
                            "characters")
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
    details = {"source": pred_ex.source}
    if pred_ex.source != "boxed" and malformed_answer_tag(completion or ""):
        return Verdict.fail("unparseable", shown, error="a malformed answer tag", **details)
    if pred_ex.malformed_box:
        return Verdict.fail("malformed_box", shown, **details)
    if pred_ex.too_many:
        return Verdict.fail("multiple_answers", shown, error="too many different final answers",
                            **details)
    final = pred_ex.answer
    if pred_ex.source == "boxed":
        word = alternative_after_box(completion)
        if word is not None:
            return Verdict.fail("multiple_answers", shown, hedge=word, **details)
    for item in final:
        hidden = _HIDDEN.search(item)
        if hidden is not None:  # \phantom{5} shows a blank: what the reader cannot see is no answer
            return Verdict.fail("unparseable", shown, error=f"{hidden.group(0)} hides its text",
                                **details)
        word = hedge(item) or value_around_name(item)
        if word is not None:
            return Verdict.fail("multiple_answers", shown, hedge=word, **details)
        word = operation_word(item) or group_word(item, question)
        if word is not None:
            return Verdict.fail("unparseable", shown, error=f"the word {word!r} changes the value "
                                "and is not read", **details)
    if any(_DEGREES_OF_PI.search(a) for a in final) and not any(
            _DEGREES_OF_PI.search(a) for a in gold_ex.answer):
        # the degree sign is dropped as a label, but pi/3 degrees is not pi/3
        return Verdict.fail("not_equal", shown, unit="degrees for radians", **details)
    if len(final) == 1 and len(gold_ex.answer) == 1:
        # a unit is dropped as a label only where it is the gold's: 18 mm is not 18 cm
        units = unit_of(without_style(gold_ex.answer[0])), unit_of(without_style(final[0]))
        if None not in units and units[0] != units[1]:
            return Verdict.fail("not_equal", shown, unit=f"{units[1]} for {units[0]}", **details)
    if question is not None:
        gold_text = ", ".join(gold_ex.answer)
        for item in final:
            restated = restated_expression(item, question, gold_text)
            if restated is not None:
                return Verdict.fail("restates_question", shown, restated=restated, **details)
        if pred_ex.source == "number":  # the last number may close an echo of the question
            restated = restated_before(completion, final[-1], question, gold_text)
            if restated is not None:
                return Verdict.fail("restates_question", shown, restated=restated, **details)
    if answer == "number" and not all(is_number_literal(a) or assigned_literal(a) for a in final):
        return Verdict.fail("not_a_number", shown, **details)
    return _grade(gold_ex, pred_ex, shown, timeout, rounding)


def _grade(gold_ex: Extraction, pred_ex: Extraction, shown: str, timeout: float,
           rounding: bool) -> Verdict:
    gold_ans = gold_ex.answer
    groups = pred_ex.groups
    details = {"source": pred_ex.source}
    for side, ans in (("gold", gold_ans), ("pred", groups[-1])):
        why = _prefilter(ans)
        if why is not None:
            return Verdict.fail("unparseable", shown, side=side, error=why, **details)

    if len(groups) == 1 and len(gold_ans) == 1 and len(groups[0]) == 1:
        fast = _fast(gold_ans[0], groups[0][0], rounding)
        if fast is True:
            return Verdict.ok("equal", shown, fast_path=True, **details)
        if fast is False:
            return Verdict.fail("not_equal", shown, fast_path=True, **details)

    key = (_key(gold_ans), tuple(_key(g) for g in groups), rounding)
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
            passed, reason, extra = get_pool().run(gold_ans, groups, timeout, rounding)
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
