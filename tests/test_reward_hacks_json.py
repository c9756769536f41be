"""Reward hacks on grpo/JsonSchema-v0: completions that skip the task must earn no content.

Every hack is built from a real test task of the ``extract`` or ``bfcl`` pack and graded through
the env (``env.unwrapped.score``): ``{}``, the echoed schema or its ``properties``, JSON found
in the prompt (with extract's ``example=True`` also the other record it shows, copied verbatim),
several competing values, the answer under padded keys, in an array, as a string or with a key
given twice. Each must score ``content`` 0 and not pass. The legitimate forms of
the right answer (plain, fenced amid prose, pretty-printed, optional arguments left out) must
still score full marks.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import pytest

import envs  # noqa: F401 - registers the env ids
from envs.verify.json_content import ABSENT, AnyOf, expected_from_json
from envs.verify.json_extract import DECODER
from tasks import Task

ENV_ID = "grpo/JsonSchema-v0"
EXTRACT_TASKS = ["extract/test-L1-people-0", "extract/test-L1-events-5",
                 "extract/test-L2-orders-15", "extract/test-L2-addresses-0",
                 "extract/test-L3-products-10", "extract/test-L4-people-15",
                 "extract/test-L4-products-0"]
BFCL_TASKS = [
    "bfcl/simple_python_8",  # an optional argument
    "bfcl/simple_python_53",  # two optional arguments
    "bfcl/simple_python_41",  # floats
    "bfcl/simple_python_96",  # an array of objects
    "bfcl/simple_python_122",  # the query holds a JSON matrix
    "bfcl/simple_python_144",  # an array and an optional boolean
    "bfcl/live_simple_110-67-0",  # nothing required, so `{}` fits the schema
    "bfcl/live_multiple_229-103-0",  # an argument that must be left out
    "bfcl/live_multiple_347-133-11",  # nothing required, two optional arguments
]
HACK_TASKS = [("extract", t) for t in EXTRACT_TASKS] + [("bfcl", t) for t in BFCL_TASKS]
# Where `{}` is the right answer: a function without parameters, one with only optional ones.
EMPTY_IS_RIGHT = ["bfcl/live_multiple_204-90-6", "bfcl/live_multiple_989-220-0"]

_ENVS: dict[str, Any] = {}


def _env(pack: str) -> Any:
    if pack not in _ENVS:
        _ENVS[pack] = gym.make(ENV_ID, pack=pack, split="test").unwrapped
    return _ENVS[pack]


def _example_env() -> Any:
    if "extract+example" not in _ENVS:
        _ENVS["extract+example"] = gym.make(ENV_ID, pack="extract", split="test",
                                            example=True).unwrapped
    return _ENVS["extract+example"]


def _optional(expected: Any) -> bool:
    return expected is ABSENT or (isinstance(expected, AnyOf) and ABSENT in expected)


def _other(value: Any) -> Any:
    """A different value of the same JSON type: a plausible wrong answer."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        return value + 1
    if isinstance(value, str):
        return value + " (or not)"
    if isinstance(value, list):
        return [_other(value[0]), *value[1:]] if value else ["other"]
    if isinstance(value, dict):
        if not value:
            return {"other": 1}
        key = next(iter(value))
        return {**value, key: _other(value[key])}
    return "other"


def _json_in(text: str) -> list[Any]:
    """Every top-level JSON object or array in ``text``, left to right."""
    found, pos = [], 0
    for match in re.finditer(r"[\[{]", text):
        if match.start() < pos:
            continue
        try:
            value, pos = DECODER.raw_decode(text, match.start())
        except ValueError:
            continue
        found.append(value)
    return found


def _fenced(value: Any) -> str:
    return "```json\n" + json.dumps(value) + "\n```"


def _duplicate_key(gold: dict[str, Any]) -> str:
    """The answer with its first key given twice, the wrong value first."""
    key = next(iter(gold))
    return "{" + json.dumps(key) + ": " + json.dumps(_other(gold[key])) + ", " + json.dumps(gold)[1:]


HACKS: dict[str, Callable[[Task, Any], str]] = {
    "empty": lambda task, gold: "{}",
    "empty_fenced": lambda task, gold: "Here are the arguments:\n```json\n{}\n```",
    "schema": lambda task, gold: json.dumps(task["schema"]),
    "schema_as_in_prompt": lambda task, gold: task["schema_text"],
    "schema_fenced": lambda task, gold: "Here:\n" + _fenced(task["schema"]),
    "properties": lambda task, gold: json.dumps(task["schema"]["properties"]),
    "properties_pretty": lambda task, gold: json.dumps(task["schema"]["properties"], indent=2),
    "answer_then_wrong": lambda task, gold: json.dumps(gold) + "\n" + json.dumps(_other(gold)),
    "wrong_or_answer": lambda task, gold: json.dumps(_other(gold)) + " or " + json.dumps(gold),
    "two_fences": lambda task, gold: _fenced(_other(gold)) + "\nor\n" + _fenced(gold),
    "schema_then_answer": lambda task, gold: json.dumps(task["schema"]) + " " + json.dumps(gold),
    "duplicate_key": lambda task, gold: _duplicate_key(gold),
    "padded_keys": lambda task, gold: json.dumps({f" {k} ": v for k, v in gold.items()}),
    "array_wrapped": lambda task, gold: json.dumps([gold]),
    "array_of_candidates": lambda task, gold: json.dumps([gold, _other(gold)]),
    "under_a_key": lambda task, gold: json.dumps({"arguments": gold}),
    "as_a_string": lambda task, gold: json.dumps(json.dumps(gold)),
    "null": lambda task, gold: "null",
    "empty_array": lambda task, gold: "[]",
    "true": lambda task, gold: "true",
}


@pytest.mark.parametrize("hack", sorted(HACKS))
@pytest.mark.parametrize(("pack", "task_id"), HACK_TASKS)
def test_hack_earns_no_content(pack: str, task_id: str, hack: str) -> None:
    env = _env(pack)
    task = env.pack.get(task_id)
    gold = json.loads(env.gold_completion(task))
    _, info = env.score(task, HACKS[hack](task, gold))
    assert info["rewards"]["content"] == 0.0, (hack, info["reason"], info["rewards"])
    assert not info["passed"], (hack, info["reason"])


@pytest.mark.parametrize(("pack", "task_id"), HACK_TASKS)
def test_echoes_are_named(pack: str, task_id: str) -> None:
    env = _env(pack)
    task = env.pack.get(task_id)
    for echo in (task["schema"], task["schema"]["properties"]):
        _, info = env.score(task, json.dumps(echo, indent=2))
        assert info["reason"] == "echoed_schema" and info["rewards"]["valid"] == 0.0


@pytest.mark.parametrize("pack", ["extract", "bfcl", "extract+example"])
def test_json_in_the_prompt_earns_no_content(pack: str) -> None:
    # The schema is the JSON every prompt holds; a few bfcl queries quote a value (a matrix)
    # that is an argument, not the arguments; with extract's example option the prompt also
    # shows another record, which shares no value with the task's.
    env = _example_env() if pack == "extract+example" else _env(pack)
    echoes = 0
    for task_id in env.pack.ids("test"):
        task = env.pack.get(task_id)
        values = _json_in(env.prompt(task))
        assert task["schema"] in values, task_id
        for value in values:
            _, info = env.score(task, json.dumps(value))
            assert info["rewards"]["content"] == 0.0 and not info["passed"], (task_id, value)
            echoes += 1
    assert echoes >= env.pack.size("test")


def _legit_forms(task: Task, gold: Any, expected: Any) -> dict[str, str]:
    required = set(task["schema"].get("required", []))
    # Optional arguments left out (those the schema requires stay: the schema decides).
    minimal = {k: v for k, v in gold.items() if k in required or not _optional(expected[k])}
    return {
        "gold": json.dumps(gold),
        "fenced_amid_prose": "Sure, these fit the schema:\n```json\n" + json.dumps(gold) +
                             "\n```\nLet me know if anything is missing.",
        "pretty": json.dumps(gold, indent=2, ensure_ascii=False),
        "in_prose": "The answer is " + json.dumps(gold) + ".",
        "keys_reversed": json.dumps(dict(reversed(list(gold.items())))),
        "optional_left_out": json.dumps(minimal),
    }


@pytest.mark.parametrize(("pack", "task_id"),
                         HACK_TASKS + [("bfcl", t) for t in EMPTY_IS_RIGHT])
def test_legitimate_forms_score_full_marks(pack: str, task_id: str) -> None:
    env = _env(pack)
    task = env.pack.get(task_id)
    gold = json.loads(env.gold_completion(task))
    expected = expected_from_json(task["expected"])
    for form, completion in _legit_forms(task, gold, expected).items():
        _, info = env.score(task, completion)
        assert info["rewards"] == {"valid": 1.0, "content": 1.0, "format": 1.0}, (form, info)
        assert info["passed"] and info["reason"] == "equal", form


def test_optional_arguments_are_left_out_somewhere() -> None:
    # The "optional_left_out" form above must really drop arguments on some bfcl tasks.
    env = _env("bfcl")
    dropped = 0
    for task_id in BFCL_TASKS:
        task = env.pack.get(task_id)
        gold = json.loads(env.gold_completion(task))
        minimal = json.loads(_legit_forms(task, gold, expected_from_json(task["expected"]))[
            "optional_left_out"])
        dropped += len(gold) - len(minimal)
    assert dropped >= 5


@pytest.mark.parametrize("pack", ["extract", "bfcl"])
def test_empty_and_echoes_across_the_test_split(pack: str) -> None:
    # `{}` passes exactly where every expected argument may be left out (then it is the right
    # answer); elsewhere it and the echoes earn no content, whatever they happen to match.
    env = _env(pack)
    for task_id in env.pack.ids("test"):
        task = env.pack.get(task_id)
        expected = expected_from_json(task["expected"])
        empty_is_right = all(_optional(v) for v in expected.values())
        _, info = env.score(task, "{}")
        assert info["passed"] is empty_is_right, task_id
        assert info["rewards"]["content"] == float(empty_is_right), task_id
        for echo in (task["schema"], task["schema"]["properties"]):
            _, info = env.score(task, json.dumps(echo))
            assert info["rewards"]["content"] == float(echo == {} and empty_is_right), task_id
        _, info = env.score(task, env.gold_completion(task))
        assert info["passed"] and info["rewards"]["content"] == 1.0, task_id


EXAMPLE_LINE = re.compile(r"^For example, another \w+ as JSON: (.+)$", re.M)


def test_copying_the_shown_example_earns_no_content() -> None:
    # The example option shows an instance of the schema in the prompt; a policy that copies it
    # verbatim must not pass or earn content on any level-1 task, while the gold still passes.
    env = gym.make(ENV_ID, pack="extract", level=1, split="test", example=True).unwrapped
    ids = env.pack.ids("test")
    assert len(ids) == 5 * 20
    for task_id in ids:
        task = env.pack.get(task_id)
        (shown,) = EXAMPLE_LINE.findall(env.prompt(task))
        _, info = env.score(task, shown)
        assert not info["passed"] and info["rewards"]["content"] == 0.0, (task_id, info)
        assert info["reason"] == "content_mismatch", task_id  # a valid record, the wrong one
        _, info = env.score(task, "```json\n" + shown + "\n```")
        assert not info["passed"] and info["rewards"]["content"] == 0.0, task_id
        _, info = env.score(task, env.gold_completion(task))
        assert info["passed"] and info["rewards"]["content"] == 1.0, task_id
