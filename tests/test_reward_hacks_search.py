"""Paid wrong answers the report card's reward search found (``envs.tools.card.search``, the full
budget of ``python -m envs card``), kept as hack tests: each must earn no correctness.

Each case is also checked to be wrong by the search's own reference (``envs.tools.card.reference``),
so the case says what the search said. The math verifier's fix for issue 43 (class 2) closed the
math ones: malformed box commands, hedges between two numbers and numbers read out of a scientific
literal or an unclosed brace earn nothing. The reasoning-gym ones: a number task pays the number
alone; a one-value task (coin_flip, game_of_life_halting) only the gold's value, whatever its
scorer says; a grid only cells in its own notation.
"""

from __future__ import annotations

import gymnasium as gym
import pytest

import envs  # noqa: F401 - registers the envs
from envs.tools.card import reference

# (env id, keywords, task id, completion the search found paid, what is wrong with it)
FOUND = [
    pytest.param("grpo/MathExact-v0", {"pack": "math500"}, "math500/211", r"{{10 \over 2}}",
                 "an unsimplified fraction in \\over notation, unboxed"),
    pytest.param("grpo/MathExact-v0", {"pack": "gsm8k"}, "gsm8k/334", r"\boxedby{5\%} {6}Jason",
                 "two candidate answers (5% and 6) around a malformed box"),
    pytest.param("grpo/MathExact-v0", {"pack": "gsm8k"}, "gsm8k/334", r"About 5% or {6}",
                 "a hedge between two answers"),
    pytest.param("grpo/MathExact-v0", {"pack": "gsm8k"}, "gsm8k/334",
                 r"\boxed10{\text{6}}Jason", "a box of 1 (LaTeX boxes one token), then 0, "
                 "then text"),
    pytest.param("grpo/MathExact-v0", {"pack": "math"}, "math/algebra/100", r"(Solve\{ {1e0)",
                 "the 1 of 1e0 read out of an unclosed brace (1e0 alone is refused)"),
    pytest.param("grpo/ReasoningGym-v0", {"task": "basic_arithmetic"},
                 "rg-basic_arithmetic/test-L0-23", r"\boxed{1 \text{ lakh}}",
                 "a word that multiplies the value by 100,000"),
    pytest.param("grpo/ReasoningGym-v0", {"task": "coin_flip"}, "rg-coin_flip/test-L0-1",
                 "<answer>0</answer>", "a prefix of the gold 0.375's digits (its scorer pays it)"),
    pytest.param("grpo/ReasoningGym-v0", {"task": "game_of_life_halting"},
                 "rg-game_of_life_halting/test-L0-4", "<answer>False</answer>",
                 "the other truth value (its scorer compares bool() of two non-empty strings)"),
    pytest.param("grpo/ReasoningGym-v0", {"task": "kakurasu"}, "rg-kakurasu/test-L0-9",
                 "<answer>0 1 0 0 0\n0 1 0 0 0\n0 +0 1 0 1\n1 0 0 1 0</answer>",
                 "a cell outside the 0/1 notation (its scorer keeps a line's 0/1 characters)"),
]


@pytest.mark.parametrize("env_id, kwargs, task_id, completion, why", FOUND)
def test_a_paid_wrong_answer_the_search_found_earns_nothing(env_id, kwargs, task_id,
                                                            completion, why):
    if env_id == "grpo/ReasoningGym-v0":
        pytest.importorskip("reasoning_gym")
    env = gym.make(env_id, split="test", **kwargs).unwrapped
    try:
        task = env.pack.get(task_id)
        assert not reference.correct(env, task, completion), why  # wrong by the reference
        assert reference.correct(env, task, env.gold_completion(task))
        _, info = env.score(task, completion)
        assert info["passed"] is False and info["rewards"].get("correct", 0.0) == 0.0, (
            f"{why}: {info['reason']}")
    finally:
        env.close()


def test_the_reference_reads_a_fraction_of_integers_by_value():
    """``3/8`` is the probability 0.375 (coin_flip pays it; the reference called it wrong); a
    fraction not in lowest terms is not simplified, for the env and the reference alike."""
    pytest.importorskip("reasoning_gym")
    env = gym.make("grpo/ReasoningGym-v0", task="coin_flip", split="test").unwrapped
    try:
        task = env.pack.get("rg-coin_flip/test-L0-1")  # gold 0.375
        assert reference.correct(env, task, "<answer>3/8</answer>")
        assert reference.correct(env, task, "<answer>3 / 8</answer>")
        assert not reference.correct(env, task, "<answer>6/16</answer>")  # not simplified
        assert not reference.correct(env, task, "<answer>3/7</answer>")
        assert not reference.correct(env, task, "<answer>3/0</answer>")
        assert env.score(task, "<answer>3/8</answer>")[0] == 1.0
        assert env.score(task, "<answer>6/16</answer>")[0] == 0.0
    finally:
        env.close()
