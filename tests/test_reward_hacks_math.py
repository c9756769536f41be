"""Reward hacks of the math domain: every one scores no correctness; honest answers still do.

Each case goes through ``grpo/MathExact-v0`` on real tasks of the built-in packs (``arith`` and
``gsm8k`` are number packs, ``math500`` is symbolic), the way a learner grades a completion.
The first case is the one a demo run found: the model boxed the question (``\\boxed{2 + 6}``),
which has the gold's value. Issue 22 added the classes at the end: work left undone in another
notation (``\\log_2 64``, ``\\sqrt{242}``, ``\\sum``, unreduced fractions, identity terms),
unclosed boxes beside or around a closed one, and text inside a box.
"""

from __future__ import annotations

import gymnasium as gym
import pytest

import envs  # noqa: F401  (registers the grpo/* envs)
from envs.verify.math import gold_problem, verify
from envs.verify.math_answer import is_number_literal, restated_expression
from envs.verify.math_extract import extract
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
    assert verify(r"3+\sqrt{-4}", r"\boxed{3+2i}").passed
    # \sqrt{-4} is 2i with the root left to take (a root of a perfect square)
    assert verify("3+2i", r"\boxed{3+\sqrt{-4}}").reason == "not_simplified"
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


# -- simplest form (issue 22) -----------------------------------------------------------------
# On an expression pack any form with the gold's value used to be credited, so the question's
# computation could be left undone in another notation. An answer now earns correctness only in
# a form no less simplified than the gold's (envs/verify/math_simplest.py); the hacks fail with
# reason not_simplified, and the legitimate forms beside them still pass.

# task id -> (completions that leave the work undone, completions that do it)
MATH500_SIMPLEST = {
    "math500/161": (  # Evaluate $\log_264$.  -> 6
        [r"\boxed{\log_2 64}", r"\boxed{\log_{2}{64}}", r"\boxed{\log_2(64)}",
         r"\boxed{\frac{\ln 64}{\ln 2}}", r"\boxed{\log_2 2^6}", r"\boxed{\log_2 64 + 0}",
         r"So $\log_2 64$ is the answer: $\boxed{\log_2 64}$."],
        [r"\boxed{6}", r"\boxed{6.0}", r"Since $2^6 = 64$, $\log_2 64 = 6$. \boxed{6}"],
    ),
    "math500/31": (  # Simplify $\sqrt{242}$.  -> 11\sqrt2
        [r"\boxed{242^{1/2}}", r"\boxed{\sqrt{242} + 2 - 2}", r"\boxed{\sqrt{2}\sqrt{121}}",
         r"\boxed{\sqrt{121 \cdot 2}}", r"\boxed{11\sqrt{2} \cdot 1}", r"\boxed{\frac{22\sqrt{2}}{2}}",
         r"\boxed{\sqrt{2}\cdot 11^{1}}", r"\boxed{(11\sqrt{2})^{1}}"],
        [r"\boxed{11\sqrt{2}}", r"\boxed{11\sqrt2}", r"\boxed{\sqrt{2}\cdot 11}",
         r"\boxed{11 \cdot 2^{1/2}}", r"$\sqrt{242} = \sqrt{121}\sqrt{2}$, so \boxed{11\sqrt{2}}"],
    ),
    "math500/53": (  # Compute $\arcsin(-1/2)$ in radians.  -> -\frac{\pi}{6}
        [r"\boxed{\arcsin(-0.5)}", r"\boxed{\sin^{-1}\left(-\frac{1}{2}\right)}",
         r"\boxed{-\arcsin\frac{1}{2}}", r"\boxed{\arctan\left(-\frac{1}{\sqrt{3}}\right)}"],
        [r"\boxed{-\frac{\pi}{6}}", r"\boxed{-\frac{1}{6}\pi}", r"\boxed{\frac{-\pi}{6}}"],
    ),
    "math500/256": (  # Simplify $\frac{1}{5}\cdot \frac{8}{7}\div \frac{12}{20}$.  -> \frac{8}{21}
        [r"\boxed{\frac{160}{420}}", r"\boxed{\frac{8}{21}\cdot\frac{2}{2}}",
         r"\boxed{\frac{8}{35}\cdot\frac{20}{12}}", r"\boxed{\frac{40}{105}}", r"\boxed{160/420}",
         r"\boxed{8 \cdot 21^{-1}}", r"\boxed{160 \div 420}", r"\boxed{\frac{8}{21.0}}"],
        [r"\boxed{\frac{8}{21}}", r"\boxed{8/21}", r"\boxed{\dfrac{8}{21}}"],
    ),
    "math500/16": (  # Compute: $1-2+3-4+5- \dots +99-100$.  -> -50
        [r"\boxed{\sum_{k=1}^{100} (-1)^{k+1} k}", r"\boxed{-\frac{100}{2}}", r"\boxed{50 - 100}"],
        [r"\boxed{-50}", r"Pairing terms gives $50 \cdot (-1)$, so \boxed{-50}."],
    ),
}


@pytest.fixture(scope="module")
def math500():
    return _env("math500")


@pytest.mark.parametrize("task_id", sorted(MATH500_SIMPLEST))
def test_undone_work_earns_nothing_on_math500(math500, task_id):
    hacks, honest = MATH500_SIMPLEST[task_id]
    for completion in hacks:
        _, info = math500.score(task_id, completion)
        assert not info["passed"] and info["rewards"]["correct"] == 0.0, (completion, info)
        assert info["reason"] in ("not_simplified", "restates_question"), (completion, info)
    for completion in honest:
        _, info = math500.score(task_id, completion)
        assert info["passed"], (completion, info["reason"], info.get("undone"))


# (gold, an answer with its value that leaves work undone): functions that evaluate, roots of
# perfect powers, sums, products, unreduced fractions and identity terms, in several notations
NOT_SIMPLIFIED = [
    ("6", r"\log_2 64"), ("3", r"\log_{10} 1000"), ("3", r"\ln e^3"), ("5", r"e^{\ln 5}"),
    ("3", r"\sqrt[3]{27}"), ("3", "27^{1/3}"), (r"2\sqrt{2}", r"\sqrt{8}"), (r"2\sqrt{2}", "2^{3/2}"),
    ("2i", r"\sqrt{-4}"), (r"\sqrt{6}", r"\sqrt{2}\sqrt{3}"), (r"\sqrt{3}", r"\frac{\sqrt{6}}{\sqrt{2}}"),
    (r"\sqrt{2}", r"\frac{2}{\sqrt{2}}"), (r"\frac{\sqrt{2}}{2}", r"\frac{2\sqrt{2}}{4}"),
    ("10", r"\binom{5}{2}"), ("6", "3!"), ("5", "|{-5}|"), ("5", r"\left|-5\right|"),
    ("3", r"\lfloor 3.5 \rfloor"), ("4", r"\lceil 3.5 \rceil"), ("6", r"\gcd(12, 18)"), ("5", r"\max(3, 5)"),
    ("100", "10^{2}"), ("100", r"10 \cdot 10"), ("6", r"2 \cdot 3"), ("5", "2 + 3"),
    (r"\frac{1}{2}", r"\sin\frac{\pi}{6}"), (r"\frac{\pi}{4}", r"\arctan 1"), ("1", r"\tan\frac{\pi}{4}"),
    ("55", r"\sum_{k=1}^{10} k"), ("24", r"\prod_{k=1}^{4} k"), ("2", r"\int_0^2 1\,dx"),
    ("1", r"\lim_{x \to 0} \frac{\sin x}{x}"),
    (r"\frac{3}{4}", r"\frac{6}{8}"), (r"\frac{3}{4}", "6/8"), ("4", r"\frac{4}{1}"), ("4", r"\frac{8}{2}"),
    ("2", r"\frac{1}{\frac{1}{2}}"), (r"\frac{1}{4}", r"\left(\frac{1}{2}\right)^2"),
    ("x", r"x \cdot 1"), ("x", "x + 0"), ("x", r"\frac{x}{1}"), ("x", "x^{1}"), ("2x", "x + x"),
    ("x^2", r"x \cdot x"), ("4x^2", "(2x)^2"), ("x^6", "(x^2)^3"), ("2", r"(\sqrt{2})^2"),
    ("x - 1", r"\frac{x^2-1}{x+1}"), ("2", r"(\sqrt{3}+1)(\sqrt{3}-1)"), (r"3+2\sqrt{2}", r"(1+\sqrt{2})^2"),
    (r"\frac{2}{7}", r"\frac{2}{7} \cdot \frac{2}{2}"), (r"11\sqrt{2}", r"\sqrt{242} + 2 - 2"),
    ("6", "-(-6)"), ("6", r"6 + 0 \cdot \pi"), ("2x", "(x+1)^2 - x^2 - 1"), ("0", r"\sin \pi"),
]

# (gold, a legitimate equivalent form): notation is free, and a gold that is itself unsimplified
# is matched by its own form and by any form no less simplified
SIMPLIFIED = [
    (r"\frac{1}{\sqrt{2}}", r"\frac{\sqrt{2}}{2}"), (r"\frac{\sqrt{2}}{2}", r"\frac{1}{\sqrt{2}}"),
    (r"\frac{\sqrt{6}}{3}", r"\frac{\sqrt{2}}{\sqrt{3}}"), (r"\frac{\sqrt{3}}{6}", r"\frac{1}{2\sqrt{3}}"),
    (r"\sqrt{2}-1", r"\frac{1}{1+\sqrt{2}}"), (r"\frac{1+\sqrt{5}}{2}", r"\frac{1}{2}+\frac{\sqrt{5}}{2}"),
    (r"\frac{1}{2}+\frac{\sqrt{5}}{2}", r"\frac{1+\sqrt{5}}{2}"), (r"\frac{3\pi}{4}", r"\frac{3}{4}\pi"),
    (r"\log_2 3", r"\frac{\ln 3}{\ln 2}"), (r"\frac{\ln 3}{\ln 2}", r"\log_2 3"), ("e^2", r"\exp(2)"),
    (r"\frac{1}{e}", "e^{-1}"), ("x^2+2x+1", "(x+1)^2"), ("(x+1)^2", "x^2+2x+1"), ("2x+2", "2(x+1)"),
    (r"\frac{5}{2}", "2.5"), (r"\frac{5}{2}", r"2\frac{1}{2}"), (r"-\frac{3}{4}", r"\frac{-3}{4}"),
    ("i", r"\sqrt{-1}"), ("2^{10}", "1024"), ("2^{10}", "4^{5}"), (r"\frac{6}{8}", r"\frac{3}{4}"),
    (r"\frac{6}{8}", r"\frac{9}{12}"), (r"\binom{n}{2}", r"\frac{n(n-1)}{2}"), (r"\sqrt{8}", r"2\sqrt{2}"),
    ("5!", "120"), (r"\tan^2(y)+1", r"\sec^2(y)"), (r"\pi - 2", r"-2 + \pi"), ("3+2i", "2i+3"),
    (r"12\sqrt{3}", r"12 \cdot \sqrt{3}"), (r"\frac{5\sqrt{3}}{6}", r"\frac{5}{2\sqrt{3}}"),
    ("x^2+2x", "(x+1)^2 - 1"), (r"\frac{\sqrt{2}}{2}", r"\sqrt{\frac{1}{2}}"), ("e^{x}", r"\exp(x)"),
]


@pytest.mark.parametrize(("gold", "pred"), NOT_SIMPLIFIED)
def test_not_simplified_forms_earn_nothing(gold, pred):
    for wrapped in (pred, rf"\left({pred}\right)", rf"\displaystyle {pred}", f"y = {pred}"):
        v = verify(gold, rf"\boxed{{{wrapped}}}")
        assert not v.passed and v.reason == "not_simplified", (gold, wrapped, v)
    # the same answer is credited against a gold written the same way
    assert verify(pred, rf"\boxed{{{pred}}}").passed, pred


@pytest.mark.parametrize(("gold", "pred"), SIMPLIFIED)
def test_simplified_forms_still_pass(gold, pred):
    for wrapped in (pred, rf"\left({pred}\right)", f"y = {pred}"):
        v = verify(gold, rf"\boxed{{{wrapped}}}")
        assert v.passed, (gold, wrapped, v)


def test_not_simplified_names_the_work_left():
    v = verify(r"11\sqrt{2}", r"\boxed{\sqrt{242} + 2 - 2}")
    assert v.reason == "not_simplified"
    assert set(v.details["undone"]) == {"radical", "arithmetic"}, v.details


# Follow-up: forms that still got credit after the first version. Each closes by a rule, not by
# a case: what the parser writes alike is read from the text (a factor 1 beside a reciprocal,
# e^{1}, a number to the power -1, a fraction of decimals, \div); a product with a sum is
# multiplied out term by term (a root that takes something out, a factor common to the whole
# numerator and the denominator); a sum whose terms with variables cancel once multiplied out
# (logarithms expanded too); a function application that sympy's own evaluation rewrites.
# (gold, answer with the gold's value, the kind of work it leaves)
FOLLOW_UP_NOT_SIMPLIFIED = [
    (r"\frac{1}{x}", r"x^{-1}\cdot 1", "identity"), (r"\frac{1}{x}", r"1\cdot\frac{1}{x}", "identity"),
    (r"\frac{1}{x}", r"\frac{1}{x}\times 1", "identity"),
    (r"\frac{1}{\sqrt{2}}", r"\frac{1}{\sqrt{2}}\cdot 1", "identity"),
    ("e", "e^{1}", "identity"), ("e", r"\exp(1)", "identity"), ("2e", "2e^{1}", "identity"),
    (r"\frac{1}{2}", "2^{-1}", "arithmetic"), (r"\frac{1}{2}", "(2)^{-1}", "arithmetic"),
    (r"\frac{x}{2}", r"x\cdot 2^{-1}", "arithmetic"), ("0.1", "10^{-1}", "arithmetic"),
    ("6", r"\frac{6}{1.0}", "identity"), ("6", r"6 \div 1", "identity"), ("6", r"12 \div 2", "fraction"),
    (r"\frac{1}{2}", r"\frac{1}{2.0}", "fraction"),
    (r"2+\sqrt{2}", r"\sqrt{2}(1+\sqrt{2})", "radical"), (r"3+\sqrt{3}", r"\sqrt{3}(\sqrt{3}+1)", "radical"),
    (r"2\sqrt{3}+\sqrt{6}", r"\sqrt{6}(\sqrt{2}+1)", "radical"),
    (r"2+\sqrt[3]{2}", r"\sqrt[3]{2}(\sqrt[3]{4}+1)", "radical"), (r"2x+\sqrt{2}", r"\sqrt{2}(\sqrt{2}x+1)", "radical"),
    (r"1+\sqrt{2}", r"\frac{2+2\sqrt{2}}{2}", "fraction"), (r"1+\sqrt{2}", r"\frac{2+\sqrt{2}}{\sqrt{2}}", "fraction"),
    (r"\sqrt{3}+\sqrt{2}", r"\frac{3+\sqrt{6}}{\sqrt{3}}", "fraction"), ("x+1", r"\frac{2x+2}{2}", "fraction"),
    ("1+y", r"\frac{x+xy}{x}", "fraction"),
    ("a^2+b^2", "(a+b)^2-2ab", "arithmetic"), ("a^2+b^2", "(a-b)^2+2ab", "arithmetic"),
    ("x^2+1", "(x+1)^2-2x", "arithmetic"), ("4ab", "(a+b)^2-(a-b)^2", "arithmetic"),
    (r"\ln 2", r"\ln(2e)-1", "arithmetic"),
    (r"\sin 1", r"\cos(\frac{\pi}{2}-1)", "function"), (r"\sin 1", r"\sin(\pi-1)", "function"),
    (r"\ln 2", r"-\ln\frac{1}{2}", "function"), (r"\cos x", r"-\cos(\pi-x)", "function"),
    (r"\sin x", r"\sin(x+2\pi)", "function"), (r"\tan 1", r"\tan(\pi+1)", "function"),
    (r"\frac{2}{3}", r"0.\overline{6}", "fraction"), (r"\frac{1}{6}", r"0.1\overline{6}", "fraction"),
]

# (gold, a legitimate form beside those): notation the follow-up rules must leave alone
FOLLOW_UP_SIMPLIFIED = [
    (r"\frac{1}{x}", "x^{-1}"), (r"\frac{1}{x}", "1/x"), (r"-\frac{1}{2x}", r"-\frac1{2x}"),
    (r"\frac{1}{2x}", r"\frac{1}{2}x^{-1}"), (r"\frac{2}{x}", "2x^{-1}"),
    (r"\frac{1}{\sqrt{2}}", r"(\sqrt{2})^{-1}"), (r"\frac{\sqrt{2}}{2}", "2^{-1/2}"), (r"\frac{1}{e}", "e^{-1}"),
    (r"\frac{e}{2}", r"\frac{1}{2}e"), (r"2+2\sqrt{2}", r"2(1+\sqrt{2})"), (r"\pi+\pi\sqrt{2}", r"\pi(1+\sqrt{2})"),
    (r"\sqrt{2}+\sqrt{6}", r"\sqrt{2}(1+\sqrt{3})"), (r"\sqrt{2}(1+\sqrt{2})", r"2+\sqrt{2}"),
    (r"\sqrt{2}(1+\sqrt{2})", r"(1+\sqrt{2})\sqrt{2}"),  # a factored gold takes a factored answer
    (r"1+\frac{\sqrt{2}}{2}", r"\frac{2+\sqrt{2}}{2}"), (r"\frac{1}{3}+\frac{\sqrt{2}}{2}", r"\frac{2+3\sqrt{2}}{6}"),
    (r"\frac{\sqrt{2}+\sqrt{6}}{2}", r"\frac{1+\sqrt{3}}{\sqrt{2}}"), (r"\frac{1}{a}+\frac{1}{b}", r"\frac{a+b}{ab}"),
    (r"2^{2/3}", r"\sqrt[3]{4}"), (r"\sqrt[3]{4}", r"2^{2/3}"),
    ("x^2+2x", "(x+1)^2-1"), ("2x^2+4x+5", "2(x+1)^2+3"), ("x^2-1", "(x-1)(x+1)"), ("x^2+x", "x(x+1)"),
    ("a^2-2ab+b^2", "(a-b)^2"), ("(a+b)(a-b)", "a^2-b^2"),
    (r"|x-1|", r"|1-x|"), (r"\sin(x-1)", r"-\sin(1-x)"), (r"\cos x", r"\cos(-x)"),
    (r"\log_2 3", r"\frac{\ln 3}{\ln 2}"), (r"3\ln 2", r"\ln 8"), (r"1+\ln 2", r"\ln(2e)"),
]


@pytest.mark.parametrize(("gold", "pred", "kind"), FOLLOW_UP_NOT_SIMPLIFIED)
def test_follow_up_forms_earn_nothing(gold, pred, kind):
    for wrapped in (pred, rf"\left({pred}\right)", f"y = {pred}"):
        v = verify(gold, rf"\boxed{{{wrapped}}}")
        assert not v.passed and v.reason == "not_simplified", (gold, wrapped, v)
        assert kind in v.details["undone"], (gold, wrapped, v.details)
    assert verify(pred, rf"\boxed{{{pred}}}").passed, pred


@pytest.mark.parametrize(("gold", "pred"), FOLLOW_UP_SIMPLIFIED)
def test_follow_up_legitimate_forms_still_pass(gold, pred):
    for wrapped in (pred, rf"\left({pred}\right)", f"y = {pred}"):
        v = verify(gold, rf"\boxed{{{wrapped}}}")
        assert v.passed, (gold, wrapped, v)


def test_a_bar_over_digits_is_not_dropped():
    """An accent names a thing (``\\overline{AB}``); over digits it was stripped, so
    ``\\overline{6}`` was 6 and ``0.\\overline{6}`` was 0.6. A repeating decimal now has its
    exact value, and leaves the fraction's conversion undone."""
    assert verify("6", r"\boxed{\overline{6}}").reason == "not_equal"
    assert verify("6", r"\boxed{\bar{6}}").reason == "not_equal"
    assert verify("0.6", r"\boxed{0.\overline{6}}").reason == "not_equal"  # 2/3, never 0.6
    assert verify(r"\frac{2}{3}", r"\boxed{0.\overline{6}}").reason == "not_simplified"
    assert verify(r"\frac{1}{3}", r"\boxed{.\overline{3}}").reason == "not_simplified"
    assert verify(r"0.\overline{6}", r"\boxed{0.6\overline{6}}").passed  # the gold's own form
    assert verify("AB", r"\boxed{\overline{AB}}").passed
    assert verify(r"\overline{AB}", r"\boxed{AB}").passed


def test_every_math500_gold_passes_in_another_spelling(math500):
    """Each gold written with \\dfrac and spaces removed or added is still simplified enough."""
    tasks = [math500.pack.task_at("test", i) for i in range(math500.pack.size("test"))]
    failed = []
    for task in tasks:
        gold = str(task["answer"])
        respelled = gold.replace(r"\frac", r"\dfrac").replace(" ", "")
        if respelled != gold:
            _, info = math500.score(task, rf"\boxed{{{respelled}}}")
            if not info["passed"]:
                failed.append((task.id, gold, info["reason"]))
    assert not failed, failed


# -- boxes: one malformed box anywhere, and no answer is read around it ------------------------

MALFORMED_BOXES = [
    lambda s, w: rf"\boxed{{{w} or \boxed{{{s}}}",  # an unclosed box around another
    lambda s, w: rf"x \boxed{{{s}}} or maybe \boxed{{{w}",  # an unclosed box after one
    lambda s, w: rf"\boxed{{2 + \boxed{{{s}}}",  # unclosed and nested
    lambda s, w: rf"\boxed{{{s}}} and then \fbox{{{w}",
    lambda s, w: rf"\boxed{{{w}\boxed{{{s}}}}}",
    lambda s, w: rf"\boxed{{{w}}} hmm \boxed{{ no, \boxed{{{s}}}",
    lambda s, w: rf"\boxed{{\boxed{{{s}}}}}. The answer is {s}.",  # a marker does not read around it
]
WELL_FORMED_BOXES = [
    lambda s, w: rf"\boxed{{{s}}}",
    lambda s, w: rf"Let {{x be the sum. Then \boxed{{{s}}}",  # a stray brace that is not a box
    lambda s, w: rf"The set \{{1, 2\}} has size 2, and \boxed{{{s}}}",
    lambda s, w: rf"$\boxed{{{s}}}$.",
    lambda s, w: rf"\boxed{{{s}}} (check: \boxed{{{s}}})",
]


@pytest.mark.parametrize("build", MALFORMED_BOXES)
def test_an_unclosed_or_nested_box_anywhere_is_malformed(arith1, build):
    env, tasks = arith1
    for task in tasks:
        _, _, s = _operands(task)
        completion = build(s, str(int(s) + 1))
        _, info = env.score(task, completion)
        assert info["reason"] == "malformed_box" and info["rewards"] == {"correct": 0.0,
                                                                         "format": 0.0}, (
            completion, info)


@pytest.mark.parametrize("build", WELL_FORMED_BOXES)
def test_well_formed_boxes_still_pass(arith1, build):
    env, tasks = arith1
    for task in tasks:
        _, _, s = _operands(task)
        completion = build(s, str(int(s) + 1))
        _, info = env.score(task, completion)
        assert info["passed"], (completion, info["reason"])


def test_the_box_finder_reports_malformed_boxes():
    from tasks.boxes import find_boxes, malformed, unclosed

    assert unclosed(r"\boxed{8 or \boxed{7}") == [0]
    assert unclosed(r"x \boxed{7} or maybe \boxed{8") == [21]
    assert malformed(r"\boxed{2 + \boxed{7}}") and malformed(r"\boxed{2 + \boxed{7}")
    assert not malformed(r"\boxed{7} and \boxed{\{1, 2\}}")
    assert not malformed(r"Let {x be \boxed{7}")
    assert [b.content for b in find_boxes(r"\boxed{8 or \boxed{7}")] == ["7"]  # the finder ...
    assert extract(r"\boxed{8 or \boxed{7}").malformed_box  # ... and the checker refuses it


# -- text inside a box ---------------------------------------------------------------------------


def test_text_in_a_box_is_a_label_a_scale_or_a_hedge():
    env = _env("gsm8k")
    task = next(t for i in range(400) if (t := env.pack.task_at("test", i))["answer"].endswith("000"))
    n = int(task["answer"])
    thousands = n // 1000
    scaled = [rf"\boxed{{{thousands}\text{{ thousand}}}}", rf"\boxed{{{thousands} \text{{thousand}}}}",
              rf"\boxed{{{thousands / 1000}\text{{ million}}}}"]
    for completion in scaled:
        _, info = env.score(task, completion)
        assert info["passed"], (completion, info["reason"])  # 15 thousand is 15000 ...
    # ... never 15
    assert verify(str(thousands), rf"\boxed{{{thousands}\text{{ thousand}}}}").reason == "not_equal"
    labels = [rf"\boxed{{{n}\text{{ apples}}}}", rf"\boxed{{{n}\text{{cm}}}}",
              rf"\boxed{{{n} \text{{ dollars}}}}", rf"\boxed{{{n}\text{{ square units}}}}"]
    for completion in labels:
        _, info = env.score(task, completion)
        assert info["passed"], (completion, info["reason"])
    hedges = [rf"\boxed{{{n}\text{{ maybe {n + 1}}}}}", rf"\boxed{{{n}\text{{ maybe sixteen}}}}",
              rf"\boxed{{{n}\text{{ sixteen}}}}", rf"\boxed{{{n}\text{{ at most}}}}",
              rf"\boxed{{{n}\text{{ (approximately)}}}}", rf"\boxed{{\text{{about }}{n}}}",
              rf"\boxed{{{n}\text{{ or so}}}}"]
    for completion in hedges:
        _, info = env.score(task, completion)
        assert not info["passed"] and info["reason"] == "multiple_answers", (completion, info)


def test_an_approximation_sign_is_a_hedge_on_every_pack():
    """``\\approx 27`` says "about 27": it commits to no value, as ``27\\text{ about}`` does not.
    Found by attacking the hedge rule (it read words only): ``\\boxed{\\approx 27}`` and
    ``\\boxed{x \\approx 27}`` were credited on math500."""
    env = _env("math500")
    task = next(t for i in range(500) if (t := env.pack.task_at("test", i))["answer"].isdigit())
    g = task["answer"]
    for sign in (r"\approx", r"\approx ", r"\simeq ", r"\sim ", r"\thickapprox ", "≈", "≃",
                 r"x \approx ", r"\text{about } \approx "):
        _, info = env.score(task, rf"Thus \boxed{{{sign}{g}}}")
        assert not info["passed"] and info["reason"] == "multiple_answers", (sign, info)
    _, info = env.score(task, rf"Thus \boxed{{{g}}}, since $x \approx {g}$ would not do.")
    assert info["passed"], info["reason"]  # outside the box, prose is prose
    gsm = _env("gsm8k")
    task = gsm.pack.task_at("test", 0)
    _, info = gsm.score(task, rf"So \boxed{{\approx {task['answer']}}}")
    assert not info["passed"], info["reason"]


# -- one tree for the value and the form (issue 31) --------------------------------------------
# The value came from one parser (parse_simple) and the simplest-form tally from another
# (latex2sympy, evaluation off); wherever they disagreed, undone work was paid. Now each leaf is
# parsed once (math_parse.leaf_tree) and both are read from that tree. Every completion below was
# credited before (found by the issue and by attacking the fix with other notations).

# task id -> completions with the gold's value that leave work undone, in another notation
MATH500_ONE_TREE = {
    "math500/31": [r"\boxed{242**(1/2)}", r"\boxed{2**0.5*11}"],  # Simplify sqrt(242)
    "math500/211": [r"\boxed{5**5//5**4-5**3+5**2*5**1}"],  # the question's own expression
    "math500/229": [  # 90: bracketed factors side by side, every kind of bracket and spacing
        r"\boxed{(10)(9)}", r"\boxed{[10][9]}", r"\boxed{\left(10\right)\left(9\right)}",
        r"\boxed{\left[10\right]\left[9\right]}", r"\boxed{\big(10\big)\big(9\big)}",
        r"\boxed{\langle 10\rangle\langle 9\rangle}", r"\boxed{(10)[9]}", r"\boxed{[10](9)}",
        r"\boxed{(((10)))(9)}", r"\boxed{((10))((9))}", r"\boxed{( 10 ) ( 9 )}",
        r"\boxed{(10) \, (9)}", r"\boxed{(10)~(9)}", r"\boxed{(10)\;(9)}", r"\boxed{10(9)}",
        r"\boxed{(10)9}", r"\boxed{{10}{9}}", r"\boxed{(9)(10)(1)}", r"\boxed{90(1)}",
    ],
    "math500/32": [r"\boxed{(6)(5)(4)(3)(2)(1)}", r"\boxed{(6)(5)(4)(3)(2)}"],  # 720
    "math500/16": [  # -50: a factor -1 written out
        r"\boxed{(-1)\cdot 50}", r"\boxed{50\cdot(-1)}", r"\boxed{50(-1)}", r"\boxed{(-1)(50)}",
        r"\boxed{-1\cdot 50}", r"\boxed{-1\times 50}", r"\boxed{(−1)50}", r"\boxed{-(10)(5)}",
    ],
    "math500/1": [  # p - q compared as a word: these were "pq"
        r"\boxed{pq}", r"\boxed{p--q}", r"\boxed{p - - q}", r"\boxed{p−−q}", r"\boxed{p q}",
        r"\boxed{p + -q}", r"\boxed{p + (-q)}",
    ],
}
MATH500_ONE_TREE_HONEST = {
    "math500/31": [r"\boxed{11\sqrt{2}}", r"\boxed{11√2}", r"\boxed{11·√2}", r"\boxed{11 \sqrt 2}"],
    "math500/211": [r"\boxed{5}"],
    "math500/229": [r"\boxed{90}", r"\boxed{(90)}", r"\boxed{[90]}"],
    "math500/16": [r"\boxed{-50}", r"\boxed{−50}", r"\boxed{-(50)}"],
    "math500/1": [r"\boxed{p - q}", r"\boxed{-q+p}", r"\boxed{−q + p}", r"\boxed{-(q-p)}"],
}


@pytest.mark.parametrize("task_id", sorted(MATH500_ONE_TREE))
def test_value_and_form_come_from_one_tree(math500, task_id):
    for completion in MATH500_ONE_TREE[task_id]:
        _, info = math500.score(task_id, completion)
        assert not info["passed"] and info["rewards"]["correct"] == 0.0, (completion, info)
    for completion in MATH500_ONE_TREE_HONEST.get(task_id, []):
        _, info = math500.score(task_id, completion)
        assert info["passed"], (completion, info["reason"], info.get("undone"))


# (gold, answer): credited before, refused now (by verify, as an expression pack grades)
ONE_TREE_HACKS = [
    ("15x-80", r"(80-15x)(-1)"), ("15x-80", r"(-1)(80-15x)"), ("15x-80", r"(80-15x)\cdot -1"),
    ("15x-80", r"(80-15x)×(−1)"), ("-x", "(-1)x"), ("-x", "x(-1)"), ("-15", "(-5)(3)"),
    ("19", "{10}{9}"), ("19", r"\{10\}\{9\}"), ("50", "-[-50]"), ("50", r"50 ÷ 1"), ("1000000", r"10^{6}\cdot 1"),
    ("3125", "5**5"), ("2", "5//2"), ("1000000", "10**6"), ("a - b - c", "abc"),
    ("720", "6·5·4·3·2·1"), ("5", r"10÷2"),
]


@pytest.mark.parametrize(("gold", "pred"), ONE_TREE_HACKS)
def test_one_tree_hacks_earn_nothing(gold, pred):
    for wrapped in (pred, rf"\left({pred}\right)", f"y = {pred}"):
        v = verify(gold, rf"\boxed{{{wrapped}}}")
        assert not v.passed, (gold, wrapped, v)


def test_a_syntax_the_form_scorer_cannot_read_has_no_value():
    """Python's operators are not LaTeX: the one parser refuses them, so no value is credited
    with no work counted (parse_simple read ``**`` and ``//``; latex2sympy cannot)."""
    for gold, pred in (("3125", "5**5"), (r"11\sqrt{2}", "242**(1/2)"), ("2", "5//2"),
                       ("1000000", "10**6")):
        assert verify(gold, rf"\boxed{{{pred}}}").reason == "unparseable", pred


def test_the_value_is_read_from_the_tree_the_form_is_scored_on():
    from envs.verify.math_parse import leaf_tree, to_sympy, value_of
    from envs.verify.math_simplest import leaf_work

    for leaf in ("(10)(9)", "[10][9]", "{10}{9}", "10 9", "(-5)(3)", "2(3)", r"\frac{6}{8}",
                 r"(-1)\cdot 50", r"2\frac{1}{2}", "1 000 000", r"\sqrt[3]{8}(2)", r"\tan^2(y)"):
        tree = leaf_tree(leaf)
        assert leaf_tree(leaf) is tree  # one parse, shared by the value and the tally
        assert to_sympy(leaf) == value_of(tree), leaf
        leaf_work(leaf)  # scores the same tree without error
    assert to_sympy("(10)(9)") == 90 and to_sympy("{10}{9}") == 90 and to_sympy("10 9") == 90
    assert to_sympy("(-5)(3)") == -15 and to_sympy("2(3)") == 6  # never a mixed number
    assert to_sympy(r"2\frac{1}{2}") * 2 == 5 and to_sympy("1 000 000") == 10**6


# Words that change the value are not labels: "6\text{ squared}" was credited as 6.
OPERATION_WORD_ANSWERS = [
    r"6\text{ squared}", r"6\text{ cubed}", r"6\text{ factorial}", r"6\text{ doubled}",
    r"6\text{ tenths}", r"6\text{ negative}", r"6\text{ inverse}", r"6\textbf{ squared}",
    r"6 \text{ squared } ", r"6\textit{ cubed}", r"6\,\text{squared}", r"6\mathrm{ squared}",
    r"6\text{ (doubled)}", "6 squared",
]


@pytest.mark.parametrize("answer", OPERATION_WORD_ANSWERS)
def test_a_word_that_changes_the_value_is_no_label(answer):
    v = verify("6", rf"\boxed{{{answer}}}")
    assert not v.passed and v.reason == "unparseable", (answer, v)
    assert not verify("0.3", r"\boxed{0.3\text{ repeating}}").passed
    assert verify("6", r"\boxed{6\text{ apples}}").passed  # a noun is still a label


def test_an_answers_percent_sign_has_one_reading():
    """On a number pack, ``18\\%`` and ``1800\\%`` were both credited for 18: the answer's sign
    was read as a unit and as a factor 1/100. It is the unit of the number before it."""
    env = _env("gsm8k")
    task = next(t for i in range(300) if 0 < int((t := env.pack.task_at("test", i))["answer"]) < 1000)
    n = int(task["answer"])
    for completion in (rf"\boxed{{{n}\%}}", rf"\boxed{{{n} \text{{ percent}}}}", f"The answer is {n}%."):
        assert env.score(task, completion)[1]["passed"], completion
    for completion in (rf"\boxed{{{100 * n}\%}}", rf"\boxed{{{100 * n} \text{{ percent}}}}",
                       rf"\boxed{{{n / 100}}}"):
        _, info = env.score(task, completion)
        assert not info["passed"], (completion, info)
    # a gold written as a percent is answered by the number of percent or the fraction
    assert verify(r"18\%", r"\boxed{0.18}").passed and verify(r"18\%", r"\boxed{18}").passed
    assert not verify(r"18\%", r"\boxed{1800\%}").passed


def test_box_rules_hold_anywhere_in_a_long_completion(arith1):
    """The box rules stopped at the last 40,000 characters: a wrong, unclosed or nested box
    before them was never seen. They hold on the whole completion, in linear time."""
    import time

    env, tasks = arith1
    _, _, s = _operands(tasks[0])
    w = str(int(s) + 1)
    pad = "Let me check that once more. " * 2000  # 58,000 characters
    hacks = {rf"\boxed{{{w}}} " + pad + rf"\boxed{{{s}}}": "multiple_answers",
             rf"\boxed{{{w} " + pad + rf"\boxed{{{s}}}": "malformed_box",
             rf"\boxed{{\boxed{{{w}}}}} " + pad + rf"\boxed{{{s}}}": "malformed_box",
             "".join(rf"\boxed{{{i}}} " for i in range(40)) + pad + rf"\boxed{{{s}}}":
                 "multiple_answers",
             rf"\boxed{{{w} " + "x " * 500_000 + rf"\boxed{{{s}}}": "malformed_box"}
    for completion, reason in hacks.items():
        start = time.perf_counter()
        _, info = env.score(tasks[0], completion)
        assert not info["passed"] and info["reason"] == reason, (completion[:60], info["reason"])
        assert time.perf_counter() - start < 5.0
    for completion in (rf"\boxed{{{s}}} " + pad + rf"\boxed{{{s}}}", pad * 10 + rf"\boxed{{{s}}}"):
        assert env.score(tasks[0], completion)[1]["passed"]
    # past MAX_COMPLETION_CHARS a completion is not graded at all
    v = verify(s, "x " * 1_500_000 + rf"\boxed{{{s}}}")
    assert not v.passed and v.reason == "unparseable"


# Honest forms that were refused: unicode math as its LaTeX twin, a scale word before a unit,
# scientific notation (a form from the exponent 4 on; below it the power is arithmetic).
UNICODE_AND_SCALE_HONEST = [
    (r"2\sqrt{5}", "2√5"), (r"\frac{\sqrt{3}}{3}", "√3/3"), (r"(5, \infty)", "(5, ∞)"),
    (r"(-\infty, 2) \cup (3, \infty)", "(-∞, 2) ∪ (3, ∞)"), (r"\frac{1}{2}", "½"),
    (r"\frac{9}{2}", "4½"), (r"2\pi\sqrt{3}", "2√3·π"), (r"x \leq 3", "x ≤ 3"),
    ("x^2+1", "x²+1"), (r"\sqrt[3]{2}", "∛2"), (r"1 \pm \sqrt{2}", "1 ± √2"),
    (r"\frac{\sqrt{2}}{2}", "1/√2"), (r"(-\infty, -1] \cup [1, \infty)", "(−∞, −1] ∪ [1, ∞)"),
    (r"\frac{3\pi}{4}", "3π/4"), ("1000000", "10⁶"), ("1500000", "1.5 × 10⁶"),
    ("8000", r"8\text{ thousand dollars}"), ("8000", "8 thousand dollars"),
    ("2500000", r"2.5\text{ million dollars}"), ("1000000", "10^6"), ("1000000", r"1\times 10^{6}"),
    ("25000", r"2.5\times 10^{4}"), ("0.0001", "10^{-4}"), ("42", "４２"),
]


@pytest.mark.parametrize(("gold", "pred"), UNICODE_AND_SCALE_HONEST)
def test_unicode_scale_and_scientific_forms_are_credited(gold, pred):
    v = verify(gold, rf"\boxed{{{pred}}}")
    assert v.passed, (gold, pred, v)


def test_scientific_notation_below_the_threshold_is_arithmetic():
    for gold, pred in (("100", "10^2"), ("1000", "10^3"), ("1500", r"1.5\times 10^{3}"),
                       ("1000000", r"10\times 10^{5}"), ("1000000", r"0.1\times 10^{7}"),
                       ("1000000", r"10^{3}\times 10^{3}"), ("1000000", "1000^2")):
        assert verify(gold, rf"\boxed{{{pred}}}").reason == "not_simplified", pred
    # on a number pack a number in scientific notation is a literal, like its digits
    assert is_number_literal("10^6") and is_number_literal(r"2.5 \times 10^{4}")
    assert not is_number_literal("10^3") and not is_number_literal(r"10 \times 10^{5}")
    assert not is_number_literal("1e6") and not is_number_literal(r"0.5 \times 10^{6}")


def test_an_answer_whose_form_cannot_be_scored_earns_nothing(monkeypatch):
    """The tally's walk used to stop quietly on a sympy object it did not expect, keeping what it
    had found so far: work after that point went uncounted. Now such an answer is refused (no
    gold or honest form of the corpora stops the walk; tests/test_math_honest_forms.py)."""
    from envs.verify import math_equiv, math_simplest

    real = math_simplest._visit

    def brittle(node, work):
        if str(node) == "x*7":  # stands for any node the rules do not expect
            raise TypeError("unexpected node")
        return real(node, work)

    monkeypatch.setattr(math_simplest, "_visit", brittle)
    math_simplest.leaf_work.cache_clear()
    try:
        passed, reason, details = math_equiv.check(("7x",), ((r"x\cdot 7",),))
        assert not passed and reason == "unparseable", (reason, details)
        assert math_equiv.check(("7x",), ((r"7\cdot x",),))[0]  # another tree: scored, credited
    finally:
        math_simplest.leaf_work.cache_clear()


def test_factorials_keep_their_written_value():
    """The value is the tree evaluated, except what latex2sympy keeps as written: ``2004!`` is
    never expanded into its 5,736 digits (an honest respelling of the gold was unparseable)."""
    assert verify(r"\frac{1}{2004!}", r"\boxed{\frac{1}{2004 !}}").passed
    assert not verify(r"\frac{1}{2004!}", r"\boxed{\frac{1}{2006!}}").passed
    assert verify("5!", r"\boxed{120}").passed and verify(r"\binom{5}{2}", r"\boxed{10}").passed
    assert verify("120", r"\boxed{5!}").reason == "not_simplified"


def test_more_hedges_found_by_attacking_the_label_rule():
    """``5\\text{ ca.}`` (circa) and a dangling ``5\\text{ or }`` were credited as 5."""
    for answer in (r"5\text{ ca.}", r"5 \text{ or }", r"\text{or } 5", r"5\text{ ca}"):
        v = verify("5", rf"\boxed{{{answer}}}")
        assert not v.passed and v.reason == "multiple_answers", (answer, v)
    assert verify("5", r"\boxed{5 \text{ in total}}").passed  # a label, not a hedge


def test_the_prompt_echoed_is_not_paid_by_its_example_box():
    # arith's instruction shows "\boxed{42}" as an example: the prompt copied back was paid on
    # every task whose answer is 42 (found by the report card's echo baseline).
    for env_id in ("grpo/MathExact-v0", "grpo/MathPython-v0"):
        env = gym.make(env_id, pack="arith", level=4, split="test").unwrapped
        task = env.pack.get("arith/test-L4-171")
        assert str(task["answer"]) == "42"
        prompt = env.prompt(task)
        for hack in (prompt, prompt.rstrip(".") + "\n", "Sure.\n" + prompt + " OK"):
            reward, info = env.score(task, hack)
            assert not info["passed"] and reward == 0.0, (env_id, hack)
        # An honest answer stays paid, written as the example shows, or after the copied line.
        line = prompt.splitlines()[-1]
        for honest in ("3 × 14 = 42. The answer is \\boxed{42}.",
                       line + "\n3 × 14 = 42, so \\boxed{42}"):
            assert env.score(task, honest)[1]["passed"], (env_id, honest)


# -- one simplest-form rule for every notation (issue 43) -----------------------------------------
# Every hack below was credited before the fix: found by the issue or by attacking the fix with
# other spellings, containers, words and hedges (the issue's own cases stay hidden).

def test_an_infix_fraction_obeys_the_simplest_form_rule(math500):
    """``{486 \\over 1250}`` for the gold ``\\frac{243}{625}`` earned 1.1 on math500/33: latex2sympy
    read the infix fraction as one evaluated number, hiding the common factor."""
    for completion in (r"\boxed{{486 \over 1250}}", r"\boxed{486 \over 1250}",
                       r"\boxed{{486}\over{1250}}", r"\boxed{\left({486 \over 1250}\right)}"):
        _, info = math500.score("math500/33", completion)
        assert not info["passed"] and info["rewards"]["correct"] == 0.0, (completion, info)
        assert info["reason"] == "not_simplified", (completion, info["reason"])
    for completion in (r"\boxed{{243 \over 625}}", r"\boxed{243 \over 625}", r"\boxed{\frac{243}{625}}"):
        assert math500.score("math500/33", completion)[1]["passed"], completion


# (gold, answer): the same unreduced fraction in every spelling, and what hides one
FRACTION_SPELLINGS_UNREDUCED = [
    (r"\frac{5}{9}", r"{100 \over 180}"), (r"\frac{5}{9}", r"\frac{100}{180}"),
    (r"\frac{5}{9}", r"\dfrac{100}{180}"), (r"\frac{5}{9}", r"\tfrac{100}{180}"),
    (r"\frac{5}{9}", r"\cfrac{100}{180}"), (r"\frac{5}{9}", r"\nicefrac{100}{180}"),
    (r"\frac{5}{9}", "100/180"), (r"\frac{5}{9}", "100 ÷ 180"), (r"\frac{5}{9}", r"100 \div 180"),
    (r"\frac{1}{2}", r"{{{2 \over 4}}}"), (r"\frac{1}{2}", r"{1 \over {4 \over 2}}"),
    (r"\frac{1}{2}", r"2\over4"), (r"\frac{1}{2}", r"\displaystyle{2 \over 4}"),
    (r"\frac{7}{2}", r"3 {2 \over 4}"), (r"\frac{x}{2}", r"{2x \over 4}"),
    (r"\frac{\sqrt2}{2}", r"{2\sqrt2 \over 4}"), ("1:2", "5:10"), (r"\frac{1}{2}", r"\frac{1}{2} \over 1"),
]


@pytest.mark.parametrize(("gold", "pred"), FRACTION_SPELLINGS_UNREDUCED)
def test_every_fraction_spelling_obeys_the_simplest_form_rule(gold, pred):
    v = verify(gold, rf"\boxed{{{pred}}}")
    assert not v.passed, (gold, pred, v)


def test_a_question_that_asks_to_simplify_is_not_answered_by_its_fraction():
    question = r"Simplify $\frac{100}{180}$."
    for pred in (r"{100 \over 180}", r"100 \over 180", r"\frac{100}{180}"):
        assert not verify(r"\frac{5}{9}", rf"\boxed{{{pred}}}", question=question).passed, pred
    for pred in (r"{5 \over 9}", r"\frac59", "5/9", r"\nicefrac{5}{9}"):
        assert verify(r"\frac{5}{9}", rf"\boxed{{{pred}}}", question=question).passed, pred
    assert verify(r"x^{\frac{1}{2}}", r"\boxed{x^{1 \over 2}}").passed  # an argument keeps its group


# Brackets carry meaning: sets, tuples, intervals and matrices compare only with their own kind,
# and an expression of containers is work left undone.
CONTAINER_HACKS = [
    ("[2, 5]", r"\{2, 5\}"), (r"(2, \infty)", r"2, \infty"), (r"[2, \infty)", r"2, \infty"),
    ("[0, 1)", "0, 1"), ("[0, 1)", r"\{0, 1\}"), ("(1, 2)", r"\{2, 1\}"), ("(1, 2)", r"\{1, 2\}"),
    ("(1, 2)", r"\{(1, 2)\}"), (r"\{1, 2\}", "(1, 2)"), (r"\{1, 2\}", "[1, 2]"),
    ("[1, 2]", "1, 2"), (r"\{1, 2\}", r"\{1, 2, 2\}"), (r"\{1, 2\}", r"\left\{1, 1, 2\right\}"),
    (r"\{1, 2\}", r"\{1, 2, \frac{4}{2}\}"), (r"\{1, 2\}", r"\{1, 2\} \cup \{2\}"),
    (r"\{1, 2\}", r"\{1\} \cup \{2\}"), (r"\{1, 2\}", r"\{1,2\}\cap\{1,2,3\}"),
    (r"\{1, 2\}", r"\{1,2\} \setminus \{3\}"), ("[0, 1)", r"[0,1) \cup [0,1)"),
    ("[0, 1)", r"[0,\frac12) \cup [\frac12,1)"), (r"\{1, 2\}", r"\{1, 2\} \cup \emptyset"),
    (r"(-\infty, 2) \cup (3, \infty)", r"\{-\infty, 2\} \cup \{3, \infty\}"),
    (r"\begin{pmatrix}1\\2\end{pmatrix}",
     r"\begin{pmatrix}1\\2\end{pmatrix}+\begin{pmatrix}0\\0\end{pmatrix}"),
    (r"\begin{pmatrix}1\\2\end{pmatrix}",
     r"2\begin{pmatrix}1\\2\end{pmatrix}-\begin{pmatrix}1\\2\end{pmatrix}"),
    (r"\begin{pmatrix}1\\2\end{pmatrix}",
     r"\begin{pmatrix}1&0\\0&1\end{pmatrix}\begin{pmatrix}1\\2\end{pmatrix}"),
    (r"\begin{pmatrix}2\\4\end{pmatrix}", r"2\begin{pmatrix}1\\2\end{pmatrix}"),
    (r"\begin{pmatrix}1&2\end{pmatrix}", r"\begin{pmatrix}1\\2\end{pmatrix}^T"),
    ("10", r"\det\begin{pmatrix}10\end{pmatrix}"), ("10", r"\begin{vmatrix}10\end{vmatrix}"),
    ("-50", "[-1][50]"), ("15x-80", "[15][x]-80"), ("80-15x", "80-[15][x]"), ("(1, 2)", "1 < x < 2"),
]


@pytest.mark.parametrize(("gold", "pred"), CONTAINER_HACKS)
def test_containers_compare_only_with_their_own_kind(gold, pred):
    v = verify(gold, rf"\boxed{{{pred}}}")
    assert not v.passed, (gold, pred, v)


CONTAINER_HONEST = [
    (r"\{1, 2\}", "2, 1"), ("1, 2", r"\{2, 1\}"), (r"\{-1, 1\}", r"\pm 1"), (r"\{-1, 1\}", r"\{\pm 1\}"),
    (r"\{1, 2\}", r"x \in \{1, 2\}"), ("(1, 2)", "1, 2"), ("(1, 2)", r"\langle 1, 2\rangle"),
    ("(1, 2)", r"\begin{pmatrix}1\\2\end{pmatrix}"), (r"(-\infty, 2) \cup (3, \infty)",
                                                      r"(-\infty, 2) \cup (3, \infty)"),
    (r"\begin{pmatrix}\frac15&0\\0&\frac15\end{pmatrix}", r"\frac{1}{5}\begin{pmatrix}1&0\\0&1\end{pmatrix}"),
    ("[0, 1)", r"0 \le x < 1"), ("[0, 1)", r"0 \leq x < 1"), (r"(-\infty, 3]", r"x \le 3"),
    (r"[2, \infty)", r"x \geq 2"), ("10", "(10)"), ("90", "[90]"),
]


@pytest.mark.parametrize(("gold", "pred"), CONTAINER_HONEST)
def test_honest_containers_are_credited(gold, pred):
    v = verify(gold, rf"\boxed{{{pred}}}")
    assert v.passed, (gold, pred, v)


WORD_HACKS = [
    ("18", r"18\text{ lakh}"), ("18", r"18\text{ lakhs}"), ("18", r"18\text{ crore}"),
    ("18", r"18\text{ score}"), ("18", r"18\text{ gross}"), ("18", r"18\text{ grand}"),
    ("18", r"18\text{ mil}"), ("18", r"18\text{ pairs}"), ("18", r"18\text{ couples}"),
    (r"18\text{ cm}", r"18\text{ mm}"), (r"18\text{ cm}^2", r"18\text{ cm}^3"),
    (r"18\text{ m}", r"18\text{ km}"), (r"18\text{ inches}", r"18\text{ feet}"),
    (r"18\text{ square feet}", r"18\text{ ft}"), (r"18\text{ cents}", r"18\text{ dollars}"),
    (r"\text{Evelyn}", r"\text{Eve lyn}"), (r"\text{Evelyn}", r"\text{E velyn}"),
    (r"\text{Evelyn}", r"\text{Eve-lyn}"), (r"\text{Evelyn}", r"\text{Eve\,lyn}"),
    (r"\text{New York}", r"\text{NewYork}"), ("18", "19 = x = 18"),
]


@pytest.mark.parametrize(("gold", "pred"), WORD_HACKS)
def test_words_that_change_the_value_earn_nothing(gold, pred):
    v = verify(gold, rf"\boxed{{{pred}}}")
    assert not v.passed, (gold, pred, v)


def test_words_and_units_that_keep_the_value_are_credited():
    for gold, pred in (("1800000", r"18\text{ lakh}"), (r"18\text{ cm}", r"18\text{ cm}"),
                       (r"18\text{ cm}", "18"), (r"18\text{ inches}", r"18\text{ in}"),
                       (r"18\text{ square feet}", r"18\text{ ft}^2"), (r"\$18", r"18\text{ dollars}"),
                       ("18", r"18\text{ mm}"), (r"\text{Evelyn}", "evelyn"),
                       (r"\text{New York}", r"\text{new york}"), ("18", r"18\text{ apples}")):
        assert verify(gold, rf"\boxed{{{pred}}}").passed, (gold, pred)
    # a group word is a label where the question counts in it
    assert verify("18", r"\boxed{18\text{ pairs}}", question="How many pairs of socks?").passed
    # number words are not read (docs/math-checker.md)
    assert not verify("3", r"\boxed{\text{three}}").passed


def test_honest_forms_the_issue_found_refused_are_credited():
    for gold, pred in (("18", r"18\,"), ("10", r"10\,"), ("10", r"\,10"), ("10", r"10\;"),
                       ("10", r"10\!"), ("10", r"10\quad"), ("18", r"18\, "), ("18", r"\;18\;"),
                       ("18", r"18\,\text{cm}"), ("(1, 2)", r"(1,\,2)"), ("18", "x = 18"),
                       ("18", "18 = x"), (r"\frac{1}{2}", r"a = \frac{1}{2}"),
                       ("18", r"\color{red}{18}"), ("18", r"\underline{18}")):
        v = verify(gold, rf"\boxed{{{pred}}}")
        assert v.passed, (gold, pred, v)
    # on a number pack, a literal named as its variable's value
    assert verify("18", r"\boxed{x = 18}", answer="number").passed
    assert not verify("18", r"\boxed{x = 9 + 9}", answer="number").passed
    assert not verify("18", r"\boxed{x = 19}", answer="number").passed


def test_an_alternative_after_the_final_box_is_a_hedge():
    """``\\boxed{18} or 19`` was paid 18: the box was read alone, the hedge after it never seen."""
    for completion in (r"\boxed{18}\text{ or }19", r"\boxed{18} or 19.", r"\boxed{18} or maybe $19$",
                       r"\boxed{18}, or possibly 19", r"$\boxed{18}$ or $19$"):
        v = verify("18", completion)
        assert not v.passed and v.reason == "multiple_answers", (completion, v)
    for completion in (r"\boxed{18}.", r"The answer is \boxed{18} apples.", "\\boxed{18}\n\nOr, to "
                       "check: 9 + 9 = 18.", r"\boxed{-1} or \boxed{2}"):
        assert verify("18" if "18" in completion else "-1, 2", completion).passed, completion


# Attacks on the reward search's four paid gsm8k/math cases (``test_reward_hacks_search``): the
# classes, not the cases. LaTeX boxes one token, one character: ``\boxed 6`` is a box of 6, but
# ``\boxed10`` and ``\boxed 10`` are a box of 1 followed by 0 (and ``\boxed -6`` a box of -), so a
# brace-less box before a longer run is a bad box command (malformed), as is a look-alike.
BOX_COMMAND_HACKS = [
    ("6", r"\boxedby{6}"), ("6", r"\fboxed{6}"), ("6", r"\boxed{5}\boxedby{6}"),
    ("10", r"\boxed10"), ("10", r"\boxed 10"), ("-6", r"\boxed -6"), ("6", r"\boxed{6}\boxed10"),
    ("6", r"\boxed\text{6}"),
]
# Two numbers, one offered as an alternative to the other, with or without a box or math.
ALTERNATIVE_HACKS = [
    ("6", "either 5 or 6"), ("6", "There are 5 red or 6 blue"), ("6", "5, or maybe 6"),
    ("6", "6 or six"), ("6", "about 6 or so"), ("6", "5/6 or 6"), ("6", "$5$ or 6"),
    ("6", "5 or $6$"), ("6", r"5 or \boxed{6}"), ("6", r"either 5 or \boxed{6}"),
    ("5", "Answer: 5 or maybe 6"), ("5", "The answer is 5, maybe six."),
    ("6", r"\(5\) or maybe 6"), ("6", "The total is 5 or 6 apples"), ("6", "maybe 5, maybe 6"),
]
# A number read out of a longer literal or out of a group that never closes.
READ_OUT_HACKS = [("1", r"Solve {1e0"), ("10", "We get 10e5 widgets"), ("6", "sum {6"),
                  ("1", r"(Solve\{ {1e0)")]
BOX_AND_ALTERNATIVE_HONEST = [
    ("6", r"\boxed 6"), ("6", r"\boxed6"), ("6", r"The answer is \boxed 6."), ("6", r"$\boxed 6$"),
    ("6", r"\fbox{6}"), ("6", r"\boxed  {6}"), ("6", r"\fboxsep=2pt \fbox{6}"),
    ("6", "So she has 6 left over."), ("6", r"We have 5 or fewer, so \boxed{6}"),
    ("6", r"Step 3 or 4 gives \boxed{6}"), ("6", "I computed 5 + 1 = 6"),
    ("6", "We get 2 red or blue balls, so 6"), ("6", "The answer is 6 apples."),
]


@pytest.mark.parametrize(("gold", "pred"), BOX_COMMAND_HACKS + ALTERNATIVE_HACKS + READ_OUT_HACKS)
def test_bad_box_commands_alternatives_and_read_out_numbers_earn_nothing(gold, pred):
    v = verify(gold, pred)
    assert not v.passed, (pred, v)
    expected = {"malformed_box"} if (gold, pred) in BOX_COMMAND_HACKS else (
        {"multiple_answers"} if (gold, pred) in ALTERNATIVE_HACKS else {"no_answer"})
    assert v.reason in expected, (pred, v)


@pytest.mark.parametrize(("gold", "pred"), BOX_AND_ALTERNATIVE_HONEST)
def test_one_token_boxes_and_numbers_beside_prose_are_credited(gold, pred):
    v = verify(gold, pred)
    assert v.passed, (pred, v)


def test_a_brace_less_box_boxes_one_character():
    from tasks.boxes import bad_commands, find_boxes, last_box, malformed

    assert [b.content for b in find_boxes(r"\boxed 6 and \boxed7.")] == ["6", "7"]
    assert find_boxes(r"\boxed10") == [] and malformed(r"\boxed10")
    assert bad_commands(r"x \boxedby{5} \boxed 10 \fboxsep \fbox{6}") == [2, 14]
    assert last_box(r"\boxed{12} \fboxrule") == "12"
    assert [b.content for b in find_boxes(r"\boxed 10", lenient=True)] == ["10"]  # a trusted gold


# Issue 43, left over: set-builder notation, the real line and a union written with "or" are read
# by the one parse as the sets they denote (``math_parse.set_builder``, ``disjunction``, and
# ``\mathbb{R}``, sympy's Reals), so they compare as sets, under the same rules as intervals.
_INTERVAL, _LINE, _UNION = r"(2, \infty)", r"(-\infty, \infty)", r"(-\infty, 2) \cup (3, \infty)"
SET_NOTATION_HONEST = [
    (_INTERVAL, r"\{x \mid x > 2\}"), (_INTERVAL, r"\{x : x>2\}"), (_INTERVAL, r"\{x\mid 2<x\}"),
    (_INTERVAL, r"\{x \in \mathbb{R} \mid x > 2\}"), (_INTERVAL, r"\left\{x \,|\, x > 2\right\}"),
    (_INTERVAL, r"\lbrace x \vert x > 2 \rbrace"), (r"[2, \infty)", r"\{x \mid x \geq 2\}"),
    ("[0, 1)", r"\{x \mid 0 \le x < 1\}"), (_LINE, r"\mathbb{R}"), (_LINE, r"\mathbb R"), (_LINE, "ℝ"),
    (_LINE, r"\R"), (_LINE, r"\text{all real numbers}"), (_LINE, "All real numbers"),
    (_LINE, r"\text{the set of all real numbers}"), (_LINE, r"x \in \mathbb{R}"), (r"\mathbb{R}", _LINE),
    (_UNION, r"x < 2 \text{ or } x > 3"), (_UNION, r"x<2 \text{ or } x>3"), (_UNION, "x < 2 or x > 3"),
    (_UNION, r"x > 3 \text{ or } x < 2"), (_UNION, r"x \in (-\infty,2)\cup(3,\infty)"),
    (_UNION, r"\{x \mid x < 2 \text{ or } x > 3\}"), (_UNION, r"x<2\ \text{or}\ x>3"),
    (r"(-\infty, 2] \cup [3, \infty)", r"x \le 2 \text{ or } x \ge 3"),
    (r"(-\infty, -7)\cup(-7, 3)\cup(3, \infty)", r"x < -7 \text{ or } -7 < x < 3 \text{ or } x > 3"),
]


@pytest.mark.parametrize(("gold", "pred"), SET_NOTATION_HONEST)
def test_set_builder_real_line_and_or_unions_are_credited(gold, pred):
    v = verify(gold, rf"\boxed{{{pred}}}")
    assert v.passed, (gold, pred, v)


# Found by attacking the set readings above (all were refused already or fixed with them; kept so
# a later change to the parse cannot open them): per class.
SET_NOTATION_HACKS = {
    "bound direction": [(_INTERVAL, r"\{x \mid x < 2\}"), (_UNION, r"x > 2 \text{ or } x < 3"),
                        (_UNION, r"x < 3 \text{ or } x > 2"), (r"[2, \infty)", r"\{x \mid x \le 2\}")],
    "open or closed": [(_INTERVAL, r"\{x \mid x \ge 2\}"), (_UNION, r"x \le 2 \text{ or } x > 3"),
                       (_UNION, r"x < 2 \text{ or } x \ge 3"), ("[0, 1)", r"\{x \mid 0 < x < 1\}"),
                       ("[0, 1)", r"\{x \mid 0 \le x \le 1\}")],
    "and for or": [(_UNION, r"x<2 \text{ and } x>3"), (_UNION, "x < 2, x > 3"), (_UNION, r"x<2 \land x>3"),
                   (_UNION, "x<2; x>3"), (_UNION, r"\{x \mid x < 2 \text{ and } x > 3\}")],
    "set-builder predicate": [
        (_INTERVAL, r"\{x \mid x > 3\}"), (_INTERVAL, r"\{x \mid y > 2\}"), (_INTERVAL, r"\{y \mid x > 2\}"),
        (_INTERVAL, r"\{x \mid x^2 > 4\}"), (_INTERVAL, r"\{x \mid x > 2, x < 5\}"),
        (_INTERVAL, r"\{x \mid x = 2\}"), (_INTERVAL, r"\{x \mid x \neq 2\}"),
        (_INTERVAL, r"\{x \in \mathbb{Z} \mid x > 2\}"), (_INTERVAL, r"\{x \in \mathbb{N} \mid x > 2\}"),
        (_INTERVAL, r"\{x \mid \}"), (_INTERVAL, r"\{ \mid x > 2\}"), (_INTERVAL, r"\{2 \mid x > 2\}"),
        (_INTERVAL, r"\{x \mid x>2\}\{x\mid x>2\}"), ("2", r"\{x \mid x = 2\}"),
        (r"\{2\}", r"\{x \mid x > 2\}"), ("(1, 2)", r"\{x \mid 1 < x < 2\}")],
    "other number sets": [
        (_LINE, r"\mathbb{Z}"), (_LINE, r"\mathbb{R}^+"), (_LINE, r"\mathbb{Q}"), (_LINE, r"\mathbb{C}"),
        (_LINE, r"\mathbb{N}"), (_LINE, r"\mathbb{R}^2"), (_LINE, r"\mathbb{R} \setminus \{0\}"),
        (_LINE, r"\mathbb{R}_{>0}"), (_LINE, r"\text{all integers}"), (_LINE, r"\text{all positive real numbers}"),
        (_LINE, r"\text{real numbers except } 0"), (_LINE, r"[-\infty, \infty]"), (_INTERVAL, r"\mathbb{R}"),
        (_LINE, r"\emptyset"), (r"(0,\infty)", r"\mathbb{R}^+"), (_LINE, r"\mathbb{R} \cup \mathbb{R}"),
        (_LINE, r"x \in \mathbb{Z}"), ("1", r"\mathbb{R}"), (_LINE, "R"),
        (_LINE, r"\text{all real numbers or none}")],
    "overlapping unions": [
        (_LINE, r"x < 2 \text{ or } x \ge 2"), (_LINE, r"x \le 2 \text{ or } x \ge 2"),
        (r"(-\infty, 3)", r"x < 2 \text{ or } x < 3"), (_UNION, r"x<2 \text{ or } x < 1 \text{ or } x > 3"),
        (_LINE, r"(-\infty, 2] \cup [2, \infty)"), (_UNION, r"x<2 \text{ or } x>3 \text{ or } x>4"),
        (_LINE, r"\{x\mid x<2 \text{ or } x \ge 2\}"), (_INTERVAL, r"x > 2 \text{ or } x > 2")],
    "or tricks": [
        ("2", r"2 \text{ or } 3"), ("2", r"x = 2 \text{ or } x = 3"), (_UNION, r"x < 2 \text{ or } 3"),
        (_INTERVAL, r"x > 2 \text{ or } y > 2"), ("2", r"2 \lor 3"), ("2", r"2 \vee 3"),
        (_UNION, r"x<2 \text{ or } x>3 \text{ or } x=5"), (_INTERVAL, r"x>2 \text{ or }"),
        (_INTERVAL, r"\text{or } x>2"), (_UNION, r"x<2 \text{ or maybe } x>3")],
}


@pytest.mark.parametrize(("cls", "gold", "pred"), [
    (cls, gold, pred) for cls, cases in SET_NOTATION_HACKS.items() for gold, pred in cases])
def test_wrong_sets_in_set_notation_earn_nothing(cls, gold, pred):
    v = verify(gold, rf"\boxed{{{pred}}}")
    assert not v.passed, (cls, gold, pred, v)


# A hedge on the line after the final answer (or later on the box's own line) was paid: the answer
# was read alone. The value it offers competes with the answer, as "5 or \boxed{6}" does.
NEXT_LINE_HEDGES = [
    "\\boxed{18}\nor maybe 19", "\\boxed{18}\n\nOr possibly 19.",
    "The final answer is $\\boxed{18}$.\nAlternatively, it could be 19.", "\\boxed{18}. Or maybe 19.",
    "\\boxed{18}\nPerhaps 19.", "\\boxed{18}\n\n**Or** 19", "\\boxed{18}\nIt could also be 19.",
    "\\boxed{18}\n(or 19)", "The answer is 18.\nOr maybe 19.", "\\boxed{18}\nBut it might be 19.",
    "\\boxed{18}\n\nOtherwise $19$.", "\\boxed{18}\n- or 19", "\\boxed{18}\nProbably \\(19\\) though.",
    "\\boxed{18}\nApproximately 19.", "**Final Answer**\n\\boxed{18}\nor 19",
    "\\boxed{18} \\\\ \\text{or } 19", "\\boxed{18}\nOR 19", "$\\boxed{18}$\n$\\text{or } 19$",
    # hedges in other spellings, found by attacking the rule above
    "\\boxed{18}\n\nHmm, 19?", "\\boxed{18}\nAlthough 19 is also possible.", "\\boxed{18}\nActually, 19.",
    "\\boxed{18}\nWait, it's 19.", "\\boxed{18}\n19", "\\boxed{18}\n$19$", "\\boxed{18}\nor\n19",
    "\\boxed{18}\n\n\nOr 19", "\\boxed{18}\nIf not, 19.", "\\boxed{18}\nUnless it is 19.",
    "\\boxed{18}\n19 is also possible.", "\\boxed{18}/19", "\\boxed{18} vs 19", "\\boxed{18} to 19",
    "\\boxed{18}\u201319", "\\boxed{18}\nO r 19", "\\boxed{18}\n\u043er 19", "\\boxed{18}\nMaybe nineteen.",
    "\\boxed{18} \\quad \\text{(or } 19\\text{)}",
]
AFTER_ANSWER_HONEST = [
    "The final answer is $\\boxed{18}$. I hope it is correct.", "\\boxed{18}\n\nSo the answer is about 18 apples.",
    "\\boxed{18}\n\nOr, to check: 9 + 9 = 18.", "\\boxed{18}\nOr, equivalently, 18 apples.",
    "The answer is 18.\nI hope it is correct.", "\\boxed{18}\nThat is about $18$.",
    "\\boxed{18}\n\nThis means Janet makes 18 dollars every day at the farmers' market.",
    "\\boxed{18}\n\nThat is 3 apples per box across 6 boxes.", "\\boxed{18} apples.",
    "\\boxed{18}.\n\n**Explanation:** She had 24 and gave away 6.", "\\boxed{18}\n</answer>",
    "$\\boxed{18}$\n\n---\n\n### Summary\nShe buys 3 packs of 6 eggs.", "\\boxed{18}\n\nI hope this helps!",
]


@pytest.mark.parametrize("completion", NEXT_LINE_HEDGES)
def test_a_hedge_on_the_line_after_the_answer_earns_nothing(completion):
    v = verify("18", completion)
    assert not v.passed and v.reason == "multiple_answers", (completion, v)


@pytest.mark.parametrize("completion", AFTER_ANSWER_HONEST)
def test_the_same_value_or_a_check_after_the_answer_is_credited(completion):
    v = verify("18", completion)
    assert v.passed, (completion, v)


# Round 5 (issue 43, attacking the fixes above): hedges across math segments and inside one
# answer, words that change the value, and hidden text. Each was paid before its fix.
SEGMENT_HEDGES = [
    ("5", "$x = 3$ or, if we take the other branch of the root, $x = 5$"),
    ("5", "It is $3$ or it is $5$"), ("5", "$x = 3$ otherwise $x = 5$"), ("5", "$x=3$ ou $x=5$"),
    ("5", "$x=3$ oder $x=5$"), ("5", "$x = 3$ unless $x = 5$"), ("3", "The answer is $3$ or it is $5$"),
    ("3", "The answer is $3$ (it could also be $5$)"), ("3", "Answer: $3$ or it is $5$."),
    ("5", "3 otherwise 5"), ("5", "We get 3 ou 5"),
]
# Two statements in one answer, read as one chain by its last part (5).
STATEMENT_HEDGES = [
    ("5", r"x = 3 \lor x = 5"), ("5", r"x = 3 \vee x = 5"), ("5", r"x=3 \mid x=5"), ("5", r"x=3 \,|\, x=5"),
    ("5", r"x=3 \quad x=5"), ("5", r"x=3 \qquad x=5"), ("5", r"x=3 \; x=5"), ("5", r"x=3 \\ x=5"),
    ("5", r"x=3 \wedge x=5"), ("5", r"x=3 \land x=5"), ("5", r"x=3 \quad y=5"), ("5", "$x = 3 \\quad x = 5$"),
]
VALUE_WORD_HACKS = [
    ("10", r"10\text{ myriad}"), ("10", r"10\text{ basis points}"), ("10", r"10\text{ bps}"),
    ("10", r"10\text{ in binary}"), ("10", r"10\text{ hex}"), ("10", r"10\text{ base } 2"),
    ("10", r"10\text{ log}"), ("10", r"10\text{ permille}"), ("1", r"\text{1} \text{ lakh}"),
]
_I2 = r"\begin{pmatrix}1&0\\0&1\end{pmatrix}"
# A set inside a set, a list of sets, and a matrix's power left to take (latex2sympy flattened the
# first two and evaluated the last).
CONTAINER_KIND_HACKS = [
    (r"\{1, 2\}", r"\{1\}, \{2\}"), (r"\{1, 2\}", r"\{\{1, 2\}\}"), (r"\{1, 2\}", r"\{\{1\}, 2\}"),
    (_I2, _I2 + "^{2}"), (_I2, _I2 + "^{-1}"), (_I2, r"\left(" + _I2 + r"\right)^{2}"),
]
HIDDEN_TEXT_HACKS = [("5", r"\phantom{5}"), ("5", r"\hphantom{5}"), ("5", r"\vphantom{5}"),
                     ("5", r"\smash{5}"), ("5", r"\phantom{3}5")]


@pytest.mark.parametrize(("gold", "completion"), SEGMENT_HEDGES)
def test_an_alternative_across_math_segments_is_a_hedge(gold, completion):
    v = verify(gold, completion)
    assert not v.passed and v.reason == "multiple_answers", (completion, v)


@pytest.mark.parametrize(("gold", "pred"), STATEMENT_HEDGES + VALUE_WORD_HACKS + HIDDEN_TEXT_HACKS
                         + CONTAINER_KIND_HACKS)
def test_two_statements_value_words_and_hidden_text_earn_nothing(gold, pred):
    completion = pred if pred.startswith("$") else rf"\boxed{{{pred}}}"
    v = verify(gold, completion)
    assert not v.passed, (pred, v)


SEGMENTS_HONEST = [
    ("3", "$x$ = $3$"), ("3", "So $x =$ $3$."), ("3", "So $x$ $= 3$."), ("3", "The value of $x$ is $3$."),
    (r"2\sqrt{3}", r"$x$ = $2\sqrt{3}$"), ("3", "If $x = 5$ or $x = 7$ the sum is too large, so $x = 3$"),
    ("3", "$x = 3$ or $x = 3.0$"), ("3", "$x=3$. Since $x$ is odd or even, $x=3$."),
    ("3", "$5$ or more is wrong, so $x = 3$"), ("3, 5", "$x = 3$ or $x = 5$"),
    ("3, 5", r"\boxed{x = 3 \lor x = 5}"), ("3, 5", r"\boxed{x = 3 \quad x = 5}"),
    ("(3, 5)", r"\boxed{x=3 \land y=5}"), ("5", r"\boxed{y=5}"),
    (r"\{\{1, 2\}\}", r"\boxed{\{\{2, 1\}\}}"), (r"\{-1, 1, 2\}", r"\boxed{\{\pm 1, 2\}}"),
    ("-1, 1, 2", r"\boxed{\pm 1, 2}"), (_I2, r"\boxed{\begin{bmatrix}1&0\\0&1\end{bmatrix}}"),
    # colour is emphasis, not content (a white 5 is still the 5 written); \color{white}{3}5 is 35
    ("5", r"\boxed{\color{white}{5}}"),
]


@pytest.mark.parametrize(("gold", "completion"), SEGMENTS_HONEST)
def test_one_answer_over_several_segments_or_statements_is_credited(gold, completion):
    v = verify(gold, completion)
    assert v.passed, (completion, v)
    assert not verify("5", r"\boxed{\color{white}{3}5}").passed


def test_a_brace_less_box_before_a_stray_brace_is_malformed():
    """Found by the card's reward search on reasoning-gym's gcd and aiw: ``\\boxed2}`` and
    ``\\boxed4 \\div 1}`` were paid as boxes of 2 and 4; their ``{`` is missing."""
    for gold, completion in (("2", r"\boxed2}"), ("4", r"\boxed4 \div 1}"), ("4", r"\boxed4 \div \sqrt{1}}"),
                             ("6", r"\boxed 6 and }")):
        assert verify(gold, completion).reason == "malformed_box", completion
    for completion in (r"\boxed 6", r"{\boxed 6}", r"} \boxed 6", r"\boxed6."):
        assert verify("6", completion).passed, completion


# -- round 5: found by rewriting every MATH gold into other notations (issue 43) --------------
# Each of these was credited before: digits split by a space were joined in any grouping ("1 5"
# for 15, "10 05" for 1005; the groups of three of "10\,000" still join); a second name after
# a text command was dropped as the first's label; a degree sign after a multiple of pi was
# dropped as a unit; and attacking the new rules found the decimals after an exact value.
ROUND5_HACKS = [
    ("15", r"\boxed{1 5}", "How many?"),
    ("123", r"\boxed{12 3}", "How many?"),
    ("1005", r"\boxed{10 05}", "How many?"),
    ("35", r"\boxed{3\,5}", "How many?"),
    ("1000", r"\boxed{1 0 0 0}", "How many?"),
    (r"\text{Monday}", r"\boxed{\text{Monday} \text{Tuesday}}", "What day?"),
    (r"\text{Evelyn}", r"\boxed{\text{Evelyn}\text{ Navin}}", "Who?"),
    (r"\text{Evelyn}", r"\boxed{\text{Evelyn}\,\text{Navin}}", "Who?"),
    (r"\text{Monday}", r"\boxed{Monday\text{ Tuesday}}", "What day?"),
    (r"\text{Monday}", r"\boxed{\textbf{Monday}\text{ Tuesday}}", "What day?"),
    (r"\frac{\pi}{3}", r"\boxed{\frac{\pi}{3}^\circ}", "What angle, in radians?"),
    (r"\pi", r"\boxed{\pi°}", "What angle, in radians?"),
    # an exact value then a decimal that is not its rounding or cut: two values
    (r"2\sqrt{3}", r"\boxed{2\sqrt3 \approx 3.9}", "Find it."),
    (r"\pi", r"\boxed{\pi \approx 3.15}", "Find it."),
    (r"\frac{1}{3}", r"\boxed{\frac{1}{3} \approx 0.33 \approx 0.4}", "Find it."),
    (r"\frac{1}{3}", r"\boxed{0.33 \approx \frac{1}{3}}", "Find it."),
    ("27", r"\boxed{x \approx 27.0}", "Find it."),
    # a named quantity keeps every other rule: one value, not the question's computation
    ("24", r"\boxed{m+n = 23 = 24}", r"Find $m+n$."),
    ("24", r"\boxed{24 = m+n = 25}", r"Find $m+n$."),
    ("24", r"\boxed{m+n \approx 24}", r"Find $m+n$."),
    ("24", r"\boxed{m+n = 2\cdot 12}", r"Find $m+n$."),
    ("-25", r"\boxed{f(-10) = -10}", r"Find $f(-10)$."),
    (r"35^\circ", r"\boxed{\angle A = 35^\circ = 36^\circ}", "Find angle A."),
    ("8", r"\boxed{2+6 = 8}", "What is 2+6?"),
    # layout and wrappers carry no second value in
    ("18", r"\boxed{\text{Answer: } 18 \text{ or } 19}", "How many?"),
    ("18", r"\boxed{\ensuremath{18}\ensuremath{19}}", "How many?"),
    ("18", r"\boxed{{18}{19}}", "How many?"),
    (r"9\text{ p.m.}", r"\boxed{9:00 AM}", "When?"),
    (r"9\text{ a.m.}", r"\boxed{9}", "When?"),
    ("40_8", r"\boxed{(40)_9}", "In base 8?"),
    # a second attack on the new rules (an adversary with the code): a wrapper that was an
    # argument lost its braces and the checker read another number than the one shown
    (r"3\sqrt{2}", r"\boxed{\sqrt\bm{23}}", "Simplify."),
    (r"3\sqrt{2}", r"\boxed{\sqrt\color{red}{23}}", "Simplify."),
    (r"3\sqrt{2}", r"\boxed{\sqrt\text{23}}", "Simplify."),
    (r"\frac{3}{2}", r"\boxed{\frac1\bm{23}}", "Find it."),
    (r"7\sqrt[3]{2}", r"\boxed{\sqrt[3]\mathbf{27}}", "Find it."),
    (r"3^2x", r"\boxed{3^\bm{2x}}", "Find it."),
    # two statements that read as one chain, by its last value
    ("5", r"\boxed{x = 3 \hspace{1em} x = 5}", "Find x."),
    ("5", r"\boxed{x = 3 \, x = 5}", "Find x."),
    ("5", r"\boxed{x = 3\text{ }x = 5}", "Find x."),
    ("5", r"\boxed{x = 3 \mathbin{} x = 5}", "Find x."),
    ("5", r"\boxed{m+n = 3 \hspace{2cm} m+n = 5}", r"Find $m+n$."),
    ("5", r"\boxed{x = \mathbf{3} = 5}", "Find x."),
    ("5", r"\boxed{a = 3 = 5}", "Find a."),
    ("23", r"\boxed{m+n = 24 = 23}", r"Find $m+n$."),
    # names that deny their value, or name a word answer
    ("3", r"\boxed{\text{not} = 3}", "How many?"),
    ("3", r"\boxed{\text{no } x = 3}", "How many?"),
    ("4", r"\boxed{n - \text{not} = 4}", "How many?"),
    ("3", r"\boxed{\text{3 or} = 3}", "How many?"),
    (r"\text{Evelyn}", r"\boxed{\text{Navin} = \text{Evelyn}}", "Who?"),
    (r"\text{(C)}", r"\boxed{z = c}", "Which option?"),  # the card's echo of a prompt's \[z = c\]
    # degrees on a multiple of pi, spelt other ways
    (r"\frac{\pi}{3}", r"\boxed{\frac{\pi}{3}^{\hspace{1pt}\circ}}", "In radians?"),
    (r"\frac{\pi}{3}", r"\boxed{\frac{\pi}{3}\,^\circ}", "In radians?"),
    (r"\frac{\pi}{3}", r"\boxed{\frac{\pi}{3}^{\bm{\circ}}}", "In radians?"),
    (r"\frac{\pi}{3}", r"\boxed{\frac{\pi}{3}\,\mathrm{deg}}", "In radians?"),
    (r"\frac{\pi}{3}", r"\boxed{\frac{\pi}{3}\text{ degrees}}", "In radians?"),
    # a name about a value is a hedge, whatever the decimal
    ("27", r"\boxed{AB \approx 27.0}", "How long?"),
    ("5", r"\boxed{f(x) \approx 5.00}", "Find it."),
    ("5", r"\boxed{|AB| \approx 5.0}", "How long?"),
    # a wrong unit inside a wrapper, or after a TeX space
    (r"18\text{ cm}", r"\boxed{18\textcolor{red}{\text{ mm}}}", "How long?"),
    (r"18\text{ cm}", r"\boxed{18\mathbf{\text{ mm}}}", "How long?"),
    (r"18\text{ cm}", r"\boxed{18\,\mathrm{mm}}", "How long?"),
    # a second name after a bracket or a bold word
    (r"\text{Evelyn}", r"\boxed{(\text{Evelyn})\text{ Navin}}", "Who?"),
    (r"\text{Evelyn}", r"\boxed{\mathbf{Evelyn}\text{ Navin}}", "Who?"),
    # the full cards' reward search (2,000 queries a pack): broken answer tags paid by their
    # last number, and a matrix entry read as the completion's number
    ("2", "<answer>3<by/answ>2</answer", "Find x."),
    ("2", "4answer>2</answer>", "Find x."),
    ("5", r"<-5>\det\begin{pmatrix}5\end{pmatrix}</answer>", "Find x."),
    ("5", r"<-5>\det\begin{pmatrix}5\end{pmatrix}</integer>", "Find x."),
    ("2", r"piece{\frac{8}{2}}", "What area?"),
    ("2", r"so x = \sqrt{2}", "Find x."),
    # the arith card's shuffled prompt words: the instruction's example box, then its empty one
    ("42", r"number \boxed{42}. 14? for What answer 3 the final is \boxed{}, as", "What is 3 × 14?"),
    ("42", r"\boxed{42} \boxed{ }", "What is 3 × 14?"),
]


@pytest.mark.parametrize("gold,pred,question", ROUND5_HACKS)
def test_round5_hacks_earn_nothing(gold, pred, question):
    verdict = verify(gold, pred, question=question)
    assert not verdict.passed, (pred, verdict.reason, verdict.details)


def test_digits_split_by_a_space_are_one_number_only_in_groups_of_three():
    for pred in (r"\boxed{10\,000}", r"\boxed{10 000}", r"\boxed{10{,}000}"):
        assert verify("10000", pred).passed, pred
    assert verify("3.141592", r"\boxed{3.141\,592}").passed  # after the point too
    assert verify("1234567", r"\boxed{1 234 567}").passed
    assert not verify("1000", r"\boxed{10\,0}").passed


def test_an_exact_value_then_its_decimal_is_one_answer():
    for gold, pred in ((r"\frac{128}{75}", r"\boxed{\frac{128}{75} \approx 1.7067}"),
                       (r"2\sqrt{3}", r"\boxed{2\sqrt3 \approx 3.46}"),  # rounded
                       (r"2\sqrt{3}", r"\boxed{2\sqrt3 \approx 3.464}"),  # cut
                       (r"\pi", r"\boxed{\pi \approx 3.14}")):
        verdict = verify(gold, pred)
        assert verdict.passed, (pred, verdict.reason, verdict.details)
    # the value is the exact one: a wrong exact value with a right decimal fails
    assert not verify(r"\frac{1}{3}", r"\boxed{\frac{1}{2} \approx 0.33}").passed


def test_a_wrapper_keeps_its_group_whole():
    """Bold or colour around an argument is the argument: ``3^\\bm{2x}`` is 3^{2x}."""
    for gold, pred in ((r"3^{2x}", r"\boxed{3^\bm{2x}}"), (r"e^{2x}", r"\boxed{e^\mathbf{2x}}"),
                       (r"\frac{1}{23}", r"\boxed{\frac1\mathbf{23}}"),
                       (r"\sqrt{23}", r"\boxed{\sqrt\color{red}{23}}")):
        verdict = verify(gold, pred)
        assert verdict.passed, (pred, verdict.reason, verdict.details)
    # work shown in a chain is still read by its last part (Math-Verify's corpus, row 94)
    assert verify("x = 11", r"\boxed{x = 5+5+1 = 7 =11}").passed


def test_a_whole_answer_tag_is_still_read():
    for completion in ("<answer>2</answer>", r"<think>1 + 1</think><answer>\boxed{2}</answer>",
                       "\\boxed{2}\n</answer>"):
        assert verify("2", completion).passed, completion


def test_the_hedge_rule_reads_names_without_the_parser():
    """The main process decides hedges; the parser (sympy, latex2sympy) lives in the math
    workers. Reading a name before an \\approx must not import it there."""
    import subprocess
    import sys

    code = ("import sys\nfrom envs.verify.math_answer import hedge\n"
            "assert hedge(r'AB \\approx 27.0') and not hedge(r'\\frac{1}{3} \\approx 0.33')\n"
            "assert 'sympy' not in sys.modules and 'envs.verify.math_parse' not in sys.modules\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
