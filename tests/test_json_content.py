"""Content accuracy against an expected value, and how it blends into the gate's score."""

from __future__ import annotations

import json

import pytest

from envs.verify.json import verify
from envs.verify.json_content import (
    ABSENT,
    AnyOf,
    content_score,
    expected_from_json,
    expected_to_json,
)

RECORD = {"name": "Ada", "age": 36, "admin": True, "height": 1.68}


def test_exact_match_scores_one():
    assert content_score(RECORD, dict(RECORD)) == 1.0


def test_each_leaf_counts():
    assert content_score(RECORD, {**RECORD, "name": "Bob"}) == 0.75
    assert content_score(RECORD, {**RECORD, "name": "ada"}) == 0.75  # strings are exact


def test_integers_exact_booleans_strict():
    assert content_score({"n": 3}, {"n": 3.0}) == 1.0
    assert content_score({"n": 3}, {"n": 3.0000001}) == 0.0
    assert content_score({"b": True}, {"b": 1}) == 0.0
    assert content_score({"n": 1}, {"n": True}) == 0.0
    assert content_score({"z": None}, {"z": None}) == 1.0
    assert content_score({"z": None}, {"z": 0}) == 0.0


def test_float_tolerance():
    assert content_score({"x": 0.1 + 0.2}, {"x": 0.3}) == 1.0
    assert content_score({"x": 19.99}, {"x": 19.99 * (1 + 1e-9)}) == 1.0
    assert content_score({"x": 19.99}, {"x": 20.0}) == 0.0
    assert content_score({"x": 19.99}, {"x": 20.0}, rel_tol=0.01) == 1.0
    assert content_score({"x": 2.0}, {"x": 2}) == 1.0


def test_missing_and_extra_keys():
    assert content_score({"a": 1, "b": 2}, {"a": 1}) == 0.5
    assert content_score({"a": 1, "b": 2}, {"a": 1, "b": 2, "c": 3, "d": 4}) == 0.5
    assert content_score({"a": 1}, [1]) == 0.0


def test_nested_partial_credit():
    expected = {"id": 1, "address": {"city": "Lyon", "zip": "69001"}, "tags": ["a", "b"]}
    actual = {"id": 1, "address": {"city": "Lyon", "zip": "69002"}, "tags": ["a", "c"]}
    assert content_score(expected, actual) == pytest.approx(3 / 5)


def test_ordered_array_order_matters():
    assert content_score([1, 2, 3], [3, 2, 1]) == pytest.approx(1 / 3)
    assert content_score([1, 2], [1, 2, 3]) == pytest.approx(2 / 3)
    assert content_score([1, 2, 3], [1]) == pytest.approx(1 / 3)


def test_sets_ignore_order():
    schema = {"type": "array", "items": {"type": "string"}, "uniqueItems": True}
    assert content_score(["a", "b", "c"], ["c", "a", "b"], schema) == 1.0
    assert content_score(["a", "b"], ["b", "x"], schema) == pytest.approx(1 / 2)
    assert content_score(["a", "b"], ["b", "a", "z"], schema) == pytest.approx(2 / 3)


def test_set_of_objects_pairs_best_matches():
    schema = {"type": "object", "properties": {"people": {
        "type": "array", "uniqueItems": True,
        "items": {"type": "object"}}}}
    expected = {"people": [{"n": "A", "age": 1}, {"n": "B", "age": 2}]}
    actual = {"people": [{"n": "B", "age": 2}, {"n": "A", "age": 9}]}
    assert content_score(expected, actual, schema) == pytest.approx(3 / 4)


def test_schema_refs_are_followed_for_sets():
    schema = {"$defs": {"tags": {"type": "array", "uniqueItems": True}},
              "type": "object", "properties": {"tags": {"$ref": "#/$defs/tags"}}}
    assert content_score({"tags": ["x", "y"]}, {"tags": ["y", "x"]}, schema) == 1.0
    assert content_score({"tags": ["x", "y"]}, {"tags": ["y", "x"]}) == 0.0


def test_date_times_compare_as_instants():
    schema = {"type": "object", "properties": {"at": {"type": "string", "format": "date-time"}}}
    expected = {"at": "2024-05-01T10:30:00Z"}
    assert content_score(expected, {"at": "2024-05-01T12:30:00+02:00"}, schema) == 1.0
    assert content_score(expected, {"at": "2024-05-01T10:31:00Z"}, schema) == 0.0
    assert content_score(expected, {"at": "2024-05-01T12:30:00+02:00"}) == 0.0  # no schema


def test_any_of_and_absent():
    expected = {"unit": AnyOf("units", ABSENT), "base": AnyOf(10, 10.5), "mode": ABSENT}
    assert content_score(expected, {"base": 10}) == 1.0
    assert content_score(expected, {"base": 10.5, "unit": "units"}) == 1.0
    # An optional key counts only when given (it used to add a free matched leaf when left out,
    # so these were 2/3): a wrong "unit" or a "mode" that must be absent is 1 of 2 leaves.
    assert content_score(expected, {"base": 10, "unit": "cm"}) == pytest.approx(1 / 2)
    assert content_score(expected, {"base": 10, "mode": "fast"}) == pytest.approx(1 / 2)
    assert content_score({"b": AnyOf(1, 2)}, {}) == 0.0


def test_optional_keys_left_out_are_neutral():
    expected = {"a": 1, "b": AnyOf(2, ABSENT), "c": ABSENT}
    assert content_score(expected, {}) == 0.0  # no credit for what `{}` leaves out
    assert content_score(expected, {"a": 9}) == 0.0
    assert content_score(expected, {"a": 1}) == 1.0
    assert content_score(expected, {"a": 1, "b": 3}) == pytest.approx(1 / 2)
    # Every key optional: `{}` is the right answer (one matched leaf, as for an empty object).
    assert content_score({"b": AnyOf(2, ABSENT)}, {}) == 1.0
    assert content_score({"b": AnyOf(2, ABSENT)}, {"b": 3}) == 0.0
    assert content_score({"x": {"o": AnyOf(1, ABSENT)}, "y": 1}, {"x": {}, "y": 1}) == 1.0
    assert content_score({"x": {"o": AnyOf(1, ABSENT)}, "y": 1}, {"y": 1}) == pytest.approx(1 / 2)


def test_any_of_nested_objects():
    expected = {"where": AnyOf({"city": AnyOf("NYC", "New York")}, {"zip": "10001"})}
    assert content_score(expected, {"where": {"city": "New York"}}) == 1.0
    assert content_score(expected, {"where": {"zip": "10001"}}) == 1.0
    assert content_score(expected, {"where": {"zip": "99999"}}) == 0.0


def test_json_form_round_trip():
    value = {"a": AnyOf(1, ABSENT), "b": [AnyOf("x", "y"), {"c": ABSENT}], "d": None}
    stored = expected_to_json(value)
    assert stored == {"a": {"$anyOf": [1, {"$absent": True}]},
                      "b": [{"$anyOf": ["x", "y"]}, {"c": {"$absent": True}}], "d": None}
    assert expected_from_json(json.loads(json.dumps(stored))) == value


# -- the gate's score ---------------------------------------------------------------------------
SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}, "age": {
    "type": "integer"}}, "required": ["name", "age"]}


def test_score_blends_validity_and_content():
    exact = verify(SCHEMA, '{"name": "Ada", "age": 36}', expected={"name": "Ada", "age": 36})
    assert (exact.passed, exact.score, exact.reason) == (True, 1.0, "equal")
    # Half the content right is not enough for validity to pay (CONTENT_GATE): it used to
    # score 0.75, which a schema-only value with one lucky field collected too.
    half = verify(SCHEMA, '{"name": "Bob", "age": 36}', expected={"name": "Ada", "age": 36})
    assert (half.passed, half.score, half.reason) == (False, 0.25, "content_mismatch")
    assert half.details["content"] == 0.5 and half.details["paid_valid"] is False
    three = {**SCHEMA, "properties": {**SCHEMA["properties"], "city": {"type": "string"}}}
    most = verify(three, '{"name": "Ada", "age": 36, "city": "Rome"}',
                  expected={"name": "Ada", "age": 36, "city": "Paris"})
    assert most.details["paid_valid"] is True
    assert most.score == pytest.approx(0.5 + 0.5 * 2 / 3)
    # A value that fails the schema earns no content (it used to score 0.25 here): otherwise
    # `{}` or an echoed schema collects the fields it happens to match.
    invalid = verify(SCHEMA, '{"name": "Ada", "age": "36"}', expected={"name": "Ada", "age": 36})
    assert (invalid.passed, invalid.score, invalid.reason) == (False, 0.0, "schema_invalid")
    assert (invalid.details["content"], invalid.details["content_raw"]) == (0.0, 0.5)
    weighted = verify(three, '{"name": "Ada", "age": 36, "city": "Rome"}',
                      expected={"name": "Ada", "age": 36, "city": "Paris"}, content_weight=0.8)
    assert weighted.score == pytest.approx(0.2 + 0.8 * 2 / 3)


def test_competing_values_earn_no_content():
    text = '{"name": "Ada", "age": 36} or {"name": "Bob", "age": 36}'
    verdict = verify(SCHEMA, text, expected={"name": "Ada", "age": 36})
    # No content, so its validity is not paid either (it scored 0.5 before the content gate).
    assert (verdict.passed, verdict.score, verdict.reason) == (False, 0.0, "competing_values")
    assert (verdict.details["content"], verdict.details["content_raw"]) == (0.0, 1.0)
    assert verdict.details["valid"] and not verdict.details["paid_valid"]


def test_echoed_schema_is_never_valid():
    loose = {"type": "object"}  # the echo conforms to this schema, yet is no answer
    verdict = verify(loose, json.dumps(loose), expected={"name": "Ada"})
    assert (verdict.passed, verdict.score, verdict.reason) == (False, 0.0, "echoed_schema")
    assert verdict.details["valid"] is False and verdict.details["errors"] == []
    props = verify(SCHEMA, json.dumps(SCHEMA["properties"]), expected={"name": "Ada", "age": 36})
    assert props.reason == "echoed_schema" and props.details["content"] == 0.0
    assert verify(loose, json.dumps(loose)).reason == "echoed_schema"  # without expected too
    # An empty `properties` is not an echo: `{}` is the arguments of a function without any.
    empty = {"type": "object", "properties": {}, "additionalProperties": False}
    assert verify(empty, "{}", expected={}).passed


def test_without_expected_score_is_validity():
    verdict = verify(SCHEMA, '{"name": "Bob", "age": 1}')
    assert (verdict.score, verdict.reason, verdict.details["content"]) == (1.0, "valid", None)


def test_expected_null_via_any_of():
    assert verify(True, "null", expected=AnyOf(None)).passed
    assert not verify(True, "0", expected=AnyOf(None)).passed


def test_a_leaf_every_allowed_value_gets_right_is_no_content():
    # BFCL lists every region as acceptable for some calls: any schema-valid value matches,
    # so the leaf says nothing about reading the query and is neither gained nor lost.
    schema = {"type": "object", "properties": {
        "region": {"type": "string", "enum": ["N", "S"]}, "flag": {"type": "boolean"},
        "year": {"type": "integer"}}}
    expected = {"region": AnyOf("N", "S"), "flag": AnyOf(True, False), "year": 1815}
    assert content_score(expected, {"region": "S", "flag": False, "year": 1900}, schema) == 0.0
    assert content_score(expected, {"region": "N", "flag": True, "year": 1815}, schema) == 1.0
    # An AnyOf that leaves out an allowed value is content as before.
    assert content_score({"region": AnyOf("N"), "year": 1815}, {"region": "N", "year": 1900},
                         schema) == pytest.approx(1 / 2)
