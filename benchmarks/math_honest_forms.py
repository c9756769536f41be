"""Honest math answers in many notations: build the corpus, and measure how many are credited.

The corpus (``tests/data/math_honest_forms.jsonl``) holds answers a careful solver may write,
none of them leaving work undone, each graded by ``grpo/MathExact-v0`` on a real task:

- *generated*: every MATH-500 gold, a sample of GSM8K golds and a quarter of the ``arith`` test
  golds, each rewritten in several notations (boxed, in ``$..$``, ``\\dfrac``, spacing, ``\\displaystyle``,
  ``\\left(..\\right)``, an answer marker, its unicode twin ``2√5``/``(5, ∞)``/``½``; for numbers:
  ``N.0``, thousands separators, ``\\$``, unit and noun labels, scale words with and without a
  unit, scientific notation, ``#### N``, a reasoning block before the answer), and the unicode
  twin of every other MATH gold that has one;
- *hand-written*: forms that no rewriting of a gold produces (``HAND_WRITTEN``), on inline tasks.

Each line has the report card's corpus format (``envs/tools/card/corpus.py``), ``class`` naming the
notation. ``--write`` regenerates the file (deterministic); without it the script grades every
line and prints the rate and each refused form (``tests/test_math_honest_forms.py`` asserts it).

    python benchmarks/math_honest_forms.py [--write] [--corpus PATH]

One worker process is enough (``GRPO_GYM_MATH_WORKERS=1`` keeps it to one core).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
CORPUS = ROOT / "tests" / "data" / "math_honest_forms.jsonl"
ENV = "grpo/MathExact-v0"
GSM8K_SAMPLE = 250
ARITH_EVERY = 4
#: Notations common to every gold: each gold gets one of them, in turn.
PLAIN = ("boxed", "math-dollars", "marker", "reasoning-then-box", "final-answer-line",
         "gsm8k-hash", "bold-answer")
#: Notations only some golds have: every gold that has one gets it.
RARE = ("thousands", "scale", "scientific", "percent", "unicode-minus")
SOURCE_GENERATED = "generated from the pack's gold (benchmarks/math_honest_forms.py)"
SOURCE_HAND = "hand-written (benchmarks/math_honest_forms.py, issue 31)"

# ---------------------------------------------------------------- unicode twins

_SYMBOLS = [(r"\infty", "∞"), (r"\cup", "∪"), (r"\cap", "∩"), (r"\pi", "π"), (r"\cdot", "·"),
            (r"\times", "×"), (r"\leq", "≤"), (r"\le", "≤"), (r"\geq", "≥"), (r"\ge", "≥"),
            (r"\neq", "≠"), (r"\pm", "±"), (r"\theta", "θ"), (r"\in", "∈")]
_VULGAR = {(1, 2): "½", (1, 3): "⅓", (2, 3): "⅔", (1, 4): "¼", (3, 4): "¾", (1, 5): "⅕",
           (1, 6): "⅙", (5, 6): "⅚", (1, 8): "⅛", (3, 8): "⅜", (5, 8): "⅝", (7, 8): "⅞"}
_SUPER = dict(zip("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹", strict=True))
_ATOM = r"(?:\d+|[A-Za-z]|√\d+|√[A-Za-z]|π)"


def to_unicode(latex: str) -> str:
    """The unicode twin of a LaTeX answer, as a person types it: ``2\\sqrt{5}`` -> ``2√5``,
    ``\\frac{\\sqrt3}{3}`` -> ``√3/3``, ``(5, \\infty)`` -> ``(5, ∞)``. What has no plain twin
    (a fraction of sums, a matrix) stays LaTeX."""
    s = latex.replace(r"\dfrac", r"\frac").replace(r"\left", "").replace(r"\right", "")
    s = re.sub(r"\\sqrt\s*\{(\d+|[A-Za-z])\}", r"√\1", s)
    s = re.sub(r"\\sqrt\s*(\d)", r"√\1", s)
    s = re.sub(r"\\sqrt\s*\{([^{}]+)\}", r"√(\1)", s)
    for cmd, sym in _SYMBOLS:
        s = re.sub(re.escape(cmd) + r"(?![A-Za-z])\s*", sym, s)

    def frac(m: re.Match[str]) -> str:
        a, b, factor = m.group(1), m.group(2), m.group(3)
        if a.isdigit() and b.isdigit() and (int(a), int(b)) in _VULGAR:
            return _VULGAR[(int(a), int(b))]
        # before a factor, a slash needs brackets: 4/3π reads 4/(3π); (4/3)π is meant
        return f"({a}/{b})" if factor else f"{a}/{b}"

    # not after a digit: 1\frac{4}{5} is a mixed number, never 14/5
    s = re.sub(rf"(?<!\d)\\frac\s*\{{({_ATOM})\}}\s*\{{(\d+)\}}(?=(\s*[A-Za-z√π\\(])?)", frac, s)
    s = re.sub(r"\^\s*(?:\{(\d)\}|(\d)(?!\d))", lambda m: _SUPER[m.group(1) or m.group(2)], s)
    return s.replace("-", "−")


# ---------------------------------------------------------------- notations


def expression_forms(gold: str) -> list[tuple[str, str]]:
    """(notation, completion) for an expression gold."""
    forms = [("boxed", rf"\boxed{{{gold}}}"), ("math-dollars", rf"$\boxed{{{gold}}}$"),
             ("marker", f"The final answer is ${gold}$."),
             ("displaystyle", rf"\boxed{{\displaystyle {gold}}}"),
             ("reasoning-then-box", f"<think>Let me work it out.</think>So the answer is "
                                    rf"\boxed{{{gold}}}.")]
    if r"\frac" in gold:
        forms.append(("dfrac", rf"\boxed{{{gold.replace(chr(92) + 'frac', chr(92) + 'dfrac')}}}"))
    if " " in gold:
        forms.append(("no-spaces", rf"\boxed{{{gold.replace(' ', '')}}}"))
    else:
        forms.append(("spaced", rf"\boxed{{{' '.join(re.findall(r'[^+=]+|[+=]', gold))}}}"))
    if "(" in gold and r"\left" not in gold:
        bracketed = gold.replace("(", r"\left(").replace(")", r"\right)")
        forms.append(("left-right", rf"\boxed{{{bracketed}}}"))
    twin = to_unicode(gold)
    if twin != gold:
        forms.append(("unicode", rf"\boxed{{{twin}}}"))
        forms.append(("unicode-bare", f"Answer: {twin}"))
    return forms


def _scientific(n: int) -> list[str]:
    """``m \\times 10^{k}`` spellings of ``n`` (mantissa of at most 3 digits, k >= 4)."""
    if n < 10_000:
        return []
    k = len(str(n)) - 1
    mantissa = n / 10**k
    digits = str(n).rstrip("0")
    if len(digits) > 3:
        return []
    m = f"{mantissa:.{len(digits) - 1}f}" if len(digits) > 1 else str(int(mantissa))
    out = [rf"{m} \times 10^{{{k}}}", f"{m}×10^{k}", rf"{m} \cdot 10^{k}"]
    if m == "1":
        out.append(f"10^{{{k}}}")
    return out


def number_forms(gold: str, question: str) -> list[tuple[str, str]]:
    """(notation, completion) for an integer gold."""
    n = int(gold)
    forms = [("boxed", rf"\boxed{{{n}}}"), ("math-dollars", rf"$\boxed{{{n}}}$"),
             ("point-zero", rf"\boxed{{{n}.0}}"), ("marker", f"The answer is {n}."),
             ("final-answer-line", f"Final answer: {n}"), ("gsm8k-hash", f"#### {n}"),
             ("bold-answer", f"**Answer:** {n}"),
             ("reasoning-then-box", rf"<think>Working it out.</think>The result is \boxed{{{n}}}.")]
    if n >= 0:
        forms += [("dollar-sign", rf"\boxed{{\${n}}}"), ("unit-label", rf"\boxed{{{n}\text{{ units}}}}"),
                  ("noun-label", rf"\boxed{{{n} \text{{ apples}}}}")]
    else:
        forms.append(("unicode-minus", rf"\boxed{{−{-n}}}"))
    if abs(n) >= 1000:
        forms.append(("thousands-separator", rf"\boxed{{{n:,}}}"))
        forms.append(("thousands-braces", rf"\boxed{{{n:,}}}".replace(",", "{,}")))
    if n >= 1000 and n % 1000 == 0:
        k = n // 1000
        forms += [("scale-word", rf"\boxed{{{k}\text{{ thousand}}}}"),
                  ("scale-word-unit", rf"\boxed{{{k}\text{{ thousand dollars}}}}"),
                  ("scale-word-prose", rf"\boxed{{{k} thousand dollars}}")]
    if n >= 100_000 and n % 100_000 == 0:
        forms.append(("scale-million", rf"\boxed{{{n / 10**6:g}\text{{ million}}}}"))
    for i, sci in enumerate(_scientific(n)):
        forms.append((f"scientific-{i}", rf"\boxed{{{sci}}}"))
    if "percent" in question.lower() and n >= 0:
        forms.append(("percent-sign", rf"\boxed{{{n}\%}}"))
    return forms


# ---------------------------------------------------------------- hand-written

# (pack, question, gold, completion, notation): forms no rewriting of a gold produces
HAND_WRITTEN: list[tuple[str, str, str, str, str]] = [
    ("math500", r"Simplify $\sqrt{20}$.", r"2\sqrt{5}", r"\boxed{2√5}", "unicode-root"),
    ("math500", r"Simplify $\sqrt{20}$.", r"2\sqrt{5}", "The answer is 2√5.", "unicode-root"),
    ("math500", r"Rationalize $\frac{1}{\sqrt{3}}$.", r"\frac{\sqrt{3}}{3}", r"\boxed{√3/3}", "unicode-root"),
    ("math500", r"Rationalize $\frac{1}{\sqrt{3}}$.", r"\frac{\sqrt{3}}{3}", r"\boxed{(√3)/3}", "unicode-root"),
    ("math500", r"Rationalize $\frac{1}{\sqrt{3}}$.", r"\frac{\sqrt{3}}{3}", r"\boxed{\frac{√3}{3}}", "unicode-root"),
    ("math500", "Solve $x - 5 > 0$.", r"(5, \infty)", r"\boxed{(5, ∞)}", "unicode-interval"),
    ("math500", "Solve $x - 5 > 0$.", r"(5, \infty)", r"\boxed{(5,∞)}", "unicode-interval"),
    ("math500", "Solve $(x-2)(x-3) > 0$.", r"(-\infty, 2) \cup (3, \infty)", r"\boxed{(-∞, 2) ∪ (3, ∞)}",
     "unicode-union"),
    ("math500", "Solve $(x-2)(x-3) > 0$.", r"(-\infty, 2) \cup (3, \infty)", r"\boxed{(−∞, 2) ∪ (3, +∞)}",
     "unicode-union"),
    ("math500", "Halve 1.", r"\frac{1}{2}", r"\boxed{½}", "vulgar-fraction"),
    ("math500", "What is 5/2?", r"\frac{5}{2}", r"\boxed{2½}", "vulgar-mixed-number"),
    ("math500", "Three quarters?", r"\frac{3}{4}", r"\boxed{¾}", "vulgar-fraction"),
    ("math500", r"Simplify $3\pi$.", r"3\pi", r"\boxed{3π}", "unicode-pi"),
    ("math500", r"Write $2\sqrt{3}\pi$.", r"2\pi\sqrt{3}", r"\boxed{2√3·π}", "unicode-dot"),
    ("math500", "Find x.", r"x \leq 3", r"\boxed{x ≤ 3}", "unicode-relation"),
    ("math500", "Find x.", r"x \geq -2", r"\boxed{x ≥ −2}", "unicode-relation"),
    ("math500", "Expand.", "x^2+1", r"\boxed{x²+1}", "unicode-superscript"),
    ("math500", "Expand.", "x^3-2x", r"\boxed{x³ − 2x}", "unicode-superscript"),
    ("math500", "Find the roots.", r"1 \pm \sqrt{2}", r"\boxed{1 ± √2}", "unicode-pm"),
    ("math500", "Find the cube root.", r"\sqrt[3]{2}", r"\boxed{∛2}", "unicode-cube-root"),
    ("math500", "Simplify.", r"\frac{\sqrt{2}}{2}", r"\boxed{√2/2}", "unicode-root"),
    ("math500", "Simplify.", r"3\sqrt{2}", r"\boxed{3√(2)}", "unicode-root"),
    ("math500", "Find the difference.", "p - q", r"\boxed{-q+p}", "letter-expression"),
    ("math500", "Find the difference.", "p - q", r"\boxed{p-q}", "letter-expression"),
    ("math500", "Find the difference.", "a-b", r"\boxed{-(b-a)}", "letter-expression"),
    ("math500", "How many?", "1000000", r"\boxed{10^6}", "scientific"),
    ("math500", "How many?", "1000000", r"\boxed{10^{6}}", "scientific"),
    ("math500", "How many?", "1000000", r"\boxed{1 \times 10^6}", "scientific"),
    ("math500", "How many?", "2500000", r"\boxed{2.5\times10^{6}}", "scientific"),
    ("math500", "How small?", "0.00001", r"\boxed{10^{-5}}", "scientific"),
    ("math500", "Multiply.", "-50", r"\boxed{-50}", "negative"),
    ("math500", "Negate.", "15x-80", r"\boxed{-(80-15x)}", "factored-sign"),
    ("math500", "Negate.", "15x-80", r"\boxed{-80+15x}", "reordered"),
    ("math500", "Multiply out.", "90", r"\boxed{90}", "plain"),
    ("math500", "Find it.", r"\frac{1}{2}", r"\boxed{1/2}", "slash-fraction"),
    ("math500", "Find it.", r"\frac{1}{2}", r"\boxed{0.5}", "decimal"),
    ("math500", "Find it.", r"-\frac{3}{4}", r"\boxed{−¾}", "vulgar-fraction"),
    ("math500", "Find the point.", "(1, -2)", r"\boxed{(1, −2)}", "unicode-minus"),
    ("math500", "Find the set.", r"\{1, 2\}", r"\boxed{\{1, 2\}}", "set"),
    ("math500", "Find the interval.", "[0, 1)", r"\boxed{[0, 1)}", "interval"),
    ("math500", "Angle?", r"30^\circ", r"\boxed{30°}", "unicode-degree"),
    ("math500", "Multiply.", r"6\sqrt{5}", r"\boxed{6\sqrt{5}}", "plain"),
    ("math500", "Area?", r"4\pi", r"\boxed{4\pi \text{ square units}}", "unit-label"),
    ("math500", "Find k.", "k = 4", r"\boxed{k=4}", "assignment"),
    ("math500", "Solve.", r"x = \frac{1}{3}", r"\boxed{x = ⅓}", "vulgar-fraction"),
    ("gsm8k", "How much money, in dollars?", "8000", r"\boxed{8\text{ thousand dollars}}", "scale-word-unit"),
    ("gsm8k", "How much money, in dollars?", "8000", r"\boxed{8 \text{ thousand}}", "scale-word"),
    ("gsm8k", "How much money, in dollars?", "8000", r"\boxed{\$8\text{ thousand}}", "scale-word"),
    ("gsm8k", "How much money, in dollars?", "8000", r"\boxed{8{,}000}", "thousands-braces"),
    ("gsm8k", "How much money, in dollars?", "8000", r"\boxed{8 000}", "thousands-space"),
    ("gsm8k", "How much money, in dollars?", "2500000", r"\boxed{2.5\text{ million dollars}}", "scale-million"),
    ("gsm8k", "How much money, in dollars?", "1000000", r"\boxed{10^6}", "scientific"),
    ("gsm8k", "What percent?", "18", r"\boxed{18\%}", "percent-sign"),
    ("gsm8k", "What percent?", "18", r"\boxed{18 \text{ percent}}", "percent-word"),
    ("gsm8k", "What percent?", "18", "The answer is 18%.", "percent-sign"),
    # spacing, named values, intervals as inequalities, other fraction and unit notations,
    # labels beside the answer
    ("math500", "How many?", "18", r"\boxed{18\,}", "thin-space"),
    ("math500", "How many?", "10", r"\boxed{10\,}", "thin-space"),
    ("math500", "How many?", "10", r"\boxed{\;10\;}", "thin-space"),
    ("math500", "Find $x$ if $x - 3 = 15$.", "18", r"\boxed{x = 18}", "named-value"),
    ("math500", "Find $x$ if $x - 3 = 15$.", "18", r"\boxed{18 = x}", "named-value"),
    ("gsm8k", "Find $x$ if $x - 3 = 15$.", "18", r"\boxed{x = 18}", "named-value"),
    ("math500", "Find the interval.", "[0, 1)", r"\boxed{0 \le x < 1}", "inequality-for-interval"),
    ("math500", "Find the interval.", r"[2, \infty)", r"\boxed{x \geq 2}", "inequality-for-interval"),
    ("math500", "Find the interval.", r"(-\infty, 3]", r"\boxed{x \le 3}", "inequality-for-interval"),
    ("math500", "Find it.", r"\frac{1}{2}", r"\boxed{{1 \over 2}}", "infix-fraction"),
    ("math500", "Find it.", r"\frac{3}{4}", r"\boxed{3 \over 4}", "infix-fraction"),
    ("math500", "Find it.", r"\frac{1}{2}", r"\boxed{\nicefrac{1}{2}}", "nicefrac"),
    ("math500", "How long?", r"18\text{ cm}", r"\boxed{18\text{ centimeters}}", "same-unit"),
    ("math500", "How many lakh?", "1800000", r"\boxed{18\text{ lakh}}", "scale-lakh"),
    ("gsm8k", "How many pairs of socks?", "18", r"\boxed{18\text{ pairs}}", "group-word-asked"),
    ("gsm8k", "How many degrees colder?", "-5", r"\boxed{−5}", "unicode-minus"),
    ("gsm8k", "How many?", "42", r"\boxed{４２}", "full-width-digits"),
    ("gsm8k", "How many?", "42", "<think>6 · 7 = 42</think>\n\\boxed{42}", "reasoning-then-box"),
    ("gsm8k", "How many eggs?", "24", r"\boxed{24\text{ eggs}}", "noun-label"),
    ("gsm8k", "How long, in hours?", "3", r"\boxed{3 \text{ hours}}", "unit-label"),
    ("gsm8k", "How many?", "7", r"\boxed{7}\text{ people}", "label-after-box"),
    # round 5 (issue 43's hidden 2,332; classes found by rewriting every MATH gold): a named
    # quantity then its value, bold and braced answers, other degree, base, ratio and time
    # notations, layout inside the box, an exact value then its decimal
    ("math500", r"Find $m+n$.", "23", r"\boxed{m + n = 23}", "named-quantity"),
    ("math500", r"What is $A+B+C+D$?", "22", r"\boxed{A+B+C+D = 22}", "named-quantity"),
    ("math500", r"Find $\cos A$.", r"\frac{\sqrt{5}}{5}", r"\boxed{\cos A = \frac{\sqrt{5}}{5}}",
     "named-quantity"),
    ("math500", r"Find $f(-10)$.", "-25", r"\boxed{f(-10) = -25}", "named-quantity"),
    ("math500", r"Find the measure of $\angle BAC$.", r"35^\circ", r"\boxed{m\angle BAC = 35^\circ}",
     "named-angle"),
    ("math500", r"Find the measure of $\angle ABC$.", r"50^\circ", r"\boxed{\angle ABC = 50^\circ}",
     "named-angle"),
    ("math500", r"Find $[\triangle ACD]$.", "28", r"\boxed{[\triangle ACD] = 28}", "named-area"),
    ("math500", "Find it.", r"\frac{3}{7}", r"\boxed{\mathbf{\frac{3}{7}}}", "bold"),
    ("math500", "Find it.", r"\sqrt{17}", r"\boxed{\boldsymbol{\sqrt{17}}}", "bold"),
    ("math500", "Angle?", r"120^\circ", r"\boxed{\bm{120^\circ}}", "bold"),
    ("math500", "Angle?", r"20^\circ", r"\boxed{{20^\circ}}", "braced"),
    ("math500", "How much?", "13800", r"\boxed{{13,\!800}}", "braced"),
    ("math500", "Angle?", r"55^\circ", r"\boxed{\color{blue}{55^\circ}}", "coloured"),
    ("math500", "Angle?", r"54^\circ", r"\boxed{54^o}", "degree-o"),
    ("math500", "Angle?", r"180^\circ", r"\boxed{180^{\mathrm{o}}}", "degree-o"),
    ("math500", "Express in base 9.", "40_9", r"\boxed{(40)_9}", "base-bracketed"),
    ("math500", "What ratio?", "1:1", r"\boxed{1 \colon 1}", "ratio-colon"),
    ("math500", "When?", r"9\text{ a.m.}", r"\boxed{9:00 AM}", "time-of-day"),
    ("math500", "When?", r"9\text{ a.m.}", r"\boxed{9\text{ AM}}", "time-of-day"),
    ("math500", "Find the cube root.", r"\sqrt[3]{2}", r"\boxed{\sqrt[3]2}", "root-one-token"),
    ("math500", "How many?", "504", r"\boxed{\ensuremath{504}}", "layout-in-box"),
    ("math500", "How many?", "1275", r"\boxed{\hspace{1mm}1275}", "layout-in-box"),
    ("math500", "Find it.", r"\frac{16}{65}", r"\boxed{\text{Answer: } \frac{16}{65}}", "layout-in-box"),
    ("math500", "Find it.", r"\frac{128}{75}", r"\boxed{\frac{128}{75} \approx 1.7067}",
     "exact-then-decimal"),
    ("math500", "Find it.", r"2\sqrt{3}", r"\boxed{2\sqrt{3} \approx 3.464}", "exact-then-decimal"),
    ("math500", "How many?", "10000", r"\boxed{10\,000}", "thousands-thin-space"),
    ("math500", "Express as a common fraction.", r"-\frac{1}{7}", r"\boxed{-1 \div 7}", "div-fraction"),
    ("math500", "What area?", r"135\text{ square feet}", r"\boxed{135\ \mathrm{square\ feet}}",
     "mathrm-label"),
    # set-builder notation, the real line, a union as "or"
    ("math500", "Solve the inequality.", r"(2, \infty)", r"\boxed{\{x \mid x > 2\}}", "set-builder"),
    ("math500", "Solve the inequality.", r"(2, \infty)", r"\boxed{\{x : x>2\}}", "set-builder"),
    ("math500", "Solve the inequality.", r"[2, \infty)",
     r"\boxed{\{x \in \mathbb{R} \mid x \geq 2\}}", "set-builder"),
    ("math500", "Solve the inequality.", r"(2, \infty)", r"\boxed{\left\{x \,\middle|\, x > 2\right\}}",
     "set-builder"),
    ("math500", "Find the domain.", r"(-\infty, \infty)", r"\boxed{\mathbb{R}}", "real-line"),
    ("math500", "Find the domain.", r"(-\infty,\infty)", r"\boxed{(-\infty, \infty)}", "real-line"),
    ("math500", "Find the domain.", r"(-\infty, \infty)", "The answer is all real numbers.", "real-line"),
    ("math500", "Find the domain.", r"(-\infty, \infty)", r"\boxed{\text{all real numbers}}", "real-line"),
    ("math500", "Find the domain.", r"(-\infty, \infty)", r"\boxed{x \in \mathbb{R}}", "real-line"),
    ("math500", "Find the domain.", r"(-\infty, \infty)", r"\boxed{ℝ}", "real-line"),
    ("math500", "Solve the inequality.", r"(-\infty, 2) \cup (3, \infty)", r"\boxed{x < 2 \text{ or } x > 3}",
     "union-as-or"),
    ("math500", "Solve the inequality.", r"(-\infty, 2) \cup (3, \infty)", r"\boxed{x<2 \text{ or } x>3}",
     "union-as-or"),
    ("math500", "Solve the inequality.", r"(-\infty, 2) \cup (3, \infty)",
     r"\boxed{x \in (-\infty,2)\cup(3,\infty)}", "union-as-or"),
    ("math500", "Solve the inequality.", r"(-\infty, 2] \cup [3, \infty)",
     r"\boxed{x \le 2 \text{ or } x \ge 3}", "union-as-or"),
    ("math500", "Solve the inequality.", r"(-\infty, 2) \cup (3, \infty)",
     r"\boxed{\{x \mid x < 2 \text{ or } x > 3\}}", "union-as-or"),
    ("gsm8k", "How many?", "18", "\\boxed{18}\n\nOr, to check: 9 + 9 = 18.", "check-after-box"),
    ("gsm8k", "How many?", "18", "The final answer is $\\boxed{18}$. I hope it is correct.",
     "check-after-box"),
]


# ---------------------------------------------------------------- building and grading


def _line(pack: str, task: dict[str, Any] | str, completion: str, notation: str, source: str,
          n: int) -> dict[str, Any]:
    line: dict[str, Any] = {"id": f"math-honest-{pack}-{notation}-{n}", "env": ENV,
                            "env_kwargs": {"pack": pack}}
    line["task_id" if isinstance(task, str) else "task"] = task
    line.update({"completion": completion, "class": notation, "source": source})
    return line


def build() -> list[dict[str, Any]]:
    import gymnasium as gym

    import envs  # noqa: F401  (registers the grpo/* envs)

    lines: list[dict[str, Any]] = []
    counter: Counter[str] = Counter()

    def add(pack: str, task: dict[str, Any] | str, completion: str, notation: str, source: str) -> None:
        key = f"{pack}-{notation}"
        lines.append(_line(pack, task, completion, notation, source, counter[key]))
        counter[key] += 1

    def some(forms: list[tuple[str, str]], i: int) -> list[tuple[str, str]]:
        """Every special notation, and one of the plain ones in turn (they are many)."""
        plain = [f for f in forms if f[0] in PLAIN]
        return [f for f in forms if f[0] not in PLAIN] + plain[i % len(plain):][:1]

    math500 = gym.make(ENV, pack="math500", split="test").unwrapped.pack
    tasks = [math500.task_at(s, i) for s in math500.manifest.splits for i in range(math500.size(s))]
    for i, task in enumerate(tasks):
        for notation, completion in some(expression_forms(str(task["answer"])), i):
            add("math500", task.id, completion, notation, SOURCE_GENERATED)
    math = gym.make(ENV, pack="math", split="train").unwrapped.pack  # the rest of MATH
    for i in range(math.size("train")):
        task = math.task_at("train", i)
        twin = to_unicode(str(task["answer"]))
        if twin != str(task["answer"]):
            add("math", task.id, rf"\boxed{{{twin}}}", "unicode", SOURCE_GENERATED)
    gsm8k = gym.make(ENV, pack="gsm8k", split="test").unwrapped.pack
    tasks = [gsm8k.task_at(s, i) for s in gsm8k.manifest.splits for i in range(gsm8k.size(s))]
    sample = {t.id for t in random.Random(31).sample(tasks, GSM8K_SAMPLE)}
    for i, task in enumerate(tasks):
        forms = some(number_forms(str(task["answer"]), str(task["question"])), i)
        if task.id not in sample:  # every gold for the rarer notations
            forms = [f for f in forms if f[0].startswith(RARE)]
        for notation, completion in forms:
            add("gsm8k", task.id, completion, notation, SOURCE_GENERATED)
    arith = gym.make(ENV, pack="arith", split="test").unwrapped.pack
    for i in range(0, arith.size("test"), ARITH_EVERY):
        task = arith.task_at("test", i)
        for notation, completion in some(number_forms(str(task["answer"]), ""), i)[-2:]:
            add("arith", task.id, completion, notation, SOURCE_GENERATED)
    for k, (pack, question, gold, completion, notation) in enumerate(HAND_WRITTEN):
        field = "question" if pack == "gsm8k" else "problem"
        add(pack, {"id": f"hand-{k}", field: question, "answer": gold}, completion, notation,
            SOURCE_HAND)
    return lines


def grade(lines: list[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(line, info) for every line, graded by the env the line names."""
    import gymnasium as gym

    import envs  # noqa: F401
    from tasks.pack import Task

    made: dict[str, Any] = {}
    out = []
    for line in lines:
        kwargs = line.get("env_kwargs", {})
        key = json.dumps(kwargs, sort_keys=True)
        if key not in made:
            made[key] = gym.make(line["env"], split="test", **kwargs).unwrapped
        env = made[key]
        task = line.get("task_id") or Task(f"{env.pack.name}/{line['task']['id']}", "test",
                                           line["task"])
        _, info = env.score(task, line["completion"])
        out.append((line, info))
    return out


def read(path: Path = CORPUS) -> list[dict[str, Any]]:
    return [json.loads(t) for t in path.read_text(encoding="utf-8").splitlines() if t.strip()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="regenerate the corpus file")
    ap.add_argument("--corpus", type=Path, default=CORPUS)
    args = ap.parse_args()
    if args.write:
        lines = build()
        args.corpus.write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines),
                               encoding="utf-8")
        print(f"wrote {len(lines)} lines to {args.corpus}")
        return
    graded = grade(read(args.corpus))
    refused = [(line, info) for line, info in graded if not info["passed"]]
    rate = 1 - len(refused) / len(graded)
    print(f"honest forms credited: {len(graded) - len(refused)}/{len(graded)} ({100 * rate:.2f}%)")
    by_class = Counter(line["class"] for line, _ in refused)
    print("refused by notation:", dict(by_class.most_common()))
    for line, info in refused:
        print(f"   {line['id']}: {line['completion'][:90]!r} -> {info['reason']} "
              f"{info.get('undone', '') or info.get('error', '')}")


if __name__ == "__main__":
    main()
