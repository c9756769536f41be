"""Schema-only answers: JSON values built from a task's schema without reading its text.

A policy that cannot read the text can still learn the schema's shape, so these are the values
such a policy converges to: placeholder strings, the minimum or maximum of each number, the
first or last enum value, empty arrays and objects, the schema's defaults, required keys only
with typed zeros, and the schema's own words (``description``/``title``, key names, whole enum
lists) or the task's text pasted into every string. ``schema_only_values`` builds them all;
``grpo/JsonSchema-v0`` grades them to refuse tasks they pass (``trivially_passed``) and shows
them on the report card (``shallow_completions``). None of them may be paid (see
``envs.domains.json_schema``).

Strings are made to fit their schema where that is cheap (a ``format``, a ``pattern`` via the
shortest string the regex matches, ``minLength``), so the baselines are schema-valid wherever
a schema-only policy could be: the strongest form of the attack, not a strawman.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

#: A string each ``format`` accepts, so a placeholder stays schema-valid.
FORMAT_PLACEHOLDERS = {
    "email": "user@example.com", "idn-email": "user@example.com",
    "date": "2000-01-01", "date-time": "2000-01-01T00:00:00Z", "time": "00:00:00Z",
    "uri": "https://example.com", "iri": "https://example.com", "uri-reference": "x",
    "ipv4": "0.0.0.0", "ipv6": "::1", "hostname": "example.com", "uuid":
    "00000000-0000-0000-0000-000000000000", "duration": "P1D",
}
_DEPTH = 16  # nested schemas followed; deeper ones get a typed zero
MAX_ENUM_INDEX = 24  # enum positions tried, each in one baseline (and one with booleans true)


@dataclass(frozen=True)
class _Policy:
    """How one baseline fills each kind of schema."""

    all_keys: bool = False  # every declared property, not only the required ones
    number: str = "min"  # "min", "max" or "zero"
    enum: str | int = "first"  # "first", "last", or an index (each enum's value there, or last)
    boolean: bool = False
    array: str = "min"  # "min" (minItems fillers), "empty" or "enum" (every enum value)
    defaults: bool = False  # a declared default wins over the filler
    only_defaults: bool = False  # keys without a default (at any depth) are left out
    string: Callable[[Mapping[str, Any], str], str] | None = None  # (schema, key) -> text
    fit: bool = True  # fit strings to format/pattern/minLength; False: the raw filler


def _placeholder(schema: Mapping[str, Any], key: str) -> str:
    return "string"


def _described(schema: Mapping[str, Any], key: str) -> str:
    for word in ("description", "title"):
        if isinstance(schema.get(word), str) and schema[word]:
            return schema[word]
    return key or "string"


POLICIES: dict[str, _Policy] = {
    "placeholders": _Policy(),
    "placeholders_all_keys": _Policy(all_keys=True),
    "maximum_last_enum_true": _Policy(all_keys=True, number="max", enum="last", boolean=True),
    "minimum_first_enum_required": _Policy(number="min", enum="first"),
    "typed_zeros": _Policy(number="zero", array="empty", string=lambda s, k: "", fit=False),
    "typed_zeros_all_keys": _Policy(all_keys=True, number="zero", array="empty",
                                    string=lambda s, k: "", fit=False),
    "defaults": _Policy(all_keys=True, defaults=True),
    "defaults_only": _Policy(defaults=True, only_defaults=True),
    "descriptions": _Policy(string=_described, fit=False),
    "descriptions_all_keys": _Policy(all_keys=True, string=_described, fit=False),
    "key_names": _Policy(all_keys=True, string=lambda s, k: k or "string", fit=False),
    "enum_lists": _Policy(all_keys=True, array="enum"),
}


def schema_only_values(schema: Any, *, text: str | None = None,
                       example: Any = None) -> dict[str, Any]:
    """Name -> a JSON value built from ``schema`` alone (``POLICIES``, plus ``{}``, ``[]`` and
    each property set to ``null`` or ``""``). ``text`` (the task's prose or query) adds a value
    with it as every string; ``example`` (a record the prompt shows) adds it verbatim."""
    values: dict[str, Any] = {"empty_object": {}, "empty_array": []}
    builder = _Builder(schema)
    for name, policy in POLICIES.items():
        values[name] = builder.value(schema, policy)
    # Every enum at its i-th value (the first and last are above): a task whose content is one
    # enum choice is then passed by one of these, whichever value is right.
    for index in range(1, min(_longest_enum(schema), MAX_ENUM_INDEX)):
        values[f"enum_value_{index}"] = builder.value(schema, _Policy(enum=index))
        values[f"enum_value_{index}_true"] = builder.value(
            schema, _Policy(all_keys=True, enum=index, boolean=True))
    props = _properties(builder.resolve(schema))
    if props:
        values["keys_with_null"] = dict.fromkeys(props)
        values["keys_with_empty_strings"] = dict.fromkeys(props, "")
    if text:
        values["text_as_every_string"] = builder.value(
            schema, _Policy(all_keys=True, string=lambda s, k: text, fit=False))
    if example is not None:
        values["shown_example"] = example
    return values


def _longest_enum(schema: Any, depth: int = 0) -> int:
    """The most values any enum in ``schema`` has."""
    if depth > _DEPTH:
        return 0
    if isinstance(schema, Mapping):
        enum = schema.get("enum")
        own = len(enum) if isinstance(enum, list) else 0
        return max([own, *(_longest_enum(v, depth + 1) for k, v in schema.items()
                           if k not in ("enum", "default", "const", "examples"))])
    if isinstance(schema, list):
        return max((_longest_enum(v, depth + 1) for v in schema), default=0)
    return 0


def _properties(schema: Any) -> Mapping[str, Any]:
    props = schema.get("properties") if isinstance(schema, Mapping) else None
    return props if isinstance(props, Mapping) else {}


class _Builder:
    def __init__(self, root: Any):
        self.root = root

    def resolve(self, schema: Any) -> Any:
        for _ in range(_DEPTH):  # a ref cycle must not hang the builder
            ref = schema.get("$ref") if isinstance(schema, Mapping) else None
            if not isinstance(ref, str) or not ref.startswith("#"):
                return schema
            target: Any = self.root
            for part in ref[1:].split("/")[1:]:
                part = part.replace("~1", "/").replace("~0", "~")
                target = target.get(part) if isinstance(target, Mapping) else None
            schema = target
        return None

    def value(self, schema: Any, policy: _Policy, key: str = "", depth: int = 0) -> Any:
        schema = self.resolve(schema)
        if not isinstance(schema, Mapping):
            return "string" if schema is not False else None
        if policy.defaults and "default" in schema:
            return schema["default"]
        if "const" in schema:
            return schema["const"]
        enum = schema.get("enum")
        if isinstance(enum, list) and enum:
            if isinstance(policy.enum, int):
                return enum[min(policy.enum, len(enum) - 1)]
            return enum[0] if policy.enum == "first" else enum[-1]
        for word in ("anyOf", "oneOf"):  # the first alternative, as a policy would learn it
            options = schema.get(word)
            if isinstance(options, list) and options and depth < _DEPTH:
                merged = {k: v for k, v in schema.items() if k != word}
                return self.value({**merged, **options[0]}, policy, key, depth + 1)
        kind = schema.get("type")
        if isinstance(kind, list):
            kind = next((k for k in kind if k != "null"), kind[0] if kind else None)
        if kind is None:
            kind = ("object" if "properties" in schema else
                    "array" if "items" in schema or "prefixItems" in schema else "string")
        if depth >= _DEPTH:
            return {"object": {}, "array": []}.get(kind)
        if kind == "object":
            return self._object(schema, policy, depth)
        if kind == "array":
            return self._array(schema, policy, key, depth)
        if kind in ("number", "integer"):
            return _number(schema, policy.number, kind == "integer")
        if kind == "boolean":
            return policy.boolean
        if kind == "null":
            return None
        return self._string(schema, policy, key)

    def _object(self, schema: Mapping[str, Any], policy: _Policy, depth: int) -> dict[str, Any]:
        props = _properties(schema)
        required = [k for k in schema.get("required") or [] if isinstance(k, str)]
        keys = list(props) if policy.all_keys else [k for k in props if k in required]
        keys += [k for k in required if k not in keys]
        out = {}
        for key in keys:
            sub = props.get(key, {})
            if policy.only_defaults and not self._has_default(sub, depth):
                continue
            out[key] = self.value(sub, policy, key, depth + 1)
        return out

    def _has_default(self, schema: Any, depth: int) -> bool:
        schema = self.resolve(schema)
        if not isinstance(schema, Mapping) or depth >= _DEPTH:
            return False
        return "default" in schema or any(self._has_default(s, depth + 1)
                                          for s in _properties(schema).values())

    def _array(self, schema: Mapping[str, Any], policy: _Policy, key: str,
               depth: int) -> list[Any]:
        items = schema.get("items")
        prefix = schema.get("prefixItems")
        if isinstance(items, list):  # the draft 4-2019 tuple form
            prefix, items = items, None
        item_enum = self.resolve(items).get("enum") if isinstance(self.resolve(items),
                                                                   Mapping) else None
        if policy.array == "enum" and isinstance(item_enum, list) and item_enum:
            return list(item_enum)
        if policy.array == "empty":
            return []
        count = schema.get("minItems", 0)
        count = count if isinstance(count, int) and 0 <= count <= 8 else 0
        if isinstance(prefix, list):
            return [self.value(s, policy, key, depth + 1) for s in prefix[:8]]
        if not count:
            return []
        first = self.value(items, policy, key, depth + 1)
        if schema.get("uniqueItems") is True and count > 1 and isinstance(item_enum, list):
            return list(item_enum[:count])
        return [first] * count

    def _string(self, schema: Mapping[str, Any], policy: _Policy, key: str) -> str:
        text = (policy.string or _placeholder)(schema, key)
        if not policy.fit:
            return text
        if schema.get("format") in FORMAT_PLACEHOLDERS:
            return FORMAT_PLACEHOLDERS[schema["format"]]
        pattern = schema.get("pattern")
        if isinstance(pattern, str) and not _matches(pattern, text):
            text = shortest_match(pattern) or text
        low = schema.get("minLength")
        if isinstance(low, int) and 0 < low <= 64 and len(text) < low:
            text = text + "x" * (low - len(text))
        return text


def _number(schema: Mapping[str, Any], choice: str, integer: bool) -> int | float:
    low = schema.get("minimum", schema.get("exclusiveMinimum"))
    high = schema.get("maximum", schema.get("exclusiveMaximum"))
    value: Any = 0
    if choice == "min" and isinstance(low, int | float) and not isinstance(low, bool):
        value = low
    elif choice == "max" and isinstance(high, int | float) and not isinstance(high, bool):
        value = high
    if isinstance(schema.get("exclusiveMinimum"), int | float) and value == low:
        value = low + 1
    if isinstance(schema.get("exclusiveMaximum"), int | float) and value == high:
        value = high - 1
    return int(value) if integer and float(value).is_integer() else value


def _matches(pattern: str, text: str) -> bool:
    try:
        return re.search(pattern, text) is not None
    except re.error:
        return True  # a pattern Python cannot read: leave the filler as it is


def shortest_match(pattern: str) -> str | None:
    """A short string ``pattern`` matches (each repeat at its minimum, each set's first member),
    or None where the regex uses what this walk does not follow (lookarounds, backrefs)."""
    try:
        # The stdlib's own regex parser: no reimplementation of it (private: not in typeshed).
        from re import _parser  # type: ignore[attr-defined]
        text = _walk(list(_parser.parse(pattern)))
    except Exception:  # noqa: BLE001 - any pattern it cannot follow: no fitted filler
        return None
    return text if text is not None and _matches(pattern, text) else None


def _walk(nodes: list[Any]) -> str | None:
    out = []
    for op, arg in nodes:
        name = str(op)
        if name == "LITERAL":
            out.append(chr(arg))
        elif name == "IN":
            first = _first_in(arg)
            if first is None:
                return None
            out.append(first)
        elif name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            low, _, sub = arg
            part = _walk(list(sub))
            if part is None:
                return None
            out.append(part * max(low, 0))
        elif name == "SUBPATTERN":
            part = _walk(list(arg[-1]))
            if part is None:
                return None
            out.append(part)
        elif name == "BRANCH":
            part = _walk(list(arg[1][0]))
            if part is None:
                return None
            out.append(part)
        elif name == "ANY":
            out.append("x")
        elif name == "AT":
            continue
        else:
            return None
    return "".join(out)


def _first_in(items: list[Any]) -> str | None:
    for op, arg in items:
        name = str(op)
        if name == "LITERAL":
            return chr(arg)
        if name == "RANGE":
            return chr(arg[0])
        if name == "CATEGORY":
            return {"CATEGORY_DIGIT": "0", "CATEGORY_WORD": "a",
                    "CATEGORY_SPACE": " "}.get(str(arg))
        if name == "NEGATE":
            return None
    return None


def with_policy(**changes: Any) -> _Policy:
    """A baseline policy beside ``POLICIES`` (tests build variants with it)."""
    return replace(_Policy(), **changes)


def build(schema: Any, policy: _Policy) -> Any:
    """The value ``policy`` builds from ``schema``."""
    return _Builder(schema).value(schema, policy)
