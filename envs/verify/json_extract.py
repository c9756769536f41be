"""Pulling one JSON value out of model text, with limits that keep hostile input cheap.

Reasoning is read past first, as the math extractor reads the answer after ``</think>``:
``answer_text`` drops each ``<think>...</think>`` (or ``<thinking>``) block, an unclosed one to
the end of the text, and everything before a closing tag that has no opening one (a chat
template that opens the block in the prompt), so a draft in the reasoning is never graded in
place of the answer after it, nor competes with it.

Then: the whole text if it is JSON; else the last fenced ```json block; else the first
balanced object or array that ``json.JSONDecoder.raw_decode`` accepts, with prose around it.
Duplicate keys, NaN/Infinity (and numbers that overflow to infinity) and nesting deeper than
``max_depth`` reject the value instead of being silently accepted. Every step takes time linear
in the length of the text, whatever it holds (``benchmarks/json_prose.py``).
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from dataclasses import dataclass
from itertools import accumulate
from typing import Any


class Rejected(Exception):
    """A JSON value was found but is not acceptable (or the text is too big to look at)."""

    def __init__(self, reason: str, **details: Any):
        super().__init__(reason)
        self.reason = reason
        self.details = details


@dataclass(frozen=True)
class Extracted:
    value: Any
    method: str  # "whole", "fenced" or "prose"
    single: bool  # no other JSON candidate competed with the one taken


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        counts = Counter(k for k, _ in pairs)
        dups = sorted(k for k, n in counts.items() if n > 1)
        raise Rejected("duplicate_keys", duplicate_keys=dups[:20])
    return obj


def _constant(name: str) -> Any:
    raise Rejected("non_finite_number", number=name)


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e999 parses to inf without passing through parse_constant
        raise Rejected("non_finite_number", number=text[:40])
    return value


DECODER = json.JSONDecoder(object_pairs_hook=_object, parse_float=_float, parse_constant=_constant)

_WS = re.compile(r"\s*")
# A string, or an unterminated one running to the end: every quote then starts a match, so the
# search never rescans the rest of the text from each quote in turn.
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*(?:"|\\?\Z)', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}
# An opening bracket that can start a JSON value: "{" before a key or "}", "[" before a value or
# "]" (NaN and Infinity included, to be rejected). Prose brackets ("\boxed{x}", "[see 3]") fail
# here at C speed instead of costing a decode attempt each.
_OPENER = re.compile(r'\{(?=[ \t\n\r]*["}])|\[(?=[ \t\n\r]*[-\[\]{"0-9tfnNI])')
_JSON_START = frozenset('{["-0123456789tfn')


def nesting_depth(text: str) -> int:
    """Deepest bracket nesting of ``text``, brackets inside JSON strings not counted."""
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    return max(accumulate(map(_STEP.__getitem__, brackets)), default=0)


def check_depth(text: str, max_depth: int) -> None:
    # Counting openers is a C-speed upper bound on the depth; the exact scan runs only past it.
    if text.count("{") + text.count("[") <= max_depth:
        return
    depth = nesting_depth(text)
    if depth > max_depth:
        raise Rejected("too_deep", depth=depth, max_depth=max_depth)


def _decode_all(text: str, method: str, max_depth: int) -> Any:
    check_depth(text, max_depth)
    try:
        return DECODER.decode(text)
    except RecursionError:
        raise Rejected("too_deep", max_depth=max_depth, method=method) from None


def fenced_blocks(text: str) -> list[str]:
    """Contents of the closed ```json fences in ``text``, in order (a linear scan, no regex)."""
    low = text.lower()
    blocks, pos = [], 0
    while (start := low.find("```json", pos)) >= 0:
        line_end = text.find("\n", start)
        if line_end < 0:
            break
        close = text.find("```", line_end)
        if close < 0:
            break
        if low[start + 3 : line_end].strip() == "json":
            blocks.append(text[line_end + 1 : close])
        pos = close + 3
    return blocks


#: The text a prose attempt first decodes in; it grows fourfold while the value may run past it.
_FIRST_WINDOW = 256
#: A failure this close to a window's end may come from the cut: a literal or number cut short
#: fails where it starts, up to 9 characters back ("-Infinity").
_CUT_MARGIN = 16


def cut_short(exc: json.JSONDecodeError, window: int) -> bool:
    """Whether decoding a ``window``-character prefix failed where a longer one might not."""
    return exc.pos >= window - _CUT_MARGIN or exc.msg.startswith("Unterminated string")


def _decode_at(text: str, start: int) -> tuple[Any, int] | int:
    """The value that decodes at ``start`` and its end, or else the characters the attempt read.

    ``json`` gives a failure its line and column by counting the line breaks before it in the
    text it was handed, so a failed attempt in the whole text costs the length of the text
    before ``start``: quadratic over prose full of brackets. Decoding in a window from
    ``start`` that grows while the failure may come from the cut gives the same result at a
    cost bounded by what the attempt reads.
    """
    size, read = _FIRST_WINDOW, 0
    while True:
        window = text[start : start + size]
        try:
            value, end = DECODER.raw_decode(window)
        except json.JSONDecodeError as exc:
            if start + size >= len(text) or not cut_short(exc, len(window)):
                return read + max(exc.pos, 1)
            read += len(window)
            size *= 4
            continue
        return value, start + end


def _next_in_prose(text: str, pos: int, budget: int, max_depth: int) -> tuple[Any, int] | None:
    """First value decodable at an opening bracket at or after ``pos``: (value, end) or None.

    ``budget`` caps the characters failed attempts may read, so text full of brackets cannot
    make the search quadratic.
    """
    for match in _OPENER.finditer(text, pos):
        start = match.start()
        try:
            found = _decode_at(text, start)
        except RecursionError:
            raise Rejected("too_deep", max_depth=max_depth, method="prose") from None
        if isinstance(found, int):
            budget -= found
            if budget <= 0:
                return None
            continue
        value, end = found
        check_depth(text[start:end], max_depth)
        return value, end
    return None


_THINK_TAG = re.compile(r"<\s*(/?)\s*think(?:ing)?\s*>", re.IGNORECASE)


def answer_text(text: str) -> str:
    """``text`` without its reasoning (see the module doc): the parts outside every think block,
    one per line. Linear in the length of the text."""
    if "<" not in text:  # the common case, at C speed
        return text
    tags = list(_THINK_TAG.finditer(text))
    if not tags:
        return text
    pieces, start, inside = [], 0, False
    for tag in tags:
        closing = bool(tag.group(1))
        if not closing and not inside:
            pieces.append(text[start : tag.start()])
            inside = True
        elif closing:
            # Closing a block, or a closing tag with no opening one: all since the last
            # answer part was reasoning too.
            inside = False
            start = tag.end()
    if not inside:
        pieces.append(text[start:])
    return "\n".join(pieces)


def extract(text: str, max_depth: int) -> Extracted | None:
    """The JSON value in ``text`` after its reasoning (None if there is none); raises
    ``Rejected``."""
    text = answer_text(text)
    blank = _WS.match(text)  # \s* matches every text
    start = blank.end() if blank else 0
    if text[start : start + 1] in _JSON_START:
        try:
            return Extracted(_decode_all(text, "whole", max_depth), "whole", True)
        except json.JSONDecodeError:
            pass  # not pure JSON: look for a fence or a value inside prose
        except ValueError as exc:  # e.g. an integer too long to convert
            raise Rejected("unparseable", method="whole", error=str(exc)[:200]) from None
    blocks = fenced_blocks(text)
    if blocks:
        try:
            value = _decode_all(blocks[-1], "fenced", max_depth)
        except ValueError as exc:
            raise Rejected("unparseable", method="fenced", error=str(exc)[:200]) from None
        return Extracted(value, "fenced", len(blocks) == 1)
    budget = 4 * len(text) + 10_000
    try:
        found = _next_in_prose(text, 0, budget, max_depth)
        if found is None:
            return None
        value, end = found
        try:
            single = _next_in_prose(text, end, budget, max_depth) is None
        except Rejected:
            single = False
    except ValueError as exc:
        raise Rejected("unparseable", method="prose", error=str(exc)[:200]) from None
    return Extracted(value, "prose", single)
