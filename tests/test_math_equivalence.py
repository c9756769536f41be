"""Equivalence rules of envs.verify.math (these go through the worker processes)."""

from __future__ import annotations

import pytest

from envs.verify.math import verify

EQUAL = [
    ("7425000", "7,425,000"),
    ("1000", "1 000"),
    ("0.5", r"\frac{1}{2}"),
    ("1/3", r"$\dfrac{1}{3}$"),
    (r"\frac{1}{3}", "0.3333"),
    (r"\sqrt{17}", "4.123105625617661"),
    (r"2\sqrt{2}", r"\sqrt{8}"),
    (r"\frac{9}{4}\pi", r"\frac94\pi"),
    (r"\tan^2(y)+1", r"\sec^2(y)"),
    ("120", "5!"),
    (r"\frac{x+2}{7}", r"\frac{x}{7}+\frac{2}{7}"),
    (r"28\%", "28"),
    (r"28\%", "0.28"),
    (r"28\%", "28 percent"),
    (r"15\mbox{ cm}^2", r"\boxed{15\text{ cm}^2}"),
    (r"90^\circ", "90"),
    ("x = 5", "5"),
    ("5", "$k = 5$"),
    ("x+y=2", "y+x=2"),
    ("x+y=2", "2=x+y"),
    ("2x+4y-3=0", r"y=-\frac{1}{2}x+\frac{3}{4}"),
    (r"x \geq 5", r"5 \leq x"),
    (r"\{1, 2, 3\}", r"\{3, 1, 2\}"),
    ("1, -2", r"\boxed{-2} and \boxed{1}"),
    ("(1, 2)", r"\left(1, 2\right)"),
    ("[0, 1)", "[0,1)"),
    (r"-2 \le x \le 7", r"x \in [-2, 7]"),
    (
        r"\begin{pmatrix}1 & 2 \\ 3 & 4\end{pmatrix}",
        r"\left[\begin{array}{cc}1 & 2 \\ 3 & 4\end{array}\right]",
    ),
    (r"\text{(C)}", "C"),
    (r"\text{Evelyn}", "evelyn"),
    (r"1 \pm \sqrt{19}", r"\{1+\sqrt{19}, 1-\sqrt{19}\}"),
    ("7:32", "14:64"),
    ("1000.99", "1000,99"),
    (r"\frac{5\sqrt{42}}{27}", r"\frac{10\sqrt{10.5}}{27}"),
    ("a=2, b=3", r"\boxed{b=3, a=2}"),
    (r"\frac{7}{2}", r"3\frac{1}{2}"),
    ("y = 2x+1", r"\boxed{2y = 4x + 2}"),
]

NOT_EQUAL = [
    (r"\frac{1}{2^{99}}", r"\frac{1}{2^{98}}"),
    ("123456789012345678901", "123456789012345678902"),
    (r"\frac{1}{2004!}", r"\frac{1}{2006!}"),
    ("0.25", "0.24"),
    (r"\frac{1}{4}", "0.26"),
    ("50", "0.5"),
    ("(1, 2)", "(2, 1)"),
    ("(0, 1)", "[0, 1)"),
    ("[0, 1)", "[0, 1]"),
    ("x > 5", "x < 5"),
    ("x+y=2", "x-y=2"),
    (r"\begin{pmatrix}1 & 2 \\ 3 & 4\end{pmatrix}", r"\begin{pmatrix}1 & 2 \\ 3 & 5\end{pmatrix}"),
    ("4", r"4\sqrt(2)"),
    ("A", "B"),
    ("f(x)", "f(y)"),
    (r"1 - \frac{1}{e}", r"1 + \frac{1}{e}"),
    ("12:00", "1:00"),
    (r"1, 2, \ldots, n", r"1, 3, 5, \ldots, 2n-1"),
    (r"x \in [-2, 7]", r"-2 \le x \le 7"),  # a gold interval is not matched by an inequality
    ("a=2, b=3", r"\boxed{a=3, b=2}"),
    ("2", r"\boxed{x^2 = 4}"),
]


@pytest.mark.parametrize(("gold", "pred"), EQUAL)
def test_equal(gold: str, pred: str) -> None:
    v = verify(gold, pred)
    assert v.passed, (gold, pred, v)
    assert v.reason == "equal" and v.score == 1.0


@pytest.mark.parametrize(("gold", "pred"), NOT_EQUAL)
def test_not_equal(gold: str, pred: str) -> None:
    v = verify(gold, pred)
    assert not v.passed, (gold, pred, v)
    assert v.score == 0.0
    assert v.reason in ("not_equal", "multiple_answers"), v


def test_extracted_answer_is_reported() -> None:
    v = verify("42", r"We compute and get \boxed{42}.")
    assert v.passed and v.extracted == "42"


def test_hedging_is_multiple_answers() -> None:
    assert verify("18", "The answer is 18 or 19.").reason == "multiple_answers"
    v = verify("18", r"It is \boxed{18}. Or maybe it is \boxed{19}")
    assert not v.passed and v.reason == "multiple_answers"
    assert verify("18", r"\boxed{18} so \boxed{18}").passed


def test_several_answers_against_list_gold() -> None:
    assert verify("1, 2", r"The roots are \boxed{2} and \boxed{1}").passed
    assert not verify("1, 2", r"\boxed{1}").passed


def test_no_answer() -> None:
    v = verify("3", "I am not sure about this problem at all.")
    assert not v.passed and v.reason == "no_answer" and v.extracted is None


def test_gold_may_be_a_full_solution() -> None:
    gold = r"Since $x=1/5$, the answer is $\boxed{20}$ percent."
    assert verify(gold, r"So \boxed{20\%}").passed
