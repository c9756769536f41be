"""The JSON-schema gate: find one JSON value in model text, validate it, score its content.

``verify(schema, completion, expected=...)`` takes the whole text if it is JSON, else the last
fenced ```json block, else the first balanced object or array a real JSON decoder accepts amid
prose, all read after any ``<think>`` block (``envs.verify.json_extract``), and returns the
shared ``Verdict``:

- ``reason`` says which stage decided. Extraction failures: ``too_large``, ``too_deep``,
  ``no_json``, ``unparseable``, ``duplicate_keys``, ``non_finite_number``
  (``details["stage"] == "extract"``). Validation failures: ``echoed_schema`` (the value is the
  task's schema or its non-empty ``properties`` copied back; never valid, even where it happens
  to conform) and ``schema_invalid`` (``stage == "validate"``). Otherwise ``valid`` (no
  expected value), ``competing_values`` (the text holds more than one JSON value, so no
  content credit), ``equal`` or ``content_mismatch`` (``stage == "content"``).
- ``extracted`` is the parsed value; ``details`` holds ``method`` (whole / fenced / prose),
  ``single`` (no competing JSON value in the text), ``valid``, ``errors`` (each with its JSON
  ``path``, ``message`` and failing ``validator`` keyword, at most ``max_errors``),
  ``content`` (the credited content score: 0.0 unless the value is single and valid),
  ``content_raw`` (the field accuracy before that rule, for diagnosis) and ``paid_valid``
  (validity is paid: valid, and with an expected value more than ``CONTENT_GATE`` of the
  content right, so a value built from the schema alone is never paid for its form).

The validator class follows the schema's ``$schema`` (Draft 4, 6, 7, 2019-09 or 2020-12;
2020-12 when absent) with format assertion on, so a malformed ``date-time``, ``email``,
``ipv4`` or ``uri`` fails. An invalid schema raises ``SchemaTaskError``: it is the task's fault,
not the model's. Compiled validators are cached per schema object and per canonical schema
text, so a schema must not be mutated after it has been passed in.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from itertools import islice
from typing import Any

from jsonschema import (
    Draft4Validator,
    Draft6Validator,
    Draft7Validator,
    Draft201909Validator,
    Draft202012Validator,
)
from jsonschema.exceptions import SchemaError
from jsonschema.protocols import Validator

from envs.verify.json_content import ABSENT, AnyOf, content_score, expected_from_json
from envs.verify.json_extract import Rejected, answer_text, extract
from envs.verify.verdict import Verdict

__all__ = [
    "ABSENT",
    "AnyOf",
    "SchemaTaskError",
    "compiled_validator",
    "content_score",
    "echoes_schema",
    "expected_from_json",
    "verify",
]

MAX_CHARS = 1_000_000
MAX_DEPTH = 64
MAX_ERRORS = 20
#: Share of ``score`` that content accuracy takes when an expected value is given.
CONTENT_WEIGHT = 0.5
#: Validity pays only beside content: a valid value earns its share of ``score`` (and the env its
#: ``valid`` and ``format`` rewards) only when more than this share of its content is right.
#: Below it, the value is what a policy that never reads the text can build from the schema
#: (placeholders, range ends, the first enum value: ``envs.verify.json_baselines``), at best
#: with a lucky field or two; paying its validity would feed such a policy for ever.
CONTENT_GATE = 0.5

_DIALECTS: dict[str, type[Validator]] = {
    "json-schema.org/draft-04/schema": Draft4Validator,
    "json-schema.org/draft-06/schema": Draft6Validator,
    "json-schema.org/draft-07/schema": Draft7Validator,
    "json-schema.org/draft/2019-09/schema": Draft201909Validator,
    "json-schema.org/draft/2020-12/schema": Draft202012Validator,
}
_CACHE_SIZE = 1024
_by_id: dict[int, tuple[Any, Validator]] = {}
_by_text: dict[str, Validator] = {}
_lock = threading.Lock()


class SchemaTaskError(ValueError):
    """The task's schema is not a valid JSON Schema of a supported draft."""


def _validator_class(schema: Any) -> type[Validator]:
    if isinstance(schema, bool):
        return Draft202012Validator
    if not isinstance(schema, Mapping):
        raise SchemaTaskError(f"a schema is a JSON object or a boolean, not {type(schema).__name__}")
    uri = schema.get("$schema")
    if uri is None:
        return Draft202012Validator
    key = uri.partition("://")[2].rstrip("#") if isinstance(uri, str) else None
    if key not in _DIALECTS:
        raise SchemaTaskError(f"unsupported $schema {uri!r}; supported: drafts 4, 6, 7, "
                              "2019-09 and 2020-12")
    return _DIALECTS[key]


def _remember(cache: dict, key: Any, value: Any) -> None:
    with _lock:
        if len(cache) >= _CACHE_SIZE:
            cache.pop(next(iter(cache)), None)  # evict the oldest entry
        cache[key] = value


def compiled_validator(schema: Mapping[str, Any] | bool) -> Validator:
    """The cached validator (format assertion on) for ``schema``; raises ``SchemaTaskError``."""
    hit = _by_id.get(id(schema))
    if hit is not None and hit[0] is schema:
        return hit[1]
    try:
        text = json.dumps(schema, sort_keys=True, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise SchemaTaskError(f"the schema is not JSON: {exc}") from exc
    validator = _by_text.get(text)
    if validator is None:
        cls = _validator_class(schema)
        try:
            cls.check_schema(schema)
        except SchemaError as exc:
            raise SchemaTaskError(f"invalid schema at {exc.json_path}: {exc.message}") from exc
        validator = cls(schema, format_checker=cls.FORMAT_CHECKER)
        _remember(_by_text, text, validator)
    # Holding the schema keeps its id from being reused by another object while cached.
    _remember(_by_id, id(schema), (schema, validator))
    return validator


def verify(
    schema: Mapping[str, Any] | bool,
    completion: str,
    *,
    expected: Any = None,
    max_chars: int = MAX_CHARS,
    max_depth: int = MAX_DEPTH,
    max_errors: int = MAX_ERRORS,
    content_weight: float = CONTENT_WEIGHT,
    rel_tol: float = 1e-6,
) -> Verdict:
    """Grade ``completion`` against ``schema`` (and ``expected``, when the task knows it).

    Without ``expected``, ``score`` is 1.0 for a valid value and 0.0 otherwise. With it,
    ``score = (1 - content_weight) * paid_valid + content_weight * content``, where
    ``paid_valid`` (``details["paid_valid"]``) is validity gated behind content: the value is
    valid, single and more than ``CONTENT_GATE`` of its content is right; ``content`` is
    the fraction of expected leaves the value gets right (``envs.verify.json_content``:
    strings, integers and booleans exact, floats within ``rel_tol``, arrays marked
    ``uniqueItems`` compared as sets, ``AnyOf``/``ABSENT`` for several acceptable answers), and
    ``passed`` needs ``content == 1``. Content is credited only to a single, schema-valid value:
    a value that fails the schema (``{}`` missing required keys, an echo of the schema) or one
    of several competing values scores ``content`` 0.0, whatever fields it happens to match.
    ``expected=None`` means "not given"; to expect JSON ``null`` pass ``AnyOf(None)``.

    Completions longer than ``max_chars`` or nested deeper than ``max_depth`` are rejected
    before any expensive work.
    """
    validator = compiled_validator(schema)
    if not isinstance(completion, str):
        raise TypeError(f"a completion must be a str, got {type(completion).__name__}")
    if len(completion) > max_chars:
        return Verdict.fail("too_large", stage="extract", chars=len(completion),
                            max_chars=max_chars)
    try:
        found = extract(completion, max_depth)
    except Rejected as rej:
        return Verdict.fail(rej.reason, stage="extract", **rej.details)
    if found is None:
        # Say when a think block was read past: a value there is a draft, never the answer.
        past = answer_text(completion) != completion
        return Verdict.fail("no_json", stage="extract", **({"after_reasoning": True} if past
                                                            else {}))
    value = found.value
    errors = [
        {"path": err.json_path, "message": err.message[:300], "validator": str(err.validator)}
        for err in islice(validator.iter_errors(value), max_errors)
    ]
    echoed = echoes_schema(value, schema)
    valid = not errors and not echoed
    details: dict[str, Any] = {"method": found.method, "single": found.single, "valid": valid,
                               "errors": errors, "content": None}
    invalid_reason = "echoed_schema" if echoed else "schema_invalid"
    if expected is None:
        details["paid_valid"] = valid
        if valid:
            return Verdict(True, 1.0, "valid", value, {"stage": "content", **details})
        return Verdict(False, 0.0, invalid_reason, value, {"stage": "validate", **details})
    raw = content_score(expected, value, schema, rel_tol=rel_tol)
    # Only one valid value earns content: otherwise `{}`, an echoed schema or a hedge between
    # several values would collect the fields they happen to match without doing the task.
    content = raw if valid and found.single else 0.0
    paid_valid = valid and content > CONTENT_GATE
    details.update(content=content, content_raw=raw, paid_valid=paid_valid)
    score = (1.0 - content_weight) * float(paid_valid) + content_weight * content
    if not valid:
        return Verdict(False, score, invalid_reason, value, {"stage": "validate", **details})
    if not found.single:
        return Verdict(False, score, "competing_values", value, {"stage": "content", **details})
    passed = content == 1.0
    return Verdict(passed, score, "equal" if passed else "content_mismatch", value,
                   {"stage": "content", **details})


def echoes_schema(value: Any, schema: Mapping[str, Any] | bool) -> bool:
    """Whether ``value`` is ``schema`` itself or its ``properties`` object, copied back.

    An empty ``properties`` is left out: for a function without parameters ``{}`` is the answer.
    """
    if not isinstance(schema, Mapping) or not isinstance(value, Mapping) or not value:
        return False
    return value == schema or value == schema.get("properties")
