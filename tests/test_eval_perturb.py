"""Perturbed prompts are rebuilt from the task fields and the pack's template (pure, no model);
each env owns its kinds of perturbation and its format-independent check components."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest

import envs  # noqa: F401  (registers the grpo/* envs)
from envs.base import TaskEnv
from envs.perturb import GENERIC, number_words, spell_small_numbers, task_body, template_parts


@pytest.fixture(scope="module")
def arith():
    return gym.make("grpo/MathExact-v0", pack="arith", level=1).unwrapped


def by_name(env) -> dict:
    return {p.name: p for p in env.perturbation_kinds}


def test_envs_own_their_checks_and_perturbations(arith):
    assert arith.check_components == ("correct",)
    code = gym.make("grpo/CodeTests-v0").unwrapped
    json_env = gym.make("grpo/JsonSchema-v0").unwrapped
    assert code.check_components == ("tests",) and json_env.check_components[0] == "content"
    task = arith.pack.task_at("test", 0)
    assert set(arith.perturbations(task)) == {"paraphrase", "final_answer_line", "no_instruction",
                                              "irrelevant_context", "numbers_in_words"}
    assert arith.perturbations(task.id) == arith.perturbations(task)


def test_a_new_env_gets_generic_perturbations_and_checks():
    class Plain(TaskEnv):
        default_pack = "gsm8k"
        default_weights = {"right": 1.0, "style": 0.5, "format": 0.1}

    env = Plain()
    assert Plain.check_components == ("right", "style")  # every component but format
    assert env.perturbation_kinds == GENERIC
    task = env.pack.task_at("test", 0)
    prompts = env.perturbations(task)
    assert set(prompts) == {"paraphrase", "no_instruction", "irrelevant_context"}
    assert prompts["no_instruction"] == task["question"]
    assert prompts["paraphrase"].startswith(task["question"])
    assert "Please follow this instruction: solve the problem step by step" in prompts["paraphrase"]


def test_template_paragraphs_split_task_from_instruction(arith):
    parts = template_parts(arith.pack.manifest.prompt_template)
    assert parts == [("{question}", True),
                     ("Give the final answer as a number in \\boxed{{}}, for example: The answer is "
                      "\\boxed{{42}}.", False)]
    task = arith.pack.task_at("test", 0)
    assert task_body(arith.pack, task) == task["question"]


def test_math_perturbations(arith):
    task = arith.pack.task_at("test", 0)
    question, original = task["question"], arith.prompt(task)
    prompts = {name: p(arith.pack, task) for name, p in by_name(arith).items()}
    assert all(question in prompts[n] for n in ("paraphrase", "final_answer_line",
                                                 "no_instruction", "irrelevant_context"))
    assert all(prompt != original for prompt in prompts.values())
    assert "\\boxed" in prompts["paraphrase"]
    assert "Final answer:" in prompts["final_answer_line"]
    assert "boxed" not in prompts["final_answer_line"]
    assert prompts["no_instruction"] == question
    assert prompts["irrelevant_context"].endswith(original)
    assert len(prompts["irrelevant_context"]) > len(original) + 20
    words = prompts["numbers_in_words"]
    assert not any(ch.isdigit() for ch in words.split("\n")[0]), words
    assert words.endswith("Give the final answer as a number in \\boxed{}, for example: The "
                          "answer is \\boxed{42}.")
    # Deterministic: the same task always gets the same prompt.
    assert {n: p(arith.pack, task) for n, p in by_name(arith).items()} == prompts


def test_numbers_in_words():
    assert [number_words(n) for n in (0, 7, 13, 20, 42, 99)] == [
        "zero", "seven", "thirteen", "twenty", "forty-two", "ninety-nine"]
    assert spell_small_numbers("What is 3 + 5?") == "What is three + five?"
    text = "She paid $12 for 3 pens at 4:30, 2.5 kg, 1,200 beads, 150 cards, 25% off, 2nd try."
    assert spell_small_numbers(text) == (
        "She paid $12 for three pens at 4:30, 2.5 kg, 1,200 beads, 150 cards, 25% off, 2nd try.")


def test_gsm8k_keeps_the_question_and_changes_the_instruction():
    env = gym.make("grpo/MathExact-v0", pack="gsm8k").unwrapped
    task = env.pack.task_at("test", 0)
    prompt = by_name(env)["no_instruction"](env.pack, task)
    assert prompt == task["question"]
    assert "boxed" not in by_name(env)["final_answer_line"](env.pack, task)


def test_code_perturbations_keep_the_function_and_drop_the_fence_request():
    env = gym.make("grpo/CodeTests-v0", pack="humaneval").unwrapped
    task = env.pack.task_at("test", 0)
    prompts = env.perturbations(task)
    assert set(prompts) == {"paraphrase", "no_fences", "irrelevant_context"}
    for prompt in prompts.values():
        assert task["prompt"] in prompt
    assert "without Markdown code fences" in prompts["no_fences"]
    assert "```" not in prompts["no_fences"] and "```python" in prompts["paraphrase"]
    assert "Reply with the complete function" not in prompts["no_fences"]


def test_json_perturbations_show_the_schema_compactly():
    env = gym.make("grpo/JsonSchema-v0").unwrapped
    task = env.pack.task_at("test", 0)
    prompts = env.perturbations(task)
    compact = json.dumps(task["schema"], separators=(",", ":"), ensure_ascii=False)
    assert compact in prompts["compact_schema"]
    assert task["schema_text"] not in prompts["compact_schema"]
    assert task["text"] in prompts["compact_schema"]
    assert prompts["paraphrase"].endswith("Answer with one JSON object and nothing else.")
