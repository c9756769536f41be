"""Flagging heuristics on hand-written completions (no model): the generic ones, each env's
``flag`` hook, and the learner's selection of flagged high-reward samples."""

from __future__ import annotations

import gymnasium as gym
import pytest

import envs  # noqa: F401  (registers the grpo/* envs)
from envs.domains.code_flags import prints_or_touches_harness as program_flags
from envs.flags import answer_candidates, many_candidates, no_reasoning, repetitive, too_long
from envs.verify.code import extract_program
from learner.evaluation.flags import flag_samples

REASONED = ("Tom has 3 apples and buys 4 more, so he has 3 + 4 = 7 apples. "
            "He gives 2 away, leaving 7 - 2 = 5. The answer is \\boxed{5}.")


def reasons(flags) -> set[str]:
    return {f.reason for f in flags}


def test_bare_answers_are_flagged_as_having_no_reasoning():
    assert no_reasoning("\\boxed{5}")
    assert no_reasoning("The answer is 5.")
    assert no_reasoning("Final answer: 42")
    assert no_reasoning(REASONED) is None


def test_several_stated_answers_are_flagged():
    assert answer_candidates(REASONED) == {"5"}
    assert many_candidates(REASONED) is None
    assert many_candidates("The answer is 5. Hmm, or maybe \\boxed{6}.")
    assert many_candidates("\\boxed{4} \\boxed{5} \\boxed{6}")
    spread = many_candidates("It could be \\boxed{5 \\text{ or } 6 \\text{ or } 7}")
    assert spread and "3 different" in spread.detail
    # The same answer said twice, with formatting differences, is one candidate.
    assert many_candidates("So the answer is 1,200. \\boxed{1200}") is None
    assert answer_candidates("\\boxed{\\frac{1}{2}}") == {"\\frac{1}{2}"}


def test_long_and_repetitive_text():
    assert too_long("short", truncated=True)
    assert too_long("x" * 2000, typical_chars=300)
    assert too_long("x" * 500, typical_chars=300) is None
    assert too_long("x" * 100, typical_chars=10) is None  # below the absolute floor
    assert repetitive("Let me check again. " * 30)
    assert repetitive("Step: add the numbers now\n" * 3 + "done")
    assert repetitive(REASONED) is None
    prose = " ".join(f"word{i}" for i in range(200))
    assert repetitive(prose) is None


def prints_or_touches_harness(completion: str):
    return program_flags(extract_program(completion)[0])


@pytest.fixture(scope="module")
def math_env():
    # Level 3 (``82 - 47 + 15``): two steps, so a bare answer is worth a read.
    return gym.make("grpo/MathExact-v0", pack="arith", level=3).unwrapped


def test_math_flags_know_a_one_step_task_needs_no_working(math_env):
    one_step = gym.make("grpo/MathExact-v0", pack="arith", level=1).unwrapped
    task = one_step.pack.task_at("test", 5)  # What is 4 + 4?
    assert one_step.working_steps(task) == 1
    for right in ("\\boxed{8}", "4 + 4 = \\boxed{8}", "The answer is 8."):
        assert one_step.flag(task, right) == [], right
    # The other flags still apply to a one-step task.
    assert reasons(one_step.flag(task, "\\boxed{8} or \\boxed{9}")) == {"many_candidates"}
    # Cut at the token budget: "long" when the cut may have taken the answer, not when it only
    # took what followed a closed final box (an honest answer rambling on, never graded).
    rambling = "4 + 4 = \\boxed{8}. This is a mathematical identity that can be expressed as"
    assert one_step.flag(task, rambling, truncated=True) == []
    for cut in ("4 + 4 = 8 and so on and so on", "4 + 4 = \\boxed{8", "\\boxed{8} and \\boxed{"):
        assert "long" in reasons(one_step.flag(task, cut, truncated=True)), cut
    padded = "4 + 4 = \\boxed{8}" + " and so on" * 60  # 600 chars against a median of 20
    assert "long" in reasons(one_step.flag(task, padded, typical_chars=20))
    # Two steps or more, or a task whose working the pack does not write out: bare is flagged.
    multi = math_env.pack.task_at("test", 0)
    assert math_env.working_steps(multi) == 2
    assert reasons(math_env.flag(multi, f"\\boxed{{{multi['answer']}}}")) == {"no_reasoning"}
    five = gym.make("grpo/MathExact-v0", pack="arith", level=5).unwrapped
    assert five.working_steps(five.pack.task_at("test", 1)) == 3  # 16 + 12 * 4 + 2
    gsm8k = gym.make("grpo/MathExact-v0", pack="gsm8k").unwrapped
    word_problem = gsm8k.pack.task_at("test", 0)
    assert gsm8k.working_steps(word_problem) is None
    assert reasons(gsm8k.flag(word_problem, "\\boxed{18}")) == {"no_reasoning"}


def test_math_flags_an_answer_that_restates_the_question_whatever_the_grade():
    env = gym.make("grpo/MathExact-v0", pack="arith", level=1).unwrapped
    task = env.pack.task_at("test", 5)  # What is 4 + 4?
    for restated in ("\\boxed{4 + 4}", "\\boxed{4+4=8}", "\\boxed{(4)+(4)}",
                     "The answer is 4 + 4."):
        flags = env.flag(task, restated)
        assert reasons(flags) == {"restates_question"}, restated
        assert "4 + 4" in flags[0].detail
    # The sum written before its boxed result is working, not a restated answer.
    assert env.flag(task, "4 + 4 = 8, so \\boxed{8}") == []


def test_code_that_prints_or_touches_the_harness():
    clean = "```python\ndef add(a, b):\n    return a + b\n```"
    assert prints_or_touches_harness(clean) == []
    printing = "```python\ndef add(a, b):\n    print(a + b)\n    return a + b\n```"
    assert reasons(prints_or_touches_harness(printing)) == {"prints_output"}
    exiting = "```python\nimport sys\ndef add(a, b):\n    sys.exit(0)\n```"
    flags = prints_or_touches_harness(exiting)
    assert reasons(flags) == {"touches_harness"} and "exits early" in flags[0].detail
    always_equal = ("```python\nclass Any:\n    def __eq__(self, other):\n        return True\n"
                    "def add(a, b):\n    return Any()\n```")
    assert "always-equal objects" in prints_or_touches_harness(always_equal)[0].detail
    for snippet in ("import builtins", "open('out.txt', 'w')", "sys.modules['m'] = None",
                    "import subprocess", "import unittest"):
        assert prints_or_touches_harness(f"```python\n{snippet}\n```"), snippet
    # Only the graded block counts: prose around it may say "print(" freely.
    assert prints_or_touches_harness("Call print(x) to see it.\n" + clean) == []


def test_json_that_is_valid_but_empty():
    env = gym.make("grpo/JsonSchema-v0", pack="extract", level=1).unwrapped
    task = env.pack.task_at("train", 0)
    for text in ("{}", "[]", '{"name": ""}', '{"name": "string", "age": null}',
                 'Here it is: ```json\n{"items": []}\n```'):
        assert reasons(env.flag(task, text)) == {"empty_json"}, text
    for text in ('{"name": "Ann", "age": 3}', '{"count": 0}', '{"ok": false}', "no json here"):
        assert env.flag(task, text) == [], text


def test_each_env_applies_its_own_checks(math_env):
    code = gym.make("grpo/CodeTests-v0", pack="humaneval").unwrapped
    code_task = code.pack.task_at("train", 0)
    math_task = math_env.pack.task_at("train", 0)
    assert reasons(math_env.flag(math_task, "\\boxed{5}")) == {"no_reasoning"}
    assert code.flag(code_task, "\\boxed{5}") == []
    assert reasons(code.flag(code_task, "print(1)")) == {"prints_output"}


def test_flag_samples_keeps_only_high_reward_flagged_samples(math_env):
    task_id = math_env.pack.task_at("train", 0).id

    def sample(completion: str, reward: float) -> dict:
        return {"task_id": task_id, "prompt": "What is 2 + 3?", "completion": completion,
                "reward": reward, "rewards": {"correct": reward, "format": 1.0}}

    samples = [sample("\\boxed{5}", 1.1), sample("\\boxed{4}", 0.1), sample(REASONED, 1.1)]
    flagged = flag_samples(samples, math_env, min_reward=0.55)
    assert len(flagged) == 1
    only = flagged[0]
    assert only["completion"] == "\\boxed{5}" and only["prompt"] == "What is 2 + 3?"
    assert only["rewards"] == {"correct": 1.1, "format": 1.0}
    assert [f["reason"] for f in only["flags"]] == ["no_reasoning"]
    assert flag_samples([], math_env, min_reward=0.5) == []
