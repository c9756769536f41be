"""Names in an answer's "name = value": the left sides that name the value rather than compute
it (``x``, ``a_3``, ``f(x)``, ``m + n``, ``\\cos A``, ``\\angle ABC``). Plain regular expressions,
so that the main process's hedge rule (``math_answer``) reads them without importing the parser
(``math_parse``, which brings sympy)."""

from __future__ import annotations

import re

_NAME_CHARS = re.compile(r"[A-Za-z{}()|:,/\s]+")


# A "name" that says the value is not the answer: "\text{not} = 3", "\text{no } x = 3".
# (Capitalised or not; "NO" in "\frac{NO}{BO}" names a segment.)
_NEGATING_NAME = re.compile(
    r"(?<![A-Za-z])(?:[Nn]ot|[Nn]o|[Nn]one|[Nn]either|[Nn]or|[Nn]ever|[Ww]rong|[Cc]annot|[Cc]an't"
    r"|[Ii]sn't|[Ff]alse|or)(?![A-Za-z])")


def name_like(lhs: str) -> bool:
    """True for the left side of an assignment: x, a_3, f(x), |AB|, (p,q), A:B."""
    t = lhs.strip()
    if not t or len(t) > 40 or _NEGATING_NAME.search(t):
        return False
    t = re.sub(r"_\{[^{}]*\}|_\w", "", t)
    t = re.sub(r"\\(?:frac|mathrm|text|operatorname)", "", t)
    t = re.sub(r"[A-Za-z]\w*\s*\([^()]*\)", "F", t)
    t = t.replace("'", "")
    return bool(_NAME_CHARS.fullmatch(t)) and bool(re.search(r"[A-Za-z]", t))


# A quantity named by letters with no number in it ("m + n", "A+B+C+D", "\cos A",
# "m\angle BAC", "[\triangle ACD]"): written "name = value", the value is the answer, as
# for "x = 18".
_NAMED = re.compile(r"[A-Za-z()\[\]|\s+\-']+")
_NAMING_CMDS = re.compile(
    r"\\(?:angle|measuredangle|triangle|overline|overarc|widehat|arc|sin|cos|tan|cot|sec|csc"
    r"|log|ln|det|mathrm|text|operatorname)(?![A-Za-z])")


def names_quantity(lhs: str) -> bool:
    r"""True for the left side of "name = value" whose name has no number: ``m + n``,
    ``\cos A``, ``\angle ABC``, ``[\triangle ACD]`` (``name_like``'s names too)."""
    if _NEGATING_NAME.search(lhs):
        return False
    t = re.sub(r"_\{[^{}]*\}|_\w", "", lhs.strip())
    t = _NAMING_CMDS.sub(" ", t).replace("{", " ").replace("}", " ")
    return (len(t) <= 40 and "\\" not in t and bool(_NAMED.fullmatch(t))
            and bool(re.search(r"[A-Za-z]", t)))
