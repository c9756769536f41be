"""Answer extraction from completions (pure regex, no worker needed)."""

from __future__ import annotations

import pytest

from envs.verify.math_extract import clean_text, extract


def answer(text: str, **kw: bool) -> tuple[str, ...]:
    ex = extract(text, **kw)
    assert ex is not None, text
    return ex.answer


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (r"so the total is \boxed{42}.", ("42",)),
        (r"first \boxed{1} then finally \boxed{\frac{1}{2}}", None),  # two groups, see below
        (r"\boxed{\frac{a}{\sqrt{b}}} done", (r"\frac{a}{\sqrt{b}}",)),
        (r"\boxed 6 is it", ("6",)),
        (r"\fbox{7}", ("7",)),
        ("Natalia sold 48 clips.\n#### 72", ("72",)),
        ("After all that, the answer is 15.", ("15",)),
        ("Final answer: 3/4", ("3/4",)),
        ("**Answer:** 12", ("12",)),
        ("The final answer is $x^2+1$. I hope it is correct.", ("x^2+1",)),
        (r"We get \(\frac{3}{5}\)", (r"\frac{3}{5}",)),
        (r"Thus \[ 9 \]", ("9",)),
        ("7,425,000", ("7,425,000",)),
        ("Evelyn", ("Evelyn",)),
        ("Final Answer: The largest $n$ is 34.", ("34",)),
        ("it increases by 100%.", ("100%",)),
        ("The answer is 5 and the remainder is 3.", ("5",)),
        ("The answer is (C) 42.", ("C",)),
        ("The answer is $5$ and the remainder is $3$.", ("5",)),
    ],
)
def test_single_answers(text: str, expected: tuple[str, ...] | None) -> None:
    if expected is None:
        ex = extract(text)
        assert ex is not None and len(ex.groups) == 2
        assert ex.answer == (r"\frac{1}{2}",)
    else:
        assert answer(text) == expected


def test_last_box_wins_and_nested_braces() -> None:
    text = r"Try \boxed{2}. Hmm. Actually the result is \boxed{\frac{\sqrt{\{2\}}}{3}}"
    ex = extract(text)
    assert ex is not None
    assert ex.answer == (r"\frac{\sqrt{\{2\}}}{3}",)
    assert ex.groups[0] == ("2",)


def test_boxes_joined_by_conjunction_form_one_answer() -> None:
    assert answer(r"\boxed{-2} \quad \text{and} \quad \boxed{1}") == ("-2", "1")
    assert answer(r"\boxed{2}, \boxed{3}, \boxed{5}") == ("2", "3", "5")
    ex = extract(r"\boxed{1} no no no no no \boxed{2}")
    assert ex is not None and ex.groups == (("1",), ("2",))


def test_same_box_repeated_is_one_answer() -> None:
    ex = extract(r"so \boxed{189}. Double check: yes, \boxed{ 189 }")
    assert ex is not None and len(ex.groups) == 1


def test_think_block_is_ignored() -> None:
    text = r"<think>maybe \boxed{18}</think> The answer is \boxed{19}"
    ex = extract(text)
    assert ex is not None and ex.groups == (("19",),)


def test_marker_after_boxes_wins() -> None:
    text = r"interest \boxed{200}, then \boxed{255}. Final Answer: The final answer is $10,455$."
    assert answer(text) == ("10,455",)


def test_gold_extraction_is_lenient_and_keeps_last_group() -> None:
    assert answer(r"\boxed{W(n) = 1", gold=True) == ("W(n) = 1",)
    assert answer(r"\boxed{1} no no no no no \boxed{2}", gold=True) == ("2",)


def test_inline_math_does_not_span_newlines() -> None:
    assert extract("Answer $ \n 9 \n $") is None
    assert answer("Answer $$ \n 9 \n $$") == ("9",)


def test_number_fallback_and_stray_dollar() -> None:
    assert answer("the number is not 10 which is 1,000.99€") == ("1,000.99",)
    assert answer("1,000.99$") == ("1,000.99",)
    assert answer("So the probability that Alice wins is 2/3. <|im_start|>user 7") == ("2/3",)


def test_escaping_damage_repaired() -> None:
    assert clean_text("\x0crac{1}{2}") == r"\frac{1}{2}"
    assert clean_text(r"\\boxed{3}") == r"\boxed{3}"
    assert answer(r"thus \\boxed{\\frac{1}{2}}") == (r"\frac{1}{2}",)


def test_no_answer() -> None:
    assert extract("") is None
    assert extract("\x00" * 100) is None
    assert extract("I do not know, sorry about that one.") is None


@pytest.mark.parametrize(
    "text",
    [
        r"\begin{pmatrix} 6 \\ 3 \\ 0 \end{pmatrix}",
        r"\begin{pmatrix} 1/5 & 4/5 \\ 0 & 1 \end{pmatrix}",
        r"\left(\begin{array}{ccc} 0 & 1 & 0 \\ 0 & 0 & 1 \\ 1 & 1 & 1 \end{array}\right)",
        r"81\text{ teachers}",
        r"65 \text{ children tickets }",
        r"\frac{68}{3}\text{ pounds}",
        r"\text{June 20}",
    ],
)
def test_bare_latex_answer_is_read_whole(text: str) -> None:
    # Environment names and short \text{} labels are LaTeX, not prose: the answer is the
    # whole string, not its last number (a matrix once became its bottom-right entry).
    assert answer(text, gold=True) == (text.strip(),)
    assert answer(text) == (text.strip(),)


def test_prose_and_long_text_still_fall_back_to_the_number() -> None:
    assert answer(r"\text{we add the two numbers and then get} 12") == ("12",)
    assert answer(r"The answer is 81\text{ teachers}.") == (r"81\text{ teachers}",)
    # a derivation environment is working, not an answer: its last number is
    assert answer("\\begin{align*}\n2x &= 4 \\\\\nx &= {2}\n\\end{align*}") == ("2",)


def test_marker_answer_keeps_a_matrix_written_over_several_lines() -> None:
    text = "The answer is \\begin{pmatrix}\n1 \\\\\n2\n\\end{pmatrix}.\nDone."
    assert answer(text) == ("\\begin{pmatrix}\n1 \\\\\n2\n\\end{pmatrix}",)
