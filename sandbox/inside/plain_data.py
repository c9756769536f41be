"""Plain data across a process boundary: ``encode`` a value to bytes, ``decode`` bytes to a value.

The format carries only None, bool, int, float, complex, str, bytes, list, tuple, dict, set and
frozenset, nested, plus three exact values of the standard library, ``fractions.Fraction``,
``decimal.Decimal`` and ``range``, and an iterator (a generator, ``map``...), drained into a list
that decodes as an iterator over it. It is JSON: lists are arrays, other containers and the
values JSON lacks are one-key objects (``{"t": [...]}`` a tuple, ``{"i": "0x..."}`` a big int).

``decode`` builds every value itself from numbers and strings, so whatever the sending process
did (an object whose ``__eq__`` lies, a ``weakref.proxy``, a subclass of ``list``), the receiver
holds only builtins (and those three standard classes). ``encode`` takes subclasses of the
builtin types by their builtin content (a ``Counter`` is sent as a dict, a namedtuple as a
tuple) and refuses anything else with ``Unencodable``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

MAX_DEPTH = 200  # nesting; deeper values (or a list that contains itself) are refused
MAX_ITEMS = 1_000_000  # items drained from one iterator
_INT64 = 1 << 63


class Unencodable(ValueError):
    """The value is not plain data (the message names its type)."""


class NotPlainData(ValueError):
    """Bytes that do not decode to plain data."""


def encode(value: Any) -> bytes:
    """``value`` as bytes; raises ``Unencodable`` for anything outside the format."""
    return json.dumps(to_json(value), ensure_ascii=True, separators=(",", ":")).encode()


def decode(data: bytes) -> Any:
    """The plain value ``data`` encodes; raises ``NotPlainData`` for anything else."""
    try:
        raw = json.loads(data)
    except (ValueError, RecursionError, MemoryError) as exc:
        raise NotPlainData(f"not plain data: {type(exc).__name__}: {str(exc)[:100]}") from None
    return from_json(raw)


def to_json(value: Any) -> Any:
    """``value`` as the JSON-ready structure ``encode`` writes (to embed it in a message)."""
    try:
        return _out(value, 0)
    except Unencodable:
        raise
    except Exception as exc:  # a value whose own methods fail while it is read
        raise Unencodable(f"a value of type {type(value).__name__} ({type(exc).__name__} "
                          "while reading it)") from None


def from_json(raw: Any) -> Any:
    """The plain value of a structure parsed from JSON (``decode`` after ``json.loads``)."""
    try:
        return _in(raw, 0)
    except (ValueError, TypeError, ArithmeticError, RecursionError, MemoryError) as exc:
        raise NotPlainData(f"not plain data: {type(exc).__name__}: {str(exc)[:100]}") from None


def _out(v: Any, depth: int) -> Any:
    if depth > MAX_DEPTH:
        raise Unencodable(f"nested deeper than {MAX_DEPTH}")
    d = depth + 1
    # The type itself, not isinstance: a proxy answers isinstance checks with its referent's
    # class. bool before int, since it is one; a subclass counts by its builtin value.
    t = type(v)
    if v is None or t is bool:
        return None if v is None else bool.__bool__(v)
    if issubclass(t, int):
        n = int.__index__(v)
        return n if -_INT64 <= n < _INT64 else {"i": hex(n)}
    if issubclass(t, float):
        return float.__float__(v)
    if issubclass(t, str):
        return str.__str__(v)
    if issubclass(t, list):
        return [_out(x, d) for x in list.__iter__(v)]
    if issubclass(t, tuple):
        return {"t": [_out(x, d) for x in tuple.__iter__(v)]}
    if issubclass(t, dict):
        return {"d": [[_out(k, d), _out(x, d)] for k, x in dict.items(v)]}
    if issubclass(t, frozenset):
        return {"f": [_out(x, d) for x in frozenset.__iter__(v)]}
    if issubclass(t, set):
        return {"s": [_out(x, d) for x in set.__iter__(v)]}
    if issubclass(t, bytes | bytearray):
        return {"b": bytes(v).hex()}
    if issubclass(t, complex):
        return {"c": [complex.__complex__(v).real, complex.__complex__(v).imag]}
    # Fraction and Decimal by module name first: importing them costs every run a few ms.
    if t.__module__ == "fractions" and issubclass(t, _fraction()):
        return {"q": [_out(v.numerator, d), _out(v.denominator, d)]}
    if t.__module__ in ("decimal", "_decimal", "_pydecimal") and issubclass(t, _decimal()):
        return {"m": str(v)}
    if issubclass(t, range):
        return {"r": [_out(v.start, d), _out(v.stop, d), _out(v.step, d)]}
    if issubclass(t, Iterator):
        items: list[Any] = []
        for x in v:
            if len(items) >= MAX_ITEMS:
                raise Unencodable(f"an iterator of more than {MAX_ITEMS} items")
            items.append(_out(x, d))
        return {"it": items}
    raise Unencodable(f"a value of type {type(v).__name__}")


def _in(raw: Any, depth: int) -> Any:
    if depth > MAX_DEPTH:
        raise ValueError(f"nested deeper than {MAX_DEPTH}")
    t = type(raw)
    if raw is None or t is bool or t is int or t is float or t is str:
        return raw
    d = depth + 1
    if t is list:
        return [_in(x, d) for x in raw]
    if t is not dict or len(raw) != 1:
        raise ValueError("unknown form")
    (tag, body), = raw.items()
    if tag == "t":
        return tuple(_in(x, d) for x in _array(body))
    if tag == "d":
        out = {}
        for pair in _array(body):
            if type(pair) is not list or len(pair) != 2:
                raise ValueError("a dict item is not a pair")
            out[_in(pair[0], d)] = _in(pair[1], d)
        return out
    if tag == "s":
        return {_in(x, d) for x in _array(body)}
    if tag == "f":
        return frozenset(_in(x, d) for x in _array(body))
    if tag == "i" and type(body) is str:
        return int(body, 16)
    if tag == "b" and type(body) is str:
        return bytes.fromhex(body)
    if tag == "c":
        re_, im = _numbers(body, float, 2)
        return complex(re_, im)
    if tag == "q":
        num, den = (_in(x, d) for x in _numbers(body, int, 2))
        return _fraction()(num, den)
    if tag == "m" and type(body) is str:
        return _decimal()(body)
    if tag == "r":
        return range(*(_in(x, d) for x in _numbers(body, int, 3)))
    if tag == "it":
        return iter([_in(x, d) for x in _array(body)])
    raise ValueError(f"unknown tag {tag!r}")


def _fraction() -> type:
    from fractions import Fraction

    return Fraction


def _decimal() -> type:
    from decimal import Decimal

    return Decimal


def _array(body: Any) -> list:
    if type(body) is not list:
        raise ValueError("expected an array")
    return body


def _numbers(body: Any, kind: type, n: int) -> list:
    items = _array(body)
    ok = len(items) == n and all(
        type(x) is kind or (kind is int and type(x) is dict) for x in items)
    if not ok:
        raise ValueError(f"expected {n} numbers")
    return items
