"""grpo/JsonSchema-v0 and its procedural ``extract`` pack."""

from __future__ import annotations

import hashlib
import json
import re

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import envs
from envs.domains.json_schema import JsonSchemaEnv
from envs.verify.json import verify
from tasks import PackError, load_pack
from tasks.extract import LEVELS, TEST_SIZE, ExtractGenerator
from tasks.extract.families import FAMILIES

ENV_ID = "grpo/JsonSchema-v0"


def _leaves(value):
    if isinstance(value, dict):
        for v in value.values():
            yield from _leaves(v)
    elif isinstance(value, list):
        for v in value:
            yield from _leaves(v)
    else:
        yield value


# -- the env ------------------------------------------------------------------------------------
def test_registered():
    env = gym.make(ENV_ID)
    assert isinstance(env.unwrapped, JsonSchemaEnv)
    assert env.unwrapped.pack.name == "extract"
    assert envs.env_sources()[ENV_ID] == "built-in"


def test_reset_puts_schema_in_info_and_prompt():
    env = gym.make(ENV_ID)
    prompt, info = env.reset(seed=5)
    task = env.unwrapped.pack.get(info["task_id"])
    assert info["schema"] == task["schema"]
    assert {"task_id", "pack", "pack_version", "split"} <= set(info)
    assert json.dumps(task["schema"], indent=2) in prompt
    assert task["text"] in prompt


def test_step_rewards_for_a_correct_answer():
    env = gym.make(ENV_ID, level=3)
    _, info = env.reset(seed=1)
    expected = env.unwrapped.pack.get(info["task_id"])["expected"]
    _, reward, terminated, truncated, info = env.step(json.dumps(expected))
    assert info["rewards"] == {"valid": 1.0, "content": 1.0, "format": 1.0}
    assert reward == pytest.approx(1.1) and terminated and not truncated
    assert info["passed"] and info["reason"] == "equal" and info["extracted"] == expected


def test_step_rewards_for_wrong_invalid_and_missing_answers():
    env = JsonSchemaEnv(level=1, family="people")
    task = env.pack.task_at("train", 0)
    good = dict(task["expected"])
    wrong = {**good, "name": "Someone Else"}
    reward, info = env.score(task, "Here you go: " + json.dumps(wrong))
    assert info["rewards"]["valid"] == 1.0
    assert info["rewards"]["content"] == pytest.approx(2 / 3)
    assert reward == pytest.approx(0.5 + 0.5 * 2 / 3 + 0.1)
    reward, info = env.score(task, json.dumps({**good, "nickname": "x"}))
    assert info["rewards"]["valid"] == 0.0 and info["reason"] == "schema_invalid"
    assert info["verdict"].details["errors"][0]["validator"] == "additionalProperties"
    reward, info = env.score(task, "no idea")
    assert info["rewards"] == {"valid": 0.0, "content": 0.0, "format": 0.0} and reward == 0.0
    # One field right of three: a valid record, but validity and form pay only beside content
    # (more than half of it right), so this earns its content alone.
    one = {**wrong, "age": good["age"] % 80 + 19}
    reward, info = env.score(task, json.dumps(one))
    assert info["verdict"].details["valid"] and info["rewards"]["content"] == pytest.approx(1 / 3)
    assert info["rewards"]["valid"] == info["rewards"]["format"] == 0.0
    assert reward == pytest.approx(0.5 / 3)
    # Hedging between two values used to keep the content of the first; now it earns none.
    reward, info = env.score(task, json.dumps(good) + " or maybe " + json.dumps(wrong))
    assert info["rewards"] == {"valid": 0.0, "content": 0.0, "format": 0.0}
    assert info["reason"] == "competing_values" and not info["passed"]


def test_reward_weights_can_be_overridden():
    env = JsonSchemaEnv(level=1, family="people",
                        reward_weights={"format": 0.0, "valid": 1.0, "content": 0.0})
    task = env.pack.task_at("train", 3)
    reward, _ = env.score(task, json.dumps({**task["expected"], "age": 99}))
    assert reward == 1.0


def test_check_env():
    check_env(gym.make(ENV_ID).unwrapped)
    check_env(gym.make(ENV_ID, split="test", level=4).unwrapped)


def test_sync_vector_env():
    venv = gym.vector.SyncVectorEnv([lambda: gym.make(ENV_ID, level=1) for _ in range(3)])
    prompts, infos = venv.reset(seed=0)
    assert len(prompts) == 3 and all("JSON Schema" in p for p in prompts)
    tasks = [venv.envs[i].unwrapped.pack.get(infos["task_id"][i]) for i in range(3)]
    actions = (json.dumps(tasks[0]["expected"]), "{}", "nothing")
    _, rewards, terminated, _, infos = venv.step(actions)
    assert rewards.tolist() == pytest.approx([1.1, 0.0, 0.0])  # `{}`: no content, no form
    assert terminated.all()
    assert infos["rewards"]["valid"].tolist() == [1.0, 0.0, 0.0]
    venv.close()


# -- the extract pack ---------------------------------------------------------------------------
def test_deterministic_from_seed():
    a, b = gym.make(ENV_ID), gym.make(ENV_ID)
    assert a.reset(seed=42) == b.reset(seed=42)
    assert ExtractGenerator().record("train", 17) == ExtractGenerator().record("train", 17)


def test_test_split_is_fixed_and_held_out():
    pack = load_pack("extract")
    assert pack.size("test") == len(LEVELS) * len(FAMILIES) * TEST_SIZE
    assert pack.size("train") is None
    test_texts = {r["text"] for r in pack.records("test")}
    train_texts = {pack.task_at("train", i)["text"] for i in range(400)}
    assert len(test_texts) == pack.size("test")
    assert not test_texts & train_texts


def test_gold_answers_pass_the_gate():
    pack = load_pack("extract")
    for task in [*pack.records("test"), *(pack.task_at("train", i).fields for i in range(60))]:
        verdict = verify(task["schema"], json.dumps(task["expected"]), expected=task["expected"])
        assert verdict.passed, (task["id"], verdict)


def test_levels_add_features():
    gen = ExtractGenerator(family="orders")
    by_level = {lv: gen.record("train", lv - 1) for lv in LEVELS}
    assert [r["level"] for r in by_level.values()] == list(LEVELS)
    props = {lv: r["schema"]["properties"] for lv, r in by_level.items()}
    assert all(s.get("type") in ("string", "integer") for s in props[1].values())
    assert "enum" in props[2]["status"] and props[2]["placed_at"]["format"] == "date-time"
    assert props[3]["shipping_address"]["type"] == "object"
    assert props[3]["tags"]["uniqueItems"] is True
    assert props[4]["items"]["items"]["type"] == "object"
    assert "T" not in by_level[4]["text"].split("placed on ")[1][:20]  # spoken date at level 4


def test_prose_states_every_value_below_level_four():
    gen = ExtractGenerator()
    for i in range(0, 300, 7):
        rec = gen.record("train", i)
        if rec["level"] == 4:
            continue
        for leaf in _leaves(rec["expected"]):
            if isinstance(leaf, bool):
                continue
            shown = f"{leaf:.2f}" if isinstance(leaf, float) and "." in rec["text"] else str(leaf)
            assert shown in rec["text"] or str(leaf) in rec["text"], (rec["id"], leaf)


def test_every_draft_is_used():
    drafts = {ExtractGenerator(level=1, family=f).record("train", 0)["schema"]["$schema"]
              for f in FAMILIES}
    assert len(drafts) == 5


def test_ids_round_trip_and_options():
    pack = load_pack("extract", level=2, family="events")
    task = pack.task_at("train", 9)
    assert task.id == "extract/L2-9" and task["family"] == "events"
    assert pack.get(task.id) == task
    test_task = pack.task_at("test", 3)
    assert pack.get(test_task.id) == test_task
    with pytest.raises(PackError):
        pack.get("extract/L3-9")
    with pytest.raises(PackError):
        load_pack("extract", level=9)
    with pytest.raises(PackError):
        load_pack("extract", family="pets")


# -- the example option -------------------------------------------------------------------------
EVENT_PROMPT = """Read the text below and return the event it describes as JSON that conforms to \
this JSON Schema:

{
  "$schema": "https://json-schema.org/draft/2019-09/schema",
  "title": "Event",
  "type": "object",
  "properties": {
    "title": {
      "type": "string",
      "minLength": 1
    },
    "venue": {
      "type": "string",
      "minLength": 1
    },
    "capacity": {
      "type": "integer",
      "minimum": 0
    }
  },
  "required": [
    "title",
    "venue",
    "capacity"
  ],
  "additionalProperties": false
}

Text: Up to 1450 guests can attend Climate 2025 at Hilltop Park.

Include only fields the text gives. Reply with the JSON only."""
# sha256 prefixes of prompts recorded before the example option existed: without it they must
# stay byte for byte what they were, in whatever pack option combination.
PROMPT_DIGESTS = {
    (): {"test-L1-people-0": "9769177798844b37", "test-L2-orders-15": "af8854ee08cd87f7",
         "test-L3-products-10": "1beb0e1f3e3c8986", "test-L4-addresses-7": "b66fd87eb97544ad",
         "L3-13": "85d414368fdbb5c7", "L4-17": "286005c086b1af4f"},
    (("level", 1),): {"L1-5": "a786dcc9a9a5501a"},
}
EXAMPLE_LINE = re.compile(r"^For example, another (\w+) as JSON: (.+)$", re.M)


def test_prompts_without_the_example_are_unchanged():
    env = gym.make(ENV_ID, split="test").unwrapped
    assert env.prompt(env.pack.get("extract/test-L1-events-5")) == EVENT_PROMPT
    for options, digests in PROMPT_DIGESTS.items():
        for explicit in ({}, {"example": False}):
            pack = load_pack("extract", **dict(options), **explicit)
            for native, digest in digests.items():
                prompt = pack.prompt(pack.get(f"extract/{native}"))
                assert hashlib.sha256(prompt.encode()).hexdigest()[:16] == digest, native
                assert "For example" not in prompt


def test_example_keeps_the_tasks_and_shows_another_record():
    off, on = load_pack("extract"), load_pack("extract", example=True)
    assert on.ids("test") == off.ids("test")
    assert on.pack_version != off.pack_version
    assert on.pack_version.startswith("1.1.0+") and off.pack_version.startswith("1.1.0+")
    train = [(off.task_at("train", i), on.task_at("train", i)) for i in range(0, 200, 3)]
    tests = [(off.task_at("test", i), on.task_at("test", i)) for i in range(off.size("test"))]
    for plain, shown in train + tests:
        assert (plain.id, plain["expected"], plain["text"]) == \
            (shown.id, shown["expected"], shown["text"])
        prompt = on.prompt(shown)
        (noun, line), = EXAMPLE_LINE.findall(prompt)
        assert noun == shown["noun"]
        assert prompt.replace(f"\n\nFor example, another {noun} as JSON: {line}", "") == \
            off.prompt(plain)
        example = json.loads(line)
        assert line == json.dumps(example)  # compact: one line, as json.dumps writes it
        # An instance of the task's schema, and not its record: each field the record has
        # differs, and no scalar matches where the record has it, so the content score is 0.
        assert verify(shown["schema"], line).passed, shown.id
        for key, value in shown["expected"].items():
            assert example.get(key) != value, (shown.id, key)
        verdict = verify(shown["schema"], line, expected=shown["expected"])
        assert not verdict.passed and verdict.details["content"] == 0.0, shown.id


def test_example_is_seeded():
    a = load_pack("extract", level=1, example=True)
    b = load_pack("extract", level=1, example=True)
    assert [a.task_at("train", i)["example"] for i in range(20)] == \
        [b.task_at("train", i)["example"] for i in range(20)]
    assert len({a.task_at("test", i)["example"] for i in range(a.size("test"))}) == a.size("test")


def test_example_option_takes_only_a_bool():
    for bad in ("true", 1, None):
        with pytest.raises(PackError, match="example must be true or false"):
            load_pack("extract", example=bad)
    # gym.make passes pack options through, as the CPU recipe does.
    env = gym.make(ENV_ID, pack="extract", level=1, example=True).unwrapped
    assert "For example, another" in env.prompt(env.pack.task_at("test", 0))


def test_a_draft_in_the_reasoning_is_not_a_final_answer():
    # With the Python tool, JSON drafted inside <think> must not end the turn before its call
    # (it did: any JSON before the call was taken as the final answer), and the answer after
    # the reasoning is what is graded.
    env = gym.make(ENV_ID, python_tool=True).unwrapped
    call = "```python\nprint(2 + 2)\n```"
    draft = '<think>Maybe {"name": "Ada"}; let me check.</think>\n'
    assert env.tool_call_end(draft + call) == len(draft + call)
    assert env.tool_call_end('<think>hm</think>{"name": "Ada"}\n' + call) is None
    plain = JsonSchemaEnv(level=1, family="people")
    task = plain.pack.task_at("train", 0)
    gold = json.dumps(task["expected"])
    wrong = json.dumps({**task["expected"], "name": "Someone Else"})
    _, info = plain.score(task, f"<think>```json\n{wrong}\n```</think>\n{gold}")
    assert info["passed"] and info["rewards"] == {"valid": 1.0, "content": 1.0, "format": 1.0}
    _, info = plain.score(task, f"<think>{gold}</think>")
    assert not info["passed"] and info["reason"] == "no_json"


def test_validate_refuses_tasks_the_schema_alone_solves(tmp_path):
    # A third-party pack: one task needs the text, one is an enum's second value (a guess among
    # the schema's values passes it), one has no expected value (validity would be its whole
    # reward). validate refuses the last two, naming the schema-only answers that pass.
    from envs.tools.validate import validate_folder
    schema = {"type": "object", "properties": {"n": {"type": "integer"},
                                               "unit": {"enum": ["c", "f"]}},
              "required": ["n", "unit"], "additionalProperties": False}
    rows = [{"id": "ok", "what": "a", "schema": schema, "expected": {"n": 7, "unit": "f"}},
            {"id": "enum", "what": "b", "schema": schema, "expected": {"n": 0, "unit": "f"}},
            {"id": "nogold", "what": "c", "schema": schema}]
    (tmp_path / "pack.toml").write_text(
        'name = "json-tiny"\nversion = "1.0.0"\ndescription = "d"\nlicense = "MIT"\n'
        'source = "hand-written"\nenv = "grpo/JsonSchema-v0"\n'
        'prompt_template = "Return {what} as JSON."\n[splits]\ntrain = "train.jsonl"\n')
    (tmp_path / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    report = validate_folder(tmp_path)
    errors = [str(e) for e in report.errors]
    assert not report.ok and len(errors) == 2, errors
    assert errors[0].startswith(f"{tmp_path / 'train.jsonl'}:2: ") and "enum_value_1" in errors[0]
    assert errors[1].startswith(f"{tmp_path / 'train.jsonl'}:3: ") and "placeholders" in errors[1]
