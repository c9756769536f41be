"""Checking env keywords at ``gym.make``: a value an env cannot use is refused at once, in one
line naming the keyword and what it takes, instead of scoring every answer 0 later on
(``timeout="5"``), behaving as another value (``require_boxed="no"``) or paying NaN.

Each env checks its own keywords with ``check_keywords`` and the ``Accepts`` rules below; an
unknown keyword is answered by ``unknown_keyword``, with the env's keywords and the closest one.
"""

from __future__ import annotations

import difflib
import inspect
import json
import math
import numbers
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any


class KeywordError(TypeError, ValueError):
    """An env keyword is unknown or has a value the env cannot use. Both a ``TypeError`` (as for
    a wrong argument in Python) and a ``ValueError``, so either ``except`` catches it."""


@dataclass(frozen=True)
class Accepts:
    """What a keyword takes: ``what`` for the message, ``test`` to check a value."""

    what: str
    test: Callable[[Any], bool]


def _real(value: Any) -> bool:
    # numbers.Real admits numpy scalars; bool is an int subclass but never a number here.
    return (isinstance(value, numbers.Real) and not isinstance(value, bool)
            and math.isfinite(value))


def _integer(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


FLAG = Accepts("True or False", lambda v: isinstance(v, bool))
POSITIVE_SECONDS = Accepts("a positive, finite number of seconds", lambda v: _real(v) and v > 0)
FINITE_NUMBER = Accepts("a finite number", _real)


def integer_at_least(low: int) -> Accepts:
    what = "a positive integer" if low == 1 else f"an integer of at least {low}"
    return Accepts(what, lambda v: _integer(v) and v >= low)


def optional(accepts: Accepts) -> Accepts:
    """What ``accepts`` takes, or ``None`` (the keyword's default)."""
    return Accepts(f"{accepts.what} or None", lambda v: v is None or accepts.test(v))


def instance_of(*types: type, none: bool = True) -> Accepts:
    """An instance of one of ``types`` (or ``None`` when ``none``)."""
    names = " or ".join(f"a {t.__name__}" for t in types) + (" or None" if none else "")
    return Accepts(names, lambda v: (none and v is None) or isinstance(v, types))


def mapping_of(keys: str, values: Accepts) -> Accepts:
    """A mapping of strings (``keys`` says what they name) to values ``values`` accepts."""
    return Accepts(f"a mapping of {keys} to {values.what}", lambda v: isinstance(v, Mapping) and all(
        isinstance(k, str) and values.test(x) for k, x in v.items()))


def check_keywords(owner: str, **checks: tuple[Any, Accepts]) -> None:
    """Raise ``KeywordError`` for the first ``name=(value, accepts)`` whose value is refused."""
    for name, (value, accepts) in checks.items():
        if not accepts.test(value):
            raise KeywordError(f"{owner}: {name} takes {accepts.what}, got {_short(value)}")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else f"{text[:77]}..."


def keyword_names(cls: type, base: type) -> list[str]:
    """The named keyword arguments of ``cls`` and its classes up to ``base`` (not ``**kwargs``)."""
    names: set[str] = set()
    mro = cls.__mro__
    for klass in mro[: mro.index(base) + 1]:
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        for param in list(inspect.signature(init).parameters.values())[1:]:
            if param.kind in (param.POSITIONAL_OR_KEYWORD, param.KEYWORD_ONLY):
                names.add(param.name)
    return sorted(names)


def unknown_keyword(owner: str, unknown: Iterable[str], keywords: Iterable[str],
                    pack: str, pack_options: Iterable[str]) -> KeywordError:
    """The error for keywords that neither the env nor its pack takes: names the closest."""
    unknown, keywords, pack_options = sorted(unknown), list(keywords), list(pack_options)
    close = difflib.get_close_matches(unknown[0], keywords + pack_options, n=1)
    hint = f" (did you mean '{close[0]}'?)" if close else ""
    takes = (f"pack '{pack}' takes {', '.join(pack_options)}" if pack_options
             else f"pack '{pack}' takes no options")
    return KeywordError(f"{owner} has no keyword {', '.join(map(repr, unknown))}{hint}; it takes "
                        f"{', '.join(keywords)}, and {takes}")


def parse_env_kwargs(text: str | None, error: type[Exception] = ValueError) -> dict[str, Any]:
    """A command's ``--env-kwargs JSON`` as a dict (``{}`` when not given); anything else is
    ``error`` with one line."""
    if not text:
        return {}
    try:
        kwargs = json.loads(text)
    except json.JSONDecodeError as exc:
        raise error(f"--env-kwargs is not JSON: {exc.msg} (e.g. '{{\"level\": 1}}')") from None
    if not isinstance(kwargs, dict):
        raise error("--env-kwargs is a JSON object, e.g. '{\"level\": 1}'")
    return kwargs
