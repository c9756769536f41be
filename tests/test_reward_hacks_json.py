"""Reward hacks on grpo/JsonSchema-v0: completions that skip the task must earn no content.

Every hack is built from a real test task of the ``extract`` or ``bfcl`` pack and graded through
the env (``env.unwrapped.score``): ``{}``, the echoed schema or its ``properties``, JSON found
in the prompt (with extract's ``example=True`` also the other record it shows, copied verbatim),
several competing values, the answer under padded keys, in an array, as a string or with a key
given twice. Each must score ``content`` 0 and not pass. The legitimate forms of
the right answer (plain, fenced amid prose, pretty-printed, optional arguments left out) must
still score full marks.

Answers built from the schema alone (the env's ``shallow_completions`` and the variants in
``SCHEMA_ONLY_VARIANTS``: another enum value, the schema's title or the function's description
as every string, unicode placeholders, nulls for optional keys, the placeholders fenced, after
a think block or given twice, the right record drafted in the reasoning with placeholders after
it) pass no test task and earn at most a tenth of the maximum: validity and form pay only beside
content. Before that, each schema-valid one earned about 0.56 of the maximum, and the draft in
the reasoning passed every task.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import pytest

import envs  # noqa: F401 - registers the env ids
from envs.verify.json_baselines import build, with_policy
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


@pytest.mark.parametrize(("pack", "task_id"), HACK_TASKS)
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
    # No test task is one where `{}` is right (bfcl 1.1.0 left out the calls without arguments,
    # or with optional ones only: `{}` passed them); `{}` and the echoes earn nothing at all.
    env = _env(pack)
    for task_id in env.pack.ids("test"):
        task = env.pack.get(task_id)
        expected = expected_from_json(task["expected"])
        assert not all(_optional(v) for v in expected.values()), task_id
        for answer in ("{}", json.dumps(task["schema"]), json.dumps(task["schema"]["properties"])):
            reward, info = env.score(task, answer)
            assert reward == 0.0 and not info["passed"], (task_id, answer[:40])
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


# -- answers built from the schema alone ------------------------------------------------------
# Validity is no reward on its own: `valid` and `format` pay only beside content (more than
# half of it right), optional keys given their default earn nothing, and the tasks a schema-
# only answer passes left the packs. Before that, every schema-valid answer below earned 0.6
# of 1.1 for reading nothing (the placeholders, minimum numbers and first enum values,
# and the variants here that were not in it).
def _root_title(task: Task) -> str:
    title = task["schema"].get("title")
    return title if isinstance(title, str) else task.fields.get("function", "string")


def _second_enum(schema: Any) -> Any:
    """The schema with each enum's second value first: a policy need not take the first."""
    if isinstance(schema, dict):
        out = {k: _second_enum(v) for k, v in schema.items()}
        enum = out.get("enum")
        if isinstance(enum, list) and len(enum) > 1:
            out["enum"] = [enum[1], enum[0], *enum[2:]]
        return out
    if isinstance(schema, list):
        return [_second_enum(v) for v in schema]
    return schema


def _build(task: Task, **policy: Any) -> Any:
    return build(task["schema"], with_policy(**policy))


def _with_null_optionals(task: Task) -> str:
    value = _build(task)
    props = task["schema"].get("properties", {})
    return json.dumps({**dict.fromkeys(props), **value})


#: Schema-only answers beyond the env's own baselines (``shallow_completions``), each a way a
#: policy could fill the schema without reading the text.
SCHEMA_ONLY_VARIANTS: dict[str, Callable[[Task], str]] = {
    "second_enum_value": lambda t: json.dumps(build(_second_enum(t["schema"]), with_policy())),
    "title_as_every_string": lambda t: json.dumps(_build(
        t, all_keys=True, fit=False, string=lambda s, k: _root_title(t))),
    "function_description_as_every_string": lambda t: json.dumps(_build(
        t, fit=False, string=lambda s, k: t.fields.get("description") or t.fields.get(
            "noun", "x"))),
    "unicode_placeholders": lambda t: json.dumps(_build(
        t, all_keys=True, fit=False, string=lambda s, k: "\uff53\uff54\uff52"), ensure_ascii=False),
    "maximum_numbers_first_enum": lambda t: json.dumps(_build(t, number="max")),
    "required_placeholders_optional_null": _with_null_optionals,
    "placeholders_fenced_amid_prose": lambda t: (
        "Here is the JSON you asked for:\n```json\n" + json.dumps(_build(t), indent=2) +
        "\n```\nEvery field fits the schema."),
    "placeholders_after_reasoning": lambda t: (
        "<think>The schema needs these keys; fill each with a value of its type.</think>\n" +
        json.dumps(_build(t))),
    "gold_in_reasoning_placeholders_after": lambda t: None,  # filled in per task below
    "defaults_pretty": lambda t: json.dumps(_build(t, all_keys=True, defaults=True), indent=4),
    "enum_lists_and_descriptions": lambda t: json.dumps(_build(
        t, all_keys=True, array="enum", fit=False, string=lambda s, k: s.get("description", k))),
    "the_same_answer_twice": lambda t: json.dumps(_build(t)) + "\n" + json.dumps(_build(t)),
}


def _variant(env: Any, task: Task, name: str) -> str:
    if name == "gold_in_reasoning_placeholders_after":
        # The right record as a draft in the reasoning, a schema-only one as the answer: the
        # answer is what counts (the draft was graded before when fenced).
        return ("<think>\n```json\n" + env.gold_completion(task) + "\n```\n</think>\n" +
                json.dumps(_build(task)))
    return SCHEMA_ONLY_VARIANTS[name](task)


def _share(env: Any, reward: float) -> float:
    return reward / sum(env.reward_weights.values())


@pytest.mark.parametrize("pack", ["extract", "bfcl", "extract+example"])
def test_schema_only_answers_earn_a_sliver(pack: str) -> None:
    # Every test task, every baseline the env knows and every variant above: none passes,
    # validity and form pay nothing where at most half the content is right, and the mean
    # reward is at most a tenth of the maximum (today about 0.01-0.02).
    env = _example_env() if pack == "extract+example" else _env(pack)
    shares: list[float] = []
    best: list[float] = []  # each task's best schema-only answer
    for task_id in env.pack.ids("test"):
        task = env.pack.get(task_id)
        answers = dict(env.shallow_completions(task))
        answers.update({n: _variant(env, task, n) for n in SCHEMA_ONLY_VARIANTS})
        task_shares = []
        for name, completion in answers.items():
            reward, info = env.score(task, completion)
            assert not info["passed"], (task_id, name, completion[:80])
            rewards = info["rewards"]
            if rewards["content"] <= 0.5:
                assert rewards["valid"] == rewards["format"] == 0.0, (task_id, name, rewards)
            task_shares.append(_share(env, reward))
        shares += task_shares
        best.append(max(task_shares))
    assert sum(best) / len(best) <= 0.1, sum(best) / len(best)
    assert sum(shares) / len(shares) <= 0.05, sum(shares) / len(shares)


def test_the_baselines_are_schema_valid_where_a_policy_could_be() -> None:
    # The sweep is only as strong as its answers: the placeholders fit every extract schema
    # (formats, patterns, minLength), so the gate, not a malformed baseline, is what refuses
    # them; and most carry a lucky field somewhere, so content alone is not what keeps them low.
    env = _env("extract")
    valid = lucky = 0
    ids = env.pack.ids("test")
    for task_id in ids:
        task = env.pack.get(task_id)
        _, info = env.score(task, env.shallow_completions(task)["placeholders"])
        valid += info["verdict"].details["valid"]
        lucky += info["rewards"]["content"] > 0
    assert valid == len(ids)
    assert lucky >= len(ids) // 4
