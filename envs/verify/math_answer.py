"""What counts as an answer, beyond having the gold's value.

The equivalence checker credits any expression with the gold's value, so on a task whose
question *is* an expression ("What is 2 + 6?") correctness would be free: ``\\boxed{2 + 6}``
has the value 8. Two rules close that, both string-level (no sympy, linear time):

- **Answer types.** A ``number`` answer is a literal: an integer, decimal or fraction in
  lowest terms (``156``, ``156.0``, ``1,560``, ``-3/4``, ``\\frac{3}{4}``, ``50%``, units and
  ``\\$`` dropped), never an expression to evaluate (``90+66``, ``2\\cdot 78``,
  ``\\sqrt{64}``, ``\\frac{14850}{2}``).
  An ``expression`` answer may be any value the checker understands.
- **Restatements.** An answer that is an expression of the question, give or take brackets,
  operand order, identity terms (``+0``, ``\\cdot 1``) and an ``= value`` tail, restates the
  question instead of answering it, unless the gold itself has that form ("Expand
  (x+1)^2" has a gold that contains the question's tokens, so such answers are judged on
  value alone). A completion whose answer was read as its last number is held to the same
  rule through the computation that number ends: in "I don't know, 0 + 5" the 5 closes a
  restatement of "What is 0 + 5?", not an answer to it.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from functools import lru_cache

from envs.verify.math_names import name_like, names_quantity
from envs.verify.math_normalize import HEDGE_WORDS, NUMBER_WORDS, OPERATION_WORDS, normalize_answer

ANSWER_TYPES = ("number", "expression")

_DECIMAL_LITERAL = re.compile(r"^[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:\s*\\%)?$")
_FRACTION_LITERAL = re.compile(
    r"^[+-]?(?:(\d+)\s*/\s*(\d+)|\\frac\s*\{\s*(-?\d+)\s*\}\s*\{\s*(\d+)\s*\})(?:\s*\\%)?$")


# Scientific notation (``math_simplest.SCIENTIFIC_MIN_EXPONENT``): 10^6, 2.5 \cdot 10^{4}.
_SCIENTIFIC_LITERAL = re.compile(
    r"^[+-]?(?:(\d(?:\.\d+)?)\s*(?:\\cdot|\*)\s*)?10\s*\^\s*(?:\{\s*([+-]?\d+)\s*\}|(\d))$")
SCIENTIFIC_MIN_EXPONENT = 4  # the same as math_simplest's (which imports sympy)


def is_number_literal(answer: str) -> bool:
    """``answer`` (as extracted) is a plain number once units and separators are dropped: an
    integer, a decimal, a fraction in lowest terms (``\\frac{14850}{2}`` is a division
    left to do, not a number), or a number in scientific notation (``10^6``,
    ``2.5\\times 10^{4}``; from the exponent 4 on, as the simplest-form rule has it)."""
    s = normalize_answer(answer)
    if _DECIMAL_LITERAL.match(s):
        return True
    sci = _SCIENTIFIC_LITERAL.match(s)
    if sci is not None:
        mantissa, exponent = sci.group(1), sci.group(2) or sci.group(3)
        return abs(int(exponent)) >= SCIENTIFIC_MIN_EXPONENT and (
            mantissa is None or mantissa[0] != "0")
    m = _FRACTION_LITERAL.match(s)
    if m is None:
        return False
    num, den = (int(g) for g in m.groups() if g is not None)
    return den > 1 and math.gcd(num, den) == 1


# ------------------------------------------------------------------------- hedges

# Whole words only, and never a command's name (\approx, \over, \underline).
_HEDGE = re.compile(rf"(?<![\\A-Za-z])(?:{HEDGE_WORDS})(?![A-Za-z])", re.I)
# "5 or", "or 5", and "or" just before a relation ("\text{3 or} = 3")
_DANGLING_OR = re.compile(r"(?<![\\A-Za-z])or\s*(?:$|[=<>])|^\s*or(?![A-Za-z])", re.I)
_NUMBER_WORD = re.compile(rf"(?<![\\A-Za-z])(?:{NUMBER_WORDS})(?![A-Za-z])", re.I)
# An approximation sign says "about" in symbols: "\approx 27" commits to no value either.
_APPROX = re.compile(r"\\(?:approx|thickapprox|approxeq|simeq|sim|thicksim|backsim|eqsim|"
                     r"lesssim|gtrsim)(?![A-Za-z])|[≈≃∼≲≳]")


# An exact value then its decimal ("\frac{128}{75} \approx 1.7067", "2\sqrt3 \approx 3.464"):
# one value written two ways, which the parser checks agree (``math_parse``); not "x \approx 3".
_EXACT_THEN_DECIMAL = re.compile(r"^(?!.*\\approx.*\\approx)(?=[^=<>]*[\d\\])"
                                 r"(?![A-Za-z]\s*\\approx)[^≈≃∼=<>]+?"
                                 r"\\approx\s*-?\d*\.\d+\s*$")


def _names(side: str) -> bool:
    """``side`` names a value rather than being one ("AB", "x_1", "f(x)", "|AB|"): then
    "\approx" says "about"."""
    return name_like(side) or names_quantity(side) or not re.search(r"\d|\\(?:pi|sqrt|frac)", side)


def hedge(answer: str) -> str | None:
    """The word that keeps ``answer`` from committing to one value, or ``None``.

    Text in an answer is dropped only when it labels the value (``15\\text{ apples}``); a
    hedge or a bound (``15\\text{ maybe sixteen}``, ``15\\text{ at most}``) or a second
    number in words (``15\\text{ sixteen}``) is not a label, and the answer is a hedge; so is
    an approximation sign (``\\approx 27``, ``x \\simeq 27``).
    """
    m = _APPROX.search(answer)
    if m is not None and not (_EXACT_THEN_DECIMAL.match(answer)
                              and not _names(answer[:answer.index("\\approx")])):
        return m.group(0)
    s = normalize_answer(answer)
    m = _HEDGE.search(s)
    if m is None and s.strip().lower() != "or":
        m = _DANGLING_OR.search(s)  # "5 or": an alternative left unsaid
    if m is None and re.search(r"\d", s):
        m = _NUMBER_WORD.search(s)
    return m.group(0) if m else None


_OPERATION_WORD = re.compile(rf"(?<![\\A-Za-z])(?:{OPERATION_WORDS})(?![A-Za-z])", re.I)


def operation_word(answer: str) -> str | None:
    """A word in a numeric answer that changes its value (``6\\text{ squared}``,
    ``0.3\\text{ repeating}``, ``3\\text{ tenths}``), or ``None``. Such text is no label: the
    number before it is not the answer, and the checker does not compute words."""
    s = normalize_answer(answer)
    if not re.search(r"\d", s):
        return None
    m = _OPERATION_WORD.search(s)
    return m.group(0) if m else None


# Nouns that count in groups: "18 pairs" is 36 of the things the question may count. Such a word
# is a label only where the question counts in it ("How many pairs ...?").
_GROUP_NOUN = re.compile(r"(?<![\\A-Za-z])(pair|couple|trio|triple|set)s?(?![A-Za-z])", re.I)


def group_word(answer: str, question: str | None) -> str | None:
    """A word after a number that counts in groups (``18\\text{ pairs}``) and that the question
    does not use, or ``None``."""
    s = normalize_answer(answer)
    if not re.search(r"\d", s):
        return None
    for m in _GROUP_NOUN.finditer(answer):
        stem = m.group(1).lower()
        if question is None or not re.search(rf"(?<![A-Za-z]){stem}", question, re.I):
            return m.group(0)
    return None


# Right after the final box, an alternative: "\boxed{18} or 19", "\boxed{18}\text{ or maybe }19".
_ALTERNATIVE_AFTER = re.compile(
    r"[ \t,;]*(?:\$\s*)?(?:\\(?:text|mbox|textrm)\s*\{\s*)?"
    r"(?:or|maybe|perhaps|possibly|probably|approx(?:imately)?|about|around|roughly|nearly)\b"
    r"[^.\n]{0,40}?[\d\\$]", re.I)


def alternative_after_box(completion: str) -> str | None:
    """The alternative that follows the completion's last box, or ``None``: a box followed by
    "or 19" commits to no value (the box alone was read as the answer)."""
    from tasks.boxes import find_boxes

    boxes = find_boxes(completion[-MAX_QUESTION_CHARS:])
    if not boxes:
        return None
    m = _ALTERNATIVE_AFTER.match(completion[-MAX_QUESTION_CHARS:], boxes[-1].end)
    return m.group(0).strip() if m else None


_CHAIN_LITERAL = re.compile(r"^\s*[+-]?\d+(?:\.\d+)?\s*$")


def value_around_name(answer: str) -> str | None:
    """``19 = x = 18``: a name between two different numbers states two values (the chain was read
    as its last part, 18). A chain that starts with the name (``x = 5 + 6 = 11``) is a
    computation, read by its last part as Math-Verify does."""
    parts = answer.split("=")
    if len(parts) < 3:
        return None
    literals = [p.strip() for p in parts if _CHAIN_LITERAL.match(p)]
    named = [i for i, p in enumerate(parts) if re.search(r"[A-Za-z]", p)]
    first_literal = next((i for i, p in enumerate(parts) if _CHAIN_LITERAL.match(p)), None)
    if not named or first_literal is None or first_literal > named[0]:
        return None
    return answer if len({float(x) for x in literals}) > 1 else None


_ASSIGNED = re.compile(r"^\s*[A-Za-z](?:_\{?\w+\}?)?\s*=\s*(.+)$")


def assigned_literal(answer: str) -> bool:
    """``x = 18``: a number literal given as the value of a named variable."""
    m = _ASSIGNED.match(answer)
    return m is not None and "=" not in m.group(1) and is_number_literal(m.group(1))


# ------------------------------------------------------------------------- restatements

_OPS = {"+", "-", "*", "/", "^"}
# Commands that compute something from their arguments (unlike \pi or \infty).
_FUNCS = {"sqrt", "binom", "dbinom", "tbinom", "choose", "sin", "cos", "tan", "cot", "sec",
          "csc", "log", "ln", "exp", "sum", "prod", "int", "lfloor", "lceil", "floor", "ceil",
          "gcd", "lcm", "max", "min", "mod", "bmod", "pmod", "cdot"}
# What an answer may add to a question's expression and still only restate it.
_TRIVIAL = _OPS | {"0", "1"}
_TOKEN = re.compile(r"\d+(?:\.\d+)?|\\[A-Za-z]+|[A-Za-z]|[-+*/^]")
_CANON = [
    (re.compile(r"\\(?:cdot|times|ast)(?![A-Za-z])|×|∗|·"), "*"),
    (re.compile(r"\\div(?![A-Za-z])|÷"), "/"),
    (re.compile(r"\\[dt]?frac(?![A-Za-z])"), "/"),
    (re.compile(r"\\[dt]binom(?![A-Za-z])"), r"\\binom"),
    (re.compile(r"\\(?:left|right|big|Big|bigg|Bigg)(?![A-Za-z])"), ""),
    (re.compile(r"−|–"), "-"),
]
_RELATION = re.compile(r"=|<|>|\\(?:leq?|geq?|neq?|approx|equiv)(?![A-Za-z])|≤|≥|≠")
_MATH_SEGMENT = re.compile(r"\$\$(.+?)\$\$|(?<!\\)\$(.+?)(?<!\\)\$|\\\((.+?)\\\)|\\\[(.+?)\\\]", re.S)
_OPERAND = r"(?:\(\s*)*[+-]?\d+(?:[.,]\d+)*(?:\s*\))*"
_PROSE_EXPR = re.compile(rf"{_OPERAND}(?:\s*[-+*/×÷^]\s*{_OPERAND})+")
MAX_QUESTION_CHARS = 20_000


def _tokens(expr: str) -> Counter[str]:
    s = normalize_answer(expr)
    for pat, rep in _CANON:
        s = pat.sub(rep, s)
    return Counter(t.lstrip("\\") for t in _TOKEN.findall(s))


def _is_computation(tokens: Counter[str]) -> bool:
    operands = sum(n for t, n in tokens.items() if t not in _OPS and t not in _FUNCS)
    return operands >= 1 and any(t in _OPS or t in _FUNCS for t in tokens) and (
        operands >= 2 or any(t in _FUNCS for t in tokens))


@lru_cache(maxsize=4096)
def question_expressions(question: str) -> tuple[tuple[str, Counter[str]], ...]:
    """Token multisets of the computations written in ``question``: each side of each relation
    in its math segments, and arithmetic runs in its prose ("What is (14 - 6) × 3?")."""
    question = question[:MAX_QUESTION_CHARS]
    parts: list[str] = []
    prose = question
    for m in _MATH_SEGMENT.finditer(question):
        body = next(g for g in m.groups() if g is not None)
        parts += re.split(r",|;|\\text\{[^{}]*\}|\\(?:quad|qquad)", body)
        prose = prose.replace(m.group(0), " ")
    parts += [m.group(0) for m in _PROSE_EXPR.finditer(prose)]
    found: dict[str, Counter[str]] = {}
    for part in parts:
        for side in _RELATION.split(part):
            tokens = _tokens(side)
            if _is_computation(tokens) and tokens not in found.values():
                found[side.strip()] = tokens
    return tuple(found.items())


def _restates(answer: Counter[str], expr: Counter[str]) -> bool:
    """``answer`` holds all of ``expr`` and nothing else but identity terms and operators.
    Multiplication signs are ignored: ``(3+9)(14-6)`` writes the product of ``(3+9)×(14-6)``."""
    answer, expr = answer.copy(), expr.copy()
    del answer["*"], expr["*"]
    if expr - answer:
        return False
    return all(t in _TRIVIAL for t in answer - expr)


# A value named by letters alone ("m + n", "\cos A", "A+B+C+D", "\angle ABC") or a function at
# one number ("f(-10)"): the left side of "name = value" names what the question asks, and
# computes nothing (a side with a number in it, "2+6", still restates the question's sum).
_FUNCTION_AT = re.compile(r"^[A-Za-z]\s*\(\s*-?\d+(?:\.\d+)?\s*\)$")


def _names_a_quantity(side: str) -> bool:
    side = side.strip()
    return bool(side) and (not re.search(r"\d", side) or bool(_FUNCTION_AT.match(side)))


def restated_expression(answer: str, question: str, gold: str) -> str | None:
    """The question's computation that ``answer`` restates, as text, or ``None``.

    Each side of an equation in the answer is checked (``2+6=8`` restates ``2 + 6``); a
    computation that the gold itself restates does not
    count against the answer.
    """
    gold_tokens = _tokens(gold)
    exprs = [(text, e) for text, e in question_expressions(question)
             if not _restates(gold_tokens, e)]
    if not exprs:
        return None
    text = normalize_answer(answer)
    sides, relations = _RELATION.split(text), _RELATION.findall(text)
    for k, side in enumerate(sides):
        tokens = _tokens(side)
        if tokens == gold_tokens:
            continue
        if k == 0 and relations == ["="] and _names_a_quantity(side):
            continue  # "m + n = 23": the asked quantity's name, then its value
        for text, expr in exprs:
            if _restates(tokens, expr):
                return text
    return None


# The arithmetic written just before a number: digits, operators, brackets and spaces, no "="
# (after an "=" the number is a result, not an operand). Searched in a bounded window.
_OPERAND_RUN = re.compile(r"(?:[0-9.,\s()+\-−*/×÷·^]|\\times|\\cdot)*$")
_OPERATOR = re.compile(r"[+\-−*/×÷·^]|\\times|\\cdot")
RUN_WINDOW = 200


def restated_before(text: str, number: str, question: str, gold: str) -> str | None:
    """The question's computation that the last ``number`` in ``text`` closes (``0 + 5`` in
    "I don't know, 0 + 5" for "What is 0 + 5?"), or ``None``."""
    end = text.rfind(number)
    if end < 0:
        return None
    end += len(number)
    window = text[max(0, end - RUN_WINDOW):end]
    run = _OPERAND_RUN.search(window)
    expr = run.group(0).strip(" \t\n,.") if run else ""
    if not _OPERATOR.search(expr):
        return None
    return restated_expression(expr, question, gold)
