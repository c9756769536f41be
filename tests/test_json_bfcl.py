"""The ``bfcl`` pack: BFCL v4 function-call arguments read from the installed bfcl-eval."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest

import envs  # noqa: F401 - registers the env ids
from envs.verify.json import verify
from envs.verify.json_content import ABSENT, AnyOf, expected_from_json
from tasks import Task, load_pack
from tasks.bfcl import CATEGORIES, SCHEMA_ONLY, accepted_example, expected_value, json_schema


@pytest.fixture(scope="module")
def pack():
    return load_pack("bfcl")


def test_pack_size_splits_and_manifest(pack):
    train, test = pack.size("train"), pack.size("test")
    # 1.1.0 left out the 69 tasks a schema-only answer passes (tasks.bfcl.SCHEMA_ONLY)
    assert train + test > 1650 and 0.15 < test / (train + test) < 0.25
    assert not set(pack.ids("train")) & set(pack.ids("test"))
    # BFCL repeats queries across categories: no test prompt may also be a train prompt
    train_prompts = {pack.prompt(t) for t in map(pack.get, pack.ids("train"))}
    assert not {pack.prompt(t) for t in map(pack.get, pack.ids("test"))} & train_prompts
    assert {r["category"] for r in pack.records("train")} == set(CATEGORIES)
    assert "Apache-2.0" in pack.manifest.license and pack.env == "grpo/JsonSchema-v0"


def test_a_known_task(pack):
    task = pack.get("bfcl/simple_python_0")
    assert "triangle" in task["query"] and task["function"] == "calculate_triangle_area"
    assert task["schema"]["properties"]["base"] == {"type": "integer",
                                                    "description": "The base of the triangle."}
    expected = expected_from_json(task["expected"])
    assert expected == {"base": 10, "height": 5, "unit": AnyOf("units", ABSENT)}
    prompt = pack.prompt(task)
    assert task["query"] in prompt and "calculate_triangle_area" in prompt
    assert json.dumps(task["schema"], indent=2) in prompt


@pytest.mark.parametrize(("answer", "passed", "content", "raw"), [
    ('{"base": 10, "height": 5}', True, 1.0, 1.0),
    ('{"base": 10, "height": 5, "unit": "units"}', True, 1.0, 1.0),
    ('{"base": 10, "height": 5, "unit": "cm"}', False, 2 / 3, 2 / 3),
    # The optional "unit" left out is neutral: it no longer pays 1/3 for swapped arguments.
    ('{"base": 5, "height": 10}', False, 0.0, 0.0),
    # "height" is required: an answer that fails the schema earns no content (it used to get
    # 2/3), though content_raw still shows what it matched.
    ('{"base": 10}', False, 0.0, 1 / 2),
    ("{}", False, 0.0, 0.0),
])
def test_any_of_the_acceptable_values(pack, answer, passed, content, raw):
    task = pack.get("bfcl/simple_python_0")
    verdict = verify(task["schema"], answer, expected=expected_from_json(task["expected"]))
    assert verdict.passed is passed
    assert verdict.details["content"] == pytest.approx(content)
    assert verdict.details["content_raw"] == pytest.approx(raw)


def test_undeclared_parameters_fail_the_schema(pack):
    task = pack.get("bfcl/simple_python_0")
    verdict = verify(task["schema"], '{"base": 10, "height": 5, "colour": "red"}')
    assert verdict.reason == "schema_invalid"


def test_every_ground_truth_passes_the_gate(pack):
    for split in ("train", "test"):
        for rec in pack.records(split):
            expected = expected_from_json(rec["expected"])
            answer = json.dumps(accepted_example(rec["expected"]))
            verdict = verify(rec["schema"], answer, expected=expected)
            assert verdict.passed, (rec["id"], verdict)


def test_schema_dialect_is_mapped():
    spec = {"type": "dict", "required": ["x"], "properties": {
        "x": {"type": "float"}, "pair": {"type": "tuple", "items": {"type": "any"}},
        "opts": {"type": "dict", "properties": {"deep": {"type": "boolean"}}},
        "flag": {"type": "boolean", "optional": True, "default": False}}}
    schema = json_schema(spec, top=True)
    assert schema["$schema"] == "http://json-schema.org/draft-07/schema#"
    assert schema["type"] == "object" and schema["additionalProperties"] is False
    props = schema["properties"]
    assert props["x"] == {"type": "number"}
    assert props["pair"] == {"type": "array", "items": {}}
    assert props["opts"] == {"type": "object", "properties": {"deep": {"type": "boolean"}}}
    assert props["flag"] == {"type": "boolean", "default": False}


def test_ground_truth_options_are_mapped():
    assert expected_from_json(expected_value([5])) == 5
    assert expected_from_json(expected_value(["NYC", "New York", ""])) == AnyOf("NYC", "New York", ABSENT)
    assert expected_from_json(expected_value([None, 3], optional=True)) == AnyOf(ABSENT, 3)
    assert expected_from_json(expected_value([[1, 2]])) == [1, 2]
    assert expected_from_json(expected_value([{"a": ["x", "y"], "b": [1]}])) == {"a": AnyOf("x", "y"), "b": 1}
    assert expected_from_json(expected_value([[{"k": ["v"]}]])) == [{"k": "v"}]


def test_env_over_bfcl():
    env = gym.make("grpo/JsonSchema-v0", pack="bfcl", split="test")
    prompt, info = env.reset(seed=2)
    task = env.unwrapped.pack.get(info["task_id"])
    assert info["schema"] == task["schema"] and task["function"] in prompt
    answer = json.dumps(accepted_example(task["expected"]))
    _, reward, _, _, info = env.step("```json\n" + answer + "\n```")
    assert info["rewards"] == {"valid": 1.0, "content": 1.0, "format": 1.0}
    assert reward == pytest.approx(1.1)


def test_tasks_a_schema_only_answer_passes_are_left_out(pack):
    # bfcl 1.1.0: every task the env's schema-only answers pass in full is in SCHEMA_ONLY (with
    # why) and out of both splits; none of the remaining tasks is passed by one of them.
    ids = set(pack.ids("train")) | set(pack.ids("test"))
    assert len(SCHEMA_ONLY) == 69 and all(reason for reason in SCHEMA_ONLY.values())
    assert not {f"bfcl/{i}" for i in SCHEMA_ONLY} & ids
    env = gym.make("grpo/JsonSchema-v0", pack="bfcl", split="test").unwrapped
    for split in ("train", "test"):
        assert env.trivially_passed([pack.get(t) for t in pack.ids(split)]) == {}, split
    assert pack.manifest.version == "1.1.0"


def test_trivially_passed_names_the_schema_only_answers(pack):
    # A call without arguments, and one whose answer is an enum's second value, as a third-party
    # pack could hold them: validate must refuse both, naming the answers that pass.
    env = gym.make("grpo/JsonSchema-v0", pack="bfcl", split="test").unwrapped
    none = Task("x/none", "test", {"schema": {"type": "object", "properties": {},
                                              "additionalProperties": False}, "expected": {}})
    enum = Task("x/enum", "test", {"schema": {"type": "object", "required": ["unit"],
                                              "properties": {"unit": {"enum": ["c", "f", "k"]}}},
                                   "expected": {"unit": "f"}})
    real = pack.get(pack.ids("test")[0])
    found = env.trivially_passed([none, enum, real])
    assert set(found) == {"x/none", "x/enum"}
    assert "empty_object" in found["x/none"] and "enum_value_1" in found["x/enum"]
