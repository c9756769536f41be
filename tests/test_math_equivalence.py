"""Equivalence rules of envs.verify.math (these go through the worker processes)."""

from __future__ import annotations

from fractions import Fraction

import pytest

from envs.verify.math import verify
from envs.verify.math_normalize import decimal_matches

EQUAL = [
    ("7425000", "7,425,000"),
    ("1000", "1 000"),
    ("0.5", r"\frac{1}{2}"),
    ("1/3", r"$\dfrac{1}{3}$"),
    (r"\sqrt{8}", r"2\sqrt{2}"),  # the other way round is not simplified (test_reward_hacks_math)
    (r"\frac{9}{4}\pi", r"\frac94\pi"),
    (r"\tan^2(y)+1", r"\sec^2(y)"),
    ("5!", "120"),
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
    ("7:32", "7 : 32"),
    ("1000.99", "1000,99"),
    (r"\frac{10\sqrt{10.5}}{27}", r"\frac{5\sqrt{42}}{27}"),
    ("a=2, b=3", r"\boxed{b=3, a=2}"),
    (r"\frac{7}{2}", r"3\frac{1}{2}"),
    ("y = 2x+1", r"\boxed{2y = 4x + 2}"),
    # MATH matrix/vector golds, read bare (as the validator passes them) or boxed
    (
        r"\begin{pmatrix} 6 \\ 3 \\ 0 \end{pmatrix}",
        r"\boxed{\begin{bmatrix} 6 \\ 3 \\ 0 \end{bmatrix}}",
    ),
    (
        r"\begin{pmatrix} 48/65 \\ 6/65 \end{pmatrix}",
        r"\begin{pmatrix} \dfrac{48}{65} \\ \frac{6}{65} \end{pmatrix}",
    ),
    (r"\begin{pmatrix} 6 \\ 3 \\ 0 \end{pmatrix}", r"\boxed{(6, 3, 0)}"),
    (r"\begin{pmatrix} -5 \\ 2 \end{pmatrix}", r"\boxed{\langle -5, 2 \rangle}"),
    ("(6, 3, 0)", r"\boxed{\begin{pmatrix} 6 & 3 & 0 \end{pmatrix}}"),
    # labelled numbers: the label is not part of the value
    (r"81\text{ teachers}", "81"),
    (r"81\text{ teachers}", r"\boxed{81 \text{ teachers}}"),
    ("81", r"\boxed{81\text{ teachers}}"),
    (r"\frac{68}{3}\text{ pounds}", r"\boxed{\dfrac{68}{3}}"),
    (r"10\;\text{edges}", r"\boxed{10}"),
    (r"18\text{ ways.}", r"The answer is $18$."),
    (r"\text{June 20}", r"\boxed{\text{June 20}}"),
]

# Decimals for values with no finite decimal form: equal only under the opt-in rounding rule
# (``decimal_rounding=True``, rule in math_normalize); by default a decimal must be exact.
ROUNDED = [
    (r"\frac{1}{3}", "0.3333"),
    (r"\sqrt{17}", "4.123105625617661"),
    (
        r"\begin{pmatrix} 1/3 \\ 1/5 \end{pmatrix}",
        r"\boxed{\begin{pmatrix} 0.33 \\ 0.2 \end{pmatrix}}",
    ),
    ("1/3", "0.33"),
    ("1/3", "0.333"),
    (r"-\frac{1}{3}", "-0.33"),
    ("2/3", "0.67"),  # correctly rounded
    ("2/3", "0.66"),  # truncated
    (r"\sqrt{2}", "1.414"),
    (r"\sqrt{2}", "1.41421"),
    (r"\pi", "3.142"),
    (r"\pi", "3.1416"),
    (r"2\pi", "6.283"),
    ("e", "2.718"),
]

NOT_EQUAL = [
    ("7:32", "14:64"),  # a ratio obeys the simplest-form rule like a fraction (issue 43)
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
    (
        r"\begin{pmatrix} 6 \\ 3 \\ 0 \end{pmatrix}",
        r"\boxed{\begin{pmatrix} 6 \\ 0 \\ 3 \end{pmatrix}}",
    ),
    (r"\begin{pmatrix} 6 \\ 3 \\ 0 \end{pmatrix}", "0"),  # not its last entry
    (r"\begin{pmatrix} 6 \\ 3 \\ 0 \end{pmatrix}", r"\boxed{(6, 0, 3)}"),
    (r"\begin{pmatrix} 6 \\ 3 \end{pmatrix}", r"\boxed{[6, 3)}"),  # an interval
    (r"\begin{pmatrix} 1 & 2 \\ 3 & 4 \end{pmatrix}", r"\boxed{(1, 2, 3, 4)}"),
    (r"81\text{ teachers}", "82"),
    (r"\frac{68}{3}\text{ pounds}", "3"),
    (r"\text{June 20}", r"\boxed{\text{June 21}}"),
    # decimals: too few digits, or not the rounded/truncated value
    (r"\sqrt{2}", "1.4"),
    (r"\sqrt{2}", "1.41"),
    (r"\sqrt{2}", "1.415"),
    (r"\pi", "3.1"),
    (r"\pi", "3.14"),
    (r"\pi", "3.143"),
    (r"2\pi", "6.28"),
    ("e", "2.72"),
    ("1/3", "0.3"),
    ("1/3", "0.34"),
    ("-1/3", "0.33"),
    (r"\frac{1}{4}", "0.250001"),
]


@pytest.mark.parametrize(("gold", "pred"), EQUAL)
def test_equal(gold: str, pred: str) -> None:
    v = verify(gold, pred)
    assert v.passed, (gold, pred, v)
    assert v.reason == "equal" and v.score == 1.0


@pytest.mark.parametrize(("gold", "pred"), ROUNDED)
def test_rounded_decimal_only_under_the_opt_in_rule(gold: str, pred: str) -> None:
    v = verify(gold, pred)
    assert not v.passed and v.reason == "not_equal", (gold, pred, v)
    v = verify(gold, pred, decimal_rounding=True)
    assert v.passed and v.reason == "equal", (gold, pred, v)


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


def test_decimal_rule_is_shared_by_fast_path_and_worker() -> None:
    # The parent's fast path decides "1/3" vs "0.33"; the worker decides \frac{1}{3}
    # spelled so that the fast path declines. Both must apply the same rule.
    for pred, ok in (("0.33", True), ("0.34", False), ("0.3", False)):
        fast = verify("1/3", pred, decimal_rounding=True)
        slow = verify(r"\frac{x}{3x}", pred, decimal_rounding=True)  # only sympy sees 1/3
        assert fast.details.get("fast_path") and not slow.details.get("fast_path")
        assert fast.passed is ok and slow.passed is ok, (pred, fast, slow)


def test_decimal_matches_rule() -> None:
    third, root2 = Fraction(1, 3), Fraction(141421356237309504880, 10**20)
    assert decimal_matches("0.33", third, rational=True)
    assert decimal_matches("0.3333", third, rational=True)
    assert not decimal_matches("0.3", third, rational=True)  # 1 significant digit
    assert not decimal_matches("0.34", third, rational=True)  # neither rounded nor cut
    assert not decimal_matches("0.25", Fraction(1, 4), rational=True)  # exact form exists
    assert not decimal_matches("1.41", root2, rational=False)  # 3 digits: a known constant
    assert decimal_matches("1.414", root2, rational=False)
    assert decimal_matches("-0.6667", -Fraction(2, 3), rational=True)
    assert not decimal_matches("0.6667", -Fraction(2, 3), rational=True)


def test_a_hedge_in_a_label_is_not_dropped() -> None:
    # Word labels after a number are dropped, but not ones carrying a connective.
    for pred in (r"\boxed{5\text{ or six}}", r"\boxed{5\text{ and six}}"):
        v = verify("5", pred)
        assert not v.passed and v.reason == "multiple_answers", (pred, v)


def test_time_of_day_label_is_kept() -> None:
    # "a.m." is not a dropped label (it starts with a one-letter word): 9 a.m. is not 9 p.m.
    assert verify(r"9\text{ a.m.}", r"\boxed{9\text{ a.m.}}").passed
    assert not verify(r"9\text{ a.m.}", r"\boxed{9\text{ p.m.}}").passed
