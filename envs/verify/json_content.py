"""Field-level content accuracy of a JSON value against the value a task expects.

The score is the fraction of matching leaves. Every scalar in ``expected`` is one leaf (an empty
object or array counts as one leaf too), and every key or array element the completion adds
that ``expected`` lacks is one more leaf that cannot match, so padding the answer costs score.

- strings, integers, booleans and null compare exactly (``true`` never equals ``1``); a string
  whose schema says ``"format": "date-time"`` compares as an instant, so ``...Z`` equals
  ``...+00:00``;
- an expected float matches any number within ``rel_tol`` (relative) or ``abs_tol``;
- an array whose schema says ``"uniqueItems": true`` is a set: elements are paired greedily by
  best match, ignoring order; any other array compares index by index;
- ``AnyOf(a, b, ...)`` accepts any one of its options (the best-scoring one counts), and the
  ``ABSENT`` option means the key may be left out. Tasks store these as JSON (``{"$anyOf":
  [...]}`` and ``{"$absent": true}``); ``expected_from_json`` turns that form into the markers.

An optional key (``ABSENT`` or an ``AnyOf`` with ``ABSENT``) never earns a leaf: left out, or
given one of its accepted values (which says what leaving it out says: the default), it is
neither gained nor lost; given wrong, even in part, all its leaves are lost. So ``{}`` earns
nothing for the keys it omits, the schema's defaults copied into an answer earn nothing, and an
answer with every required key right and the optional ones left out still scores 1.0. A key whose
expected ``AnyOf`` accepts every value its schema allows (the whole enum, both booleans) is
neutral too: the schema alone gets it right.
An object whose keys are all optional and left out counts as one matched leaf, like an empty
one: ``{}`` is then the right answer. This score ignores the schema's verdict; the gate
(``envs.verify.json.verify``) credits it only for a single, schema-valid value.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import datetime
from typing import Any


class _Absent:
    """Marker: the key may (inside ``AnyOf``) or must (alone) be missing from the object."""

    _instance: _Absent | None = None

    def __new__(cls) -> _Absent:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "ABSENT"


ABSENT = _Absent()


class AnyOf(tuple):
    """Marker: any one of these expected values is correct."""

    def __new__(cls, *options: Any) -> AnyOf:
        if not options:
            raise ValueError("AnyOf needs at least one option")
        return super().__new__(cls, options)

    def __repr__(self) -> str:
        return f"AnyOf{tuple.__repr__(self)}"


def expected_from_json(value: Any) -> Any:
    """Turn the JSON form of an expected value (``$anyOf`` / ``$absent``) into the markers."""
    if isinstance(value, dict):
        if len(value) == 1 and "$anyOf" in value and isinstance(value["$anyOf"], list):
            return AnyOf(*(expected_from_json(v) for v in value["$anyOf"]))
        if value == {"$absent": True}:
            return ABSENT
        return {k: expected_from_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [expected_from_json(v) for v in value]
    return value


def expected_to_json(value: Any) -> Any:
    """The inverse of ``expected_from_json``: a JSON-serialisable form of an expected value."""
    if value is ABSENT:
        return {"$absent": True}
    if isinstance(value, AnyOf):
        return {"$anyOf": [expected_to_json(v) for v in value]}
    if isinstance(value, Mapping):
        return {k: expected_to_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [expected_to_json(v) for v in value]
    return value


def content_score(expected: Any, actual: Any, schema: Any = True, *, rel_tol: float = 1e-6,
                  abs_tol: float = 1e-9) -> float:
    """Fraction in [0, 1] of the leaves of ``expected`` that ``actual`` matches (see module doc).

    ``schema`` (the task's JSON Schema) tells which arrays are sets and which strings are
    date-times; local ``$ref``s (``#/...``) are followed.
    """
    scorer = _Scorer(schema, rel_tol, abs_tol)
    matched, total = scorer.match(expected, actual, schema)
    return matched / total if total else 1.0


class _Scorer:
    def __init__(self, root: Any, rel_tol: float, abs_tol: float):
        self.root = root
        self.rel_tol = rel_tol
        self.abs_tol = abs_tol

    # -- schema navigation ------------------------------------------------------------------
    def _resolve(self, schema: Any) -> Any:
        for _ in range(32):  # bounded: a ref cycle must not hang the scorer
            if not isinstance(schema, Mapping):
                return schema
            ref = schema.get("$ref")
            if not isinstance(ref, str) or not ref.startswith("#"):
                return schema
            target: Any = self.root
            for part in ref[1:].split("/")[1:]:
                part = part.replace("~1", "/").replace("~0", "~")
                if isinstance(target, Mapping) and part in target:
                    target = target[part]
                elif isinstance(target, list) and part.isdigit() and int(part) < len(target):
                    target = target[int(part)]
                else:
                    return None
            schema = target
        return None

    def _property(self, schema: Any, key: str) -> Any:
        if not isinstance(schema, Mapping):
            return None
        props = schema.get("properties")
        if isinstance(props, Mapping) and key in props:
            return self._resolve(props[key])
        extra = schema.get("additionalProperties")
        return self._resolve(extra) if isinstance(extra, Mapping) else None

    def _item(self, schema: Any, index: int) -> Any:
        if not isinstance(schema, Mapping):
            return None
        prefix = schema.get("prefixItems")
        items = schema.get("items")
        if isinstance(items, list):  # draft 4-2019 tuple form
            prefix, items = items, schema.get("additionalItems")
        if isinstance(prefix, list) and index < len(prefix):
            return self._resolve(prefix[index])
        return self._resolve(items) if isinstance(items, Mapping) else None

    # -- matching -----------------------------------------------------------------------------
    def leaves(self, expected: Any) -> int:
        if isinstance(expected, AnyOf):
            return min(self.leaves(o) for o in expected)
        if isinstance(expected, Mapping) and expected:
            return sum(self.leaves(v) for v in expected.values() if not _optional(v)) or 1
        if isinstance(expected, list) and expected:
            return sum(self.leaves(v) for v in expected)
        return 1

    def match(self, expected: Any, actual: Any, schema: Any) -> tuple[float, int]:
        """(matched leaves, total leaves) of ``actual`` against ``expected``."""
        schema = self._resolve(schema)
        if isinstance(expected, AnyOf):
            options = [o for o in expected if o is not ABSENT] or [ABSENT]
            scored = [self.match(o, actual, schema) for o in options]
            return max(scored, key=lambda mt: (mt[0] / mt[1] if mt[1] else 1.0, -mt[1]))
        if expected is ABSENT:
            return 0.0, 1  # reached only when the key is present
        if isinstance(expected, Mapping):
            return self._object(expected, actual, schema)
        if isinstance(expected, list):
            return self._array(expected, actual, schema)
        return (1.0 if self._scalar(expected, actual, schema) else 0.0), 1

    def _object(self, expected: Mapping, actual: Any, schema: Any) -> tuple[float, int]:
        if not isinstance(actual, Mapping):
            return 0.0, self.leaves(expected)
        if not expected:
            return (1.0 if not actual else 0.0), 1 + max(len(actual) - 1, 0)
        matched, total = 0.0, 0
        for key, exp in expected.items():
            if key in actual:
                sub = self._property(schema, key)
                if self._free(exp, sub):
                    continue  # every value the schema allows is right: no content in it
                m, t = self.match(exp, actual[key], sub)
                if _optional(exp):
                    if m == t:
                        continue  # right, it says what leaving it out says: the default
                    m = 0.0  # given and wrong (even in part): every leaf of it is lost
            elif _optional(exp):
                continue  # neutral: crediting it would pay `{}` for every key it leaves out
            else:
                m, t = 0.0, self.leaves(exp)
            matched += m
            total += t
        total += sum(1 for key in actual if key not in expected)
        if not total:  # `actual` is `{}` and every expected key may be left out: it is right
            return 1.0, 1
        return matched, total

    def _free(self, expected: Any, schema: Any) -> bool:
        """Whether ``expected`` accepts every value ``schema`` allows (an ``AnyOf`` of the whole
        enum, or of both booleans): a schema-only answer gets such a leaf right by force."""
        if not isinstance(expected, AnyOf) or not isinstance(schema, Mapping):
            return False
        allowed = schema.get("enum")
        if not isinstance(allowed, list):
            allowed = [True, False] if schema.get("type") == "boolean" else None
        if not allowed or len(allowed) > 64:
            return False
        return all(any(self._scalar(o, v, schema) for o in expected if o is not ABSENT)
                   for v in allowed)

    def _array(self, expected: list, actual: Any, schema: Any) -> tuple[float, int]:
        if not isinstance(actual, list):
            return 0.0, self.leaves(expected)
        if not expected:
            return (1.0 if not actual else 0.0), max(len(actual), 1)
        is_set = isinstance(schema, Mapping) and schema.get("uniqueItems") is True
        if not is_set:
            matched, total = 0.0, 0
            for i, exp in enumerate(expected):
                if i < len(actual):
                    m, t = self.match(exp, actual[i], self._item(schema, i))
                else:
                    m, t = 0.0, self.leaves(exp)
                matched += m
                total += t
            return matched, total + max(len(actual) - len(expected), 0)
        item_schema = self._item(schema, 0)
        pairs = []
        for i, exp in enumerate(expected):
            for j, act in enumerate(actual):
                m, t = self.match(exp, act, item_schema)
                pairs.append((m / t if t else 1.0, i, j, m, t))
        pairs.sort(key=lambda p: -p[0])
        used_e: set[int] = set()
        used_a: set[int] = set()
        matched, total = 0.0, 0
        for _, i, j, m, t in pairs:
            if i not in used_e and j not in used_a:
                used_e.add(i)
                used_a.add(j)
                matched += m
                total += t
        total += sum(self.leaves(e) for i, e in enumerate(expected) if i not in used_e)
        return matched, total + (len(actual) - len(used_a))

    def _scalar(self, expected: Any, actual: Any, schema: Any) -> bool:
        if isinstance(expected, bool) or isinstance(actual, bool) or expected is None:
            return type(expected) is type(actual) and expected == actual
        if isinstance(expected, float):
            return isinstance(actual, int | float) and math.isclose(
                actual, expected, rel_tol=self.rel_tol, abs_tol=self.abs_tol)
        if isinstance(expected, int):
            return isinstance(actual, int | float) and actual == expected
        if isinstance(expected, str) and isinstance(actual, str):
            if expected == actual:
                return True
            if isinstance(schema, Mapping) and schema.get("format") == "date-time":
                return _same_instant(expected, actual)
            return False
        return expected == actual


def _optional(expected: Any) -> bool:
    """The expected value of a key that may be left out."""
    return expected is ABSENT or (isinstance(expected, AnyOf) and ABSENT in expected)


def _same_instant(a: str, b: str) -> bool:
    try:
        da = datetime.fromisoformat(a.replace("z", "Z"))
        db = datetime.fromisoformat(b.replace("z", "Z"))
    except ValueError:
        return False
    if (da.tzinfo is None) != (db.tzinfo is None):
        return False
    return da == db
