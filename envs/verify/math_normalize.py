"""String-level normalization of one answer (no sympy; shared by parent and worker).

Drops what never changes the value (spacing commands, ``\\left``/``\\right``, units,
word labels such as ``81\\text{ teachers}``, ``\\$``, degree marks), canonicalizes
commands (``\\dfrac`` -> ``\\frac``, ``>=`` -> ``\\geq``) and digit grouping
("7,425,000", "1 000", ``14{,}916``) so that the parser and the parent's fast paths see
one spelling per value.

It also holds the one rule for decimals against exact values (``decimal_matches``), used
by the parent's fast path and by the worker alike:

- a value with a finite decimal form (1/4, 7, 0.125) is only matched exactly: 0.24 or
  0.26 are not 1/4;
- a decimal matches a value with no finite decimal form only when it is that value
  correctly rounded or truncated to the decimal's places (1/3: 0.33 or 0.333, never 0.34;
  2/3: 0.67 or 0.66), and has at least
  - ``MIN_SIG_DIGITS_RATIONAL`` = 2 significant digits for a rational value (0.33 for 1/3,
    0.083 for 1/12): the corpus expects 0.33 for 1/3 (a matrix entry, row 127), and a
    repeating decimal's first digits already single out a small-denominator fraction;
  - ``MIN_SIG_DIGITS_IRRATIONAL`` = 4 for any other value (sqrt(2), pi, e, log 3): 1.414
    and 3.142 (or 3.141) pass, 1.4, 1.41, 3.1 and 3.14 fail. The three-digit forms are the
    memorized constants (pi = 3.14, sqrt(2) = 1.41, e = 2.72) that a policy writes when it
    estimates instead of finding the exact value, so they must not earn the reward; a
    genuine numeric answer carries more digits (the corpus's irrational rows have 16).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from decimal import Decimal
from fractions import Fraction

MIN_SIG_DIGITS_RATIONAL = 2
MIN_SIG_DIGITS_IRRATIONAL = 4

_DEC_LITERAL = re.compile(r"^(-?)(\d*)\.(\d+)$")


def has_finite_decimal(x: Fraction) -> bool:
    """True for 1/4 or 7/20 (denominator 2^a 5^b), False for 1/3."""
    q = x.denominator
    for p in (2, 5):
        while q % p == 0:
            q //= p
    return q == 1


def decimal_matches(dec: str, value: Fraction, *, rational: bool) -> bool:
    """Is the literal ``dec`` ("0.333") the non-terminating ``value`` rounded or truncated?

    ``value`` is exact when ``rational``; otherwise it is an approximation accurate to
    many more places than ``dec`` has (the worker evaluates with 30 guard digits), which
    cannot sit on a rounding boundary: a value with no finite decimal form never has a
    tie, so "nearest" and "truncated" are well defined.
    """
    m = _DEC_LITERAL.match(dec.strip())
    if m is None:
        return False
    sign, whole, frac = m.groups()
    need = MIN_SIG_DIGITS_RATIONAL if rational else MIN_SIG_DIGITS_IRRATIONAL
    if len((whole + frac).lstrip("0")) < need:
        return False
    if rational and has_finite_decimal(value):
        return False
    if (value < 0) != (sign == "-"):
        return False
    scaled = abs(value) * 10 ** len(frac)
    written = int(whole + frac)
    return written in (math.floor(scaled), math.floor(scaled + Fraction(1, 2)))


_TEXT_CMD = re.compile(
    r"\\(?:text|textbf|textit|textrm|textnormal|textsf|mbox|mathrm|mathbf|mathit|rm|bf|"
    r"operatorname)\s*\{([^{}]*)\}"
)
_UNIT = (
    r"(?:units?|cm|mm|km|meters?|metres?|miles?|inch(?:es)?|feet|foot|ft|yards?|yd|"
    r"dollars?|cents?|degrees?|yuan|hours?|hrs?|minutes?|mins?|seconds?|secs?|days?|weeks?|"
    r"months?|years?|kg|grams?|mg|liters?|litres?|ml|sq|square|cubic|people|students|"
    r"apples|pages|books|cars|points|ways|times)"
)
# One-letter units only after a space: "5 m" is metres, "2s" is two s.
_SHORT_UNIT = r"(?:m|s|g|l|in)"
# Only at the end of an item: "2m+1" keeps its m, "35 cm, 4" loses the cm.
_UNIT_END = r"(?=\s*(?:$|[,;)\]]|\\}|and\b|or\b))"
_NUM_UNIT = re.compile(
    r"(?<=[\d}])(?:\s*" + _UNIT + r"|\s+" + _SHORT_UNIT + r")(?:\s*\^\s*\{?\d\}?)?" + _UNIT_END
)
# A word label in a text command after a value ends the item: "81\text{ teachers}", "4\pi\text{ units}",
# "\frac{68}{3}\text{ pounds}", "18\text{ ways.}" are 81, 68/3 and 18, whatever the
# noun (the unit list above cannot name every counted thing). Only text commands, whose
# argument is prose: "2\mathrm{e}" is a constant. A label with a connective is kept: "and"
# joins list items, and "5\text{ or six}" is a hedge, not 5 with a label.
_LABEL_LINKS = r"and|or|nor|not|but|plus|minus|times|than|to|is|are|equals?"
#: Words that make text in an answer a hedge or a bound, not a label: "15\text{ maybe
#: sixteen}" and "15\text{ at most}" do not commit to 15 (``math_answer.hedge``).
HEDGE_WORDS = (
    r"maybe|perhaps|possibly|probably|likely|unlikely|approx(?:imately)?|about|around|roughly|"
    r"nearly|almost|circa|ca|either|guess(?:ed)?|unsure|think|believe|estimated?|least|most|over|"
    r"under|between|up|ish|or\s+so|give\s+or\s+take"
)
#: Number words: in a label they are a second value ("15\text{ sixteen}").
NUMBER_WORDS = (
    r"zero|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|"
    r"fifteen|sixteen|seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|sixty|seventy|"
    r"eighty|ninety|hundred|thousand|million|billion|trillion|dozen|half|quarter"
)
#: Words that change the value they follow: "6\text{ squared}" is 36 and "0.3\text{ repeating}" is
#: 1/3, so such text is never a label to drop (``math_answer.operation_word`` refuses the answer).
OPERATION_WORDS = (
    r"squared|cubed|doubled|tripled|quadrupled|halved|twice|thrice|negated|negative|inverse|"
    r"inverted|reciprocal|factorial|repeating|recurring|score|gross|grand|mil|mils|bn|mn|"
    # "10 myriad" is 100000, "10 basis points" 0.1%, "10 in binary" 2, "10 log" no value at all
    r"myriads?|basis|bps?|permille|permil|binary|octal|hex(?:adecimal)?|base|logs?|"
    r"(?:hal(?:f|ves)|thirds?|quarters?|fourths?|fifths?|sixths?|sevenths?|eighths?|ninths?|"
    r"tenths?|twelfths?|hundredths?|thousandths?|millionths?|billionths?)"
)
# "9\text{ AM}" is a time of day (math_parse's clock), not 9 with a label.
_NOT_LABEL = (rf"{_LABEL_LINKS}|{HEDGE_WORDS}|{NUMBER_WORDS}|{OPERATION_WORDS}"
              r"|[AaPp]\.?\s?[Mm]\.?")
# A scale word after a number multiplies it: "15\text{ thousand}" is 15000, never 15.
# Lakh and crore are the Indian scale words (10^5, 10^7): "18\text{ lakh}" is 1800000, never 18.
_SCALES = {"hundred": 2, "thousand": 3, "lakh": 5, "crore": 7, "million": 6, "billion": 9,
           "trillion": 12}
# The scale word may open a label: "8\text{ thousand dollars}" is 8000 dollars, so the rest of the
# text stays behind as a label of its own (dropped as one, or refused as a hedge).
_SCALE = re.compile(
    r"(?<![\d.,])(\d+(?:\.\d+)?)\s*(?:\\(text|textnormal|textrm|mbox|mathrm)\s*\{\s*("
    + "|".join(_SCALES) + r")s?(?![A-Za-z])([^{}]*)\}|\s+(" + "|".join(_SCALES)
    + r")s?(?![A-Za-z]))",
    re.I,
)
# \mathrm too, for a word of three letters or more ("135\ \mathrm{square\ feet}"): shorter
# ones there are constants or units ("2\mathrm{e}", "\mathrm{cm}", handled above).
_TEXT_LABEL = re.compile(
    r"(?<=[\d}A-Za-z)\]])\s*(?:\\(?:text|textnormal|textrm|textbf|textit|mbox)\s*\{\s*"
    rf"(?![^{{}}]*\b(?:{_NOT_LABEL})\b)[A-Za-z]{{2,}}"
    r"|\\mathrm\s*\{\s*"
    rf"(?![^{{}}]*\b(?:{_NOT_LABEL})\b)[A-Za-z]{{3,}})"
    r"(?:[A-Za-z .'\-]|\\[ ,;])*\}(?:\s*\^\s*\{?\d\}?)?"
    + _UNIT_END
)
_TEXT_UNIT = re.compile(
    r"(?<=[\d}A-Za-z)\]])\s*\\(?:text|mbox|mathrm|textnormal|textbf|rm)\s*\{\s*(?:"
    + _UNIT + "|" + _SHORT_UNIT + r")\s*\}(?:\s*\^\s*\{?\d\}?)?"
)
# A word before a label: "\text{Evelyn}\text{ Navin}" and "Monday\text{ Tuesday}" are two
# names, not a name and its label (the second was dropped, and the first name was paid).
_WORD_BEFORE = re.compile(
    r"(?:\\(?:text|textnormal|textrm|textbf|textit|mbox|mathrm|rm|mathbf|mathit|emph)\s*"
    r"\{[^{}]*[A-Za-z][^{}]*\}|\{[^{}]*[A-Za-z]{2,}[^{}]*\}"
    r"|(?<![\\A-Za-z])[A-Za-z]{2,})[\s)\]]*$")  # "(\text{Evelyn})\text{ Navin}" too


def _label_dropped(m: re.Match[str]) -> str:
    """A unit or word label after a value is dropped; after a word it stays (a second word)."""
    return m.group(0) if _WORD_BEFORE.search(m.string, 0, m.start()) else ""


_PERCENT_WORD = re.compile(r"(?<=[\d}])\s*(?:\\?%|percent(?:age)?|pct)(?![A-Za-z])")
# (pattern, replacement): a template, or a function of the match
_SIMPLE_SUBS: list[tuple[re.Pattern[str], str | Callable[[re.Match[str]], str]]] = [
    (re.compile(r"\\(?:[dtc]frac|nicefrac|sfrac)(?![A-Za-z])"), r"\\frac"),
    (re.compile(r"\\(?:displaystyle|textstyle|scriptstyle|limits|nolimits)"), ""),
    (re.compile(r"\\m?(?:left|right|bigl|bigr|Bigl|Bigr|big|Big|bigg|Bigg)\s*\."), ""),
    (
        re.compile(
            r"\\m?(?:left|right|middle|bigl|bigr|Bigl|Bigr|biggl|biggr|big|Big|bigg|Bigg)(?![a-zA-Z])"
        ),
        "",
    ),
    (re.compile(r"\\q?quad(?:\s|(?=[^a-zA-Z]))?"), " "),
    (re.compile(r"\\q?quad"), " "),
    (re.compile(r"(?<!\\)\\[,;: ]|~"), " "),
    (re.compile(r"\s*\\!\s*"), ""),
    (re.compile(r"\\(?:langle|lbrack)"), "("),
    (re.compile(r"\\(?:rangle|rbrack)"), ")"),
    (re.compile(r"\\lbrace"), r"\\{"),
    (re.compile(r"\\rbrace"), r"\\}"),
    (re.compile(r">="), r"\\geq "),
    (re.compile(r"<="), r"\\leq "),
    (re.compile(r"!="), r"\\neq "),
    (re.compile(r"\\(?:geqslant|ge)(?![a-zA-Z])"), r"\\geq"),
    (re.compile(r"\\(?:leqslant|le)(?![a-zA-Z])"), r"\\leq"),
    (re.compile(r"\\(?:ne)(?![a-zA-Z])"), r"\\neq"),
    (re.compile(r"\\gt(?![a-zA-Z])"), ">"),
    (re.compile(r"\\lt(?![a-zA-Z])"), "<"),
    (re.compile(r"\\(?:dots|ldots|cdots|dotsc|dotsb)(?![a-zA-Z])|\.\.\.|…"), r" \\ldots "),
    (re.compile(r"\^\s*\{?\s*\\circ\s*\}?|°|\\circ(?![a-zA-Z])|\\degree"), ""),
    (re.compile(r"\\\$|(?<!\\)\$"), ""),
    (re.compile(r"\\sqrt\s*\(([^()]*)\)"), r"\\sqrt{\1}"),
    (re.compile(r"\s*(?<!\\)\{\s*,\s*\}\s*"), ","),
    (re.compile(r"\\(?:hline|cline\{[^}]*\})"), ""),
    (re.compile(r"\\tfrac|\\dfrac"), r"\\frac"),
    # The number sets keep one spelling, \mathbb{R}, that the parser reads as a set (sympy's
    # Reals): "\mathbb R", "\Bbb{R}", "\R" and the words "all real numbers" are that set too.
    (re.compile(r"\\(?:mathbb|Bbb)\s*(?:\{\s*([RZNQC])\s*\}|([RZNQC])(?![A-Za-z]))|\\([RZNQC])(?![A-Za-z])"),
     lambda m: r"\mathbb{" + (m.group(1) or m.group(2) or m.group(3)) + "}"),
    (re.compile(r"\\(?:mathbb(?!\{[RZNQC]\})|mathcal|mathscr|boldsymbol)\s*\{([^{}]*)\}"), r"\1"),
    # Emphasis is not content: \color{red}{18}, \textcolor{red}{18}, \underline{18} are 18.
    (re.compile(r"\\(?:text)?color\s*\{[A-Za-z!0-9]*\}"), ""),
    (re.compile(r"\\(?:underline|uline|emph)\s*\{([^{}]*)\}"), r"\1"),
    # An accent names a thing (\overline{AB}, \vec{v}); over digits it is not the number:
    # \overline{6} is not 6 and 0.\overline{6} is 2/3 (math_parse.exact_decimals).
    (re.compile(r"\\(?:vec|overline|bar|hat|widehat)\s*\{(?![\d\s.]*\})([^{}]*)\}"), r"\1"),
    (re.compile(r"×|\\times(?![a-zA-Z])"), r"\\cdot "),
    (re.compile(r"−|–"), "-"),
]
# The whole answer in words: "all real numbers" is \mathbb{R} (after \text{} is unwrapped).
_REAL_LINE_WORDS = re.compile(
    r"^\s*(?:the\s+)?(?:set\s+of\s+)?(?:all\s+)?real\s+numbers\s*$|^\s*all\s+reals\s*$", re.I)
# Not directly inside brackets: "(12,102)" is a pair, not 12102.
_THOUSANDS = re.compile(r"(?<![\d.,(\[{])([1-9]\d{0,2})((?:,\d{3})+)(?![\d,])(?!\s*[)\]])")
# A whole argument of \frac is one number, never a pair: "\frac{12}{5,525}".
_FRAC_THOUSANDS = re.compile(r"(?<=\\frac\{)[1-9]\d{0,2}(?:,\d{3})+(?=\})|(?<=\}\{)[1-9]\d{0,2}(?:,\d{3})+(?=\})")
# Brace-less arguments: "\frac \pi4", "\frac34".
_FRAC_SHORT = re.compile(r"\\frac\s*(\\[A-Za-z]+|[A-Za-z0-9])\s*(\\[A-Za-z]+|[A-Za-z0-9])")
# Groups of three with a space, in the whole part or after the point: "10 000", "3.141 592".
_SPACE_THOUSANDS = re.compile(r"^-?\d{1,3}(?:(?: \d{3})+(?:\.\d+)?|(?: \d{3})*\.(?:\d{3} )+\d{1,3})$")


_TEXT_NUMBER = re.compile(r"\\(?:text|textnormal|textrm|mbox|mathrm)\s*\{\s*(-?\d+(?:\.\d+)?)\s*\}")


def _text_number(m: re.Match[str]) -> str:
    """The number of "\text{23}"; braced where it is an argument ("\\sqrt\text{23}")."""
    before = m.string[:m.start()].rstrip()
    argument = re.search(r"\\[A-Za-z]+$|[\^_\]]$", before) is not None
    return "{" + m.group(1) + "}" if argument else m.group(1)


def _text_repl(m: re.Match[str]) -> str:
    inner = m.group(1).strip()
    low = inner.lower()
    if low in ("and", "or", ",", "&"):
        return f" {low} "
    return inner


def _scaled(m: re.Match[str]) -> str:
    number, command, word, rest, bare_word = m.groups()
    value = Decimal(number).scaleb(_SCALES[(word or bare_word).lower()])
    out = format(value.normalize(), "f")
    if rest and rest.strip():
        out += f"\\{command}{{{rest}}}"
    return out


# ---------------------------------------------------------------- unicode math

# Unicode math reads as its LaTeX twin: "2√5" is 2\sqrt{5}, "(5, ∞)" is (5, \infty), "½" is
# \frac{1}{2}. One character table, applied before anything else reads the answer, so the
# parser, the fast paths, the hedge and restatement rules all see the LaTeX spelling.
_UNICODE_SYMBOLS = {
    "·": r"\cdot ", "⋅": r"\cdot ", "∙": r"\cdot ", "•": r"\cdot ", "✕": r"\cdot ",
    "✖": r"\cdot ", "÷": r"\div ", "∗": "*", "−": "-", "–": "-", "—": "-", "‐": "-", "‑": "-",
    "﹣": "-", "－": "-", "＋": "+", "⁄": "/", "∕": "/", "∞": r"\infty ", "∪": r"\cup ",
    "∩": r"\cap ", "∈": r"\in ", "∅": r"\emptyset ", "≤": r"\leq ", "⩽": r"\leq ",
    "≥": r"\geq ", "⩾": r"\geq ", "≠": r"\neq ", "±": r"\pm ", "∓": r"\mp ", "π": r"\pi ",
    "θ": r"\theta ", "α": r"\alpha ", "β": r"\beta ", "γ": r"\gamma ", "δ": r"\delta ",
    "φ": r"\phi ", "λ": r"\lambda ", "μ": r"\mu ", "σ": r"\sigma ", "ω": r"\omega ",
    "⟨": "(", "⟩": ")", "〈": "(", "〉": ")", "\u00a0": " ", "\u2009": " ", "\u202f": " ",
    "\u2002": " ", "\u2003": " ", "\u200b": "", "（": "(", "）": ")", "［": "[", "］": "]",
    "，": ",", "．": ".", "ℝ": r"\mathbb{R}", "ℤ": r"\mathbb{Z}", "ℕ": r"\mathbb{N}",
    "ℚ": r"\mathbb{Q}", "ℂ": r"\mathbb{C}", "∣": r"\mid ",
}
_VULGAR = {"½": (1, 2), "⅓": (1, 3), "⅔": (2, 3), "¼": (1, 4), "¾": (3, 4), "⅕": (1, 5),
           "⅖": (2, 5), "⅗": (3, 5), "⅘": (4, 5), "⅙": (1, 6), "⅚": (5, 6), "⅐": (1, 7),
           "⅛": (1, 8), "⅜": (3, 8), "⅝": (5, 8), "⅞": (7, 8), "⅑": (1, 9), "⅒": (1, 10)}
_SUPERSCRIPTS = dict(zip("⁰¹²³⁴⁵⁶⁷⁸⁹⁺⁻⁽⁾ⁿⁱˣ", "0123456789+-()nix", strict=True))
_SUBSCRIPTS = dict(zip("₀₁₂₃₄₅₆₇₈₉₊₋₍₎", "0123456789+-()", strict=True))
_ROOTS = {"√": "", "∛": "[3]", "∜": "[4]"}
_UNICODE = re.compile("[" + "".join(_UNICODE_SYMBOLS) + "".join(_VULGAR) + "".join(_ROOTS)
                      + "".join(_SUPERSCRIPTS) + "".join(_SUBSCRIPTS) + "０-９" + "]")
_SUPER_RUN = re.compile("[" + "".join(_SUPERSCRIPTS) + "]+")
_SUB_RUN = re.compile("[" + "".join(_SUBSCRIPTS) + "]+")
# What a root sign takes: a bracketed group, a number, a letter or a command (\pi).
_ROOT_ARG = re.compile(r"\s*(?:(\d+(?:\.\d+)?)|(\\[A-Za-z]+)|([A-Za-z]))")


def _root_operand(s: str, i: int) -> tuple[str, int] | None:
    """The operand of a root sign whose operand starts at ``s[i]``, and where it ends."""
    j = i
    while j < len(s) and s[j] == " ":
        j += 1
    if j < len(s) and s[j] in "({[":
        close = {"(": ")", "{": "}", "[": "]"}[s[j]]
        depth = 0
        for k in range(j, len(s)):
            if s[k] == s[j]:
                depth += 1
            elif s[k] == close:
                depth -= 1
                if depth == 0:
                    return s[j + 1:k], k + 1
        return None
    m = _ROOT_ARG.match(s, i)
    return (m.group(0).strip(), m.end()) if m else None


def _unicode_to_latex(s: str) -> str:
    if not _UNICODE.search(s):
        return s
    s = _SUPER_RUN.sub(lambda m: "^{" + "".join(_SUPERSCRIPTS[c] for c in m.group(0)) + "}", s)
    s = _SUB_RUN.sub(lambda m: "_{" + "".join(_SUBSCRIPTS[c] for c in m.group(0)) + "}", s)
    out: list[str] = []
    for c in s:
        if c in _VULGAR:
            num, den = _VULGAR[c]
            out.append(rf"\frac{{{num}}}{{{den}}}")  # after a digit: a mixed number, 2½
        elif c in _UNICODE_SYMBOLS:
            out.append(_UNICODE_SYMBOLS[c])
        elif "０" <= c <= "９":
            out.append(chr(ord(c) - ord("０") + ord("0")))
        else:
            out.append(c)
    s = "".join(out)
    out = []
    i = 0
    while i < len(s):  # roots last: their operand may be a symbol just translated (√π)
        c = s[i]
        got = _root_operand(s, i + 1) if c in _ROOTS else None
        if got is None:
            out.append(c)  # a root of nothing is left for the parser to refuse
            i += 1
            continue
        out.append(rf"\sqrt{_ROOTS[c]}{{{got[0]}}}")
        i = got[1]
    return "".join(out)


# TeX's infix fraction: "{a \\over b}" is \\frac{a}{b}, the numerator and denominator being the
# rest of the brace group the command sits in (the whole answer when it sits in none).
_OVER = re.compile(r"\\over(?![A-Za-z])")
_ARGUMENT_BEFORE = re.compile(r"(?:[\^_}]|\\[A-Za-z]+)\s*$")
MAX_OVERS = 50


def _group_bounds(s: str, at: int) -> tuple[int, int]:
    """The brace group around ``s[at]``: the index of its ``{`` (-1 for none) and of its ``}``
    (``len(s)`` for none). Escaped braces (``\\{``) are set braces, not groups."""
    depth, i = 0, at - 1
    while i >= 0:
        c = s[i]
        if c in "{}" and not (i > 0 and s[i - 1] == "\\"):
            if c == "}":
                depth += 1
            elif depth == 0:
                break
            else:
                depth -= 1
        i -= 1
    open_at = i
    depth, j = 0, at
    while j < len(s):
        c = s[j]
        if c in "{}" and s[j - 1] != "\\":
            if c == "{":
                depth += 1
            elif depth == 0:
                break
            else:
                depth -= 1
        j += 1
    return open_at, j


def _ungrouped(part: str) -> str:
    """``{2}`` -> ``2``: a part that is one brace group ({2}\\over{4}) is what the group holds."""
    while part.startswith("{") and _group_bounds(part, 1) == (0, len(part) - 1):
        part = part[1:-1].strip()
    return part


def infix_fractions(s: str) -> str:
    """``s`` with every ``\\over`` written as ``\\frac``: ``{486 \\over 1250}`` is
    ``\\frac{486}{1250}``, one spelling for the simplest-form rule and the value alike (the parser
    read it as one evaluated number, hiding the unreduced fraction). Innermost first."""
    for _ in range(MAX_OVERS):
        m = _OVER.search(s)
        if m is None:
            return s
        open_at, close_at = _group_bounds(s, m.start())
        num, den = s[open_at + 1:m.start()].strip(), s[m.end():close_at].strip()
        frac = rf"\frac{{{_ungrouped(num)}}}{{{_ungrouped(den)}}}"
        if open_at >= 0 and _ARGUMENT_BEFORE.search(s, 0, open_at):
            frac = "{" + frac + "}"  # x^{1 \\over 2}: the group is an argument, keep it
        s = s[:max(open_at, 0)] + frac + s[close_at + 1:]
    return s


# Two statements in one answer, "x = 3 \\lor x = 5", "x=3 \\quad x=5", "x=3 \\mid x=5", "x=3 \\\\ y=5":
# a separator between an equation and the next "name =" is a list comma (else the chain reads as
# one, by its last part: 5). Against one gold value a list is several answers; against a list of
# solutions it is one. Not inside an environment, whose rows are its own.
_STATEMENT_SEP = re.compile(
    r"(?:\\(?:lor|vee|mid|vert|land|wedge|qquad|quad)(?![A-Za-z])|\\[;:,!> ]|~|\\\\|\||,|;)"
    r"(?=(?:\s|\\[,!> ]|~)*+[A-Za-z](?:_\{?\w+\}?)?(?:\s*[+-]\s*[A-Za-z](?:_\{?\w+\}?)?)*"
    r"\s*=(?!=))")


def _split_statements(s: str) -> str:
    """``x = 3 \\lor x = 5`` -> ``x = 3, x = 5``: a separator cuts where the text since the last
    cut holds an equation (linear: the lookahead runs only at a separator)."""
    out, last = [], 0
    for m in _STATEMENT_SEP.finditer(s):
        chunk = s[last:m.start()].rstrip()
        if "=" in chunk and not chunk.endswith(("=", "\\")):
            out.append(chunk + ", ")
            last = m.end()
    return "".join(out) + s[last:] if out else s


# Bold and style commands around a brace group, groups inside it allowed (\mathbf{\frac{3}{7}},
# \boldsymbol{\sqrt{17}}, \bm{...}, \ensuremath{504}): emphasis, not content.
_STYLE_GROUP = re.compile(
    r"\\(?:mathbf|boldsymbol|bm|pmb|mathbfit|displaystyle|textstyle|ensuremath)\s*\{")
# A colour around a group: \color{blue}{55^\circ}, \textcolor{red}{52^\circ}.
_COLOR_GROUP = re.compile(r"\\(?:text)?color\s*\{[A-Za-z!0-9]*\}\s*\{")
# Notations of one thing: "54^o" (a raised o for the degree sign), "(40)_9" and "{40}_9" (a
# numeral in base 9), "1 \colon 1" (a ratio), "\sqrt[3]2" (a root of one token).
_NOTATION_SUBS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"(?<=\d)\s*\^\s*(?:o|\\mathrm\s*\{\s*o\s*\}"
                r"|\{\s*(?:o|\\mathrm\s*\{\s*o\s*\})\s*\})(?![A-Za-z])(?!\s*\d)"), r"^\\circ"),
    # Spacing and a leading "Answer:" inside the box are layout ("\hspace{1mm}1275",
    # "\text{Answer: } \frac{16}{65}").
    (re.compile(r"\\[hv]space\*?\s*\{[^{}]*\}|\\(?:hfill|enspace|thinspace)(?![A-Za-z])"
                r"|\\(?:text|mbox|mathrm|mathbin|mathrel|mathord)\s*\{\s*\}"), r" \\quad "),
    (re.compile(r"^\s*\\text\s*\{\s*(?:final\s+)?answer\s*[:=]?\s*\}\s*[:=]?", re.I), ""),
    (re.compile(r"^\(\s*([0-9A-Za-z.]+)\s*\)\s*_|^\{\s*([0-9A-Za-z.]+)\s*\}\s*_"), r"\1\2_"),
    (re.compile(r"\\colon(?![A-Za-z])"), ":"),
    (re.compile(r"\\sqrt\s*\[([^\[\]]*)\]\s*(\d|[A-Za-z]|\\[A-Za-z]+)"), r"\\sqrt[\1]{\2}"),
]


def _closing_brace(s: str, start: int) -> int | None:
    """The index of the brace that closes the one at ``start``, or None."""
    depth = 0
    for i in range(start, len(s)):
        if s[i] == "{" and (i == 0 or s[i - 1] != "\\"):
            depth += 1
        elif s[i] == "}" and (i == 0 or s[i - 1] != "\\"):
            depth -= 1
            if depth == 0:
                return i
    return None


_TEXT_STYLE = re.compile(r"\\(?:textbf|textit|emph|underline)\s*\{(?=\s*\\)")


def _wrapper(s: str, *wrappers: re.Pattern[str]) -> tuple[int, int, int] | None:
    """The first of ``wrappers`` found in ``s`` (each ends at its group's opening brace), as
    (its start, its content's start, the closing brace), or None: none found, or the one found
    never closed."""
    m = next((m for w in wrappers if (m := w.search(s)) is not None), None)
    end = _closing_brace(s, m.end() - 1) if m is not None else None
    return None if m is None or end is None else (m.start(), m.end(), end)


def without_style(s: str) -> str:
    """``s`` with style and colour wrappers replaced by their content, braces and all: what a
    unit check reads ("18\textcolor{red}{\text{ mm}}" ends with mm)."""
    for _ in range(8):
        found = _wrapper(s, _STYLE_GROUP, _COLOR_GROUP, _TEXT_STYLE)
        if found is None:
            return s
        start, content, end = found
        s = s[:start] + s[content:end] + s[end + 1:]
    return s


def unwrapped(s: str) -> str:
    r"""``s`` without style commands around nested groups, nor one brace group around all of
    it ("{20^\circ}", what "\color{red}{18}" leaves): one bold or braced answer reads as the
    answer (the honest forms' rewrites measured 1,318 bold and 265 braced answers refused)."""
    for _ in range(8):  # each pass takes one wrapper off; answers nest a few at most
        found = _wrapper(s, _STYLE_GROUP, _COLOR_GROUP)
        if found is not None:
            # Its braces stay: the group may be an argument, "\sqrt\bm{23}" is \sqrt{23}
            # (without them it read \sqrt23, the root of 2 times 3).
            start, content, end = found
            s = s[:start] + "{" + s[content:end] + "}" + s[end + 1:]
            continue
        t = s.strip()
        if t.startswith("{") and _closing_brace(t, 0) == len(t) - 1:
            s = t[1:-1]
            continue
        return s
    return s


def normalize_answer(s: str) -> str:
    """Canonical spelling of one extracted answer (idempotent)."""
    s = _unicode_to_latex(s.strip()).strip()
    s = unwrapped(s)
    for notation, spelling in _NOTATION_SUBS:
        s = notation.sub(spelling, s)
    if s.count("=") >= 2 and "\\begin" not in s:
        s = _split_statements(s)
    if "\\over" in s:
        s = infix_fractions(s)
    for pat, rep in _SIMPLE_SUBS:
        s = pat.sub(rep, s)
    s = unwrapped(s)  # what \color{red}{18} left
    # A number in a text command is the number: \text{1}\text{ lakh} is 100000, as 1\text{ lakh} is
    # (else the scale word is dropped as a label after \text{1}).
    s = _TEXT_NUMBER.sub(_text_number, s)
    s = _SCALE.sub(_scaled, s)
    s = _PERCENT_WORD.sub(r"\\%", s)
    s = re.sub(r"(?<!\\)%", r"\\%", s)
    # Units after a number go before \text{} is unwrapped ("15\mbox{ cm}^2").
    s = _TEXT_UNIT.sub(_label_dropped, s)
    s = _TEXT_LABEL.sub(_label_dropped, s)
    prev = None
    while prev != s:
        prev = s
        s = _TEXT_CMD.sub(_text_repl, s)
    s = _NUM_UNIT.sub("", s)
    s = _REAL_LINE_WORDS.sub(r"\\mathbb{R}", s)
    s = _THOUSANDS.sub(lambda m: m.group(1) + m.group(2).replace(",", ""), s)
    s = _FRAC_THOUSANDS.sub(lambda m: m.group(0).replace(",", ""), s)
    s = _FRAC_SHORT.sub(r"\\frac{\1}{\2}", s)
    s = re.sub(r"\s+", " ", s).strip()
    if _SPACE_THOUSANDS.match(s):
        s = s.replace(" ", "")
    s = re.sub(r"^(?:[\s,;:]|\.(?!\d|\\(?:overline|bar)\b))+|[\s.,;:]+$", "", s)
    s = re.sub(r"^\\[\[(]|\\[\])]$", "", s).strip()
    return s


_TOWER = re.compile(r"\d\s*\^\s*\{?\s*\(?\s*\d+\s*\)?\s*\^|\^\s*\{[^{}]*\d\s*\^\s*\{?\s*\d")
_POW = re.compile(r"(\d+)\s*\^\s*\{?\s*(\d+)")
_FACT = re.compile(r"(\d+)\s*!")


def too_large(s: str) -> bool:
    """Cheap guard against numbers sympy would try to materialize (towers, 10^(10^6))."""
    if _TOWER.search(s):
        return True
    for m in _POW.finditer(s):
        base, exp = int(m.group(1)[-6:] or 0), int(m.group(2)[:12])
        if base > 1 and exp * len(str(base)) > 200_000:
            return True
    return any(len(m.group(1)) > 5 or int(m.group(1)) > 20000 for m in _FACT.finditer(s))


# ---------------------------------------------------------------- units

# One name per unit: "18\text{ cm}" and "18 centimeters" agree, "18\text{ mm}" does not.
_UNIT_NAMES = {
    "mm": ("millimeter", "millimeters", "millimetre", "millimetres"),
    "cm": ("centimeter", "centimeters", "centimetre", "centimetres"),
    "m": ("meter", "meters", "metre", "metres"),
    "km": ("kilometer", "kilometers", "kilometre", "kilometres"),
    "in": ("inch", "inches"),
    "ft": ("foot", "feet"),
    "yd": ("yard", "yards"),
    "mi": ("mile", "miles"),
    "mg": ("milligram", "milligrams"),
    "g": ("gram", "grams"),
    "kg": ("kilogram", "kilograms", "kilo", "kilos"),
    "ml": ("milliliter", "milliliters", "millilitre", "millilitres", "mL"),
    "l": ("liter", "liters", "litre", "litres", "L"),
    "s": ("sec", "secs", "second", "seconds"),
    "min": ("mins", "minute", "minutes"),
    "h": ("hr", "hrs", "hour", "hours"),
    "day": ("days",),
    "week": ("weeks",),
    "month": ("months",),
    "year": ("years", "yr", "yrs"),
    "dollar": ("dollars",),
    "cent": ("cents",),
}
_UNIT_ALIASES = {alias.lower(): unit for unit, aliases in _UNIT_NAMES.items()
                 for alias in (unit, *aliases)}
_POWER_WORDS = {"square": 2, "sq": 2, "cubic": 3, "cu": 3}
_TRAILING_UNIT = re.compile(
    r"(?<=[\d}).])(?:\s*\\(?:text|mbox|mathrm|textnormal|textrm|rm)\s*\{\s*([A-Za-z][A-Za-z .]*?)"
    r"\s*\}|\s+([A-Za-z][A-Za-z .]*?))\s*(?:\^\s*\{?\s*([23])\s*\}?)?\s*$")


def unit_of(answer: str) -> tuple[str, int] | None:
    """The unit an answer ends with, as (name, power): ``18\\text{ cm}^2`` is ("cm", 2), "18
    square feet" ("ft", 2). ``None`` when it ends with no unit this table knows (a counted noun
    such as "apples" is a label, not a unit)."""
    answer = re.sub(r"\\[,;:! ]|~", " ", answer)  # "18\,\mathrm{mm}" ends with mm too
    m = _TRAILING_UNIT.search(answer[-80:])
    if m is None:
        return None
    words = (m.group(1) or m.group(2)).replace(".", " ").split()
    power = int(m.group(3) or 1)
    if len(words) == 2 and words[0].lower() in _POWER_WORDS:
        power, words = _POWER_WORDS[words[0].lower()], words[1:]
    if len(words) != 1:
        return None
    unit = _UNIT_ALIASES.get(words[0].lower()) or _UNIT_ALIASES.get(words[0])
    return (unit, power) if unit is not None else None
