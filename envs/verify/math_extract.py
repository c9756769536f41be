"""Pull the final answer out of a model completion (or a gold solution).

Pure regex/string code: it runs in the caller's process, so it must stay cheap and
must never be super-linear in the input length.

Priority, applied to the text after the last ``</think>``:

1. whichever comes last of: the last group of ``\\boxed{}``/``\\fbox{}`` boxes, or the
   last answer marker ("final answer is", "the answer is", "Answer:", ``**Answer:**``,
   GSM8K's ``#### N``);
2. otherwise the last ``$..$``/``\\(..\\)``/``\\[..\\]``/``$$..$$`` segment, unless a
   number follows it in the prose;
3. otherwise the whole text when it is a bare answer ("7,425,000", "x=5", "Evelyn"),
   else the last number in the text: never the mantissa of a scientific literal (the 1 of
   ``1e0``) nor a number inside a ``{`` that is never closed; a number it is offered as an
   alternative to ("5% or 6", "either 5 or 6") competes with it, and an alternative in words
   after it ("6 or six") stays in the answer, so both are hedges.

Boxes (or math segments) separated only by punctuation or a conjunction ("and", "or",
",") form one *group*: a multi-part answer such as ``\\boxed{1} and \\boxed{2}``. A number
right before the answer that it is offered as an alternative to ("5 or \\boxed{6}", "5 or $6$")
is a competing group.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

from envs.verify.math_normalize import NUMBER_WORDS
from tasks.boxes import BOX_COMMAND, find_boxes
from tasks.boxes import malformed as boxes_malformed

# Completions longer than this are only scanned at their end for answer markers, math segments
# and numbers: final answers live there, and it bounds the regex work on hostile 1 MB inputs.
# The box rules (an unclosed or nested box, competing boxes) hold on the whole completion: the
# box finder is linear and visits only box commands and braces.
MAX_SCAN_CHARS = 40_000
MAX_ANSWER_CHARS = 2_000
#: Longer completions are not graded at all (``math.verify``: ``unparseable``): no model answer
#: is this long, and it bounds the linear box scan.
MAX_COMPLETION_CHARS = 2_000_000

_SPECIAL_TOKENS = re.compile(r"<\|(?:im_end|im_start|endoftext|eot_id|end)\|>.*", re.S)

# JSON/Python escaping accidents: "\frac" written in a non-raw string becomes "\x0c" + "rac".
_CTRL_FIXES = {"\x0c": "\\f", "\x08": "\\b", "\x07": "\\a", "\x0b": "\\v"}
_TAB_CMD = re.compile(r"\t(?=(?:ext|imes|frac|heta|au\b|an\b|riangle))")
_CR_CMD = re.compile(r"\r(?=(?:ight|ho\b|m\b|angle))")
_CTRL = re.compile(r"[\x00-\x06\x0e-\x1f\x7f]")
# "\\frac" (a doubly escaped command) -> "\frac"; three backslashes are a row break
# followed by a command and are left alone.
_DOUBLE_ESCAPE = re.compile(r"(?<!\\)\\\\(?=[a-zA-Z]{2,})")
_LITERAL_NEWLINE = re.compile(r"(?<!\\)\\n(?![a-zA-Z])")


def clean_text(text: str, *, whole: bool = False) -> str:
    """Repair common escaping damage and drop control characters (NUL included). Only the last
    ``MAX_SCAN_CHARS`` are kept unless ``whole``."""
    if len(text) > MAX_SCAN_CHARS and not whole:
        text = text[-MAX_SCAN_CHARS:]
    for bad, good in _CTRL_FIXES.items():
        if bad in text:
            text = text.replace(bad, good)
    if "\t" in text:
        text = _TAB_CMD.sub(r"\\t", text)
    if "\r" in text:
        text = _CR_CMD.sub(r"\\r", text).replace("\r", "\n")
    text = _CTRL.sub("", text)
    if "\\\\" in text:
        text = _DOUBLE_ESCAPE.sub(r"\\", text)
        text = _LITERAL_NEWLINE.sub("\n", text)
    return text


@dataclass(frozen=True)
class Extraction:
    """``groups[-1]`` is the answer; earlier groups are other, competing final answers.

    Each group is a tuple of answer strings (several for ``\\boxed{1}, \\boxed{2}``).
    ``source`` says which rule fired: boxed, marker, math, bare or number.
    """

    groups: tuple[tuple[str, ...], ...]
    source: str
    #: A box inside a box (``\\boxed{2 + \\boxed{6}}``) or an unclosed ``\\boxed{18`` anywhere in a
    #: completion. Malformed: never unwrapped or read around.
    malformed_box: bool = False
    #: More different final answers than ``MAX_GROUPS`` (only the last are kept in ``groups``).
    too_many: bool = False

    @property
    def answer(self) -> tuple[str, ...]:
        return self.groups[-1]

    def display(self) -> str:
        return " ; ".join(", ".join(g) for g in self.groups)


# ---------------------------------------------------------------- boxes


MAX_GROUPS = 32


def _find_boxes(text: str, lenient: bool) -> list[tuple[int, int, str]]:
    """Top-level boxes as (start, end, content); a nested box keeps its inner box in its
    content, where ``Extraction.malformed_box`` catches it."""
    return [(b.start, b.end, b.content) for b in find_boxes(text, lenient=lenient)]


# Gap between two boxes/segments that still makes them one multi-part answer: nothing
# but punctuation/spacing, or a short phrase with a conjunction ("papers and").
_GAP_LATEX = re.compile(r"\\(?:quad|qquad|text|mathrm|textbf|mbox|[,;:! ]|\[|\]|\(|\))|[${}]")
_CONJ = re.compile(r"(?:^|[^a-z])(?:and|or)(?:[^a-z]|$)|[,;&]")


_STATEMENT = re.compile(r"\b(?:is|are|was|were|equals?|gives?)\b")


def _joinable_gap(gap: str) -> bool:
    if len(gap) > 200:
        return False
    gap = _GAP_LATEX.sub(" ", gap).strip().lower()
    if not re.search(r"[a-z]", gap):
        return len(gap) <= 20
    if _STATEMENT.search(gap):
        return False  # "$5$ and the remainder is $3$": a new statement, not a list
    return len(gap.split()) <= 6 and bool(_CONJ.search(gap))


def _group(spans: list[tuple[int, int, str]], text: str) -> list[list[tuple[int, int, str]]]:
    groups: list[list[tuple[int, int, str]]] = []
    for span in spans:
        if groups and _joinable_gap(text[groups[-1][-1][1] : span[0]]):
            groups[-1].append(span)
        else:
            groups.append([span])
    return groups


# ---------------------------------------------------------------- math segments


_NUMBER = re.compile(
    r"(?<![\w.])-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:[.,]\d+)?(?:\s*/\s*\d+)?(?:\s*(?:\\?%|percent))?"
    r"|(?<![\w.])-?\.\d+"
)


_OPENER = re.compile(r"\$\$|(?<!\\)\$|\\\[|\\\(")
_CLOSER_OF = {"$$": "$$", "\\[": "\\]", "\\(": "\\)"}


def _math_spans(text: str, strict: bool) -> list[tuple[int, int, str]]:
    """``$$..$$``, ``\\[..\\]``, ``\\(..\\)``, ``$..$`` spans, in one left-to-right pass.

    ``strict`` (valid math) forbids inline math across a newline; the lax form marks
    everything meant as math. Closers are looked up with bisect, so unclosed openers
    cost O(log n) each instead of a scan to the end of the text.
    """
    closers = {
        tok: [m.start() for m in re.finditer(re.escape(c), text)] for tok, c in _CLOSER_OF.items()
    }
    dollars = [m.start() for m in re.finditer(r"(?<!\\)\$", text)]
    out: list[tuple[int, int, str]] = []
    i = 0
    while True:
        m = _OPENER.search(text, i)
        if m is None:
            break
        tok, body = m.group(0), m.end()
        if tok == "$":
            k = bisect.bisect_left(dollars, body)
            close = dollars[k] if k < len(dollars) else -1
            clen = 1
        else:
            lst = closers[tok]
            k = bisect.bisect_left(lst, body)
            close = lst[k] if k < len(lst) else -1
            clen = 2
        if close < 0 or (strict and tok in ("$", "\\(") and "\n" in text[body:close]):
            i = body
            continue
        out.append((m.start(), close + clen, text[body:close]))
        i = close + clen
    return out


def _segments(text: str) -> list[tuple[int, int, str]]:
    return [s for s in _math_spans(text, strict=True) if s[2].strip()]


# A number directly followed by an exponent is the mantissa of a scientific literal (1e0, 2.5E3):
# read alone it is another value.
_EXPONENT_AFTER = re.compile(r"[eE][+-]?\d")
# Between two numbers, a word that offers the second as an alternative to the first ("5% or 6",
# "either 5 or 6", "5, or maybe 6", "5 red or 6 blue"): at most two words on either side of it.
_ALTERNATIVE_GAP = re.compile(
    r"^[^\w\n]*(?:[A-Za-z]+[^\w\n]+){0,2}?(?:or|ou|oder|otherwise|alternatively|else|unless|maybe|"
    r"perhaps|possibly|probably)(?![A-Za-z])"
    r"[^\w\n]*(?:[A-Za-z]+[^\w\n]+){0,2}?$", re.I)
# A gap that states something ("5 or fewer, so 6", "5 or 6 is wrong; x = 6") is no alternative.
_STATING = re.compile(r"(?<![A-Za-z])(?:so|then|thus|therefore|hence|is|are|was|were|gives?|"
                      r"equals?|makes?|total|not)(?![A-Za-z])|=", re.I)
_SENTENCE_BREAK = re.compile(r"[.!?;](?:\s|$)|\n")
MAX_ALTERNATIVE_GAP = 60


def _offers_alternative(gap: str) -> bool:
    """Whether ``gap``, the text between two numbers, offers the second as an alternative."""
    return (len(gap) <= MAX_ALTERNATIVE_GAP and not _SENTENCE_BREAK.search(gap)
            and not _STATING.search(gap) and bool(_ALTERNATIVE_GAP.match(gap)))


def _competing_before(text: str, pos: int) -> tuple[str, ...]:
    """The number that the answer starting at ``pos`` (a box, a math segment) is offered as an
    alternative to ("5 or \\boxed{6}", "either 5 or $6$"), as a competing group; or ``()``."""
    window = text[max(0, pos - 2 * MAX_ALTERNATIVE_GAP) : pos]
    last = None
    for m in _NUMBER.finditer(window):
        if not _EXPONENT_AFTER.match(window, m.end()):
            last = m
    if last is None or not _offers_alternative(window[last.end() :]):
        return ()
    return (last.group(0),)
# After the last number, an alternative in words ("6 or six", "6, maybe seven", "6 or so"): kept
# with the number so the hedge rule (``math_answer.hedge``) judges the answer as written.
_ALTERNATIVE_AFTER = re.compile(
    rf"[\s,;]*(?:(?:or|maybe|perhaps|possibly|probably)\s+(?:maybe\s+|perhaps\s+)?"
    rf"(?:{NUMBER_WORDS})|or\s+so)(?![A-Za-z])", re.I)
_BRACE_OR_ESCAPE = re.compile(r"\\.|[{}]", re.S)


# After the final answer, on the rest of its line and the next two lines that hold text, a value
# offered as another answer competes with it, as "5 or \\boxed{6}" does before it: a sentence with
# a word that hedges or takes the answer back ("Or maybe 19.", "Actually, 19.", "19 is also
# possible.", "(or 19)"), a sentence of no prose at all ("19", "$19$", "O r 19"), or a range or
# pair right after the box ("\\boxed{18}/19", "\\boxed{18}-19", "\\boxed{18} to 19"). The sentence's
# last value is a competing group the worker compares with the gold: the same value restated
# ("Or, to check: 9 + 9 = 18", "Or, equivalently, 18") stands; prose that hedges nothing ("That
# is 3 apples per box across 6 boxes.") offers nothing.
# A word that hedges or takes the answer back, anywhere in the sentence; and one that only hedges
# where it opens the sentence ("About 19.", not "That is about 20% more than last year").
_AFTER_HEDGE = re.compile(
    r"(?<![A-Za-z\\])(?:or|maybe|perhaps|possibly|probably|alternatively|otherwise|either|"
    r"actually|wait|hmm+|although|though|unless|if\s+not|instead|correction|oops|sorry|unsure|"
    r"not\s+sure|also\s+possible|(?:could|might|may)\s+(?:also\s+)?be)(?![A-Za-z])", re.I)
_AFTER_OPENING_HEDGE = re.compile(
    r"^[^A-Za-z0-9]*(?:[A-Za-z']+[^A-Za-z0-9\n]+){0,2}?(?:about|around|roughly|nearly|almost|"
    r"approx(?:imately)?|likely|rather|else|also)(?![A-Za-z])", re.I)
# Not a value offered: a modulus after the answer ("\\boxed{9} \\pmod{11}").
_MODULUS = re.compile(r"\\pmod\s*\{[^{}]*\}|\\(?:bmod|mod)\s*\{?\s*\d+\}?|\(\s*mod\s*\d+\s*\)", re.I)
_NUMBER_WORD = re.compile(rf"(?<![A-Za-z])(?:{NUMBER_WORDS})(?![A-Za-z])", re.I)
_PROSE = re.compile(r"(?<![\\A-Za-z])[A-Za-z]{3,}")
_RANGE_AFTER = re.compile(r"^\s*(?:\$\s*)?(?:[-/~\u2013\u2014]|\\(?:text|mathrm)\s*\{\s*(?:to|vs\.?|versus)\s*\}|"
                          r"(?:to|vs\.?|versus)(?![A-Za-z]))", re.I)
_HEDGE_OPENING = re.compile(
    r"^[^A-Za-z0-9]*(?:\\[A-Za-z]+\s*\{?[^A-Za-z0-9]*)*(?:or|maybe|perhaps|possibly|probably|"
    r"alternatively|otherwise|approx(?:imately)?|about|around|roughly|nearly)(?![A-Za-z])", re.I)
_AFTER_SENTENCE = re.compile(r"(?<!\d)[.!?;](?!\d)")
MAX_AFTER_CHARS = 400
AFTER_LINES = 2


def competing_after(text: str, end: int) -> tuple[str, ...]:
    """The value offered as another answer right after the final answer that ends at ``end``,
    as a competing group, or ``()``."""
    rest = text[end : end + MAX_AFTER_CHARS]
    lines = rest.split("\n")
    spans = [lines[0]] + [ln for ln in lines[1:] if ln.strip()][:AFTER_LINES]
    if _RANGE_AFTER.match(lines[0]):
        value = _last_value(lines[0])
        if value is not None:
            return (value,)
    for k, span in enumerate(spans):
        for j, sentence in enumerate(_sentences(_MODULUS.sub(" ", span))):
            words = _TEXT_WRAPPER.sub(" ", sentence)
            if k == 0 and j == 0 and not _HEDGE_OPENING.match(sentence):
                continue  # the rest of the answer's own sentence: "\\boxed{6} outcomes of 36"
            hedged = (_AFTER_HEDGE.search(words) or _AFTER_OPENING_HEDGE.match(words)) is not None
            if hedged or not _PROSE.search(words):
                value = _last_value(sentence)
                if value is None and hedged:  # "Maybe nineteen.": a number in words offered
                    word = list(_NUMBER_WORD.finditer(words))
                    value = word[-1].group(0) if word else None
                if value is not None:
                    return (value,)
    return ()


_TEXT_WRAPPER = re.compile(r"\\(?:text|mathrm|mbox|textbf|textit|emph)\s*\{|\\[A-Za-z]+")


def _last_value(sentence: str) -> str | None:
    """The sentence's last value: its last math segment or number, whichever ends later."""
    segs = [seg for seg in _segments(sentence) if re.search(r"\d", seg[2])]  # not "$B$"
    nums = [m for m in _NUMBER.finditer(sentence)]
    seg_end = segs[-1][1] if segs else -1
    if nums and nums[-1].end() > seg_end:
        return nums[-1].group(0).strip()
    if segs and segs[-1][2].strip():
        return segs[-1][2].strip()
    return None


def _sentences(span: str) -> list[str]:
    out, start = [], 0
    for m in _AFTER_SENTENCE.finditer(span):
        out.append(span[start : m.start()])
        start = m.end()
    out.append(span[start:])
    return [x for x in out if x.strip()]


def _unclosed_brace_before(text: str, pos: int) -> bool:
    """Whether a ``{`` before ``pos`` is never closed: what follows it is inside a group that
    never ends, not an answer."""
    depth_opens: list[int] = []
    for m in _BRACE_OR_ESCAPE.finditer(text):
        c = m.group(0)
        if c == "{":
            depth_opens.append(m.start())
        elif c == "}" and depth_opens:
            depth_opens.pop()
    return bool(depth_opens) and depth_opens[0] < pos


_FORMULA = re.compile(r"\\(?:[dtc]?frac|sqrt|binom|dbinom|tbinom)\s*(?:\[[^\[\]]*\]\s*)?"
                      r"(?:\{[^{}]*\}\s*){1,2}")
_ENVIRONMENT = re.compile(
    r"\\begin\s*\{((?:[pbBvV]?|small)matrix|array)\}.*?\\end\s*\{\1\}", re.S)


def _last_number(text: str, start: int = 0) -> tuple[int, tuple[str, ...], tuple[str, ...]] | None:
    """The last number of ``text`` (math segments blanked) as (start, answer, competing): the
    answer keeps an alternative in words that follows it ("6 or six"), and ``competing`` holds
    the number it is offered as an alternative to ("5% or 6"). ``None`` when there is no number,
    or the last one sits inside a brace that is never closed."""
    chars = list(text)
    for a, b, _ in _math_spans(text, strict=False):
        chars[a:b] = " " * (b - a)
    # Nor is a number inside a matrix, or an argument of a fraction or root, the completion's
    # number: the reward search had "<-5>\det\begin{pmatrix}5\end{pmatrix}" paid 5 and
    # "piece{\frac{8}{2}}" paid 2.
    for m in (*_ENVIRONMENT.finditer(text), *_FORMULA.finditer(text)):
        chars[m.start():m.end()] = " " * (m.end() - m.start())
    blanked = "".join(chars)
    last = prev = None
    for m in _NUMBER.finditer(blanked, start):
        if _EXPONENT_AFTER.match(blanked, m.end()):
            continue
        prev, last = last, m
    if last is None or _unclosed_brace_before(blanked, last.start()):
        return None
    competing: tuple[str, ...] = ()
    if prev is not None:
        gap = blanked[prev.end() : last.start()]
        if _offers_alternative(gap):
            competing = (prev.group(0),)
    after = _ALTERNATIVE_AFTER.match(blanked, last.end())
    answer = text[last.start() : after.end()] if after else last.group(0)
    return last.start(), (answer,), competing


# ---------------------------------------------------------------- bare answers

_UNIT_WORDS = (
    "and|or|percent|pct|percentage|units?|cm|mm|km|meters?|metres?|miles?|inch(?:es)?|feet|"
    "foot|ft|yards?|dollars?|cents?|degrees?|yuan|hours?|minutes?|seconds?|days?|years?|"
    "kg|grams?|liters?|litres?|sq|square|cubic"
)
_PROSE_WORD = re.compile(rf"(?<![\\A-Za-z0-9])(?!(?:{_UNIT_WORDS})\b)[A-Za-z]{{3,}}\b", re.I)
_WORDS_ONLY = re.compile(r"^[A-Za-z][A-Za-z '\-]{0,40}$")
# Letters that belong to LaTeX syntax, not to prose: matrix environment names ("pmatrix"
# in \begin{pmatrix}, an array's column spec {ccc}) and short \text{} labels
# ("81\text{ teachers}", "\text{June 20}"). Left visible, they would make a bare LaTeX answer
# look like a sentence, so the answer would fall back to its last number (a gold matrix
# graded as its bottom-right entry).
# Only environments whose body is a value: an align* derivation is still working, not an
# answer, and keeps falling back to its last number.
_VALUE_ENV = r"\{(?:[pbBvV]?matrix|smallmatrix|array)\*?\}"
_ENV_NAME = re.compile(rf"\\begin\s*{_VALUE_ENV}(?:\s*\{{[lcr|\s]*\}})?|\\end\s*{_VALUE_ENV}")
_TEXT_ARG = re.compile(r"\\(?:text\w*|mathrm|mbox)\s*\{([^{}]*)\}")
_VALUE_BEGIN = re.compile(rf"\\begin\s*{_VALUE_ENV}")
_VALUE_END = re.compile(rf"\\end\s*{_VALUE_ENV}")
MAX_LABEL_WORDS = 4


def _blank_latex_words(s: str) -> str:
    """``s`` with environment names and short ``\\text{}`` labels blanked (same length)."""
    s = _ENV_NAME.sub(lambda m: " " * len(m.group(0)), s)
    return _TEXT_ARG.sub(
        lambda m: (
            " " * len(m.group(0)) if len(m.group(1).split()) <= MAX_LABEL_WORDS else m.group(0)
        ),
        s,
    )


def _prose_word(s: str) -> re.Match[str] | None:
    """The first word of prose in ``s``, ignoring the LaTeX syntax above."""
    return _PROSE_WORD.search(_blank_latex_words(s))


def _looks_bare(s: str) -> bool:
    if not s or len(s) > 300:
        return False
    words = _TEXT_ARG.sub(r"\1", s).strip()
    if _WORDS_ONLY.match(words) and len(words.split()) <= 4:
        return True
    return _prose_word(s) is None


def _strip_stray_dollars(s: str) -> str:
    if len(re.findall(r"(?<!\\)\$", s)) % 2 == 1:
        s = re.sub(r"(?<!\\)\$", " ", s)
    return s.strip()


# LaTeX spacing at either end of an answer (18\, or \;10 or 10\quad) is space, never punctuation,
# so the comma of \, is not trimmed off to leave 18\ behind.
_EDGE_SPACING = re.compile(r"^(?:\\[,;:! >]|\\q?quad(?![A-Za-z])|~|\s)+|(?:\\[,;:! >]|\\q?quad(?![A-Za-z])|~|\s)+$")


def _trim(s: str) -> str:
    s = _EDGE_SPACING.sub("", s)
    s = re.sub(r"^(?:\*\*|__|\\?[\"'`])+|(?:\*\*|__|\\?[\"'`])+$", "", s).strip()
    s = re.sub(r"(?:(?<!\\)[\s.,;:?]|(?<![\d\\])!)+$", "", s)  # "5!" keeps its factorial
    return _EDGE_SPACING.sub("", s)


# ---------------------------------------------------------------- markers

_MARKER = re.compile(
    r"(?:final\s+answer|the\s+answer|answer)\s*(?:is|:|=)\s*(?::\s*)?"
    r"|\*\*\s*(?:final\s+)?answer\s*:?\s*\*\*\s*:?"
    r"|^\s*####\s*",
    re.I | re.M,
)
# "**Final Answer**\n\\boxed{840}": the heading form, with the answer on the next line.
_MARKER_HEADING = re.compile(r"\*\*\s*final\s+answer\s*\*\*\s*:?", re.I)
_TAIL_STOP = re.compile(r"\bI hope\b|\n\s*\n", re.I)


def _sentence(tail: str) -> str:
    """The first sentence of ``tail``, not cutting inside math, a matrix (often written
    over several lines) or a decimal point."""
    m = _TAIL_STOP.search(tail)
    if m:
        tail = tail[: m.start()]
    depth_dollar = False
    env = 0
    i = 0
    n = len(tail)
    while i < n:
        c = tail[i]
        if c == "\\":
            if _VALUE_BEGIN.match(tail, i):
                env += 1
            elif env and _VALUE_END.match(tail, i):
                env -= 1
            i += 2
            continue
        if c == "$":
            depth_dollar = not depth_dollar
        elif (
            not depth_dollar
            and not env
            and (
                c == "\n"
                and tail[:i].strip()
                or c in ".!?"
                and (i + 1 == n or tail[i + 1] in " \n")
            )
        ):
            return tail[:i]
        i += 1
    return tail


def _answer_from_span(span: str) -> tuple[tuple[tuple[str, ...], ...], str] | None:
    """Answer groups inside a span of prose + math (a marker tail or a whole completion): the
    last group is the answer, earlier ones compete with it (``Extraction.groups``)."""
    boxes = _find_boxes(span, lenient=False)
    if boxes:
        grp = _group(boxes, span)[-1]
        return _with_competing(span, grp), "boxed"
    segs = _segments(span)
    if segs:
        last_end = segs[-1][1]
        after = _last_number(span, last_end)
        if after is not None and span[last_end:].strip(" \t\n.,;:!?$\"'*") != "":
            if not after[2] and _offers_alternative(span[last_end : after[0]]):
                after = (after[0], after[1], (segs[-1][2],))  # "$5$ or 6"
            return _number_groups(after), "number"
        grp = _group(segs, span)[-1]
        return _with_competing(span, grp, segs), "math"
    bare = _trim(_strip_stray_dollars(span))
    if _looks_bare(bare):
        return ((bare,),), "bare"
    num = _last_number(span)
    if num is not None:
        return _number_groups(num), "number"
    return None


def _with_competing(text: str, grp: list[tuple[int, int, str]],
                    segs: list[tuple[int, int, str]] | None = None) -> tuple[tuple[str, ...], ...]:
    """The group of boxes/segments ``grp`` as the answer, after the number it is offered as an
    alternative to, if any, and (math segments) the segments offered as alternatives to it."""
    competing = _competing_before(text, grp[0][0])
    if segs is not None:
        competing = tuple(dict.fromkeys((*competing, *_hedged_segments(text, segs, grp))))
    return (*((c,) for c in competing), _answer_items(text, grp))


# Between two math segments of one sentence, a word that offers one as an alternative to the
# other, however far apart in the sentence ("$x = 3$ or, taking the other root, $x = 5$", "It is
# $3$ or it is $5$", "$3$ otherwise $5$", "$3$ ou $5$"): the other segment competes with the answer
# (the worker lets it stand when it has the gold's value: "$3$ or, equivalently, $\frac{6}{2}$").
_SEGMENT_ALTERNATIVE = re.compile(
    r"(?<![A-Za-z\\])(?:or|ou|oder|o|otherwise|alternatively|else|unless|maybe|perhaps|possibly|"
    r"probably|(?:could|might|may)\s+(?:also\s+)?be)(?![A-Za-z])", re.I)
# A gap that concludes or rejects ("$5$ or more is wrong, so $3$") offers nothing.
_SEGMENT_CONCLUDES = re.compile(
    r"(?<![A-Za-z])(?:so|then|thus|therefore|hence|not|wrong|incorrect|impossible|fails?|"
    r"rejected?|discard(?:ed)?|invalid|extraneous)(?![A-Za-z])|\\therefore", re.I)
MAX_SEGMENT_GAP = 120


def _hedged_segments(text: str, segs: list[tuple[int, int, str]],
                     grp: list[tuple[int, int, str]]) -> tuple[str, ...]:
    """The segments right before and right after the group ``grp`` that a word in the gap offers
    as alternatives to it (each holding a digit: "$n$ odd or even" offers no value)."""
    first, last = segs.index(grp[0]), segs.index(grp[-1])
    out = []
    for k, (a, b) in ((first - 1, (first - 1, first)), (last + 1, (last, last + 1))):
        if not 0 <= k < len(segs):
            continue
        gap = text[segs[a][1] : segs[b][0]]
        if (len(gap) <= MAX_SEGMENT_GAP and not _SENTENCE_BREAK.search(gap)
                and not _SEGMENT_CONCLUDES.search(gap) and _SEGMENT_ALTERNATIVE.search(gap)
                and re.search(r"\d", segs[k][2])):
            out.append(segs[k][2].strip())
    return tuple(out)


# Segments joined by an equals sign are one statement: "$x$ = $3$", "$x =$ $3$", "$x$ $= 3$".
_EQUALS_GAP = re.compile(r"^[\s$]*=?[\s$]*$")


def _answer_items(text: str, grp: list[tuple[int, int, str]]) -> tuple[str, ...]:
    items: list[str] = []
    prev_end = -1
    for start, end, content in grp:
        gap = text[prev_end:start] if items else ""
        if items and _EQUALS_GAP.match(gap) and (
                "=" in gap or items[-1].rstrip().endswith("=") or content.lstrip().startswith("=")):
            items[-1] = f"{items[-1].strip()} {'= ' if '=' in gap else ''}{content.strip()}"
        else:
            items.append(content)
        prev_end = end
    return tuple(items)


def _number_groups(num: tuple[int, tuple[str, ...], tuple[str, ...]]) -> tuple[tuple[str, ...], ...]:
    _, answer, competing = num
    return (*((c,) for c in competing), answer)


_CHOICE = re.compile(r"^\(([A-Ea-e])\)(?=[\s.,:;]|$)")
_LEAD_JUNK = re.compile(r"^(?:\\?[\"'`]|\*\*|__|\s)+")
_TRAILING_LINK = re.compile(r"(?:\b(?:and|or|is|are|was|so|but|which|with)\b|[\s,;.:(])+$", re.I)


def _answer_from_marker_tail(tail: str) -> tuple[tuple[tuple[str, ...], ...], str] | None:
    """What directly follows "the answer is" wins over numbers later in the sentence."""
    tail = _LEAD_JUNK.sub("", tail)
    choice = _CHOICE.match(tail)
    if choice:  # "The answer is (C) 42": the choice letter
        return ((choice.group(1),),), "marker"
    if not _find_boxes(tail, lenient=False):
        segs = _segments(tail)
        if segs and segs[0][0] == 0:
            grp = _group(segs, tail)[0]
            return _with_competing(tail, grp, segs), "math"
        prose = _prose_word(tail)
        num = _last_number(tail) if prose is not None and not segs else None
        if num is not None and (num[2] or not _NUMBER.fullmatch(num[1][0])):
            return _number_groups(num), "marker"  # "5 or maybe 6", "5, maybe six": hedged
        if prose is not None and prose.start() > 0 and not segs:
            head = _TRAILING_LINK.sub("", tail[: prose.start()]).strip()
            if head and re.search(r"\d", head):
                return ((head,),), "marker"
    return _answer_from_span(tail)


def extract(text: str, *, gold: bool = False) -> Extraction | None:
    """Extract the final answer of ``text``; ``None`` when there is none.

    ``gold=True`` is lenient (an unclosed ``\\boxed{`` runs to the end) and keeps only
    the last group: a gold solution is trusted, a completion's hedges are not.
    """
    # The whole completion for the box rules; its last MAX_SCAN_CHARS for the rest.
    text = clean_text(text, whole=True)
    text = _SPECIAL_TOKENS.sub("", text)
    if "</think>" in text:
        reply = text.rsplit("</think>", 1)[1]
        if reply.strip():
            text = reply
    if not text.strip():
        return None
    if not gold and boxes_malformed(text):
        return _malformed(text)

    boxes = _find_boxes(text, lenient=gold)
    if not gold and boxes and not boxes[-1][2].strip() and any(b[2].strip() for b in boxes):
        # The last box is empty: the completion ends on no answer (the instruction's
        # "\boxed{}" echoed after a box; the card's shuffled prompt words were paid the
        # example's \boxed{42} before it).
        return Extraction(((r"\boxed{}",),), "boxed", malformed_box=True)
    box_groups = _group(boxes, text) if boxes else []
    offset = max(0, len(text) - MAX_SCAN_CHARS)
    scan = text[offset:]
    marker_end = -1
    for m in _MARKER.finditer(scan):
        marker_end = m.end()
    for m in _MARKER_HEADING.finditer(scan):
        marker_end = max(marker_end, m.end())
    marker_end = marker_end + offset if marker_end >= 0 else -1

    # A marker inside the last box ("\boxed{\text{Answer: } 18}") is the box's own text.
    last_box_end = box_groups[-1][-1][1] if box_groups else -1
    if marker_end >= 0 and marker_end > last_box_end:
        tail = text[marker_end:].lstrip(" \t\n:*")
        tail = _sentence(tail) if not tail.lstrip().startswith(("\\boxed", "\\fbox")) else tail
        got = _answer_from_marker_tail(tail) if tail.strip() else None
        if got is not None and got[0][-1] and all(a.strip() for a in got[0][-1]):
            groups = got[0]
            if not gold:  # "The answer is 18.\nOr maybe 19."
                tail_at = text.find(tail, marker_end)
                after = competing_after(text, tail_at + len(tail)) if tail_at >= 0 else ()
                if after:
                    groups = (*groups[:-1], after, groups[-1])
            return _finish(groups, "marker")

    if box_groups:
        boxed = [tuple(c for _, _, c in g) for g in box_groups]
        if gold:
            boxed = boxed[-1:]
        else:  # "5 or \boxed{6}", "\boxed{6}\nor 7": the box is one of two answers
            boxed[-1:] = _with_competing(text, box_groups[-1])
            after = competing_after(text, box_groups[-1][-1][1])
            if after:
                boxed[-1:-1] = [after]
        return _finish(tuple(boxed), "boxed")

    got = _answer_from_span(scan)
    if got is None:
        return None
    return _finish(got[0], got[1])


def _malformed(text: str) -> Extraction:
    """An unclosed or nested box anywhere: no answer is read around it (a closed box beside an
    unclosed one is one of two hedged answers, not the answer)."""
    boxes = find_boxes(text, lenient=True)
    shown = _trim(boxes[-1].content if boxes else text[-200:])[:MAX_ANSWER_CHARS] or "\\boxed{"
    return Extraction(((shown,),), "boxed", malformed_box=True)


def _finish(groups: tuple[tuple[str, ...], ...], source: str) -> Extraction | None:
    cleaned = []
    for g in groups:
        # an answer over the limit is refused as too long: cut first, so trimming stays linear
        items = tuple(_trim(a[: 2 * MAX_ANSWER_CHARS])[: MAX_ANSWER_CHARS + 1] for a in g)
        items = tuple(a for a in items if a)
        if items:
            cleaned.append(items)
    if not cleaned:
        return None
    # Identical repeated answers ("\boxed{5} ... \boxed{5}") are one answer; keep the last.
    uniq: dict[tuple[str, ...], tuple[str, ...]] = {}
    for g in cleaned:
        key = tuple(re.sub(r"\s+", "", a) for a in g)
        uniq.pop(key, None)
        uniq[key] = g
    uniq_groups = list(uniq.values())
    too_many = len(uniq_groups) > MAX_GROUPS
    uniq_groups = uniq_groups[-MAX_GROUPS:]
    nested = any(BOX_COMMAND.search(a) for g in uniq_groups for a in g)
    return Extraction(tuple(uniq_groups), source, nested, too_many)
