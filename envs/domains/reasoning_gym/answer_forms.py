"""The form of each reasoning-gym answer that a scorer reads as data, checked before it sees it.

``answer_grammar`` keeps text away from the scorers that evaluate it. The other scorers (about
fifty: sudoku, word_ladder, knights_knaves, ...) read the answer as data (``int``, ``float``,
``json.loads``, string compares, regexes), each in its own way and often leniently: some credit a
number found in extra text, some pay partial credit for any non-empty string. So each of them
declares here the type of its answer (a number, a word, a sentence, a list, a grid, a JSON value,
or a move list in the task's notation) and an answer that is not of that type is a wrong answer
(``not_in_grammar``) that no scorer sees. The forms follow what the task asks for, not the gold's
exact spelling: spacing and case are free where the scorer lets them be.

Some scorers also pay answers of the right form that are not the answer: game_of_life_halting's
tests ``bool(answer) == bool(gold)``, so any non-empty text (``False`` for ``True``) is paid, and
coin_flip's pays a prefix of the gold's digits in full (``0`` or ``0.19`` for ``0.193359375``), and
the per-letter partial credit of figlet_font and spell_backward adds up to a full score for a wrong
word. A task whose answer is one value (``VALUES``: a truth value, a probability, a word) is
therefore right only
when the answer's value is the gold's (``same_value``), whatever its scorer says; a grid of cells
is written cell by cell in its cells' own notation (kakurasu's scorer keeps the ``0``/``1``
characters of a line and drops the rest, so ``01 0 0`` or ``0 +0 1`` were read as other rows).

The forms do not change which tasks a pack draws (unlike ``answer_grammar``'s, whose golds must be
safe text): every gold of every task must be in its form (``tests/test_reasoning_gym_forms.py``).
Standard library only.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from fractions import Fraction
from typing import Any

from envs.domains.reasoning_gym.answer_grammar import Refused

Form = Callable[[str], None]

_NUM = r"[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?"
_INT = r"[-+]?[0-9]+"
#: An integer cell of a grid as the grids' golds write it: no sign but a minus, no leading zero
#: (a scorer that reads ``+5`` or ``05`` as 5, or a character at a time, reads other notations).
_CELL = r"-?(?:0|[1-9][0-9]*)"
_WORD = r"[^\W\d_][\w'\-]*"  # letters first (any script), then letters, digits, ' and -
#: One line of printable text with a letter or digit: a sentence, a name, a phrase.
_SENTENCE = re.compile(r"[^\x00-\x1f\x7f]*[A-Za-z0-9][^\x00-\x1f\x7f]*")


def _match(pattern: str, what: str, flags: int = 0) -> Form:
    compiled = re.compile(pattern, flags)

    def check(answer: str) -> None:
        if compiled.fullmatch(answer.strip()) is None:
            raise Refused(f"not {what}")
    return check


def _grid(cell: str, what: str) -> Form:
    """Rows of cells separated by spaces, one row a line (a trailing space is free)."""
    row = re.compile(rf"{cell}(?:[ \t]+{cell})*")

    def check(answer: str) -> None:
        rows = answer.strip().splitlines()
        if not rows or not all(row.fullmatch(r.strip()) for r in rows):
            raise Refused(f"not {what}")
    return check


def _lines(pattern: str, what: str, flags: int = 0) -> Form:
    line = re.compile(pattern, flags)

    def check(answer: str) -> None:
        rows = [r.strip() for r in answer.strip().splitlines() if r.strip()]
        if not rows or not all(line.fullmatch(r) for r in rows):
            raise Refused(f"not {what}")
    return check


def _json(shape: Callable[[Any], bool], what: str) -> Form:
    def check(answer: str) -> None:
        try:
            value = json.loads(answer)
        except (ValueError, RecursionError):
            raise Refused(f"not JSON ({what})") from None
        if not shape(value):
            raise Refused(f"not {what}")
    return check


def _either(*forms: Form) -> Form:
    def check(answer: str) -> None:
        errors = []
        for form in forms:
            try:
                form(answer)
                return
            except Refused as exc:
                errors.append(str(exc))
        raise Refused(" or ".join(errors))
    return check


def _list_of(item: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda v: isinstance(v, list) and all(item(x) for x in v)


def _is_int(v: Any) -> bool:
    return type(v) is int


def _is_str(v: Any) -> bool:
    return isinstance(v, str)


_JUG_MOVE = re.compile(r"(?:fill|empty) [A-Z]|pour [A-Z]->[A-Z]")


def _sentence(answer: str) -> None:
    if "\n" in answer.strip() or _SENTENCE.fullmatch(answer.strip()) is None:
        raise Refused("not one line of text")


# -- the answer types ---------------------------------------------------------------------------
NUMBER = _match(_NUM, "a number")
#: A number or a fraction of integers (coin_flip's scorer reads ``Fraction(answer)``).
NUMBER_OR_FRACTION = _match(rf"{_NUM}|{_INT}\s*/\s*[0-9]+", "a number or a fraction")
INTEGER = _match(_INT, "an integer")
NUMBERS = _match(rf"(?:{_NUM}(?:\s*,\s*{_NUM})*)?", "numbers separated by commas")
INTEGERS_LINE = _match(rf"{_INT}(?:\s+{_INT})*", "integers separated by spaces")
WORD = _match(_WORD, "a word")
WORDS = _match(rf"{_WORD}(?:\s+{_WORD})*", "words")
WORD_LIST = _match(rf"{_WORD}(?:\s*,\s*{_WORD})*", "words separated by commas")
#: Tokens of any characters but spaces and commas (word_sorting sorts "1889", "_tête", "253d").
TOKEN_LIST = _match(r"[^\s,]+(?:\s*,\s*[^\s,]+)*", "items separated by commas")
SENTENCE: Form = _sentence
INTEGER_GRID = _grid(_CELL, "a grid of integers")
BIT_GRID = _grid(r"[01]", "a grid of 0s and 1s")
NUMBER_GRID = _grid(_NUM, "a grid of numbers")
BOOLEAN = _match(r"True|False", "True or False")

#: The form of each scorer task's answer (reasoning-gym 0.1.25), by task.
FORMS: dict[str, Form] = {
    "ab": _match(r"(?:[#]?[AB][#]?(?:\s+[#]?[AB][#]?)*)?", "A/B tokens such as #A B#"),
    "advanced_geometry": _either(_match(rf"{_NUM}\s*°?", "a number"), _match(rf"\(\s*{_NUM}\s*,\s*{_NUM}\s*\)|{_NUM}\s*,\s*{_NUM}",
                                                "a point (x, y)")),
    "arc_agi": INTEGER_GRID,
    "bitwise_arithmetic": _match(r"-?(?:0[xX][0-9a-fA-F]+|0[bB][01]+|0[oO][0-7]+|[0-9]+)",
                                 "an integer (0x.. hex allowed)"),
    "boxnet": _json(_list_of(lambda step: isinstance(step, dict) and all(
        _is_str(k) and _is_str(v) for k, v in step.items())), "a JSON list of action plans"),
    "calendar_arithmetic": _either(INTEGER, WORD),
    "coin_flip": NUMBER_OR_FRACTION,
    "color_cube_rotation": WORD,
    "complex_arithmetic": _match(
        rf"(?:{_NUM}\s*[-+]\s*(?:{_NUM})?\s*\*?\s*[ij]|{_NUM}|[-+]?(?:{_NUM})?\s*\*?\s*[ij])",
        "a complex number a + bi"),
    "cryptarithm": _match(r"[A-Z]\s*=\s*[0-9](?:\s*,\s*[A-Z]\s*=\s*[0-9])*",
                          "letter=digit pairs such as A=1,B=2"),
    "emoji_mystery": SENTENCE,
    "family_relationships": WORDS,
    "figlet_font": WORD,
    "fraction_simplification": _match(
        r"\$?\s*(?:\\[dt]?frac\s*\{\s*-?[0-9]+\s*\}\s*\{\s*[0-9]+\s*\}|-?[0-9]+\s*/\s*[0-9]+)\s*\$?",
        "a fraction such as 3/4 or \\frac{3}{4}"),
    "futoshiki": _lines(r"[0-9_](?:\s*[<>]?\s*[0-9_])*|[\s∧∨^v]*", "a futoshiki board"),
    "game_of_life": _json(_list_of(_list_of(_is_int)), "a JSON grid of integers"),
    "game_of_life_halting": BOOLEAN,
    "graph_color": _json(lambda v: isinstance(v, dict) and all(
        _is_str(k) and _is_int(c) for k, c in v.items()), "a JSON map from vertex to colour"),
    "group_anagrams": _json(_list_of(_list_of(_is_str)), "a JSON list of lists of words"),
    # Each move exactly as the question spells it: the scorer reads a move's first two words,
    # so "fill A junk" or "pour B->A " were moves of the plan too.
    "jugs": _json(_list_of(lambda m: _is_str(m) and _JUG_MOVE.fullmatch(m) is not None),
                  "a JSON list of moves such as \"fill A\", \"pour A->B\""),
    "kakurasu": BIT_GRID,
    "knight_swap": _either(_match(r"No", "No"),
                           _json(_list_of(_is_str), "a JSON list of moves")),
    "knights_knaves": SENTENCE,
    "letter_jumble": SENTENCE,
    "manipulate_matrix": INTEGER_GRID,
    "mini_sudoku": INTEGER_GRID,
    "needle_haystack": WORDS,
    "palindrome_generation": WORD,
    "palindrome_partitioning": _json(_list_of(_list_of(_is_str)),
                                     "a JSON list of partitions"),
    "path_star": INTEGERS_LINE,
    "polynomial_equations": NUMBERS,
    "pool_matrix": NUMBER_GRID,
    "power_function": NUMBER,
    "prime_factorization": _match(r"[0-9]+(?:\s*[×x*]\s*[0-9]+)*",
                                  "primes joined by ×, such as 2 × 3 × 3"),
    "propositional_logic": _match(r"[A-Z()¬∧∨→↔\s]+", "a formula over the question's letters"),
    # Its scorer keeps the letters A-C and drops the rest: "C → D → B" was the sequence C → B.
    "quantum_lock": _match(r"[A-C](?:\s*(?:→|->)\s*[A-C])*", "buttons such as A → B → C"),
    "rearc": INTEGER_GRID,
    "rubiks_cube": _match(r"(?:[A-Za-z]+'?[0-9]*'?(?:\s+[A-Za-z]+'?[0-9]*'?)*)?",
                          "moves such as R U' F2"),
    "rush_hour": _match(r"[A-Z][+-][0-9]+(?:\s+[A-Z][+-][0-9]+)*", "moves such as A+1 B-2"),
    "sentence_reordering": SENTENCE,
    "shortest_path": _match(r"(?:up|down|left|right)(?:\s+(?:up|down|left|right))*|infeasible",
                            "moves such as up left, or infeasible", re.I),
    "sokoban": _match(r"[UDLRudlr]+", "moves in U, D, L, R"),
    "spell_backward": WORD,
    "sudoku": INTEGER_GRID,
    "survo": INTEGER_GRID,
    "time_intervals": _match(r"-?[0-9]+\s+days?(?:,\s*[0-9]+:[0-9]{2}(?::[0-9]{2}(?:\.[0-9]+)?)?)?"
                             r"|[0-9]+:[0-9]{2}(?::[0-9]{2}(?:\.[0-9]+)?)?",
                             "N days, a duration HH:MM[:SS], or both"),  # "-1 days, 16:01:00" too
    "tower_of_hanoi": _lines(r"Move disk [0-9]+ from Peg [0-9]+ to Peg [0-9]+",
                             "lines such as Move disk 1 from Peg 1 to Peg 3", re.I),
    "tsumego": _match(r"[A-Za-z][0-9]+", "a board point such as D4"),
    "word_ladder": WORD_LIST,
    "word_sorting": TOKEN_LIST,
    "zebra_puzzles": WORDS,
}


# -- one right value --------------------------------------------------------------------------
def _same_word(answer: str, entry: dict[str, Any]) -> bool:
    return answer.strip() == str(entry.get("answer", "")).strip()


#: The largest power of ten a one-value number may write (``Fraction("1e-999999999")`` builds
#: a billion-digit integer: a hang in the grader, before any scorer's time limit).
MAX_EXPONENT = 100
_EXPONENT = re.compile(r"[eE]([-+]?[0-9]+)")


def _fraction(text: str) -> Fraction:
    """A number or a fraction of integers (``NUMBER_OR_FRACTION``) as an exact fraction;
    ``ValueError`` for an exponent past ``MAX_EXPONENT``."""
    written = "".join(text.split())
    exponent = _EXPONENT.search(written)
    if exponent is not None and abs(int(exponent.group(1))) > MAX_EXPONENT:
        raise ValueError("an exponent too large")
    return Fraction(written)


def _same_probability(answer: str, entry: dict[str, Any]) -> bool:
    """coin_flip: the exact probability (``metadata.rational``, k/2^n) or the gold as written
    (that probability rounded to ten significant digits), by value: ``0.375``, ``3/8`` and
    ``0.3750`` alike; a prefix of the gold's digits, or a rounding of it, is another value. A
    fraction is in lowest terms (``6/16`` is work left undone, as math's simplest-form rule has
    it)."""
    try:
        if "/" in answer:  # a fraction in lowest terms, as every notation's simplest form
            top, bottom = (int(x) for x in "".join(answer.split()).split("/"))
            if bottom <= 1 or math.gcd(top, bottom) != 1:
                return False
        value = _fraction(answer)
        rational = (entry.get("metadata") or {}).get("rational") or {}
        exact = ([Fraction(int(rational["numerator"]), int(rational["denominator"]))]
                 if {"numerator", "denominator"} <= set(rational) else [])
        return value in exact + [_fraction(str(entry["answer"]))]
    except (ValueError, ZeroDivisionError, KeyError, TypeError):
        return False


def _same_word_any_case(answer: str, entry: dict[str, Any]) -> bool:
    """The gold word, in any case and spacing (as figlet_font's and spell_backward's scorers
    compare), never their per-letter partial credit: figlet_font's pays 0.1 a letter in place,
    so a word of ten letters or more with one wrong was paid in full (min_word_len=11); and
    spell_backward's adds 1/len a letter, whose float sum for a 6-letter gold is 0.9999999999999999,
    which its ``== 1.0`` penalty misses: the gold with letters added after it was paid."""
    def plain(text: str) -> str:
        return "".join(text.split()).lower()
    return plain(answer) == plain(str(entry.get("answer", "")))


def _same_words_any_case(answer: str, entry: dict[str, Any]) -> bool:
    """The gold's words, in order, in any case (letter_jumble's scorer pays a word at a time in
    place, up to 1.0: the gold followed by more words was paid in full)."""
    return answer.lower().split() == str(entry.get("answer", "")).lower().split()


#: Tasks whose answer is one value, the gold's, and how an answer's value is compared with it.
VALUES: dict[str, Callable[[str, dict[str, Any]], bool]] = {
    "coin_flip": _same_probability,
    "game_of_life_halting": _same_word,  # True or False (BOOLEAN), as the question asks
    "figlet_font": _same_word_any_case,
    "letter_jumble": _same_words_any_case,
    "spell_backward": _same_word_any_case,
}


def same_value(task: str | None, answer: str, entry: dict[str, Any]) -> bool:
    """Whether ``answer`` (of its task's form) has the gold's value, for a task in ``VALUES``;
    ``True`` for the others (their scorer, or their grammar, decides)."""
    same = VALUES.get(task or "")
    return same is None or same(answer, entry)


def check_form(task: str | None, answer: str) -> None:
    """``Refused`` when ``answer`` is not of the form of ``task``'s answer (a task with no form
    here: printable text only, checked by ``answer_grammar``)."""
    form = FORMS.get(task or "")
    if form is not None:
        form(answer)
