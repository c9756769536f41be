"""The JSON-schema gate: drafts, formats, extraction styles, limits and hostile input."""

from __future__ import annotations

import json

import pytest
from jsonschema import (
    Draft4Validator,
    Draft6Validator,
    Draft7Validator,
    Draft201909Validator,
    Draft202012Validator,
)

from envs.verify.json import SchemaTaskError, compiled_validator, verify
from envs.verify.json_extract import nesting_depth

D4 = "http://json-schema.org/draft-04/schema#"
D6 = "http://json-schema.org/draft-06/schema#"
D7 = "http://json-schema.org/draft-07/schema#"
D2019 = "https://json-schema.org/draft/2019-09/schema"
D2020 = "https://json-schema.org/draft/2020-12/schema"

PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name", "age"],
    "additionalProperties": False,
}
GOOD = '{"name": "Ada", "age": 36}'


# -- drafts -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("uri", "cls"),
    [(D4, Draft4Validator), (D6, Draft6Validator), (D7, Draft7Validator),
     (D2019, Draft201909Validator), (D2020, Draft202012Validator),
     ("https://json-schema.org/draft-07/schema", Draft7Validator)],
)
def test_validator_class_follows_dollar_schema(uri, cls):
    assert type(compiled_validator({"$schema": uri, "type": "object"})) is cls


def test_absent_dollar_schema_means_2020_12():
    assert type(compiled_validator({"type": "object"})) is Draft202012Validator


def test_draft4_boolean_exclusive_maximum():
    schema = {"$schema": D4, "type": "number", "maximum": 10, "exclusiveMaximum": True}
    assert verify(schema, "9.5").passed
    verdict = verify(schema, "10")
    assert verdict.reason == "schema_invalid"
    assert verdict.details["errors"][0]["validator"] == "maximum"
    with pytest.raises(SchemaTaskError):  # the same keyword is malformed in 2020-12
        verify({**schema, "$schema": D2020}, "9")


def test_draft6_numeric_exclusive_maximum_and_const():
    schema = {"$schema": D6, "type": "object",
              "properties": {"n": {"exclusiveMaximum": 10}, "k": {"const": "x"}}}
    assert verify(schema, '{"n": 9, "k": "x"}').passed
    assert not verify(schema, '{"n": 10, "k": "x"}').passed
    assert not verify(schema, '{"n": 1, "k": "y"}').passed


def test_draft7_if_then_else():
    schema = {"$schema": D7, "type": "object",
              "if": {"properties": {"kind": {"const": "card"}}},
              "then": {"required": ["number"]}, "else": {"required": ["iban"]}}
    assert verify(schema, '{"kind": "card", "number": "4111"}').passed
    assert not verify(schema, '{"kind": "card", "iban": "DE00"}').passed
    assert verify(schema, '{"kind": "bank", "iban": "DE00"}').passed


def test_draft2019_tuple_items_and_dependent_required():
    schema = {"$schema": D2019, "type": "array", "items": [{"type": "integer"}],
              "additionalItems": False}
    assert verify(schema, "[1]").passed
    assert not verify(schema, "[1, 2]").passed
    dep = {"$schema": D2019, "dependentRequired": {"card": ["expiry"]}}
    assert verify(dep, '{"card": 1, "expiry": 2}').passed
    assert not verify(dep, '{"card": 1}').passed


def test_draft2020_prefix_items():
    schema = {"$schema": D2020, "type": "array", "prefixItems": [{"type": "string"}],
              "items": False}
    assert verify(schema, '["a"]').passed
    assert not verify(schema, '["a", 1]').passed
    assert not verify({k: v for k, v in schema.items() if k != "$schema"}, '["a", 1]').passed


def test_boolean_schemas():
    assert verify(True, "[1, 2]").passed
    assert verify(False, "[1, 2]").reason == "schema_invalid"


# -- formats ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("fmt", "good", "bad"),
    [("date-time", "2024-05-01T10:30:00Z", "2024-05-01 10:30"),
     ("date-time", "2024-05-01T10:30:00+02:00", "yesterday at noon"),
     ("email", "ada@example.com", "ada.example.com"),
     ("ipv4", "192.168.1.20", "192.168.1.300"),
     ("uri", "https://example.com/a?b=c", "not a uri"),
     ("date", "2024-02-29", "2023-02-29")],
)
@pytest.mark.parametrize("draft", [D7, D2020])
def test_format_assertion_is_on(fmt, good, bad, draft):
    schema = {"$schema": draft, "type": "object",
              "properties": {"v": {"type": "string", "format": fmt}}}
    assert verify(schema, json.dumps({"v": good})).passed
    verdict = verify(schema, json.dumps({"v": bad}))
    assert verdict.reason == "schema_invalid"
    assert verdict.details["errors"] == [
        {"path": "$.v", "message": f"{bad!r} is not a {fmt!r}", "validator": "format"}]


# -- extraction ---------------------------------------------------------------------------------
def test_whole_text():
    verdict = verify(PERSON, "  \n" + GOOD + "\n ")
    assert verdict.passed and verdict.reason == "valid"
    assert verdict.extracted == {"name": "Ada", "age": 36}
    assert verdict.details["method"] == "whole" and verdict.details["single"]


def test_whole_text_scalar():
    assert verify({"type": "integer"}, " 42 ").extracted == 42


def test_last_fenced_json_block_wins():
    text = ("A first try:\n```json\n{\"name\": \"Bob\"}\n```\nFixed:\n```JSON\n" + GOOD +
            "\n```\nDone.")
    verdict = verify(PERSON, text)
    assert verdict.passed and verdict.extracted["name"] == "Ada"
    assert verdict.details["method"] == "fenced" and not verdict.details["single"]


def test_fenced_block_ignores_other_fences():
    text = "```python\nprint({'x': 1})\n```\nand\n```json\n" + GOOD + "\n```"
    verdict = verify(PERSON, text)
    assert verdict.passed and verdict.details["single"]


def test_prose_before_and_after():
    verdict = verify(PERSON, f"Sure! Here is the record: {GOOD}. Let me know if you need more.")
    assert verdict.passed
    assert verdict.details["method"] == "prose" and verdict.details["single"]


def test_prose_with_brackets_in_strings_and_around():
    text = 'Note [a]: the record {"name": "A {weird} ]name[", "age": 3} (done)'
    verdict = verify(PERSON, text)
    assert verdict.passed and verdict.extracted["name"] == "A {weird} ]name["


def test_prose_first_balanced_value_and_array():
    verdict = verify({"type": "array"}, "Values: [1, 2, 3] and later [4]")
    assert verdict.extracted == [1, 2, 3] and not verdict.details["single"]


def test_prose_skips_unbalanced_openers():
    verdict = verify(PERSON, "{ not json at all, then " + GOOD)
    assert verdict.passed and verdict.extracted["age"] == 36


def test_extraction_failures_are_reported_apart_from_validation():
    none = verify(PERSON, "I cannot produce that.")
    assert (none.reason, none.details["stage"]) == ("no_json", "extract")
    broken = verify(PERSON, "```json\n{\"name\": \"Ada\",\n```")
    assert (broken.reason, broken.details["stage"]) == ("unparseable", "extract")
    invalid = verify(PERSON, '{"name": "Ada"}')
    assert (invalid.reason, invalid.details["stage"]) == ("schema_invalid", "validate")
    assert invalid.extracted == {"name": "Ada"}
    assert not none.passed and none.score == 0.0


def test_error_paths():
    schema = {"type": "object", "properties": {"items": {"type": "array", "items": {
        "type": "object", "properties": {"qty": {"type": "integer", "minimum": 1}}}}}}
    verdict = verify(schema, '{"items": [{"qty": 2}, {"qty": 0}, {"qty": "x"}]}')
    assert [(e["path"], e["validator"]) for e in verdict.details["errors"]] == [
        ("$.items[1].qty", "minimum"), ("$.items[2].qty", "type")]


def test_error_list_is_capped():
    schema = {"type": "array", "items": {"type": "string"}}
    verdict = verify(schema, json.dumps(list(range(100))), max_errors=5)
    assert len(verdict.details["errors"]) == 5


# -- invalid schemas are task errors ------------------------------------------------------------
@pytest.mark.parametrize(
    "schema",
    [{"type": "no-such-type"}, {"properties": []}, {"required": "name"},
     {"$schema": "http://json-schema.org/draft-03/schema#"}, {"$schema": "https://x.test/s"},
     ["not", "a", "schema"], {"minimum": float("nan")}],
)
def test_invalid_schema_raises(schema):
    with pytest.raises(SchemaTaskError):
        verify(schema, "garbage that is not JSON")


# -- limits and hostile input -------------------------------------------------------------------
def test_fifty_megabytes_is_rejected_by_size():
    verdict = verify(PERSON, "{" + " " * 50_000_000 + "}")
    assert (verdict.reason, verdict.details["stage"]) == ("too_large", "extract")


def test_size_limit_is_configurable():
    assert verify(PERSON, GOOD, max_chars=10).reason == "too_large"
    assert verify(PERSON, GOOD, max_chars=len(GOOD)).passed


@pytest.mark.parametrize(
    "text",
    ["[" * 100_000 + "]" * 100_000, "[" * 100_000, '{"a":' * 100_000 + "1" + "}" * 100_000,
     "```json\n" + "[" * 100_000 + "\n```", "Here: " + "[" * 100_000 + " end",
     "Here: " + '{"a":' * 100_000],
)
def test_hundred_thousand_deep_input_is_rejected(text):
    verdict = verify(True, text, max_chars=2_000_000)
    assert (verdict.reason, verdict.details["stage"]) == ("too_deep", "extract")


def test_depth_limit_is_configurable_and_exact():
    ten = "[" * 10 + "]" * 10
    assert verify(True, ten, max_depth=10).passed
    assert verify(True, ten, max_depth=9).reason == "too_deep"


def test_brackets_inside_strings_do_not_count_as_depth():
    text = json.dumps({"a": "[" * 500 + "{" * 500})
    assert nesting_depth(text) == 1
    assert verify(True, text).passed


@pytest.mark.parametrize("text", ['{"a": 1, "a": 2}', '{"x": {"k": 1, "k": 1}}',
                                  'Here ```json\n{"a": 1, "b": 2, "a": 3}\n```'])
def test_duplicate_keys_are_reported(text):
    verdict = verify(True, text)
    assert verdict.reason == "duplicate_keys" and not verdict.passed
    assert verdict.details["duplicate_keys"] in (["a"], ["k"])


@pytest.mark.parametrize("text", ['{"v": NaN}', '{"v": Infinity}', "[-Infinity]", '{"v": 1e999}',
                                  'The value is {"v": -1e400}.'])
def test_non_finite_numbers_are_rejected(text):
    assert verify(True, text).reason == "non_finite_number"


def test_integer_too_long_to_convert_is_unparseable():
    assert verify(True, "[" + "9" * 10_000 + "]").reason == "unparseable"


def test_prose_full_of_openers_ends():
    text = "[1, " * 200_000  # every opener starts a value that never closes
    verdict = verify(True, "see " + text, max_chars=1_000_000, max_depth=1_000_000)
    assert verdict.details["stage"] == "extract"


def test_non_string_completion_is_a_type_error():
    with pytest.raises(TypeError):
        verify(True, b"{}")  # type: ignore[arg-type]


# -- caching ------------------------------------------------------------------------------------
def test_validators_are_cached_per_schema():
    schema = {"type": "object", "properties": {"z": {"type": "number"}}}
    first = compiled_validator(schema)
    assert compiled_validator(schema) is first
    assert compiled_validator(json.loads(json.dumps(schema))) is first
    assert compiled_validator({**schema, "required": ["z"]}) is not first


# -- reasoning blocks -------------------------------------------------------------------------
WRONG = '{"name": "Bob", "age": 7}'
EXPECT = {"name": "Ada", "age": 36}


@pytest.mark.parametrize("text", [
    # A draft in the reasoning, the answer after it (the draft was graded before: the fenced
    # one in place of the answer, the bare one as a competing value).
    f"<think>First try:\n```json\n{WRONG}\n```\nno, she is 36.</think>\n{GOOD}",
    f"<think>{WRONG}</think>{GOOD}",
    f"<think>{WRONG}</think>\n```json\n{GOOD}\n```",
    # Several blocks, JSON inside each and after the last.
    f"<think>{WRONG}</think>Let me check again.<think>```json\n{WRONG}\n```</think>{GOOD}",
    # The block opened by the chat template: only its closing tag is in the completion.
    f"Maybe {WRONG}?</think>\n{GOOD}",
    # Tags as models write them: other case, spaces, <thinking>.
    f"<THINK>{WRONG}</Think >{GOOD}",
    f"<thinking>\n{WRONG}\n</thinking>\n\nAnswer: {GOOD}",
    # The answer between two blocks, nothing after the last one.
    f"<think>{WRONG}</think>{GOOD}<think>done</think>",
])
def test_the_answer_after_the_reasoning_is_graded(text):
    verdict = verify(PERSON, text, expected=EXPECT)
    assert verdict.passed and verdict.extracted == EXPECT, verdict
    assert verdict.details["single"]


@pytest.mark.parametrize("text", [
    f"<think>{GOOD}</think>",  # the answer only in the reasoning
    f"<think>{GOOD}</think>\n\n",
    f"<think>so it is {GOOD}",  # unclosed: all of it is reasoning
    f"I think it is this.<think>{GOOD}",
    f"{GOOD}</think>",  # everything before a closing tag is reasoning
])
def test_json_only_inside_the_reasoning_is_no_answer(text):
    verdict = verify(PERSON, text, expected=EXPECT)
    assert not verdict.passed and verdict.reason == "no_json"
    assert verdict.details["after_reasoning"] is True


def test_a_value_before_an_unclosed_block_is_the_answer():
    verdict = verify(PERSON, f"{GOOD}\n<think>was that right? {WRONG}", expected=EXPECT)
    assert verdict.passed and verdict.details["single"]


def test_two_values_after_the_reasoning_still_compete():
    verdict = verify(PERSON, f"<think>hmm</think>{GOOD} or {WRONG}", expected=EXPECT)
    assert verdict.reason == "competing_values" and verdict.details["content"] == 0.0


def test_reasoning_tags_cost_linear_time():
    import time
    for text in ("<think>" * 100_000, "</think>" * 100_000, "< think" * 100_000):
        start = time.process_time()
        verdict = verify(PERSON, text, expected=EXPECT)
        assert not verdict.passed and time.process_time() - start < 2.0
