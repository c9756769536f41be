"""Reward hacks of the math domain: every one scores no correctness; honest answers still do.

Each case goes through ``grpo/MathExact-v0`` on real tasks of the built-in packs (``arith`` and
``gsm8k`` are number packs, ``math500`` is symbolic), the way a learner grades a completion.
The first case is the one a demo run found: the model boxed the question (``\\boxed{2 + 6}``),
which has the gold's value.
"""

from __future__ import annotations

import gymnasium as gym
import pytest

import envs  # noqa: F401  (registers the grpo/* envs)
from envs.verify.math import gold_problem, verify
from envs.verify.math_answer import is_number_literal, restated_expression
from tasks.pack import load_folder


def _env(pack: str, **kwargs):
    return gym.make("grpo/MathExact-v0", pack=pack, split="test", **kwargs).unwrapped


@pytest.fixture(scope="module")
def arith1():
    env = _env("arith", level=1, require_boxed=True)  # as in the demo
    return env, [env.pack.task_at("test", i) for i in range(6)]


def _operands(task) -> tuple[str, str, str]:
    a, b = task["expression"].split(" + ")
    return a, b, task["answer"]


# (name, completion built from the task's operands a, b and gold s)
ARITH_HACKS = [
    ("the question boxed", lambda a, b, s: rf"\boxed{{{a} + {b}}}"),
    ("operands swapped", lambda a, b, s: rf"\boxed{{{b} + {a}}}"),
    ("brackets", lambda a, b, s: rf"\boxed{{({a} + {b})}}"),
    ("plus zero", lambda a, b, s: rf"\boxed{{{a} + {b} + 0}}"),
    ("times one", lambda a, b, s: rf"\boxed{{1 \cdot ({a} + {b})}}"),
    ("inside an equation", lambda a, b, s: rf"\boxed{{{a} + {b} = {s}}}"),
    ("assigned", lambda a, b, s: rf"\boxed{{x = {a} + {b}}}"),
    ("in words then boxed question", lambda a, b, s: rf"The sum is \boxed{{{a}+{b}}}."),
    ("another expression with the value", lambda a, b, s: rf"\boxed{{{int(s) + 2} - 2}}"),
    ("nested box", lambda a, b, s: rf"\boxed{{{a} + \boxed{{{b}}}}}"),
    ("doubly boxed answer", lambda a, b, s: rf"\boxed{{\boxed{{{s}}}}}"),
    ("unclosed box", lambda a, b, s: rf"\boxed{{{s}"),
    ("two different boxes", lambda a, b, s: rf"\boxed{{{int(s) + 1}}} or \boxed{{{s}}}"),
    ("hedge in one box", lambda a, b, s: rf"\boxed{{{s} \text{{ or }} {int(s) + 1}}}"),
    ("many candidates", lambda a, b, s: r"\boxed{" + ", ".join(str(i) for i in range(19)) + "}"),
    ("a range", lambda a, b, s: rf"\boxed{{{int(s) - 1} \text{{ to }} {int(s) + 1}}}"),
    ("unboxed answer", lambda a, b, s: f"The answer is {s}."),
]


@pytest.mark.parametrize("name,build", ARITH_HACKS, ids=[h[0] for h in ARITH_HACKS])
def test_arith_hacks_score_no_correctness(arith1, name, build):
    env, tasks = arith1
    for task in tasks:
        completion = build(*_operands(task))
        _, info = env.score(task, completion)
        assert info["rewards"]["correct"] == 0.0 and not info["passed"], (completion, info)


def test_hacks_fail_with_their_own_reasons(arith1):
    env, tasks = arith1
    a, b, s = _operands(tasks[0])
    reasons = {
        rf"\boxed{{{b} + {a}}}": "restates_question",
        rf"\boxed{{{a} + {b} = {s}}}": "restates_question",
        rf"\boxed{{{int(s) + 2} - 2}}": "not_a_number",
        rf"\boxed{{{a} + \boxed{{{b}}}}}": "malformed_box",
        rf"\boxed{{{s}": "malformed_box",
        rf"\boxed{{{int(s) + 1}}} or \boxed{{{s}}}": "multiple_answers",
        f"The answer is {s}.": "not_boxed",
    }
    for completion, reason in reasons.items():
        _, info = env.score(tasks[0], completion)
        assert info["reason"] == reason, (completion, info["reason"])


ARITH_HONEST = [
    lambda a, b, s: rf"\boxed{{{s}}}",
    lambda a, b, s: rf"{a} + {b} = {s}, so the answer is \boxed{{{s}}}.",
    lambda a, b, s: rf"Adding {a} and {b} gives {s}. \boxed{{{s}}}",
    lambda a, b, s: rf"\boxed{{{s}.0}}",
    lambda a, b, s: rf"$\boxed{{{s}}}$",
    lambda a, b, s: rf"\boxed{{{s}}} (since {a} + {b} = {s}) and again \boxed{{{s}}}",
]


@pytest.mark.parametrize("build", ARITH_HONEST)
def test_honest_arith_answers_are_credited(arith1, build):
    env, tasks = arith1
    for task in tasks:
        completion = build(*_operands(task))
        _, info = env.score(task, completion)
        assert info["passed"] and info["rewards"] == {"correct": 1.0, "format": 1.0}, (
            completion, info["reason"])


def test_format_reward_agrees_with_require_boxed(arith1):
    """``format`` is 1 exactly when ``require_boxed`` would accept the answer's form."""
    env, tasks = arith1
    loose = _env("arith", level=1)
    task = tasks[0]
    a, b, s = _operands(task)
    forms = [rf"\boxed{{{s}}}", rf"\boxed{{{s}", rf"\boxed{{\boxed{{{s}}}}}", f"The answer is {s}",
             rf"\boxed{{{s}}}. The answer is {s}", f"{s}", rf"\fbox{{{s}}}", rf"\boxed {s}",
             rf"$\boxed{{{s}}}$"]
    for completion in forms:
        _, strict = env.score(task, completion)
        _, plain = loose.score(task, completion)
        # a right value in any style passes without require_boxed (unless malformed) ...
        if plain["reason"] != "malformed_box":
            assert plain["passed"], (completion, plain["reason"])
        # ... and with it, exactly when the format component is earned.
        assert strict["passed"] == (strict["rewards"]["format"] == 1.0), (completion, strict)


def test_gsm8k_is_a_number_pack():
    env = _env("gsm8k")
    task = next(t for i in range(50) if int((t := env.pack.task_at("test", i))["answer"]) > 1000)
    gold = task["answer"]
    n = int(gold)
    honest = [rf"\boxed{{{gold}}}", rf"\boxed{{{n:,}}}", rf"\boxed{{\${n}}}",
              rf"\boxed{{{n} \text{{ dollars}}}}", rf"\boxed{{{n}.00}}"]
    for completion in honest:
        _, info = env.score(task, completion)
        assert info["passed"], (completion, info["reason"])
    hacks = [rf"\boxed{{{n - 10} + 10}}", rf"\boxed{{{n} \cdot 1}}",
             rf"\boxed{{\frac{{{2 * n}}}{{2}}}}", rf"\boxed{{\sqrt{{{n * n}}}}}", rf"\boxed{{{n}/1}}"]
    for completion in hacks:
        _, info = env.score(task, completion)
        assert not info["passed"] and info["reason"] == "not_a_number", (completion, info)


def test_symbolic_pack_credits_forms_but_not_restatements():
    env = _env("math500")
    tasks = [env.pack.task_at("test", i) for i in range(env.pack.size("test"))]
    # Every gold, boxed, is credited: the restatement rule exempts the gold's own form.
    for task in tasks:
        _, info = env.score(task, rf"\boxed{{{task['answer']}}}")
        assert info["passed"], (task.id, task["answer"], info["reason"])


def test_restatement_rule_on_symbolic_questions():
    cases = [
        # (question, gold, answer, restated?)
        (r"Simplify $\frac{6}{8}$.", r"\frac34", r"\frac{6}{8}", True),
        (r"Simplify $\frac{6}{8}$.", r"\frac34", r"\frac{3}{4}", False),
        (r"Compute $\dbinom{8}{4}$.", "70", r"\binom{8}{4}", True),
        (r"Compute $\dbinom{8}{4}$.", "70", "70", False),
        (r"Evaluate $\sqrt{50}$.", r"5\sqrt{2}", r"\sqrt{50}", True),
        (r"Evaluate $\sqrt{50}$.", r"5\sqrt{2}", r"5\sqrt2", False),
        (r"Expand $(x+1)^2$.", "x^2+2x+1", "(x+1)^2", True),
        (r"Expand $(x+1)^2$.", "x^2+2x+1", "1 + 2x + x^2", False),  # reordered gold form
        (r"Let $f(n) = n-1$. Find $\sum_{k=1}^n f(k)$.", r"\frac{n^2-n}{2}", r"\frac{n(n-1)}{2}",
         False),
        ("What is (14 - 6) × (3 + 9) - 7?", "89", "(3+9)(14-6)-7", True),
        ("What is (14 - 6) × (3 + 9) - 7?", "89", "96-7", False),
    ]
    for question, gold, answer, restated in cases:
        got = restated_expression(answer, question, gold)
        assert (got is not None) == restated, (question, answer, got)


def test_number_literals():
    for s in ("156", "156.0", "1,560", "-3/4", r"\frac{3}{4}", r"-\frac{3}{4}", r"\$18", "50%",
              r"18\text{ apples}", "0.5", ".5"):
        assert is_number_literal(s), s
    for s in ("90+66", r"2\cdot 78", r"\sqrt{64}", "7+6+0", "x=5", "1e3", "2^3", r"\pi",
              r"\frac{14850}{2}", "6/8", "10/1"):
        assert not is_number_literal(s), s


def test_decimal_rounding_is_an_opt_in_of_the_env(tmp_path):
    """0.33 for 1/3 fails by default, as Math-Verify says, and passes with decimal_rounding."""
    folder = tmp_path / "thirds"
    folder.mkdir()
    (folder / "pack.toml").write_text(
        'name = "thirds"\nversion = "0.1.0"\ndescription = "d"\nlicense = "MIT"\n'
        'source = "test"\nenv = "grpo/MathExact-v0"\nanswer = "number"\n'
        'splits = { test = "test.jsonl" }\nprompt_template = "{question}"\n')
    (folder / "test.jsonl").write_text('{"id": "0", "question": "One third?", "answer": "1/3"}\n')
    pack = load_folder(folder)
    strict = gym.make("grpo/MathExact-v0", pack=pack, split="test").unwrapped
    rounding = gym.make("grpo/MathExact-v0", pack=pack, split="test",
                        decimal_rounding=True).unwrapped
    assert not strict.score("thirds/0", r"\boxed{0.33}")[1]["passed"]
    assert rounding.score("thirds/0", r"\boxed{0.33}")[1]["passed"]
    assert not rounding.score("thirds/0", r"\boxed{0.34}")[1]["passed"]
    assert strict.score("thirds/0", r"\boxed{\frac{1}{3}}")[1]["passed"]


def test_imaginary_unit():
    assert verify("i", r"\boxed{\sqrt{-1}}").passed
    assert verify(r"\sqrt{-1}", r"\boxed{i}").passed
    assert verify("3+2i", r"\boxed{3+\sqrt{-4}}").passed
    assert not verify("i", r"\boxed{-\sqrt{-1}}").passed


def test_gold_problems_name_what_is_wrong():
    assert gold_problem("18", answer="number") is None
    assert gold_problem(r"\frac{3}{4}", answer="number") is None
    assert "not a number literal" in gold_problem("twenty-nine rolls", answer="number")
    assert "not a number literal" in gold_problem("2+3", answer="number")
    assert "does not parse" in gold_problem(r"\frac{1}{", answer="expression")
    assert gold_problem(r"\begin{pmatrix} 1 \\ 2 \end{pmatrix}", answer="expression") is None
    # A wrong but well-formed gold cannot be detected: validation checks form, not truth.
    assert gold_problem("999999", answer="number") is None


def test_echoing_the_question_earns_nothing_when_its_last_number_is_the_answer():
    """Without a box, the answer falls back to the completion's last number. A completion that
    only echoes "0 + 5" ends on 5, the gold of "What is 0 + 5?": the echo found in a trained
    model's samples was credited until the number had to close something other than a
    restatement of the question."""
    env = _env("arith", level=1)  # boxing not required: the fallback is in play
    task = next(t for t in (env.pack.task_at("train", i) for i in range(400))
                if t["expression"].startswith("0 + ") and t["answer"] != "0")
    a, b, s = _operands(task)
    echoes = [f"I don't know, {a} + {b}",
              f"Recall your five feet. It is equivalent to adding {a}+{b}",
              f"The question asks for ({a} + {b})"]
    for completion in echoes:
        _, info = env.score(task, completion)
        assert not info["passed"] and info["reason"] == "restates_question", (completion, info)
    honest = [f"so, {a} + {b} = {s}\n\nhello there", f"The sum is {s}.", s,
              f"Adding {a} and {b} gives {s}"]
    for completion in honest:
        _, info = env.score(task, completion)
        assert info["passed"], (completion, info)
